"""The evaluation on a share written from templates (issue 41), shared by
``tests/integration/test_template_corpus.py`` (asserts the targets on a small generated share) and
``tests/bench/bench_eval.py`` (prints the table on the full one).

A corpus from :func:`support.template_corpus.generate` is synced with e5-local into the embedded
store, then every question of :meth:`~support.template_corpus.TemplateCorpus.questions` is asked
as alice (who reads everything) in the extractive mode. Per kind of question:

- **first source right**: the answer's first citation is the expected document (the client's
  contract in force, its offer, the person's letter);
- **other subjects' figures**: answers to a precise question that cite a document of another subject
  (another client's contract, offer or letter) or write a figure unique to another subject (fee,
  code, offer total, salary);
- **superseded labelled**: of the answers that quote a client's replaced contract (its figure in the
  answer), those that quote the one in force first and label the replaced one « remplacée »;
  **superseded first**: those that quote the replaced one first;
- **versions wrongly grouped**: answers whose version groups hold documents of different subjects;
- **refused**: refusals (the target: every question about a client that does not exist, none else).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.query.answer import Answer, AnswerService
from ancre.query.grounding import is_refusal
from support.template_corpus import Question, TemplateCorpus, generate

PRECISE = ("fee", "duration", "code", "version", "offer", "salary")
TARGETS = {"first_source_right": 0.95, "other_figures": 0, "versions_wrong": 0}
"""The issue's targets: first source right for fee, duration and code; none of the others."""


@dataclass
class KindStats:
    """One kind of question's counts."""

    kind: str
    questions: int = 0
    first_right: int = 0
    other_figures: list[str] = field(default_factory=list)
    superseded_quoted: int = 0
    superseded_labelled: int = 0
    superseded_first: int = 0
    versions_wrong: list[str] = field(default_factory=list)
    refused: int = 0
    wrong_first: list[str] = field(default_factory=list)
    listed: str = ""

    def row(self) -> dict[str, object]:
        n = self.questions
        return {
            "kind": self.kind, "questions": n,
            "first_source_right": round(self.first_right / n, 3) if self.kind in PRECISE and n else None,
            "other_figures": len(self.other_figures), "superseded_labelled": (
                f"{self.superseded_labelled}/{self.superseded_quoted}" if self.superseded_quoted else None),
            "superseded_first": self.superseded_first, "versions_wrong": len(self.versions_wrong),
            "refused": f"{self.refused}/{n}", "listed": self.listed or None,
            "ids": {"wrong_first": self.wrong_first[:5], "other_figures": self.other_figures[:5],
                    "versions_wrong": self.versions_wrong[:5]},
        }


def synced(dest: Path, seed: int = 41, per_template: int = 30, archived: int = 10, missing: int = 5) -> tuple[Runtime, TemplateCorpus]:
    """A corpus generated under ``dest`` and synced (e5-local, embedded store); the caller closes
    the runtime."""
    corpus = generate(dest, seed, per_template, archived, missing)
    rt = Runtime(load_settings(corpus.write_config()))
    for conn in rt.connectors():
        rep = rt.engine.run_pass(conn)
        if rep.outcome != "ok" or rep.failed:
            raise RuntimeError(f"sync of the generated corpus failed: {rep}")
    return rt, corpus


_CITATION = re.compile(r"\[([^\[\]]+\.(?:docx|md|pdf|xlsx))\]")


def _cited(answer: Answer) -> list[str]:
    return list(dict.fromkeys(_CITATION.findall(answer.raw)))


def judge(q: Question, answer: Answer, corpus: TemplateCorpus, stats: KindStats) -> None:
    """Add ``answer`` to ``q``'s kind's counts."""
    stats.questions += 1
    refused = is_refusal(answer.raw)
    stats.refused += refused
    cited = _cited(answer)
    if q.expect is not None and cited[:1] == [q.expect]:
        stats.first_right += 1
    elif q.kind in PRECISE:
        stats.wrong_first.append(q.text)
    if q.kind in PRECISE:
        others = {corpus.subject_of.get(f) for f in cited} - {q.subject, None}
        foreign = {fig for s in {c.name for c in corpus.clients} | {p.name for p in corpus.people} if s != q.subject
                   for fig in corpus.figures_of(s) if fig in answer.raw and fig not in corpus.figures_of(q.subject)}
        if others or foreign:
            stats.other_figures.append(q.text)
    old_at = answer.raw.find(q.superseded_figure) if q.superseded_figure else -1
    if old_at >= 0:  # the replaced version is quoted (told apart by its figure: both may bear one name)
        stats.superseded_quoted += 1
        now_at = answer.raw.find(q.figure)
        label = answer.raw.rfind("**Version antérieure (remplacée)**", 0, old_at)
        if 0 <= now_at < label < old_at:
            stats.superseded_labelled += 1
        if now_at < 0 or old_at < now_at:
            stats.superseded_first += 1
    for g in answer.versions:
        if len({corpus.subject_of.get(d) for d in g.documents}) > 1:
            stats.versions_wrong.append(q.text)
    if q.kind == "list" and answer.listing is not None:
        names = {d.filename for d in answer.listing.documents}
        contracts = sum(1 for c in corpus.clients if c.filename in names)
        stats.listed = (f"{contracts} of {len(corpus.clients)} contracts ({answer.listing.matched} documents, "
                        f"{answer.listing.searched} passages)")


def evaluate(rt: Runtime, corpus: TemplateCorpus, questions: list[Question] | None = None) -> dict[str, KindStats]:
    """Ask every question as alice (extractive) and count per kind."""
    service = AnswerService(rt.retriever, rt.store, rt.directory, rt.settings)
    out: dict[str, KindStats] = {}
    for q in questions if questions is not None else corpus.questions():
        answer = service.ask(q.text, "alice")
        judge(q, answer, corpus, out.setdefault(q.kind, KindStats(q.kind)))
    return out


__all__ = ["PRECISE", "TARGETS", "KindStats", "evaluate", "judge", "synced"]
