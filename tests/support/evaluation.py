"""The retrieval evaluation of issue 12 over the bundled Axonix corpus (``examples/axonix/eval.json``):
shared by ``tests/integration/test_retrieval_eval.py`` (asserts the targets for hybrid retrieval)
and ``tests/bench/bench_eval.py`` (prints the table for vector only, BM25 only and hybrid).

Per mode: **recall@3** (answerable questions whose expected document has a chunk among the first
3 results), **MRR** (mean of 1 / rank of the expected document's first chunk, 0 beyond 30), and
the outcome of the extractive ``ask`` (no model): a **false refusal** is a refusal where a
document was expected; a **false answer** is an answer where a refusal was expected, or one that
cites none of the expected documents, or — for a question about rights (``forbid``) — one that
shows a forbidden document or its fact (answered from other documents, or refused, it passes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from support.corpus import CORPUS, copy_corpus, write_config

from ancre.config import load_settings
from ancre.app.runtime import Runtime
from ancre.query.answer import AnswerService
from ancre.query.grounding import is_refusal
from ancre.query.retrieval import Retrieval, Retriever

EVAL_FILE = CORPUS / "eval.json"
MODES: dict[str, tuple[str, ...]] = {"vector": ("vector",), "bm25": ("bm25",), "hybrid": ("vector", "bm25")}
DEPTH = 30
TARGETS = {"recall_at_3": 0.95, "false_answers": 0, "false_refusals": 0}
"""Issue 12's targets for hybrid retrieval."""


@dataclass(frozen=True)
class Question:
    """One evaluation question: who asks, what, and the acceptable documents (``()``: refusal,
    unless ``forbid`` names documents that must not show, nor ``forbid_fact``)."""

    id: int
    kind: str
    user: str
    text: str
    expect: tuple[str, ...]
    forbid: tuple[str, ...] = ()
    forbid_fact: str | None = None


@dataclass
class ModeResult:
    """The evaluation of one retrieval mode."""

    mode: str
    questions: int = 0
    answerable: int = 0
    hits_at_3: int = 0
    rr_sum: float = 0.0
    false_refusals: list[int] = field(default_factory=list)
    false_answers: list[int] = field(default_factory=list)
    misses_at_3: list[int] = field(default_factory=list)

    @property
    def recall_at_3(self) -> float:
        return self.hits_at_3 / self.answerable if self.answerable else 1.0

    @property
    def mrr(self) -> float:
        return self.rr_sum / self.answerable if self.answerable else 1.0

    def row(self) -> dict[str, object]:
        return {
            "mode": self.mode, "questions": self.questions, "answerable": self.answerable,
            "recall_at_3": round(self.recall_at_3, 3), "mrr": round(self.mrr, 3),
            "false_refusals": len(self.false_refusals), "false_answers": len(self.false_answers),
            "false_refusal_ids": self.false_refusals, "false_answer_ids": self.false_answers,
            "miss_at_3_ids": self.misses_at_3,
        }


def load_questions(path: Path = EVAL_FILE) -> list[Question]:
    """The questions of ``eval.json``."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [
        Question(int(q["id"]), q["kind"], q["as"], q["q"], tuple(q.get("expect") or ()),
                 tuple(q.get("forbid") or ()), q.get("forbid_fact"))
        for q in raw
    ]


def synced_runtime(dest: Path, *, keyword: str = "snapshot") -> Runtime:
    """The corpus copied under ``dest``, synced with e5-local; the caller closes it.
    ``keyword = "snapshot"``: the embedded store and the BM25 snapshot (default configuration);
    ``"qdrant"``: qdrant-client's local mode with BM25 as sparse vectors (``[store] bm25 =
    "qdrant"``, what runs here in place of a Qdrant server)."""
    root = copy_corpus(dest)
    config = write_config(root)
    if keyword == "qdrant":
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace('kind = "edge"', 'kind = "local"\nbm25 = "qdrant"', 1), encoding="utf-8")
    rt = Runtime(load_settings(config))
    for conn in rt.connectors():
        rep = rt.engine.run_pass(conn)
        if rep.outcome != "ok" or rep.failed:
            raise RuntimeError(f"sync of the evaluation corpus failed: {rep}")
    return rt


class ModeRetriever(Retriever):
    """A :class:`Retriever` that fuses only the candidate lists of one evaluation mode."""

    def __init__(self, base: Retriever, lists: tuple[str, ...]) -> None:
        super().__init__(base.store, base.embedder, base.bm25, base.cfg, keyword_in_store=base.keyword_in_store)
        self.lists = lists

    def retrieve(self, question: str, principals: frozenset[str], limit: int | None = None, *,
                 lists: tuple[str, ...] | None = None) -> Retrieval:
        return super().retrieve(question, principals, limit, lists=self.lists)


def evaluate(rt: Runtime, questions: list[Question], modes: tuple[str, ...] = tuple(MODES)) -> list[ModeResult]:
    """Run every question for every mode (retrieval ranks, then the extractive ``ask``)."""
    out = []
    for mode in modes:
        retriever = ModeRetriever(rt.retriever, MODES[mode])
        service = AnswerService(retriever, rt.store, rt.directory, rt.settings)
        res = ModeResult(mode)
        for q in questions:
            res.questions += 1
            principals = rt.directory.principals(q.user)
            if q.expect:
                res.answerable += 1
                hits = retriever.retrieve(q.text, principals, DEPTH).results if principals else ()
                rank = next((i for i, r in enumerate(hits, 1) if r.filename in q.expect), None)
                if rank is not None:
                    res.rr_sum += 1.0 / rank
                if rank is not None and rank <= 3:
                    res.hits_at_3 += 1
                else:
                    res.misses_at_3.append(q.id)
            answer = service.ask(q.text, q.user)
            refused = is_refusal(answer.raw)
            if q.forbid:
                shown = {s.filename for s in answer.sources} | {f for f in q.forbid if f in answer.raw}
                if shown & set(q.forbid) or (q.forbid_fact and q.forbid_fact in answer.raw):
                    res.false_answers.append(q.id)
            elif q.expect and refused:
                res.false_refusals.append(q.id)
            elif not q.expect and not refused:
                res.false_answers.append(q.id)
            elif q.expect and not {s.filename for s in answer.sources} & set(q.expect):
                res.false_answers.append(q.id)
        out.append(res)
    return out
