"""A Microsoft Graph v1.0 client for the SharePoint source: httpx, app-only msal tokens, throttling.

Rules followed (Microsoft Graph docs):

- **Throttling** ("Microsoft Graph throttling guidance"): a ``429`` or ``503`` answer is retried
  after its ``Retry-After`` (seconds, or an HTTP-date, RFC 9110 §10.2.3); without one, after a
  capped exponential backoff with jitter. Other ``5xx`` and transport errors get the backoff too.
  After ``max_retries`` retries the call raises :class:`~ancre.errors.SourceUnavailableError`
  (the pass stops as *suspect*, revoking nothing).
- **JSON batching** ("Combine multiple requests in one HTTP call"): ``POST /$batch`` with at most 20
  requests; each sub-response has its own status, and a throttled sub-request (``429``/``503`` with
  its own ``Retry-After``) is re-sent alone, the others are kept.
- **Paging**: follow ``@odata.nextLink`` until absent; ``driveItem: delta`` ends on
  ``@odata.deltaLink``; ``410 Gone`` (``resyncRequired``, ``resyncChangesApplyDifferences``,
  ``resyncChangesUploadDifferences``) means the token is dead: :class:`ResyncRequired`.
- **Tokens**: a ``401`` (``InvalidAuthenticationToken``: expired or revoked) drops the cached token
  and retries once with a fresh one, so a token expiring mid-pass doesn't fail the pass.
- **Downloads**: ``/drives/{d}/items/{i}/content`` answers ``302`` to a pre-authenticated URL,
  fetched without the bearer token.

At most ``max_in_flight`` HTTP requests are in flight at once per client (a semaphore held only
while a request is on the wire, never while waiting to retry). Links from Graph (next/delta links,
batch) are only followed on the configured Graph origin: the bearer token never leaves it.
"""

from __future__ import annotations

import email.utils
import random
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from ancre.connectors.sharepoint.auth import (
    CertificateCredential,
    Credential,
    PfxCredential,
    SecretCredential,
    TokenError,
    TokenProvider,
    shared_provider,
)
from ancre.errors import AncreError, ConfigError, SourceUnavailableError
from ancre.models import Closing

if TYPE_CHECKING:
    from ancre.connectors.sharepoint.config import SharePointSourceConfig

BATCH_LIMIT = 20
"""Requests per ``$batch`` call (Graph JSON batching limit)."""

RETRYABLE = frozenset({429, 500, 502, 503, 504})


class GraphError(AncreError):
    """Graph answered an error that retrying won't fix (4xx): ``status`` (HTTP), ``code`` (Graph
    ``error.code``, e.g. ``accessDenied``, ``itemNotFound``), ``message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"Graph {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class ResyncRequired(GraphError):
    """``410 Gone`` on ``driveItem: delta``: the delta token can't be used any more; enumerate the
    drive again from scratch (``code``: ``resyncRequired``, ``resyncChangesApplyDifferences``...;
    ``location``: the fresh delta URL Graph proposed, if any)."""

    def __init__(self, code: str, message: str = "", location: str | None = None) -> None:
        super().__init__(410, code, message or "resync required")
        self.location = location


@dataclass(frozen=True)
class GraphSettings:
    """How to reach Graph for one tenant.

    ``credential``: :class:`~ancre.connectors.sharepoint.auth.CertificateCredential`,
    :class:`~ancre.connectors.sharepoint.auth.PfxCredential` or
    :class:`~ancre.connectors.sharepoint.auth.SecretCredential` (Graph only). ``authority``: Entra
    host; ``graph_url``: Graph root with version. ``max_in_flight``: concurrent requests;
    ``timeout_s``: per request (seconds); ``max_retries``: retries after a throttled/failed
    attempt; ``verify``: True (system CAs) or a CA bundle path. ``backoff_base_s`` /
    ``backoff_max_s``: exponential backoff (seconds) when no ``Retry-After``;
    ``retry_after_max_s``: longest ``Retry-After`` honoured (seconds)."""

    tenant_id: str
    client_id: str
    credential: Credential
    authority: str = "https://login.microsoftonline.com"
    graph_url: str = "https://graph.microsoft.com/v1.0"
    max_in_flight: int = 4
    timeout_s: float = 30.0
    max_retries: int = 5
    verify: bool | str = True
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    retry_after_max_s: float = 300.0

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ConfigError("max_in_flight: must be >= 1")
        if self.max_retries < 0:
            raise ConfigError("max_retries: must be >= 0")

    @property
    def graph_origin(self) -> str:
        """``scheme://host[:port]`` of ``graph_url`` (also the token resource)."""
        parts = urlsplit(self.graph_url)
        return f"{parts.scheme}://{parts.netloc}"

    def tokens(self) -> TokenProvider:
        """The shared :class:`~ancre.connectors.sharepoint.auth.TokenProvider` of this credential."""
        return shared_provider(tenant_id=self.tenant_id, client_id=self.client_id, credential=self.credential,
                               authority=self.authority, verify=self.verify, timeout_s=self.timeout_s)


