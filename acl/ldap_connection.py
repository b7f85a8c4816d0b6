"""The connection to Active Directory of :class:`~ancre.acl.ldap_directory.LdapDirectory`
(:class:`LdapConnection`): the servers of ``directory.url`` tried in order, LDAPS or StartTLS with
the certificate checked by OpenSSL (chain and name), a simple bind, and one search at a time —
re-opened once after a connection error. Failures are :class:`~ancre.errors.DirectoryError` with
one line naming the setting to change (module doc of :mod:`ancre.acl.ldap_directory`)."""

from __future__ import annotations

import contextlib
import math
import ssl
import threading
from collections.abc import Iterable
from typing import Any, Literal
from urllib.parse import urlsplit

import ldap3
from ldap3.core.exceptions import LDAPException

from ancre.errors import ConfigError, DirectoryError
from ancre.settings.locations import check_ca_file

NO_SUCH_OBJECT = 32
"""LDAP result code noSuchObject (RFC 4511 4.1.9)."""
STRONGER_AUTH_REQUIRED = 8
"""LDAP result code strongerAuthRequired (RFC 4511 4.1.9): the DC wants TLS or signing."""
_HOSTNAME_MISMATCH = (62, 64)
"""OpenSSL X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH."""


class _NameCheckedTls(ldap3.Tls):
    """``ldap3.Tls`` whose handshake OpenSSL checks in full (chain against ``ca_file`` or the
    system's CAs, and ``server_name`` — host name or IP address — against the certificate), instead
    of ldap3's own name matching. Keeps the last verification error for the message."""

    def __init__(self, ca_file: str | None, server_name: str | None) -> None:
        super().__init__(validate=ssl.CERT_REQUIRED, ca_certs_file=ca_file, sni=server_name)
        self.server_name = server_name
        self.verify_error: ssl.SSLCertVerificationError | None = None

    def wrap_socket(self, connection: Any, do_handshake: bool = False) -> None:  # ldap3's signature
        ctx = ssl.create_default_context(cafile=self.ca_certs_file)  # CERT_REQUIRED, check_hostname
        name = self.server_name or connection.server.host
        self.verify_error = None
        try:
            connection.socket = ctx.wrap_socket(connection.socket, server_hostname=name, do_handshake_on_connect=do_handshake)
        except ssl.SSLCertVerificationError as e:
            self.verify_error = e
            raise


def certificate_names(cert: dict[str, Any]) -> list[str]:
    """The names a certificate (``SSLSocket.getpeercert()`` form) is valid for: its
    subjectAltName DNS names and IP addresses, else its subject's commonName (RFC 6125 6.4.4)."""
    names = [str(v) for k, v in cert.get("subjectAltName", ()) if k in ("DNS", "IP Address")]
    if not names:
        names = [str(v) for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]
    return names


