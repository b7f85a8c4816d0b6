"""The retrieval evaluation over the bundled Axonix corpus (``examples/axonix/eval.json``):
shared by ``tests/integration/test_retrieval_eval.py`` (asserts the targets for hybrid retrieval)
and ``tests/bench/bench_eval.py`` (prints the table for vector only, BM25 only and hybrid).

Per mode: **recall@3** (answerable questions whose expected document has a chunk among the first
3 results — for a question that needs every expected document, ``expect_all``: all of them among
the first 3 distinct documents), **MRR** (mean of 1 / rank of the expected document's first chunk,
0 beyond 30), and the outcome of the extractive ``ask`` (no model): a **false refusal** is a
refusal where a document was expected; a **false answer** is an answer where a refusal was
expected, or one that cites none of the expected documents (with ``expect_all``: misses one), or —
for a question about rights (``forbid``) — one that shows a forbidden document or its fact
(answered from other documents, or refused, it passes).

Kinds beyond single questions: ``conversation`` (``turns``: the earlier user questions; the
question is resolved from them, and the **resolved-question accuracy** counts those whose
standalone form holds every ``resolved`` term and no ``resolved_absent`` one, folded),
``version`` (a version conflict: it is **announced** when the answer's
:attr:`~ancre.query.answer.Answer.versions` names ``current`` as the version in force and the text
quotes it before the other) and ``broad`` (every contract reached). Every answer's version
groups are also checked against the corpus's true versions (the ``expect`` sets of the ``version``
questions): a group holding a document outside them is a **false conflict** (another client's
contract labelled an old version).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.index.tokenize import fold
from ancre.query.answer import AnswerService
from ancre.query.conversation import ConversationResolver
from ancre.query.grounding import is_refusal
from ancre.query.retrieval import Retrieval, Retriever
from support.corpus import CORPUS, copy_corpus, write_config

EVAL_FILE = CORPUS / "eval.json"
MODES: dict[str, tuple[str, ...]] = {"vector": ("vector",), "bm25": ("bm25",), "hybrid": ("vector", "bm25")}
DEPTH = 30
TARGETS = {"recall_at_3": 0.95, "false_answers": 0, "false_refusals": 0}
"""The targets for hybrid retrieval."""


@dataclass(frozen=True)
class Question:
    """One evaluation question: who asks, what, and the acceptable documents (``()``: refusal,
    unless ``forbid`` names documents that must not show, nor ``forbid_fact``)."""

    id: int
    kind: str
    user: str
    text: str
    expect: tuple[str, ...]
    turns: tuple[str, ...] = ()
    """The earlier user questions of the conversation (``()``: asked alone)."""
    resolved: tuple[str, ...] = ()
    """Terms the resolved question must hold (folded)."""
    resolved_absent: tuple[str, ...] = ()
    """Terms it must not hold (folded)."""
    expect_all: bool = False
    """Every expected document must be reached (a broad question or a comparison)."""
    current: str | None = None
    """For a version conflict: the version in force, which the answer must name and quote first."""
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
    per_kind: dict[str, KindResult] = field(default_factory=dict)

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


@dataclass
class KindResult:
    """One kind of question's counts (hybrid mode)."""

    kind: str
    questions: int = 0
    answerable: int = 0
    hits_at_3: int = 0
    conversations: int = 0
    resolved_ok: int = 0
    conflicts: int = 0
    announced: int = 0
    false_refusals: list[int] = field(default_factory=list)
    false_answers: list[int] = field(default_factory=list)
    misresolved: list[int] = field(default_factory=list)
    unannounced: list[int] = field(default_factory=list)
    false_conflicts: list[int] = field(default_factory=list)

    def row(self) -> dict[str, object]:
        return {
            "kind": self.kind, "questions": self.questions,
            "resolved_accuracy": round(self.resolved_ok / self.conversations, 3) if self.conversations else None,
            "recall_at_3": round(self.hits_at_3 / self.answerable, 3) if self.answerable else None,
            "false_answers": len(self.false_answers), "false_refusals": len(self.false_refusals),
            "conflicts_announced": f"{self.announced}/{self.conflicts}" if self.conflicts else None,
            "false_conflicts": len(self.false_conflicts),
            "ids": {"false_answers": self.false_answers, "false_refusals": self.false_refusals,
                    "misresolved": self.misresolved, "unannounced": self.unannounced,
                    "false_conflicts": self.false_conflicts},
        }


