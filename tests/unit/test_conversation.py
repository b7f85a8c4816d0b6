"""Follow-ups resolved from the earlier user questions (the deterministic rule, the condense prompt
against a scripted OpenAI-compatible server on 127.0.0.1, Open WebUI's regenerate labels), and
versions of one document told apart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.axonix_context import context
from support.httpserver import ScriptedServer

from ancre.query.conversation import (
    REGENERATE_PROMPTS,
    ConversationResolver,
    Instruction,
    ResolutionMethod,
    looks_like_follow_up,
)
from ancre.query.llm import ExtractiveAnswerer, OpenAIChat
from ancre.query.versions import NEAR_IDENTICAL, Versioned, name_key, similarity, title_key, version_groups

Q_BAUMONT = "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec Baumont Industries ?"
SEED = [Q_BAUMONT, "Fais pareil pour l'étude Rochat", "Et quelle est sa durée ?", "Compare les deux contrats"]
"""The seed's four-turn conversation (§8.2)."""
R = "03_Contrat_Maintenance_Etude_Rochat.docx"
R24 = "03_Contrat_Maintenance_Etude_Rochat_v2024.docx"
B = "21_Contrat_Maintenance_Baumont_Industries.docx"


def _run(questions: list[str], resolver: ConversationResolver | None = None) -> list[tuple[str, str]]:
    r = resolver or ConversationResolver()
    out = []
    for i, q in enumerate(questions):
        res = r.resolve(q, questions[:i])
        out.append((str(res.method), res.question))
    return out


def test_the_seed_sequence_is_resolved_by_the_rule() -> None:
    assert _run(SEED) == [
        ("autonome", Q_BAUMONT),
        ("regle", "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec l'étude Rochat ?"),
        ("regle", "Quelle est la durée du contrat de maintenance d'Axonix SA avec l'étude Rochat ?"),
        ("regle", "Compare les deux contrats : Baumont Industries et l'étude Rochat"),
    ]


@pytest.mark.parametrize(("history", "question", "resolved"), [
    (["Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"], "Et pour Baumont Industries ?",
     "Quel est le forfait mensuel du contrat de maintenance de Baumont Industries ?"),
    (["Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"], "Quelle est la durée du contrat ?",
     "Quelle est la durée du contrat de maintenance de l'étude Rochat ?"),
    (["Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"], "Et son préavis de résiliation ?",
     "Le préavis de résiliation du contrat de maintenance de l'étude Rochat ?"),
    (["Quel est le temps d'intervention garanti pour Baumont Industries ?"], "Est-il reconductible ?",
     "Est-il reconductible ? (à propos de Baumont Industries)"),
    (["Quel est le chiffrage de la migration Azure pour Sarrasin Fiduciaire ?"], "Combien de machines virtuelles ?",
     "Combien de machines virtuelles de la migration Azure pour Sarrasin Fiduciaire ?"),
])
def test_follow_ups_by_the_rule(history: list[str], question: str, resolved: str) -> None:
    res = ConversationResolver().resolve(question, history)
    assert (res.method, res.question) == (ResolutionMethod.RULE, resolved)
    assert res.shown() == f"Question traitée : {resolved}"


@pytest.mark.parametrize("question", [
    "Quel VPN faut-il utiliser en télétravail ?", "Dans quel délai faut-il signaler un incident de sécurité ?",
    "Quelle est la capitale de l'Australie ?", "Quel est le délai pour changer son mot de passe ?",
    "Combien gagne un technicien par an ?",
])
def test_standalone_questions_are_answered_as_asked(question: str) -> None:
    assert not looks_like_follow_up(question)
    res = ConversationResolver().resolve(question, [Q_BAUMONT])
    assert (res.method, res.question, res.shown()) == (ResolutionMethod.STANDALONE, question, "")


def test_an_unresolvable_follow_up_is_answered_as_asked() -> None:
    res = ConversationResolver().resolve("Et sa durée ?", ["Bonjour"])
    assert (res.method, res.question) == (ResolutionMethod.UNRESOLVED, "Et sa durée ?")
    assert ConversationResolver().resolve("Et sa durée ?", []).method is ResolutionMethod.STANDALONE


