"""SMB connector: a Windows (or Samba) share read with smbprotocol, NT ACLs from the server.

:class:`SmbConnector` is the source's :class:`~ancre.connectors.base.Connector`, composed of parts
that are objects with narrow interfaces: the pooled session and its retry policy
(:class:`~ancre.connectors.smb.session.SmbSession`), the server's spelling of NFC paths
(:class:`~ancre.connectors.smb.names.ServerNames`), the listing and walk
(:class:`~ancre.connectors.smb.listing.ShareListing`, with DFS links through
:class:`~ancre.connectors.smb.dfs.DfsResolver`), the descriptors and rights
(:class:`~ancre.connectors.smb.descriptors.FileRights`, over the server's token rules and share
permissions, :class:`~ancre.connectors.smb.rights.ServerRights`) and the change notification
(:class:`~ancre.connectors.smb.notify.ShareWatcher`); the wire calls are in
:mod:`ancre.connectors.smb.wire`. This module states the rules they apply and holds ``check``.

- **Listing** walks the share with :func:`~ancre.connectors.smb.wire.list_dir` (FILE_ID_FULL_DIRECTORY_INFORMATION): each
  file gives its FileId (the server's stable file id, ``native_id = "fid:<16 hex>"``; the relative
  path when the server returns 0), its size (EndOfFile, bytes) and mtime (LastWriteTime, epoch
  seconds). Ignore rules, include/exclude globs and NFC paths as in the folder connector. Symbolic
  links and junctions (reparse points) are never followed: each is listed as an item with
  ``skip`` set (``symlink`` / ``junction``: status ``skipped`` in ``ancre status``), as in the folder
  connector.
- **DFS links** (a link is never a way around an ACL): each link met is asked for its
  referral (FSCTL_DFS_GET_REFERRALS on ``IPC$``, :func:`~ancre.connectors.smb.dfs.dfs_referral`) and followed (by
  smbclient) only when every target lies inside the source — the same share on the same server
  (:func:`~ancre.connectors.smb.dfs.dfs_target_inside`: same name, or names resolving to a common address). A link to
  another share or server, a loop, or a link whose referral can't be read is never followed: it
  is listed as a skipped item (``dfs link outside the share (\\\\srv\\share\\path)``, ``dfs link
  loop (…)``, ``dfs link referral unreadable (…)``), and a path at or under it gives no item, no
  ACL and no content (``get_item``, ``list_under``, ``read_acls``, ``fetch_*``: on a DFS root
  share, one referral request per path unless its folder was walked by the last listing; a share
  without the DFS capability needs none).
  ``dfs = false`` follows none (``skipped: dfs link (dfs = false)``). An inside link that can't
  be followed (target folder gone, server down) while the share itself still answers is
  an ``unreachable`` part of the :class:`~ancre.connectors.base.Listing` and skipped: the sync
  engine keeps what it indexed under it.
- **Rights**, fetched lazily per file: one compound CREATE(READ_CONTROL) + QUERY_INFO(security:
  OWNER|GROUP|DACL, [MS-SMB2] 2.2.37) + CLOSE, parsed by :mod:`ancre.acl.sd_parse` and walked by
  the ACL engine for FILE_GENERIC_READ with the server's network-logon token
  (:class:`~ancre.acl.token.TokenRules`: its local groups and domains read over LSA/SAMR, or
  configured with ``local_groups``); the parent folder's descriptor too when the file's own DACL
  does not decide FILE_READ_ATTRIBUTES like the other bits; then joined with the share's own
  security descriptor (SRVSVC NetShareGetInfo 502, or ``share_allow`` / ``share_deny``), walked
  with the same token (:mod:`ancre.acl.share`). Both are re-read once per pass, and every
  :data:`SHARE_REFRESH_S` seconds for the live check (:mod:`ancre.connectors.smb.rpc`).
  Unreadable (ACCESS_DENIED on READ_CONTROL, malformed, server gone, share descriptor withheld) →
  ``Acl.nobody(reason)``.
- **Resilience**: every call runs on a pooled session; a connection-level failure (socket closed,
  refused reconnection, expired or deleted session, ...) drops the pooled connection and retries
  the call once on a new one; a second failure raises :class:`SourceUnavailableError` (never an
  empty or partial listing: a folder that can't be listed fails the whole listing, naming it, so
  the sync engine purges nothing; only an inside DFS link that can't be followed is left out,
  see above).
- **Changes**: :meth:`SmbConnector.watch` — SMB2 CHANGE_NOTIFY on the share root with
  WATCH_TREE, see :mod:`ancre.connectors.smb.notify`.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from smbprotocol.exceptions import SMBOSError

from ancre.acl.directory import Directory
from ancre.acl.engine import ReadRights, SecurityDescriptor, acl_problem
from ancre.acl.explain import AclTrace, canonical_path
from ancre.acl.token import TokenRules
from ancre.connectors.base import (
    ChangeCallback,
    CollectionFromConfig,
    Connector,
    Listing,
    SourceCheck,
    SourceContext,
    SourceKind,
    Unreachable,
)
from ancre.connectors.folder import is_ignored, path_selected, unc_folder
from ancre.connectors.smb import wire as smb_wire
from ancre.connectors.smb.descriptors import FileRights
from ancre.connectors.smb.dfs import DfsResolver
from ancre.connectors.smb.listing import ShareListing
from ancre.connectors.smb.names import ServerNames
from ancre.connectors.smb.notify import ShareWatcher, WatchTarget
from ancre.connectors.smb.rights import SHARE_REFRESH_S, ServerRights, ShareLayerInfo
from ancre.connectors.smb.session import Blocked, Gone, SmbSession, drop_connections, is_auth_error
from ancre.errors import AclError, ConfigError, SourceUnavailableError
from ancre.models import Acl, SourceItem, nfc
from ancre.settings import resolve_secret
from ancre.settings.sources import SmbSourceConfig


class SmbConnector(CollectionFromConfig[SmbSourceConfig]):
    """A :class:`~ancre.connectors.base.Connector` over one SMB share; also
    :class:`~ancre.connectors.base.Watchable`, :class:`~ancre.connectors.base.SubtreeListing`,
    :class:`~ancre.connectors.base.Closeable`
    and :class:`~ancre.connectors.base.Checkable`.

    ``cfg``: a ``kind = "smb"`` source (server, port, share, username, password or password_env,
    auth, require_signing, encrypt, dfs, timeout_s, share_allow/share_deny, local_groups,
    read_local_groups, server_sid, this_organization, include/exclude, unc_root for citations —
    default ``\\\\server\\share``). ``directory`` resolves share_allow/share_deny/local_groups
    names and gives the users' domain SID. Raises :class:`ConfigError` on a missing server/share or password variable.
    Thread-safe: the sync engine and the watcher may run at once (the watcher has its own session).
    """

    notify_buffer_size = 65536
    """Bytes the server may return per CHANGE_NOTIFY (more changes → STATUS_NOTIFY_ENUM_DIR → rescan)."""

    def __init__(self, cfg: SmbSourceConfig, *, directory: Directory | None, ignore: tuple[str, ...]) -> None:
        if not cfg.server or not cfg.share:
            raise ConfigError(f"sources.{cfg.id}: server and share are required for an smb source")
        self.cfg = cfg
        self.source_id = cfg.id
        self.collection = cfg.collection
        self.directory = directory
        self.ignore = ignore
        self.unc = f"\\\\{cfg.server}\\{cfg.share}"
        """The share as smbclient addresses it."""
        self.unc_root = cfg.unc_root or self.unc
        """The share's UNC root as users know it (citations)."""
        password = resolve_secret(cfg.password, f"sources.{cfg.id}.password")
        self.session = SmbSession(cfg, password, self.unc)
        """The pooled session every call runs on (retry and fail-fast policy)."""
        self.rights = ServerRights(cfg, directory, password, self.unc)
        """The server's token rules and the share permissions (read over MS-RPC, cached)."""
        self.dfs = DfsResolver(cfg.server, cfg.share, follow=cfg.dfs,
                               tree=lambda share, kw: smb_wire.tree_connect(cfg.server or "", share, **kw))
        """The DFS links of the share: which are followed, where they lead."""
        self.names = ServerNames(self.unc)
        """The server's spelling of NFC paths (names written NFD by a macOS client)."""
        self.listing = ShareListing(cfg, ignore=ignore, session=self.session, dfs=self.dfs, names=self.names)
        """The listing side: the walk, one entry's stat, DFS links met on the way."""
        self.files = FileRights(
            source_id=cfg.id, unc_root=self.unc_root, session=self.session, names=self.names, rights=self.rights,
            guard=lambda rel, kw, listed: self.listing.guard(rel, kw, listed=listed),
        )
        """The rights side: descriptors, parents, token rules and share permissions."""
        self._share_at = time.monotonic()
        self._session_lock = threading.Lock()
        self.watch_ready = threading.Event()
        """Set while :meth:`watch` has its CHANGE_NOTIFY requests armed on the server."""

    # ---------------------------------------------------------------- sessions
    def session_kwargs(self, cache: dict[str, Any] | None = None) -> dict[str, Any]:
        """smbclient keyword arguments of this source (credentials, port, security, the
        connection cache — this connector's own unless ``cache`` is given)."""
        return self.session.kwargs(cache)

    @staticmethod
    def drop_connections(cache: dict[str, Any]) -> None:
        """Close every connection of ``cache`` without waiting for the server (it may be gone)."""
        drop_connections(cache)

    def close(self) -> None:
        """Close this connector's SMB connections."""
        self.session.close()

    def unc_of(self, rel_path: str) -> str:
        """``"CLIENTS/x.docx"`` → ``\\\\server\\share\\CLIENTS\\x.docx`` (``""`` → the share)."""
        return self.names.unc_of(rel_path)

    def _refresh_server_rights(self) -> None:
        """Forget the share permissions, the token rules and the parents' descriptors, and resolve
        DFS target names afresh: read again at next use."""
        self.files.forget()
        self.dfs.forget_addresses()
        with self._session_lock:
            self._share_at = time.monotonic()

    # ---------------------------------------------------------------- listing (ShareListing)
    def list_items(self) -> Listing:
        """Every indexable file of the share, except those under a DFS link whose referral can't
        be followed: those links are the listing's ``unreachable`` parts. Raises
        :class:`SourceUnavailableError` when the share, or any folder in it, can't be listed
        (the message names the folder). Share permissions, local groups and DFS targets are read
        afresh once per full pass."""
        self._refresh_server_rights()
        items, unreachable = self.listing.list_share()
        return Listing(tuple(items), tuple(Unreachable(p, "DFS link target unreachable") for p in unreachable))

    def list_under(self, prefix: str) -> list[SourceItem]:
        """The indexable files below the folder ``prefix`` (``[]`` when it is not an existing
        folder). Used by the sync engine for folder events (an ACL change on a folder re-reads
        the ACLs of its subtree); files under an unfollowable DFS link are left out (the engine
        purges nothing it can't ``get_item``), and a ``prefix`` at or under a DFS link that is not
        followed gives ``[]``. Raises :class:`SourceUnavailableError`."""
        rel = nfc(prefix.strip("/"))
        return list(self.list_items().items) if not rel else self.listing.list_under(rel)

    def get_item(self, path: str) -> SourceItem | None:
        """The listing entry of one relative path; ``None`` when it is absent, a folder, ignored or
        excluded, or under a DFS link that is not followed; a symlink, a junction or a DFS link
        that is not followed gives an item with ``skip`` set (never read), as in the listing.
        Raises :class:`SourceUnavailableError` when the share can't be reached."""
        rel = nfc(path.strip("/"))
        if not rel or any(p in ("", ".", "..") for p in rel.split("/")):
            return None
        if is_ignored(rel.rsplit("/", 1)[-1], self.ignore) or not path_selected(rel, self.cfg.include, self.cfg.exclude):
            return None
        try:
            return self.session.call(f"stat {rel!r}", lambda kw: self.listing.entry_of(rel, kw))
        except SMBOSError as e:
            raise SourceUnavailableError(f"source {self.source_id}: {rel!r} can't be read: {e}") from None

    def fetch_content(self, item: SourceItem) -> bytes:
        """The file's bytes. Raises ``OSError`` (e.g. ``SMBOSError``: deleted, sharing
        violation, access denied; ``PermissionError`` for a path under a DFS link that is not
        followed) or :class:`SourceUnavailableError`."""

        def read(kw: dict[str, Any]) -> bytes:
            self.listing.guard(item.path, kw, listed=True)
            return smb_wire.read_file(self.names.unc_of(self.names.wire_of(item.path, kw)), **kw)

        try:
            return self.session.call(f"read {item.path!r}", read, fail_fast=True)
        except Blocked as e:
            raise PermissionError(f"source {self.source_id}: {e}") from None

    # ---------------------------------------------------------------- rights (FileRights)
    def security_descriptor(self, rel_path: str) -> SecurityDescriptor:
        """See :meth:`ancre.connectors.smb.descriptors.FileRights.security_descriptor`."""
        return self.files.security_descriptor(rel_path)

    def fetch_acl(self, item: SourceItem) -> Acl:
        """Who may read the file: its DACL walked for FILE_GENERIC_READ with the server's token ∩
        the share permissions (:meth:`read_rights`). An unreadable or malformed descriptor gives
        ``Acl.nobody(reason)``; a server that can't be reached raises
        :class:`SourceUnavailableError` (the pass stops as suspect instead of revoking rights)."""
        try:
            return self.files.acl_at(item.path, listed=True)
        except Gone as e:
            return Acl.nobody(f"acl_unreadable: {e}")

    def read_rights(self, rel: str, *, listed: bool = False) -> ReadRights:
        """See :meth:`ancre.connectors.smb.descriptors.FileRights.read_rights`."""
        return self.files.read_rights(rel, listed=listed)

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each relative path, as :meth:`fetch_acl` computes it (one compound
        CREATE + QUERY_INFO + CLOSE per path, NTFS DACL ∩ share permissions), for the query
        core's live check (see :meth:`ancre.connectors.base.Connector.read_acls`). A path the
        server no longer has, or one at or under a DFS link that is not followed, is left out
        (on a DFS root share, one referral request per path tells). Raises :class:`SourceUnavailableError` when the share
        can't be reached (at once for :data:`~ancre.connectors.smb.session.FAIL_FAST_S` seconds after a failed reconnection).
        The share permissions and the server's local groups are re-read at most every
        :data:`SHARE_REFRESH_S` seconds. Thread-safe: concurrent batches share one session."""
        with self._session_lock:
            due = time.monotonic() - self._share_at > SHARE_REFRESH_S
        if due:
            self._refresh_server_rights()
        with self._session_lock:
            # one session for the concurrent batches (smbclient's pool is not safe against two
            # threads registering the same server at once)
            self.session.call("connect", lambda kw: smb_wire.register_session(self.cfg.server or "", **kw), fail_fast=True)
        out: dict[str, Acl] = {}
        for path in paths:
            try:
                out[path] = self.files.acl_at(nfc(path.strip("/")))
            except Gone:
                continue
        return out

    def acl_of_descriptor(
        self, sd: SecurityDescriptor | None, reason: str | None = None, parent: SecurityDescriptor | None = None
    ) -> Acl:
        """See :meth:`ancre.connectors.smb.descriptors.FileRights.acl_of_descriptor`."""
        return self.files.acl_of_descriptor(sd, reason, parent)

    def explain_path(self, path: str) -> str:
        """See :meth:`ancre.connectors.base.AclExplainable.explain_path`: relative to the share, or a
        UNC path / URL under ``unc_root`` (default ``\\\\server\\share``)."""
        return canonical_path(path, unc_root=self.unc_root)

    def explain_acl(self, path: str) -> AclTrace:
        """See :meth:`ancre.connectors.base.AclExplainable.explain_acl` and
        :meth:`ancre.connectors.smb.descriptors.FileRights.explain`."""
        return self.files.explain(path)

    def token_rules(self) -> TokenRules:
        """See :meth:`ancre.connectors.smb.rights.ServerRights.token_rules`. Never raises."""
        return self.rights.token_rules()

    def share_layer(self) -> ShareLayerInfo:
        """See :meth:`ancre.connectors.smb.rights.ServerRights.share_layer`."""
        return self.rights.share_layer()

    def share_principals(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        """See :meth:`ancre.connectors.smb.rights.ServerRights.share_principals`."""
        return self.rights.share_principals()

    # ---------------------------------------------------------------- placement, changes
    def location(self, item: SourceItem) -> str:
        """UNC folder of the item under ``unc_root``, with a trailing backslash."""
        return unc_folder(self.unc_root, item.path)

    def watch(self, on_change: ChangeCallback, stop: threading.Event) -> None:
        """Block until ``stop`` is set, reporting changes from SMB2 CHANGE_NOTIFY (recursive, on
        its own session): see :class:`ancre.connectors.smb.notify.ShareWatcher`."""
        target = WatchTarget(self.source_id, self.unc, self.ignore, self.session, self.notify_buffer_size, self.watch_ready)
        ShareWatcher(target, on_change, stop).run()

    # ---------------------------------------------------------------- ancre check
    def check(self) -> SourceCheck:
        """``ancre check`` of the share: list its root, read the root's security descriptor and
        reduce it to a usable ACL (share permissions applied). Never raises."""
        where = self.unc_of("")
        try:
            entries = smb_wire.list_dir(where, **self.session_kwargs())
        except Exception as e:  # a check reports, it does not crash
            fix = (
                f"check sources.{self.source_id}.username and its password (password / password_env)"
                if is_auth_error(e) else f"check sources.{self.source_id}.server / share / port and that the server answers"
            )
            return SourceCheck(False, f"{where}: can't list the share root: {type(e).__name__}: {e}", fix)
        try:
            sd = self.security_descriptor("")
        except AclError as e:
            return SourceCheck(
                False, f"{where}: {len(entries)} entries; the root's security descriptor: {e}",
                "the service account needs READ_CONTROL (read permissions) on the whole share",
            )
        self._refresh_server_rights()
        problem = self._rights_problem(where, sd)
        if problem is not None:
            return problem
        description = self.share_layer()[0]
        rules = self.token_rules()
        assert rules.local_groups is not None  # checked by _rights_problem
        return SourceCheck(
            True, f"{where}: {len(entries)} entries at the root; its DACL read ({len(sd.dacl or ())} ACEs); "
            f"{description}; local groups from {rules.local_groups.origin}",
        )

    def _rights_problem(self, where: str, sd: SecurityDescriptor) -> SourceCheck | None:
        """The failed check when the share permissions or the server's local groups can't be read,
        or the root's ACL can't be used; ``None`` when all can."""
        _, _, share_problem, _ = self.share_layer()
        if share_problem is not None:
            return SourceCheck(
                False, f"{where}: the share permissions can't be read: {share_problem}",
                f"make the service account an administrator of the file server, or state the share's permissions "
                f"in sources.{self.source_id}.share_allow / share_deny",
            )
        rules = self.token_rules()
        if rules.local_groups is None:
            return SourceCheck(
                False, f"{where}: the file server's local groups can't be read: {rules.local_groups_problem}",
                f"let the service account query SAM remotely, or list the groups in sources.{self.source_id}.local_groups",
            )
        issue = acl_problem(self.acl_of_descriptor(sd))
        if issue is not None:
            return SourceCheck(
                False, f"{where}: the root's ACL can't be used: {issue}",
                f"check sources.{self.source_id}.share_allow / share_deny / local_groups and the directory",
            )
        return None


def build(cfg: SmbSourceConfig, ctx: SourceContext) -> Connector:
    """The :class:`SmbConnector` of a ``kind = "smb"`` source, with the configured directory
    (names of ``share_allow`` / ``share_deny`` / ``local_groups``, the users' domain SID; optional
    when none of those keys is set).
    Raises :class:`ConfigError` when ``cfg`` is not an :class:`SmbSourceConfig` (the registry may
    hand any kind's config), its password variable is unset, or ``auth = "kerberos"`` without
    the ``kerberos`` extra (:data:`KERBEROS_MODULES`)."""
    if not isinstance(cfg, SmbSourceConfig):
        raise ConfigError(f"sources.{cfg.id}: not an smb source")
    missing = [m for m in KERBEROS_MODULES if importlib.util.find_spec(m) is None] if cfg.auth == "kerberos" else []
    if missing:
        raise ConfigError(
            f"sources.{cfg.id}.auth = \"kerberos\" needs the `kerberos` extra ({', '.join(missing)} not installed): "
            "sudo apt install libkrb5-dev gcc python3-dev, then pip install 'ancre[kerberos]' in ancre's environment "
            "(docs/WINDOWS-AD.md)"
        )
    try:
        directory: Directory | None = ctx.directory()
    except ConfigError:
        if cfg.share_allow or cfg.share_deny or cfg.local_groups:
            raise
        directory = None  # names to resolve: none; the users' domain then comes from the server (LSA)
    return SmbConnector(cfg, directory=directory, ignore=ctx.ignore)


KERBEROS_MODULES = ("gssapi", "krb5")
"""What ``auth = "kerberos"`` needs (pyspnego's Kerberos provider): the ``kerberos`` extra."""

KIND = SourceKind("smb", SmbSourceConfig, build)
"""The ``smb`` source kind (:data:`ancre.connectors.registry.REGISTRY`)."""


__all__ = ["KIND", "SHARE_REFRESH_S", "SmbConnector", "SmbSourceConfig", "build"]