class _EvalEntry(BaseModel):
    """One entry of ``eval.json`` as written; an unknown key is refused, named."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: int
    kind: str
    as_: str = Field(alias="as")
    q: str
    expect: tuple[str, ...] = ()
    turns: tuple[str, ...] = ()
    resolved: tuple[str, ...] = ()
    resolved_absent: tuple[str, ...] = ()
    expect_all: bool = False
    expect_refusal: bool = False
    current: str | None = None
    forbid: tuple[str, ...] = ()
    forbid_fact: str | None = None
    fact: str | None = None
    why: str | None = None


def load_questions(path: Path = EVAL_FILE) -> list[Question]:
    """The questions of ``eval.json``. Raises ``pydantic.ValidationError`` naming an unknown key
    or a value of the wrong type (a misspelt ``expect`` would make a question expect a refusal)."""
    entries = TypeAdapter(list[_EvalEntry]).validate_json(path.read_bytes())
    return [
        Question(
            e.id, e.kind, e.as_, e.q, e.expect, e.turns, e.resolved, e.resolved_absent, e.expect_all, e.current,
            forbid=e.forbid, forbid_fact=e.forbid_fact,
        )
        for e in entries
    ]


def resolved_ok(q: Question, resolved: str) -> bool:
    """Whether the standalone form of a conversation question holds what it must."""
    text = fold(resolved)
    return all(fold(t) in text for t in q.resolved) and not any(fold(t) in text for t in q.resolved_absent)


def false_conflict(answer: object, versions: list[frozenset[str]]) -> bool:
    """Whether one of the answer's version groups holds documents that are not versions of one
    another (``versions``: the true sets)."""
    return any(not any(set(g.documents) <= v for v in versions) for g in getattr(answer, "versions", ()))


def announced(q: Question, answer: object) -> bool:
    """Whether a version conflict is announced: the current version named and quoted first."""
    groups = getattr(answer, "versions", ())
    raw = getattr(answer, "raw", "")
    if not any(g.current == q.current for g in groups):
        return False
    others = [d for g in groups for d in g.documents if d != q.current]
    first = raw.find(f"[{q.current}]")
    return first >= 0 and all(raw.find(f"[{o}]") < 0 or first < raw.find(f"[{o}]") for o in others)


def synced_runtime(dest: Path, *, keyword: str = "edge") -> Runtime:
    """The corpus copied under ``dest``, synced with e5-local; the caller closes it.
    ``keyword = "edge"``: the embedded store with BM25 in its text index (default configuration);
    ``"snapshot"``: the embedded store and the BM25 snapshot (``[store] bm25 = "snapshot"``);
    ``"qdrant"``: qdrant-client's local mode with BM25 as sparse vectors (``[store] bm25 =
    "qdrant"``, what runs here in place of a Qdrant server)."""
    root = copy_corpus(dest)
    config = write_config(root)
    store = {"edge": 'kind = "edge"', "snapshot": 'kind = "edge"\nbm25 = "snapshot"', "qdrant": 'kind = "local"\nbm25 = "qdrant"'}
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('kind = "edge"', store[keyword], 1), encoding="utf-8")
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
                 lists: tuple[str, ...] | None = None, candidates: int | None = None) -> Retrieval:
        return super().retrieve(question, principals, limit, lists=self.lists, candidates=candidates)


def evaluate(rt: Runtime, questions: list[Question], modes: tuple[str, ...] = tuple(MODES)) -> list[ModeResult]:
    """Run every question for every mode (retrieval ranks, then the extractive ``ask``)."""
    out = []
    resolver = ConversationResolver()
    versions = [frozenset(q.expect) for q in load_questions() if q.kind == "version"]
    for mode in modes:
        retriever = ModeRetriever(rt.retriever, MODES[mode])
        service = AnswerService(retriever, rt.store, rt.directory, rt.settings)
        res = ModeResult(mode)
        for q in questions:
            kind = res.per_kind.setdefault(q.kind, KindResult(q.kind))
            kind.questions += 1
            res.questions += 1
            principals = rt.directory.principals(q.user)
            history = list(q.turns) if q.turns else None
            resolution = resolver.resolve(q.text, q.turns) if q.turns else None
            asked = resolution.question if resolution is not None else q.text
            if resolution is not None:
                kind.conversations += 1
                if resolved_ok(q, resolution.question):
                    kind.resolved_ok += 1
                else:
                    kind.misresolved.append(q.id)
            if q.expect:
                res.answerable += 1
                kind.answerable += 1
                hits = retriever.retrieve(asked, principals, DEPTH).results if principals else ()
                rank = next((i for i, r in enumerate(hits, 1) if r.filename in q.expect), None)
                if rank is not None:
                    res.rr_sum += 1.0 / rank
                if q.expect_all:
                    top_docs = list(dict.fromkeys(r.filename for r in hits))[:3]
                    hit = set(q.expect) <= set(top_docs)
                else:
                    hit = rank is not None and rank <= 3
                if hit:
                    res.hits_at_3 += 1
                    kind.hits_at_3 += 1
                else:
                    res.misses_at_3.append(q.id)
            answer = service.ask(q.text, q.user, history=history)
            refused = is_refusal(answer.raw)
            cited = {s.filename for s in answer.sources}
            if q.forbid:
                shown = cited | {f for f in q.forbid if f in answer.raw}
                forbidden = bool(shown & set(q.forbid)) or bool(q.forbid_fact and q.forbid_fact in answer.raw)
                wrong = (res.false_answers, kind.false_answers) if forbidden else ()
            elif q.expect and refused:
                wrong = res.false_refusals, kind.false_refusals
            elif (not q.expect and not refused) or (q.expect and (not cited & set(q.expect) or (q.expect_all and not set(q.expect) <= cited))):
                wrong = res.false_answers, kind.false_answers
            else:
                wrong = ()
            for bucket in wrong:
                bucket.append(q.id)
            if false_conflict(answer, versions):
                kind.false_conflicts.append(q.id)
            if q.current is not None:
                kind.conflicts += 1
                if announced(q, answer):
                    kind.announced += 1
                else:
                    kind.unannounced.append(q.id)
        out.append(res)
    return out