@pytest.mark.parametrize(("label", "instruction"), [*REGENERATE_PROMPTS.items(), ("Plus concis", Instruction.CONCISE),
                                                    ("Add Details", Instruction.DETAILS)])
def test_open_webui_regenerate_labels_are_instructions_on_the_previous_answer(label: str, instruction: Instruction) -> None:
    history = [Q_BAUMONT, "Fais pareil pour l'étude Rochat"]
    res = ConversationResolver().resolve(label, history)
    assert res.method is ResolutionMethod.REGENERATION and res.instruction is instruction
    assert res.question == "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec l'étude Rochat ?"
    assert res.shown().startswith("Question traitée : Quelles sont") and res.shown().endswith(")")


# ----------------------------------------------------------------------------- the condense prompt


@pytest.fixture
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def _openai(content: str) -> dict:
    """An OpenAI "Create chat completion" response body (API reference, the response object)."""
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}


def test_the_condense_prompt_gets_the_user_questions_only(srv: ScriptedServer) -> None:
    srv.route("POST", "/v1/chat/completions", (200, _openai("Quelle est la durée du contrat de l'étude Rochat ?")))
    resolver = ConversationResolver(OpenAIChat(srv.url, "m"))
    res = resolver.resolve("Et quelle est sa durée ?", [Q_BAUMONT, "Fais pareil pour l'étude Rochat"])
    assert (res.method, res.question) == (ResolutionMethod.MODEL, "Quelle est la durée du contrat de l'étude Rochat ?")
    (req,) = srv.requests
    sent = "\n".join(m["content"] for m in req.json["messages"])
    assert Q_BAUMONT in sent and "Fais pareil pour l'étude Rochat" in sent and req.json["temperature"] == 0.0
    assert [m["role"] for m in req.json["messages"]] == ["system", "user"]


def test_a_condensed_question_that_brings_a_new_subject_is_not_used(srv: ScriptedServer) -> None:
    srv.route("POST", "/v1/chat/completions", (200, _openai("Quelle est la durée du contrat de Dupont Logistique SA ?")))
    res = ConversationResolver(OpenAIChat(srv.url, "m")).resolve("Et quelle est sa durée ?", SEED[:2])
    assert res.method is ResolutionMethod.RULE and "Rochat" in res.question and "Dupont" not in res.question


def test_a_failing_condense_model_falls_back_to_the_rule(srv: ScriptedServer) -> None:
    srv.route("POST", "/v1/chat/completions", (500, {"error": {"message": "down"}}))
    res = ConversationResolver(OpenAIChat(srv.url, "m")).resolve("Et quelle est sa durée ?", SEED[:2])
    assert res.method is ResolutionMethod.RULE


def test_a_standalone_question_calls_no_model(srv: ScriptedServer) -> None:
    res = ConversationResolver(OpenAIChat(srv.url, "m")).resolve("Quel VPN faut-il utiliser en télétravail ?", SEED)
    assert res.method is ResolutionMethod.STANDALONE and srv.requests == []


# ----------------------------------------------------------------------------- versions


def test_version_names_and_titles() -> None:
    assert name_key(R) == name_key(R24) == name_key("Copie de 03_Contrat_Maintenance_Etude_Rochat (2).docx")
    assert name_key("contrat_01.md") != name_key("contrat_02.md")  # a bare number is not a version
    assert name_key("Grille_Salariale_2026.docx") == name_key("Grille_Salariale_2025.docx")
    assert title_key("Contrat de maintenance — Étude Rochat (version 2024, remplacée)") == title_key(
        "Contrat de maintenance — Étude Rochat")


def test_the_current_contract_is_told_apart_from_the_archived_one() -> None:
    ctx = context(R24, B, R)
    (g,) = ctx.versions
    assert g.documents == (R, R24) and g.current == R
    assert any("remplacée" in r for r in g.reasons) and any("ARCHIVES" in r for r in g.reasons)
    assert any("2026" in r for r in g.reasons)


