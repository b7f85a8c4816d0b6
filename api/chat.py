"""OpenAI-compatible routes for Open WebUI (docs/API.md):

``GET /v1/models``
    The one model (``api.model_id``, default ``ancre``). Service key only: Open WebUI also lists
    models without a user (connection check), and the list discloses nothing else.
``POST /v1/chat/completions``
    OpenAI schema, non-streamed or ``stream: true`` (server-sent events ending with
    ``data: [DONE]``). The question is the **last user message**; the earlier *user* messages are
    passed as the conversation a follow-up is resolved from (:mod:`ancre.query.conversation`),
    earlier answers never: they neither widen retrieval nor reach the model. What Open WebUI wraps
    around a message (an attached file, knowledge) is set aside (:mod:`ancre.api.attachments`).
    The text is the model's answer as written (``Answer.raw``) with its sources — as Open WebUI
    ``source`` events with ``[n]`` citations when streamed (``api.citations = "native"``), else as
    a Markdown block — and the notes staff need (:mod:`ancre.api.delivery`). The verdict goes to
    the ``x-ancre-ancree`` / ``x-ancre-verification`` headers and an ``ancre`` object in the body
    (non-streamed), or to an ``ancre`` object on the last SSE chunk.
    A request carrying a non-empty ``api.task_header`` (Open WebUI's side requests) is answered
    at once without retrieval, model call or audit record (:mod:`ancre.api.tasks`).

    A streamed answer is made in a worker thread and its status line waits for its first piece,
    which comes only after the question's ``start`` audit record is written
    (:mod:`ancre.audit.record`): when it can't be, the answer is HTTP 503 ``audit_unavailable`` and
    no byte of it is sent. A client that disconnects (Open WebUI's Stop) stops the answer at once:
    the model request is cancelled and the audit record written then
    (:class:`~ancre.api.streaming.CancellableStream`).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ancre.api.attachments import user_turn
from ancre.api.delivery import Delivery, StreamWriter
from ancre.api.errors import ERROR_RESPONSES, ApiError, stream_error
from ancre.api.identity import Identity
from ancre.api.middleware import ApiMetrics
from ancre.api.render import verdict_headers, verdict_out
from ancre.api.schemas import ChatCompletion, ChatCompletionRequest, ErrorResponse, ModelList
from ancre.api.service import ApiContext, AuthDependencies
from ancre.api.staff import StaffMessages
from ancre.api.streaming import CancellableStream
from ancre.api.tasks import task_label, task_reply
from ancre.query.answer import Answer, AnswerStream

log = logging.getLogger("ancre.api")

_STREAM_DOC = {"content": {"text/event-stream": {"schema": {"type": "string"}}},
               "description": "The answer; with stream=true, server-sent events ending with 'data: [DONE]'."}


def chat_router(ctx: ApiContext, auth: AuthDependencies) -> APIRouter:
    """``/v1/models`` and ``/v1/chat/completions`` over ``ctx``."""
    router = APIRouter()
    cfg = ctx.settings.api
    staff = StaffMessages(cfg.support_contact)

    @router.get("/v1/models", response_model=ModelList, responses={401: ERROR_RESPONSES[401]},
                dependencies=[Depends(auth.require_key)])
    def list_models() -> dict[str, Any]:
        """The one model this server serves."""
        return {"object": "list", "data": [{"id": cfg.model_id, "object": "model", "created": ctx.started, "owned_by": "ancre"}]}

    @router.post("/v1/chat/completions", response_model=ChatCompletion,
                 responses={**ERROR_RESPONSES, 404: {"model": ErrorResponse}, 200: _STREAM_DOC})
    def chat_completions(request: Request, body: ChatCompletionRequest,
                         identity: Identity = Depends(auth.require_identity)) -> Response:
        """OpenAI-compatible chat completion; the question is the last user message."""
        if body.model != cfg.model_id:
            raise ApiError(
                404, "model_not_found", f"model {body.model[:100]!r} does not exist; this server serves {cfg.model_id!r}",
                param="model",
            )
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        task = (request.headers.get(cfg.task_header) or "").strip() if cfg.task_header else ""
        if task:
            label = task_label(task)
            ctx.metrics.tasks.labels(label).inc()
            log.info("Open WebUI side request %s answered without retrieval", label)
            return _task_response(task_reply(task, body.messages), bool(body.stream), cid, created, cfg.model_id)
        turn = user_turn(body.messages, cfg.max_question_chars)
        # user turns only: an earlier answer is no evidence
        extra = {"history": list(turn.history)} if turn.history else {}
        ctx.require_ready()
        delivery = Delivery(turn, bool(body.stream) and cfg.citations == "native", identity.email, staff)
        if body.stream:
            gen = ctx.service.stream(turn.question, identity.user, asked_by=identity.header, **extra)
            return CancellableStream(
                _sse(gen, cid, created, cfg.model_id, ctx.metrics, delivery.writer(), staff),
                media_type="text/event-stream",
                cancel=gen.cancel if isinstance(gen, AnswerStream) else lambda: None,
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        answer = ctx.service.ask(turn.question, identity.user, asked_by=identity.header, **extra)
        ctx.metrics.answer("chat", answer)
        return JSONResponse(_completion(cid, created, cfg.model_id, answer, delivery.complete(answer)),
                            headers=verdict_headers(answer))

    return router


def _completion(cid: str, created: int, model: str, answer: Answer, text: str) -> dict[str, Any]:
    """A non-streamed chat completion carrying ``text`` (``answer`` written out) and the ``ancre`` verdict."""
    return {
        "id": cid, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "ancre": verdict_out(answer),
    }


def _chunk(cid: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None,
           extra: dict[str, Any] | None = None) -> bytes:
    obj: dict[str, Any] = {
        "id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    if extra:
        obj.update(extra)
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def _task_response(text: str, stream: bool, cid: str, created: int, model: str) -> Response:
    """A side request's reply ``text`` as a chat completion, streamed (SSE) or not."""
    if stream:
        events = [_chunk(cid, created, model, {"role": "assistant", "content": ""}),
                  *([_chunk(cid, created, model, {"content": text})] if text else []),
                  _chunk(cid, created, model, {}, "stop"), b"data: [DONE]\n\n"]
        return StreamingResponse(iter(events), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    return JSONResponse({
        "id": cid, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                     "logprobs": None}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })


