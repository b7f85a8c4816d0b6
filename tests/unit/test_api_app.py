"""The API layer in process (Starlette's TestClient, no server): rendering, error shapes, limits.

The query core is replaced by a small scripted service here (its real behaviour is covered by
``tests/integration/test_api.py`` against the synced corpus); what is tested is what the HTTP
layer does with the answers and the errors it gets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from ancre.api.app import WARNING_UNGROUNDED, ApiError, create_app, last_user_question, sources_block
from ancre.api.schemas import ChatMessage
from ancre.config import load_settings
from ancre.errors import AuditError, ConfigError, DirectoryError
from ancre.query.answer import Answer, AnswerSource
from ancre.query.llm import LlmError
from ancre.query.prompt import REFUSAL

KEY = "unit-key"
H = {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": "alice.martin@axonix.ch"}
UNC = "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\"
SP = "https://axonix.sharepoint.example/sites/Direction/Documents partages"
DOC = AnswerSource("21_Contrat.docx", UNC, "CLIENTS/21_Contrat.docx", "partage:21")
SP_DOC = AnswerSource("Budget.xlsx", SP, "Budget.xlsx", "sp:1")
SECRET_TEXT = "le code d'accès est 4471-ZETA"


def answer(raw: str = "Réponse [21_Contrat.docx].", sources: tuple[AnswerSource, ...] = (DOC,),
           ancree: bool | None = True, controles: tuple[str, ...] = ()) -> Answer:
    return Answer(
        reponse=raw.replace("]", f" : `{UNC}`]"), raw=raw, sources=sources, ancree=ancree, controles=controles,
        invented=(), verification="effectuee" if ancree is not None else "non_effectuee", extractive=False,
    )


class Service:
    """Answers from a script: ``result`` (an Answer, or an exception to raise); streams the raw
    text in 4-character pieces, then raises ``fail_after`` if set."""

    def __init__(self, result: Answer | Exception, fail_after: Exception | None = None, directory_fails: bool = False) -> None:
        self.result, self.fail_after, self.directory_fails = result, fail_after, directory_fails
        self.asked: list[tuple[str, str]] = []
        self.histories: list[object] = []

    def points(self) -> dict[str, int]:
        return {"documents": 3, "documentation": 3}

    def probe_directory(self) -> None:
        if self.directory_fails:
            raise DirectoryError("directory file /etc/secret/directory.json: cannot read")

    def ask(self, question: str, user: str, *, asked_by: str | None = None, history: object = None) -> Answer:
        self.asked.append((question, user))
        self.histories.append(history)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    def stream(self, question: str, user: str, *, asked_by: str | None = None, history: object = None) -> Iterator[str | Answer]:
        self.asked.append((question, user))
        self.histories.append(history)
        if isinstance(self.result, Exception):
            raise self.result
        raw = self.result.raw
        for i in range(0, len(raw), 4):
            yield raw[i : i + 4]
        if self.fail_after is not None:
            raise self.fail_after
        yield self.result


def client(service: Service, **api: Any) -> TestClient:
    settings = load_settings(None, api={"api_key": KEY, **api})
    return TestClient(create_app(service, settings), raise_server_exceptions=False)


def chat(*contents: str, stream: bool = False) -> dict[str, Any]:
    return {"model": "ancre", "stream": stream, "messages": [{"role": "user", "content": c} for c in contents]}


def sse(text: str) -> list[Any]:
    return [json.loads(e[6:]) if e[6:] != "[DONE]" else "[DONE]" for e in text.split("\n\n") if e.startswith("data: ")]


# ----------------------------------------------------------------------------- rendering


def test_sources_block() -> None:
    assert sources_block(answer()) == f"\n\n---\n**Sources :**\n- 21_Contrat.docx — `{UNC}`"
    block = sources_block(answer(sources=(DOC, SP_DOC)))
    assert "- Budget.xlsx — <https://axonix.sharepoint.example/sites/Direction/Documents%20partages>" in block
    assert sources_block(answer(REFUSAL, sources=(), controles=("refus",))) == ""
    assert sources_block(answer(ancree=False)).endswith(f"\n\n{WARNING_UNGROUNDED}")
    assert sources_block(answer(sources=(), ancree=False)) == f"\n\n---\n{WARNING_UNGROUNDED}"


def test_last_user_question() -> None:
    msgs = [ChatMessage(role="system", content="Tu es…"), ChatMessage(role="user", content="Baumont ?"),
            ChatMessage(role="assistant", content="CHF 4 200 HT"), ChatMessage(role="user", content="  Fais pareil  ")]
    assert last_user_question(msgs, 100) == "Fais pareil"
    parts = ChatMessage.model_validate({"role": "user", "content": [
        {"type": "text", "text": "Première"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "ligne"}]})
    assert last_user_question([parts], 100) == "Première\nligne"
    with pytest.raises(ApiError, match=r"messages\[0\].content: the question is 11 characters long; the limit is 10 \(api.max_question_chars\)"):
        last_user_question([ChatMessage(role="user", content="x" * 11)], 10)
    with pytest.raises(ApiError, match="no user message"):
        last_user_question([ChatMessage(role="assistant", content="x")], 10)


# ----------------------------------------------------------------------------- the endpoints


def test_stream_and_non_stream_give_the_same_text() -> None:
    """With Markdown sources (``api.citations = "markdown"``): native sources differ by design
    (tests/unit/test_api_openwebui.py)."""
    svc = Service(answer())
    with client(svc, citations="markdown") as c:
        whole = c.post("/v1/chat/completions", json=chat("q"), headers=H)
        streamed = c.post("/v1/chat/completions", json=chat("q", stream=True), headers=H)
    text = whole.json()["choices"][0]["message"]["content"]
    events = sse(streamed.text)
    assert events[-1] == "[DONE]" and streamed.headers["content-type"].startswith("text/event-stream")
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks) == text
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["ancre"] == whole.json()["ancre"]
    assert whole.headers["x-ancre-ancree"] == "true" and svc.asked == [("q", "alice.martin@axonix.ch")] * 2


def test_the_last_user_message_is_asked_with_the_earlier_user_questions_only() -> None:
    svc = Service(answer())
    body = {"model": "ancre", "messages": [{"role": "system", "content": "Tu es utile."},
                                           {"role": "user", "content": "Baumont ?"},
                                           {"role": "assistant", "content": "CHF 4 200 HT"},
                                           {"role": "user", "content": "Fais pareil pour Rochat"}]}
    with client(svc) as c:
        assert c.post("/v1/chat/completions", json=body, headers=H).status_code == 200
    assert svc.asked == [("Fais pareil pour Rochat", "alice.martin@axonix.ch")]
    assert svc.histories == [["Baumont ?"]]  # the earlier answer's text is never passed on


def test_query_verdicts() -> None:
    with client(Service(answer(ancree=None))) as c:
        r = c.post("/query", json={"question": "q"}, headers=H)
    assert r.status_code == 200 and r.json()["ancree"] is None and r.json()["verification"] == "non_effectuee"
    with client(Service(answer(ancree=False, controles=("sans_citation",)))) as c:
        r = c.post("/query", json={"question": "q"}, headers=H)
    assert r.status_code == 422 and r.json()["reponse_bloquee"] and r.json()["controles"] == ["sans_citation"]


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (DirectoryError("directory file /etc/secret/directory.json: cannot read"), 503, "directory_unavailable"),
        (AuditError("/var/lib/ancre/audit: disk full"), 503, "audit_unavailable"),
        (LlmError(f"qwen2.5:14b at http://gpu:11434: HTTP 500: {SECRET_TEXT}"), 502, "model_unavailable"),
        (RuntimeError(f"bug while reading {SECRET_TEXT}"), 500, "internal_error"),
    ],
)
def test_errors_are_bland(error: Exception, status: int, code: str) -> None:
    with client(Service(error)) as c:
        for path, body in (("/query", {"question": "q"}), ("/v1/chat/completions", chat("q")),
                           ("/v1/chat/completions", chat("q", stream=True))):
            r = c.post(path, json=body, headers=H)
            assert r.status_code == status, (path, r.text)
            assert r.json()["error"]["code"] == code and set(r.json()["error"]) == {"message", "type", "param", "code"}
            assert SECRET_TEXT not in r.text and "secret" not in r.text and "Traceback" not in r.text


def test_failure_after_the_first_pieces_is_an_error_event() -> None:
    with client(Service(answer(), fail_after=LlmError(f"stream cut: {SECRET_TEXT}"))) as c:
        r = c.post("/v1/chat/completions", json=chat("q", stream=True), headers=H)
    events = sse(r.text)
    assert r.status_code == 200 and events[-1] == "[DONE]"
    error = events[-2]["error"]
    assert error["code"] == "model_unavailable" and error["type"] == "server_error"
    assert error["message"].startswith("Le modèle de langage qui rédige les réponses d'ancre ne répond pas (il est peut-être en cours de chargement).")  # staff read it
    assert SECRET_TEXT not in r.text


def test_limits() -> None:
    svc = Service(answer())
    with client(svc, max_body_bytes=2048, max_question_chars=50) as c:
        r = c.post("/query", json={"question": "x" * 3000}, headers=H)
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"

        def chunked() -> Iterator[bytes]:  # no Content-Length: counted while read
            yield b'{"question": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}'

        r = c.post("/query", content=chunked(), headers={**H, "Content-Type": "application/json"})
        assert r.status_code == 413
        r = c.post("/query", json={"question": "x" * 51}, headers=H)
        assert r.status_code == 422 and "the limit is 50 (api.max_question_chars)" in r.json()["error"]["message"]
        assert c.post("/query", json={"question": "x" * 50}, headers=H).status_code == 200
    assert svc.asked == [("x" * 50, "alice.martin@axonix.ch")]


def test_validation_errors_name_the_field() -> None:
    with client(Service(answer())) as c:
        r = c.post("/v1/chat/completions", json={"model": "ancre", "messages": [{"role": "user"}, {"content": SECRET_TEXT}]}, headers=H)
        assert r.status_code == 422 and r.json()["error"]["param"] == "messages[1].role"
        assert SECRET_TEXT not in r.text
        r = c.post("/query", content=b"{", headers={**H, "Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["error"]["param"] == "body"
        r = c.post("/query", json={}, headers=H)
        assert r.status_code == 422 and r.json()["error"]["message"] == "question: Field required"
        r = c.post("/v1/chat/completions", json=chat(""), headers=H)
        assert r.status_code == 422 and r.json()["error"]["param"] == "messages[0].content"
        assert r.json()["error"]["message"] == "Votre message ne contient pas de question : écrivez votre question."
        r = c.post("/query", json={"question": " "}, headers=H)
        assert r.status_code == 422 and r.json()["error"]["message"] == "question: the question is empty"


def test_auth_runs_before_the_service() -> None:
    svc = Service(answer())
    with client(svc) as c:
        assert c.post("/query", json={"question": "q"}).status_code == 401
        assert c.post("/query", json={"question": "q"}, headers={"Authorization": f"Bearer {KEY}"}).status_code == 401
        assert c.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert svc.asked == []


def test_health_and_metrics_need_no_key() -> None:
    with client(Service(answer())) as c:
        r = c.get("/health")
        assert r.status_code == 200
        assert r.json() == {"status": "ok", "checks": {"store": {"status": "ok", "points": {"documents": 3, "documentation": 3}},
                                                       "directory": {"status": "ok"}, "llm": {"status": "disabled", "kind": "none"},
                                                       "index": {"status": "ok"}}}
        assert "ancre_api_requests_total" in c.get("/metrics").text
    with client(Service(answer(), directory_fails=True)) as c:
        r = c.get("/health")
        assert r.status_code == 503 and r.json()["checks"]["directory"] == {"status": "error", "error": "DirectoryError"}
        assert "/etc/secret" not in r.text


def test_no_key_no_api() -> None:
    with pytest.raises(ConfigError, match=r"api.api_key is required"):
        create_app(Service(answer()), load_settings(None))


# ----------------------------------------------------------------------------- bad text, bad bodies


BAD_TEXT_BODIES = [
    ("/query", b'{"question": "Forfait \\ud800 Rochat ?"}', "question"),
    ("/v1/chat/completions", b'{"model": "ancre", "messages": [{"role": "user", "content": "x\\udc00"}]}',
     "messages[0].content"),
    ("/v1/chat/completions", b'{"model": "ancre", "stream": true, "messages": [{"role": "user", "content": "x\\udc00"}]}',
     "messages[0].content"),
    ("/v1/chat/completions",
     b'{"model": "ancre", "messages": [{"role": "user", "content": [{"type": "text", "text": "\\udbff!"}]}]}',
     "messages[0].content[0].text"),
    ("/v1/chat/completions", b'{"model": "ancre", "user": "\\ud800", "messages": [{"role": "user", "content": "q"}]}',
     "user"),  # an ignored extra field: bad text anywhere in the body is refused
]


@pytest.mark.parametrize(("path", "body", "param"), BAD_TEXT_BODIES)
def test_bad_text_is_422_at_the_edge(path: str, body: bytes, param: str) -> None:
    svc = Service(answer())
    with client(svc) as c:
        r = c.post(path, content=body, headers={**H, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["param"] == param and r.json()["error"]["code"] == "invalid_value"
    if path == "/query":
        assert "lone surrogate" in r.json()["error"]["message"]
    else:  # staff read it through Open WebUI: French, the detail is in the log
        assert r.json()["error"]["message"].startswith("ancre n'a pas pu traiter la demande d'Open WebUI")
    assert svc.asked == []  # never reached the query core (embedder, model, audit)


@pytest.mark.parametrize("body", [b'{"question": "\xff\xfe"}', b"\xff{", b"[" * 100_000 + b"]" * 100_000])
def test_an_unparseable_body_is_422_not_400(body: bytes) -> None:
    svc = Service(answer())
    with client(svc, max_body_bytes=1024 * 1024) as c:
        for path in ("/query", "/v1/chat/completions"):
            r = c.post(path, content=body, headers={**H, "Content-Type": "application/json"})
            assert r.status_code == 422, (path, r.text)
            assert r.json()["error"]["param"] == "body" and r.json()["error"]["code"] == "invalid_value"
    assert svc.asked == []
    # and the published schema says so
    doc = create_app(svc, load_settings(None, api={"api_key": KEY})).openapi()
    for path in ("/query", "/v1/chat/completions"):
        assert "422" in doc["paths"][path]["post"]["responses"]