def test_two_contracts_from_one_template_are_not_versions() -> None:
    assert context(R, B).versions == ()
    # their « Durée » and « Conditions financières » sections alone are near-identical (names and
    # figures apart): Baumont's contract is still no version of Rochat's
    durations = context(R, B, R24, chunks={R: range(5, 6), B: range(4, 6), R24: range(4, 5)})
    (g,) = durations.versions
    assert g.documents == (R, R24) and g.current == R


def test_near_identical_text_without_titles_is_a_version_unless_the_names_say_otherwise() -> None:
    text = ("Le contrat prend effet le 1er janvier 2026 pour une durée de vingt-quatre mois. Il est reconductible "
            "tacitement par périodes de douze mois, sauf résiliation moyennant un préavis de trois mois. "
            "L'étude Rochat règle le forfait mensuel à terme échu, payable à 30 jours.")
    older = text.replace("2026", "2024").replace("vingt-quatre", "trente-six")
    renamed = [Versioned("Contrat Rochat signé.docx", "DIRECTION/Contrat Rochat signé.docx", "", "", text),
               Versioned("Rochat maintenance.docx", "ARCHIVES/Rochat maintenance.docx", "", "", older)]
    (g,) = version_groups(renamed)
    assert g.related_by == "texte" and g.current == "Contrat Rochat signé.docx"
    sibling = Versioned("Contrat Baumont.docx", "CLIENTS/Contrat Baumont.docx", "", "", text.replace("L'étude Rochat", "Baumont"))
    assert similarity(text, sibling.text) >= NEAR_IDENTICAL  # near-identical, yet:
    assert version_groups([renamed[0], sibling]) == ()  # each names a client the other never writes


def test_the_extractive_answer_puts_the_current_version_first_and_labels_the_other() -> None:
    ctx = context(R24, R, B)
    text = ExtractiveAnswerer().answer(ctx, "Quelle est la durée du contrat de l'étude Rochat ?")
    assert "Deux versions du même document" in text and "semble la version en vigueur" in text
    assert text.index("vingt-quatre mois") < text.index("trente-six mois")  # current first
    assert text.index("**Version en vigueur (probable)**") < text.index(f"[{R}]")
    assert text.index("**Version antérieure (remplacée)**") < text.index(f"[{R24}]")


def test_the_modification_time_breaks_a_tie_only() -> None:
    text = "L'offre couvre la migration de quatorze machines virtuelles vers Azure pour le cabinet Sarrasin."
    day = 86_400.0

    def pair(new: float, old: float, old_path: str = "OFFRES/Copie de Offre_Sarrasin.docx") -> tuple:
        return (Versioned("Offre_Sarrasin.docx", "OFFRES/Offre_Sarrasin.docx", "", "", text, new),
                Versioned(old_path.rsplit("/", 1)[-1], old_path, "", "", text + " Brouillon.", old))

    # nothing else tells them apart: the file modified a month later looks current, and says why
    (g,) = version_groups(pair(1_767_225_600.0, 1_767_225_600.0 - 30 * day)[::-1])
    assert g.current == "Offre_Sarrasin.docx" and g.documents[0] == "Offre_Sarrasin.docx"
    assert g.reasons == ("modifié le plus récemment : Offre_Sarrasin.docx (01.01.2026)",)
    # files copied together (seconds apart) or a time not known: no clue, no current version named
    assert version_groups(pair(1_767_225_600.0, 1_767_225_590.0))[0].current is None
    assert version_groups(pair(1_767_225_600.0, 0.0))[0].current is None
    # the weakest clue: an archived file touched later is still the older version
    (g,) = version_groups(pair(1_767_225_600.0 - 30 * day, 1_767_225_600.0, "ARCHIVES/Copie de Offre_Sarrasin.docx"))
    assert g.current == "Offre_Sarrasin.docx" and not any("modifié" in r for r in g.reasons)
