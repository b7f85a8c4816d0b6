"""Issue 12: the extractive gate. Named terms and rare terms (by the snapshot's document
frequencies) decide whether a document is on topic; common words never make it refuse; a
question nothing anchors is refused when its words are unknown to the index."""

from __future__ import annotations

from ancre.index.bm25 import Bm25Entry, Bm25Index
from ancre.query.context import Context, Extract
from ancre.query.llm import ExtractiveAnswerer
from ancre.query.prompt import REFUSAL
from ancre.query.relevance import question_terms

OFFER = (
    "Le chiffrage total de la migration s'élève à CHF 44 800 HT pour 28 jours-homme, hors coût de "
    "consommation Azure estimé à CHF 2 350 HT par mois."
)
CONTRACT = "Le forfait mensuel s'élève à CHF 4 200 HT. Il est facturé mensuellement. Registre des accès."
NOTE = "Le code d'accès temporaire de la salle serveur de Baumont Industries est 4471-ZETA."
FILLER = "Les postes Windows reçoivent les correctifs de sécurité du serveur chaque mois."


def _snapshot() -> Bm25Index:
    entries = [
        Bm25Entry("o", "documents", OFFER, "04_Reponse_AO_Migration_Azure_Sarrasin.docx"),
        Bm25Entry("c", "documents", CONTRACT, "21_Contrat_Maintenance_Baumont_Industries.docx"),
        Bm25Entry("r", "documents", "Forfait mensuel de l'étude Rochat : CHF 3 840 HT.", "03_Rochat.docx"),
        Bm25Entry("n", "documents", NOTE, "test-deny-explicite.docx"),
    ]
    entries += [
        Bm25Entry(f"f{i}", "documents", f"{FILLER} {'Rapport mensuel.' if i % 50 == 0 else ''} {i}", "notes.md")
        for i in range(300)
    ]
    return Bm25Index.build(entries)


def _context(*docs: tuple[str, str]) -> Context:
    return Context(
        tuple(
            Extract(name, name, 0, text, "\\\\SRV\\Partage\\X\\", f"X/{name}", "documents", 0.03 - i / 1000)
            for i, (name, text) in enumerate(docs)
        )
    )


def test_common_words_are_not_required_rare_ones_are() -> None:
    stats = _snapshot().term_stats
    terms = question_terms("A combien est estimée la consommation Azure mensuelle de Sarrasin ?", stats)
    assert terms.distinctive == ("azure", "sarrasin")
    assert {"consomm", "estim"} <= terms.rare and "mensuel" not in terms.rare  # in 8 chunks of 304
    terms = question_terms("Combien gagne un technicien par an ?", stats)
    assert {"gagn", "technicien"} <= terms.unknown and not terms.anchored


def test_the_issue_example_is_answered() -> None:
    ctx = _context(("04_Reponse_AO_Migration_Azure_Sarrasin.docx", OFFER))
    q = "A combien est estimée la consommation Azure mensuelle de Sarrasin ?"
    answer = ExtractiveAnswerer().answer(ctx, q, _snapshot().term_stats)
    assert answer != REFUSAL and "CHF 2 350 HT" in answer
    assert ExtractiveAnswerer().answer(ctx, q.replace("Sarrasin", "Dupont"), _snapshot().term_stats) == REFUSAL


def test_missing_rare_terms_refuse() -> None:
    """chloe may read the contract, not the note: « code » and « salle » are rare and absent."""
    ctx = _context(("21_Contrat_Maintenance_Baumont_Industries.docx", CONTRACT))
    q = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"
    assert ExtractiveAnswerer().answer(ctx, q, _snapshot().term_stats) == REFUSAL
    ctx = _context(("test-deny-explicite.docx", NOTE), ("21_Contrat_Maintenance_Baumont_Industries.docx", CONTRACT))
    assert "4471-ZETA" in ExtractiveAnswerer().answer(ctx, q, _snapshot().term_stats)


def test_unanchored_question_with_unknown_words_is_refused() -> None:
    ctx = _context(("21_Contrat_Maintenance_Baumont_Industries.docx", CONTRACT))
    stats = _snapshot().term_stats
    assert ExtractiveAnswerer().answer(ctx, "Quelle est la durée du congé maternité ?", stats) == REFUSAL
    assert ExtractiveAnswerer().answer(ctx, "Quel est le forfait mensuel ?", stats) != REFUSAL
