"""The extractive gate. Named terms and rare terms (by the snapshot's document
frequencies) decide whether a document is on topic; common words never make it refuse; a
question nothing anchors is refused when its words are unknown to the index; rare terms anchor it
only when they weigh enough against its unknown ones, by the asking user's counts alone."""

from __future__ import annotations

import pytest

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


def _stats(n: int, df: dict[str, int]):
    """A user's document frequencies: ``n`` readable chunks, ``df`` the counts given (0 elsewhere)."""
    return lambda terms: (n, {t: df.get(t, 0) for t in terms})


# (who, question, readable chunks, their counts, anchored): the eval's per-user counts, measured
ANCHOR_CASES = [
    # one rare term, the rest unknown to a user who reads little: not anchored
    ("chloe", "Quelle est la durée du congé maternité ?", 199, {"dur": 1}, False),
    ("david", "quel est le code d'acces de la salle serveur", 196, {"acce": 2, "serveur": 33}, False),
    ("david, store counts capped", "quel est le code d'acces de la salle serveur", 196, {"acce": 2, "serveur": 4}, False),
    ("a user reading 20 000 chunks", "Quelle est la durée du congé maternité ?", 20_000, {"dur": 1}, False),
    # the rare terms weigh enough against the unknown ones: anchored
    ("emma", "Combien gagne un technicien par an ?", 192, {"technicien": 1}, True),
    ("chloe", "Peut-on travailler depuis chez soi avec son ordinateur personnel ?", 199, {"depuis": 1, "personnel": 2}, True),
    ("bruno", "À quelle fréquence teste-t-on la restauration des sauvegardes ?", 200,
     {"test": 2, "restaur": 1, "sauvegard": 3}, True),
    ("david", "duree du planning de bascule et retour arriere", 196,
     {"planning": 1, "bascul": 2, "retour": 2, "arrier": 1}, True),
    ("emma", "Quel est le salaire annuel brut d'un ingénieur système ?", 192,
     {"salair": 1, "annuel": 1, "brut": 2, "ingenieur": 1, "system": 3}, True),
    # a named term anchors whatever the counts
    ("chloe", "Quel est le code d'accès de la salle serveur de Baumont Industries ?", 199, {"acce": 3, "serveur": 4}, True),
    # nothing rare: not anchored (answered only when every word is known)
    ("alice", "Quelle est la durée du congé maternité ?", 228, {"dur": 4}, False),
]


@pytest.mark.parametrize(("who", "question", "n", "df", "anchored"), ANCHOR_CASES)
def test_one_rare_term_does_not_anchor_a_question_of_unknown_words(
    who: str, question: str, n: int, df: dict[str, int], anchored: bool
) -> None:
    terms = question_terms(question, _stats(n, df))
    assert terms.anchored is anchored, (who, question, sorted(terms.rare), sorted(terms.unknown), terms.rare_share)


DUREE = ("5. Durée\nLe contrat prend effet le 1er mars 2025 pour une durée de trente-six mois. "
         "Il est reconductible tacitement par périodes de douze mois.")
GRID = "Grille salariale 2026\nFonction | Salaire annuel brut\nTechnicien | CHF 78 000\nIngénieur système | CHF 104 000"
LEAVE = "Congé maternité : seize semaines à plein salaire, dès la naissance."
STAG, RH = "S-1-5-21-1-1-1-1101", "S-1-5-21-1-1-1-1102"


def _company(*extra: Bm25Entry) -> Bm25Index:
    """A contract and 198 policy chunks everybody reads; the salary grid and ``extra`` for RH only."""
    both = (STAG, RH)
    entries = [Bm25Entry("d", "documents", DUREE, "21_Contrat_Maintenance_Baumont_Industries.docx", both)]
    entries += [Bm25Entry(f"p{i}", "documentation", f"{FILLER} Règle {i}.", "Politique.pdf", both) for i in range(198)]
    entries += [Bm25Entry("g", "documents", GRID, "Grille_Salariale_2026.docx", (RH,)), *extra]
    return Bm25Index.build(entries)


def test_a_trainee_gets_no_contract_duration_for_a_leave_question() -> None:
    """For a user reading 199 chunks « durée » is rare (in one): it does not anchor « la durée du
    congé maternité », whose other words are in nothing he reads — refused, not the contract's
    « Durée »; and documents he can't read change nothing, whatever they hold."""
    ctx = _context(("21_Contrat_Maintenance_Baumont_Industries.docx", DUREE))
    q = "Quelle est la durée du congé maternité ?"
    for idx in (_company(), _company(Bm25Entry("l", "documents", LEAVE, "Conges.docx", (RH,)))):
        stats = lambda terms, idx=idx: idx.term_stats(terms, frozenset({STAG}))  # noqa: E731 - a one-line helper bound to idx
        assert stats(["dur", "cong"]) == (199, {"dur": 1, "cong": 0})
        assert ExtractiveAnswerer().answer(ctx, q, stats) == REFUSAL
    hr = _company(Bm25Entry("l", "documents", LEAVE, "Conges.docx", (RH,)))
    answer = ExtractiveAnswerer().answer(_context(("Conges.docx", LEAVE)), q, lambda t: hr.term_stats(t, frozenset({RH})))
    assert "seize semaines" in answer
    grid = _context(("Grille_Salariale_2026.docx", GRID))
    answer = ExtractiveAnswerer().answer(grid, "Combien gagne un technicien par an ?", lambda t: hr.term_stats(t, frozenset({RH})))
    assert "CHF 78 000" in answer
