"""Index builds of the embedded store in a separate process, swapped in while the live shard
keeps answering and taking writes (:class:`IndexBuilder`, run by
:meth:`ancre.index.edge_store.EdgeStore.maintain`).

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
   :class:`~ancre.index.edge_writes.Journal` (:class:`~ancre.index.edge_writes.ShardWriter`);
2. **build** — a child process (:mod:`ancre.index.edge_child`, at a lower CPU priority)
   loads the copy with the store's index settings, runs ``optimize()``, flushes and exits, printing
   a :class:`~ancre.index.edge_child.ChildReport`; the live shard answers meanwhile, its newest
   points searched exactly;
3. **warm, load, warm, catch up** — the owner reads the built shard's small files into the page
   cache (:func:`~ancre.index.edge_pages.prewarm`), loads it, reads its search files into the page cache again (the
   engine drops them from it as it opens them), then replays the journal onto it, first without
   the write lock, then the last entries with it;
4. **swap** — still under the write lock, the built shard becomes the live one (a pointer file
   names it, written atomically) and the old one is closed once the reads in flight on it are
   done (its pages released first, :func:`~ancre.index.edge_pages.release_pages`), then deleted.

A crash or a stop at any step leaves the previous shard live and complete: the pointer moves only
after the replay, and the next open deletes the leftovers.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ancre.errors import StoreError
from ancre.index.disk_space import SpaceGuard, build_bytes
from ancre.index.edge_child import ChildReport, run_child
from ancre.index.edge_config import EdgeTuning, shard_config
from ancre.index.edge_layout import StoreFolder
from ancre.index.edge_pages import LOAD_FILES_MAX, prewarm, release_wal, shard_files
from ancre.index.edge_shards import LiveShards
from ancre.index.edge_writes import Journal, ShardWriter

log = logging.getLogger("ancre.store")

COPY_SYNC_BYTES = 32 << 20
"""Bytes a shard copy writes before it waits for them to reach the disk (:func:`copy_tree`)."""
CATCH_UP_LOCKED = 64
"""Journal entries left when the build's replay takes the write lock for the rest."""


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
    for rel, st in shard_files(src):
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
    for rel, st in shard_files(src):
        seen.add(rel)
        if manifest.get(rel) != _key(st):
            copied += _copy(src, dst, rel)
    for rel, _ in list(shard_files(dst)):
        if rel not in seen:
            (dst / rel).unlink(missing_ok=True)
    return copied


class IndexBuilder:
    """One build of one collection at a time (the caller serialises them): copy the live shard,
    build the copy in a child process, load it, catch up on the writes made meanwhile, swap it
    in, retire the old shard (see the module doc). ``folder`` says where shards go, ``shards``
    holds the live ones, ``writer`` the write lock and the journals; ``tuning`` and
    ``keywords`` are the store's."""

    def __init__(
        self, folder: StoreFolder, shards: LiveShards, writer: ShardWriter, tuning: EdgeTuning, *, keywords: bool,
        space: SpaceGuard,
    ) -> None:
        self._folder, self._shards, self._writer = folder, shards, writer
        self._tuning, self._keywords = tuning, keywords
        self.space = space  # free space checked before each build; the store replaces it with its own

    def build(self, name: str, dim: int, stop: Callable[[], bool], *, backfill: bool = False) -> BuildReport:
        """Build collection ``name`` (``dim``-dim vectors) and swap it in; ``stop`` is polled
        throughout (a stop abandons the build). ``backfill``: the child also gives every point
        without index terms its terms (a store written while keywords were off). Returns the
        build's report. Raises :class:`StoreError` when the build fails or is stopped: the live
        shard is then as it was, and the copy is deleted."""
        old = self._shards.current(name)
        target, journal_path = self._folder.next_build(name)
        t: dict[str, float] = {"start": time.perf_counter()}
        journal: Journal | None = None
        built: qe.EdgeShard | None = None
        try:
            self.space.require(build_bytes(old.path), f"the index build of {name}")
            manifest = copy_tree(old.path, target)
            t["copied"] = time.perf_counter()
            with self._writer.lock:
                old.shard.flush()
                refreshed = refresh_copy(old.path, target, manifest)
                journal = Journal(journal_path)
                self._writer.journal_to(name, journal)
            t["frozen"] = time.perf_counter()
            spec = {"dim": dim, "tuning": self._tuning.to_dict(), "keywords": self._keywords, "backfill": backfill}
            child = run_child(target, spec, stop)
            t["built"] = time.perf_counter()
            built, warmed = self._load(name, target, dim, stop, t)
            replayed = self._swap_in(name, journal, built, target, t)
            built = None
        except BaseException:
            self._writer.journal_to(name, None)
            if built is not None:
                with contextlib.suppress(Exception):
                    built.close()
            shutil.rmtree(target, ignore_errors=True)
            raise
        finally:
            if journal is not None:
                journal.close()
        self._shards.retire(old)
        report = BuildReport(
            collection=name, copy_s=_s(t, "start", "copied"), freeze_s=_s(t, "copied", "frozen"),
            refreshed_mib=round(refreshed / 2**20, 1), build_s=_s(t, "frozen", "built"),
            load_s=_s(t, "warmed", "loaded"), warm_s=round(_s(t, "built", "warmed") + _s(t, "loaded", "rewarmed"), 3),
            warmed_mib=round(warmed / 2**20, 1), replay_s=_s(t, "rewarmed", "caught_up"),
            swap_s=_s(t, "caught_up", "swapped"), replayed=replayed, child=child,
        )
        log.info("index build swapped in", extra={"build": report.to_dict()})
        return report

    def _load(
        self, name: str, target: Path, dim: int, stop: Callable[[], bool], t: dict[str, float]
    ) -> tuple[qe.EdgeShard, int]:
        """Read the built shard's small files into the page cache, load it, read its search files
        in again; returns it and the bytes read. Raises :class:`StoreError` on a stop."""
        if stop():
            raise StoreError(f"index build of {name} stopped")
        warmed = prewarm(target, max_file_bytes=LOAD_FILES_MAX, should_stop=stop)
        t["warmed"] = time.perf_counter()
        built = qe.EdgeShard.load(str(target), shard_config(dim, self._tuning))
        t["loaded"] = time.perf_counter()
        try:
            warmed += prewarm(target, skip=("wal",), should_stop=stop)
            if stop():
                raise StoreError(f"index build of {name} stopped")
        except BaseException:
            with contextlib.suppress(Exception):
                built.close()
            raise
        t["rewarmed"] = time.perf_counter()
        return built, warmed

    def _swap_in(self, name: str, journal: Journal, built: qe.EdgeShard, target: Path, t: dict[str, float]) -> int:
        """Replay the journal onto ``built`` (without the write lock while more than
        :data:`CATCH_UP_LOCKED` entries are left, then with it), point ``name`` at ``target``
        and make it live; returns the entries replayed."""
        done = self._writer.replay(journal, built, 0)
        while len(journal) - done > CATCH_UP_LOCKED:
            done = self._writer.replay(journal, built, done)
        t["caught_up"] = time.perf_counter()
        with self._writer.lock:
            done = self._writer.replay(journal, built, done)
            built.flush()
            self._folder.write_pointer(name, target.name)
            self._shards.put(name, built, target)
            self._writer.journal_to(name, None)
            t["swapped"] = time.perf_counter()
        release_wal(target)
        return done


def _s(t: dict[str, float], start: str, end: str) -> float:
    """Seconds between two marks of a build, rounded to the millisecond."""
    return round(t[end] - t[start], 3)
