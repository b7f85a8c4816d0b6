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

Every call opens its own SMB connection with the source's credentials (NTLM, or Kerberos from the
process's ticket cache), and closes it. Failures raise :class:`RpcError` (an
:class:`~ancre.errors.AclError`: the callers fail closed on it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from impacket.dcerpc.v5 import lsad, samr, srvs, transport
from impacket.dcerpc.v5.rpcrt import DCERPC_v5, DCERPCException

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


@contextmanager
def _pipe(target: RpcTarget, pipe: str, interface: bytes) -> Iterator[DCERPC_v5]:
    """A bound DCE/RPC connection on ``\\\\server\\IPC$\\<pipe>``; raises :class:`RpcError`."""
    user, domain = _split_user(target.username)
    try:
        rpc = transport.SMBTransport(
            target.server, target.port, pipe, username=user, password=target.password or "", domain=domain,
            doKerberos=target.kerberos,
        )
        rpc.set_connect_timeout(max(1, int(target.timeout_s)))
        dce = rpc.get_dce_rpc()
        dce.connect()
    except Exception as e:  # noqa: BLE001 - impacket raises its own SessionError, OSError, …
        raise RpcError(f"{target.unc}: can't open the {pipe.strip(chr(92))} pipe: {type(e).__name__}: {e}") from None
    try:
        dce.bind(interface)
        yield dce
    except RpcError:
        raise
    except Exception as e:  # noqa: BLE001
        raise RpcError(f"{target.unc} {pipe.strip(chr(92))}: {type(e).__name__}: {e}") from None
    finally:
        try:
            dce.disconnect()
        except Exception as e:  # noqa: BLE001 - closing a dead connection may fail in any way
            log.debug("closing %s %s: %s", target.unc, pipe, e)


def share_descriptor(target: RpcTarget, share: str) -> bytes:
    """The share-level security descriptor of ``share``, self-relative bytes ([MS-DTYP] 2.4.6).
    SRVSVC NetrShareGetInfo, level 502 (both Windows and Samba keep a descriptor for every share:
    a default one grants Everyone). Raises :class:`RpcError` when refused (``ERROR_ACCESS_DENIED``
    from Windows) or withheld (Samba's answer to a non-administrator carries none)."""
    with _pipe(target, r"\srvsvc", srvs.MSRPC_UUID_SRVS) as dce:
        try:
            answer = srvs.hNetrShareGetInfo(dce, share + "\x00", 502)
        except DCERPCException as e:
            raise RpcError(f"{target.unc}: NetShareGetInfo({share!r}, 502) refused: {e}") from None
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
    standalone server), ``local_groups`` (BUILTIN and account-domain aliases with their members)."""

    account_domain: str
    primary_domain: str | None
    local_groups: LocalGroups


def _policy(target: RpcTarget) -> tuple[str, str | None]:
    with _pipe(target, r"\lsarpc", lsad.MSRPC_UUID_LSAD) as dce:
        try:
            handle = lsad.hLsarOpenPolicy2(dce, lsad.POLICY_VIEW_LOCAL_INFORMATION)["PolicyHandle"]
            account = lsad.hLsarQueryInformationPolicy2(
                dce, handle, lsad.POLICY_INFORMATION_CLASS.PolicyAccountDomainInformation
            )["PolicyInformation"]["PolicyAccountDomainInfo"]["DomainSid"]
            primary = lsad.hLsarQueryInformationPolicy2(
                dce, handle, lsad.POLICY_INFORMATION_CLASS.PolicyPrimaryDomainInformation
            )["PolicyInformation"]["PolicyPrimaryDomainInfo"]["Sid"]
        except DCERPCException as e:
            raise RpcError(f"{target.unc}: LsarQueryInformationPolicy refused: {e}") from None
    primary_sid = primary.formatCanonical() if _present(primary) else None
    return account.formatCanonical(), primary_sid


def _present(sid: Any) -> bool:
    try:
        return bool(sid.formatCanonical())
    except Exception:  # noqa: BLE001 - a NULL pointer (standalone server) has no SID
        return False


def server_accounts(target: RpcTarget) -> ServerAccounts:
    """The server's account and primary domains (LSA) and every alias of BUILTIN and of its
    account domain with its direct members (SAMR). Raises :class:`RpcError` when either is refused
    (a partial list could miss a deny's group: nothing is returned then)."""
    account, primary = _policy(target)
    members: dict[str, frozenset[str]] = {}
    names: dict[str, str] = {}
    with _pipe(target, r"\samr", samr.MSRPC_UUID_SAMR) as dce:
        try:
            server = samr.hSamrConnect(dce)["ServerHandle"]
            for entry in samr.hSamrEnumerateDomainsInSamServer(dce, server)["Buffer"]["Buffer"]:
                domain_sid = samr.hSamrLookupDomainInSamServer(dce, server, entry["Name"])["DomainId"]
                sid = domain_sid.formatCanonical()
                if sid not in (BUILTIN_DOMAIN, account):
                    continue
                domain = samr.hSamrOpenDomain(dce, server, domainId=domain_sid)["DomainHandle"]
                for alias in _enumerate_aliases(dce, domain):
                    alias_sid = f"{sid}-{alias['RelativeId']}"
                    handle = samr.hSamrOpenAlias(dce, domain, aliasId=alias["RelativeId"])["AliasHandle"]
                    found = samr.hSamrGetMembersInAlias(dce, handle)["Members"]["Sids"]
                    members[alias_sid] = frozenset(m["SidPointer"].formatCanonical() for m in found)
                    prefix = "BUILTIN" if sid == BUILTIN_DOMAIN else str(entry["Name"])
                    names[alias_sid] = f"{prefix}\\{alias['Name']}"
                    samr.hSamrCloseHandle(dce, handle)
        except DCERPCException as e:
            raise RpcError(f"{target.unc}: SAMR refused: {e}") from None
    if not any(s.startswith(BUILTIN_DOMAIN + "-") for s in members):
        raise RpcError(f"{target.unc}: SAMR listed no BUILTIN group (the list would be incomplete)")
    return ServerAccounts(account, primary, LocalGroups(members, names, f"SAMR on {target.unc}"))


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


__all__ = ["RpcError", "RpcTarget", "ServerAccounts", "server_accounts", "share_descriptor"]