def _event_chunk(cid: str, created: int, model: str, event: dict[str, Any]) -> bytes:
    """A chunk carrying an Open WebUI ``event`` and no choice (as a usage chunk has none)."""
    obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
           "event": event}
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def _sse(rest: Iterator[str | Answer], cid: str, created: int, model: str, metrics: ApiMetrics,
         writer: StreamWriter, staff: StaffMessages) -> Iterator[bytes]:
    """The SSE body: a role chunk, the text as ``writer`` writes the raw pieces, then its end
    (footer), one chunk per Open WebUI ``source`` event, a last chunk with
    ``finish_reason: "stop"`` and the ``ancre`` verdict, then ``data: [DONE]``. Nothing is
    yielded before the answer's first piece: a failure until then is raised (answered with its
    status); a failure after the headers went out becomes an ``{"error": …}`` event (OpenAI's
    SDKs raise on it)."""
    first = next(rest)  # retrieval, the audit record and the first piece: errors still become statuses
    try:
        yield _chunk(cid, created, model, {"role": "assistant", "content": ""})
        item: str | Answer = first
        while True:
            if isinstance(item, Answer):
                metrics.answer("chat", item)
                text, events = writer.end(item)
                if text:
                    yield _chunk(cid, created, model, {"content": text})
                for event in events:
                    yield _event_chunk(cid, created, model, event)
                yield _chunk(cid, created, model, {}, "stop", {"ancre": verdict_out(item)})
                break
            text = writer.text(item) if item else ""
            if text:
                yield _chunk(cid, created, model, {"content": text})
            try:
                item = next(rest)
            except StopIteration:
                tail = writer.abandon()
                if tail:
                    yield _chunk(cid, created, model, {"content": tail})
                break
    except Exception as e:  # the status line is gone: report in the stream
        yield f"data: {json.dumps(stream_error(cid, e, staff), ensure_ascii=False)}\n\n".encode()
    finally:
        close = getattr(rest, "close", None)
        if close is not None:
            close()
    yield b"data: [DONE]\n\n"


__all__ = ["chat_router"]
