"""The listing of an SMB share (:class:`ShareListing`): the walk of its folders with
FILE_ID_FULL_DIRECTORY_INFORMATION (:func:`~ancre.connectors.smb.wire.list_dir`), one entry's
``stat``, the listing rules (ignore globs, include/exclude, NFC paths), links that are reported
instead of read (symbolic links, junctions) and the DFS links met on the way — followed only inside
the share (:class:`~ancre.connectors.smb.dfs.DfsResolver`). The module doc of
:mod:`ancre.connectors.smb.connector` states the rules; this module applies them.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from smbprotocol.file_info import FileAttributes

from ancre.connectors.folder import is_ignored, path_selected
from ancre.connectors.smb import wire as smb_wire
from ancre.connectors.smb.dfs import MAX_DFS_HOPS, DfsResolver
from ancre.connectors.smb.names import ServerNames
from ancre.connectors.smb.session import Blocked, SmbSession, is_auth_error, is_connection_error, is_not_found
from ancre.errors import SourceUnavailableError
from ancre.models import SourceItem, nfc
from ancre.settings.sources import SmbSourceConfig

log = logging.getLogger("ancre.connectors.smb")


@dataclass(frozen=True)
class _Folder:
    """A folder to walk: ``rel``, its path as listed; ``wire``, the server's spelling of it;
    ``real``, where it leads in the share once DFS links are followed; ``via_link``, whether it is
    a followed DFS link; ``via``, the link targets followed on the way (folded, for loops)."""

    rel: str
    wire: str
    real: str
    via_link: bool = False
    via: tuple[str, ...] = ()


class ShareListing:
    """The listing side of one SMB source ``cfg``: walks on the pooled ``session``, DFS links through
    ``dfs``, server spellings through ``names``; ``ignore``: file-name globs never listed.
    Remembers the folders its last full walk listed (:meth:`guard` needs no referral below them).
    Thread-safe."""

    def __init__(
        self, cfg: SmbSourceConfig, *, ignore: tuple[str, ...], session: SmbSession, dfs: DfsResolver, names: ServerNames
    ) -> None:
        self.cfg = cfg
        self.source_id = cfg.id
        self.ignore = ignore
        self.session = session
        self.dfs = dfs
        self.names = names
        self._lock = threading.Lock()
        self._listed_dirs: dict[str, str] = {}
        """Folders (relative paths as listed) the last listing walked, each with the path it leads
        to in the share: their DFS links were checked by that listing, so reading the content or
        rights of its items needs no referral request of their own."""

    # ---------------------------------------------------------------- entries
    def item(self, rel: str, info: Any, skip: str | None = None) -> SourceItem:
        """The listing entry of ``rel`` from its directory information (``skip``: why not read)."""
        fid = int(info.file_id or 0)
        native = f"fid:{fid:016x}" if fid else rel
        size = 0 if skip else int(info.end_of_file)
        return SourceItem(self.source_id, native, rel, size, info.last_write_time.timestamp(), skip=skip)

    def link_reason(self, info: Any) -> str | None:
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
    def is_dfs(info: Any) -> bool:
        """Whether the entry is a DFS link (a reparse point tagged IO_REPARSE_TAG_DFS)."""
        reparse = bool(info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT)
        return reparse and int(info.ea_size) == smb_wire.IO_REPARSE_TAG_DFS

    def descend(self, info: Any) -> bool:
        """Whether a folder entry is walked: not a symlink/junction; a DFS link only with ``dfs``."""
        if not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT:
            return True
        tag = int(info.ea_size)
        if tag == smb_wire.IO_REPARSE_TAG_DFS:
            return self.cfg.dfs
        return tag not in (smb_wire.IO_REPARSE_TAG_SYMLINK, smb_wire.IO_REPARSE_TAG_MOUNT_POINT)

    def guard(self, rel: str, kw: dict[str, Any], *, listed: bool = False) -> None:
        """Raise :class:`Blocked` when ``rel`` is, or lies under, a DFS link that is not followed.
        ``listed``: ``rel`` is an item of this listing; when its folder was walked by the last
        listing (whose links were checked then), no referral is asked again."""
        if listed:
            with self._lock:
                if rel.rpartition("/")[0] in self._listed_dirs:
                    return
        reach = self.dfs.reach(rel, kw)
        if reach.blocked is not None:
            raise Blocked(f"{rel!r}: {reach.blocked}")

    # ---------------------------------------------------------------- the walk
    def walk(
        self, rel_dir: str, kw: dict[str, Any], out: list[SourceItem], unreachable: list[str], real_dir: str | None = None
    ) -> None:
        """Append the indexable files under ``rel_dir`` (depth first, sorted by name) to ``out``;
        ``real_dir``: where ``rel_dir`` leads in the share once DFS links are followed (default
        ``rel_dir``).

        A folder that can't be listed raises :class:`SourceUnavailableError` naming it, except a
        plain folder that vanished meanwhile (skipped). A DFS link is followed only when its
        referral targets lie inside the share; any other is listed as a skipped item naming why.
        A followed link that can't be listed (any error: target refused or down, folder gone) is
        appended to ``unreachable`` and skipped, provided the share itself still answers (checked
        at once; if it does not, the error propagates as the connection error it is)."""
        wire = self.names.wire_of(rel_dir, kw) if rel_dir else ""
        stack = [_Folder(rel_dir, wire, rel_dir if real_dir is None else real_dir)]
        while stack:
            folder = stack.pop()
            entries = self._entries(folder, rel_dir, kw, unreachable)
            subdirs = [sub for info in entries or () if (sub := self._child(folder, info, kw, out)) is not None]
            stack.extend(reversed(subdirs))

    def _entries(self, folder: _Folder, top: str, kw: dict[str, Any], unreachable: list[str]) -> list[Any] | None:
        """``folder``'s entries sorted by name, ``None`` when it is skipped (a followed DFS link
        that can't be listed while the share answers: in ``unreachable``; a plain folder below
        ``top`` that vanished). Raises :class:`SourceUnavailableError` naming it otherwise."""
        try:
            entries = sorted(smb_wire.list_dir(self.names.unc_of(folder.wire), **kw), key=lambda e: e.file_name)
        except Exception as e:
            if folder.via_link and self.share_answers(kw):
                log.warning("source %s: DFS link %r unreachable (%s: %s): left as indexed",
                            self.source_id, folder.rel, type(e).__name__, e)
                unreachable.append(folder.rel)
                return None
            if is_connection_error(e) or is_auth_error(e):
                raise
            if folder.rel != top and not folder.via_link and is_not_found(e):
                return None  # removed between its parent's listing and its own
            what = "DFS link" if folder.via_link else "folder"
            raise SourceUnavailableError(
                f"source {self.source_id}: {what} {folder.rel or '(share root)'!r} can't be listed "
                f"({type(e).__name__}: {e}); nothing under it is purged"
            ) from None
        with self._lock:
            self._listed_dirs[folder.rel] = folder.real
        return entries

    def _child(self, folder: _Folder, info: Any, kw: dict[str, Any], out: list[SourceItem]) -> _Folder | None:
        """One entry of ``folder``: a file (or a link reported) appended to ``out``, or the
        subfolder to walk returned."""
        name = nfc(info.file_name)
        rel = f"{folder.rel}/{name}" if folder.rel else name
        wire = f"{folder.wire}/{info.file_name}" if folder.wire else str(info.file_name)
        self.names.remember(rel, wire)
        child = f"{folder.real}/{name}" if folder.real else name
        if self.is_dfs(info) and self.cfg.dfs:
            reason, target = self.dfs.entry(child, kw)
            folded = target.casefold()
            if reason is None and any(folded == v or v.startswith(folded + "/") for v in folder.via):
                reason = f"dfs link loop (leads back to {target!r})"
            elif reason is None and len(folder.via) >= MAX_DFS_HOPS:
                reason = f"dfs link chain longer than {MAX_DFS_HOPS} links"
            if reason is None:
                return _Folder(rel, wire, target, True, (*folder.via, folded))
            log.info("source %s: %r not followed: %s", self.source_id, rel, reason)
            out.append(self.item(rel, info, skip=reason))
            return None
        reason = self.link_reason(info)
        if info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY:
            if self.descend(info):
                return _Folder(rel, wire, child, False, folder.via)
            if reason is not None:
                out.append(self.item(rel, info, skip=reason))
            return None
        if not is_ignored(name, self.ignore) and path_selected(rel, self.cfg.include, self.cfg.exclude):
            out.append(self.item(rel, info, skip=reason))
        return None

    def share_answers(self, kw: dict[str, Any]) -> bool:
        """Whether the share's root can still be read (after a DFS link failed: its target is at
        fault, not this server)."""
        try:
            smb_wire.stat(self.names.unc, **kw)
        except Exception as e:  # any failure: the server itself is in doubt
            log.debug("source %s: share root check failed: %s", self.source_id, e)
            return False
        return True

    # ---------------------------------------------------------------- listings
    def list_share(self) -> tuple[list[SourceItem], list[str]]:
        """Every indexable file of the share and the followed DFS links that could not be listed.
        Raises :class:`SourceUnavailableError` (see :meth:`walk`)."""
        with self._lock:
            self._listed_dirs = {}

        def walk(kw: dict[str, Any]) -> tuple[list[SourceItem], list[str]]:
            out: list[SourceItem] = []
            unreachable: list[str] = []
            self.walk("", kw, out, unreachable)
            return out, unreachable

        return self.session.call("list the share", walk)

    def list_under(self, rel: str) -> list[SourceItem]:
        """The indexable files below the folder ``rel`` (non-empty NFC relative path; ``[]`` when
        it is not an existing folder, or at or under a DFS link that is not followed; files under
        an unfollowable link inside it are left out). Raises :class:`SourceUnavailableError`."""

        def walk(kw: dict[str, Any]) -> list[SourceItem]:
            out: list[SourceItem] = []
            reach = self.dfs.reach(rel, kw)
            if reach.blocked is not None:
                return []  # under (or at) a DFS link that is not followed: nothing of it is listed
            try:
                self.walk(rel, kw, out, [], reach.real)
            except SourceUnavailableError as e:
                try:  # the prefix itself missing or a file: nothing below it
                    info = self.stat(rel, kw)
                except Exception:  # re-raise the listing error below
                    info = None
                if info is None or not info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY:
                    return []
                raise e
            return out

        return self.session.call(f"list {rel!r}", walk)

    def stat(self, rel: str, kw: dict[str, Any]) -> Any:
        """The directory entry information of ``rel`` (via its parent's listing, so that size and
        mtime are exactly those of a listing), ``None`` if it does not exist."""
        parent, _, name = rel.rpartition("/")
        wire_parent = self.names.wire_of(parent, kw) if parent else ""
        try:
            found = smb_wire.list_dir(self.names.unc_of(wire_parent), name, **kw)
            if not found and not name.isascii():  # the server may spell it NFD: compare NFC forms
                found = smb_wire.list_dir(self.names.unc_of(wire_parent), **kw)
            hits = [e for e in found if nfc(e.file_name).casefold() == name.casefold()]
        except Exception as e:
            if is_not_found(e) and not is_connection_error(e):
                return None
            raise
        exact = [e for e in hits if nfc(e.file_name) == name]
        info = (exact or hits or [None])[0]
        if info is not None:
            wire = f"{wire_parent}/{info.file_name}" if wire_parent else str(info.file_name)
            self.names.remember(f"{parent}/{nfc(info.file_name)}" if parent else nfc(info.file_name), wire)
        return info

    def entry_of(self, rel: str, kw: dict[str, Any]) -> SourceItem | None:
        """The listing entry of the NFC relative path ``rel`` read now (see
        :meth:`ancre.connectors.smb.connector.SmbConnector.get_item`)."""
        parent = rel.rpartition("/")[0]
        reach = self.dfs.reach(parent, kw)
        if reach.blocked is not None:
            return None  # under a DFS link that is not followed
        info = self.stat(rel, kw)
        if info is None:
            return None
        real = nfc(info.file_name)
        where = f"{parent}/{real}" if parent else real
        if self.is_dfs(info) and self.cfg.dfs:
            reason, _ = self.dfs.entry(f"{reach.real}/{real}" if reach.real else real, kw)
            return None if reason is None else self.item(where, info, skip=reason)  # followed: a folder
        reason = self.link_reason(info)
        if info.file_attributes & FileAttributes.FILE_ATTRIBUTE_DIRECTORY and (reason is None or self.descend(info)):
            return None
        return self.item(where, info, skip=reason)


__all__ = ["ShareListing"]
