"""App-only (client credentials) tokens for Microsoft Graph and SharePoint REST, from msal.

One :class:`TokenProvider` per app registration holds an msal ``ConfidentialClientApplication``
and its in-memory token cache. msal answers from the cache while a token has more than five
minutes left, and asks the token endpoint again before that (so a token is renewed *before* it
expires); :meth:`TokenProvider.invalidate` drops a token that a server refused (revoked, or the
clock was wrong) so the next call gets a fresh one.

Credentials (Microsoft identity platform, "certificate credentials" and "client secrets"):

- :class:`CertificateCredential`: PEM private key + the certificate's SHA-1 thumbprint (hex, as
  the Entra portal shows it). Accepted by Graph *and* SharePoint REST.
- :class:`PfxCredential`: the same as a PKCS#12 file with its passphrase; loaded with
  ``cryptography`` and handed to msal as key + thumbprint.
- :class:`SecretCredential`: a client secret. Graph accepts the tokens; SharePoint REST refuses
  app-only tokens obtained with a secret ("Unsupported app only token"), see docs/SHAREPOINT.md.

``authority`` is the Entra host (``https://login.microsoftonline.com``, sovereign clouds such as
``https://login.microsoftonline.us``). For a host that is not a Microsoft authority (tests, a
private proxy) msal's instance discovery is turned off: it would otherwise ask
``login.microsoftonline.com`` to validate the host.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ancre.errors import ConfigError, SourceUnavailableError

MICROSOFT_AUTHORITY_HOSTS = frozenset({
    "login.microsoftonline.com",
    "login.microsoft.com",
    "login.windows.net",
    "login.microsoftonline.us",
    "login.chinacloudapi.cn",
    "login.partner.microsoftonline.cn",
})
"""Entra authority hosts (public and national clouds, Microsoft identity platform docs); msal
validates these itself. Any other host is trusted as configured (instance discovery off)."""


@dataclass(frozen=True)
class CertificateCredential:
    """A certificate credential: ``private_key_path`` (PEM, may hold the certificate too) and the
    certificate's SHA-1 ``thumbprint`` in hex (colons and spaces ignored)."""

    private_key_path: Path
    thumbprint: str


@dataclass(frozen=True)
class PfxCredential:
    """A certificate credential as a PKCS#12 (``.pfx``) file and its passphrase (``None``: none)."""

    pfx_path: Path
    passphrase: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SecretCredential:
    """A client secret (Graph only: SharePoint REST refuses app-only tokens obtained with it)."""

    secret: str = field(repr=False)


Credential = CertificateCredential | PfxCredential | SecretCredential


class TokenError(SourceUnavailableError):
    """The token endpoint refused or could not be reached (``code``: the OAuth ``error`` such as
    ``invalid_client``; ``message``: its ``error_description``, with the AADSTS number).
    A :class:`~ancre.errors.SourceUnavailableError`: a pass that meets it purges nothing."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"token request refused: {code}: {message}")
        self.code = code
        self.message = message


def msal_credential(credential: Credential) -> str | dict[str, str]:
    """The ``client_credential`` argument msal takes for ``credential``: the secret string, or
    ``{"private_key": PEM, "thumbprint": SHA-1 hex}``. Raises ``ConfigError`` when a key or PFX file
    can't be read or decrypted."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    if isinstance(credential, SecretCredential):
        return credential.secret
    if isinstance(credential, CertificateCredential):
        try:
            pem = Path(credential.private_key_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"certificate_path: cannot read {credential.private_key_path}: {e}") from e
        thumb = credential.thumbprint.replace(":", "").replace(" ", "").upper()
        return {"private_key": pem, "thumbprint": thumb}
    try:
        data = Path(credential.pfx_path).read_bytes()
        key, cert, _ = pkcs12.load_key_and_certificates(
            data, credential.passphrase.encode() if credential.passphrase is not None else None
        )
    except (OSError, ValueError) as e:
        raise ConfigError(f"pfx_path: cannot load {credential.pfx_path}: {e}") from e
    if key is None or cert is None:
        raise ConfigError(f"pfx_path: {credential.pfx_path} holds no private key and certificate")
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    # x5t is the certificate's SHA-1 thumbprint (RFC 7515 §4.1.7; Entra certificate credentials).
    return {"private_key": pem, "thumbprint": cert.fingerprint(hashes.SHA1()).hex().upper()}  # x5t is SHA-1 by spec


