"""A scripted Ollama (``/api/chat``, ``/api/version``) on a :class:`~support.httpserver.ScriptedServer`,
answering as the answering model (qwen2.5:14b) and as the grounding judge (qwen3:4b).

The same approach as ``tests/integration/test_grounded_answers.py``: ``script(srv, answer, judge)``
routes ``POST /api/chat`` by the requested model; a streamed request gets the answer in
7-character NDJSON pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from support.httpserver import Request, ScriptedServer, ndjson

ANSWER_MODEL, JUDGE_MODEL = "qwen2.5:14b", "qwen3:4b"
GROUNDED = '{"ancree": true, "affirmations_non_sourcees": []}'
NOT_GROUNDED = '{"ancree": false, "affirmations_non_sourcees": ["CHF 4 200 HT"]}'

Scripted = str | Callable[[Request], Any] | Any
"""An answer: the content (str), a function of the request returning the content (str) or any
ScriptedServer answer, or a fixed ScriptedServer answer."""


def message(content: str, model: str = ANSWER_MODEL, thinking: str | None = None) -> dict[str, Any]:
    """A complete ``/api/chat`` answer body."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        msg["thinking"] = thinking
    return {"model": model, "message": msg, "done": True, "done_reason": "stop"}


def _reply(content: str, req: Request) -> Any:
    model = req.json["model"]
    if req.json.get("stream"):
        pieces = [content[i : i + 7] for i in range(0, len(content), 7)]
        frames = [{"model": model, "message": {"role": "assistant", "content": p}, "done": False} for p in pieces]
        return ndjson([*frames, {"model": model, "message": {"role": "assistant", "content": ""}, "done": True}])
    return 200, message(content, model)


def script(srv: ScriptedServer, answer: Scripted, judge: Scripted = GROUNDED) -> None:
    """Route ``POST /api/chat`` (by model) and ``GET /api/version`` on ``srv``."""

    def handler(req: Request) -> Any:
        scripted = judge if req.json["model"] == JUDGE_MODEL else answer
        if callable(scripted):
            scripted = scripted(req)
        return _reply(scripted, req) if isinstance(scripted, str) else scripted

    srv.route("POST", "/api/chat", handler)
    srv.route("GET", "/api/version", (200, {"version": "0.12.0"}))


def chats(srv: ScriptedServer, model: str = ANSWER_MODEL) -> list[Request]:
    """The ``/api/chat`` requests made for ``model``."""
    return [r for r in srv.requests_to("/api/chat", "POST") if r.json["model"] == model]


def prompt_of(req: Request) -> str:
    """Everything the model was given (all messages' contents, joined)."""
    return "\n".join(m["content"] for m in req.json["messages"])


def user_part(req: Request) -> str:
    """The last message the model was given: the question with the extracts (the system prompt,
    the same for every question, excluded — its example citation names a real file)."""
    return str(req.json["messages"][-1]["content"])


__all__ = ["ANSWER_MODEL", "GROUNDED", "JUDGE_MODEL", "NOT_GROUNDED", "chats", "message", "prompt_of", "script", "user_part"]
