"""The page cache and the memory mappings of the embedded store's shards: the reads and the
``madvise`` calls that take the waiting for the disk out of qdrant-edge-py's calls, which hold
Python's GIL while they wait (so every thread answering questions would wait with them).

- :func:`prewarm`: a built shard read into the page cache before and after its load;
- :func:`release_pages`: a retired shard's mappings and cache dropped before it is closed;
- :func:`release_wal`: the pages of a live shard's write-ahead log given back after each load,
  swap and :meth:`~ancre.index.edge_store.EdgeStore.maintain` (the WAL release).

Every function here releases the GIL while it waits (plain ``os`` reads, ``posix_fadvise``,
``madvise`` through ctypes) and never raises ``OSError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

PREWARM_BLOCK = 1 << 20
"""Bytes per read of :func:`prewarm`."""
LOAD_FILES_MAX = 8 << 20
"""Largest file (bytes) read before a built shard is loaded: the id trackers, deletion flags and
payload-index flags the load reads page by page while it holds the GIL (below 8 MiB each in a
1M-point shard; the vectors, graph and payload pages are larger and read after the load)."""


def shard_files(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """``(path relative to root, stat)`` of every file under ``root``; a file removed meanwhile is
    skipped."""
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = Path(dirpath) / name
            try:
                yield p.relative_to(root).as_posix(), p.stat()
            except FileNotFoundError:  # removed by the engine meanwhile
                continue


def _mem_available() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes, ``None`` where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def prewarm(
    root: Path, *, max_file_bytes: int | None = None, skip: tuple[str, ...] = (),
    budget_bytes: int | None = None, should_stop: Callable[[], bool] | None = None,
) -> int:
    """Read the files under ``root`` into the page cache, smallest first, so that the memory-mapped
    reads of the shard that follow find them there instead of on disk. Each read is one
    ``os.preadv`` of :data:`PREWARM_BLOCK` bytes, which releases the GIL: the threads answering
    questions go on meanwhile (a read of the same pages by the engine, through the GIL-holding
    ``EdgeShard.load`` or a search, would stall them).

    ``max_file_bytes``: skip larger files; ``skip``: top-level folders left out (``("wal",)``);
    ``budget_bytes``: stop once this many bytes are read (default: half of ``MemAvailable``, so
    the warm-up never pushes the rest of the machine's memory out). ``should_stop`` is polled between files. Returns the
    bytes read. Files removed meanwhile are skipped; never raises ``OSError``.

    Why (measured at 840k points, 2 cores): qdrant-edge-py's ``Memory.Cold`` components are
    dropped from the page cache (``posix_fadvise(DONTNEED)``) when a shard is opened, and the
    load itself reads its payload-index flags page by page: the load held the GIL 1.45 s, 0.44 s
    with its small files read first; and the questions on the swapped-in shard read the graph
    and the vectors from disk: at 5 questions/s, those of the next 34 s waited 4.4 s (p50).
    With both reads, the swap's questions took 0.1-0.3 s."""
    if budget_bytes is None:
        avail = _mem_available()
        budget_bytes = avail // 2 if avail is not None else 0
    files: list[tuple[int, str]] = []
    for rel, st in shard_files(root):
        if rel.split("/", 1)[0] in skip or (max_file_bytes is not None and st.st_size > max_file_bytes):
            continue
        files.append((st.st_size, rel))
    buf = bytearray(PREWARM_BLOCK)
    done = 0
    for size, rel in sorted(files):
        if done + size > budget_bytes or (should_stop is not None and should_stop()):
            break
        try:
            fd = os.open(root / rel, os.O_RDONLY)
        except OSError:
            continue
        try:
            offset = 0
            while offset < size:
                n = os.preadv(fd, [buf], offset)
                if n <= 0:
                    break
                offset += n
        except OSError:
            pass
        finally:
            os.close(fd)
        done += offset
    return done


_MADV_DONTNEED = 4  # <sys/mman.h> on Linux
_MADV_PAGEOUT = 21  # <sys/mman.h> on Linux 5.4 and later


def _madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise`` through ctypes (a foreign call: the GIL is released), or ``None``."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def _advise_mappings(root: Path, advice: int, *, shared_only: bool) -> int:
    """``madvise(advice)`` on each range ``/proc/self/maps`` lists for a file under ``root``
    (only shared mappings when ``shared_only``). Returns the calls that succeeded; 0 where
    ``/proc/self/maps`` or libc cannot be read."""
    madvise = _madvise()
    if madvise is None:
        return 0
    prefix = str(Path(root).resolve()) + "/"
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return 0
    done = 0
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) != 6 or not parts[5].strip().removesuffix(" (deleted)").startswith(prefix):
            continue
        if shared_only and not parts[1].endswith("s"):
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if madvise(start, end - start, advice) == 0:
            done += 1
    return done


def release_pages(root: Path) -> int:
    """Before a retired shard under ``root`` is closed: drop this process's memory mappings of its
    files (``madvise(MADV_DONTNEED)`` on each range ``/proc/self/maps`` lists for them) and their
    page cache (``posix_fadvise(DONTNEED)``), both calls that release the GIL. Returns the
    mappings dropped; does nothing where ``/proc/self/maps`` or libc cannot be read.

    Why (measured at 840k points, 2 cores): qdrant-edge-py's ``EdgeShard.close`` unmaps the
    files and evicts their page cache itself while it holds the GIL — 0.67 s with 1.3 GiB of the
    shard mapped, 1.2 s during the scale bench, a stall of every question. After this call it
    has nothing left to do: 0.09 s. No data is lost: the engine's mappings are shared file
    mappings (a later access reads the file again), and the folder is deleted right after."""
    dropped = _advise_mappings(root, _MADV_DONTNEED, shared_only=False)
    for rel, _ in list(shard_files(Path(root))):
        try:
            fd = os.open(Path(root) / rel, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
        finally:
            os.close(fd)
    return dropped


def release_wal(shard_root: Path) -> int:
    """Give back the pages of a live shard's write-ahead log (the files under
    ``shard_root/wal``) that this process holds: ``madvise(MADV_PAGEOUT)`` on each shared
    mapping of them, which reclaims their clean pages — out of the process's RSS and out of the
    page cache. Returns the mappings advised; 0 where ``/proc/self/maps``, libc or
    ``MADV_PAGEOUT`` (Linux 5.4) is missing. Never raises.

    Why (measured on the scale bench's 100k store, 2 cores): qdrant-edge-py maps each WAL
    segment (32 MiB) and reads every retained one when it loads a shard, then never reads them
    again — a query process that had just opened the store held 107 MiB of WAL pages, 41 % of
    its file-backed memory. The advice is only a reclaim hint: a page still dirty is kept, a
    page read again is read from the file, and a range that is no longer the WAL's loses
    nothing (an anonymous page without swap is never reclaimed)."""
    return _advise_mappings(Path(shard_root) / "wal", _MADV_PAGEOUT, shared_only=True)