def settings_from_source(cfg: SharePointSourceConfig) -> GraphSettings:
    """The :class:`GraphSettings` of a ``kind = "sharepoint"`` source (its credential: certificate
    PEM + thumbprint, PFX + passphrase, or client secret). Raises ``ConfigError`` when the secret's
    environment variable is unset."""
    credential: Credential
    if cfg.certificate_path is not None:
        credential = CertificateCredential(Path(cfg.certificate_path), str(cfg.certificate_thumbprint or ""))
    elif cfg.pfx_path is not None:
        credential = PfxCredential(Path(cfg.pfx_path), cfg.passphrase())
    else:
        secret = cfg.secret()
        if not secret:
            raise ConfigError(f"sources.{cfg.id}.client_secret: the client secret is empty")
        credential = SecretCredential(secret)
    return GraphSettings(
        tenant_id=cfg.tenant_id,
        client_id=cfg.client_id,
        credential=credential,
        authority=cfg.authority,
        graph_url=cfg.graph_url,
        max_in_flight=cfg.max_in_flight,
        timeout_s=cfg.timeout_s,
        max_retries=cfg.max_retries,
        verify=str(cfg.ca_file) if cfg.ca_file is not None else True,
    )


@dataclass(frozen=True)
class BatchRequest:
    """One ``$batch`` sub-request: ``url`` relative to the version root (``/drives/{d}/items/{i}/permissions``)."""

    id: str
    method: str
    url: str
    body: Any = None
    headers: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The sub-request object of the batch body."""
        out: dict[str, Any] = {"id": self.id, "method": self.method, "url": self.url}
        if self.headers:
            out["headers"] = dict(self.headers)
        if self.body is not None:
            out["body"] = self.body
            out.setdefault("headers", {}).setdefault("Content-Type", "application/json")
        return out


@dataclass(frozen=True)
class BatchResponse:
    """One ``$batch`` sub-response: ``status``, ``body`` (JSON, or base64 text for binary bodies),
    ``headers``."""

    id: str
    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeltaPage:
    """A whole ``driveItem: delta`` round: ``items`` (raw driveItem JSON of every page, in order) and
    the ``delta_link`` to use next time."""

    items: list[dict[str, Any]]
    delta_link: str


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 §10.2.3: delay-seconds or an
    HTTP-date); ``None`` when absent or unreadable; never negative."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def backoff_delay(settings: GraphSettings, attempt: int, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry ``attempt`` (0-based) when the answer gave no ``Retry-After``:
    capped exponential (``backoff_base_s * 2**attempt``, at most ``backoff_max_s``) with "equal
    jitter" (uniform between half and all of it), as Graph's throttling guidance recommends."""
    cap = min(settings.backoff_max_s, settings.backoff_base_s * (2 ** attempt))
    return cap / 2 + rng() * cap / 2


