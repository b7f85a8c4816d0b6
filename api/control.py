"""The local control API (FastAPI), served on a Unix domain socket by the process that owns the
index (``ancre daemon`` or ``ancre serve``; :mod:`ancre.app.control` runs it). It lets the admin's
CLI (``ancre search``, ``ask``, ``acl explain``, ``status``, ``sync``, ``reindex``) and the query
core imported by another program (:class:`~ancre.query.remote.RemoteQueryCore`) work while the
embedded store is held by that process. See docs/DEPLOY.md, "The admin commands".

Who may do what — the caller's Unix identity comes from the socket (``SO_PEERCRED``, put in the
request's ``state.peer`` by the server): **admins** (root, the service's own user, members of
``daemon.admin_group``) may search, ask and explain as any user, read the status and request
passes; any other caller that can open the socket may only search, ask and explain as its own
login name. Every answer is still trimmed by the rights of the user asked about, and every
``ask`` is audited with the admin who asked (``asked_by``, ``unix:<login>``) — except for the
service's own processes (same user as this one: ``ancre api --via-daemon``, the RAG API of
``ancre-api.service``), which give the identity they received (``asked_by``: the e-mail Open
WebUI forwarded), as ``ancre serve``'s API does in process. From anyone else ``asked_by`` is
not taken: the audit names the Unix user who asked.

Limits are those of the HTTP API (``[api]``): a body larger than ``api.max_body_bytes`` is 413,
one not received within ``api.body_timeout_s`` 408, a question longer than
``api.max_question_chars`` 422 (the same messages as HTTP), and request strings must be valid
Unicode text (422: a JSON body with a lone surrogate is refused by its parsing); ``acl explain`` refuses a path outside the
source, with a NUL or a lone surrogate with 422 and the message the CLI prints. A non-admin explaining as himself is answered
only about files he may read: for every other path the answer is the same line
(:data:`ancre.app.explain.NOT_SHOWN`), so it never tells whether a file he may not read exists.

Endpoints (JSON; errors ``{"error": message, "type": AncreError subclass name}``: 403 not
allowed, 404 unknown source, 408/413/422 bad request, 409 busy, 503 directory/store/audit
unavailable):

``GET /v1/identity``          ``{"data_dir": absolute path}``: whose index this process owns (a client
                              checks it before using the socket: another instance's is never used)
``GET /v1/status``            ``{"index": ancre status --json, "daemon": daemon status | null, "store_points": n}``
``POST /v1/search``           ``{question, user, limit}`` → the query core's search result
``POST /v1/ask``              ``{question, user, history?, asked_by?}`` → the query core's :class:`~ancre.query.answer.Answer`
``POST /v1/ask/stream``       the same, streamed as NDJSON: ``{"text": piece}`` lines, then ``{"answer": Answer}``
                              (or ``{"error": message, "type": …}`` after a start); a caller that
                              disconnects cancels the answer (the model call stops, audited ``interrompue``)
``GET /v1/principals``        ``?user=`` → ``{"account": name | null, "principals": [...]}``
``GET /v1/ready``             ``{"not_ready": reason | null, "points": {collection: n}, "store_points": n}``
``GET /v1/directory``         reads the directory once (``{"ok": true}``; 503 when it can't be read)
``POST /v1/acl/explain``      ``{path, user, source}`` → ``{"lines": [plain text lines]}``
``POST /v1/report/exposure``  ``{sources, explain}`` → ``ancre report exposure --json`` (admins)
``POST /v1/sync``             ``{source, force}`` → :class:`~ancre.daemon.service.SyncTicket`
``GET /v1/sync/reports``      ``?since=`` → ``{source: PassReport}`` (full passes started since)
``POST /v1/reindex``          always refused here (409 while a pass runs or is queued, else 409
                              saying to stop the service first: a reindex drops the store).
"""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from ancre import errors
from ancre.acl.explain import PathOutsideSourceError
from ancre.api.errors import ApiError, param_name
from ancre.api.middleware import BodyLimitMiddleware
from ancre.api.questions import check_question
from ancre.api.streaming import CancellableStream
from ancre.daemon.service import Daemon
from ancre.errors import AncreError, ControlBusyError, ControlPermissionError
from ancre.query.answer import AnswerStream
from ancre.settings.api import ApiConfig

