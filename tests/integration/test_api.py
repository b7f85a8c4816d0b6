"""End to end: the RAG API served by uvicorn on 127.0.0.1 (started by the tests in a
thread), over the REAL Axonix corpus synced once for the module, with a scripted Ollama on
127.0.0.1 answering as the model and as the judge. Clients: the official ``openai`` SDK, httpx,
schemathesis; and ``ancre serve`` run as a subprocess for co-location."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import openai
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from starlette.testclient import TestClient
from support.corpus import CORPUS, copy_corpus, load_question_set, write_config
from support.httpserver import Request, ScriptedServer
from support.providers import DownProvider, OddProvider
from support.scripted_ollama import ANSWER_MODEL, GROUNDED, JUDGE_MODEL, chats, script, user_part

from ancre.acl.directory import FileDirectory
from ancre.acl.providers import DirectoryProvider, PrincipalResolver
from ancre.api.app import WARNING_UNGROUNDED, create_app
from ancre.api.identity import signature
from ancre.app.runtime import Runtime
from ancre.app.server import ApiServer
from ancre.config import Settings, load_settings
from ancre.query import QueryCore
from ancre.query.prompt import REFUSAL, SYSTEM_PROMPT
from ancre.settings.query import AuditConfig, LlmConfig

KEY = "test-service-key-0123456789"
SECRET = "test-signing-secret"
QUESTIONS = load_question_set()
BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
ROCHAT = "03_Contrat_Maintenance_Etude_Rochat.docx"
INVENTED = "22_Contrat_Maintenance_Étude_Rochat.docx"
CLIENTS_UNC = "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\"
Q_BAUMONT = QUESTIONS[0]["q"]
Q_ROCHAT = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"
Q_SAME_FOR_ROCHAT = "Fais pareil pour l'étude Rochat"
ROCHAT_FEE = "CHF 3 840 HT"
BAUMONT_FEE = "CHF 4 200 HT"
CASE1 = (
    f"Le contrat de maintenance avec Baumont Industries couvre l'infogérance de 35 postes Windows 11 "
    f"Pro [{BAUMONT}]. Le forfait mensuel s'élève à {BAUMONT_FEE} [{BAUMONT}]."
)
CASE2 = (
    f"Le contrat de maintenance de l'étude Rochat couvre 20 postes et un pare-feu pfSense [{INVENTED}]. "
    f"Le forfait mensuel s'élève à CHF 3 000 HT [{INVENTED}]."
)
UPN = {"alice": "alice.martin@axonix.ch", "bruno": "bruno.favre@axonix.ch", "mallory": "mallory@axonix.ch"}
NAMES = {"alice": "Alice Martin", "bruno": "Bruno Favre", "mallory": "Mallory Éve"}


def who(user: str, key: str = KEY) -> dict[str, str]:
    """The headers Open WebUI sends for ``user`` (the name percent-encoded as Open WebUI does)."""
    return {
        "Authorization": f"Bearer {key}",
        "X-OpenWebUI-User-Email": UPN[user],
        "X-OpenWebUI-User-Id": f"id-{user}",
        "X-OpenWebUI-User-Name": quote(NAMES[user], safe=" "),
        "X-OpenWebUI-User-Role": "user",
    }


def chat_body(*turns: str, stream: bool = False) -> dict[str, Any]:
    """A conversation alternating user / assistant turns, ending with the user's question."""
    roles = ["user", "assistant"]
    return {
        "model": "ancre",
        "stream": stream,
        "messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(turns)],
    }


# ----------------------------------------------------------------------------- fixtures


@dataclass
class Served:
    root: Path
    settings: Settings
    rt: Runtime
    url: str
    signed_url: str

    @property
    def audit_dir(self) -> Path:
        return Path(self.settings.data_dir) / "audit"

    def audit_lines(self) -> list[dict[str, Any]]:
        # JSON lines end with "\n" only: a question may hold U+2028 or U+0085, which splitlines() cuts at
        return [json.loads(x) for f in sorted(self.audit_dir.glob("audit-*.jsonl"))
                for x in f.read_text("utf-8").split("\n") if x]

    def audit_count(self) -> int:
        """Questions audited: ``answer`` and ``start`` lines (a streamed answer's ``outcome``
        shares its ``start``'s id)."""
        return sum(1 for line in self.audit_lines() if line.get("kind") != "outcome")


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, srv: ScriptedServer) -> Iterator[Served]:
    """The corpus synced once; the API on two uvicorn servers over the same Runtime: one
    without and one with a signing secret."""
    root = copy_corpus(tmp_path_factory.mktemp("api-corpus"))
    config = write_config(root)
    base = {"llm": {"kind": "ollama", "url": srv.url}, "judge": {"timeout_s": 5}}
    plain = load_settings(config, **base, api={"api_key": KEY})
    signed = load_settings(config, **base, api={"api_key": KEY, "signing_secret": SECRET, "max_clock_skew_s": 120})
    rt = Runtime(plain)
    for conn in rt.connectors():
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.failed == 0, rep
    one = ApiServer(create_app(rt.query_core, plain, not_ready=rt.index_not_ready)).start()
    two = ApiServer(create_app(rt.query_core, signed, not_ready=rt.index_not_ready)).start()
    try:
        yield Served(root, plain, rt, one.url, two.url)
    finally:
        one.stop()
        two.stop()
        rt.close()


@pytest.fixture(autouse=True)
def _fresh(srv: ScriptedServer) -> None:
    srv.clear()
    script(srv, REFUSAL, GROUNDED)


def _no_error(srv: ScriptedServer) -> None:
    assert not srv.errors, srv.errors


# ----------------------------------------------------------------------------- the openai SDK


