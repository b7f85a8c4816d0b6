"""Who is asking: the service key, the user forwarded by Open WebUI, and the optional signature.

Every request to ``/v1/chat/completions`` and ``/query`` must carry:

1. the service key, ``Authorization: Bearer <api.api_key>`` (what Open WebUI sends as the
   connection's key), compared in constant time;
2. the user's identity, forwarded by Open WebUI with ``ENABLE_FORWARD_USER_INFO_HEADERS=true``:
   ``X-OpenWebUI-User-Email`` (required), ``-Id``, ``-Name`` (percent-encoded by Open WebUI,
   ``urllib.parse.quote(name, safe=" ")``), ``-Role`` — names configurable like Open WebUI's
   ``FORWARD_USER_INFO_HEADER_USER_*`` settings;
3. when ``api.signing_secret`` is set, a signature header (default ``X-Ancre-Signature``)::

       X-Ancre-Signature: t=<unix time, integer seconds>,v1=<hex>
       hex = lowercase hex of HMAC-SHA256(key = secret as UTF-8, msg = the UTF-8 bytes of
             <email> "\\n" <t> "\\n" <METHOD> "\\n" <path> "\\n" <lowercase hex SHA-256 of the body>)

   ``<email>``: the e-mail header value exactly as received; ``<METHOD>``: the
   HTTP method in capitals (``POST``); ``<path>``: the request path without the query string
   (``/v1/chat/completions``); the body hash covers the exact body bytes (SHA-256 of ``b""``
   when there is none). Accepted when ``|now - t| <= api.max_clock_skew_s`` — in the past or the
   future — and the digest matches (constant-time comparison). It binds the identity, the
   endpoint and the question to a party that knows the secret (a proxy or an Open WebUI pipe in
   front of ancre): holding the service key alone does not let a caller speak for any user, and
   a captured signature is good for that one request only, within the skew.

With ``api.user_jwt_secret`` set, the identity comes instead from the JWT Open WebUI (0.12)
signs when its ``FORWARD_USER_INFO_HEADER_JWT_SECRET`` is set (:func:`check_user_jwt`): header
``X-OpenWebUI-User-Jwt``, HS256 (RFC 7519 / RFC 7518), claims ``sub`` (user id), ``email``,
``name``, ``role``, ``iss = "open-webui"``, ``iat``, ``exp`` (``iat`` + 300 s by default). The
plain identity headers are then refused: only a party holding the secret speaks for a user.

Any failure raises :class:`AuthError` (HTTP 401). The e-mail then names a directory account
(:func:`directory_user`): ``api.user_map`` first, else the e-mail itself (``identity = "upn"``:
it must be a UPN, ``name@domain``, and the directory matches it against UPNs only) or its local
part (``identity = "sam"``). Names are compared exactly after NFC and ASCII-only lowercasing
(:func:`~ancre.models.fold_name`), never Unicode case folding (``jeß`` ≠ ``jess``). A
name the directory does not know gets no principal, hence only the refusal (fail closed).

**The e-mail is taken as it is, or refused** (:func:`check_identity_text`): a claim or header
carrying whitespace anywhere (a trailing space, a tab, a line break, NBSP…), a control or format
character (zero-width characters, bidi marks) or a default-ignorable one is answered 401
``invalid_identity_chars``, never stripped. Open WebUI 0.12 lets such an account exist — its
signup checks the address with an unanchored ``[^@]+@[^@]+\\.[^@]+`` and looks duplicates up by
the exact string, so ``"alice.martin@axonix.ch\\u00a0"`` is a new account that looks like
alice's — and stripping it would answer it with alice's rights. The same rule holds for
``api.user_map``'s accounts. One limit of the plain header (not of the JWT): HTTP itself
removes spaces and tabs around a header value before any server code sees it (RFC 9110 §5.5),
so ``"alice@x.ch "`` arrives as ``"alice@x.ch"``; only the signed JWT carries the address exactly.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import jwt

from ancre.errors import AncreError, ConfigError
from ancre.models import fold_name, identity_defect, nfc, visible_identity
from ancre.settings import resolve_secret
from ancre.settings.api import ApiConfig

MAX_IDENTITY_CHARS = 320
"""Longest e-mail accepted (RFC 5321: 64 + 1 + 255)."""
JWT_ALGORITHM = "HS256"
"""The one algorithm accepted for the user JWT (Open WebUI's ``_mint_forward_user_jwt``)."""
JWT_ISSUER = "open-webui"
"""The ``iss`` claim Open WebUI puts in the user JWT."""
JWT_MIN_SECRET_BYTES = 32
"""Shortest JWT secret accepted: an HS256 key at least as long as the hash (RFC 7518 §3.2)."""
MAX_JWT_CHARS = 8192
"""Longest user JWT accepted (Open WebUI's is a few hundred characters)."""


class AuthError(AncreError):
    """The request is not authenticated (HTTP 401). ``code``: ``invalid_api_key``,
    ``missing_identity``, ``invalid_identity``, ``invalid_identity_chars``, ``missing_signature``,
    ``invalid_signature``, ``stale_signature``, ``missing_user_jwt``, ``invalid_user_jwt``,
    ``expired_user_jwt`` or ``plain_identity_refused``. The message never contains the key or the
    secret. ``user_id``: the Open WebUI user id the request named (JWT ``sub`` or the user id
    header), when known — for the admin's log line; ``shown``: the refused identity as staff may
    see it (:func:`~ancre.models.visible_identity`: ``alice@x.ch[U+00A0]``), for
    ``invalid_identity_chars``."""

    def __init__(self, code: str, message: str, *, user_id: str | None = None, shown: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.user_id = user_id
        self.shown = shown


def check_identity_text(value: str, what: str, *, user_id: str | None = None) -> str:
    """``value`` (an e-mail claim or header, already decoded) NFC-normalised, when it can be taken
    as an identity as it is (:func:`~ancre.models.identity_defect`: no whitespace anywhere, no
    control, format or default-ignorable character, at most :data:`MAX_IDENTITY_CHARS`). Raises
    :class:`AuthError` ``missing_identity`` when empty, ``invalid_identity_chars`` naming
    ``what`` (``"the JWT's email claim"``), the character and its position otherwise — never a
    stripped value that could be another account's."""
    if not value:
        raise AuthError("missing_identity", f"missing user identity: {what} is empty", user_id=user_id)
    defect = identity_defect(value)
    if defect is not None:
        raise AuthError(
            "invalid_identity_chars",
            f"{what} {visible_identity(value)[:MAX_IDENTITY_CHARS]!r} carries {defect}: an identity is taken as it is, "
            "never stripped, so it designates no directory account", user_id=user_id,
            shown=visible_identity(value[:MAX_IDENTITY_CHARS], "[]"),
        )
    email = nfc(value)
    if len(email) > MAX_IDENTITY_CHARS:
        raise AuthError("invalid_identity", f"invalid identity: {what} is longer than {MAX_IDENTITY_CHARS} characters",
                        user_id=user_id)
    return email


@dataclass(frozen=True)
class Identity:
    """The caller as forwarded by Open WebUI: ``email`` (NFC, otherwise as received), ``user`` (the name the
    directory is asked for), ``header`` (the e-mail header value — or the JWT's ``email`` claim —
    exactly as received, decoded from UTF-8: what the audit log records next to the resolved
    account), and the optional
    ``user_id``, ``name`` (percent-decoded), ``role``."""

    email: str
    user: str
    user_id: str | None = None
    name: str | None = None
    role: str | None = None
    header: str = ""


@dataclass(frozen=True)
class Secrets:
    """The resolved service key, signing secret (``None``: no signature required) and user JWT
    secret (``None``: identity from the plain headers)."""

    api_key: str
    signing_secret: str | None
    user_jwt_secret: str | None = None

    @classmethod
    def from_config(cls, cfg: ApiConfig) -> Secrets:
        """Resolve ``api.api_key``, ``api.signing_secret`` and ``api.user_jwt_secret``
        (:class:`~ancre.settings.secrets.SecretRef`). Raises :class:`ConfigError` when no service
        key is configured (the API refuses to start without one) or a named environment variable
        or file is missing (naming the key, e.g. ``api.api_key.env``)."""
        key = resolve_secret(cfg.api_key, "api.api_key")
        if not key:
            raise ConfigError(
                'api.api_key is required to start the API (e.g. api_key = { env = "ANCRE_API_KEY" } '
                "naming an environment variable holding it, or ANCRE_API__API_KEY)"
            )
        secret = resolve_secret(cfg.signing_secret, "api.signing_secret")
        jwt_secret = resolve_secret(cfg.user_jwt_secret, "api.user_jwt_secret")
        if jwt_secret is not None and len(jwt_secret.strip().encode()) < JWT_MIN_SECRET_BYTES:
            raise ConfigError(
                f"api.user_jwt_secret: the JWT secret must be at least {JWT_MIN_SECRET_BYTES} bytes "
                "(RFC 7518 §3.2); use the same value as Open WebUI's FORWARD_USER_INFO_HEADER_JWT_SECRET"
            )
        # Open WebUI strips the secret it reads from its environment: do the same
        return cls(key, secret or None, jwt_secret.strip() if jwt_secret else None)


def secret_fingerprint(secret: str) -> str:
    """The first 8 hex digits of the SHA-256 of ``secret`` (UTF-8): what
    ``printf %s "$SECRET" | sha256sum | cut -c1-8`` prints, to compare two hosts' secrets
    without showing them."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()[:8]


def identity_mode(cfg: ApiConfig, secrets: Secrets, *, fingerprint: bool = False) -> str:
    """One line saying how the API takes the user: from Open WebUI's signed JWT (where its secret
    comes from, its length in bytes and, with ``fingerprint``, :func:`secret_fingerprint`), or
    from the plain e-mail header (with or without the identity signature)."""
    if secrets.user_jwt_secret is not None:
        where = cfg.user_jwt_secret.where("api.user_jwt_secret") if cfg.user_jwt_secret else "api.user_jwt_secret"
        fp = f", sha256 {secret_fingerprint(secrets.user_jwt_secret)}" if fingerprint else ""
        return (f"user JWT secret from {where}: {len(secrets.user_jwt_secret.encode())} bytes{fp}; the user is read "
                f"from Open WebUI's signed {cfg.user_jwt_header} only")
    if secrets.signing_secret is not None:
        return (f"no user JWT secret; the user is read from {cfg.user_email_header}, signed with "
                f"{cfg.signature_header}")
    return (f"no user JWT secret (api.user_jwt_secret not set): the user is read from the plain "
            f"{cfg.user_email_header} header, so whoever holds the service key can name any user")


def _header_text(value: str) -> str:
    """A header value as text: ASGI servers decode header bytes as Latin-1; UTF-8 senders are
    re-decoded. Raises :class:`AuthError` on bytes that are not UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise AuthError("invalid_identity", "identity headers must be UTF-8") from None


def _raw(value: str, code: str) -> bytes:
    """The bytes of a header value as received (ASGI decodes them as Latin-1)."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        raise AuthError(code, "header value is not Latin-1/UTF-8 bytes") from None


def check_api_key(authorization: str | None, api_key: str) -> None:
    """Check ``Authorization: Bearer <key>`` against ``api_key`` in constant time. Raises
    :class:`AuthError` (``invalid_api_key``) when missing, malformed or wrong."""
    if not authorization:
        raise AuthError("invalid_api_key", "missing service key: send 'Authorization: Bearer <key>'")
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise AuthError("invalid_api_key", "malformed Authorization header: expected 'Bearer <key>'")
    if not hmac.compare_digest(_raw(given.strip(), "invalid_api_key"), api_key.encode("utf-8")):
        raise AuthError("invalid_api_key", "invalid service key")


def signature(secret: str, email: str, timestamp: int, method: str, path: str, body: bytes = b"") -> str:
    """The signature header value of a request by ``email`` at ``timestamp`` (unix seconds):
    ``t=<timestamp>,v1=<hex HMAC-SHA256(secret, string to sign)>``, the string to sign being
    ``email, timestamp, METHOD, path, hex SHA-256 of body`` joined by ``"\\n"`` (see the module doc).
    ``path`` is the request path without the query string; ``body`` the exact body bytes."""
    t = int(timestamp)
    msg = "\n".join((email, str(t), method.upper(), path, hashlib.sha256(body).hexdigest())).encode()
    return f"t={t},v1={hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()}"


def check_signature(
    header: str | None, email: str, secret: str, max_skew_s: float, now: float | None = None, *,
    method: str, path: str, body: bytes = b"",
) -> None:
    """Verify a signature header (see the module doc) of the request ``method path`` with ``body``
    by ``email``; ``now`` in unix seconds (default the clock). Raises :class:`AuthError`:
    ``missing_signature``, ``invalid_signature`` (malformed, or a digest that does not match this
    e-mail, time, method, path and body), ``stale_signature`` (timestamp further than
    ``max_skew_s`` in the past or in the future)."""
    if not header:
        raise AuthError("missing_signature", "missing identity signature")
    fields: dict[str, str] = {}
    for part in header.split(","):
        k, sep, v = part.strip().partition("=")
        if not sep or k in fields:
            raise AuthError("invalid_signature", "malformed identity signature: expected 't=<unix>,v1=<hex>'")
        fields[k] = v
    t, given = fields.get("t", ""), fields.get("v1", "")
    if not t.isascii() or not t.isdigit() or len(t) > 12 or not given:
        raise AuthError("invalid_signature", "malformed identity signature: expected 't=<unix>,v1=<hex>'")
    now = time.time() if now is None else now
    if int(t) - now > max_skew_s:
        raise AuthError(
            "stale_signature", f"identity signature dated in the future beyond the allowed clock skew ({max_skew_s:g} s)"
        )
    if now - int(t) > max_skew_s:
        raise AuthError("stale_signature", f"identity signature older than the allowed clock skew ({max_skew_s:g} s)")
    expected = signature(secret, email, int(t), method, path, body).rpartition("v1=")[2]
    if not hmac.compare_digest(_raw(given.strip().lower(), "invalid_signature"), expected.encode()):
        raise AuthError("invalid_signature", "invalid identity signature")


def directory_user(email: str, cfg: ApiConfig) -> str:
    """The directory name an e-mail designates: ``cfg.user_map`` first (exact after
    :func:`~ancre.acl.directory.fold_name`), else the e-mail itself (``identity = "upn"``) or
    its part before the last ``@`` (``"sam"``). Raises :class:`AuthError` (``invalid_identity``)
    when, with ``"upn"``, the e-mail is not a UPN (``name@domain``, no ``\\``), or with
    ``"sam"`` its local part is not a plain account name — so that the directory is never
    asked for another kind of name than the one configured; ``invalid_identity_chars`` when
    ``api.user_map`` maps it to a name carrying a character no account name holds
    (:func:`~ancre.models.identity_defect`)."""
    mapped = cfg.user_map.get(fold_name(email))
    if mapped:
        if identity_defect(mapped, inner_space=True) is not None:
            raise AuthError("invalid_identity_chars", f"api.user_map maps this e-mail to {visible_identity(mapped)!r}, "
                            f"which carries {identity_defect(mapped, inner_space=True)}: no account can match it")
        return mapped
    local, at, domain = email.rpartition("@")
    if cfg.identity == "sam":
        name = local if at else email
        if not name or "\\" in name or "@" in name:
            raise AuthError("invalid_identity", "api.identity = 'sam': the e-mail's part before @ must be an account name")
        return name
    if not at or not local or not domain or "\\" in email:
        raise AuthError("invalid_identity", "api.identity = 'upn': the forwarded e-mail must be a UPN (name@domain)")
    return email


DEFAULT_JWT_LIFETIME_S = 300.0
"""Longest user JWT lifetime accepted by default: Open WebUI mints 5-minute tokens."""


def check_user_jwt(
    token: str | None, secret: str, leeway_s: float, max_lifetime_s: float = DEFAULT_JWT_LIFETIME_S
) -> dict[str, Any]:
    """The verified claims of Open WebUI's user JWT ``token`` (see the module doc). PyJWT checks
    the HS256 signature with ``secret`` (only HS256: ``none``, RS256/ES256 and HS384/HS512
    tokens are refused, and so is a secret that is a PEM public key — no RS/HS confusion), that
    ``exp``, ``iat``, ``iss`` and ``email`` are present, ``exp`` not past and ``iat`` not
    future (``leeway_s`` seconds of clock skew either way, against the clock), ``iss`` =
    :data:`JWT_ISSUER`; then that the token lives no longer than ``max_lifetime_s`` seconds
    (``exp - iat``, plus the leeway): a captured token minted with a 10-year ``exp`` is no
    identity. Raises :class:`AuthError`:
    ``missing_user_jwt``, ``expired_user_jwt``, ``invalid_user_jwt`` (anything else, the
    reason in the message; never the token or the secret)."""
    if not token or not token.strip():
        raise AuthError("missing_user_jwt", "missing user identity: the signed JWT header is required")
    token = token.strip()
    if len(token) > MAX_JWT_CHARS or not token.isascii():
        raise AuthError("invalid_user_jwt", "invalid user JWT: malformed")
    options: Any = {"require": ["exp", "iat", "iss", "email"], "verify_signature": True,
                    "verify_exp": True, "verify_iat": True, "verify_iss": True}
    try:
        if jwt.get_unverified_header(token).get("alg") != JWT_ALGORITHM:
            raise AuthError("invalid_user_jwt", f"invalid user JWT: the algorithm must be {JWT_ALGORITHM}")
        claims = jwt.decode(token, secret, algorithms=[JWT_ALGORITHM], issuer=JWT_ISSUER,
                            leeway=leeway_s, options=options)
    except jwt.ExpiredSignatureError:
        raise AuthError("expired_user_jwt", "expired user JWT") from None
    except jwt.PyJWTError as e:
        raise AuthError("invalid_user_jwt", f"invalid user JWT: {type(e).__name__}") from None
    if not isinstance(claims.get("email"), str):
        raise AuthError("invalid_user_jwt", "invalid user JWT: the email claim must be a string")
    try:
        lifetime = float(claims["exp"]) - float(claims["iat"])
    except (TypeError, ValueError):
        raise AuthError("invalid_user_jwt", "invalid user JWT: exp and iat must be numbers") from None
    if lifetime > max_lifetime_s + leeway_s:
        raise AuthError("invalid_user_jwt", f"invalid user JWT: it lives {lifetime:.0f} s, longer than the "
                                            f"{max_lifetime_s:g} s accepted (api.user_jwt_max_lifetime_s)")
    return claims


def _jwt_identity(headers: Mapping[str, str], cfg: ApiConfig, secret: str) -> Identity:
    """The identity carried by the user JWT; plain identity headers are refused."""
    plain = [h for h in (cfg.user_email_header, cfg.user_id_header, cfg.user_name_header, cfg.user_role_header)
             if h in headers]
    if plain:
        raise AuthError("plain_identity_refused",
                        f"plain identity headers ({', '.join(plain)}) are refused: this server takes the "
                        f"user from the signed {cfg.user_jwt_header} header only")
    claims = check_user_jwt(headers.get(cfg.user_jwt_header), secret, cfg.user_jwt_leeway_s,
                            cfg.user_jwt_max_lifetime_s)
    def text(name: str) -> str | None:
        value = claims.get(name)
        return str(value) if value is not None and str(value) else None

    # taken as it is, or refused: never stripped into another account (module doc)
    email = check_identity_text(claims["email"], "the user JWT's email claim", user_id=text("sub"))
    return Identity(email=email, user=_directory_user(email, cfg, text("sub")), user_id=text("sub"),
                    name=text("name"), role=text("role"), header=claims["email"])


def _directory_user(email: str, cfg: ApiConfig, user_id: str | None) -> str:
    """:func:`directory_user`, its :class:`AuthError` carrying the Open WebUI ``user_id``."""
    try:
        return directory_user(email, cfg)
    except AuthError as e:
        e.user_id = user_id
        raise


def authenticate(
    headers: Mapping[str, str], cfg: ApiConfig, secrets: Secrets, now: float | None = None, *,
    method: str = "", path: str = "", body: bytes = b"",
) -> Identity:
    """The caller of the request ``method path`` with ``headers`` (case-insensitive mapping, e.g.
    Starlette's) and ``body`` (its bytes): service key, identity headers, signature when a secret
    is configured, in that order — or, with a user JWT secret, service key then the JWT
    (:func:`check_user_jwt`). Raises :class:`AuthError` at the first failure."""
    check_api_key(headers.get("authorization"), secrets.api_key)
    if secrets.user_jwt_secret is not None:
        return _jwt_identity(headers, cfg, secrets.user_jwt_secret)
    raw_email = headers.get(cfg.user_email_header)
    user_id = _header_text(headers[cfg.user_id_header]) if headers.get(cfg.user_id_header) else None
    if not raw_email:
        raise AuthError("missing_identity", f"missing user identity: the {cfg.user_email_header} header is required",
                        user_id=user_id)
    header = _header_text(raw_email)
    email = check_identity_text(header, f"the {cfg.user_email_header} header", user_id=user_id)
    if secrets.signing_secret is not None:
        check_signature(headers.get(cfg.signature_header), header, secrets.signing_secret, cfg.max_clock_skew_s, now,
                        method=method, path=path, body=body)
    name = headers.get(cfg.user_name_header)
    return Identity(
        header=header,
        email=email,
        user=_directory_user(email, cfg, user_id),
        user_id=user_id,
        name=unquote(_header_text(name)) if name else None,
        role=_header_text(headers[cfg.user_role_header]) if headers.get(cfg.user_role_header) else None,
    )


__all__ = [
    "AuthError",
    "Identity",
    "Secrets",
    "authenticate",
    "check_api_key",
    "check_identity_text",
    "check_signature",
    "check_user_jwt",
    "directory_user",
    "identity_mode",
    "secret_fingerprint",
    "signature",
]
