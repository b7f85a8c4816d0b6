"""SharePoint REST (``/_api``) reads Graph doesn't offer: web and library role assignments, site
groups and their members — through office365-rest-python-client's ``ClientContext``.

The library is used as published: the site URL is whatever the source names (a real
``https://<tenant>.sharepoint.com/sites/<name>``, or the tests' loopback fake), the app-only token
comes from the source's msal :class:`~ancre.connectors.sharepoint.auth.TokenProvider` through
``ClientContext.with_access_token`` (one token cache for Graph and REST; audience = the site's
origin, scope ``https://<tenant>.sharepoint.com/.default``), and TLS verification (a CA bundle
for tests) through ``ClientContext.with_transport(verify=...)``. The library's own
``with_client_certificate`` is not used: the msal application it builds takes neither an HTTP
client (so no CA bundle but ``REQUESTS_CA_BUNDLE``) nor ``instance_discovery=False`` (so for an
authority host msal doesn't know it first asks ``login.microsoftonline.com``), and it would keep a
second token cache.

SharePoint Online refuses app-only tokens obtained with a **client secret** ("Unsupported app
only token"): a source configured with a secret gets a ``ConfigError`` here, and its
library-inherited rights can't be read (docs/SHAREPOINT.md: use a certificate).

Every ``ClientContext`` first fetches a form digest (``POST /_api/contextInfo``), which the library
retries by itself on transient failures (5 attempts, exponential backoff from 5 s, honouring
``Retry-After``), outside of ``max_retries`` and of the injectable ``sleep``: when SharePoint is
down, a REST read takes up to a few minutes before raising ``SourceUnavailableError``.

Shapes (SharePoint REST API reference, ``SP.RoleAssignment`` with
``$expand=Member,RoleDefinitionBindings``): ``Member.PrincipalType`` 1 user, 4 security group
(Entra group or "Everyone except external users" claim), 8 SharePoint group; each
``RoleDefinition.BasePermissions`` is a 64-bit mask as ``Low``/``High`` 32-bit words
(``ViewListItems`` = bit 0 of ``Low``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ancre.connectors.sharepoint.auth import SecretCredential, TokenProvider
from ancre.connectors.sharepoint.graph import RETRYABLE, GraphError, GraphSettings, backoff_delay, retry_delay
from ancre.errors import ConfigError, SourceUnavailableError

T = TypeVar("T")

TOKEN_MARGIN_S = 300
"""Seconds before expiry at which the REST client stops reusing a token (msal's own margin)."""


class RestError(GraphError):
    """SharePoint REST answered an error retrying won't fix (``status`` 4xx, ``code`` such as
    ``-2147024891, System.UnauthorizedAccessException``, ``message``)."""


@dataclass(frozen=True)
class RoleDef:
    """A role definition bound to an assignment: ``name`` and its base permissions as two 32-bit
    words (``base_permissions_low`` holds ``ViewListItems`` = 0x1)."""

    name: str
    base_permissions_low: int
    base_permissions_high: int


@dataclass(frozen=True)
class RoleAssignment:
    """A role assignment on a web or list: the principal (``principal_id``; ``principal_type`` 1
    user, 4 security group, 8 SharePoint group; ``login_name`` claims such as
    ``i:0#.f|membership|<upn>``, ``c:0t.c|tenant|<group id>``) and its ``roles``."""

    principal_id: int
    principal_type: int
    login_name: str
    title: str
    roles: tuple[RoleDef, ...]


@dataclass(frozen=True)
class SpPrincipal:
    """A SharePoint principal (site group member, or a site group itself): ``id`` (site-scoped
    number), ``login_name``, ``title``, ``email`` (may be empty), ``principal_type``."""

    id: int
    login_name: str
    title: str
    email: str
    principal_type: int


class SharePointRest:
    """REST reads on one site (``site_url``: ``https://<host>/sites/<name>``), with the source's
    app-only certificate credential. Thread-safe (one request at a time per instance).

    Errors: ``ConfigError`` (client secret credential), :class:`RestError` (4xx; 401/403: the app
    lacks rights on the site), ``SourceUnavailableError`` (unreachable, or still 429/5xx after
    ``max_retries``; 429/503 wait for ``Retry-After``), ``TokenError`` (Entra refused)."""

    def __init__(
        self,
        settings: GraphSettings,
        site_url: str,
        *,
        tokens: TokenProvider | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if isinstance(settings.credential, SecretCredential):
            raise ConfigError(
                "SharePoint REST refuses app-only tokens obtained with a client secret "
                "(\"Unsupported app only token\"): configure certificate_path + certificate_thumbprint "
                "or pfx_path to read site and library role assignments"
            )
        parts = urlsplit(site_url)
        if parts.scheme != "https" or not parts.netloc:
            raise ConfigError(f"site URL must be https://<host>/sites/<name>: {site_url!r}")
        self.settings = settings
        self.site_url = site_url.rstrip("/")
        self.resource = f"{parts.scheme}://{parts.netloc}"
        self.tokens = tokens or settings.tokens()
        self.sleep = sleep
        self.rng = rng
        self._lock = threading.Lock()
        self._ctx: Any = None

    # ------------------------------------------------------------------------ public reads
    def role_assignments(self, list_id: str | None = None) -> list[RoleAssignment]:
        """The role assignments of the site's root web (``list_id`` None) or of a list (library)
        by its GUID — a list that inherits answers its web's assignments."""

        def build(ctx: Any) -> Any:
            securable = ctx.web if list_id is None else ctx.web.lists.get_by_id(list_id)
            return securable.role_assignments.expand(["Member", "RoleDefinitionBindings"]).get()

        return [self._assignment(ra) for ra in self._run(build)]

    def unique_scopes(self, list_id: str, *, page_size: int = 5000) -> list[tuple[str, bool]]:
        """``(FileRef, HasUniqueRoleAssignments)`` of every item (file or folder) of a list by its
        GUID: its server-relative URL and whether its role assignments are its own rather than
        inherited (``SecurableObject.HasUniqueRoleAssignments``, not returned unless selected),
        ``page_size`` items per request (the list view threshold: 5,000)."""

        def build(ctx: Any) -> Any:
            items = ctx.web.lists.get_by_id(list_id).items
            return items.select(["Id", "FileRef", "HasUniqueRoleAssignments"]).get_all(page_size=page_size)

        out = []
        for it in self._run(build):
            props = it.properties
            out.append((str(props.get("FileRef") or ""), bool(props.get("HasUniqueRoleAssignments"))))
        return out

    def group_members(self, group_id: int) -> list[SpPrincipal]:
        """The members of site group ``group_id`` (users, Entra groups, everyone claims)."""
        users = self._run(lambda ctx: ctx.web.site_groups.get_by_id(int(group_id)).users.get())
        return [self._principal(u.properties) for u in users]

    def site_groups(self) -> list[SpPrincipal]:
        """Every site group of the site (``id``, ``title``, ``login_name``; ``principal_type`` 8)."""
        groups = self._run(lambda ctx: ctx.web.site_groups.get())
        return [self._principal(g.properties) for g in groups]

    # ------------------------------------------------------------------------ internals
    def _token(self) -> dict[str, Any]:
        res = self.tokens.token_response(self.resource)
        # The library caches a token until its expires_in runs out; stop reusing it a margin
        # before, as msal does, so the next call asks msal (which renews it).
        left = max(0, int(res.get("expires_in", 0) or 0) - TOKEN_MARGIN_S)
        return {"access_token": res["access_token"], "token_type": "Bearer", "expires_in": left}

    def _context(self) -> Any:
        from office365.sharepoint.client_context import ClientContext

        if self._ctx is None:
            self._ctx = (
                ClientContext(self.site_url)
                .with_access_token(self._token)
                .with_transport(verify=self.settings.verify, timeout=self.settings.timeout_s)
            )
        return self._ctx

    def _run(self, build: Callable[[Any], T]) -> T:
        from office365.runtime.client_request_exception import ClientRequestException

        refreshed = False
        attempt = 0
        with self._lock:
            while True:
                try:
                    ctx = self._context()
                    query = build(ctx)
                    ctx.execute_query()
                    return query
                except ClientRequestException as e:
                    self._ctx = None  # a failed context may hold queued queries or a stale token
                    resp = e.response
                    status = int(resp.status_code) if resp is not None else 0
                    if status == 401 and not refreshed:
                        self.tokens.invalidate(self.resource)
                        refreshed = True
                        continue
                    if status in RETRYABLE:
                        if attempt >= self.settings.max_retries:
                            raise SourceUnavailableError(
                                f"SharePoint REST {status} after {attempt} retries: {self.site_url}: {e.message}"
                            ) from e
                        retry_after = resp.headers.get("Retry-After") if resp is not None else None
                        self.sleep(retry_delay(self.settings, attempt, retry_after, self.rng))
                        attempt += 1
                        continue
                    raise RestError(status, str(e.code or status), e.message or str(e)) from e
                except OSError as e:  # requests' ConnectionError, TLS errors, timeouts
                    self._ctx = None
                    if attempt >= self.settings.max_retries:
                        raise SourceUnavailableError(
                            f"SharePoint REST unreachable: {self.site_url}: {type(e).__name__}: {e}"
                        ) from e
                    self.sleep(backoff_delay(self.settings, attempt, self.rng))
                    attempt += 1

    @staticmethod
    def _assignment(ra: Any) -> RoleAssignment:
        member = ra.member.properties
        roles = tuple(
            RoleDef(
                str(rd.properties.get("Name", "")),
                int(rd.base_permissions.Low),
                int(rd.base_permissions.High),
            )
            for rd in ra.role_definition_bindings
        )
        return RoleAssignment(
            principal_id=int(ra.principal_id if ra.principal_id is not None else member.get("Id", 0)),
            principal_type=_int(member.get("PrincipalType")),
            login_name=str(member.get("LoginName", "") or ""),
            title=str(member.get("Title", "") or ""),
            roles=roles,
        )

    @staticmethod
    def _principal(props: dict[str, Any]) -> SpPrincipal:
        return SpPrincipal(
            id=int(props.get("Id", 0) or 0),
            login_name=str(props.get("LoginName", "") or ""),
            title=str(props.get("Title", "") or ""),
            email=str(props.get("Email", "") or ""),
            principal_type=_int(props.get("PrincipalType")),
        )


_CLIENTS: dict[tuple[GraphSettings, str], SharePointRest] = {}
_CLIENTS_LOCK = threading.Lock()


def rest_client(settings: GraphSettings, site_url: str) -> SharePointRest:
    """The process-wide :class:`SharePointRest` of a site (same settings): its ``ClientContext`` and
    form digest are reused, so repeated reads don't each start with ``POST /_api/contextInfo``.
    Raises as :class:`SharePointRest`."""
    key = (settings, site_url.rstrip("/"))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = SharePointRest(settings, site_url)
            _CLIENTS[key] = client
        return client


def _int(value: Any) -> int:
    """An int from a number, a numeric string or the library's enum (``PrincipalType``)."""
    value = getattr(value, "value", value)
    return int(value or 0)


__all__ = ["RestError", "RoleAssignment", "RoleDef", "SharePointRest", "SpPrincipal", "rest_client"]