def test_openai_sdk_lists_the_model_and_answers_streaming_and_not(served: Served, srv: ScriptedServer) -> None:
    script(srv, CASE1, GROUNDED)
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=KEY, default_headers=who("alice"), max_retries=0)
    assert [m.id for m in client.models.list()] == ["ancre"]

    raw = client.chat.completions.with_raw_response.create(
        model="ancre", messages=[{"role": "user", "content": Q_BAUMONT}]
    )
    assert raw.headers["x-ancre-ancree"] == "true" and raw.headers["x-ancre-verification"] == "effectuee"
    completion = raw.parse()
    text = completion.choices[0].message.content
    assert text is not None and text.startswith(CASE1)
    block = text[len(CASE1):]
    assert block == f"\n\n---\n**Sources :**\n- {BAUMONT} — `{CLIENTS_UNC}`"  # file and UNC folder
    verdict = completion.model_extra["ancre"]
    assert verdict["ancree"] is True and verdict["controles"] == [] and verdict["verification"] == "effectuee"
    assert [s["filename"] for s in verdict["sources"]] == [BAUMONT]

    stream = client.chat.completions.create(
        model="ancre", messages=[{"role": "user", "content": Q_BAUMONT}], stream=True
    )
    chunks = list(stream)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 5  # really streamed, piece by piece
    # streamed: native sources (Open WebUI's `source` events), the citations numbered in their order
    assert "".join(pieces) == CASE1.replace(f"[{BAUMONT}]", "[1]")
    events = [c.model_extra["event"] for c in chunks if "event" in (c.model_extra or {})]
    assert [e["type"] for e in events] == ["source"] and all(not c.choices for c in chunks if "event" in (c.model_extra or {}))
    data = events[0]["data"]
    assert "type" not in data and data["source"] == {"id": f"{CLIENTS_UNC}{BAUMONT}", "name": BAUMONT}
    assert data["document"][0].startswith(f"Dossier : `{CLIENTS_UNC}`") and BAUMONT_FEE in "\n".join(data["document"])
    assert data["metadata"] == [{"source": f"{CLIENTS_UNC}{BAUMONT}", "name": BAUMONT}] * len(data["document"])
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop" and last.model_extra["ancre"] == verdict
    assert all("ancre" not in (c.model_extra or {}) for c in chunks[:-1])

    asked = chats(srv, ANSWER_MODEL)
    assert [r.json["stream"] for r in asked] == [False, True]
    assert all(Q_BAUMONT in r.json["messages"][1]["content"] for r in asked)
    assert len(chats(srv, JUDGE_MODEL)) == 2
    _no_error(srv)


def test_sdk_wrong_key_is_an_authentication_error(served: Served) -> None:
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key="wrong", default_headers={
        k: v for k, v in who("alice").items() if k != "Authorization"}, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as exc:
        client.chat.completions.create(model="ancre", messages=[{"role": "user", "content": Q_BAUMONT}])
    assert exc.value.status_code == 401 and exc.value.code == "invalid_api_key"


# ----------------------------------------------------------------------------- /query


def test_query_200_when_grounded_and_422_when_not(served: Served, srv: ScriptedServer) -> None:
    script(srv, CASE1, GROUNDED)
    r = httpx.post(f"{served.url}/query", json={"question": Q_BAUMONT}, headers=who("alice"), timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"reponse", "sources", "ancree", "controles", "verification", "extractive", "documents_ecartes",
                         "versions", "question_traitee", "reponse_incomplete"}
    assert body["versions"] == [] and body["question_traitee"] is None  # one document, asked alone
    assert body["documents_ecartes"] == []  # every source document's rights were checked live
    assert body["ancree"] is True and body["controles"] == [] and body["verification"] == "effectuee"
    assert body["reponse"].count(f"[{BAUMONT} : `{CLIENTS_UNC}`]") == 2  # citations carry their folder
    assert body["sources"] == [{"filename": BAUMONT, "location": CLIENTS_UNC, "path": f"CLIENTS/{BAUMONT}"}]
    assert r.headers["x-ancre-ancree"] == "true"

    script(srv, CASE2, GROUNDED)  # cites a file that was never shown: control 3
    r = httpx.post(f"{served.url}/query", json={"question": Q_SAME_FOR_ROCHAT}, headers=who("alice"), timeout=60)
    assert r.status_code == 422, r.text
    body = r.json()
    assert "reponse" not in body and body["reponse_bloquee"] == CASE2
    assert body["ancree"] is False and "citation_inventee" in body["controles"]
    assert body["citations_inventees"] == [INVENTED] and r.headers["x-ancre-ancree"] == "false"

    # a judge that cannot judge: the answer passes, visibly not verified (docs/ARCHITECTURE.md "Data flow of a question" step 7)
    script(srv, CASE1, "Je ne sais pas juger.")
    r = httpx.post(f"{served.url}/query", json={"question": Q_BAUMONT}, headers=who("alice"), timeout=60)
    assert r.status_code == 200 and r.json()["ancree"] is None and r.json()["verification"] == "non_effectuee"
    assert r.headers["x-ancre-ancree"] == "null"

    # the same ungrounded answer on /v1 is returned, with its verdict and a warning
    script(srv, CASE2, GROUNDED)
    r = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(Q_SAME_FOR_ROCHAT), headers=who("alice"), timeout=60)
    assert r.status_code == 200 and r.headers["x-ancre-ancree"] == "false"
    content = r.json()["choices"][0]["message"]["content"]
    # the warning names what control 5 found in no cited extract (here: no extract at all is cited)
    assert content.startswith(CASE2)
    assert content.endswith(f"{WARNING_UNGROUNDED} Non retrouvé dans les extraits cités : "
                            "« Rochat », « 20 », « pfSense », « CHF 3 000 HT ».")
    _no_error(srv)


# ----------------------------------------------------------------------------- identity


def _post(url: str, path: str, headers: dict[str, str], body: Any = None) -> httpx.Response:
    payload = body if body is not None else (chat_body(Q_BAUMONT) if path.startswith("/v1") else {"question": Q_BAUMONT})
    return httpx.post(f"{url}{path}", json=payload, headers=headers, timeout=60)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/query"])
