"""The rights context of an SMB source: how the file server builds a session's token
(:class:`~ancre.acl.token.TokenRules`: its account and primary domains over LSA, its local groups
over SAMR, or ``local_groups``) and the share's own permissions (SRVSVC NetShareGetInfo 502, or
``share_allow`` / ``share_deny``), both read over MS-RPC (:mod:`ancre.connectors.smb.rpc`) and
cached per source for :data:`SHARE_REFRESH_S` seconds, shared by the connectors of one source in
one process (a pass's and the live check's).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from ancre.acl.directory import Directory, directory_domain_sid
from ancre.acl.engine import ReadRights, SecurityDescriptor
from ancre.acl.sd_parse import parse_security_descriptor
from ancre.acl.share import configured_share_descriptor, share_rights
from ancre.acl.token import BUILTIN_NAMES, WELL_KNOWN_SIDS, LocalGroups, TokenRules
from ancre.connectors.smb.rpc import RpcError, RpcTarget, ServerAccounts, server_accounts, share_descriptor
from ancre.errors import AclError, DirectoryError
from ancre.settings.sources import SmbSourceConfig

log = logging.getLogger("ancre.connectors.smb")

__all__ = ["SHARE_REFRESH_S", "ServerRights", "ShareLayerInfo"]

SHARE_REFRESH_S = 60.0
"""The live ACL check (:meth:`ancre.connectors.smb.connector.SmbConnector.read_acls`) re-reads the
share permissions and the file server's local groups at most this often, in seconds (a sync pass
does it once per pass)."""


ShareLayerInfo = tuple[str, SecurityDescriptor | None, str | None, ReadRights]
"""``(description, descriptor, problem, rights)`` of a source's share permissions."""


@dataclass
class _ServerRights:
    """One source's token rules and share permissions as last read (``at``: monotonic seconds);
    ``accounts`` holds the SAMR session the local groups' members are read over."""

    at: float
    rules: TokenRules
    accounts: ServerAccounts | None
    share_layer: ShareLayerInfo | None = None


_SERVER_RIGHTS: dict[tuple[object, ...], _ServerRights] = {}
"""Per source (:meth:`ServerRights.key`), shared by the connectors of one process."""
_SERVER_LOCK = threading.Lock()
_RETIRED: list[tuple[float, ServerAccounts]] = []
"""Replaced entries' SAMR sessions, closed a while later (a walk may still be reading members)."""


def _retire(entry: _ServerRights | None) -> None:
    """Queue ``entry``'s session for closing; close those retired more than twice
    :data:`SHARE_REFRESH_S` ago. Call with :data:`_SERVER_LOCK` held."""
    now = time.monotonic()
    if entry is not None and entry.accounts is not None:
        _RETIRED.append((now, entry.accounts))
    while _RETIRED and now - _RETIRED[0][0] > 2 * SHARE_REFRESH_S:
        _RETIRED.pop(0)[1].close()




