"""Index builds of the embedded store in a separate process, and the journal that lets the live
shard keep taking writes meanwhile (:meth:`ancre.index.edge_store.EdgeStore.maintain`).

qdrant-edge-py runs a shard's optimizers (HNSW graph, quantized vectors, immutable payload and
text indexes, vacuum of deleted points) inside :meth:`EdgeShard.optimize`, which holds Python's
GIL from start to end: in the process that serves questions it would answer nothing for minutes
at a million chunks. So a build goes like this:

1. **copy** — the live shard's folder is copied to ``<collection>@<n>`` while it takes writes
   (:func:`copy_tree`, in pieces each written to disk before the next), then, under the store's
   write lock (readers go on), the shard is flushed
   and the files that changed since are copied again (:func:`refresh_copy`: the appendable
   segment, the WAL, deletion flags — the indexed segments' big files do not change), so writes
   wait only for that; from then on every write to the live shard is also appended to a
   :class:`Journal`;
2. **build** — a child process (``python -m ancre.index.edge_build``, at a lower CPU priority)
   loads the copy with the store's index settings, runs ``optimize()``, flushes and exits, printing
   a :class:`ChildReport`; the live shard answers meanwhile, its newest points searched exactly;
3. **warm, load, warm, catch up** — the owner reads the built shard's small files into the page
   cache (:func:`prewarm`), loads it, reads its search files into the page cache again (the
   engine drops them from it as it opens them), then replays the journal onto it, first without
   the write lock, then the last entries with it;
4. **swap** — still under the write lock, the built shard becomes the live one (a pointer file
   names it, written atomically) and the old one is closed once the reads in flight on it are
   done (its pages released first, :func:`release_pages`), then deleted.

A crash or a stop at any step leaves the previous shard live and complete: the pointer moves only
after the replay, and the next open deletes the leftovers.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ancre.errors import StoreError

_LEN = struct.Struct("<Q")
CHILD_NICE = 10
"""Niceness the build process adds to itself: the serving process keeps the CPU when it needs it."""
POLL_S = 0.2
"""How often a waiting build checks for a stop request, in seconds."""
COPY_SYNC_BYTES = 32 << 20
"""Bytes a shard copy writes before it waits for them to reach the disk (:func:`copy_tree`)."""
PREWARM_BLOCK = 1 << 20
"""Bytes per read of :func:`prewarm`."""
LOAD_FILES_MAX = 8 << 20
"""Largest file (bytes) read before a built shard is loaded: the id trackers, deletion flags and
payload-index flags the load reads page by page while it holds the GIL (below 8 MiB each in a
1M-point shard; the vectors, graph and payload pages are larger and read after the load)."""


class Journal:
    """Append-only log of the write operations (picklable values) made to a live shard while its
    copy is being built; entries are read back by position. Lives in one file for the duration of
    one build (no fsync: a crash discards the build anyway). Thread-safe: one writer (the store's
    write lock) and a reader may use it at once."""

    def __init__(self, path: Path) -> None:
        """Create (or truncate) the journal file at ``path``. Raises ``OSError``."""
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._ends: list[int] = []
        self._size = 0
        self._lock = threading.Lock()

    def append(self, op: object) -> None:
        """Add ``op`` (any picklable value) at the end. Raises ``OSError``."""
        blob = pickle.dumps(op, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            data = _LEN.pack(len(blob)) + blob
            os.pwrite(self._fd, data, self._size)
            self._size += len(data)
            self._ends.append(self._size)

    def __len__(self) -> int:
        """Number of entries appended so far."""
        with self._lock:
            return len(self._ends)

    def read(self, start: int, stop: int) -> Iterator[object]:
        """Entries ``start`` … ``stop - 1``, in order."""
        with self._lock:
            ends = self._ends[start:stop]
            offset = self._ends[start - 1] if 0 < start <= len(self._ends) else 0
        for end in ends:
            raw = os.pread(self._fd, end - offset, offset)
            (length,) = _LEN.unpack_from(raw)
            yield pickle.loads(raw[_LEN.size : _LEN.size + length])
            offset = end

    def close(self) -> None:
        """Close and delete the file. Idempotent."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class ChildReport:
    """What the build process reports: ``seconds`` of ``optimize()`` (wall clock), ``cpu_s``
    (its CPU seconds, all threads), ``peak_rss_mib`` (its ``VmHWM``), and the built shard's
    ``segments``, ``points`` and ``indexed_vectors``."""

    seconds: float
    cpu_s: float
    peak_rss_mib: float
    segments: int
    points: int
    indexed_vectors: int