def test_missing_or_wrong_key_or_identity_is_401(served: Served, srv: ScriptedServer, path: str) -> None:
    before = served.audit_count()
    ident = {k: v for k, v in who("alice").items() if k != "Authorization"}
    cases = {
        "no key": (ident, "invalid_api_key"),
        "wrong key": (who("alice", key="not-the-key"), "invalid_api_key"),
        "basic auth": ({**ident, "Authorization": f"Basic {KEY}"}, "invalid_api_key"),
        "no identity": ({"Authorization": f"Bearer {KEY}"}, "missing_identity"),
        "empty identity": ({**who("alice"), "X-OpenWebUI-User-Email": ""}, "missing_identity"),
    }
    for what, (headers, code) in cases.items():
        r = _post(served.url, path, headers)
        assert r.status_code == 401, (what, r.text)
        assert r.json() == {"error": {"message": r.json()["error"]["message"], "type": "invalid_request_error",
                                      "param": None, "code": code}}, what
        assert KEY not in r.text and r.headers["www-authenticate"] == "Bearer"
    assert srv.requests_to("/api/chat") == []  # nobody answered
    assert served.audit_count() == before  # and nothing was asked


def test_models_needs_the_key_only(served: Served) -> None:
    assert httpx.get(f"{served.url}/v1/models").status_code == 401
    assert httpx.get(f"{served.url}/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401
    r = httpx.get(f"{served.url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200 and [m["id"] for m in r.json()["data"]] == ["ancre"]


def _body(path: str, question: str = Q_BAUMONT) -> bytes:
    payload = chat_body(question) if path.startswith("/v1") else {"question": question}
    return json.dumps(payload).encode()


def _sig(email: str, t: int, path: str, body: bytes, secret: str = SECRET) -> str:
    return signature(secret, email, t, "POST", path, body)


def test_signature_required_when_a_secret_is_configured(served: Served, srv: ScriptedServer) -> None:
    script(srv, CASE1, GROUNDED)
    email = UPN["alice"]
    now = int(time.time())
    body = _body("/query")
    good = {**who("alice"), "X-Ancre-Signature": _sig(email, now, "/query", body), "Content-Type": "application/json"}
    r = httpx.post(f"{served.signed_url}/query", content=body, headers=good, timeout=60)
    assert r.status_code == 200 and r.json()["ancree"] is True

    def bad_cases(path: str) -> dict[str, tuple[dict[str, str], bytes, str]]:
        b = _body(path)
        h = {**who("alice"), "Content-Type": "application/json"}
        return {
            "missing": (h, b, "missing_signature"),
            "other user's": ({**h, "X-Ancre-Signature": _sig(UPN["bruno"], now, path, b)}, b, "invalid_signature"),
            "bruno replaying alice's": ({**who("bruno"), "X-Ancre-Signature": _sig(email, now, path, b)}, b, "invalid_signature"),
            "wrong secret": ({**h, "X-Ancre-Signature": _sig(email, now, path, b, "guess")}, b, "invalid_signature"),
            "malformed": ({**h, "X-Ancre-Signature": "deadbeef"}, b, "invalid_signature"),
            "stale": ({**h, "X-Ancre-Signature": _sig(email, now - 600, path, b)}, b, "stale_signature"),
            "future": ({**h, "X-Ancre-Signature": _sig(email, now + 600, path, b)}, b, "stale_signature"),
            # a captured signature is good for its own question and endpoint only
            "another question": ({**h, "X-Ancre-Signature": _sig(email, now, path, b)},
                                 _body(path, "Quel est le salaire de la directrice ?"), "invalid_signature"),
            "another endpoint": ({**h, "X-Ancre-Signature": _sig(email, now, "/query" if path != "/query" else "/v1/chat/completions", b)},
                                 b, "invalid_signature"),
        }

    srv.clear()
    for path in ("/query", "/v1/chat/completions"):
        for what, (headers, content, code) in bad_cases(path).items():
            r = httpx.post(f"{served.signed_url}{path}", content=content, headers=headers, timeout=60)
            assert r.status_code == 401 and r.json()["error"]["code"] == code, (what, path, r.text)
            assert SECRET not in r.text
    assert srv.requests_to("/api/chat") == []
    # the unsigned server does not ask for one
    assert _post(served.url, "/query", who("alice")).status_code == 200


def _honest_model(req: Request) -> str:
    """A model that follows the prompt: answers from the extracts it was given, refuses otherwise;
    and would repeat an earlier answer if the conversation were passed to it."""
    prompt = user_part(req)
    if ROCHAT in prompt or ROCHAT_FEE in prompt:
        return f"Le forfait mensuel de l'étude Rochat s'élève à {ROCHAT_FEE} [{ROCHAT}]."
    if CASE1 in prompt or Q_BAUMONT in prompt:
        return f"Pour l'étude Rochat, le forfait mensuel s'élève à {BAUMONT_FEE} [{BAUMONT}]."
    return REFUSAL


def sse_text(raw: str) -> tuple[str, dict[str, Any]]:
    """The text of an SSE chat completion stream (deltas joined) and its last chunk."""
    events = [line[len("data: "):] for line in raw.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks), chunks[-1]


def _no_trace(resp: httpx.Response, *needles: str) -> None:
    blob = resp.text + json.dumps(dict(resp.headers))
    for n in needles:
        assert n not in blob, n


def test_a_user_who_may_not_read_gets_the_refusal_and_no_trace(served: Served, srv: ScriptedServer) -> None:
    script(srv, _honest_model, GROUNDED)
    r = httpx.post(f"{served.url}/query", json={"question": Q_ROCHAT}, headers=who("alice"), timeout=60)
    assert r.status_code == 200 and ROCHAT_FEE in r.json()["reponse"]  # alice may read it: the model sees it

    srv.clear()
    r = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(Q_ROCHAT), headers=who("bruno"), timeout=60)
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == REFUSAL  # no sources block
    assert r.json()["ancre"]["sources"] == [] and r.headers["x-ancre-ancree"] == "true"
    _no_trace(r, "Etude_Rochat", "DIRECTION", "ARCHIVES", ROCHAT_FEE)
    with httpx.stream("POST", f"{served.url}/v1/chat/completions", json=chat_body(Q_ROCHAT, stream=True),
                      headers=who("bruno"), timeout=60) as s:
        streamed = s.read().decode()
    assert streamed.endswith("data: [DONE]\n\n") and "Etude_Rochat" not in streamed and ROCHAT_FEE not in streamed
    text, last = sse_text(streamed)
    assert text == REFUSAL and last["ancre"]["sources"] == []
    r = httpx.post(f"{served.url}/query", json={"question": Q_ROCHAT}, headers=who("bruno"), timeout=60)
    assert r.status_code == 200 and r.json()["reponse"] == REFUSAL and r.json()["sources"] == []
    _no_trace(r, "Etude_Rochat", "DIRECTION", ROCHAT_FEE)
    asked = chats(srv, ANSWER_MODEL)
    assert len(asked) == 3 and not any("Rochat.docx" in user_part(q) or ROCHAT_FEE in user_part(q) for q in asked)

    # an identity the directory does not know: told so (not « not in the documents »), no model
    # call, no source; /query keeps the refusal, with the control
    srv.clear()
    r = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(Q_ROCHAT), headers=who("mallory"), timeout=60)
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == (
        "Votre compte « mallory@axonix.ch » n'est pas connu de l'annuaire de l'entreprise : ancre ne peut donc pas "
        "vérifier vos droits d'accès et ne vous montre aucun document. Contactez votre service informatique : votre "
        "adresse dans Open WebUI doit correspondre à votre compte de l'annuaire.")
    assert r.json()["ancre"] == {"ancree": True, "verification": "non_requise",
                                 "controles": ["aucun_extrait", "utilisateur_inconnu"],
                                 "sources": [], "extractive": False, "documents_ecartes": [],
                                 "faits_non_sources": [], "versions": [], "question_traitee": None,
                                 "reponse_incomplete": False}
    r = httpx.post(f"{served.url}/query", json={"question": Q_ROCHAT}, headers=who("mallory"), timeout=60)
    assert r.json()["reponse"] == REFUSAL and r.json()["controles"] == ["aucun_extrait", "utilisateur_inconnu"]
    assert srv.requests_to("/api/chat") == []
    _no_error(srv)