log = logging.getLogger("ancre.control")


@dataclass(frozen=True)
class PeerCred:
    """The connected process's credentials (``SO_PEERCRED``, socket(7)): ``pid``, ``uid``, ``gid``."""

    pid: int
    uid: int
    gid: int


@dataclass(frozen=True)
class Caller:
    """Who is asking: ``login`` (Unix user name, ``uid:<n>`` when it has none) and ``admin``."""

    login: str
    admin: bool
    service: bool = False
    """The service's own user (another process of the service: the API of ``ancre-api.service``)."""


class ControlQuery(Protocol):
    """What the control API needs from the query core (:class:`~ancre.query.QueryCore` satisfies it)."""

    def search(self, question: str, user: str, *, limit: int | None = None) -> Any: ...

    def ask(self, question: str, user: str, *, asked_by: str | None = None, history: Any = None) -> Any: ...

    def stream(self, question: str, user: str, *, asked_by: str | None = None, history: Any = None) -> Any: ...

    def probe_directory(self) -> None: ...

    def principals(self, user: str) -> frozenset[str]: ...

    def account(self, user: str) -> str | None: ...

    def not_ready(self) -> str | None: ...

    def points(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class ControlParts:
    """The typed services the control API serves, from the composition root.

    ``query``: the query core; ``index_status()``: the ``ancre status --json`` dict;
    ``store_points()``: points in the store (0: never synced); ``explain(path, user, source,
    private)``: the lines ``ancre acl explain`` prints (plain text; ``private``: a non-admin
    asking about himself, see the module doc); ``daemon``: the running daemon (``None``: no sync
    here); ``admin_group``: ``daemon.admin_group``; ``limits``: the ``[api]`` section whose
    limits apply here too; ``exposure(sources, explain)``: the exposure report as JSON
    (``None``: not served); ``data_dir``: the data folder whose index this process owns, as an
    absolute path (``/v1/identity``)."""

    query: ControlQuery
    index_status: Callable[[], dict[str, Any]]
    store_points: Callable[[], int]
    explain: Callable[[str, str, str | None, bool], list[str]]
    daemon: Daemon | None
    admin_group: str
    limits: ApiConfig = ApiConfig()
    exposure: Callable[[list[str] | None, bool], dict[str, Any]] | None = None
    data_dir: str = ""


class _Ask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1)
    user: str = Field(min_length=1, max_length=1024)


class _AskInConversation(_Ask):
    history: list[str] | None = None
    """The earlier user questions of a conversation, oldest first."""
    asked_by: str | None = Field(None, min_length=1, max_length=1024)
    """The identity the caller received (the service's own processes only)."""


class _Search(_Ask):
    limit: int | None = Field(None, ge=1, le=1000)


