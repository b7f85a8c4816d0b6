"""Local folder connector: a directory tree on local disk or a mounted share (CIFS/NFS).

ACLs come, in this order, from an NT-style manifest in the corpus ``acl.json`` format (for shares
mounted without ACL information), evaluated by the ACL engine; else from the principals set in the
source config; with neither, nobody may read (fail closed).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from ancre.acl.directory import Directory
from ancre.acl.explain import AclTrace, canonical_path, trace_manifest
from ancre.acl.manifest import AclManifest
from ancre.connectors.base import CollectionFromConfig, Connector, Listing, SourceContext, SourceKind
from ancre.errors import AclError, ConfigError, DirectoryError, SourceUnavailableError
from ancre.models import Acl, SourceItem, nfc
from ancre.settings.sources import FolderSourceConfig


def is_ignored(filename: str, patterns: tuple[str, ...]) -> bool:
    """Whether a file name matches one of the never-indexed globs (case-insensitive, as on Windows)."""
    low = filename.casefold()
    return any(fnmatch.fnmatchcase(low, p.casefold()) for p in patterns)


def path_selected(rel_path: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    """Include/exclude globs on the relative POSIX path (``*`` crosses ``/``; case-insensitive).
    Empty ``include`` selects everything; ``exclude`` wins."""
    low = rel_path.casefold()
    if include and not any(fnmatch.fnmatchcase(low, p.casefold()) for p in include):
        return False
    return not any(fnmatch.fnmatchcase(low, p.casefold()) for p in exclude)


def unc_folder(unc_root: str, rel_path: str) -> str:
    """``("\\\\SRV\\Partage", "CLIENTS/x.docx")`` → ``"\\\\SRV\\Partage\\CLIENTS\\"`` (trailing backslash)."""
    root = unc_root.rstrip("\\/")
    parent = rel_path.rsplit("/", 1)[0] if "/" in rel_path else ""
    sep = "/" if "://" in root else "\\"
    return root + sep + (parent.replace("/", sep) + sep if parent else "")


class FolderConnector(CollectionFromConfig[FolderSourceConfig]):
    """A :class:`~ancre.connectors.base.Connector` over a directory tree (also
    :class:`~ancre.connectors.base.LocalTree` and :class:`~ancre.connectors.base.SubtreeListing`).

    ``native_id`` and ``path`` are the NFC relative POSIX path; ``doc_id`` is ``<source>:<path>``.
    Listing raises :class:`SourceUnavailableError` when the root is missing, not a directory, or any
    folder below it can't be read — a partial listing would look like mass deletion.

    **Symbolic links** are never a way around a right (docs/SECURITY.md "How it stays safe"). By default
    each link below the root (to a file or a folder, dangling or not) is listed as an item with
    ``skip = "symlink"`` (status ``skipped`` in ``ancre status``) and never read. With
    ``follow_symlinks = true`` a link is followed only when its resolved target lies inside the
    root and outside ``private_dirs`` (ancre's data directory, audit folder): the file keeps the
    link's path (where users see it) but gets the ACL of its *canonical* target path; a link
    outside the root, into ``private_dirs``, dangling, or back to a folder being walked (a loop)
    is skipped with the reason (``symlink: target outside the source root``, …). ``private_dirs``
    are never listed, linked or not.
    """

    def __init__(
        self,
        cfg: FolderSourceConfig,
        *,
        directory: Directory | None,
        ignore: tuple[str, ...],
        private_dirs: tuple[Path, ...] = (),
    ) -> None:
        self.cfg = cfg
        self.source_id = cfg.id
        self.collection = cfg.collection
        self.root = Path(cfg.root)
        self.acl_manifest: Path | None = cfg.acl_manifest
        """Watched by the daemon with the tree (:class:`~ancre.connectors.base.LocalTree`)."""
        self.ignore = ignore
        self.directory = directory
        self.private_dirs = tuple(os.path.realpath(p) for p in private_dirs)
        self._real: dict[str, str] = {}
        """relative path → the real (resolved) path its bytes are read from."""
        self._canon: dict[str, str] = {}
        """relative path → the canonical relative path whose rights it gets (differs for links)."""
        self._manifest: AclManifest | None = None
        self._manifest_key: tuple[int, int, int] | None = None
        self._manifest_lock = threading.Lock()

    # -- listing ---------------------------------------------------------------------------------
    def _root_real(self) -> str:
        return os.path.realpath(self.root)

    def _private(self, real: str) -> bool:
        return any(real == p or real.startswith(p.rstrip("/") + "/") for p in self.private_dirs)

    def _selected(self, rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        return not is_ignored(name, self.ignore) and path_selected(rel, self.cfg.include, self.cfg.exclude)

    def _skipped(self, rel: str, st: os.stat_result | None, reason: str) -> SourceItem:
        return SourceItem(self.source_id, rel, rel, 0, st.st_mtime if st is not None else 0.0, skip=reason)

    def _link_target(self, link: str, root_real: str) -> tuple[str | None, str]:
        """``(real target, "")`` when the link at ``link`` may be followed, else ``(None, reason)``."""
        if not self.cfg.follow_symlinks:
            return None, "symlink"
        try:
            target = os.path.realpath(link, strict=True)
        except (OSError, RuntimeError):
            return None, "symlink: dangling or looping link"
        if not (target == root_real or target.startswith(root_real.rstrip("/") + "/")):
            return None, "symlink: target outside the source root"
        if self._private(target):
            return None, "symlink: target in ancre's data directory"
        return target, ""

    def _walk(
        self,
        dir_path: str,
        rel_dir: str,
        real_dir: str,
        chain: frozenset[str],
        root_real: str,
        out: list[SourceItem],
        errors: list[OSError],
        real: dict[str, str],
        canon: dict[str, str],
    ) -> None:
        """List ``dir_path`` (shown as ``rel_dir``, really ``real_dir``) depth first, sorted.
        ``chain``: the real folders being walked (a link back to one of them is a loop)."""
        try:
            with os.scandir(dir_path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            errors.append(e)
            return
        for entry in entries:
            rel = nfc(f"{rel_dir}/{entry.name}" if rel_dir else entry.name)
            full = os.path.join(dir_path, entry.name)
            try:
                is_link = entry.is_symlink()
                target_real = os.path.join(real_dir, entry.name)
                if is_link:
                    if not self._selected(rel) and not entry.is_dir():
                        continue  # an ignored or excluded name is not reported either
                    target, reason = self._link_target(full, root_real)
                    if target is None:
                        out.append(self._skipped(rel, _lstat(full), reason))
                        continue
                    if target in chain:
                        out.append(self._skipped(rel, _lstat(full), "symlink: loop"))
                        continue
                    target_real = target
                is_dir = os.path.isdir(target_real) if is_link else entry.is_dir(follow_symlinks=False)
                if is_dir:
                    if self._private(target_real):
                        continue  # ancre's own files are never a document
                    self._walk(full, rel, target_real, chain | {target_real}, root_real, out, errors, real, canon)
                    continue
                if not (os.path.isfile(target_real) if is_link else entry.is_file(follow_symlinks=False)):
                    continue  # fifo, socket, device
                canonical = nfc(os.path.relpath(target_real, root_real).replace(os.sep, "/"))
                if not self._selected(rel) or not self._selected(canonical) or self._private(target_real):
                    continue
                st = os.stat(target_real)
            except FileNotFoundError:
                continue  # vanished between readdir and stat: it is simply not there
            except OSError as err:
                errors.append(err)
                continue
            real[rel] = target_real
            canon[rel] = canonical
            out.append(SourceItem(self.source_id, rel, rel, st.st_size, st.st_mtime))

    def list_items(self) -> Listing:
        """Every indexable file under the root (ignored names and include/exclude applied; the size
        limit is the sync engine's, which records a status), and every link not followed as an
        item with ``skip`` set (see the class doc). Raises ``SourceUnavailableError``."""
        if not self.root.is_dir():
            raise SourceUnavailableError(f"source {self.source_id}: root {self.root} is missing or not a directory")
        errors: list[OSError] = []
        found: list[SourceItem] = []
        real: dict[str, str] = {}
        canon: dict[str, str] = {}
        root_real = self._root_real()
        self._walk(str(self.root), "", root_real, frozenset({root_real}), root_real, found, errors, real, canon)
        if errors:
            raise SourceUnavailableError(
                f"source {self.source_id}: {len(errors)} folder(s) could not be read, e.g. {errors[0]}"
            )
        if not self.root.is_dir():  # unmounted during the walk
            raise SourceUnavailableError(f"source {self.source_id}: root {self.root} disappeared during listing")
        self._real, self._canon = real, canon
        return Listing(tuple(found))

    def _resolve_path(self, rel: str) -> tuple[str | None, str | None, os.stat_result | None]:
        """Follow ``rel`` component by component from the root: ``(real path, None, None)`` when
        it may be read; ``(None, reason, lstat)`` when its last component is a link that is not
        followed; ``(None, None, None)`` when it does not exist or lies under a folder link that
        is not followed (that link is reported by itself)."""
        root_real = self._root_real()
        cur = root_real
        parts = rel.split("/")
        for i, part in enumerate(parts):
            nxt = os.path.join(cur, part)
            try:
                st = os.lstat(nxt)
            except FileNotFoundError:
                on_disk = _name_on_disk(cur, part)  # stored NFC, written NFD (macOS, some tools)
                if on_disk is None:
                    return None, None, None
                nxt = os.path.join(cur, on_disk)
                try:
                    st = os.lstat(nxt)
                except OSError:
                    return None, None, None
            except OSError:
                return None, None, None
            if stat.S_ISLNK(st.st_mode):
                target, reason = self._link_target(nxt, root_real)
                if target is None:
                    return (None, reason, st) if i == len(parts) - 1 else (None, None, None)
                nxt = target
            if self._private(nxt):
                return None, None, None
            cur = nxt
        return cur, None, None

    def get_item(self, path: str) -> SourceItem | None:
        """The listing entry for one relative path, or ``None`` when it is absent, not a regular
        file, ignored or excluded; a link that is not followed gives an item with ``skip`` set.
        Raises ``SourceUnavailableError`` when the root is missing."""
        if not self.root.is_dir():
            raise SourceUnavailableError(f"source {self.source_id}: root {self.root} is missing or not a directory")
        rel = nfc(path.strip("/"))
        if not rel or any(p in ("", ".", "..") for p in rel.split("/")) or not self._selected(rel):
            return None
        target, reason, lst = self._resolve_path(rel)
        if reason is not None:
            return self._skipped(rel, lst, reason)
        if target is None:
            return None
        root_real = self._root_real()
        canonical = nfc(os.path.relpath(target, root_real).replace(os.sep, "/"))
        if not self._selected(canonical):
            return None
        try:
            st = os.stat(target)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        self._real[rel] = target
        self._canon[rel] = canonical
        return SourceItem(self.source_id, rel, rel, st.st_size, st.st_mtime)

    def list_under(self, prefix: str) -> list[SourceItem]:
        """The items below the folder ``prefix`` (``[]`` when it is not a folder that may be
        walked), with the same rules as :meth:`list_items`; folders that can't be read are
        left out (the periodic full pass reports them)."""
        rel = nfc(prefix.strip("/"))
        if not rel or any(p in ("", ".", "..") for p in rel.split("/")):
            return []
        target, _reason, _lst = self._resolve_path(rel)
        if target is None or not os.path.isdir(target):
            return []
        root_real = self._root_real()
        chain = {root_real, target}
        parts = rel.split("/")
        for i in range(1, len(parts)):
            anc, _r, _l = self._resolve_path("/".join(parts[:i]))
            if anc is not None:
                chain.add(anc)
        out: list[SourceItem] = []
        self._walk(str(self.root / rel), rel, target, frozenset(chain), root_real, out, [], self._real, self._canon)
        return out

    def _path_of(self, item: SourceItem) -> str:
        p = self._real.get(item.path)
        if p is None:
            p, _reason, _lst = self._resolve_path(item.path)
            if p is None:
                raise FileNotFoundError(f"{item.path}: not a file that may be read")
        return p

    # -- content and rights ----------------------------------------------------------------------
    def fetch_content(self, item: SourceItem) -> bytes:
        """The file's bytes; raises ``OSError`` when it can't be read, or when what is opened is
        no longer the file that was listed (a component replaced by a link meanwhile)."""
        if item.skip is not None:
            raise OSError(f"{item.path}: {item.skip}: not read")
        expected = self._path_of(item)
        fd = os.open(expected, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        try:
            opened = f"/proc/self/fd/{fd}"
            if os.path.islink(opened) and os.readlink(opened) != expected:
                raise OSError(f"{item.path}: changed to a link since it was listed; not read")
            with os.fdopen(fd, "rb", closefd=False) as f:
                return f.read()
        finally:
            os.close(fd)

    def _load_manifest(self) -> AclManifest | None:
        path = self.cfg.acl_manifest
        if path is None:
            return None
        st = Path(path).stat()
        key = (st.st_mtime_ns, st.st_size, st.st_ino)  # an editor's save-by-rename changes the inode
        with self._manifest_lock:  # the daemon reads ACLs from its worker and its rights thread
            if self._manifest is None or self._manifest_key != key:
                assert self.directory is not None
                self._manifest = AclManifest.load(Path(path), self.directory)
                self._manifest_key = key
            return self._manifest

    def fetch_acl(self, item: SourceItem) -> Acl:
        """Read ACL of the item: manifest (for the item's canonical path: a followed link gets
        its target's rights), else configured principals, else nobody. Never raises."""
        try:
            if self.cfg.acl_manifest is not None:
                if self.directory is None:
                    return Acl.nobody("acl manifest configured but no directory to resolve its names")
                canonical = self._canon.get(item.path)
                if canonical is None:
                    if self.get_item(item.path) is None or item.path not in self._canon:
                        return Acl.nobody(f"{item.path}: not a file of this source that may be read")
                    canonical = self._canon[item.path]
                manifest = self._load_manifest()
                assert manifest is not None
                return manifest.acl_for(canonical, is_dir=False)
            if self.cfg.principals:
                return Acl(frozenset(self._resolve(p) for p in self.cfg.principals))
        except (OSError, ValueError, AclError, DirectoryError) as e:
            return Acl.nobody(f"acl_unreadable: {e}")
        return Acl.nobody("no acl manifest and no principals configured for this source")

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each relative path (see
        :meth:`ancre.connectors.base.Connector.read_acls`): the manifest is re-read when it changed
        on disk (modification time, size or inode), the configured principals re-resolved. A path
        that is no longer a regular file is left out. Raises ``SourceUnavailableError`` when the
        root is missing (an unmounted share is not a deletion)."""
        out: dict[str, Acl] = {}
        for path in paths:
            # resolved as the listing does: names compared after NFC (an NFD-named file on disk is
            # found), links only under the source's link rules (a link not followed is "gone")
            item = self.get_item(path)
            if item is None or item.skip is not None:
                continue
            out[path] = self.fetch_acl(item)
        return out

    # -- acl explain (AclExplainable) ------------------------------------------------------------
    def explain_path(self, path: str) -> str:
        """See :meth:`ancre.connectors.base.AclExplainable.explain_path`: relative to the root, under
        ``unc_root``, or an absolute local path under the root."""
        return canonical_path(path, unc_root=self.cfg.unc_root, root=self.root)

    def explain_acl(self, path: str) -> AclTrace:
        """See :meth:`ancre.connectors.base.AclExplainable.explain_acl`: the manifest's descriptor
        for ``path`` with the entry stating each ACE (a manifest that can't be read: unreadable),
        else the configured principals; ``indexable`` says whether ``path`` is a file sync would
        index. Raises ``SourceUnavailableError`` when the root is missing, ``DirectoryError``."""
        indexable = self.get_item(path) is not None
        if self.cfg.acl_manifest is None:
            grants = self.fetch_acl(SourceItem(self.source_id, path, path, 0, 0.0))
            return AclTrace(self.source_id, path, grants=grants, indexable=indexable)
        if self.directory is None:
            reason = "acl manifest configured but no directory to resolve its names"
            return AclTrace(self.source_id, path, unreadable=reason, indexable=indexable)
        try:
            manifest = self._load_manifest()
        except OSError as e:
            reason = f"acl manifest {self.cfg.acl_manifest}: cannot read: {e.strerror or e}"
            return AclTrace(self.source_id, path, unreadable=reason, indexable=indexable)
        except AclError as e:
            return AclTrace(self.source_id, path, unreadable=str(e), indexable=indexable)
        assert manifest is not None
        return trace_manifest(manifest, path, source=self.source_id, indexable=indexable)

    def _resolve(self, name: str) -> str:
        if ":" in name:
            return name
        sid = self.directory.sid_of(name) if self.directory is not None else None
        if sid is None:
            raise AclError(f"principal {name!r} is not known to the directory")
        return f"sid:{sid}"

    def location(self, item: SourceItem) -> str:
        """UNC folder of the item (``unc_root`` + folders + ``\\``), or the local folder path."""
        if self.cfg.unc_root:
            return unc_folder(self.cfg.unc_root, item.path)
        return str((self.root / item.path).parent) + os.sep


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _name_on_disk(folder: str, name_nfc: str) -> str | None:
    """The entry of ``folder`` whose NFC form is ``name_nfc`` (``None`` if none)."""
    try:
        with os.scandir(folder) as it:
            return next((e.name for e in it if nfc(e.name) == name_nfc), None)
    except OSError:
        return None


def build(cfg: FolderSourceConfig, ctx: SourceContext) -> Connector:
    """The :class:`FolderConnector` of a ``kind = "folder"`` source; the directory is built only
    when an ACL manifest or principals need names resolved. Raises :class:`ConfigError` when
    ``cfg`` is not a :class:`FolderSourceConfig` (the registry may hand any kind's config)."""
    if not isinstance(cfg, FolderSourceConfig):
        raise ConfigError(f"sources.{cfg.id}: not a folder source")
    directory = ctx.directory() if (cfg.acl_manifest is not None or cfg.principals) else None
    return FolderConnector(cfg, directory=directory, ignore=ctx.ignore, private_dirs=ctx.private_paths)


KIND = SourceKind("folder", FolderSourceConfig, build)
"""The ``folder`` source kind (:data:`ancre.connectors.registry.REGISTRY`)."""
