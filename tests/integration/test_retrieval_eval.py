"""The retrieval evaluation (``examples/axonix/eval.json``, 50+ French questions by
five users, refusals included) on the real synced corpus, asserting the targets for hybrid
retrieval with the extractive ``ask``: recall@3 ≥ 0.95, no false answer, no false refusal. The
same evaluation prints the vector-only / BM25-only / hybrid table in ``make bench`` (``--only
eval``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from support.evaluation import TARGETS, evaluate, load_questions, synced_runtime

from ancre.app.runtime import Runtime

QUESTIONS = load_questions()


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    runtime = synced_runtime(tmp_path_factory.mktemp("eval"))
    yield runtime
    runtime.close()


def test_the_evaluation_set_is_what_the_issue_asks() -> None:
    kinds = {q.kind for q in QUESTIONS}
    assert len(QUESTIONS) >= 40
    assert {"code", "paraphrase", "no-accent", "refusal", "conversation", "version", "broad"} <= kinds
    assert sum(q.kind == "conversation" for q in QUESTIONS) >= 10 and any(len(q.turns) >= 3 for q in QUESTIONS)
    assert len({q.user for q in QUESTIONS}) >= 5
    narrow = {"david", "emma"}  # each reads one department and the documentation
    assert any(q.user in narrow and q.expect for q in QUESTIONS)
    assert any(q.user in narrow and not q.expect for q in QUESTIONS)


def test_hybrid_meets_the_targets(rt: Runtime) -> None:
    (hybrid,) = evaluate(rt, QUESTIONS, modes=("hybrid",))
    failing = {q.id: (q.user, q.text) for q in QUESTIONS}
    assert hybrid.recall_at_3 >= TARGETS["recall_at_3"], [failing[i] for i in hybrid.misses_at_3]
    assert hybrid.false_answers == [], [failing[i] for i in hybrid.false_answers]
    assert hybrid.false_refusals == [], [failing[i] for i in hybrid.false_refusals]


def test_conversations_versions_and_broad_questions_meet_the_targets(rt: Runtime) -> None:
    """Per kind: every follow-up resolved, recall@3 = 1 for every kind, no false answer nor false
    refusal, every version conflict announced (the current contract quoted first) and none
    announced between documents that are not versions."""
    (hybrid,) = evaluate(rt, [q for q in QUESTIONS if q.kind in ("conversation", "version", "broad")], modes=("hybrid",))
    kinds = {k: r.row() for k, r in hybrid.per_kind.items()}
    assert set(kinds) == {"conversation", "version", "broad"}
    assert kinds["conversation"]["resolved_accuracy"] == 1.0, kinds["conversation"]["ids"]
    for kind, row in kinds.items():
        assert row["recall_at_3"] == 1.0 and row["false_answers"] == 0 and row["false_refusals"] == 0, (kind, row)
        assert row["false_conflicts"] == 0, (kind, row)  # no other document labelled a version
    assert kinds["version"]["conflicts_announced"] == "5/5", kinds["version"]["ids"]


def test_the_issue_example_is_answered_from_the_offer(rt: Runtime) -> None:
    from ancre.query.answer import AnswerService
    from ancre.query.grounding import is_refusal

    service = AnswerService(rt.retriever, rt.store, rt.directory, rt.settings)
    q = "A combien est estimée la consommation Azure mensuelle de Sarrasin ?"
    for user in ("alice", "david"):
        answer = service.ask(q, user)
        assert not is_refusal(answer.raw), (user, answer.raw)
        assert answer.sources[0].filename == "04_Reponse_AO_Migration_Azure_Sarrasin.docx"
        assert "CHF 2 350 HT" in answer.raw
    assert is_refusal(service.ask(q, "bruno").raw), "bruno may not read COMMERCIAL"


def test_the_extractive_answer_tells_the_two_rochat_contracts_apart(rt: Runtime) -> None:
    """« Quelle est la durée du contrat Rochat ? » (the current contract: 24 months; the archived
    « version 2024, remplacée »: 36): a note names both files with their folders and the one that
    looks current, whose passage comes first; the other is labelled; Baumont's contract, shown
    too, is labelled nothing."""
    from ancre.query.answer import AnswerService

    current, older = "03_Contrat_Maintenance_Etude_Rochat.docx", "03_Contrat_Maintenance_Etude_Rochat_v2024.docx"
    raw = AnswerService(rt.retriever, rt.store, rt.directory, rt.settings).ask("Quelle est la durée du contrat Rochat ?", "alice").raw
    assert f"Deux versions du même document : {current} (`\\\\SRV-FICHIERS\\Partage\\DIRECTION\\`) semble la version en vigueur" in raw
    assert f"{older} (`\\\\SRV-FICHIERS\\Partage\\ARCHIVES\\`) est une version antérieure" in raw
    assert raw.index("vingt-quatre mois") < raw.index("trente-six mois")
    labelled = re.findall(r"\*\*(Version [^*]+)\*\* :\n\n(?:>.*\n)+\n\[([^\]]+)\]", raw)
    assert labelled and all(doc == (current if label.startswith("Version en vigueur") else older) for label, doc in labelled)
    assert {doc for _, doc in labelled} == {current, older}
