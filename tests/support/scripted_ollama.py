"""A scripted Ollama answering as the answering model (qwen2.5:14b) and as the grounding judge
(qwen3:4b): :class:`~support.model_servers.FakeOllama` — Ollama's documented API (``/api/chat``
with ``prompt_eval_count`` and ``done_reason``, ``/api/show``, ``/api/tags``, ``/api/version``,
404 for an unknown model, a prompt longer than ``num_ctx`` cut as the runner cuts it) — on a
:class:`~support.httpserver.ScriptedServer`.

``script(srv, answer, judge)`` routes ``POST /api/chat`` by the requested model; an answer is its
content, or a function of the request (a :class:`~support.model_servers.Seen`, with the prompt as
evaluated) returning the content or any ScriptedServer answer; a streamed one comes in NDJSON
pieces of 3 tokens.
"""

from __future__ import annotations

from typing import Any

from support.httpserver import Request, ScriptedServer
from support.model_servers import FakeOllama, Model, Scripted

ANSWER_MODEL, JUDGE_MODEL = "qwen2.5:14b", "qwen3:4b"
GROUNDED = '{"ancree": true, "affirmations_non_sourcees": []}'
NOT_GROUNDED = '{"ancree": false, "affirmations_non_sourcees": ["CHF 4 200 HT"]}'


def message(content: str, model: str = ANSWER_MODEL, thinking: str | None = None) -> dict[str, Any]:
    """A complete ``/api/chat`` answer body (docs/api.md of ollama/ollama, "Chat request (No
    streaming)")."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        msg["thinking"] = thinking
    return {"model": model, "created_at": "2026-01-15T08:30:00.000000Z", "message": msg, "done": True,
            "done_reason": "stop"}


def script(srv: ScriptedServer, answer: Scripted, judge: Scripted = GROUNDED, **kw: Any) -> FakeOllama:
    """Serve the answering model and the judge on ``srv`` (``kw``: :class:`FakeOllama` options)."""
    return FakeOllama(srv, {ANSWER_MODEL: Model(answer), JUDGE_MODEL: Model(judge, 40960, "qwen3")}, **kw)


def chats(srv: ScriptedServer, model: str = ANSWER_MODEL) -> list[Request]:
    """The ``/api/chat`` requests made for ``model`` (model loads with no message excluded)."""
    return [r for r in srv.requests_to("/api/chat", "POST") if r.json["model"] == model and r.json.get("messages")]


def prompt_of(req: Request) -> str:
    """Everything the model was given (all messages' contents, joined)."""
    return "\n".join(m["content"] for m in req.json["messages"])


def user_part(req: Request) -> str:
    """The last message the model was given: the question with the extracts (the system prompt,
    the same for every question, excluded — its example citation names a real file)."""
    return str(req.json["messages"][-1]["content"])


__all__ = ["ANSWER_MODEL", "GROUNDED", "JUDGE_MODEL", "NOT_GROUNDED", "chats", "message", "prompt_of", "script", "user_part"]
