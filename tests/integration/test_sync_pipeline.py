"""The sync engine's pipeline (daemon/sync/commit.py ``CommitPipe``): files are extracted by the worker
process while the previous batch is embedded and written, and the pass ends the same as one done
step by step — same reports, same points, same state rows (real folder source, extraction worker,
e5-local, embedded store)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from support.daemon_proc import write_daemon_config

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.models import COLLECTIONS

N_FILES = 72  # more than two batches (32 documents each)


def _tree(root: Path) -> None:
    for i in range(N_FILES):
        d = root / f"dossier-{i % 4}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"note-{i:02d}.md").write_text(
            f"# Note {i}\n\nLe contrat de maintenance numéro {i} couvre le poste {i * 7}. "
            f"Le relais RX-{1000 + i} a été remplacé le {i % 28 + 1} mars.\n", encoding="utf-8",
        )


def _sync(tmp: Path, overlap: bool) -> tuple[dict, list[tuple[str, float, float]], set, dict]:
    _tree(tmp / "tree")
    rt = Runtime(load_settings(write_daemon_config(tmp)))
    try:
        engine = rt.engine
        engine.overlap = overlap
        spans: list[tuple[str, float, float]] = []
        mu = threading.Lock()

        def timed(obj: object, name: str, label: str) -> None:
            real = getattr(obj, name)

            def run(*a: object, **k: object) -> object:
                t0 = time.perf_counter()
                try:
                    return real(*a, **k)
                finally:
                    with mu:
                        spans.append((label, t0, time.perf_counter()))

            setattr(obj, name, run)

        timed(engine.fetcher.pool, "extract", "extract")
        timed(engine.writer, "commit", "commit")  # pending rows, embedding, upserts, indexed rows
        rep = engine.run_pass(rt.connectors()[0], rebuild_bm25=False)
        points = {(c, p.id, p.payload.text, p.payload.acl_allow) for c in COLLECTIONS for p in rt.store.scroll(c)}
        rows = {st.path: (st.status, st.chunk_count, st.content_hash) for st in rt.state.all_items()}
        counts = {k: getattr(rep, k) for k in ("outcome", "listed", "new", "changed", "failed", "embedded_chunks")}
        return counts, spans, points, rows
    finally:
        rt.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    return _sync(tmp_path_factory.mktemp("serial"), False), _sync(tmp_path_factory.mktemp("piped"), True)


def test_extraction_overlaps_embedding(runs) -> None:
    """Files are extracted while the previous batch is being embedded and written (step by step,
    never)."""
    (_, serial, _, _), (_, piped, _, _) = runs

    def overlapping(spans: list[tuple[str, float, float]]) -> int:
        commits = [(a, b) for label, a, b in spans if label == "commit"]
        return sum(1 for label, a, _ in spans if label == "extract" and any(s < a < e for s, e in commits))

    assert overlapping(serial) == 0
    assert overlapping(piped) > 0


def test_the_pipeline_ends_as_a_step_by_step_pass(runs) -> None:
    (c1, _, points1, rows1), (c2, _, points2, rows2) = runs
    assert c1 == c2 and c1["outcome"] == "ok" and c1["new"] == N_FILES and c1["embedded_chunks"] >= N_FILES
    assert {(c, t, a) for c, _, t, a in points1} == {(c, t, a) for c, _, t, a in points2}
    assert rows1.keys() == rows2.keys() and all(r[0] == "indexed" for r in rows2.values())
    assert {p: r[1:] for p, r in rows1.items()} == {p: r[1:] for p, r in rows2.items()}