def requests_session(verify: bool | str) -> Any:
    """A ``requests.Session`` for msal's ``http_client`` that verifies TLS with ``verify`` (True:
    the system store; a path: that CA bundle). With a CA path the session ignores the environment
    (``trust_env = False``): requests would otherwise let ``REQUESTS_CA_BUNDLE`` win over
    ``Session.verify``."""
    import requests

    session = requests.Session()
    if verify is not True:
        session.verify = verify
        session.trust_env = False
    return session


class TokenProvider:
    """App-only access tokens for one app registration (thread-safe, one token request at a time).

    ``token(resource)``: a bearer token for ``resource`` (an origin such as
    ``https://graph.microsoft.com`` or ``https://axonix.sharepoint.com``; scope
    ``<resource>/.default``). Raises :class:`TokenError` when Entra refuses or can't be reached,
    ``ConfigError`` for an unreadable key.
    """

    def __init__(
        self,
        *,
        tenant_id: str,
        client_id: str,
        credential: Credential,
        authority: str = "https://login.microsoftonline.com",
        verify: bool | str = True,
        timeout_s: float = 30.0,
    ) -> None:
        self.tenant_id = tenant_id
        self.client_id = client_id
        self.credential = credential
        self.authority = authority.rstrip("/")
        self.verify = verify
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._app: Any = None
        self._session: Any = None

    def _application(self) -> Any:
        import msal

        if self._app is None:
            self._session = requests_session(self.verify)
            host = (urlsplit(self.authority).hostname or "").lower()
            known = host in MICROSOFT_AUTHORITY_HOSTS
            self._app = msal.ConfidentialClientApplication(
                self.client_id,
                client_credential=msal_credential(self.credential),
                authority=f"{self.authority}/{self.tenant_id}",
                http_client=self._session,
                timeout=self.timeout_s,
                token_cache=msal.TokenCache(),
                validate_authority=known,
                instance_discovery=None if known else False,
            )
        return self._app

    def token_response(self, resource: str) -> dict[str, Any]:
        """msal's answer for ``resource``: ``access_token``, ``token_type``, ``expires_in`` (seconds
        left). Raises :class:`TokenError`."""
        scope = f"{resource.rstrip('/')}/.default"
        with self._lock:
            try:
                app = self._application()
                result = app.acquire_token_for_client(scopes=[scope])
            except ConfigError:
                raise
            except ValueError as e:  # msal: OIDC discovery failed (unknown tenant, bad authority)
                raise TokenError("authority", str(e)) from e
            except OSError as e:  # requests' ConnectionError/Timeout derive from OSError
                raise TokenError("unreachable", f"{self.authority}: {e}") from e
        if not isinstance(result, dict) or "access_token" not in result:
            result = result if isinstance(result, dict) else {}
            raise TokenError(str(result.get("error", "no_token")), str(result.get("error_description", ""))[:500])
        return result

    def token(self, resource: str) -> str:
        """A bearer token for ``resource`` (from msal's cache while it has > 5 min left)."""
        return str(self.token_response(resource)["access_token"])

    def invalidate(self, resource: str) -> None:
        """Forget the cached token(s) for ``resource`` (a server answered 401 with it)."""
        import msal

        scope = f"{resource.rstrip('/')}/.default"
        with self._lock:
            if self._app is None:
                return
            cache = self._app.token_cache
            for entry in list(cache.search(msal.TokenCache.CredentialType.ACCESS_TOKEN, target=[scope])):
                cache.remove_at(entry)

    def close(self) -> None:
        """Close the HTTP session msal used."""
        with self._lock:
            if self._session is not None:
                self._session.close()
            self._app = None
            self._session = None


_SHARED: dict[tuple[object, ...], TokenProvider] = {}
_SHARED_LOCK = threading.Lock()


def shared_provider(
    *, tenant_id: str, client_id: str, credential: Credential, authority: str, verify: bool | str, timeout_s: float
) -> TokenProvider:
    """The process-wide :class:`TokenProvider` of one app registration + authority (its token cache
    is shared by the Graph client and every SharePoint REST client of a source)."""
    key = (tenant_id, client_id, credential, authority.rstrip("/"), verify, timeout_s)
    with _SHARED_LOCK:
        provider = _SHARED.get(key)
        if provider is None:
            provider = TokenProvider(tenant_id=tenant_id, client_id=client_id, credential=credential,
                                     authority=authority, verify=verify, timeout_s=timeout_s)
            _SHARED[key] = provider
        return provider


__all__ = [
    "CertificateCredential",
    "Credential",
    "PfxCredential",
    "SecretCredential",
    "TokenError",
    "TokenProvider",
    "msal_credential",
    "requests_session",
    "shared_provider",
]