class _Explain(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: Any = None
    """A string, checked by :func:`ancre.app.explain.check_path` with the CLI's messages (not
    by pydantic, which refuses any lone surrogate — the CLI sends a file name's undecodable bytes
    as such)."""
    user: str = Field(min_length=1, max_length=1024)
    source: str | None = Field(None, max_length=1024)



class _Exposure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sources: list[str] | None = None
    explain: bool = True


class _Sync(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    force: bool = False


def is_admin(peer: PeerCred, admin_group: str) -> bool:
    """Root, this process's own user, or a member of ``admin_group`` (primary or supplementary,
    through NSS: ``getgrouplist(3)``)."""
    if peer.uid in (0, os.getuid()):
        return True
    try:
        gid = grp.getgrnam(admin_group).gr_gid
        name = pwd.getpwuid(peer.uid).pw_name
    except KeyError:
        return False
    return gid == peer.gid or gid in os.getgrouplist(name, peer.gid)


def caller_of(request: Request, admin_group: str) -> Caller:
    """The caller of ``request`` from its peer credentials; no credentials (not a Unix socket)
    gets nothing: :class:`ControlPermissionError`."""
    peer = getattr(request.state, "peer", None)
    if not isinstance(peer, PeerCred):
        raise ControlPermissionError("no peer credentials: the control API answers on its Unix socket only")
    try:
        login = pwd.getpwuid(peer.uid).pw_name
    except KeyError:
        login = f"uid:{peer.uid}"
    return Caller(login, is_admin(peer, admin_group), service=peer.uid == os.getuid())


def _as_user(caller: Caller, user: str) -> str:
    if not caller.admin and user != caller.login:
        raise ControlPermissionError(
            f"{caller.login} may only search and ask as itself here: choosing the user is for root, the service "
            "user and members of the admin group"
        )
    return user


def _asked_by(caller: Caller, body: _AskInConversation) -> str:
    """Who the audit says asked: the identity the service's own process received, else
    ``unix:<login>`` (an ``asked_by`` from anyone else is not taken: the audit names who asked)."""
    if body.asked_by is not None and caller.service:
        return body.asked_by
    return f"unix:{caller.login}"


def _ndjson(gen: Any) -> Iterator[bytes]:
    """An answer's pieces as NDJSON lines: ``{"text": …}``, then ``{"answer": …}``; an error after
    the first line as ``{"error": message, "type": class name}``."""
    try:
        for piece in gen:
            key = "text" if isinstance(piece, str) else "answer"
            yield (json.dumps({key: to_jsonable_python(piece)}, ensure_ascii=False) + "\n").encode()
    except AncreError as e:
        yield (json.dumps({"error": str(e), "type": type(e).__name__}, ensure_ascii=False) + "\n").encode()


def _admin(caller: Caller, what: str) -> None:
    if not caller.admin:
        raise ControlPermissionError(f"{what} is for root, the service user and members of the admin group")


_STATUS = {ControlPermissionError: 403, errors.ConfigError: 404, ControlBusyError: 409, errors.DirectoryError: 503,
           errors.StoreError: 503, errors.AuditError: 503, errors.EmbedderError: 503, PathOutsideSourceError: 422}


def _status_of(e: AncreError) -> int:
    for cls in type(e).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return 500


def create_control_app(parts: ControlParts) -> FastAPI:
    """The control API over ``parts`` (see the module doc)."""
    app = FastAPI(title="ancre control", docs_url=None, redoc_url=None, openapi_url=None)
    limits = parts.limits
    app.add_middleware(BodyLimitMiddleware, max_bytes=limits.max_body_bytes, timeout_s=limits.body_timeout_s)
    _error_handlers(app)

    def who(request: Request) -> Caller:
        return caller_of(request, parts.admin_group)

    _query_routes(app, parts, who)
    _rights_routes(app, parts, who)
    _sync_routes(app, parts, who)
    return app


def _error_handlers(app: FastAPI) -> None:
    """Errors as ``{"error": message, "type": …}``: an :class:`ApiError` with its status, a
    request that fails validation as 422 naming the parameter, an :class:`AncreError` with the
    status of its class (:func:`_status_of`)."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return JSONResponse({"error": e.message, "type": "ControlRequestError"}, status_code=e.status)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, e: RequestValidationError) -> JSONResponse:
        first = (e.errors() or [{"loc": ("body",), "msg": "invalid request"}])[0]
        msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        param = param_name(first.get("loc", ()))
        message = msg if msg.startswith(f"{param}:") else f"{param}: {msg}"
        return JSONResponse({"error": message, "type": "ControlRequestError"}, status_code=422)

    @app.exception_handler(AncreError)
    async def _ancre_error(request: Request, e: AncreError) -> JSONResponse:
        return JSONResponse({"error": str(e), "type": type(e).__name__}, status_code=_status_of(e))


def _query_routes(app: FastAPI, parts: ControlParts, who: Callable[[Request], Caller]) -> None:
    """``/v1/status``, ``/v1/search``, ``/v1/ask``, ``/v1/principals`` and ``/v1/ready``."""
    limits = parts.limits

    @app.get("/v1/status")
    def status(request: Request) -> dict[str, Any]:
        _admin(who(request), "the status")
        d = parts.daemon
        return {"index": parts.index_status(), "daemon": d.status() if d else None, "store_points": parts.store_points()}

    def question(text: str) -> str:
        return check_question(text, limits.max_question_chars, "question")

    @app.post("/v1/search")
    def search(body: _Search, request: Request) -> Any:
        user = _as_user(who(request), body.user)
        return to_jsonable_python(parts.query.search(question(body.question), user, limit=body.limit))

    @app.post("/v1/ask")
    def ask(body: _AskInConversation, request: Request) -> Any:
        caller = who(request)
        user = _as_user(caller, body.user)
        extra = {"history": body.history} if body.history is not None else {}
        return to_jsonable_python(parts.query.ask(question(body.question), user, asked_by=_asked_by(caller, body), **extra))

    @app.post("/v1/ask/stream")
    def ask_stream(body: _AskInConversation, request: Request) -> CancellableStream:
        caller = who(request)
        user = _as_user(caller, body.user)
        extra = {"history": body.history} if body.history is not None else {}
        gen = parts.query.stream(question(body.question), user, asked_by=_asked_by(caller, body), **extra)
        return CancellableStream(_ndjson(gen), cancel=gen.cancel if isinstance(gen, AnswerStream) else lambda: None,
                                 media_type="application/x-ndjson")

    @app.get("/v1/directory")
    def directory(request: Request) -> dict[str, Any]:
        who(request)
        parts.query.probe_directory()
        return {"ok": True}

    @app.get("/v1/principals")
    def principals(user: str, request: Request) -> dict[str, Any]:
        _as_user(who(request), user)
        return {"account": parts.query.account(user), "principals": sorted(parts.query.principals(user))}

    @app.get("/v1/identity")
    def identity(request: Request) -> dict[str, Any]:
        who(request)
        return {"data_dir": parts.data_dir}

    @app.get("/v1/ready")
    def ready(request: Request) -> dict[str, Any]:
        who(request)
        points = dict(parts.query.points())
        return {"not_ready": parts.query.not_ready(), "points": points, "store_points": sum(points.values())}


def _rights_routes(app: FastAPI, parts: ControlParts, who: Callable[[Request], Caller]) -> None:
    """``/v1/acl/explain`` and ``/v1/report/exposure``."""

    @app.post("/v1/acl/explain")
    def explain(body: _Explain, request: Request) -> dict[str, Any]:
        caller = who(request)
        user = _as_user(caller, body.user)
        if not isinstance(body.path, str) or not body.path.strip() or len(body.path) > 32_768:
            raise ApiError(422, "invalid_value", "path: a non-empty path of at most 32768 characters is required")
        return {"lines": parts.explain(body.path, user, body.source, not caller.admin)}

    @app.post("/v1/report/exposure")
    def exposure(body: _Exposure, request: Request) -> dict[str, Any]:
        _admin(who(request), "the exposure report")
        if parts.exposure is None:
            raise ControlBusyError("the exposure report is not served by this process")
        return parts.exposure(body.sources, body.explain)


def _daemon(parts: ControlParts) -> Daemon:
    if parts.daemon is None:
        raise ControlBusyError("no sync daemon runs in the process that owns the index (`ancre api`)")
    return parts.daemon


def _sync_routes(app: FastAPI, parts: ControlParts, who: Callable[[Request], Caller]) -> None:
    @app.post("/v1/sync")
    def sync(body: _Sync, request: Request) -> dict[str, Any]:
        caller = who(request)
        _admin(caller, "requesting a pass")
        ticket = _daemon(parts).request_sync(body.source, force=body.force)
        log.info("pass requested through the control socket", extra={"by": caller.login, "sources": list(ticket.sources)})
        return to_jsonable_python(asdict(ticket))

    @app.get("/v1/sync/reports")
    def reports(since: float, request: Request) -> dict[str, Any]:
        _admin(who(request), "the pass reports")
        return {s: to_jsonable_python(asdict(r)) for s, r in _daemon(parts).full_reports(since).items()}

    @app.post("/v1/reindex")
    def reindex(request: Request) -> dict[str, Any]:
        _admin(who(request), "reindexing")
        d = parts.daemon
        busy = d.busy() if d is not None else None
        if busy:
            raise ControlBusyError(f"reindex refused: {busy}; try again once it is done")
        raise ControlBusyError(
            f"reindex refused: the index is in use by the running ancre (pid {os.getpid()}); a reindex drops the "
            "store: stop the service (systemctl stop ancre), run `ancre reindex`, then start it"
        )


__all__ = [
    "Caller", "ControlParts", "ControlQuery", "PeerCred",
    "caller_of", "create_control_app", "is_admin",
]
