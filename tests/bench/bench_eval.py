"""Retrieval evaluation as a bench table: recall@3, MRR and the extractive ``ask``'s
false refusals / false answers for vector only, BM25 only and hybrid, over
``examples/axonix/eval.json`` on the synced Axonix corpus (e5-local, embedded store). Targets for
hybrid: recall@3 ≥ 0.95, 0 false answers, 0 false refusals (asserted in
``tests/integration/test_retrieval_eval.py``).

Then the same ``ask`` on a share written from templates (issue 41, :mod:`support.template_corpus`:
30 clients per template, three templates, 10 archived versions, clients that do not exist), per
kind of question: first quoted source right, answers quoting another subject's figure, replaced
versions labelled, versions wrongly grouped, refusals (:mod:`support.template_eval`). Targets:
first source right ≥ 0.95 for fee, duration and code; 0 answers with another subject's figure; 0
wrong groups; every replaced version quoted is labelled; every missing client refused (asserted on
a smaller share in ``tests/integration/test_template_corpus.py``)."""

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
            len(sparse_bm25.document_vector(p.payload.filename, p.payload.text, p.payload.header)[0])
            for c in COLLECTIONS for p in rt.store.scroll(c)
        )
        size = f"{nnz:,} postings ≈ {nnz * 8 / 2**10:.0f} KiB (uint32 index + float32 value)"
    else:
        gen = rt.bm25.index_dir / f"gen-{rt.bm25.current_generation()}"
        size = f"{sum(p.stat().st_size for p in gen.iterdir()) / 2**10:.0f} KiB on disk"
    return {"keyword_p50_ms": round(statistics.median(times), 2), "keyword_index": size}


def _templates(quick: bool) -> list[dict]:
    """The evaluation on a generated template share (see the module doc): one row per kind."""
    import time

    from support.template_eval import evaluate as evaluate_templates
    from support.template_eval import synced

    with tempfile.TemporaryDirectory(prefix="ancre-templates-") as tmp:
        t0 = time.perf_counter()
        rt, corpus = synced(Path(tmp), per_template=12 if quick else 30, archived=4 if quick else 10)
        try:
            sync_s = time.perf_counter() - t0
            stats = evaluate_templates(rt, corpus)
        finally:
            rt.close()
    return [{"mode": "templates", "keyword": "edge", "sync_s": round(sync_s, 1), "clients": len(corpus.clients),
             **s.row()} for s in stats.values()]


def run(quick: bool = False) -> list[dict]:
    """Sync the corpus into a temporary folder and evaluate the three modes with BM25 in the
    embedded store's text index (the default); the keyword modes again with the BM25 snapshot,
    and with BM25 in Qdrant (qdrant-client local mode: brute force in Python, so its times say
    nothing of a Qdrant server's). Then the template share (``quick``: 12 subjects per template)."""
    from support.evaluation import evaluate, load_questions, synced_runtime

    questions = load_questions()
    rows = _templates(quick)
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


def _render_templates(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    if not rows:
        return
    t = Table(title=(f"share written from templates ({rows[0]['clients']} clients per template, synced in "
                     f"{rows[0]['sync_s']} s): targets first source ≥ 0.95 (fee, duration, code), 0 other "
                     "subjects' figures, every replaced version labelled, 0 wrong groups, every missing client refused"))
    for c in ("kind", "questions", "first source right", "other subjects' figures", "replaced labelled",
              "replaced first", "versions wrongly grouped", "refused", "listed"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(r["kind"], str(r["questions"]),
                  "–" if r["first_source_right"] is None else f"{r['first_source_right']:.3f}",
                  str(r["other_figures"]), r["superseded_labelled"] or "–", str(r["superseded_first"]),
                  str(r["versions_wrong"]), r["refused"], r["listed"] or "–")
    Console(width=max(Console().width, 180)).print(t)


def render(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    _render_templates([r for r in rows if r["mode"] == "templates"])
    rows = [r for r in rows if r["mode"] != "templates"]

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


def _template_summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    by = {r["kind"]: r for r in rows if r["mode"] == "templates"}
    if not by:
        return []
    first = min(by[k]["first_source_right"] for k in ("fee", "duration", "code") if k in by)
    other = sum(r["other_figures"] for r in by.values())
    wrong = sum(r["versions_wrong"] for r in by.values())
    labelled = [r["superseded_labelled"] for r in by.values() if r["superseded_labelled"]]
    all_labelled = all(a == b for a, b in (x.split("/") for x in labelled))
    refused = by["missing"]["refused"] if "missing" in by else "–"
    n, m = [*refused.split("/"), "", ""][:2]
    ok = first >= 0.95 and other == 0 and wrong == 0 and all_labelled and n == m
    return [(
        "templates: first source / other figures / wrong groups / replaced labelled / missing refused",
        f"{first:.3f} / {other} / {wrong} / {'all' if all_labelled else 'NOT all'} / {refused} {'met' if ok else 'MISSED'}",
        "≥ 0.95 / 0 / 0 / all / all",
    )]


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    templates = _template_summary(rows)
    rows = [r for r in rows if r["mode"] != "templates"]
    h = next(r for r in rows if r["mode"] == "hybrid" and r["keyword"] == "edge")
    ok = h["recall_at_3"] >= 0.95 and h["false_refusals"] == 0 and h["false_answers"] == 0
    return templates + [
        ("hybrid recall@3 / MRR / false refusals / false answers",
         (f"{h['recall_at_3']:.3f} / {h['mrr']:.3f} / {h['false_refusals']} / {h['false_answers']} "
          f"{'met' if ok else 'MISSED'}"), "≥ 0.95 / – / 0 / 0"),
    ] + [
        (f"  {r['mode']}{'' if r['mode'] == 'hybrid' else ' only'} (BM25 in {r['keyword']})",
         f"{r['recall_at_3']:.3f} / {r['mrr']:.3f} / {r['false_refusals']} / {r['false_answers']}", "")
        for r in rows if r is not h
    ]
