"""What an SMB file server says about itself over MS-RPC on ``IPC$`` (impacket): the share's own
security descriptor, and the server's local groups.

- **Share permissions**: SRVSVC ``NetrShareGetInfo`` at level 502 ([MS-SRVS] 3.1.4.10,
  SHARE_INFO_502_I.shi502_security_descriptor): the self-relative descriptor the server checks at
  tree connect and on every open, the "Share Permissions" tab of Windows. Windows answers level 502
  to administrators (and Server / Power Users) only; Samba to any authenticated user.
- **Local groups**: LSA ``LsarQueryInformationPolicy2`` ([MS-LSAD] 3.1.4.4.4: the account domain —
  the server's own accounts — and the primary domain it is joined to, equal on a domain
  controller), then SAMR ([MS-SAMR] 3.1.5.2.1 SamrEnumerateDomainsInSamServer, 3.1.5.2.4
  SamrEnumerateAliasesInDomain, 3.1.5.6.1 SamrGetMembersInAlias) for the aliases of BUILTIN and of
  the account domain with their members. Windows Server 2016 and later restrict remote SAM calls to
  Administrators by default ("Network access: Restrict clients allowed to make remote calls to
  SAM"); the source's ``local_groups`` configures them instead.

Calls share one SMB connection to ``IPC$`` (:class:`RpcSession`) with the source's credentials
(NTLM, or Kerberos from the process's ticket cache); alias members are read when first needed. Failures raise
:class:`RpcError` (an :class:`~ancre.errors.AclError`: the callers fail closed on it).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from impacket.dcerpc.v5 import lsad, samr, srvs, transport
from impacket.dcerpc.v5.rpcrt import DCERPC_v5, DCERPCException
from impacket.krb5.ccache import CCache

from ancre.acl.token import BUILTIN_DOMAIN, LocalGroups
from ancre.errors import AclError

log = logging.getLogger("ancre.connectors.smb_rpc")


class RpcError(AclError):
    """An MS-RPC call to the file server failed (refused, unsupported, unreachable); the message
    names the call and the server's answer."""


@dataclass(frozen=True)
class RpcTarget:
    """Where and as whom to call: ``server`` (host name or address), ``port`` (445), ``username``
    (``DOMAIN\\user``, a UPN, or ``None`` with ``kerberos``), ``password``, ``kerberos`` (use the
    process's ticket cache, ``KRB5CCNAME``), ``timeout_s`` (connection timeout, seconds)."""

    server: str
    port: int = 445
    username: str | None = None
    password: str | None = None
    kerberos: bool = False
    timeout_s: float = 30.0

    @property
    def unc(self) -> str:
        """``\\\\server``, for messages."""
        return f"\\\\{self.server}"


def _split_user(username: str | None) -> tuple[str, str]:
    """``"AXONIX\\alice"`` → ``("alice", "AXONIX")``; a UPN or a bare name keeps no domain."""
    if not username:
        return "", ""
    domain, sep, user = username.partition("\\")
    return (user, domain) if sep else (username, "")


def _tickets(target: RpcTarget, domain: str, user: str) -> tuple[str, str, Any, Any]:
    """``(domain, user, TGT, TGS)`` from the process's Kerberos ticket cache (``KRB5CCNAME``, a
    ``FILE:`` cache or a path), as impacket's ``CCache.parseFile`` reads them (which takes no
    ``FILE:`` prefix): the service ticket for ``cifs/<server>`` when the cache has one, else the
    TGT. Raises :class:`RpcError` when there is no cache or no usable ticket in it."""
    path = os.environ.get("KRB5CCNAME", "")
    path = path.removeprefix("FILE:")
    ccache = CCache.loadFile(path) if path and os.path.isfile(path) else None
    if ccache is None:
        raise RpcError(f"{target.unc}: no Kerberos ticket cache (KRB5CCNAME={os.environ.get('KRB5CCNAME')!r})")
    realm = domain or ccache.principal.realm["data"].decode()
    user = user or ccache.principal.components[0]["data"].decode()
    spn = f"cifs/{target.server}@{realm.upper()}"
    creds = ccache.getCredential(spn)
    if creds is not None:
        return realm, user, None, creds.toTGS(spn)
    creds = ccache.getCredential(f"krbtgt/{realm.upper()}@{realm.upper()}")
    if creds is None:
        raise RpcError(f"{target.unc}: the Kerberos ticket cache holds no ticket for {spn} nor a TGT of {realm}")
    return realm, user, creds.toTGT(), None


