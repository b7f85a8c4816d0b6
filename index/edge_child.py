"""The index build process of the embedded store: ``python -m ancre.index.edge_child <shard dir>
<spec json>`` loads a copy of a shard with the store's engine configuration
(:mod:`ancre.index.edge_config`), runs the engine's optimizers on it (HNSW graph, quantized
vectors, immutable payload and text indexes, vacuum), flushes, and prints a :class:`ChildReport`
as one JSON line; :func:`run_child` starts it and waits for it (:mod:`ancre.index.edge_build`).

Why a process of its own: qdrant-edge-py's ``EdgeShard.optimize()`` holds Python's GIL from start
to end, so in the process that serves questions it would answer nothing for minutes at a million
chunks. The child runs at a lower CPU priority (:data:`CHILD_NICE`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ancre.errors import StoreError
from ancre.index.edge_config import EdgeTuning, ensure_payload_indexes, shard_config
from ancre.index.keywords import KEYWORD_FIELD, chunk_terms, joined

CHILD_NICE = 10
"""Niceness the build process adds to itself: the serving process keeps the CPU when it needs it."""
POLL_S = 0.2
"""How often a waiting build checks for a stop request, in seconds."""


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


def run_child(
    shard_dir: Path, spec: dict[str, Any], should_stop: Callable[[], bool] | None = None
) -> ChildReport:
    """Build the shard copy at ``shard_dir`` in a child process (``spec``: what :func:`main`
    needs — ``dim``, ``tuning``, ``keywords``) and wait for it, polling ``should_stop`` every
    :data:`POLL_S` seconds (a stop kills the child). Raises :class:`StoreError` when the child
    fails, is stopped, or prints no report (its stderr, trimmed, in the message)."""
    cmd = [sys.executable, "-m", "ancre.index.edge_child", str(shard_dir), json.dumps(spec)]
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
    os.nice(CHILD_NICE)
    path, spec = Path(argv[0]), json.loads(argv[1])
    tuning = EdgeTuning.from_dict(spec["tuning"])
    shard = qe.EdgeShard.load(str(path), shard_config(int(spec["dim"]), tuning))
    ensure_payload_indexes(shard, keywords=bool(spec["keywords"]), tuning=tuning, upgrade=True)
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