def test_fais_pareil_for_rochat_as_bruno(served: Served, srv: ScriptedServer) -> None:
    """A 2-turn conversation: the Baumont question and its answer, then « Fais pareil pour l'étude
    Rochat » as bruno, who cannot read Rochat: the model is given that sentence and bruno's
    extracts only — no Rochat extract, no earlier turn — so nothing of Rochat comes back and no
    Baumont figure is presented as Rochat's."""
    script(srv, _honest_model, GROUNDED)
    conversation = (Q_BAUMONT, CASE1, Q_SAME_FOR_ROCHAT)
    r = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(*conversation), headers=who("bruno"), timeout=60)
    assert r.status_code == 200, r.text
    (req,) = [r for r in chats(srv, ANSWER_MODEL) if r.json["messages"][0]["content"] == SYSTEM_PROMPT]
    system, user = req.json["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    # the follow-up is resolved from the earlier *user* question (the condense prompt, else the rule)
    assert "Question : Quelles sont les conditions du contrat de maintenance d'Axonix SA avec l'étude Rochat" in user["content"]
    assert Q_BAUMONT not in user["content"] and CASE1 not in user["content"]  # earlier turns never sent
    prompt = user_part(req)  # the question and the extracts
    assert "Rochat.docx" not in prompt and ROCHAT_FEE not in prompt and "DIRECTION" not in prompt
    content = r.json()["choices"][0]["message"]["content"]
    resolved = "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec l'étude Rochat ?"
    assert content == f"{REFUSAL}\n\n---\n*Question traitée : {resolved}*"  # the refusal says what it answered
    assert r.json()["ancre"]["sources"] == [] and r.json()["ancre"]["question_traitee"] == resolved
    _no_trace(r, "Etude_Rochat", ROCHAT_FEE, BAUMONT_FEE)

    # a model that does lend Baumont's figure to Rochat: control 5 finds « Rochat » in no cited
    # extract (before the judge, which is not asked), /query blocks it and /v1 flags it, naming it
    script(srv, f"Pour l'étude Rochat, le forfait mensuel s'élève à {BAUMONT_FEE} [{BAUMONT}].", GROUNDED)
    srv.clear()
    r = httpx.post(f"{served.url}/query", json={"question": Q_SAME_FOR_ROCHAT}, headers=who("bruno"), timeout=60)
    # asked alone, the bare follow-up no longer retrieves Baumont's contract for bruno (chunks carry
    # whose document they are, issue 41): the citation is then invented too, and « Rochat » in none
    assert r.status_code == 422 and "reponse" not in r.json() and "fait_non_source" in r.json()["controles"]
    assert ("Rochat", "nom") in [(f["texte"], f["nature"]) for f in r.json()["faits_non_sources"]]
    r = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(*conversation), headers=who("bruno"), timeout=60)
    content = r.json()["choices"][0]["message"]["content"]
    assert r.headers["x-ancre-ancree"] == "false" and r.json()["ancre"]["controles"] == ["fait_non_source"]
    # « Rochat » is named; Baumont's figure too when the extract that states it is not among bruno's
    assert f"{WARNING_UNGROUNDED} Non retrouvé dans les extraits cités : « Rochat »" in content
    assert chats(srv, JUDGE_MODEL) == []  # control 5 decided, the judge was not asked
    _no_error(srv)


