"""Retrieval evaluation (issue 12) as a bench table: recall@3, MRR and the extractive ``ask``'s
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


def run() -> list[dict]:
    """Sync the corpus into a temporary folder and evaluate the three modes."""
    from support.evaluation import evaluate, load_questions, synced_runtime

    with tempfile.TemporaryDirectory(prefix="ancre-eval-") as tmp:
        rt = synced_runtime(Path(tmp))
        try:
            return [r.row() for r in evaluate(rt, load_questions())]
        finally:
            rt.close()


def render(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"retrieval evaluation ({rows[0]['questions']} questions, {rows[0]['answerable']} answerable)")
    for c in ("mode", "recall@3", "MRR", "false refusals", "false answers", "ids (refusals / answers / misses@3)"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(
            r["mode"], f"{r['recall_at_3']:.3f}", f"{r['mrr']:.3f}", str(r["false_refusals"]),
            str(r["false_answers"]),
            f"{r['false_refusal_ids']} / {r['false_answer_ids']} / {r['miss_at_3_ids']}",
        )
    Console().print(t)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    h = next(r for r in rows if r["mode"] == "hybrid")
    ok = h["recall_at_3"] >= 0.95 and h["false_refusals"] == 0 and h["false_answers"] == 0
    return [
        ("hybrid recall@3 / MRR / false refusals / false answers",
         f"{h['recall_at_3']:.3f} / {h['mrr']:.3f} / {h['false_refusals']} / {h['false_answers']} "
         f"{'met' if ok else 'MISSED'}", "≥ 0.95 / – / 0 / 0"),
    ] + [
        (f"  {r['mode']} only", f"{r['recall_at_3']:.3f} / {r['mrr']:.3f} / {r['false_refusals']} / {r['false_answers']}", "")
        for r in rows if r["mode"] != "hybrid"
    ]
