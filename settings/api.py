"""Configuration of the RAG API (``[api]`` in ``ancre.toml``), hooked into
:class:`ancre.config.Settings` as ``api``. See :mod:`ancre.api.app`.

Secrets (``api_key``, ``signing_secret``, ``user_jwt_secret``) are :class:`~ancre.settings.secrets.SecretRef`
values, best kept out of the file (``api_key = { env = "ANCRE_API_KEY" }``, a systemd credential,
or ``ANCRE_API__API_KEY``); they are never logged.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ancre.models import fold_identity, nfc
from ancre.settings.secrets import Secret, legacy_env

_HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
"""An HTTP header field name (RFC 9110 "token")."""


class ApiConfig(BaseModel):
    """``ancre api`` / ``ancre serve``: where the API listens, how callers authenticate, limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    host: str = "127.0.0.1"
    """Listening address. Keep loopback unless Open WebUI runs on another host (then bind the
    VM's address and firewall the port to Open WebUI's host)."""
    port: int = Field(8000, ge=0, le=65535)
    """Listening TCP port (0: any free port, logged at start)."""
    model_id: str = Field("ancre", min_length=1, max_length=200)
    """The one model id listed by ``GET /v1/models`` and expected in ``/v1/chat/completions``."""

    api_key: Secret = None
    """The service key Open WebUI (or a machine client) sends as ``Authorization: Bearer <key>``.
    Required to start (e.g. ``{ env = "ANCRE_API_KEY" }``, or ``ANCRE_API__API_KEY``)."""

    user_email_header: str = Field("X-OpenWebUI-User-Email", pattern=_HEADER_NAME)
    """Header carrying the user's e-mail (Open WebUI ``FORWARD_USER_INFO_HEADER_USER_EMAIL``). Required."""
    user_id_header: str = Field("X-OpenWebUI-User-Id", pattern=_HEADER_NAME)
    """Open WebUI ``FORWARD_USER_INFO_HEADER_USER_ID`` (recorded, not required)."""
    user_name_header: str = Field("X-OpenWebUI-User-Name", pattern=_HEADER_NAME)
    """Open WebUI ``FORWARD_USER_INFO_HEADER_USER_NAME``; Open WebUI percent-encodes it."""
    user_role_header: str = Field("X-OpenWebUI-User-Role", pattern=_HEADER_NAME)
    """Open WebUI ``FORWARD_USER_INFO_HEADER_USER_ROLE`` (recorded, not required)."""

    identity: Literal["upn", "sam"] = "upn"
    """How the forwarded e-mail names a directory account: ``upn`` — the e-mail as is, which must
    be a UPN (``name@domain``: anything else is refused, HTTP 401) and is matched against UPNs only
    (the file directory's ``upn``, LDAP's ``userPrincipalName``/``mail``), never against an
    account name; ``sam`` — the part before ``@`` is the sAMAccountName
    (``bruno.favre@axonix.ch`` → ``bruno.favre``). Matching is exact after NFC and ASCII-only
    lowercasing: ``jeß.rossi@…`` never matches ``jess.rossi@…``."""
    user_map: dict[str, str] = Field(default_factory=dict)
    """Explicit e-mail → directory account overrides, checked first (the e-mail matched exactly
    after NFC and ASCII-only lowercasing, nothing stripped),
    e.g. ``{"b.favre@axonix.com" = "bruno"}``. An entry whose e-mail or account carries
    whitespace or an invisible character can never be used (``ancre check`` warns)."""

    signing_secret: Secret = None
    """When set, every authenticated request must also carry
    ``signature_header`` = ``t=<unix seconds>,v1=<hex HMAC-SHA256(secret, string to sign)>``, the
    string to sign binding the e-mail, the time, the method, the path and a SHA-256 of the body
    (:mod:`ancre.api.identity`, docs/API.md "Identity signature")."""
    signature_header: str = Field("X-Ancre-Signature", pattern=_HEADER_NAME)
    """Header carrying the identity signature (with ``signing_secret``)."""
    max_clock_skew_s: float = Field(300.0, gt=0, le=86_400)
    """A signature whose timestamp is further than this from the server's clock (seconds, either
    way) is refused."""

    user_jwt_secret: Secret = None
    """When set, the user's identity is read only from the HS256 JWT
    Open WebUI signs with the same secret (its ``FORWARD_USER_INFO_HEADER_JWT_SECRET``), sent in
    ``user_jwt_header``; the plain ``user_*_header`` headers are then refused (HTTP 401). At least
    32 bytes (RFC 7518 §3.2)."""
    user_jwt_header: str = Field("X-OpenWebUI-User-Jwt", pattern=_HEADER_NAME)
    """Open WebUI ``FORWARD_USER_INFO_HEADER_JWT``."""
    user_jwt_leeway_s: float = Field(30.0, ge=0, le=3600)
    """Clock skew allowed when checking the JWT's ``exp`` and ``iat`` (seconds)."""
    user_jwt_max_lifetime_s: float = Field(300.0, gt=0, le=86_400)
    """Longest lifetime (``exp - iat``, seconds) of a user JWT accepted; Open WebUI mints
    5-minute tokens. A longer-lived one is refused (HTTP 401): a token taken from a log or a proxy
    is good for minutes, not years."""

    task_header: str | None = Field("X-OpenWebUI-Task", pattern=_HEADER_NAME)
    """Header naming an Open WebUI side request (title, tags, follow-ups, queries, autocomplete…):
    set the connection's header ``{"X-OpenWebUI-Task": "{{TASK}}"}`` in Open WebUI. A request whose
    value is not empty is answered in the format Open WebUI parses, without retrieval, model call
    or audit record (see docs/OPENWEBUI.md); ``None`` (``task_header = ""``): every request is a question."""

    citations: Literal["native", "markdown"] = "native"
    """How a ``/v1`` answer gives its sources. ``native``: a streamed answer sends each source as
    Open WebUI's ``source`` event (its chips and side panel: the file, its folder, the passages)
    and its citations as ``[n]`` in the same order; a non-streamed answer, which has no event
    channel, gets the Markdown « Sources » block. ``markdown``: always the Markdown block after
    the text and the citations as ``[file name]`` (clients that show text only)."""
    support_contact: str = Field("votre service informatique", min_length=1, max_length=200)
    """Whom a staff user is told to contact when his account is unknown to the directory or the
    service fails: a French noun phrase read after « Contactez … » (``"le service informatique
    (support@axonix.ch)"``)."""

    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest accepted request body in bytes (HTTP 413 beyond). Open WebUI sends the whole
    conversation, so leave room for long chats."""
    max_question_chars: int = Field(4000, ge=1, le=1_000_000)
    """Longest accepted question (the last user message), in characters (HTTP 422 beyond)."""

    header_timeout_s: float = Field(10.0, gt=0, le=3600)
    """Seconds a new connection has to send its request line and headers; then it is closed."""
    body_timeout_s: float = Field(30.0, gt=0, le=3600)
    """Seconds a request has to send its whole body once its headers arrived; then HTTP 408 and
    the connection is closed."""
    keep_alive_s: int = Field(5, ge=1, le=3600)
    """Seconds an idle keep-alive connection is kept open (and has to send the next request's
    headers) after a response (uvicorn ``timeout_keep_alive``)."""
    max_connections: int = Field(100, ge=1, le=100_000)
    """Open connections served at once; beyond, requests are answered HTTP 503 at once and the
    connection closed (uvicorn ``limit_concurrency``)."""

    _legacy_env = legacy_env("api_key", "signing_secret", "user_jwt_secret")

    @field_validator("task_header", mode="before")
    @classmethod
    def _no_task_header(cls, v: object) -> object:
        return None if v == "" else v

    @field_validator("user_map")
    @classmethod
    def _fold_keys(cls, v: dict[str, str]) -> dict[str, str]:
        # as written, only NFC + ASCII-lowercased: an entry with a stray space or NBSP is never
        # stripped into a working one (ancre check reports it; api/identity.py refuses it)
        return {fold_identity(k): nfc(val) for k, val in v.items()}

    @model_validator(mode="after")
    def _one_source_per_secret(self) -> ApiConfig:
        if self.user_jwt_secret is not None and self.signing_secret is not None:
            raise ValueError("api: the JWT identity (user_jwt_secret) replaces the identity signature "
                             "(signing_secret): set one of them")
        headers = [self.user_email_header, self.user_id_header, self.user_name_header, self.user_role_header,
                   self.signature_header, self.user_jwt_header, *([self.task_header] if self.task_header else [])]
        if len({h.lower() for h in headers}) != len(headers):
            raise ValueError("api: the user, signature, JWT and task header names must be distinct")
        return self


__all__ = ["ApiConfig"]