# ----------------------------------------------------------------------------- bad requests


def test_bad_requests(served: Served, srv: ScriptedServer) -> None:
    h = who("alice")
    r = httpx.post(f"{served.url}/v1/chat/completions", content=b"{not json", headers={**h, "Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_request_error"
    r = _post(served.url, "/v1/chat/completions", h, {"model": "ancre"})
    assert r.status_code == 422 and r.json()["error"]["param"] == "messages"
    assert r.json()["error"]["message"].startswith("ancre n'a pas pu traiter la demande d'Open WebUI")  # staff read it
    secret_text = "texte confidentiel 4471-ZETA"
    r = _post(served.url, "/v1/chat/completions", h, {"model": "ancre", "messages": [{"role": "boss", "content": secret_text}]})
    assert r.status_code == 422 and r.json()["error"]["param"] == "messages[0].role"
    assert secret_text not in r.text  # inputs are never echoed
    r = _post(served.url, "/v1/chat/completions", h, {"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = _post(served.url, "/query", h, {"question": "x" * 4001})
    assert r.status_code == 422 and r.json()["error"]["code"] == "question_too_long"
    assert "4000" in r.json()["error"]["message"] and "api.max_question_chars" in r.json()["error"]["message"]
    r = _post(served.url, "/v1/chat/completions", h, chat_body("y" * 4001))
    assert r.status_code == 422 and r.json()["error"]["param"] == "messages[0].content"
    r = _post(served.url, "/query", h, {"question": "a", "extra": 1})
    assert r.status_code == 422 and r.json()["error"]["param"] == "extra"
    big = b'{"question": "' + b"z" * (4 * 1024 * 1024) + b'"}'
    r = httpx.post(f"{served.url}/query", content=big, headers={**h, "Content-Type": "application/json"}, timeout=60)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    r = httpx.get(f"{served.url}/nowhere")
    assert r.status_code == 404 and set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert srv.requests_to("/api/chat") == []


BAD_TEXT = [
    ("/query", b'{"question": "Forfait \\ud800 du contrat Rochat ?"}'),
    ("/v1/chat/completions", b'{"model": "ancre", "messages": [{"role": "user", "content": "Rochat \\udc00 ?"}]}'),
    ("/v1/chat/completions", b'{"model": "ancre", "stream": true, "messages": [{"role": "user", "content": "Rochat \\udc00 ?"}]}'),
    ("/v1/chat/completions",
     b'{"model": "ancre", "messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud83d Rochat"}]}]}'),
]


def test_bad_text_is_422_everywhere_and_every_answered_question_is_audited(served: Served, srv: ScriptedServer) -> None:
    """A lone surrogate crashed the embedder or the audit writer (500); it is refused at
    the edge with 422 on every endpoint, and each question that is answered leaves its audit line."""
    script(srv, CASE1, GROUNDED)
    before = served.audit_count()
    for path, body in BAD_TEXT:
        r = httpx.post(f"{served.url}{path}", content=body, headers={**who("alice"), "Content-Type": "application/json"},
                       timeout=60)
        assert r.status_code == 422, (path, body, r.text)
        assert r.json()["error"]["param"] and r.json()["error"]["code"] == "invalid_value", r.text
        if path == "/query":  # the chat route's message is French, for staff (the detail is logged)
            assert "lone surrogate" in r.json()["error"]["message"], r.text
    assert srv.requests_to("/api/chat") == [] and served.audit_count() == before
    for answered, (path, payload) in enumerate((
        ("/query", {"question": Q_BAUMONT}), ("/v1/chat/completions", chat_body(Q_BAUMONT)),
        ("/v1/chat/completions", chat_body(Q_BAUMONT, stream=True)),
        ("/query", {"question": "Forfait \U0001F600 Baumont \u0000 ?"}),
    ), start=1):
        r = httpx.post(f"{served.url}{path}", json=payload, headers=who("alice"), timeout=60)
        assert r.status_code in (200, 422) and "error" not in r.text[:20], (path, r.text)
        assert served.audit_count() == before + answered, path
    _no_error(srv)


def test_lookalike_identities_get_nothing_and_the_audit_names_both(served: Served, srv: ScriptedServer, tmp_path: Path) -> None:
    """The forwarded jeß.rossi@ (or with ſ) is not the directory's jess.rossi@; the audit
    line keeps the header as received and the resolved account apart."""
    data = json.loads((served.root / "directory.json").read_text("utf-8"))
    sid = data["users"]["alice"]["sid"].rsplit("-", 1)[0] + "-1299"
    data["users"]["jess"] = {"sid": sid, "upn": "jess.rossi@axonix.ch", "groups": ["GG_Direction"]}
    (tmp_path / "directory.json").write_text(json.dumps(data), "utf-8")
    rt = served.rt
    settings = served.settings.model_copy(update={"llm": LlmConfig(), "audit": AuditConfig(dir=tmp_path / "audit")})
    svc = QueryCore(settings, replace(rt.query_core.parts, directory=FileDirectory(tmp_path / "directory.json"), principals=None))

    def ask(email: str) -> httpx.Response:
        with TestClient(create_app(svc, served.settings)) as client:
            headers: dict[str, Any] = {**who("alice"), "X-OpenWebUI-User-Email": email.encode()}  # UTF-8 bytes
            return client.post("/query", json={"question": Q_ROCHAT}, headers=headers)

    r = ask("Jess.Rossi@axonix.ch")
    assert r.status_code == 200 and ROCHAT_FEE in r.json()["reponse"], r.text  # jess reads DIRECTION
    for lookalike in ("je\u00df.rossi@axonix.ch", "je\u017fs.rossi@axonix.ch", "JE\u1e9e.ROSSI@axonix.ch"):
        r = ask(lookalike)
        assert r.status_code == 200 and r.json()["reponse"] == REFUSAL and r.json()["sources"] == [], (lookalike, r.text)
        _no_trace(r, ROCHAT_FEE, "Rochat.docx")
    r = ask("jess")  # identity = "upn": an account name is not a UPN
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_identity"
    svc.close()
    lines = [json.loads(x) for f in sorted((tmp_path / "audit").glob("audit-*.jsonl")) for x in f.read_text("utf-8").splitlines()]
    assert [(x["user"], x["account"]) for x in lines] == [
        ("Jess.Rossi@axonix.ch", "jess"), ("je\u00df.rossi@axonix.ch", None), ("je\u017fs.rossi@axonix.ch", None),
        ("JE\u1e9e.ROSSI@axonix.ch", None)]
    assert lines[0]["sources"] and not any(x["sources"] for x in lines[1:])
    assert srv.requests_to("/api/chat") == []


def test_directory_failure_fails_closed_with_503(served: Served, srv: ScriptedServer, tmp_path: Path) -> None:
    broken = tmp_path / "directory.json"
    broken.write_text("{ not json", encoding="utf-8")
    rt = served.rt
    settings = served.settings.model_copy(update={"llm": LlmConfig(), "audit": AuditConfig(enabled=False)})
    svc = QueryCore(settings, replace(rt.query_core.parts, directory=FileDirectory(broken), principals=None))
    with TestClient(create_app(svc, served.settings)) as client:
        for path, body in (("/query", {"question": Q_BAUMONT}), ("/v1/chat/completions", chat_body(Q_BAUMONT)),
                           ("/v1/chat/completions", chat_body(Q_BAUMONT, stream=True))):
            r = client.post(path, json=body, headers=who("alice"))
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "directory_unavailable" and str(broken) not in r.text
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["checks"]["directory"]["status"] == "error"
    svc.close()
    assert srv.requests_to("/api/chat") == []


@pytest.mark.parametrize("failing", [DownProvider(), OddProvider(RuntimeError("token expired"))], ids=["down", "bug"])
def test_a_failing_principal_provider_fails_closed_with_503(served: Served, srv: ScriptedServer, failing: Any) -> None:
    """P(user) is the union of the providers: one that can't answer (or breaks) withholds every
    answer, as a directory outage does — never an answer from a partial principal set."""
    rt = served.rt
    resolver = PrincipalResolver([DirectoryProvider(rt.directory), failing])
    svc = QueryCore(served.settings, replace(rt.query_core.parts, principals=resolver))
    with TestClient(create_app(svc, served.settings)) as client:
        for path, body in (("/query", {"question": Q_BAUMONT}), ("/v1/chat/completions", chat_body(Q_BAUMONT)),
                           ("/v1/chat/completions", chat_body(Q_BAUMONT, stream=True))):
            r = client.post(path, json=body, headers=who("alice"))
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "directory_unavailable"
            assert "Baumont" not in r.text and "token expired" not in r.text
    assert srv.requests_to("/api/chat") == []


def test_health_and_metrics(served: Served, srv: ScriptedServer) -> None:
    r = httpx.get(f"{served.url}/health")
    assert r.status_code == 200, r.text
    checks = r.json()["checks"]
    assert {k: v["status"] for k, v in checks.items()} == {"store": "ok", "directory": "ok", "llm": "ok", "index": "ok"}
    assert checks["store"]["points"]["documents"] > 0
    assert checks["llm"]["models"] == {ANSWER_MODEL: "present", JUDGE_MODEL: "present"}
    srv.route("GET", "/api/tags", (500, {"error": "down"}))
    r = httpx.get(f"{served.url}/health")
    assert r.status_code == 503 and r.json()["checks"]["llm"]["status"] == "error"
    assert r.json()["checks"]["llm"]["models"] == {ANSWER_MODEL: "unreachable", JUDGE_MODEL: "unreachable"}
    script(srv, CASE1, GROUNDED)

    _post(served.url, "/query", who("alice"))
    text = httpx.get(f"{served.url}/metrics").text
    assert 'ancre_api_requests_total{method="POST",route="/query",status="200"}' in text
    assert 'ancre_api_answers_total{ancree="true",endpoint="query"}' in text


def test_before_the_first_sync_answers_503_not_a_confident_refusal(tmp_path: Path, srv: ScriptedServer) -> None:
    """While the first sync has not finished, an empty index would make every answer the
    standard refusal, looking authoritative: the API says 503 instead, and /health 'starting'."""
    config = write_config(copy_corpus(tmp_path / "c"))
    settings = load_settings(config, llm={"kind": "ollama", "url": srv.url}, api={"api_key": KEY})
    rt = Runtime(settings)
    server = ApiServer(create_app(rt.query_core, settings, not_ready=rt.index_not_ready)).start()
    try:
        r = _post(server.url, "/query", who("alice"))
        assert r.status_code == 503 and r.json()["error"]["code"] == "index_not_ready", r.text
        assert "partage" in r.json()["error"]["message"]
        r = httpx.post(f"{server.url}/v1/chat/completions", headers=who("alice"), json=chat_body("Forfait Rochat ?"))
        assert r.status_code == 503 and r.json()["error"]["code"] == "index_not_ready"
        assert r.json()["error"]["message"] == ("ancre démarre : l'indexation des documents n'est pas encore terminée. "
                                                "Réessayez dans quelques minutes.")  # staff read it in Open WebUI
        h = httpx.get(f"{server.url}/health")
        assert h.status_code == 503 and h.json()["checks"]["index"]["status"] == "starting"
        assert not srv.requests_to("/api/chat")  # no model call, no audit line for a non-answer
        for conn in rt.connectors():
            rt.engine.run_pass(conn)
        assert _post(server.url, "/query", who("alice")).status_code in (200, 422)
        assert httpx.get(f"{server.url}/health").json()["checks"]["index"]["status"] == "ok"
    finally:
        server.stop()
        rt.close()


# ----------------------------------------------------------------------------- schemathesis


def _published_schema() -> dict[str, Any]:
    """The app's OpenAPI document (it does not depend on the index: no service is needed)."""
    return create_app(object(), load_settings(None, api={"api_key": KEY})).openapi()


schema = schemathesis.openapi.from_dict(_published_schema())


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_schemathesis_no_server_error(case: Any, served: Served, srv: ScriptedServer) -> None:
    """Generated requests (valid and invalid, per the published schema) with valid credentials,
    against the live server: never a 5xx."""
    script(srv, CASE1, GROUNDED)
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        # the served model, and a last turn from the user: reach the answering path, not only 404/422
        body["model"] = "ancre"
        if isinstance(body.get("messages"), list) and body["messages"] and isinstance(body["messages"][-1], dict):
            last = body["messages"][-1]
            last["role"] = "user"
            if not (isinstance(last.get("content"), str) and last["content"].strip()):
                last["content"] = json.dumps(last.get("content"), ensure_ascii=False)
    response = case.call(base_url=served.url, headers=who("alice"), timeout=60)
    assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:500])


# ----------------------------------------------------------------------------- ancre serve


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ancre(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("ancre")
    return [str(exe), *args] if exe.exists() else [sys.executable, "-c", "from ancre.app.cli import main; main()", *args]


def _wait(pred: Any, what: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = pred()
        except (OSError, ValueError, httpx.HTTPError):
            value = None
        if value:
            return value
        assert proc.poll() is None, f"ancre serve exited ({proc.returncode})\n{log.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.1)


def test_ancre_serve_runs_daemon_and_api_in_one_process(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "note.md").write_text("# Note\n\nLe mot de passe du coffre vorxbbbb est rangé au bureau 12.\n", "utf-8")
    port = _free_port()
    (tmp_path / "directory.json").write_bytes((CORPUS / "directory.json").read_bytes())
    config = tmp_path / "ancre.toml"
    config.write_text(
        f'''data_dir = "data"
[directory]
kind = "file"
path = "directory.json"
cache_ttl_s = 0
[daemon]
debounce_s = 0.3
status_interval_s = 0.5
log_format = "text"
[api]
port = {port}
api_key_env = "ANCRE_TEST_API_KEY"
[[sources]]
id = "t"
root = "tree"
principals = ["sid:S-1-1-0"]
''',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "ANCRE_CONFIG", "WATCHDOG_USEC")}
    env["ANCRE_TEST_API_KEY"] = KEY
    log = tmp_path / "serve.log"
    url = f"http://127.0.0.1:{port}"
    status_file = tmp_path / "data" / "daemon-status.json"

    def ask(question: str) -> dict[str, Any]:
        r = httpx.post(f"{url}/query", json={"question": question}, headers=who("alice"), timeout=60)
        assert r.status_code == 200, r.text
        return r.json()

    with open(log, "wb") as out:
        proc = subprocess.Popen(_ancre("serve", "--config", str(config)), stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=tmp_path)
    try:
        _wait(lambda: httpx.get(f"{url}/health").status_code == 200, "the API", proc, log)

        def status() -> dict[str, Any]:
            return json.loads(status_file.read_text("utf-8"))

        _wait(lambda: status()["passes"].get("startup") and status()["idle"], "the initial sync", proc, log)
        assert status()["pid"] == proc.pid
        assert "note.md" in [s["filename"] for s in ask("Où est rangé le mot de passe du coffre vorxbbbb ?")["sources"]]

        # a change picked up by the daemon is answered by the API of the same process
        (tree / "memo.md").write_text("# Memo\n\nLa clé du local vorxcccc est chez le concierge.\n", "utf-8")
        _wait(lambda: "memo.md" in [s["filename"] for s in ask("Chez qui est la clé du local vorxcccc ?")["sources"]],
              "the new file to be answered from", proc, log)

        # SIGHUP: a full resync of every source
        proc.send_signal(signal.SIGHUP)
        _wait(lambda: status()["passes"].get("sighup"), "the SIGHUP pass", proc, log)

        metrics = httpx.get(f"{url}/metrics").text
        assert "ancre_api_requests_total" in metrics and "ancre_passes_total" in metrics  # API and daemon

        # the CLI of another process goes through the control socket of `ancre serve`
        other = subprocess.run(_ancre("search", "coffre vorxbbbb", "--as", "alice", "--json", "--config", str(config)),
                               check=False, capture_output=True, env=env, cwd=tmp_path, timeout=120)
        assert other.returncode == 0, other
        assert "note.md" in [r["filename"] for r in json.loads(other.stdout)["results"]]
        # a second process cannot open the embedded store: a clear error naming the owner
        api_alone = subprocess.run(_ancre("api", "--config", str(config), "--port", str(_free_port())),
                                   check=False, capture_output=True, env=env, cwd=tmp_path, timeout=120)
        assert api_alone.returncode == 2 and f"PID {proc.pid}" in " ".join(api_alone.stderr.decode().split())

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert status()["state"] == "stopped"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health")


def test_ancre_serve_preloads_both_models_at_start(tmp_path: Path) -> None:
    """The first question does not pay the model's load: at start, before any question, ``ancre
    serve`` sends each model an empty chat request with its keep_alive and the window questions
    use (docs/api.md of ollama/ollama, "Load a model")."""
    from support.model_servers import FakeOllama, Model

    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "note.md").write_text("# Note\n\nRien.\n", "utf-8")
    (tmp_path / "directory.json").write_bytes((CORPUS / "directory.json").read_bytes())
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "ANCRE_CONFIG", "WATCHDOG_USEC")}
    env["ANCRE_TEST_API_KEY"] = KEY
    log = tmp_path / "serve.log"
    with ScriptedServer() as model:
        FakeOllama(model, {ANSWER_MODEL: Model(), JUDGE_MODEL: Model(GROUNDED, 40960, "qwen3")})
        config = tmp_path / "ancre.toml"
        config.write_text(f'''data_dir = "data"
[directory]
kind = "file"
path = "directory.json"
[daemon]
log_format = "text"
[api]
port = {port}
api_key = {{ env = "ANCRE_TEST_API_KEY" }}
[llm]
kind = "ollama"
url = "{model.url}"
num_ctx = 16384
[[sources]]
id = "t"
root = "tree"
principals = ["sid:S-1-1-0"]
''', encoding="utf-8")
        with open(log, "wb") as out:
            proc = subprocess.Popen(_ancre("serve", "--config", str(config)), stdout=out, stderr=subprocess.STDOUT,
                                    env=env, cwd=tmp_path)
        try:
            loads = _wait(lambda: len(model.requests_to("/api/chat")) >= 2 and model.requests_to("/api/chat"),
                          "the models' pre-load", proc, log)
            assert [(r.json["model"], r.json["messages"], r.json["keep_alive"], r.json["options"]["num_ctx"])
                    for r in loads] == [(ANSWER_MODEL, [], "30m", 16384), (JUDGE_MODEL, [], "2h", 8192)]
            _wait(lambda: "judge model qwen3:4b loaded" in log.read_text(errors="replace"), "the log line", proc, log)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0, log.read_text(errors="replace")[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_ancre_api_refuses_to_start_without_a_key(tmp_path: Path) -> None:
    config = write_config(copy_corpus(tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCRE_")}
    r = subprocess.run(_ancre("api", "--config", str(config)), check=False, capture_output=True, env=env, timeout=120)
    assert r.returncode == 2 and "api.api_key is required" in " ".join(r.stderr.decode().split())


# ----------------------------------------------------------------------------- the model's server (issue 42)


def test_a_truncated_context_is_422_on_query_and_a_warning_on_v1(served: Served, srv: ScriptedServer) -> None:
    """An Ollama that cuts the prompt whatever num_ctx says (tests/support/model_servers.py): the
    answer is not grounded — 422 on /query, the answer with its warning on /v1 — and audited."""
    script(srv, CASE1, GROUNDED, force_window=1024)
    try:
        r = httpx.post(f"{served.url}/query", json={"question": Q_BAUMONT}, headers=who("alice"), timeout=60)
        assert r.status_code == 422, r.text
        assert "contexte_tronque" in r.json()["controles"] and r.json()["reponse_bloquee"].startswith("Le contrat")
        r = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(Q_BAUMONT), headers=who("alice"), timeout=60)
        assert r.status_code == 200 and r.json()["ancre"]["ancree"] is False
        content = r.json()["choices"][0]["message"]["content"]
        assert "réponse non ancrée" in content and "contexte tronqué" in content
        assert chats(srv, JUDGE_MODEL) == []  # a judge is not asked about a prompt the model never read
        line = served.audit_lines()[-1]
        assert "contexte_tronque" in line["controls"] and line["model"]["prompt_eval_count"] == 1024
    finally:
        script(srv, CASE1, GROUNDED)


def test_an_answer_cut_by_its_budget_is_told_incomplete(served: Served, srv: ScriptedServer) -> None:
    long = CASE1 + " Le contrat couvre aussi la supervision." * 2000  # more than llm.max_tokens (2,048)
    script(srv, long, GROUNDED)
    try:
        r = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(Q_BAUMONT), headers=who("alice"), timeout=60)
        assert r.status_code == 200 and r.json()["ancre"]["reponse_incomplete"] is True
        assert "reponse_tronquee" in r.json()["ancre"]["controles"]
        assert "Réponse incomplète" in r.json()["choices"][0]["message"]["content"]
        with httpx.stream("POST", f"{served.url}/v1/chat/completions", json=chat_body(Q_BAUMONT, stream=True),
                          headers=who("alice"), timeout=60) as s:
            streamed = s.read().decode()
        chunks = [json.loads(x[6:]) for x in streamed.split("\n\n") if x.startswith("data: {")]
        text = "".join((c["choices"] or [{}])[0].get("delta", {}).get("content") or "" for c in chunks)
        assert "Réponse incomplète" in text and chunks[-1]["ancre"]["reponse_incomplete"] is True
        r = httpx.post(f"{served.url}/query", json={"question": Q_BAUMONT}, headers=who("alice"), timeout=60)
        assert r.json()["reponse_incomplete"] is True and "reponse_tronquee" in r.json()["controles"]
        assert served.audit_lines()[-1]["model"]["done_reason"] == "length"
    finally:
        script(srv, CASE1, GROUNDED)


def test_a_model_missing_from_its_server_gives_staff_the_service_message(
    served: Served, srv: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    from support.model_servers import FakeOllama, Model

    FakeOllama(srv, {JUDGE_MODEL: Model(GROUNDED, 40960, "qwen3")})  # qwen2.5:14b not pulled
    try:
        for stream in (False, True):
            caplog.clear()
            r = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(Q_BAUMONT, stream=stream),
                           headers=who("alice"), timeout=60)
            assert r.status_code == 503, r.text
            err = r.json()["error"]
            assert err["code"] == "model_missing" and err["message"].startswith(
                "Le modèle de langage qui rédige les réponses d'ancre n'est pas installé sur son serveur")
            assert "qwen2.5" not in err["message"]  # staff get the French message, the admin the log line
            logged = [rec.getMessage() for rec in caplog.records if "ollama pull qwen2.5:14b" in rec.getMessage()]
            assert len(logged) == 1 and "\n" not in logged[0]
        r = httpx.post(f"{served.url}/query", json={"question": Q_BAUMONT}, headers=who("alice"), timeout=60)
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_missing"
        health = httpx.get(f"{served.url}/health").json()["checks"]["llm"]
        assert health["status"] == "error" and health["models"] == {ANSWER_MODEL: "absent", JUDGE_MODEL: "present"}
    finally:
        script(srv, CASE1, GROUNDED)
