"""Local folder connector: a directory tree on local disk or a mounted share (CIFS/NFS).

ACLs come, in this order, from an NT-style manifest in the corpus ``acl.json`` format (for shares
mounted without ACL information), evaluated by the ACL engine; else from the principals set in the
source config; with neither, nobody may read (fail closed).
"""

from __future__ import annotations

import fnmatch
import os
import threading
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ancre.acl.directory import Directory
from ancre.acl.manifest import AclManifest
from ancre.config import SourceConfig
from ancre.errors import AclError, DirectoryError, SourceUnavailableError
from ancre.models import Acl, SourceItem


def nfc(s: str) -> str:
    """Unicode NFC form: paths are compared and stored NFC (macOS and some tools write NFD)."""
    return unicodedata.normalize("NFC", s)


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


class FolderConnector:
    """A :class:`~ancre.connectors.base.Connector` over a directory tree.

    ``native_id`` and ``path`` are the NFC relative POSIX path; ``doc_id`` is ``<source>:<path>``.
    Listing raises :class:`SourceUnavailableError` when the root is missing, not a directory, or any
    folder below it can't be read — a partial listing would look like mass deletion.
    """

    def __init__(
        self,
        cfg: SourceConfig,
        *,
        directory: Directory | None,
        ignore: tuple[str, ...],
    ) -> None:
        if cfg.root is None:  # guarded by config validation too
            raise SourceUnavailableError(f"source {cfg.id}: no root configured")
        self.cfg = cfg
        self.source_id = cfg.id
        self.collection = cfg.collection
        self.root = Path(cfg.root)
        self.ignore = ignore
        self.directory = directory
        self._real: dict[str, Path] = {}
        self._manifest: AclManifest | None = None
        self._manifest_key: tuple[int, int, int] | None = None
        self._manifest_lock = threading.Lock()

    # -- listing ---------------------------------------------------------------------------------
    def list_items(self) -> Iterator[SourceItem]:
        """Every indexable file under the root (ignored names and include/exclude applied; the size
        limit is the sync engine's, which records a status). Raises ``SourceUnavailableError``."""
        if not self.root.is_dir():
            raise SourceUnavailableError(f"source {self.source_id}: root {self.root} is missing or not a directory")
        errors: list[OSError] = []
        found: list[SourceItem] = []
        real: dict[str, Path] = {}
        for dirpath, dirnames, filenames in os.walk(self.root, onerror=errors.append, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                if is_ignored(name, self.ignore):
                    continue
                full = Path(dirpath) / name
                rel = nfc(full.relative_to(self.root).as_posix())
                if not path_selected(rel, self.cfg.include, self.cfg.exclude):
                    continue
                try:
                    st = full.stat()
                except FileNotFoundError:
                    continue  # vanished between readdir and stat: it is simply not there
                except OSError as e:
                    errors.append(e)
                    continue
                if not os.path.isfile(full):
                    continue
                real[rel] = full
                found.append(SourceItem(self.source_id, rel, rel, st.st_size, st.st_mtime))
        if errors:
            raise SourceUnavailableError(
                f"source {self.source_id}: {len(errors)} folder(s) could not be read, e.g. {errors[0]}"
            )
        if not self.root.is_dir():  # unmounted during the walk
            raise SourceUnavailableError(f"source {self.source_id}: root {self.root} disappeared during listing")
        self._real = real
        return iter(found)

    def get_item(self, path: str) -> SourceItem | None:
        """The listing entry for one relative path, or ``None`` when it is absent, not a regular
        file, ignored or excluded. Raises ``SourceUnavailableError`` when the root is missing."""
        if not self.root.is_dir():
            raise SourceUnavailableError(f"source {self.source_id}: root {self.root} is missing or not a directory")
        rel = nfc(path.strip("/"))
        name = rel.rsplit("/", 1)[-1]
        if not rel or is_ignored(name, self.ignore) or not path_selected(rel, self.cfg.include, self.cfg.exclude):
            return None
        full = self._real.get(rel) or self.root / rel
        try:
            st = full.stat()
        except FileNotFoundError:
            return None
        if not full.is_file():
            return None
        self._real[rel] = full
        return SourceItem(self.source_id, rel, rel, st.st_size, st.st_mtime)

    def _path_of(self, item: SourceItem) -> Path:
        p = self._real.get(item.path)
        return p if p is not None else self.root / item.path

    # -- content and rights ----------------------------------------------------------------------
    def fetch_content(self, item: SourceItem) -> bytes:
        """The file's bytes; raises ``OSError`` when it can't be read."""
        return self._path_of(item).read_bytes()

    def _load_manifest(self) -> AclManifest | None:
        path = self.cfg.acl_manifest
        if path is None:
            return None
        st = Path(path).stat()
        key = (st.st_mtime_ns, st.st_size, st.st_ino)  # an editor's save-by-rename changes the inode
        with self._manifest_lock:
            if self._manifest is None or self._manifest_key != key:
                assert self.directory is not None
                self._manifest = AclManifest.load(Path(path), self.directory)
                self._manifest_key = key
            return self._manifest

    def fetch_acl(self, item: SourceItem) -> Acl:
        """Read ACL of the item: manifest, else configured principals, else nobody. Never raises."""
        try:
            if self.cfg.acl_manifest is not None:
                if self.directory is None:
                    return Acl.nobody("acl manifest configured but no directory to resolve its names")
                manifest = self._load_manifest()
                assert manifest is not None
                return manifest.acl_for(item.path, is_dir=False)
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
        if not self.root.is_dir():
            raise SourceUnavailableError(f"source {self.source_id}: root {self.root} is missing or not a directory")
        out: dict[str, Acl] = {}
        for path in paths:
            rel = nfc(path.strip("/"))
            full = self._real.get(rel) or self.root / rel
            if not rel or not full.is_file():
                continue
            out[path] = self.fetch_acl(SourceItem(self.source_id, rel, rel, 0, 0.0))
        return out

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
        return str(self._path_of(item).parent) + os.sep

    def collection_for(self, item: SourceItem) -> str:
        """``collection_overrides`` by top-level folder (case-insensitive), else the source's."""
        top = item.path.split("/", 1)[0].casefold() if "/" in item.path else ""
        for folder, coll in self.cfg.collection_overrides.items():
            if folder.casefold() == top:
                return coll
        return self.collection
