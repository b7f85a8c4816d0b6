"""The embedded store's folder on disk, ``data_dir/qdrant/`` (:class:`StoreFolder`)::

    LOCK                  flock'ed by the owning process; holds its PID and command line
    ancre_meta.json       {"embedder": "e5-local:…", "dim": 384, "keywords": true}
    documents/            one EdgeShard per collection (wal/, segments/, edge_config.json)
    documents.current     after an index build: the folder of the live shard (``documents@3``)
    documents@3/          a built shard (:mod:`ancre.index.edge_build`)
    .journal-documents@3  the writes made during that build (deleted after it)

Every file that names state (the meta file, a pointer) is replaced atomically: written to a
temporary file, fsync'ed, renamed, the folder fsync'ed.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from ancre.errors import StoreError, StoreLockedError

META_FILE = "ancre_meta.json"
LOCK_FILE = "LOCK"
_POINTER_SUFFIX = ".current"
_BUILT = re.compile(r"^(?P<coll>[a-z]+)@(?P<gen>\d+)$")
_JOURNAL_PREFIX = ".journal-"


class StoreFolder:
    """``root`` (``data_dir/qdrant``): its lock, its meta file, and where each collection's live
    shard is. Not thread-safe by itself: the store calls it under its own locks."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._lock_fd: int | None = None

    # ---------------------------------------------------------------- the owner's lock

    def acquire_lock(self) -> None:
        """Take ``LOCK`` (exclusive, non-blocking) and write this process's PID and command line
        into it. Raises :class:`StoreLockedError` naming the owner when another process holds it."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                owner = os.pread(fd, 4096, 0).decode("utf-8", "replace").split("\n", 1)
            finally:
                os.close(fd)
            pid = owner[0].strip() or "unknown"
            cmd = owner[1].strip() if len(owner) > 1 else ""
            raise StoreLockedError(
                f"the index under {self.root} is owned by another process (PID {pid}"
                f"{': ' + cmd if cmd else ''}); an embedded store has one owner only. Stop that "
                f"process, or run the API inside `ancre serve` (which owns the store), or use a "
                f"Qdrant server (store.kind = \"qdrant\")",
                owner=f"PID {pid}{': ' + cmd if cmd else ''}",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{shlex.join(sys.orig_argv)}\n".encode(), 0)
        self._lock_fd = fd

    def release_lock(self) -> None:
        """Release ``LOCK`` if this object holds it. Idempotent."""
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # ---------------------------------------------------------------- the meta file

    def read_meta(self) -> dict[str, Any] | None:
        """``ancre_meta.json`` as a dict with ``embedder`` (str) and ``dim`` (int) checked, or
        ``None`` when there is none. Raises :class:`StoreError` when it cannot be read."""
        meta_path = self.root / META_FILE
        if not meta_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            meta["embedder"], meta["dim"] = str(meta["embedder"]), int(meta["dim"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"unreadable store metadata {meta_path}: {exc!r}") from exc
        return dict(meta)

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Replace ``ancre_meta.json`` with ``meta``, atomically (tmp, fsync, rename)."""
        meta_path = self.root / META_FILE
        tmp = meta_path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, meta_path)

    def has_shards(self, names: tuple[str, ...]) -> bool:
        """Whether a shard of one of ``names`` exists in its first folder."""
        return any((self.root / name / "edge_config.json").exists() for name in names)

    # ---------------------------------------------------------------- where each shard is

    def current_path(self, name: str) -> Path:
        """The folder of ``name``'s live shard: the one ``<name>.current`` names, else ``<name>``.
        Raises :class:`StoreError` when the pointer cannot be read or names no shard of ``name``."""
        pointer = self.root / f"{name}{_POINTER_SUFFIX}"
        try:
            target = pointer.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return self.root / name
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"unreadable shard pointer {pointer}: {exc}") from exc
        m = _BUILT.match(target)
        if m is None or m["coll"] != name or not (self.root / target).is_dir():
            raise StoreError(f"shard pointer {pointer} names no shard of {name!r}: {target[:60]!r}")
        return self.root / target

    def write_pointer(self, name: str, target: str) -> None:
        """Make ``<name>.current`` name the folder ``target``, atomically and durably."""
        pointer = self.root / f"{name}{_POINTER_SUFFIX}"
        tmp = pointer.with_suffix(".tmp")
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(f"{target}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, pointer)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def next_build(self, name: str) -> tuple[Path, Path]:
        """``(folder, journal file)`` of the next build of ``name``: ``<name>@<n>`` with ``n``
        above every generation present, and its journal beside it."""
        gen = 1 + max([0, *(int(m["gen"]) for p in self.root.iterdir() if (m := _BUILT.match(p.name)))])
        return self.root / f"{name}@{gen}", self.root / f"{_JOURNAL_PREFIX}{name}@{gen}"

    def remove_leftovers(self, name: str, live: Path) -> None:
        """Delete what an interrupted build left for ``name``: other built folders, journals, and
        the generation-0 folder once a built shard is live."""
        for p in self.root.iterdir():
            m = _BUILT.match(p.name)
            stale = (m is not None and m["coll"] == name and p != live) or (
                p.name.startswith(f"{_JOURNAL_PREFIX}{name}@")
            ) or (p.name == name and p != live)
            if stale:
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)

    def drop_content(self) -> None:
        """Delete everything under the folder but ``LOCK`` (the caller holds it)."""
        for child in self.root.iterdir():
            if child.name == LOCK_FILE:
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
