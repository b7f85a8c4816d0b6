"""Free space of the data folder's file system, checked before writing (docs/OPERATIONS.md "A full
disk").

The embedded Qdrant engine (qdrant-edge-py) writes through memory maps: its write-ahead log,
vectors, payloads and indexes are sparse files whose pages get their disk blocks when first
written. On a full file system that first write is not an ``ENOSPC`` error the engine could
report but a ``SIGBUS`` that kills the process (measured: ``ancre sync`` on a 40 MiB tmpfs ends
with exit status 135). So nothing is written to the engine without first checking here that the
file system keeps what the write needs plus a margin (:class:`SpaceGuard`); short of it, the
write is refused with :class:`~ancre.errors.DiskFullError` before any byte moves, the pass stops
as ``disk_full``, and the daemon resumes by itself once the space is back
(:mod:`ancre.daemon.disk`).

What a write needs is estimated from what it carries (:func:`upsert_bytes`, measured on the
engine: about 7 KiB a point for a 384-dimension vector and a 1 KiB chunk with its index terms,
that is ~2.5× the vector and payload bytes; :data:`WRITE_FACTOR` takes 4×), what an index build
needs from the shard it copies (:func:`build_bytes`: the copy is written whole, sparse files
included, then the built segments).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ancre.errors import DiskFullError

MIB = 2**20
WRITE_FACTOR = 4
"""Bytes on disk per byte of vector and payload written (WAL + segment + payload and text
indexes, with room to spare: measured ~2.5)."""
OPEN_BYTES = 4 * MIB
"""What opening the embedded store writes beside filling its sparse files (the engine saves its
structure when it loads a shard)."""
POINT_OVERHEAD = 512
"""Bytes a point costs beside its vector and payload (id tracker, versions, index entries)."""


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged process may still write on ``folder``'s file system
    (``statvfs``: ``f_bavail × f_frsize``); the nearest existing parent when ``folder`` does not
    exist yet. Raises ``OSError``."""
    p = Path(folder)
    while not p.exists() and p != p.parent:
        p = p.parent
    st = os.statvfs(p)
    return int(st.f_bavail) * int(st.f_frsize)


def mib(n: int) -> str:
    """``n`` bytes as ``12.3 MiB``."""
    return f"{n / MIB:.1f} MiB"


@dataclass(frozen=True)
class SpaceGuard:
    """The free-space rule of one folder: a write that needs ``n`` bytes goes ahead only when
    the folder's file system has ``n + margin_bytes`` free (``margin_bytes``: ``[store]
    min_free_mb``)."""

    folder: Path
    margin_bytes: int

    def shortage(self, needed: int = 0, what: str = "the writes", *, margin: bool = True) -> DiskFullError | None:
        """The :class:`~ancre.errors.DiskFullError` a write of ``needed`` bytes would meet now
        (``what`` it is, for the message; ``margin``: the margin counts too), or ``None`` when
        there is room. A file system that can't be asked counts as having room (the write itself
        will say why it failed)."""
        try:
            free = free_bytes(self.folder)
        except OSError:
            return None
        kept = self.margin_bytes if margin else 0
        want = max(0, needed) + kept
        if free >= want:
            return None
        return DiskFullError(self.folder, free=free, needed=want, what=what, margin=kept)

    def require(self, needed: int = 0, what: str = "the writes", *, margin: bool = True) -> None:
        """Raise :meth:`shortage`'s error, if any."""
        short = self.shortage(needed, what, margin=margin)
        if short is not None:
            raise short


@runtime_checkable
class SpaceGuarded(Protocol):
    """A store that checks free space before it writes (the embedded one): its guard."""

    @property
    def space(self) -> SpaceGuard:
        """The guard of the store's folder."""
        ...


def upsert_bytes(vectors: Any, payloads: Sequence[dict[str, Any]]) -> int:
    """What writing these points may take on disk: :data:`WRITE_FACTOR` × (the vectors' bytes
    + the payloads' size as text + :data:`POINT_OVERHEAD` each)."""
    vec = int(getattr(vectors, "nbytes", 0))
    text = sum(len(repr(p)) for p in payloads)
    return WRITE_FACTOR * (vec + text + POINT_OVERHEAD * len(payloads))


def tree_bytes(folder: Path) -> int:
    """The apparent size of every file under ``folder`` (sparse files counted whole: a copy
    writes them so), in bytes; files gone meanwhile are skipped."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
    return total


def sparse_bytes(folder: Path) -> int:
    """The holes of the files under ``folder``: apparent size minus allocated blocks, in bytes.
    Loading a shard maps its files for writing and touches every page (measured on qdrant-edge-py
    0.9: the first load of a store written in another process grew it by ~57 MiB per collection
    on tmpfs), so a load may have to allocate all of it: on a full file system, a bus error."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                st = os.stat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            total += max(0, st.st_size - st.st_blocks * 512)
    return total


def open_bytes(root: Path) -> int:
    """What opening the store under ``root`` may write: its files' holes and :data:`OPEN_BYTES`."""
    return sparse_bytes(root) + OPEN_BYTES


def build_bytes(shard: Path) -> int:
    """What an index build of the shard at ``shard`` may take: its copy (the whole apparent
    size) and the segments the build writes beside it (as much again)."""
    return 2 * tree_bytes(shard)


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is, or carries in its message, ``ENOSPC`` / ``EDQUOT`` (an ``OSError``, or
    an engine error that quotes "No space left on device" or "Disk quota exceeded")."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return "No space left on device" in text or "Disk quota exceeded" in text or "(os error 28)" in text


__all__ = [
    "MIB", "OPEN_BYTES", "WRITE_FACTOR", "SpaceGuard", "SpaceGuarded", "build_bytes", "free_bytes", "is_disk_full",
    "mib", "open_bytes", "sparse_bytes", "tree_bytes", "upsert_bytes",
]
