"""Index builds of the embedded store in a separate process, and the journal that lets the live
shard keep taking writes meanwhile (:meth:`ancre.index.edge_store.EdgeStore.maintain`).

qdrant-edge-py runs a shard's optimizers (HNSW graph, quantized vectors, immutable payload and
text indexes, vacuum of deleted points) inside :meth:`EdgeShard.optimize`, which holds Python's
GIL from start to end: in the process that serves questions it would answer nothing for minutes
at a million chunks. So a build goes like this:

1. **copy** — the live shard's folder is copied to ``<collection>@<n>`` while it takes writes
   (:func:`copy_tree`), then, under the store's write lock (readers go on), the shard is flushed
   and the files that changed since are copied again (:func:`refresh_copy`: the appendable
   segment, the WAL, deletion flags — the indexed segments' big files do not change), so writes
   wait only for that; from then on every write to the live shard is also appended to a
   :class:`Journal`;
2. **build** — a child process (``python -m ancre.index.edge_build``, at a lower CPU priority)
   loads the copy with the store's index settings, runs ``optimize()``, flushes and exits, printing
   a :class:`ChildReport`; the live shard answers meanwhile, its newest points searched exactly;
3. **catch up** — the owner loads the built shard and replays the journal onto it, first without
   the write lock, then the last entries with it;
4. **swap** — still under the write lock, the built shard becomes the live one (a pointer file
   names it, written atomically) and the old one is closed once the reads in flight on it are
   done, then deleted.

A crash or a stop at any step leaves the previous shard live and complete: the pointer moves only
after the replay, and the next open deletes the leftovers.
"""

from __future__ import annotations

import contextlib
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
    to exit), ``load_s`` (opening the built shard in this process), ``replay_s`` (the journal,
    ``replayed`` entries), ``swap_s`` (writes blocked: the last entries, the pointer, the switch);
    ``child``: the child's own report."""

    collection: str
    copy_s: float
    freeze_s: float
    refreshed_mib: float
    build_s: float
    load_s: float
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
    out = dst / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copy2(src / rel, out)
    except FileNotFoundError:
        return 0
    return out.stat().st_size


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
            payload[KEYWORD_FIELD] = joined(chunk_terms(str(payload.get("filename", "")), str(payload.get("text", ""))))
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
