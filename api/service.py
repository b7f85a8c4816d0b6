"""What the API's routes share: the query service they serve (:class:`QueryService`, which
:class:`ancre.query.core.QueryCore` satisfies), the readiness callable, the settings, metrics
and the authentication dependencies (:mod:`ancre.api.identity` does the checks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import Request, Security
from fastapi.security import APIKeyHeader, HTTPBearer

from ancre.api.errors import ApiError
from ancre.api.identity import Identity, Secrets, authenticate, check_api_key
from ancre.api.middleware import ApiMetrics
from ancre.config import Settings
from ancre.query.answer import Answer


class QueryService(Protocol):
    """What the API needs from the query core (:class:`~ancre.query.core.QueryCore`)."""

    def ask(
        self, question: str, user: str, *, asked_by: str | None = None, history: Sequence[str] | None = None
    ) -> Answer:
        """The grounded answer for ``user``; ``asked_by`` is audited as the identity received;
        ``history``: the conversation's earlier user questions (a follow-up is resolved from them).
        Raises ``DirectoryError``, ``StoreError``, ``EmbedderError``, ``LlmError``, ``AuditError``."""
        ...

    def stream(
        self, question: str, user: str, *, asked_by: str | None = None, history: Sequence[str] | None = None
    ) -> Iterator[str | Answer]:
        """:meth:`ask` streamed: raw text pieces, then the final :class:`Answer`. When it returns an
        :class:`~ancre.query.answer.AnswerStream`, the chat endpoint cancels it as soon as its
        client disconnects; any other iterator is closed then."""
        ...

    def points(self) -> Mapping[str, int]:
        """Points per collection (``/health``); raises ``StoreError``."""
        ...

    def probe_directory(self) -> None:
        """Read the directory once (``/health``); raises ``DirectoryError``."""
        ...


Readiness = Callable[[], "str | None"]
"""``None`` when the index may answer, else why not (answered 503 ``index_not_ready``)."""


@dataclass(frozen=True)
class ApiContext:
    """Everything a route needs: ``service`` answers, ``not_ready`` gates answers, ``settings``
    (``settings.api`` configures the API, ``settings.llm`` is probed by ``/health``),
    ``secrets`` (service key, signing/JWT secrets), ``metrics``, ``started`` (epoch seconds)."""

    service: QueryService
    not_ready: Readiness
    settings: Settings
    secrets: Secrets
    metrics: ApiMetrics
    started: int

    def require_ready(self) -> None:
        """Raises :class:`ApiError` 503 ``index_not_ready`` while the index is being built."""
        why = self.not_ready()
        if why is not None:
            raise ApiError(503, "index_not_ready", why, type="server_error")


@dataclass(frozen=True)
class AuthDependencies:
    """FastAPI dependencies: ``require_key`` (the service key only) and ``require_identity``
    (the key and the user's identity, returning :class:`~ancre.api.identity.Identity`); both
    raise :class:`~ancre.api.identity.AuthError` (401). Their security schemes are documented in
    the OpenAPI description."""

    require_key: Callable[..., Any]
    require_identity: Callable[..., Any]


def auth_dependencies(ctx: ApiContext) -> AuthDependencies:
    """The dependencies for ``ctx.settings.api`` (the e-mail header's name is configurable)."""
    cfg, secrets = ctx.settings.api, ctx.secrets
    bearer = HTTPBearer(auto_error=False, description="The service key (Open WebUI connection key).")
    email_header = APIKeyHeader(name=cfg.user_email_header, auto_error=False,
                                description="The user's e-mail, forwarded by Open WebUI.")

    async def require_key(request: Request, _key: Any = Security(bearer)) -> None:
        check_api_key(request.headers.get("authorization"), secrets.api_key)

    async def require_identity(request: Request, _key: Any = Security(bearer), _email: Any = Security(email_header)) -> Identity:
        body = await request.body() if secrets.signing_secret is not None else b""
        return authenticate(request.headers, cfg, secrets, method=request.method, path=request.url.path, body=body)

    return AuthDependencies(require_key, require_identity)


__all__ = ["ApiContext", "AuthDependencies", "QueryService", "Readiness", "auth_dependencies"]
