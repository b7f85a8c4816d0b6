"""Retrieval evaluation as a bench table: recall@3, MRR and the extractive ``ask``'s
false refusals / false answers for vector only, BM25 only and hybrid, over
``examples/axonix/eval.json`` on the synced Axonix corpus (e5-local, embedded store). Targets for
hybrid: recall@3 ≥ 0.95, 0 false answers, 0 false refusals (asserted in
``tests/integration/test_retrieval_eval.py``)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def _keyword_costs(rt, questions) -> dict:
    """Keyword-side p50 over the evaluation questions (as their users), and its index size."""
    import statistics
    import time

    from ancre.index import sparse_bm25
    from ancre.models import COLLECTIONS

    times = []
    for q in questions:
        principals = rt.directory.principals(q.user)
        if not principals:
            continue
        t0 = time.perf_counter()
        rt.retriever.retrieve(q.text, principals, lists=("bm25",))
        times.append((time.perf_counter() - t0) * 1000)
    if rt.settings.store.kind == "edge" and rt.settings.store.bm25 == "qdrant":
        root = rt.data_dir / "qdrant"
        files = [p for p in root.rglob("*") if p.is_file() and "bm25_terms" in str(p)]
        size = f"{sum(p.stat().st_blocks * 512 for p in files) / 2**10:.0f} KiB on disk (text index)"
    elif rt.settings.store.bm25 == "qdrant":
        nnz = sum(
            len(sparse_bm25.document_vector(p.payload.filename, p.payload.text)[0])
            for c in COLLECTIONS for p in rt.store.scroll(c)
        )
        size = f"{nnz:,} postings ≈ {nnz * 8 / 2**10:.0f} KiB (uint32 index + float32 value)"
    else:
        gen = rt.bm25.index_dir / f"gen-{rt.bm25.current_generation()}"
        size = f"{sum(p.stat().st_size for p in gen.iterdir()) / 2**10:.0f} KiB on disk"
    return {"keyword_p50_ms": round(statistics.median(times), 2), "keyword_index": size}


def run() -> list[dict]:
    """Sync the corpus into a temporary folder and evaluate the three modes with BM25 in the
    embedded store's text index (the default); the keyword modes again with the BM25 snapshot,
    and with BM25 in Qdrant (qdrant-client local mode: brute force in Python, so its times say
    nothing of a Qdrant server's)."""
    from support.evaluation import evaluate, load_questions, synced_runtime

    questions = load_questions()
    rows = []
    for keyword, modes in (("edge", ("vector", "bm25", "hybrid")), ("snapshot", ("bm25", "hybrid")), ("qdrant", ("bm25", "hybrid"))):
        with tempfile.TemporaryDirectory(prefix="ancre-eval-") as tmp:
            rt = synced_runtime(Path(tmp), keyword=keyword)
            try:
                costs = _keyword_costs(rt, questions)
                for r in evaluate(rt, questions, modes):
                    rows.append({"keyword": keyword if r.mode != "vector" else "–", **r.row(), **costs,
                                 "per_kind": [k.row() for k in r.per_kind.values()]})
            finally:
                rt.close()
    return rows


def render(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    kinds = next((r["per_kind"] for r in rows if r["mode"] == "hybrid" and r["keyword"] == "snapshot"), [])
    if kinds:
        k = Table(title="hybrid, per kind of question (targets: 0 false answers, 0 false refusals, every conflict announced)")
        for c in ("kind", "questions", "resolved-question accuracy", "recall@3", "false answers", "false refusals",
                  "conflicts announced", "false conflicts",
                  "ids (answers / refusals / misresolved / unannounced / false conflicts)"):
            k.add_column(c, justify="right")
        for r in kinds:
            ids = r["ids"]
            k.add_row(r["kind"], str(r["questions"]),
                      "–" if r["resolved_accuracy"] is None else f"{r['resolved_accuracy']:.3f}",
                      "–" if r["recall_at_3"] is None else f"{r['recall_at_3']:.3f}",
                      str(r["false_answers"]), str(r["false_refusals"]), r["conflicts_announced"] or "–",
                      str(r["false_conflicts"]),
                      f"{ids['false_answers']} / {ids['false_refusals']} / {ids['misresolved']} / {ids['unannounced']}"
                      f" / {ids['false_conflicts']}")
        Console(width=max(Console().width, 180)).print(k)

    t = Table(title=f"retrieval evaluation ({rows[0]['questions']} questions, {rows[0]['answerable']} answerable)")
    for c in ("mode", "BM25 in", "recall@3", "MRR", "false refusals", "false answers",
              "ids (refusals / answers / misses@3)", "keyword p50 ms", "keyword index"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(
            r["mode"], r["keyword"], f"{r['recall_at_3']:.3f}", f"{r['mrr']:.3f}", str(r["false_refusals"]),
            str(r["false_answers"]),
            f"{r['false_refusal_ids']} / {r['false_answer_ids']} / {r['miss_at_3_ids']}",
            "" if r["mode"] == "vector" else f"{r['keyword_p50_ms']:.2f}",
            "" if r["mode"] == "vector" else r["keyword_index"],
        )
    Console(width=max(Console().width, 180)).print(t)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    h = next(r for r in rows if r["mode"] == "hybrid" and r["keyword"] == "edge")
    ok = h["recall_at_3"] >= 0.95 and h["false_refusals"] == 0 and h["false_answers"] == 0
    return [
        ("hybrid recall@3 / MRR / false refusals / false answers",
         (f"{h['recall_at_3']:.3f} / {h['mrr']:.3f} / {h['false_refusals']} / {h['false_answers']} "
          f"{'met' if ok else 'MISSED'}"), "≥ 0.95 / – / 0 / 0"),
    ] + [
        (f"  {r['mode']}{'' if r['mode'] == 'hybrid' else ' only'} (BM25 in {r['keyword']})",
         f"{r['recall_at_3']:.3f} / {r['mrr']:.3f} / {r['false_refusals']} / {r['false_answers']}", "")
        for r in rows if r is not h
    ]