class RpcSession:
    """One authenticated SMB connection to the server's ``IPC$``, shared by every pipe opened on it
    (LSA, SAMR, SRVSVC): one NTLM or Kerberos authentication for all the calls. Thread-safe
    (calls are serialised through :attr:`lock`); :meth:`close` ends it."""

    def __init__(self, target: RpcTarget) -> None:
        self.target = target
        self._smb: Any = None
        self._pipes: dict[str, DCERPC_v5] = {}
        self.lock = threading.RLock()

    def pipe(self, pipe: str, interface: bytes) -> DCERPC_v5:
        """The bound DCE/RPC connection on ``\\\\server\\IPC$\\<pipe>`` (opened once). Raises
        :class:`RpcError`."""
        with self.lock:
            if pipe in self._pipes:
                return self._pipes[pipe]
            user, domain = _split_user(self.target.username)
            tgt = tgs = None
            try:
                if self.target.kerberos and self._smb is None:
                    domain, user, tgt, tgs = _tickets(self.target, domain, user)
                rpc = transport.SMBTransport(
                    self.target.server, self.target.port, pipe, username=user, password=self.target.password or "",
                    domain=domain, doKerberos=self.target.kerberos, smb_connection=self._smb or 0, TGT=tgt, TGS=tgs,
                )
                rpc.set_connect_timeout(max(1, int(self.target.timeout_s)))
                dce = rpc.get_dce_rpc()
                dce.connect()
                self._smb = rpc.get_smb_connection()
                dce.bind(interface)
            except Exception as e:  # impacket raises its own SessionError, OSError, …
                raise RpcError(f"{self.target.unc}: can't open the {pipe.strip(chr(92))} pipe: {type(e).__name__}: {e}") from None
            self._pipes[pipe] = dce
            return dce

    def close(self) -> None:
        """Close the pipes and the connection (idempotent)."""
        with self.lock:
            for dce in self._pipes.values():
                try:
                    dce.disconnect()
                except Exception as e:  # closing a dead connection may fail in any way
                    log.debug("closing a pipe to %s: %s", self.target.unc, e)
            self._pipes = {}
            if self._smb is not None:
                try:
                    self._smb.close()
                except Exception as e:  # closing a dead connection may fail in any way
                    log.debug("closing %s: %s", self.target.unc, e)
                self._smb = None


def share_descriptor(target: RpcTarget, share: str, session: RpcSession | None = None) -> bytes:
    """The share-level security descriptor of ``share``, self-relative bytes ([MS-DTYP] 2.4.6).
    SRVSVC NetrShareGetInfo, level 502 (both Windows and Samba keep a descriptor for every share:
    a default one grants Everyone), over ``session`` (default: one of its own). Raises
    :class:`RpcError` when refused (``ERROR_ACCESS_DENIED`` from Windows) or withheld (Samba's
    answer to a non-administrator carries none)."""
    own = session is None
    session = session or RpcSession(target)
    try:
        with session.lock:
            dce = session.pipe(r"\srvsvc", srvs.MSRPC_UUID_SRVS)
            try:
                answer = srvs.hNetrShareGetInfo(dce, share + "\x00", 502)
            except Exception as e:  # DCERPCException, a dead connection, …
                raise RpcError(f"{target.unc}: NetShareGetInfo({share!r}, 502) refused: {e}") from None
    finally:
        if own:
            session.close()
    info = answer["InfoStruct"]["ShareInfo502"]
    raw = info["shi502_security_descriptor"]
    data = b"".join(raw) if isinstance(raw, list) else bytes(raw or b"")
    if not data or not info["shi502_reserved"]:
        # Samba answers a non-administrator without the descriptor (shi502_reserved = 0): withheld
        raise RpcError(
            f"{target.unc}: NetShareGetInfo({share!r}, 502) answered without the share's security descriptor "
            "(only administrators of the file server may read it)"
        )
    return data


@dataclass(frozen=True)
class ServerAccounts:
    """The server's domains and local groups: ``account_domain`` (its own accounts' domain SID;
    the AD domain on a DC), ``primary_domain`` (the AD domain it is joined to, ``None`` for a
    standalone server), ``local_groups`` (BUILTIN and account-domain aliases; their members are
    read from the server when first asked for, over ``session``, which :meth:`close` ends)."""

    account_domain: str
    primary_domain: str | None
    local_groups: LocalGroups
    session: RpcSession | None = None

    def close(self) -> None:
        """End the SAMR session the alias members are read over."""
        if self.session is not None:
            self.session.close()


class _AliasMembers(Mapping[str, frozenset[str]]):
    """Alias SID → its direct members, read over SAMR (SamrGetMembersInAlias) the first time each
    alias is asked for, then kept. The list of aliases is complete from the start. Looking one up
    raises :class:`RpcError` when the server can't be asked."""

    def __init__(self, session: RpcSession, handles: dict[str, Any], aliases: dict[str, tuple[str, int]]) -> None:
        self._session = session
        self._handles = handles  # domain SID → SAMR domain handle
        self._aliases = aliases  # alias SID → (domain SID, RID)
        self._members: dict[str, frozenset[str]] = {}

    def __getitem__(self, sid: str) -> frozenset[str]:
        if sid not in self._aliases:
            raise KeyError(sid)
        with self._session.lock:
            hit = self._members.get(sid)
            if hit is not None:
                return hit
            domain, rid = self._aliases[sid]
            dce = self._session.pipe(r"\samr", samr.MSRPC_UUID_SAMR)
            try:
                handle = samr.hSamrOpenAlias(dce, self._handles[domain], aliasId=rid)["AliasHandle"]
                found = samr.hSamrGetMembersInAlias(dce, handle)["Members"]["Sids"]
                samr.hSamrCloseHandle(dce, handle)
            except Exception as e:  # DCERPCException, a dead connection, …
                raise RpcError(f"{self._session.target.unc}: SamrGetMembersInAlias({sid}): {type(e).__name__}: {e}") from None
            members = frozenset(m["SidPointer"].formatCanonical() for m in found)
            self._members[sid] = members
            return members

    def __iter__(self) -> Iterator[str]:
        return iter(self._aliases)

    def __len__(self) -> int:
        return len(self._aliases)

    def __contains__(self, sid: object) -> bool:
        return sid in self._aliases


