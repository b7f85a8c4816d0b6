"""Answers that can be trusted in a conversation, end to end through the API served by uvicorn on
127.0.0.1 over the REAL synced Axonix corpus, with a scripted OpenAI-compatible model server on
127.0.0.1 (``POST /v1/chat/completions``, response shapes of the OpenAI API reference "Create chat
completion"), driven with the official ``openai`` SDK and httpx:

- an invented figure under a real citation is flagged by control 5 (``fait_non_source``), named in
  the warning line of ``/v1``, listed in the ``ancre`` object and the audit; ``/query`` answers 422;
- a follow-up is resolved by the condense prompt from the earlier *user* questions only, shown as
  « Question traitée : … », and both forms are audited;
- Open WebUI's « Plus concis » regenerates the previous question with the instruction;
- two versions of one contract among the sources are announced: the prompt tells the model which
  looks current, ``/v1`` adds a note naming both files with their folders, the audit records it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.corpus import copy_corpus, write_config
from support.httpserver import Request, ScriptedServer, sse
from support.model_servers import chatml, tokens

from ancre.api.app import create_app
from ancre.app.runtime import Runtime
from ancre.app.server import ApiServer
from ancre.config import Settings, load_settings
from ancre.query.prompt import SYSTEM_PROMPT

KEY = "test-service-key-0123456789"
ROCHAT = "03_Contrat_Maintenance_Etude_Rochat.docx"
ROCHAT_2024 = "03_Contrat_Maintenance_Etude_Rochat_v2024.docx"
BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
Q_ROCHAT = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"
Q_BAUMONT = "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec Baumont Industries ?"
A_BAUMONT = f"Le forfait mensuel s'élève à CHF 4 200 HT [{BAUMONT}]."
RESOLVED = "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec l'étude Rochat ?"
INVENTED = f"Forfait mensuel : CHF 3 000 HT [{ROCHAT}]. Le pare-feu pfSense est inclus [{ROCHAT}]."
FAITHFUL = f"Le forfait mensuel s'élève à CHF 3 840 HT [{ROCHAT}] pour 20 postes Windows 11 Pro [{ROCHAT}]."
WHO = {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": "alice.martin@axonix.ch"}


def _completion(content: str, req: Request) -> dict[str, Any]:
    """An OpenAI chat completion object (API reference, "The chat completion object"), its
    ``usage`` counting the whole prompt (tests/support/model_servers.py's tokens)."""
    prompt, answer = len(tokens(chatml(req.json["messages"]))), len(tokens(content))
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer}}


@dataclass
class Model:
    """What the scripted model answers: ``answer`` to the answer prompt, ``condensed`` to any other
    (the condense prompt)."""

    answer: str = FAITHFUL
    condensed: str = RESOLVED

    def __call__(self, req: Request) -> Any:
        system = req.json["messages"][0]["content"]
        content = self.answer if system == SYSTEM_PROMPT else self.condensed
        if req.json.get("stream"):  # chat completion chunks (API reference, "The chat completion chunk object")
            return sse({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                        "choices": [{"index": 0, "delta": {"content": content[i : i + 9]}, "finish_reason": None}]}
                       for i in range(0, len(content), 9))
        return 200, _completion(content, req)


@dataclass
class Served:
    settings: Settings
    url: str
    model: Model

    def audit(self) -> list[dict[str, Any]]:
        d = Path(self.settings.data_dir) / "audit"
        return [json.loads(line) for f in sorted(d.glob("audit-*.jsonl")) for line in f.read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, srv: ScriptedServer) -> Iterator[Served]:
    root = copy_corpus(tmp_path_factory.mktemp("trusted"))
    settings = load_settings(
        write_config(root), llm={"kind": "openai", "url": srv.url, "model": "m"}, judge={"enabled": False},
        api={"api_key": KEY},
    )
    rt = Runtime(settings)
    for conn in rt.connectors():
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.failed == 0, rep
    server = ApiServer(create_app(rt.query_core, settings, not_ready=rt.index_not_ready)).start()
    model = Model()
    srv.route("POST", "/v1/chat/completions", model)
    try:
        yield Served(settings, server.url, model)
    finally:
        server.stop()
        rt.close()