@dataclass(frozen=True)
class BuildReport:
    """One build of one collection (:meth:`ancre.index.edge_store.EdgeStore.maintain`).

    Seconds: ``copy_s`` (the copy while writes go on), ``freeze_s`` (the flush and the copy of
    what changed meanwhile: writes blocked, reads not; ``refreshed_mib`` copied), ``build_s`` (the child, from start
    to exit), ``load_s`` (opening the built shard in this process), ``warm_s`` (reading its files
    into the page cache before and after the load, ``warmed_mib``: :func:`prewarm`), ``replay_s`` (the journal,
    ``replayed`` entries), ``swap_s`` (writes blocked: the last entries, the pointer, the switch);
    ``child``: the child's own report."""

    collection: str
    copy_s: float
    freeze_s: float
    refreshed_mib: float
    build_s: float
    load_s: float
    warm_s: float
    warmed_mib: float
    replay_s: float
    swap_s: float
    replayed: int
    child: ChildReport

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


Manifest = dict[str, tuple[int, int, int]]
"""Relative path → ``(size, st_mtime_ns, st_ino)`` of each file, as it was *before* it was copied."""


def _files(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = Path(dirpath) / name
            try:
                yield p.relative_to(root).as_posix(), p.stat()
            except FileNotFoundError:  # removed by the engine meanwhile
                continue


def _key(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino


def _copy(src: Path, dst: Path, rel: str) -> int:
    """Copy one file in :data:`COPY_SYNC_BYTES` pieces, each written to disk (``fdatasync``)
    before the next, so the copy never leaves more than that much dirty data behind it.

    Why (measured at 840k points, 2 cores): a 4 GiB copy left to the kernel's writeback made the
    live shard's next ``EdgeShard.flush`` — an fsync, which on ext4 waits for the data written
    before it, and a call that holds the GIL — take up to 2 s: every question stalled with it.
    Returns the bytes copied, 0 when ``src / rel`` is gone. Raises ``OSError``."""
    out = dst / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        fin = os.open(src / rel, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        fout = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            copied = _copy_fd(fin, fout)
        finally:
            os.close(fout)
        shutil.copystat(src / rel, out)
    except FileNotFoundError:  # removed by the engine meanwhile
        return 0
    finally:
        os.close(fin)
    return copied


def _copy_fd(fin: int, fout: int) -> int:
    offset = 0
    while True:
        try:
            n = os.copy_file_range(fin, fout, COPY_SYNC_BYTES, offset, offset)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            data = os.pread(fin, COPY_SYNC_BYTES, offset)  # no copy_file_range here
            n = os.pwrite(fout, data, offset) if data else 0
        if n <= 0:
            return offset
        offset += n
        os.fdatasync(fout)


def copy_tree(src: Path, dst: Path) -> Manifest:
    """Copy every file under ``src`` to ``dst`` (created), the shard may be written meanwhile;
    returns each file's stat taken *before* its copy, for :func:`refresh_copy`. Raises ``OSError``."""
    dst.mkdir(parents=True, exist_ok=False)
    manifest: Manifest = {}
    for rel, st in _files(src):
        manifest[rel] = _key(st)
        _copy(src, dst, rel)
    return manifest


def refresh_copy(src: Path, dst: Path, manifest: Manifest) -> int:
    """Make ``dst`` an exact copy of ``src`` again, after :func:`copy_tree`: copy the files that
    are new or whose size, modification time or inode changed since their first copy, delete
    those gone from ``src``. Call it with the shard flushed and its writes blocked: every write
    since ``copy_tree`` has then reached a file and moved its mtime (``msync`` marks a shared
    mapping's file modified, POSIX). Returns the bytes copied. Raises ``OSError``."""
    copied = 0
    seen: set[str] = set()
    for rel, st in _files(src):
        seen.add(rel)
        if manifest.get(rel) != _key(st):
            copied += _copy(src, dst, rel)
    for rel, _ in list(_files(dst)):
        if rel not in seen:
            (dst / rel).unlink(missing_ok=True)
    return copied


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
    for rel, st in _files(root):
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
    for rel, _ in list(_files(Path(root))):
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


def run_child(
    shard_dir: Path, spec: dict[str, Any], should_stop: Callable[[], bool] | None = None
) -> ChildReport:
    """Build the shard copy at ``shard_dir`` in a child process (``spec``: what :func:`main`
    needs — ``dim``, ``tuning``, ``keywords``) and wait for it, polling ``should_stop`` every
    :data:`POLL_S` seconds (a stop kills the child). Raises :class:`StoreError` when the child
    fails, is stopped, or prints no report (its stderr, trimmed, in the message)."""
    cmd = [sys.executable, "-m", "ancre.index.edge_build", str(shard_dir), json.dumps(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None:
            if should_stop is not None and should_stop():
                proc.kill()
                proc.wait()
                raise StoreError(f"index build of {shard_dir.name} stopped")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(POLL_S)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise StoreError(
            f"index build of {shard_dir.name} failed (exit {proc.returncode}): {err.strip()[-800:]}"
        )
    try:
        return ChildReport(**json.loads(out.strip().splitlines()[-1]))
    except (IndexError, ValueError, TypeError) as exc:
        raise StoreError(f"index build of {shard_dir.name} printed no report: {out[-300:]!r}") from exc


def fill_keywords(shard: Any, batch: int = 512) -> int:
    """Give every point of ``shard`` without index terms its terms
    (:data:`~ancre.index.keywords.KEYWORD_FIELD`), re-upserting it with its vector; returns the
    number of points filled in."""
    import qdrant_edge as qe

    from ancre.index.keywords import KEYWORD_FIELD, chunk_terms, joined

    filled = 0
    offset: Any = None
    while True:
        records, offset = shard.scroll(
            qe.ScrollRequest(offset=offset, limit=batch, with_payload=True, with_vector=True)
        )
        points = []
        for r in records:
            payload = dict(r.payload or {})
            if KEYWORD_FIELD in payload:
                continue
            payload[KEYWORD_FIELD] = joined(chunk_terms(
                str(payload.get("filename", "")), str(payload.get("text", "")), str(payload.get("header") or "")
            ))
            vector = r.vector[""] if isinstance(r.vector, dict) else r.vector
            points.append(qe.Point(r.id, vector, payload))
        if points:
            shard.update(qe.UpdateOperation.upsert_points(points))
            filled += len(points)
        if offset is None:
            return filled


def _peak_rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str]) -> int:
    """The build process: ``<shard dir> <spec json>``. Loads the shard with the index settings
    of the spec, builds, flushes, prints a :class:`ChildReport` as one JSON line."""
    import qdrant_edge as qe

    from ancre.index.edge_store import EdgeTuning, ensure_payload_indexes, shard_config

    os.nice(CHILD_NICE)
    path, spec = Path(argv[0]), json.loads(argv[1])
    tuning = EdgeTuning(**spec["tuning"])
    shard = qe.EdgeShard.load(str(path), shard_config(int(spec["dim"]), tuning))
    ensure_payload_indexes(shard, keywords=bool(spec["keywords"]), upgrade=True)
    t0, c0 = time.perf_counter(), time.process_time()
    if spec.get("backfill"):
        fill_keywords(shard)
    shard.optimize()
    shard.flush()
    info = shard.info()
    report = ChildReport(
        seconds=round(time.perf_counter() - t0, 3), cpu_s=round(time.process_time() - c0, 3),
        peak_rss_mib=round(_peak_rss_mib(), 1), segments=int(info.segments_count),
        points=int(info.points_count), indexed_vectors=int(info.indexed_vectors_count),
    )
    shard.close()
    print(json.dumps(asdict(report)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
