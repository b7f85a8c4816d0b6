"""Follow-ups never invent a subject (issue 41): the rule replaces the entity the previous question
asks about (not the counterparty of « signé avec »), handles « Et X ? », « Même chose (mais) pour
X », « Pareil pour X » in any case; a model's condensed question — from a scripted Ollama on
127.0.0.1 (``/api/chat`` shapes of the Ollama API reference, :mod:`support.scripted_ollama`) — is
used only when every word of it is the user's and it keeps the words the new question brings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.httpserver import ScriptedServer
from support.scripted_ollama import ANSWER_MODEL, chats, script

from ancre.query.conversation import ConversationResolver, ResolutionMethod, looks_like_follow_up
from ancre.query.llm import OllamaChat

FAVRE = "Quel est le forfait mensuel de l'Étude Favre selon le contrat signé avec Axonix SA ?"
DUBUIS = "Quel est le forfait mensuel du Garage Dubuis selon le contrat signé avec Axonix SA ?"


@pytest.mark.parametrize("follow_up", [
    "Fais pareil pour le Garage Dubuis", "Et le Garage Dubuis ?", "Et pour le Garage Dubuis ?",
    "Même chose pour le Garage Dubuis", "Même chose mais pour le Garage Dubuis", "Même chose, mais pour le Garage Dubuis",
    "Pareil pour le Garage Dubuis", "et le Garage Dubuis ?",
])
def test_the_rule_replaces_the_asked_client_not_the_counterparty(follow_up: str) -> None:
    res = ConversationResolver().resolve(follow_up, [FAVRE])
    assert (res.method, res.question) == (ResolutionMethod.RULE, DUBUIS)


def test_a_lower_case_client_and_a_name_alone() -> None:
    r = ConversationResolver()
    assert r.resolve("et le garage dubuis ?", [FAVRE]).question == (
        "Quel est le forfait mensuel du garage dubuis selon le contrat signé avec Axonix SA ?")
    assert r.resolve("Et Rochat ?", [FAVRE]).question == (
        "Quel est le forfait mensuel de Rochat selon le contrat signé avec Axonix SA ?")
    # the contract's other party is replaced when it is the one asked about
    baumont = "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec Baumont Industries ?"
    assert r.resolve("Et l'étude Rochat ?", [baumont]).question == (
        "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec l'étude Rochat ?")


def test_a_topic_after_et_is_no_subject() -> None:
    assert looks_like_follow_up("Et la consommation Azure par mois ?")
    res = ConversationResolver().resolve("Et sa durée ?", [FAVRE])
    assert res.method is ResolutionMethod.RULE and "Étude Favre" in res.question and "durée" in res.question


@pytest.fixture
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def _resolver(srv: ScriptedServer, condensed: str) -> ConversationResolver:
    script(srv, condensed)
    return ConversationResolver(OllamaChat(srv.url, ANSWER_MODEL))


def test_a_condensed_question_turning_a_missing_client_into_its_lookalike_is_rejected(srv: ScriptedServer) -> None:
    """The issue's case: asked about the Fiduciaire Dubuis, then « Et la Fiduciaire Dubuy ? » — the
    model's « … de la Fiduciaire Dubuis ? » uses only the user's words but drops the one the user
    just typed: the rule's question is answered."""
    history = ["Quel est le forfait mensuel de la Fiduciaire Dubuis ?"]
    res = _resolver(srv, "Quel est le forfait mensuel de la Fiduciaire Dubuis ?").resolve("Et la Fiduciaire Dubuy ?", history)
    assert len(chats(srv)) == 1
    assert (res.method, res.question) == (ResolutionMethod.RULE, "Quel est le forfait mensuel de la Fiduciaire Dubuy ?")


def test_a_condensed_question_with_a_name_the_user_never_wrote_is_rejected_in_any_case(srv: ScriptedServer) -> None:
    for condensed in ("Quel est le forfait mensuel du Garage Dubois selon le contrat signé avec Axonix SA ?",
                      "quel est le forfait mensuel du garage dubois selon le contrat signé avec axonix sa ?"):
        srv.clear()
        res = _resolver(srv, condensed).resolve("Fais pareil pour le Garage Dubuis", [FAVRE])
        assert (res.method, res.question) == (ResolutionMethod.RULE, DUBUIS), condensed


def test_a_faithful_condensed_question_is_used(srv: ScriptedServer) -> None:
    condensed = "Quel est le forfait mensuel du garage Dubuis selon le contrat signé avec Axonix SA ?"
    res = _resolver(srv, condensed).resolve("Fais pareil pour le Garage Dubuis", [FAVRE])
    assert (res.method, res.question) == (ResolutionMethod.MODEL, condensed)
    sent = chats(srv)[0].json["messages"][1]["content"]
    assert FAVRE in sent and "Fais pareil pour le Garage Dubuis" in sent
