"""Open WebUI's side requests (title, tags, follow-ups…): recognised by the task header the
connection sends (``{{TASK}}``), answered in the format Open WebUI parses, never asked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from ancre.api.app import create_app
from ancre.api.schemas import ChatMessage
from ancre.api.tasks import short_title, task_reply, title_question
from ancre.config import load_settings
from ancre.query.answer import Answer
from ancre.query.prompt import REFUSAL

KEY = "unit-key"
H = {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": "alice.martin@axonix.ch"}
QUESTION = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"
ANSWER = "> 4\\. Conditions financières\n[03_Contrat.docx]"
# Open WebUI 0.12's default title prompt, rendered (open_webui.config, {{MESSAGES:END:2}})
TITLE_PROMPT = f"""### Task:
Generate a concise title summarizing the chat history.
### Output:
JSON format: {{ "title": "your concise title here" }}
### Chat History:
<chat_history>
USER: {QUESTION}
ASSISTANT: {ANSWER}
</chat_history>"""
FOLLOW_UP_PROMPT = TITLE_PROMPT.replace("title summarizing", "list of follow-ups") + "x" * 5000


class _Service:
    """Records every question; answers the refusal."""

    def __init__(self) -> None:
        self.store, self.directory = None, None
        self.asked: list[str] = []

    def ask(self, question: str, user: str, *, asked_by: str | None = None) -> Answer:
        self.asked.append(question)
        return Answer(REFUSAL, REFUSAL, (), True, ("refus",), (), "non_requise", False)

    def stream(self, question: str, user: str, *, asked_by: str | None = None) -> Iterator[str | Answer]:
        yield REFUSAL
        yield self.ask(question, user)


def client(svc: _Service, **api: Any) -> TestClient:
    return TestClient(create_app(svc, load_settings(None, api={"api_key": KEY, **api})), raise_server_exceptions=False)


def body(content: str, stream: bool = False) -> dict[str, Any]:
    return {"model": "ancre", "stream": stream, "messages": [{"role": "user", "content": content}]}


def content_of(r: Any, stream: bool) -> str:
    if not stream:
        return str(r.json()["choices"][0]["message"]["content"])
    events = [e[6:] for e in r.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


@pytest.mark.parametrize("stream", [False, True])
def test_side_requests_are_answered_without_asking(stream: bool) -> None:
    svc = _Service()
    expected = {
        "title_generation": {"title": "Quel est le forfait mensuel du contrat de…"},
        "tags_generation": {"tags": []},
        "follow_up_generation": {"follow_ups": []},
        "query_generation": {"queries": []},
        "autocomplete_generation": {"text": ""},
        "image_prompt_generation": {"prompt": ""},
        "function_calling": {"tool_calls": []},
    }
    with client(svc) as c:
        for task, parsed in expected.items():
            prompt = FOLLOW_UP_PROMPT if task == "follow_up_generation" else TITLE_PROMPT
            r = c.post("/v1/chat/completions", json=body(prompt, stream), headers={**H, "X-OpenWebUI-Task": task})
            assert r.status_code == 200, r.text
            assert json.loads(content_of(r, stream)) == parsed
        r = c.post("/v1/chat/completions", json=body(TITLE_PROMPT, stream), headers={**H, "X-OpenWebUI-Task": "emoji_generation"})
        assert r.status_code == 200 and content_of(r, stream) == ""
        metrics = c.get("/metrics").text
    assert svc.asked == []
    assert 'ancre_api_tasks_total{task="title_generation"} 1.0' in metrics


def test_the_users_question_is_still_a_question() -> None:
    """Open WebUI sends the header with an empty value for the question itself."""
    svc = _Service()
    with client(svc) as c:
        for headers in (H, {**H, "X-OpenWebUI-Task": ""}, {**H, "X-OpenWebUI-Task": "  "}):
            r = c.post("/v1/chat/completions", json=body(QUESTION), headers=headers)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == REFUSAL
    assert svc.asked == [QUESTION] * 3


def test_side_requests_still_need_the_key_and_identity() -> None:
    svc = _Service()
    with client(svc) as c:
        r = c.post("/v1/chat/completions", json=body(TITLE_PROMPT), headers={"X-OpenWebUI-Task": "title_generation"})
        assert r.status_code == 401


def test_task_header_can_be_renamed_or_disabled() -> None:
    svc = _Service()
    with client(svc, task_header="X-Task") as c:
        r = c.post("/v1/chat/completions", json=body(TITLE_PROMPT), headers={**H, "X-Task": "tags_generation"})
        assert json.loads(r.json()["choices"][0]["message"]["content"]) == {"tags": []}
    with client(svc, task_header="") as c:
        r = c.post("/v1/chat/completions", json=body(QUESTION), headers={**H, "X-OpenWebUI-Task": "tags_generation"})
        assert r.json()["choices"][0]["message"]["content"] == REFUSAL
    assert svc.asked == [QUESTION]


def test_title_from_the_question() -> None:
    assert title_question([ChatMessage(role="user", content=TITLE_PROMPT)]) == QUESTION
    assert title_question([ChatMessage(role="user", content="Un titre ?")]) == ""
    assert short_title("  Code d'accès  salle serveur ? ") == "Code d'accès salle serveur"
    assert len(short_title(QUESTION)) <= 50 and short_title(QUESTION).endswith("…")
    assert json.loads(task_reply("title_generation", [ChatMessage(role="user", content="x")])) == {"title": ""}
    assert task_reply("something_new", []) == ""
