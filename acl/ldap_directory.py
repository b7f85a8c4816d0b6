"""Active Directory over LDAP (ldap3): P(user) from ``tokenGroups``, SID ↔ name for explanations.

P(user) (docs/ARCHITECTURE.md "Data model and the rights filter") is the user's objectSid, every SID of its ``tokenGroups`` — the
constructed attribute AD computes for a security principal: all groups transitively, nested ones,
domain-local ones and the primary group included ([MS-ADTS] 3.1.1.4.5.19) —, the SIDs of its
``sIDHistory`` (the logon puts them in the token, [MS-PAC] 2.2.1), plus Everyone, Authenticated Users
and NETWORK (in every network logon). What a file server adds to a session's token besides (its
local groups, the authentication package) is resolved per server (:mod:`ancre.acl.token`).
It costs two searches: one to find the user, one BASE search of ``tokenGroups`` on its entry.

Transport: LDAPS, or StartTLS on ``ldap://`` (the default for that scheme), certificates checked
against ``ca_file`` (else the system's CAs) by OpenSSL, chain and name: the name is the URL's host,
or ``tls_server_name`` when the DC is reached by another name than its certificate's (an IP
address, an alias, a load balancer). A certificate that is not trusted or names another host fails
with one line naming the certificate's names and the setting to change; a DC that refuses a simple
bind without TLS (``strongerAuthRequired``, LDAP signing required) says it requires LDAPS/StartTLS
or signing. ``tls = "none"`` only when configured explicitly.
The bind password comes from the config or an environment variable and appears in no message.

Failure is loud and closed: an unreachable directory, a refused bind, a failed search or a user
whose ``tokenGroups`` can't be read raise :class:`~ancre.errors.DirectoryError` — never an empty or
partial set that could drop a deny. An unknown, ambiguous or disabled account gets ``frozenset()``
(it reads nothing). Caching (TTL and negative cache) is :class:`~ancre.acl.directory.CachedDirectory`'s.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import ssl
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any, Literal
from urllib.parse import urlsplit

import ldap3
from ldap3.core.exceptions import LDAPException
from ldap3.protocol.formatters.formatters import format_sid
from ldap3.utils.conv import escape_filter_chars

from ancre.acl.directory import WELL_KNOWN, AccountName, fold_name
from ancre.errors import ConfigError, DirectoryError
from ancre.models import AUTHENTICATED_USERS, EVERYONE, NETWORK, identity_defect, nfc, sid_principal
from ancre.settings import LdapDirectoryConfig, resolve_secret

log = logging.getLogger("ancre.acl.ldap")

_SID_RE = re.compile(r"^S-1-\d+(-\d+)*$", re.IGNORECASE)
_WELL_KNOWN_DOMAINS = ("nt authority", "everyone")
_BUILTIN_PREFIX = "S-1-5-32-"
LDAP_MATCHING_RULE_IN_CHAIN = "1.2.840.113556.1.4.1941"
"""Transitive membership matching rule ([MS-ADTS] 3.1.1.3.4.4.3)."""
ACCOUNTDISABLE = 0x2
"""userAccountControl bit of a disabled account ([MS-ADTS] 2.2.16)."""
_NO_SUCH_OBJECT = 32
_STRONGER_AUTH_REQUIRED = 8
"""LDAP result code strongerAuthRequired (RFC 4511 4.1.9): the DC wants TLS or signing."""
_HOSTNAME_MISMATCH = (62, 64)
"""OpenSSL X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH."""
_PATH_LIMIT = 2000
"""Groups visited at most when tracing a membership route (explanations only)."""


def _bare(sid: str) -> str:
    return sid.removeprefix("sid:")


def _values(entry: dict[str, Any], attr: str) -> list[Any]:
    v = entry.get("attributes", {}).get(attr)
    if v is None:
        return []
    return list(v) if isinstance(v, list | tuple) else [v]


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


def check_ca_file(ca_file: str | None, key: str) -> None:
    """Raise :class:`~ancre.errors.ConfigError` naming ``key`` when ``ca_file`` (a PEM CA bundle;
    ``None``: the system's CAs) can't be loaded by OpenSSL: missing, unreadable, or holding no
    certificate (ldap3 would otherwise end in ``LDAPSSLConfigurationError``, unnamed)."""
    if ca_file is None:
        return
    try:
        ssl.create_default_context(cafile=ca_file)
    except FileNotFoundError:
        raise ConfigError(f"{key}: {ca_file} does not exist") from None
    except PermissionError:
        raise ConfigError(f"{key}: {ca_file}: permission denied") from None
    except IsADirectoryError:
        raise ConfigError(f"{key}: {ca_file} is a folder, not a PEM file") from None
    except (ssl.SSLError, OSError, ValueError) as e:
        raise ConfigError(f"{key}: {ca_file} is not a PEM CA bundle OpenSSL can load ({e})") from None


def certificate_names(cert: dict[str, Any]) -> list[str]:
    """The names a certificate (``SSLSocket.getpeercert()`` form) is valid for: its
    subjectAltName DNS names and IP addresses, else its subject's commonName (RFC 6125 6.4.4)."""
    names = [str(v) for k, v in cert.get("subjectAltName", ()) if k in ("DNS", "IP Address")]
    if not names:
        names = [str(v) for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]
    return names


class LdapDirectory:
    """A :class:`~ancre.acl.directory.Directory` (and ``MembershipTracer``) over Active Directory.

    ``urls``: ``ldaps://host[:port]`` or ``ldap://host[:port]``, tried in order; ``base_dn`` the
    search base; ``bind_dn``/``bind_password`` a simple bind (both ``None``: anonymous); ``tls``
    ``"ldaps"``/``"starttls"``/``"none"`` (``None``: from each URL's scheme); ``ca_file`` a PEM
    bundle; ``tls_server_name`` the name checked in the DC's certificate (default: each URL's
    host); ``user_attributes`` the attributes a user name is matched against, by precedence;
    ``netbios`` the domain's NetBIOS name (read from the directory when ``None``); ``timeout_s``
    connect/answer timeout in seconds. Raises :class:`ConfigError` on an inconsistent URL/TLS pair.
    Thread-safe (one connection, serialised; re-opened once after a connection error).
    """

    def __init__(
        self,
        urls: Iterable[str],
        base_dn: str,
        *,
        bind_dn: str | None = None,
        bind_password: str | None = None,
        tls: str | None = None,
        ca_file: str | None = None,
        tls_server_name: str | None = None,
        user_attributes: Iterable[str] = ("sAMAccountName", "userPrincipalName", "mail"),
        netbios: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.urls = tuple(urls)
        if not self.urls:
            raise ConfigError("directory.url: no LDAP server configured")
        self.base_dn = base_dn
        self.bind_dn = bind_dn
        self._password = bind_password
        self.ca_file = ca_file
        self.tls_server_name = tls_server_name
        self.user_attributes = tuple(user_attributes)
        self.timeout_s = timeout_s
        self._timeout = max(1, math.ceil(timeout_s))  # ldap3 packs socket timeouts as integers
        self._netbios = netbios
        self._servers = [self._server(u, tls) for u in self.urls]
        self._conn: ldap3.Connection | None = None
        self._lock = threading.RLock()
        self._names: dict[str, str | None] = {}

    @classmethod
    def from_config(cls, cfg: LdapDirectoryConfig) -> LdapDirectory:
        """Build from ``[directory]`` (``kind = "ldap"``); the password resolved from
        ``bind_password`` (:class:`~ancre.settings.secrets.SecretRef`). Raises :class:`ConfigError`."""
        return cls(
            cfg.ldap_urls,
            cfg.base_dn,
            bind_dn=cfg.bind_dn,
            bind_password=resolve_secret(cfg.bind_password, "directory.bind_password"),
            tls=cfg.tls,
            ca_file=str(cfg.ca_file) if cfg.ca_file else None,
            tls_server_name=cfg.tls_server_name,
            user_attributes=cfg.user_attributes,
            netbios=cfg.netbios,
            timeout_s=cfg.timeout_s,
        )

    # ---------------------------------------------------------------- connection
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
                    if code == _STRONGER_AUTH_REQUIRED:
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

    def _search(
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
                if code == _NO_SUCH_OBJECT:
                    return []
                self._drop()
                if code == _STRONGER_AUTH_REQUIRED:
                    raise DirectoryError(self._stronger_auth_message("search", "none" if self._plain() else "tls", result))
                if attempt or code not in (51, 52, 80):  # busy, unavailable, other: retry once
                    raise DirectoryError(
                        f"directory search failed: {result.get('description')} ({code}) {result.get('message') or ''}".strip()
                    )
        raise DirectoryError("directory search failed")  # pragma: no cover - loop always returns or raises

    # ---------------------------------------------------------------- names
    def netbios(self) -> str:
        """The domain's NetBIOS name (``AXONIX``): from the config, else the crossRef of the
        default naming context, else the first ``DC=`` of ``base_dn`` upper-cased."""
        if self._netbios:
            return self._netbios
        name = None
        root = self._search("", "(objectClass=*)", ["configurationNamingContext", "defaultNamingContext"], scope=ldap3.BASE)
        if root:
            conf = _values(root[0], "configurationNamingContext")
            nc = _values(root[0], "defaultNamingContext") or [self.base_dn]
            if conf:
                refs = self._search(
                    f"CN=Partitions,{conf[0]}",
                    f"(&(objectClass=crossRef)(nCName={escape_filter_chars(str(nc[0]))}))",
                    ["nETBIOSName"],
                )
                names = [v for e in refs for v in _values(e, "nETBIOSName")]
                name = str(names[0]) if names else None
        if not name:
            dcs = [p.split("=", 1)[1] for p in self.base_dn.split(",") if p.strip().upper().startswith("DC=")]
            name = dcs[0].upper() if dcs else "DOMAIN"
        self._netbios = name
        return name

    def _find_user(self, name: str) -> dict[str, Any] | None:
        """The entry of the account ``name`` (sAMAccountName, ``NETBIOS\\sam``, UPN or mail per
        ``user_attributes``), ``None`` if unknown, in another domain, or ambiguous. The server's
        answer is re-checked here: a value must equal ``name`` exactly after :func:`fold_name`
        (NFC, ASCII-only lowercasing) — AD's own matching is wider. A name with ``@`` is a UPN:
        it is never matched against ``sAMAccountName``. A name carrying whitespace at either end or
        an invisible character (:func:`~ancre.models.identity_defect`) designates no account:
        never stripped into another one."""
        name = nfc(name)
        if identity_defect(name, inner_space=True) is not None:
            return None
        domain, sep, short = name.rpartition("\\")
        attrs = self.user_attributes
        if sep:
            if fold_name(domain) != fold_name(self.netbios()):
                return None
            name, attrs = short, ("sAMAccountName",)
        elif "@" in name:
            attrs = tuple(a for a in attrs if a.lower() != "samaccountname")
        if not attrs:
            return None
        value = escape_filter_chars(name)
        wanted = "".join(f"({a}={value})" for a in attrs)
        entries = self._search(
            self.base_dn,
            f"(&(objectClass=user)(!(objectClass=computer))(|{wanted}))",
            ["objectSid", "userAccountControl", "sAMAccountName", "memberOf", "primaryGroupID", "sIDHistory", *attrs],
        )
        for attr in attrs:
            hits = [e for e in entries if fold_name(name) in {fold_name(str(v)) for v in _values(e, attr)}]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                log.warning("directory: %d accounts have %s=%s: treated as unknown", len(hits), attr, name)
                return None
        return None

    def account_of(self, user: str) -> str | None:
        """See :meth:`~ancre.acl.directory.AccountResolver.account_of`: the entry's
        sAMAccountName (``None``: unknown, ambiguous or disabled). Raises :class:`DirectoryError`."""
        entry = self._find_user(user)
        if entry is None:
            return None
        uac = _values(entry, "userAccountControl")
        if uac and int(uac[0]) & ACCOUNTDISABLE:
            return None
        sam = _values(entry, "sAMAccountName")
        return str(sam[0]) if sam else None

    def principals(self, user: str) -> frozenset[str]:
        """See :meth:`Directory.principals`: objectSid, every ``tokenGroups`` SID, ``sIDHistory``,
        Everyone, Authenticated Users and NETWORK. Unknown, ambiguous or disabled account →
        ``frozenset()``. Raises
        :class:`DirectoryError` when the directory fails or ``tokenGroups`` can't be read."""
        entry = self._find_user(user)
        if entry is None:
            return frozenset()
        uac = _values(entry, "userAccountControl")
        if uac and int(uac[0]) & ACCOUNTDISABLE:
            return frozenset()
        raw_sid = entry.get("raw_attributes", {}).get("objectSid") or []
        if not raw_sid:
            raise DirectoryError(f"directory: no objectSid readable on {entry['dn']}")
        tg = self._search(entry["dn"], "(objectClass=*)", ["tokenGroups"], scope=ldap3.BASE)
        groups = tg[0].get("raw_attributes", {}).get("tokenGroups") if tg else None
        if not groups:
            # every account holds at least its primary group: no tokenGroups = not readable here,
            # and a partial set could miss a deny
            raise DirectoryError(f"directory: tokenGroups of {entry['dn']} not readable (check the bind account's rights)")
        history = entry.get("raw_attributes", {}).get("sIDHistory") or []
        sids = {format_sid(raw_sid[0]), *(format_sid(g) for g in groups), *(format_sid(h) for h in history)}
        return frozenset(sid_principal(s) for s in sids) | {EVERYONE, AUTHENTICATED_USERS, NETWORK}

    def domain_sid(self) -> str | None:
        """See :meth:`~ancre.acl.directory.DomainSidProvider.domain_sid`: the ``objectSid`` of the
        domain object at ``base_dn`` (``None`` when the base is not a domain's head). Raises
        :class:`DirectoryError`."""
        hits = self._search(self.base_dn, "(objectClass=domain)", ["objectSid"], scope=ldap3.BASE)
        raw = hits[0].get("raw_attributes", {}).get("objectSid") if hits else None
        return format_sid(raw[0]) if raw else None

    def _entry_by_sid(self, sid: str, attributes: list[str]) -> dict[str, Any] | None:
        if not _SID_RE.match(sid):
            return None
        hits = self._search(self.base_dn, f"(objectSid={sid})", attributes)
        return hits[0] if len(hits) == 1 else None

    def sid_of(self, name: str) -> str | None:
        """See :meth:`Directory.sid_of`: ``sid:S-…``/``S-…`` as is, well-known names, ``BUILTIN\\x``,
        ``NETBIOS\\x``, a sAMAccountName or a UPN. ``None`` if unknown."""
        name = name.strip()
        if _SID_RE.match(_bare(name)):
            return "S" + _bare(name)[1:]
        domain, sep, short = name.rpartition("\\")
        for wk, sid in WELL_KNOWN.items():
            if fold_name(short) == fold_name(wk) and (not sep or fold_name(domain) in _WELL_KNOWN_DOMAINS):
                return sid
        if sep and fold_name(domain) not in ("builtin", fold_name(self.netbios())):
            return None
        value = escape_filter_chars(short)
        flt = f"(sAMAccountName={value})" if sep else f"(|(sAMAccountName={value})(userPrincipalName={value}))"
        hits = self._search(self.base_dn, flt, ["objectSid", "sAMAccountName", "userPrincipalName"])
        wanted = fold_name(short)  # exact after fold_name, as users are matched (AD's matching is wider)
        hits = [e for e in hits
                if wanted in {fold_name(str(v)) for a in ("sAMAccountName", "userPrincipalName") for v in _values(e, a)}]
        sids = {format_sid(e["raw_attributes"]["objectSid"][0]) for e in hits if e.get("raw_attributes", {}).get("objectSid")}
        if sep:
            builtin = fold_name(domain) == "builtin"
            sids = {s for s in sids if s.startswith(_BUILTIN_PREFIX) == builtin}
        return sids.pop() if len(sids) == 1 else None

    def name_of(self, sid: str) -> str | None:
        """See :meth:`Directory.name_of`: ``Everyone``, ``BUILTIN\\Administrators``,
        ``AXONIX\\GG_RH``; ``None`` if unknown. Remembered for the life of the object."""
        sid = _bare(sid)
        for wk, wk_sid in WELL_KNOWN.items():
            if sid == wk_sid:
                return wk
        if sid in self._names:
            return self._names[sid]
        entry = self._entry_by_sid(sid, ["sAMAccountName"])
        name = None
        if entry is not None and _values(entry, "sAMAccountName"):
            prefix = "BUILTIN" if sid.startswith(_BUILTIN_PREFIX) else self.netbios()
            name = f"{prefix}\\{_values(entry, 'sAMAccountName')[0]}"
        self._names[sid] = name
        return name

    def users(self) -> list[str]:
        """See :meth:`Directory.users`: every user account's sAMAccountName (paged search), sorted."""
        hits = self._search(
            self.base_dn, "(&(objectClass=user)(!(objectClass=computer)))", ["sAMAccountName"], paged=True
        )
        return sorted(str(v) for e in hits for v in _values(e, "sAMAccountName"))

    def account_names(self) -> list[AccountName]:
        """See :meth:`~ancre.acl.directory.AccountNames.account_names`: every user account's
        values of ``user_attributes`` (sAMAccountName, userPrincipalName, mail by default; paged
        search), as the server returns them."""
        attrs = list(dict.fromkeys(["sAMAccountName", *self.user_attributes]))
        hits = self._search(self.base_dn, "(&(objectClass=user)(!(objectClass=computer)))", attrs, paged=True)
        out: list[AccountName] = []
        for e in hits:
            sam = [str(v) for v in _values(e, "sAMAccountName")]
            for attr in attrs:
                out += [AccountName(sam[0] if sam else str(e.get("dn", "")), attr, str(v)) for v in _values(e, attr)]
        return out

    # ---------------------------------------------------------------- nesting (explanations, share permissions)
    def membership_path(self, user: str, sid: str) -> tuple[str, ...] | None:
        """See :meth:`MembershipTracer.membership_path`: sAMAccountNames from one of the user's
        direct groups (``memberOf`` or the primary group) to the group ``sid``, shortest route
        first; ``()`` for the user's own SID; ``None`` if not held or the user is unknown."""
        target = _bare(sid)
        entry = self._find_user(user)
        if entry is None:
            return None
        raw = entry.get("raw_attributes", {}).get("objectSid") or []
        own = format_sid(raw[0]) if raw else None
        if target == own:
            return ()
        for wk, wk_sid in WELL_KNOWN.items():
            if target == wk_sid:
                return (wk,)
        starts: list[str] = [str(dn) for dn in _values(entry, "memberOf")]
        prim = _values(entry, "primaryGroupID")
        if own and prim:
            pg = self._entry_by_sid(f"{own.rsplit('-', 1)[0]}-{int(prim[0])}", ["sAMAccountName"])
            if pg is not None:
                starts.append(pg["dn"])
        came_from: dict[str, str | None] = {}
        queue: deque[str] = deque()
        for dn in starts:
            if fold_name(dn) not in came_from:
                came_from[fold_name(dn)] = None
                queue.append(dn)
        info: dict[str, tuple[str, str]] = {}
        while queue and len(info) < _PATH_LIMIT:
            dn = queue.popleft()
            hits = self._search(dn, "(objectClass=*)", ["sAMAccountName", "objectSid", "memberOf"], scope=ldap3.BASE)
            if not hits:
                continue
            e = hits[0]
            gsid = format_sid(e["raw_attributes"]["objectSid"][0]) if e.get("raw_attributes", {}).get("objectSid") else ""
            info[fold_name(dn)] = (str((_values(e, "sAMAccountName") or [dn])[0]), gsid)
            if gsid == target:
                route: list[str] = []
                cur: str | None = fold_name(dn)
                while cur is not None:
                    route.append(info[cur][0])
                    cur = came_from[cur]
                return tuple(reversed(route))
            for parent in _values(e, "memberOf"):
                key = fold_name(str(parent))
                if key not in came_from:
                    came_from[key] = fold_name(dn)
                    queue.append(str(parent))
        return None

    def is_nested(self, member_sid: str, group_sid: str) -> bool:
        """Whether every holder of ``member_sid`` (a user or group) holds ``group_sid`` through
        membership: the member is, transitively, in the group (``memberOf`` with
        LDAP_MATCHING_RULE_IN_CHAIN). Primary-group membership is not followed (answers
        ``False``: the safe side for share permissions). Raises :class:`DirectoryError`."""
        member, group = _bare(member_sid), _bare(group_sid)
        if member == group:
            return True
        g = self._entry_by_sid(group, ["objectClass"])
        if g is None or not _SID_RE.match(member):
            return False
        dn = escape_filter_chars(g["dn"])
        hits = self._search(self.base_dn, f"(&(objectSid={member})(memberOf:{LDAP_MATCHING_RULE_IN_CHAIN}:={dn}))", ["objectSid"])
        return len(hits) == 1


__all__ = ["LdapDirectory", "certificate_names"]