def retry_delay(settings: GraphSettings, attempt: int, retry_after: str | None,
                rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry ``attempt``: the ``Retry-After`` header when readable (at most
    ``retry_after_max_s``), else :func:`backoff_delay`."""
    honoured = parse_retry_after(retry_after)
    if honoured is not None:
        return min(honoured, settings.retry_after_max_s)
    return backoff_delay(settings, attempt, rng)


def _error_of(resp_body: Any) -> tuple[str, str]:
    err = resp_body.get("error") if isinstance(resp_body, Mapping) else None
    if isinstance(err, Mapping):
        msg = err.get("message", "")
        if isinstance(msg, Mapping):  # SharePoint REST: {"lang", "value"}
            msg = msg.get("value", "")
        return str(err.get("code", "") or "error"), str(msg)
    return "error", ""


class GraphClient(Closing):
    """Graph v1.0 calls for one tenant (thread-safe). See the module docstring for the rules.

    ``sleep`` (seconds -> None) and ``rng`` (-> [0, 1)) are injectable for tests; ``tokens``
    defaults to the settings' shared token provider. ``requests_made`` counts the HTTP requests
    sent to Graph (retries included, a ``$batch`` counts one)."""

    def __init__(
        self,
        settings: GraphSettings,
        *,
        tokens: TokenProvider | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings
        self.tokens = tokens or settings.tokens()
        self.sleep = sleep
        self.rng = rng
        self.requests_made = 0
        self._count_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(settings.max_in_flight)
        self._base = settings.graph_url.rstrip("/")
        self._origin = settings.graph_origin
        verify: ssl.SSLContext | bool
        if settings.verify is True:
            verify = True
        elif settings.verify is False:
            verify = False
        else:
            verify = ssl.create_default_context(cafile=str(settings.verify))
        self._http = httpx.Client(
            verify=verify,
            timeout=httpx.Timeout(settings.timeout_s),
            follow_redirects=False,
            limits=httpx.Limits(max_connections=settings.max_in_flight, max_keepalive_connections=settings.max_in_flight),
            headers={"Accept": "application/json"},
        )

    # ------------------------------------------------------------------------ public calls
    def get(self, url_or_path: str, *, params: Mapping[str, Any] | None = None,
            headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET a Graph resource; its JSON object. Raises ``GraphError`` (4xx), ``SourceUnavailableError``."""
        return self._json(self._send("GET", url_or_path, params=params, headers=headers))

    def post(self, path: str, json: Any = None, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """POST JSON to a Graph path; the JSON answer (``{}`` when empty). Errors as :meth:`get`."""
        return self._json(self._send("POST", path, json=json if json is not None else {}, headers=headers))

    def pages(self, url_or_path: str, *, params: Mapping[str, Any] | None = None,
              headers: Mapping[str, str] | None = None) -> Iterator[dict[str, Any]]:
        """Every element of ``value`` of a collection, page after page (``@odata.nextLink``)."""
        url: str | None = url_or_path
        first = True
        while url:
            body = self.get(url, params=params if first else None, headers=headers)
            first = False
            yield from body.get("value", [])
            url = body.get("@odata.nextLink")

    def delta(self, drive_id: str, delta_link: str | None, *, prefer: Sequence[str] = ()) -> DeltaPage:
        """All changes of a drive since ``delta_link`` (``None``: the whole drive), every page
        followed, with the next delta link. ``prefer``: ``Prefer`` header values
        (``deltashowsharingchanges``, ``hierarchicalsharing``...). Raises :class:`ResyncRequired`
        on 410, ``GraphError``, ``SourceUnavailableError``."""
        url: str = delta_link or f"/drives/{drive_id}/root/delta"
        headers = {"Prefer": ", ".join(prefer)} if prefer else None
        items: list[dict[str, Any]] = []
        while True:
            body = self.get(url, headers=headers)
            items.extend(body.get("value", []))
            if body.get("@odata.nextLink"):
                url = str(body["@odata.nextLink"])
                continue
            link = body.get("@odata.deltaLink")
            if not link:
                raise GraphError(200, "noDeltaLink", f"delta of drive {drive_id} ended without @odata.deltaLink")
            return DeltaPage(items, str(link))

    def batch(self, requests: Sequence[BatchRequest]) -> dict[str, BatchResponse]:
        """Send ``requests`` through ``POST /$batch`` (20 per call); ``{request id: response}``.
        Sub-requests answered 429/503 (or another 5xx) are re-sent alone after their
        ``Retry-After`` (else the backoff), up to ``max_retries`` times; their last answer is
        returned if they never pass. Raises ``SourceUnavailableError`` when the batch call itself
        fails, ``GraphError`` when it is refused (4xx)."""
        out: dict[str, BatchResponse] = {}
        for start in range(0, len(requests), BATCH_LIMIT):
            out.update(self._batch_chunk(requests[start:start + BATCH_LIMIT]))
        return out

    def download(self, drive_id: str, item_id: str) -> bytes:
        """A file's content by drive id + item id (the ``302`` to the pre-authenticated URL is
        followed without the bearer token). Errors as :meth:`get`."""
        resp = self._send("GET", f"/drives/{drive_id}/items/{item_id}/content")
        if resp.status_code in (301, 302, 303, 307, 308):
            location = resp.headers.get("location")
            if not location:
                raise GraphError(resp.status_code, "noLocation", "redirect without Location")
            resp = self._send("GET", str(httpx.URL(str(resp.url)).join(location)), auth=False)
        return resp.content

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    # ------------------------------------------------------------------------ internals
    def _url(self, url_or_path: str, *, auth: bool) -> str:
        if url_or_path.startswith(("https://", "http://")):
            parts = urlsplit(url_or_path)
            if auth and f"{parts.scheme}://{parts.netloc}" != self._origin:
                # A next/delta link elsewhere than Graph: never send our token there.
                raise GraphError(0, "foreignUrl", f"refusing to send the Graph token to {parts.scheme}://{parts.netloc}")
            return url_or_path
        return self._base + ("" if url_or_path.startswith("/") else "/") + url_or_path

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (0-based) without ``Retry-After`` (:func:`backoff_delay`)."""
        return backoff_delay(self.settings, attempt, self.rng)

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        return retry_delay(self.settings, attempt, retry_after, self.rng)

    def _count(self) -> None:
        with self._count_lock:
            self.requests_made += 1

    def _send(self, method: str, url_or_path: str, *, params: Mapping[str, Any] | None = None,
              headers: Mapping[str, str] | None = None, json: Any = None, auth: bool = True) -> httpx.Response:
        url = self._url(url_or_path, auth=auth)
        refreshed = False
        attempt = 0
        while True:
            hdrs = dict(headers or {})
            if auth:
                hdrs["Authorization"] = f"Bearer {self.tokens.token(self._origin)}"
            try:
                with self._slots:
                    self._count()
                    resp = self._http.request(method, url, params=params, headers=hdrs, json=json)
            except httpx.TransportError as e:
                if attempt >= self.settings.max_retries:
                    raise SourceUnavailableError(f"Graph unreachable: {method} {url}: {type(e).__name__}: {e}") from e
                self.sleep(self.backoff(attempt))
                attempt += 1
                continue
            status = resp.status_code
            if status == 401 and auth and not refreshed:
                # Expired or revoked token: one fresh token, one retry (no wait).
                self.tokens.invalidate(self._origin)
                refreshed = True
                continue
            if status in RETRYABLE:
                if attempt >= self.settings.max_retries:
                    code, msg = _error_of(self._body(resp))
                    raise SourceUnavailableError(f"Graph {status} {code} after {attempt} retries: {method} {url}: {msg}")
                self.sleep(self._delay(attempt, resp.headers.get("retry-after")))
                attempt += 1
                continue
            if status == 410:
                code, msg = _error_of(self._body(resp))
                raise ResyncRequired(code, msg, resp.headers.get("location"))
            if status >= 400:
                code, msg = _error_of(self._body(resp))
                raise GraphError(status, code, msg)
            return resp

    @staticmethod
    def _body(resp: httpx.Response) -> Any:
        try:
            return resp.json()
        except ValueError:
            return None

    @staticmethod
    def _json(resp: httpx.Response) -> dict[str, Any]:
        if not resp.content:
            return {}
        try:
            body = resp.json()
        except ValueError as e:
            raise GraphError(resp.status_code, "invalidJson", f"{resp.request.url}: not JSON: {e}") from e
        if not isinstance(body, dict):
            raise GraphError(resp.status_code, "invalidJson", f"{resp.request.url}: not a JSON object")
        return body

    def _batch_chunk(self, requests: Sequence[BatchRequest]) -> dict[str, BatchResponse]:
        ids = [r.id for r in requests]
        if len(set(ids)) != len(ids):
            raise ValueError("batch request ids must be unique")
        pending = {r.id: r for r in requests}
        done: dict[str, BatchResponse] = {}
        attempt = 0
        while pending:
            body = self.post("/$batch", {"requests": [r.to_json() for r in pending.values()]})
            got = {str(x.get("id")): x for x in body.get("responses", []) if isinstance(x, Mapping)}
            retry: list[str] = []
            waits: list[float] = []
            for rid in list(pending):
                raw = got.get(rid)
                if raw is None:
                    done[rid] = BatchResponse(rid, 0, {"error": {"code": "noResponse", "message": "missing from $batch"}})
                    continue
                hdrs = {str(k): str(v) for k, v in (raw.get("headers") or {}).items()}
                resp = BatchResponse(rid, int(raw.get("status", 0)), raw.get("body"), hdrs)
                done[rid] = resp
                if resp.status in RETRYABLE:
                    retry.append(rid)
                    lowered = {k.lower(): v for k, v in hdrs.items()}
                    waits.append(self._delay(attempt, lowered.get("retry-after")))
            pending = {rid: pending[rid] for rid in retry}
            if not pending or attempt >= self.settings.max_retries:
                break
            self.sleep(max(waits))
            attempt += 1
        return done


def unreachable_key(e: BaseException) -> str | None:
    """The source key whose server did not answer in ``e``: ``authority`` (the token endpoint),
    ``graph_url`` (Graph), else ``None`` (an answer, a refusal, anything else)."""
    if isinstance(e, TokenError) and e.code == "unreachable":
        return "authority"
    if isinstance(e, SourceUnavailableError) and str(e).startswith("Graph unreachable"):
        return "graph_url"
    return None


__all__ = [
    "BATCH_LIMIT",
    "BatchRequest",
    "BatchResponse",
    "DeltaPage",
    "GraphClient",
    "GraphError",
    "GraphSettings",
    "ResyncRequired",
    "backoff_delay",
    "parse_retry_after",
    "retry_delay",
    "settings_from_source",
    "unreachable_key",
]