@pytest.fixture(autouse=True)
def _fresh(served: Served, srv: ScriptedServer) -> None:
    srv.clear()
    srv.route("POST", "/v1/chat/completions", served.model)
    served.model.answer, served.model.condensed = FAITHFUL, RESOLVED


def _answer_requests(srv: ScriptedServer) -> list[Request]:
    return [r for r in srv.requests_to("/v1/chat/completions", "POST") if r.json["messages"][0]["content"] == SYSTEM_PROMPT]


def _condense_requests(srv: ScriptedServer) -> list[Request]:
    return [r for r in srv.requests_to("/v1/chat/completions", "POST") if r.json["messages"][0]["content"] != SYSTEM_PROMPT]


def test_an_invented_figure_is_flagged_named_and_blocked(served: Served, srv: ScriptedServer) -> None:
    served.model.answer = INVENTED
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=KEY, default_headers={"X-OpenWebUI-User-Email": WHO["X-OpenWebUI-User-Email"]})
    raw = client.chat.completions.with_raw_response.create(model="ancre", messages=[{"role": "user", "content": Q_ROCHAT}])
    body = json.loads(raw.text)
    content = body["choices"][0]["message"]["content"]
    assert raw.headers["x-ancre-ancree"] == "false"
    assert "fait_non_source" in body["ancre"]["controles"]
    assert {f["texte"] for f in body["ancre"]["faits_non_sources"]} == {"CHF 3 000 HT", "pfSense"}
    warning = content.rsplit("\n", 1)[-1]
    assert warning.startswith("⚠️ Attention") and "« CHF 3 000 HT »" in warning and "« pfSense »" in warning

    # streamed: the same warning on the last content chunk
    with httpx.stream("POST", f"{served.url}/v1/chat/completions", headers=WHO, timeout=60,
                      json={"model": "ancre", "stream": True, "messages": [{"role": "user", "content": Q_ROCHAT}]}) as s:
        events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: {")]
    text = "".join((e["choices"] or [{}])[0].get("delta", {}).get("content") or "" for e in events)  # source events: no choice
    assert "« CHF 3 000 HT »" in text and events[-1]["ancre"]["ancree"] is False

    r = httpx.post(f"{served.url}/query", json={"question": Q_ROCHAT}, headers=WHO, timeout=60)
    assert r.status_code == 422 and "reponse" not in r.json()
    assert "fait_non_source" in r.json()["controles"]
    assert [f["texte"] for f in r.json()["faits_non_sources"]] == ["CHF 3 000 HT", "pfSense"]
    assert r.json()["faits_non_sources"][0]["documents"] == [ROCHAT]

    line = served.audit()[-1]
    assert line["ancree"] is False and "fait_non_source" in line["controls"]
    assert [f["text"] for f in line["unsupported_facts"]] == ["CHF 3 000 HT", "pfSense"]
    assert not srv.errors


def test_a_faithful_answer_passes_control_5(served: Served, srv: ScriptedServer) -> None:
    r = httpx.post(f"{served.url}/query", json={"question": Q_ROCHAT}, headers=WHO, timeout=60)
    assert r.status_code == 200, r.text
    assert "fait_non_source" not in r.json()["controles"] and r.json()["ancree"] is None  # no judge: not established


def test_a_follow_up_is_resolved_from_the_user_questions_and_audited(served: Served, srv: ScriptedServer) -> None:
    messages = [{"role": "user", "content": Q_BAUMONT}, {"role": "assistant", "content": A_BAUMONT},
                {"role": "user", "content": "Fais pareil pour l'étude Rochat"}]
    r = httpx.post(f"{served.url}/v1/chat/completions", json={"model": "ancre", "messages": messages}, headers=WHO, timeout=60)
    assert r.status_code == 200, r.text
    (condense,) = _condense_requests(srv)
    sent = condense.json["messages"][1]["content"]
    assert Q_BAUMONT in sent and "Fais pareil pour l'étude Rochat" in sent and A_BAUMONT not in sent
    (answer,) = _answer_requests(srv)
    prompt = answer.json["messages"][-1]["content"]
    assert f"Question : {RESOLVED}" in prompt and A_BAUMONT not in prompt and Q_BAUMONT not in prompt
    assert ROCHAT in prompt  # retrieval ran on the resolved question: Rochat's contract is shown
    body = r.json()
    assert body["ancre"]["question_traitee"] == RESOLVED
    assert f"*Question traitée : {RESOLVED}*" in body["choices"][0]["message"]["content"]
    line = served.audit()[-1]
    assert line["question"] == "Fais pareil pour l'étude Rochat" and line["resolved_question"] == RESOLVED
    assert line["resolution"] == {"method": "modele", "instruction": None}
    assert not srv.errors


def test_a_condensed_question_that_brings_a_subject_in_falls_back_to_the_rule(served: Served, srv: ScriptedServer) -> None:
    served.model.condensed = "Quelles sont les conditions du contrat de Dupont Logistique SA ?"
    messages = [{"role": "user", "content": Q_BAUMONT}, {"role": "assistant", "content": A_BAUMONT},
                {"role": "user", "content": "Fais pareil pour l'étude Rochat"}]
    r = httpx.post(f"{served.url}/v1/chat/completions", json={"model": "ancre", "messages": messages}, headers=WHO, timeout=60)
    assert r.json()["ancre"]["question_traitee"] == RESOLVED
    assert served.audit()[-1]["resolution"]["method"] == "regle"


def test_more_concise_regenerates_the_previous_question(served: Served, srv: ScriptedServer) -> None:
    messages = [{"role": "user", "content": Q_ROCHAT}, {"role": "assistant", "content": FAITHFUL},
                {"role": "user", "content": "Plus concis"}]
    r = httpx.post(f"{served.url}/v1/chat/completions", json={"model": "ancre", "messages": messages}, headers=WHO, timeout=60)
    assert r.status_code == 200, r.text
    assert _condense_requests(srv) == []
    (answer,) = _answer_requests(srv)
    prompt = answer.json["messages"][-1]["content"]
    assert f"Question : {Q_ROCHAT}" in prompt  # the previous question, not « Plus concis »
    assert FAITHFUL not in prompt  # the previous answer is not evidence
    assert r.json()["ancre"]["question_traitee"] == Q_ROCHAT
    assert served.audit()[-1]["resolution"] == {"method": "regeneration", "instruction": "plus_concis"}
    from ancre.query.conversation import INSTRUCTION_TEXT, Instruction

    assert INSTRUCTION_TEXT[Instruction.CONCISE] in prompt


def test_two_versions_of_a_contract_are_announced(served: Served, srv: ScriptedServer) -> None:
    served.model.answer = (f"Le contrat prend effet le 1er janvier 2026 pour une durée de vingt-quatre mois [{ROCHAT}]. "
                           f"La version 2024, remplacée, prévoyait trente-six mois [{ROCHAT_2024}].")
    q = "Quelle est la durée du contrat Rochat ?"
    r = httpx.post(f"{served.url}/v1/chat/completions", json={"model": "ancre", "messages": [{"role": "user", "content": q}]},
                   headers=WHO, timeout=60)
    assert r.status_code == 200, r.text
    content = r.json()["choices"][0]["message"]["content"]
    direction, archives = "`\\\\SRV-FICHIERS\\Partage\\DIRECTION\\`", "`\\\\SRV-FICHIERS\\Partage\\ARCHIVES\\`"
    assert f"⚠️ Deux versions du même document : {ROCHAT} ({direction}) semble la version en vigueur (" in content
    assert f"; {ROCHAT_2024} ({archives}) est une version antérieure." in content
    assert "Baumont" not in content.split("⚠️ Deux versions", 1)[1]  # another client's contract is no version
    (answer,) = _answer_requests(srv)
    prompt = answer.json["messages"][-1]["content"]
    assert f"[{ROCHAT}], [{ROCHAT_2024}] sont des versions d'un même document : [{ROCHAT}] semble la version en vigueur" in prompt
    (group,) = r.json()["ancre"]["versions"]
    assert group["documents"] == [ROCHAT, ROCHAT_2024] and group["en_vigueur"] == ROCHAT
    assert any("ARCHIVES" in reason for reason in group["raisons"])
    assert r.json()["ancre"]["faits_non_sources"] == []  # each figure is in the version that sentence cites
    line = served.audit()[-1]
    assert [(v["documents"], v["current"]) for v in line["versions"]] == [([ROCHAT, ROCHAT_2024], ROCHAT)]
    assert not srv.errors