class LdapConnection:
    """One connection to the directory: ``urls`` (``ldaps://host[:port]`` or
    ``ldap://host[:port]``, tried in order), a simple bind as ``bind_dn`` / ``bind_password``
    (both ``None``: anonymous), ``tls`` ``"ldaps"``/``"starttls"``/``"none"`` (``None``: from each
    URL's scheme), ``ca_file`` a PEM bundle, ``tls_server_name`` the name checked in the DC's
    certificate (default: each URL's host), ``timeout_s`` connect/answer timeout in seconds.
    Raises :class:`ConfigError` on an inconsistent URL/TLS pair. Thread-safe (one connection,
    serialised)."""

    def __init__(
        self,
        urls: Iterable[str],
        *,
        bind_dn: str | None,
        bind_password: str | None,
        tls: str | None,
        ca_file: str | None,
        tls_server_name: str | None,
        timeout_s: float,
    ) -> None:
        self.urls = tuple(urls)
        if not self.urls:
            raise ConfigError("directory.url: no LDAP server configured")
        self.bind_dn = bind_dn
        self._password = bind_password
        self.ca_file = ca_file
        self.tls_server_name = tls_server_name
        self._timeout = max(1, math.ceil(timeout_s))  # ldap3 packs socket timeouts as integers
        self._servers = [self._server(u, tls) for u in self.urls]
        self._conn: ldap3.Connection | None = None
        self._lock = threading.RLock()

    def _server(self, url: str, tls: str | None) -> tuple[ldap3.Server, str, str]:
        parts = urlsplit(url if "://" in url else f"ldap://{url}")
        scheme = parts.scheme.lower()
        if scheme not in ("ldap", "ldaps") or not parts.hostname:
            raise ConfigError(f"directory.url: {url!r} is not an ldap:// or ldaps:// URL")
        mode = tls or ("ldaps" if scheme == "ldaps" else "starttls")
        if (scheme == "ldaps") != (mode == "ldaps"):
            raise ConfigError(f"directory.tls = {mode!r} does not fit the URL {url!r} (use ldaps:// for LDAPS)")
        port = parts.port or (636 if scheme == "ldaps" else 389)
        tls_cfg = None
        if mode != "none":
            check_ca_file(self.ca_file, "directory.ca_file")
            tls_cfg = _NameCheckedTls(self.ca_file, self.tls_server_name)
        server = ldap3.Server(
            parts.hostname, port=port, use_ssl=mode == "ldaps", tls=tls_cfg,
            connect_timeout=self._timeout, get_info=ldap3.NONE,
        )
        return server, mode, f"{scheme}://{parts.hostname}:{port}"

    def _connect(self) -> ldap3.Connection:
        errors: list[str] = []
        for server, mode, where in self._servers:
            conn = ldap3.Connection(
                server,
                user=self.bind_dn,
                password=self._password,
                authentication=ldap3.SIMPLE if self.bind_dn else ldap3.ANONYMOUS,
                read_only=True,
                auto_referrals=False,
                receive_timeout=self._timeout,
                raise_exceptions=False,
            )
            try:
                conn.open()
                if mode == "starttls" and not conn.start_tls():
                    raise DirectoryError(f"{where}: StartTLS refused: {conn.result.get('description')}")
                if not conn.bind():
                    desc = conn.result.get("description") or conn.result
                    code = conn.result.get("result")
                    conn.unbind()
                    if code == STRONGER_AUTH_REQUIRED:
                        raise DirectoryError(self._stronger_auth_message(where, mode, conn.result))
                    # a refused bind is a configuration error: the next server would refuse it too
                    raise DirectoryError(f"directory {where}: bind as {self.bind_dn or 'anonymous'} refused: {desc}")
            except LDAPException as e:
                tls_error = self._tls_message(server, mode, where)
                if tls_error is not None:
                    # a certificate problem is a configuration error too: one line, the setting to fix
                    with contextlib.suppress(LDAPException):
                        conn.unbind()
                    raise DirectoryError(tls_error) from None
                errors.append(f"{where}: {type(e).__name__}: {e}")
                with contextlib.suppress(LDAPException):
                    conn.unbind()
                continue
            return conn
        keys = "directory.url" + (" / directory.urls" if len(self._servers) > 1 else "")
        raise DirectoryError(f"{keys}: directory unreachable ({'; '.join(errors)})")

    def _stronger_auth_message(self, where: str, mode: str, result: dict[str, Any]) -> str:
        detail = (result.get("message") or "").strip()
        how = (
            'use an ldaps:// URL, or ldap:// with StartTLS (leave directory.tls unset or "starttls"), '
            'instead of tls = "none"' if mode == "none" else "check the DC's LDAP signing / channel binding policy"
        )
        return (
            f"directory {where}: the domain controller requires LDAPS/StartTLS or signing for this bind "
            f"(strongerAuthRequired{': ' + detail if detail else ''}): {how}"
        )

    def _tls_message(self, server: ldap3.Server, mode: str, where: str) -> str | None:
        """One line for a failed certificate check on ``server``, or ``None`` when the failure
        was not one: the certificate's names and ``directory.tls_server_name`` for a name
        mismatch, ``directory.ca_file`` for an untrusted chain."""
        tls = server.tls
        err = getattr(tls, "verify_error", None)
        if not isinstance(tls, _NameCheckedTls) or err is None:
            return None
        name = tls.server_name or server.host
        if err.verify_code in _HOSTNAME_MISMATCH:
            names = self._peer_names(server, mode)
            listed = ", ".join(names) if names else "names that could not be read"
            return (
                f"directory {where}: the DC's certificate is for {listed}, not {name!r}: set "
                f"directory.tls_server_name to one of these names (or use it in directory.url)"
            )
        return (
            f"directory {where}: the DC's certificate is not trusted ({err.verify_message}): set "
            f"directory.ca_file to the PEM of the CA that signed it"
        )

    def _peer_names(self, server: ldap3.Server, mode: str) -> list[str]:
        """The names in the certificate ``server`` presents, read over a second connection that
        checks the chain but not the name (only to word an error message); ``[]`` if unreadable."""
        probe_tls = ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=self.ca_file, valid_names=["*"])
        probe = ldap3.Server(
            server.host, port=server.port, use_ssl=mode == "ldaps", tls=probe_tls,
            connect_timeout=self._timeout, get_info=ldap3.NONE,
        )
        conn = ldap3.Connection(probe, receive_timeout=self._timeout, raise_exceptions=False)
        try:
            conn.open()
            if mode == "starttls":
                conn.start_tls()
            return certificate_names(conn.socket.getpeercert() or {})
        except (LDAPException, OSError, ValueError):
            return []
        finally:
            with contextlib.suppress(LDAPException):
                conn.unbind()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(LDAPException):
                self._conn.unbind()
            self._conn = None

    def _plain(self) -> bool:
        return any(mode == "none" for _s, mode, _w in self._servers)

    def close(self) -> None:
        """Unbind (the next call connects again)."""
        with self._lock:
            self._drop()

    def search(
        self, base: str, flt: str, attributes: list[str], *, scope: Literal["BASE", "LEVEL", "SUBTREE"] = ldap3.SUBTREE,
        paged: bool = False,
    ) -> list[dict[str, Any]]:
        """Entries (``dn``, ``attributes``, ``raw_attributes``) of one search; ``[]`` when ``base``
        does not exist. Retries once on a fresh connection after a connection error; raises
        :class:`DirectoryError` otherwise."""
        with self._lock:
            for attempt in (0, 1):
                if self._conn is None:
                    self._conn = self._connect()
                conn = self._conn
                try:
                    if paged:
                        entries = conn.extend.standard.paged_search(
                            base, flt, search_scope=scope, attributes=attributes, paged_size=500, generator=False
                        )
                        result = conn.result
                        response = entries
                    else:
                        conn.search(base, flt, search_scope=scope, attributes=attributes, time_limit=self._timeout)
                        result, response = conn.result, conn.response
                except LDAPException as e:
                    self._drop()
                    if attempt:
                        raise DirectoryError(f"directory search failed: {type(e).__name__}: {e}") from None
                    continue
                code = result.get("result") if isinstance(result, dict) else 0
                if code == 0:
                    return [e for e in response or [] if e.get("type") == "searchResEntry"]
                if code == NO_SUCH_OBJECT:
                    return []
                self._drop()
                if code == STRONGER_AUTH_REQUIRED:
                    raise DirectoryError(self._stronger_auth_message("search", "none" if self._plain() else "tls", result))
                if attempt or code not in (51, 52, 80):  # busy, unavailable, other: retry once
                    raise DirectoryError(
                        f"directory search failed: {result.get('description')} ({code}) {result.get('message') or ''}".strip()
                    )
        raise DirectoryError("directory search failed")  # pragma: no cover - loop always returns or raises



__all__ = ["NO_SUCH_OBJECT", "STRONGER_AUTH_REQUIRED", "LdapConnection", "certificate_names"]