class ServerRights:
    """The token rules and share permissions of one source: ``cfg`` (server, port, share,
    username, auth, share_allow / share_deny, local_groups, read_local_groups, server_sid,
    this_organization), ``directory`` (resolves the names of those keys, gives the users' domain
    SID; may be ``None`` when none is named), ``password`` (resolved), ``unc`` (for messages).
    Thread-safe."""

    def __init__(self, cfg: SmbSourceConfig, directory: Directory | None, password: str | None, unc: str) -> None:
        self.cfg = cfg
        self.source_id = cfg.id
        self.directory = directory
        self.unc = unc
        self._password = password
        self._share: tuple[frozenset[str] | None, frozenset[str]] | None = None

    def rpc_target(self) -> RpcTarget:
        """Where and as whom the MS-RPC calls go (the source's server and account)."""
        return RpcTarget(
            self.cfg.server or "", self.cfg.port, self.cfg.username, self._password,
            kerberos=self.cfg.auth == "kerberos", timeout_s=self.cfg.timeout_s,
        )

    def key(self) -> tuple[object, ...]:
        """What the server's token rules and share permissions depend on: this source's server,
        share, account and rights settings, and its directory."""
        c = self.cfg
        groups = tuple(sorted((k, tuple(v)) for k, v in c.local_groups.items()))
        return ((c.server or "").lower(), c.port, (c.share or "").lower(), c.username, c.auth, c.share_allow,
                c.share_deny, groups, c.read_local_groups, c.server_sid, c.this_organization, id(self.directory))

    def entry(self) -> _ServerRights:
        """The entry of :data:`_SERVER_RIGHTS` for this source, a fresh one when missing or older
        than :data:`SHARE_REFRESH_S` (connectors of one source in one process — a pass's and the
        live check's — share it)."""
        key = self.key()
        with _SERVER_LOCK:
            entry = _SERVER_RIGHTS.get(key)
            if entry is not None and time.monotonic() - entry.at < SHARE_REFRESH_S:
                return entry
        rules, accounts = self._read_token_rules()
        entry = _ServerRights(time.monotonic(), rules, accounts)
        with _SERVER_LOCK:
            old = _SERVER_RIGHTS.get(key)
            _SERVER_RIGHTS[key] = entry
            _retire(old)
        return entry

    def forget(self) -> None:
        """Forget the share permissions and the token rules of this source (for every connector
        of it in this process): read again at next use."""
        with _SERVER_LOCK:
            _retire(_SERVER_RIGHTS.pop(self.key(), None))
        self._share = None

    def token_rules(self) -> TokenRules:
        """How the file server builds a session's token (:class:`~ancre.acl.token.TokenRules`):
        its account and primary domains (LSA) and local groups (SAMR), ``local_groups`` over
        them, ``this_organization``. Read once per pass (and every :data:`SHARE_REFRESH_S` s for
        the live check); when the server refuses, its local groups are undecided. Never raises."""
        return self.entry().rules

    def _read_token_rules(self) -> tuple[TokenRules, ServerAccounts | None]:
        primary: str | None = None
        try:
            primary = directory_domain_sid(self.directory)
        except DirectoryError as e:
            log.warning("source %s: the directory's domain SID can't be read: %s", self.source_id, e)
        account, groups, problem = self.cfg.server_sid, None, None
        found: ServerAccounts | None = None
        if self.cfg.read_local_groups:
            try:
                found = server_accounts(self.rpc_target())
                account, groups = found.account_domain, found.local_groups
                primary = found.primary_domain or primary
            except RpcError as e:
                problem = f"{e} (set sources.{self.source_id}.local_groups)"
                log.warning("source %s: the file server's local groups can't be read: %s", self.source_id, e)
        else:
            problem = f"not read (sources.{self.source_id}.read_local_groups = false)"
        if self.cfg.local_groups:
            try:
                stated = {self._local_group_sid(k): frozenset(self._member_sid(m, k) for m in v)
                          for k, v in self.cfg.local_groups.items()}
            except (AclError, DirectoryError) as e:
                return TokenRules.network(None, account_domain=account, primary_domain=primary,
                                          problem=f"sources.{self.source_id}.local_groups: {e}",
                                          this_organization=self.cfg.this_organization), found
            origin = f"sources.{self.source_id}.local_groups"
            groups = groups.merged(stated, origin) if groups is not None else LocalGroups(stated, origin=origin, complete=False)
        return TokenRules.network(groups, account_domain=account, primary_domain=primary, problem=problem,
                                  this_organization=self.cfg.this_organization), found

    def _local_group_sid(self, name: str) -> str:
        bare = name.removeprefix("sid:")
        if bare.upper().startswith("S-1-"):
            return "S" + bare[1:]
        short = bare.rpartition("\\")[2].casefold()
        for sid, builtin in BUILTIN_NAMES.items():
            if builtin.casefold() == short:
                return sid
        raise AclError(f"{name!r}: give a local group by SID, or a BUILTIN group by name")

    def _member_sid(self, name: str, group: str) -> str:
        bare = name.removeprefix("sid:")
        if bare.upper().startswith("S-1-"):
            return "S" + bare[1:]
        short = bare.rpartition("\\")[2].casefold()
        for sid, (known, _) in WELL_KNOWN_SIDS.items():
            if known.casefold() == short:
                return sid
        return self._resolve(name, f"local_groups.{group}")[4:]

    def share_layer(self) -> ShareLayerInfo:
        """``(description, descriptor, problem, rights)`` of the share permissions: the share's
        security descriptor read from the server (SRVSVC NetShareGetInfo 502), or stated by
        ``share_allow`` / ``share_deny``, compiled with :meth:`token_rules`; ``problem`` (and
        rights readable by nobody) when it can't be read. Cached like the token rules."""
        entry = self.entry()
        if entry.share_layer is not None:
            return entry.share_layer
        rules = entry.rules
        sd: SecurityDescriptor | None = None
        problem: str | None = None
        if self.cfg.share_allow or self.cfg.share_deny:
            description = (f"share permissions configured (share_allow={list(self.cfg.share_allow)} "
                           f"share_deny={list(self.cfg.share_deny)})")
            try:
                allow, deny = self.share_principals()
                sd = configured_share_descriptor(allow, deny)
            except (AclError, DirectoryError) as e:
                problem = str(e)
        else:
            description = f"share permissions of {self.unc} (NetShareGetInfo)"
            try:
                session = entry.accounts.session if entry.accounts is not None else None
                sd = parse_security_descriptor(share_descriptor(self.rpc_target(), self.cfg.share or "", session))
            except AclError as e:
                problem = f"{e} (or state them with sources.{self.source_id}.share_allow)"
        if problem is not None:
            log.warning("source %s: share permissions unreadable: %s", self.source_id, problem)
            rights = ReadRights.nobody(f"acl_unreadable: share permissions: {problem}")
        else:
            rights = share_rights(sd, rules)
        layer = (description, sd, problem, rights)
        entry.share_layer = layer
        return layer

    def share_principals(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        """``(share_allow, share_deny)`` as ``sid:`` principals (``share_allow`` ``None`` when not
        configured). Raises :class:`AclError` for a name the directory does not know."""
        if self._share is None:
            allow = frozenset(self._resolve(n, "share_allow") for n in self.cfg.share_allow) if self.cfg.share_allow else None
            deny = frozenset(self._resolve(n, "share_deny") for n in self.cfg.share_deny)
            self._share = (allow, deny)
        return self._share

    def _resolve(self, name: str, key: str) -> str:
        if name.startswith("sid:"):
            return name
        if self.directory is None:
            raise AclError(f"sources.{self.source_id}.{key}: {name!r} needs a directory to resolve")
        sid = self.directory.sid_of(name)
        if sid is None:
            raise AclError(f"sources.{self.source_id}.{key}: {name!r} is not known to the directory")
        return f"sid:{sid}"