def _policy(session: RpcSession) -> tuple[str, str | None]:
    dce = session.pipe(r"\lsarpc", lsad.MSRPC_UUID_LSAD)
    try:
        handle = lsad.hLsarOpenPolicy2(dce, lsad.POLICY_VIEW_LOCAL_INFORMATION)["PolicyHandle"]
        account = lsad.hLsarQueryInformationPolicy2(
            dce, handle, lsad.POLICY_INFORMATION_CLASS.PolicyAccountDomainInformation
        )["PolicyInformation"]["PolicyAccountDomainInfo"]["DomainSid"]
        primary = lsad.hLsarQueryInformationPolicy2(
            dce, handle, lsad.POLICY_INFORMATION_CLASS.PolicyPrimaryDomainInformation
        )["PolicyInformation"]["PolicyPrimaryDomainInfo"]["Sid"]
    except Exception as e:  # DCERPCException, a dead connection, …
        raise RpcError(f"{session.target.unc}: LsarQueryInformationPolicy: {type(e).__name__}: {e}") from None
    primary_sid = primary.formatCanonical() if _present(primary) else None
    return account.formatCanonical(), primary_sid


def _present(sid: Any) -> bool:
    try:
        return bool(sid.formatCanonical())
    except Exception:  # a NULL pointer (standalone server) has no SID
        return False


def server_accounts(target: RpcTarget) -> ServerAccounts:
    """The server's account and primary domains (LSA) and every alias of BUILTIN and of its
    account domain (SAMR), their members read when first needed. Raises :class:`RpcError` when
    either is refused (a partial list could miss a deny's group: nothing is returned then). The
    result holds an open session: :meth:`ServerAccounts.close` it."""
    session = RpcSession(target)
    try:
        account, primary = _policy(session)
        aliases: dict[str, tuple[str, int]] = {}
        names: dict[str, str] = {}
        handles: dict[str, Any] = {}
        dce = session.pipe(r"\samr", samr.MSRPC_UUID_SAMR)
        try:
            server = samr.hSamrConnect(dce)["ServerHandle"]
            for entry in samr.hSamrEnumerateDomainsInSamServer(dce, server)["Buffer"]["Buffer"]:
                domain_sid = samr.hSamrLookupDomainInSamServer(dce, server, entry["Name"])["DomainId"]
                sid = domain_sid.formatCanonical()
                if sid not in (BUILTIN_DOMAIN, account):
                    continue
                handles[sid] = samr.hSamrOpenDomain(dce, server, domainId=domain_sid)["DomainHandle"]
                prefix = "BUILTIN" if sid == BUILTIN_DOMAIN else str(entry["Name"])
                for alias in _enumerate_aliases(dce, handles[sid]):
                    alias_sid = f"{sid}-{alias['RelativeId']}"
                    aliases[alias_sid] = (sid, int(alias["RelativeId"]))
                    names[alias_sid] = f"{prefix}\\{alias['Name']}"
        except Exception as e:  # DCERPCException, a dead connection, …
            raise RpcError(f"{target.unc}: SAMR: {type(e).__name__}: {e}") from None
        if not any(s.startswith(BUILTIN_DOMAIN + "-") for s in aliases):
            raise RpcError(f"{target.unc}: SAMR listed no BUILTIN group (the list would be incomplete)")
    except BaseException:
        session.close()
        raise
    members = _AliasMembers(session, handles, aliases)
    return ServerAccounts(account, primary, LocalGroups(members, names, f"SAMR on {target.unc}"), session)


def _enumerate_aliases(dce: DCERPC_v5, domain: Any) -> list[Any]:
    """Every alias of a domain, following SamrEnumerateAliasesInDomain's enumeration context."""
    out: list[Any] = []
    context = 0
    while True:
        try:
            answer = samr.hSamrEnumerateAliasesInDomain(dce, domain, enumerationContext=context)
        except DCERPCException as e:
            if "STATUS_MORE_ENTRIES" not in str(e):
                raise
            answer = e.get_packet()
            out.extend(answer["Buffer"]["Buffer"])
            context = answer["EnumerationContext"]
            continue
        out.extend(answer["Buffer"]["Buffer"])
        return out


__all__ = ["RpcError", "RpcSession", "RpcTarget", "ServerAccounts", "server_accounts", "share_descriptor"]
