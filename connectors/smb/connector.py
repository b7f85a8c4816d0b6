"""SMB connector: a Windows (or Samba) share read with smbprotocol, NT ACLs from the server.

The connector holds the listing rules, the ACL computation and the checks; the wire calls are in
:mod:`ancre.connectors.smb.wire`, the session and retry policy in
:mod:`ancre.connectors.smb.session`, DFS referrals and link targets in
:mod:`ancre.connectors.smb.dfs`, the server's token rules and the share permissions in
:mod:`ancre.connectors.smb.rights`.

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
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from smbprotocol.exceptions import SMBOSError
from smbprotocol.file_info import FileAttributes

from ancre.acl.directory import Directory
from ancre.acl.engine import (
    FILE_READ_ATTRIBUTES,
    READ_ACCESS,
    ReadRights,
    SecurityDescriptor,
    acl_problem,
    compile_read,
)
from ancre.acl.explain import AclTrace, ShareLayer, canonical_path
from ancre.acl.sd_parse import parse_security_descriptor
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
from ancre.connectors.smb.dfs import MAX_DFS_HOPS, DfsResolver
from ancre.connectors.smb.rights import SHARE_REFRESH_S, ServerRights, ShareLayerInfo
from ancre.connectors.smb.session import (
    Blocked,
    Gone,
    SmbSession,
    drop_connections,
    is_access_denied,
    is_auth_error,
    is_connection_error,
    is_not_found,
)
from ancre.errors import AclError, ConfigError, SourceUnavailableError
from ancre.models import Acl, SourceItem, nfc
from ancre.settings import resolve_secret
from ancre.settings.sources import SmbSourceConfig

log = logging.getLogger("ancre.connectors.smb")

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
        self._password = resolve_secret(cfg.password, f"sources.{cfg.id}.password")
        self.session = SmbSession(cfg, self._password, self.unc)
        """The pooled session every call runs on (retry and fail-fast policy)."""
        self.rights = ServerRights(cfg, directory, self._password, self.unc)
        """The server's token rules and the share permissions (read over MS-RPC, cached)."""
        self.dfs = DfsResolver(cfg.server, cfg.share, follow=cfg.dfs,
                               tree=lambda share, kw: smb_wire.tree_connect(cfg.server or "", share, **kw))
        """The DFS links of the share: which are followed, where they lead."""
        self._cache_lock = threading.Lock()
        self._listed_dirs: dict[str, str] = {}
        """Folders (relative paths as listed) the last listing walked, each with the path it leads
        to in the share: their DFS links were checked by that listing, so :meth:`fetch_acl` and
        :meth:`fetch_content` of its items need no referral request of their own."""

        self._share_at = time.monotonic()
        self._rights_lock = threading.Lock()
        self._parents: dict[str, tuple[float, SecurityDescriptor | None]] = {}
        self._session_lock = threading.Lock()
        self.watch_ready = threading.Event()
        """Set while :meth:`watch` has its CHANGE_NOTIFY requests armed on the server."""
        self._wire: dict[str, str] = {}
        """NFC relative path → the path as the server spells it, for the paths whose names are not
        NFC on the share (written NFD by a macOS client): listings and stats fill it."""

    # ---------------------------------------------------------------- sessions
    def session_kwargs(self, cache: dict[str, Any] | None = None) -> dict[str, Any]:
        """smbclient keyword arguments of this source (credentials, port, security, the
        connection cache — this connector's own unless ``cache`` is given)."""
        return self.session.kwargs(cache)

    @staticmethod
    def drop_connections(cache: dict[str, Any]) -> None:
        """Close every connection of ``cache`` without waiting for the server (it may be gone)."""
        drop_connections(cache)

    @property
    def _cache(self) -> dict[str, Any]:
        return self.session.cache

    def close(self) -> None:
        """Close this connector's SMB connections."""
        self.session.close()

    def unc_of(self, rel_path: str) -> str:
        """``"CLIENTS/x.docx"`` → ``\\\\server\\share\\CLIENTS\\x.docx`` (``""`` → the share)."""
        rel = rel_path.strip("/")
        return self.unc + ("\\" + rel.replace("/", "\\") if rel else "")

    def _remember(self, rel: str, wire: str) -> None:
        if rel != wire:
            self._wire[rel] = wire
        else:
            self._wire.pop(rel, None)

    def _wire_of(self, rel: str, kw: dict[str, Any]) -> str:
        """The server's spelling of the NFC relative path ``rel``: remembered from a listing, else
        found folder by folder among the entries whose NFC form matches (the name as given when
        there is none: the caller then gets the server's not-found)."""
        if rel in self._wire or rel.isascii():
            return self._wire.get(rel, rel)
        parent, _, name = rel.rpartition("/")
        wire_parent = self._wire_of(parent, kw) if parent else ""
        try:
            entries = smb_wire.list_dir(self.unc_of(wire_parent), **kw)
        except Exception as e:
            if is_not_found(e) and not is_connection_error(e):
                return rel
            raise
        hits = [str(e.file_name) for e in entries if nfc(e.file_name) == name]
        if not hits:
            return f"{wire_parent}/{name}" if wire_parent else name
        wire = f"{wire_parent}/{hits[0]}" if wire_parent else hits[0]
        self._remember(rel, wire)
        return wire

    # ---------------------------------------------------------------- listing
    def _item(self, rel: str, info: Any, skip: str | None = None) -> SourceItem:
        fid = int(info.file_id or 0)
        native = f"fid:{fid:016x}" if fid else rel
        size = 0 if skip else int(info.end_of_file)
        return SourceItem(self.source_id, native, rel, size, info.last_write_time.timestamp(), skip=skip)

    def _link_reason(self, info: Any) -> str | None:
        """Why an entry is reported instead of read: ``symlink`` / ``junction`` for those reparse
        points, ``dfs link (dfs = false)``; ``None`` for a plain entry, a followed DFS link or
        another reparse tag (deduplicated or cloud files are plain files)."""
        if not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT:
            return None
        tag = int(info.ea_size)
        if tag == smb_wire.IO_REPARSE_TAG_SYMLINK:
            return "symlink"
        if tag == smb_wire.IO_REPARSE_TAG_MOUNT_POINT:
            return "junction"
        if tag == smb_wire.IO_REPARSE_TAG_DFS and not self.cfg.dfs:
            return "dfs link (dfs = false)"
        return None

    @staticmethod
    def _is_dfs(info: Any) -> bool:
        reparse = bool(info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT)
        return reparse and int(info.ea_size) == smb_wire.IO_REPARSE_TAG_DFS

    # ---------------------------------------------------------------- DFS links
    def _guard(self, rel: str, kw: dict[str, Any], *, listed: bool = False) -> None:
        """Raise :class:`Blocked` when ``rel`` is, or lies under, a DFS link that is not followed.
        ``listed``: ``rel`` is an item of this connector's listing; when its folder was walked by
        the last listing (whose links were checked then), no referral is asked again."""
        if listed:
            with self._cache_lock:
                if rel.rpartition("/")[0] in self._listed_dirs:
                    return
        reach = self.dfs.reach(rel, kw)
        if reach.blocked is not None:
            raise Blocked(f"{rel!r}: {reach.blocked}")

    def _descend(self, info: Any) -> bool:
        """Whether a folder entry is walked: not a symlink/junction; a DFS link only with ``dfs``."""
        if not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT:
            return True
        tag = int(info.ea_size)
        if tag == smb_wire.IO_REPARSE_TAG_DFS:
            return self.cfg.dfs
        return tag not in (smb_wire.IO_REPARSE_TAG_SYMLINK, smb_wire.IO_REPARSE_TAG_MOUNT_POINT)

    def _walk(
        self, rel_dir: str, kw: dict[str, Any], out: list[SourceItem], unreachable: list[str], real_dir: str | None = None
    ) -> None:
        """Append the indexable files under ``rel_dir`` (depth first, sorted by name) to ``out``;
        ``real_dir``: where ``rel_dir`` leads in the share once DFS links are followed (default
        ``rel_dir``).

        A folder that can't be listed raises :class:`SourceUnavailableError` naming it, except a
        plain folder that vanished meanwhile (skipped). A DFS link is followed only when its
        referral targets lie inside the share (:meth:`_dfs_entry`); any other is listed as a
        skipped item naming why. A followed link that can't be listed (any error: target refused or
        down, folder gone) is appended to ``unreachable`` and skipped, provided the share itself
        still answers (checked at once; if it does not, the error propagates as the connection
        error it is)."""
        # (path as listed, its spelling on the server (NFD names), path it leads to in the share,
        # through a link?, targets followed on the way)
        stack: list[tuple[str, str, str, bool, tuple[str, ...]]] = [
            (rel_dir, self._wire_of(rel_dir, kw) if rel_dir else "", rel_dir if real_dir is None else real_dir, False, ())
        ]
        while stack:
            cur, wire_cur, real, is_link, via = stack.pop()
            try:
                entries = sorted(smb_wire.list_dir(self.unc_of(wire_cur), **kw), key=lambda e: e.file_name)
                with self._cache_lock:
                    self._listed_dirs[cur] = real
            except Exception as e:
                if is_link and self._share_answers(kw):
                    log.warning(
                        "source %s: DFS link %r unreachable (%s: %s): left as indexed",
                        self.source_id, cur, type(e).__name__, e,
                    )
                    unreachable.append(cur)
                    continue
                if is_connection_error(e) or is_auth_error(e):
                    raise
                if cur != rel_dir and not is_link and is_not_found(e):
                    continue  # removed between its parent's listing and its own
                what = "DFS link" if is_link else "folder"
                raise SourceUnavailableError(
                    f"source {self.source_id}: {what} {cur or '(share root)'!r} can't be listed "
                    f"({type(e).__name__}: {e}); nothing under it is purged"
                ) from None
            subdirs: list[tuple[str, str, str, bool, tuple[str, ...]]] = []
            for info in entries:
                name = nfc(info.file_name)
                rel = f"{cur}/{name}" if cur else name
                wire = f"{wire_cur}/{info.file_name}" if wire_cur else str(info.file_name)
                self._remember(rel, wire)
                child = f"{real}/{name}" if real else name
                if self._is_dfs(info) and self.cfg.dfs:
                    reason, target = self.dfs.entry(child, kw)
                    folded = target.casefold()
                    if reason is None and any(folded == v or v.startswith(folded + "/") for v in via):
                        reason = f"dfs link loop (leads back to {target!r})"
                    elif reason is None and len(via) >= MAX_DFS_HOPS:
                        reason = f"dfs link chain longer than {MAX_DFS_HOPS} links"
                    if reason is None:
                        subdirs.append((rel, wire, target, True, (*via, folded)))
                    else:
                        log.info("source %s: %r not followed: %s", self.source_id, rel, reason)
                        out.append(self._item(rel, info, skip=reason))
                    continue
                reason = self._link_reason(info)
                if info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY:
                    if self._descend(info):
                        subdirs.append((rel, wire, child, False, via))
                    elif reason is not None:
                        out.append(self._item(rel, info, skip=reason))
                    continue
                if is_ignored(name, self.ignore) or not path_selected(rel, self.cfg.include, self.cfg.exclude):
                    continue
                out.append(self._item(rel, info, skip=reason))
            stack.extend(reversed(subdirs))

    def _share_answers(self, kw: dict[str, Any]) -> bool:
        """Whether the share's root can still be read (after a DFS link failed: its target is at
        fault, not this server)."""
        try:
            smb_wire.stat(self.unc, **kw)
        except Exception as e:  # noqa: BLE001 - any failure: the server itself is in doubt
            log.debug("source %s: share root check failed: %s", self.source_id, e)
            return False
        return True

    def list_items(self) -> Listing:
        """Every indexable file of the share, except those under a DFS link whose referral can't
        be followed: those links are the listing's ``unreachable`` parts. Raises
        :class:`SourceUnavailableError` when the share, or any folder in it, can't be listed
        (the message names the folder)."""
        self._refresh_server_rights()  # share permissions and local groups re-read once per full pass
        self.dfs.forget_addresses()  # DFS targets are checked afresh too
        with self._cache_lock:
            self._listed_dirs = {}

        def walk(kw: dict[str, Any]) -> tuple[list[SourceItem], list[str]]:
            out: list[SourceItem] = []
            unreachable: list[str] = []
            self._walk("", kw, out, unreachable)
            return out, unreachable

        items, unreachable = self.session.call("list the share", walk)
        return Listing(tuple(items), tuple(Unreachable(p, "DFS link target unreachable") for p in unreachable))

    def list_under(self, prefix: str) -> list[SourceItem]:
        """The indexable files below the folder ``prefix`` (``[]`` when it is not an existing
        folder). Used by the sync engine for folder events (an ACL change on a folder re-reads
        the ACLs of its subtree); files under an unfollowable DFS link are left out (the engine
        purges nothing it can't ``get_item``), and a ``prefix`` at or under a DFS link that is not
        followed gives ``[]``. Raises :class:`SourceUnavailableError`."""
        rel = nfc(prefix.strip("/"))
        if not rel:
            return list(self.list_items().items)

        def walk(kw: dict[str, Any]) -> list[SourceItem]:
            out: list[SourceItem] = []
            reach = self.dfs.reach(rel, kw)
            if reach.blocked is not None:
                return []  # under (or at) a DFS link that is not followed: nothing of it is listed
            try:
                self._walk(rel, kw, out, [], reach.real)
            except SourceUnavailableError as e:
                # the prefix itself missing or a file: nothing below it
                try:
                    info = self._stat(rel, kw)
                except Exception:  # noqa: BLE001 - re-raise the listing error below
                    info = None
                if info is None or not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY:
                    return []
                raise e
            return out

        return self.session.call(f"list {rel!r}", walk)

    def _stat(self, rel: str, kw: dict[str, Any]) -> Any:
        """The directory entry information of ``rel`` (via its parent's listing, so that size and
        mtime are exactly those of :meth:`list_items`), ``None`` if it does not exist."""
        parent, _, name = rel.rpartition("/")
        wire_parent = self._wire_of(parent, kw) if parent else ""
        try:
            found = smb_wire.list_dir(self.unc_of(wire_parent), name, **kw)
            if not found and not name.isascii():  # the server may spell it NFD: compare NFC forms
                found = smb_wire.list_dir(self.unc_of(wire_parent), **kw)
            hits = [e for e in found if nfc(e.file_name).casefold() == name.casefold()]
        except Exception as e:
            if is_not_found(e) and not is_connection_error(e):
                return None
            raise
        exact = [e for e in hits if nfc(e.file_name) == name]
        info = (exact or hits or [None])[0]
        if info is not None:
            wire = f"{wire_parent}/{info.file_name}" if wire_parent else str(info.file_name)
            self._remember(f"{parent}/{nfc(info.file_name)}" if parent else nfc(info.file_name), wire)
        return info

    def get_item(self, path: str) -> SourceItem | None:
        """The listing entry of one relative path; ``None`` when it is absent, a folder, ignored or
        excluded, or under a DFS link that is not followed; a symlink, a junction or a DFS link
        that is not followed gives an item with ``skip`` set (never read), as in the listing.
        Raises :class:`SourceUnavailableError` when the share can't be reached."""
        rel = nfc(path.strip("/"))
        if not rel or any(p in ("", ".", "..") for p in rel.split("/")):
            return None
        name = rel.rsplit("/", 1)[-1]
        if is_ignored(name, self.ignore) or not path_selected(rel, self.cfg.include, self.cfg.exclude):
            return None

        def stat(kw: dict[str, Any]) -> SourceItem | None:
            parent = rel.rpartition("/")[0]
            reach = self.dfs.reach(parent, kw)
            if reach.blocked is not None:
                return None  # under a DFS link that is not followed
            info = self._stat(rel, kw)
            if info is None:
                return None
            real = nfc(info.file_name)
            if self._is_dfs(info) and self.cfg.dfs:
                reason, _ = self.dfs.entry(f"{reach.real}/{real}" if reach.real else real, kw)
                if reason is None:
                    return None  # a followed link: a folder
                return self._item(f"{parent}/{real}" if parent else real, info, skip=reason)
            reason = self._link_reason(info)
            if info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY and (reason is None or self._descend(info)):
                return None
            return self._item(f"{parent}/{real}" if parent else real, info, skip=reason)

        try:
            return self.session.call(f"stat {rel!r}", stat)
        except SMBOSError as e:
            raise SourceUnavailableError(f"source {self.source_id}: {rel!r} can't be read: {e}") from None

    # ---------------------------------------------------------------- content and rights
    def fetch_content(self, item: SourceItem) -> bytes:
        """The file's bytes. Raises ``OSError`` (e.g. ``SMBOSError``: deleted, sharing
        violation, access denied; ``PermissionError`` for a path under a DFS link that is not
        followed) or :class:`SourceUnavailableError`."""

        def read(kw: dict[str, Any]) -> bytes:
            self._guard(item.path, kw, listed=True)
            return smb_wire.read_file(self.unc_of(self._wire_of(item.path, kw)), **kw)

        try:
            return self.session.call(f"read {item.path!r}", read, fail_fast=True)
        except Blocked as e:
            raise PermissionError(f"source {self.source_id}: {e}") from None

    def security_descriptor(self, rel_path: str) -> SecurityDescriptor:
        """The parsed security descriptor of a file or folder (``""``: the share root), for
        ``ancre acl explain``. Raises :class:`AclError` when unreadable or malformed, or at or
        under a DFS link that is not followed,
        :class:`SourceUnavailableError` when the share can't be reached."""
        rel = nfc(rel_path.strip("/"))

        def read(kw: dict[str, Any]) -> bytes:
            self._guard(rel, kw)
            return smb_wire.read_security_descriptor(self.unc_of(self._wire_of(rel, kw)), **kw)

        try:
            raw = self.session.call(f"read the security of {rel!r}", read)
        except Blocked as e:
            raise AclError(f"{e} on {self.unc_root}") from None
        except SMBOSError as e:
            if is_not_found(e):
                raise AclError(f"{rel!r} does not exist on {self.unc_root}") from None
            if is_access_denied(e):
                raise AclError(f"access denied on READ_CONTROL for {rel!r} (the service account can't read its ACL)") from None
            raise AclError(f"{rel!r}: {e}") from None
        return parse_security_descriptor(raw)

    def fetch_acl(self, item: SourceItem) -> Acl:
        """Who may read the file: its DACL walked for FILE_GENERIC_READ with the server's token ∩
        the share permissions (:meth:`read_rights`). An unreadable or malformed descriptor gives
        ``Acl.nobody(reason)``; a server that can't be reached raises
        :class:`SourceUnavailableError` (the pass stops as suspect instead of revoking rights)."""
        try:
            return self._acl_at(item.path, listed=True)
        except Gone as e:
            return Acl.nobody(f"acl_unreadable: {e}")

    def _acl_at(self, rel: str, *, listed: bool = False) -> Acl:
        """:meth:`fetch_acl` of a relative path (``listed``: see :meth:`_guard`); raises
        :class:`Gone` when it does not exist or lies under a DFS link that is not followed
        (:class:`Blocked`)."""
        return self.read_rights(rel, listed=listed).acl()

    def read_rights(self, rel: str, *, listed: bool = False) -> ReadRights:
        """The compiled read rights of a relative path (``""``: the share root): its descriptor
        (and its parent's, when FILE_READ_ATTRIBUTES depends on it) walked with
        :meth:`token_rules`, joined with :meth:`share_layer`. Raises :class:`Gone` (absent, or
        under a DFS link that is not followed) and :class:`SourceUnavailableError`."""
        sd, reason = self._descriptor_at(rel, listed=listed)
        if sd is None:
            return ReadRights.nobody(f"acl_unreadable: {reason}")
        rules = self.token_rules()
        rights = compile_read(sd, rules=rules)
        if rel and rights.clauses and (
            compile_read(sd, rules=rules, desired=READ_ACCESS & ~FILE_READ_ATTRIBUTES).clauses != rights.clauses
        ):
            rights = compile_read(sd, rules=rules, parent=self._parent_descriptor(rel))
        return rights.both(self.share_layer()[3])

    def _descriptor_at(self, rel: str, *, listed: bool = False) -> tuple[SecurityDescriptor | None, str | None]:
        """The parsed descriptor of ``rel``, or ``(None, why)`` when it can't be read or parsed.
        Raises :class:`Gone` and :class:`SourceUnavailableError`."""
        def read(kw: dict[str, Any]) -> bytes:
            self._guard(rel, kw, listed=listed)
            return smb_wire.read_security_descriptor(self.unc_of(self._wire_of(rel, kw)), **kw)

        try:
            raw = self.session.call(f"read the security of {rel!r}", read, fail_fast=True)
        except (SourceUnavailableError, Gone):
            raise
        except SMBOSError as e:
            if is_access_denied(e):
                return None, "access denied on READ_CONTROL"
            if is_not_found(e):
                raise Gone(str(e)) from None
            return None, str(e)
        except Exception as e:  # noqa: BLE001 - whatever went wrong, fail closed
            return None, f"{type(e).__name__}: {e}"
        try:
            return parse_security_descriptor(raw), None
        except AclError as e:
            return None, str(e)

    PARENT_TTL_S = 5.0
    """A parent folder's descriptor (for FILE_READ_ATTRIBUTES) is reused this many seconds."""

    def _parent_descriptor(self, rel: str) -> SecurityDescriptor | None:
        """The descriptor of ``rel``'s parent folder, ``None`` when it can't be read (then it
        grants nothing: the safe side)."""
        parent = rel.rpartition("/")[0]
        now = time.monotonic()
        with self._rights_lock:
            hit = self._parents.get(parent)
        if hit is not None and now - hit[0] < self.PARENT_TTL_S:
            return hit[1]
        try:
            sd, _ = self._descriptor_at(parent)
        except Gone:
            sd = None
        with self._rights_lock:
            if len(self._parents) > 4096:
                self._parents.clear()
            self._parents[parent] = (now, sd)
        return sd

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each relative path, as :meth:`fetch_acl` computes it (one compound
        CREATE + QUERY_INFO + CLOSE per path, NTFS DACL ∩ share permissions), for the query
        core's live check (see :meth:`ancre.connectors.base.Connector.read_acls`). A path the
        server no longer has, or one at or under a DFS link that is not followed, is left out
        (on a DFS root share, one referral request per path tells). Raises :class:`SourceUnavailableError` when the share
        can't be reached (at once for :data:`FAIL_FAST_S` seconds after a failed reconnection).
        The share permissions and the server's local groups are re-read at most every
        :data:`SHARE_REFRESH_S` seconds. Thread-safe: concurrent batches share one session."""
        with self._session_lock:
            now = time.monotonic()
            if now - self._share_at > SHARE_REFRESH_S:
                self._refresh_server_rights()
                self.dfs.forget_addresses()  # DFS target names resolved afresh as well
            # one session for the concurrent batches (smbclient's pool is not safe against two
            # threads registering the same server at once)
            self.session.call("connect", lambda kw: smb_wire.register_session(self.cfg.server or "", **kw), fail_fast=True)
        out: dict[str, Acl] = {}
        for path in paths:
            try:
                out[path] = self._acl_at(nfc(path.strip("/")))
            except Gone:
                continue
        return out

    def acl_of_descriptor(
        self, sd: SecurityDescriptor | None, reason: str | None = None, parent: SecurityDescriptor | None = None
    ) -> Acl:
        """``sd`` walked with the server's token ∩ the share permissions (what :meth:`fetch_acl`
        computes, given the parent's descriptor)."""
        rules = self.token_rules()
        return compile_read(sd, rules=rules, parent=parent, unreadable_reason=reason).both(self.share_layer()[3]).acl()

    # ---------------------------------------------------------------- acl explain (AclExplainable)
    def explain_path(self, path: str) -> str:
        """See :meth:`ancre.connectors.base.AclExplainable.explain_path`: relative to the share, or a
        UNC path / URL under ``unc_root`` (default ``\\\\server\\share``)."""
        return canonical_path(path, unc_root=self.unc_root)

    def explain_acl(self, path: str) -> AclTrace:
        """See :meth:`ancre.connectors.base.AclExplainable.explain_acl`: the security descriptor
        read from the server now (``unreadable`` when absent, denied or malformed), its parent's,
        the server's token rules and the share permissions (read from the server, or configured).
        Raises :class:`SourceUnavailableError` when the share can't be reached."""
        description, share_sd, share_problem, _ = self.share_layer()
        share = ShareLayer(description, share_sd, share_problem)
        rules = self.token_rules()
        try:
            sd = self.security_descriptor(path)
        except AclError as e:
            return AclTrace(self.source_id, path, unreadable=str(e), share=share, rules=rules)
        parent = self._parent_descriptor(path) if path else None
        return AclTrace(self.source_id, path, descriptor=sd, share=share, rules=rules, parent=parent)

    # ---------------------------------------------------------------- the server's token and share permissions
    def _refresh_server_rights(self) -> None:
        """Forget the share permissions and the token rules: read again at next use."""
        self.rights.forget()
        with self._rights_lock:
            self._parents = {}
            self._share_at = time.monotonic()

    def token_rules(self) -> TokenRules:
        """See :meth:`ancre.connectors.smb.rights.ServerRights.token_rules`. Never raises."""
        return self.rights.token_rules()

    def share_layer(self) -> ShareLayerInfo:
        """See :meth:`ancre.connectors.smb.rights.ServerRights.share_layer`."""
        return self.rights.share_layer()

    def share_principals(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        """See :meth:`ancre.connectors.smb.rights.ServerRights.share_principals`."""
        return self.rights.share_principals()

    # ---------------------------------------------------------------- placement
    def location(self, item: SourceItem) -> str:
        """UNC folder of the item under ``unc_root``, with a trailing backslash."""
        return unc_folder(self.unc_root, item.path)

    # ---------------------------------------------------------------- changes
    def watch(self, on_change: ChangeCallback, stop: threading.Event) -> None:
        """Block until ``stop`` is set, reporting changes from SMB2 CHANGE_NOTIFY (recursive, on
        its own session): see :class:`ancre.connectors.smb.notify.ShareWatcher`."""
        from ancre.connectors.smb.notify import ShareWatcher

        ShareWatcher(self, on_change, stop).run()

    # ---------------------------------------------------------------- ancre check
    def check(self) -> SourceCheck:
        """``ancre check`` of the share: list its root, read the root's security descriptor and
        reduce it to a usable ACL (share permissions applied). Never raises."""
        where = self.unc_of("")
        try:
            entries = smb_wire.list_dir(where, **self.session_kwargs())
        except Exception as e:  # noqa: BLE001 - a check reports, it does not crash
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
        description, _share_sd, share_problem, _ = self.share_layer()
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
        acl = self.acl_of_descriptor(sd)
        issue = acl_problem(acl)
        if issue is not None:
            return SourceCheck(
                False, f"{where}: the root's ACL can't be used: {issue}",
                f"check sources.{self.source_id}.share_allow / share_deny / local_groups and the directory",
            )
        return SourceCheck(
            True, f"{where}: {len(entries)} entries at the root; its DACL read ({len(sd.dacl or ())} ACEs); "
            f"{description}; local groups from {rules.local_groups.origin}",
        )


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
            "(README \"Windows file server and Active Directory\")"
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
