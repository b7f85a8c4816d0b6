"""The RAG API (FastAPI): OpenAI-compatible ``/v1`` for Open WebUI, ``/query`` for machines.

A thin layer over :class:`~ancre.query.answer.AnswerService` (DESIGN.md "Query" step 9):

``GET /v1/models``
    The one model (``api.model_id``, default ``ancre``). Service key only: Open WebUI also lists
    models without a user (connection check), and the list discloses nothing else.
``POST /v1/chat/completions``
    OpenAI schema, non-streamed or ``stream: true`` (server-sent events ending with
    ``data: [DONE]``). The question is the **last user message only**: earlier turns never widen
    retrieval nor reach the model (« Fais pareil pour l'étude Rochat » is answered from what that
    sentence retrieves for that user). The answer is always returned, whatever its verdict: the
    text is the model's answer as written (``Answer.raw``) followed by a sources block (files and
    their UNC folders / SharePoint URLs, :func:`sources_block`) — the same in both modes, so the
    streamed text equals the non-streamed one. The verdict goes to the audit log, to the
    ``x-ancre-ancree`` (``true``/``false``/``null``) and ``x-ancre-verification`` response headers
    and an ``ancre`` object in the body (non-streamed), or to an ``ancre`` object on the last SSE
    chunk (the one with ``finish_reason: "stop"``; headers are gone by then).
    A request carrying a non-empty ``api.task_header`` (Open WebUI's side requests: title, tags,
    follow-ups, queries, autocomplete…) is answered at once in the format Open WebUI parses,
    without retrieval, model call or audit record (:mod:`ancre.api.tasks`).
``POST /query`` ``{"question"}``
    200 ``{reponse, sources, ancree, controles, verification, extractive}`` when the answer is
    grounded (``ancree: true``, refusals included) or not established (``ancree: null``,
    ``verification: "non_effectuee"``: the judge could not run — DESIGN.md lets such answers pass,
    and says so); 422 ``{reponse_bloquee, sources, ancree: false, controles, verification,
    citations_inventees, affirmations_non_sourcees}`` when it is not grounded (a control or the
    judge refused it). ``reponse`` has each citation followed by its folder.
``GET /health``
    Store, directory and answering-model reachability: 200 or 503, JSON. No authentication.
``GET /metrics``
    Prometheus text: the API's metrics and, under ``ancre serve``, the daemon's. No authentication.

Authentication and identity: :mod:`ancre.api.identity` (401 on failure). Errors always have
OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``: 422 for a bad body (the
message names the field), 413 beyond ``api.max_body_bytes``, 422 beyond
``api.max_question_chars``, 408 when the body has not arrived within ``api.body_timeout_s``,
503 when the directory cannot be read (fail closed, never "no
filter"), the index or the audit log is unavailable, 502 when the answering model fails, and a
bland 500 for anything else (logged server-side). No message carries a stack trace or document
text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import httpx
from fastapi import Depends, FastAPI, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import APIKeyHeader, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ancre.acl.directory import Directory
from ancre.api.identity import AuthError, Identity, Secrets, authenticate, check_api_key
from ancre.api.tasks import task_label, task_reply
from ancre.api.schemas import (
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessage,
    INVALID_TEXT,
    ErrorResponse,
    Health,
    ModelList,
    QueryAnswer,
    QueryBlocked,
    QueryRequest,
)
from ancre.config import Settings
from ancre.errors import AncreError, AuditError, DirectoryError, EmbedderError, StoreError
from ancre.index.store import Store
from ancre.models import COLLECTIONS
from ancre.query.answer import Answer, unverified_note
from ancre.query.enrich import format_location
from ancre.query.llm import LlmError
from ancre.settings.query import DEFAULT_OLLAMA_URL, LlmConfig

log = logging.getLogger("ancre.api")

HEALTH_TIMEOUT_S = 3.0
"""Seconds allowed to each reachability probe of ``/health``."""
PROBE_USER = "ancre-health-probe"
"""A name looked up in the directory by ``/health`` (unknown: only reachability matters)."""
WARNING_UNGROUNDED = (
    "⚠️ Attention : cette réponse n'a pas pu être rattachée aux documents disponibles "
    "(réponse non ancrée) ; vérifiez-la avant de vous en servir."
)
"""Appended to a ``/v1`` answer whose verdict is ``ancree: false`` (the answer is still given)."""
_FASTAPI_BODY_ERROR = "There was an error parsing the body"
"""The detail of the HTTP 400 FastAPI raises when the body can't be decoded (answered 422 here)."""


class QueryService(Protocol):
    """What the API needs from the query core (:class:`~ancre.query.answer.AnswerService`)."""

    store: Store
    directory: Directory

    def ask(self, question: str, user: str, *, identity: str | None = None) -> Answer: ...

    def stream(self, question: str, user: str, *, identity: str | None = None) -> Iterator[str | Answer]: ...


class ApiError(AncreError):
    """An error answered as ``status`` with OpenAI's error shape."""

    def __init__(self, status: int, code: str, message: str, *, param: str | None = None, type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param, self.type = status, code, message, param, type


# ----------------------------------------------------------------------------------- rendering


def error_body(message: str, type: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _error(status: int, message: str, type: str, code: str | None, param: str | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, type, code, param), status_code=status, headers=headers)


def sources_out(answer: Answer) -> list[dict[str, str]]:
    """The answer's sources as JSON objects ``{filename, location, path}``."""
    return [{"filename": s.filename, "location": s.location, "path": s.path} for s in answer.sources]


def unchecked_out(answer: Answer) -> list[dict[str, Any]]:
    """``documents_ecartes``: ``[{source, documents, raison}]``, the documents left out because
    their rights could not be checked live (never their names)."""
    return [{"source": u.source, "documents": u.documents, "raison": u.outcome} for u in answer.unverified]


def verdict_out(answer: Answer) -> dict[str, Any]:
    """The ``ancre`` object: ``{ancree, verification, controles, sources, extractive,
    documents_ecartes}``."""
    return {
        "ancree": answer.ancree,
        "verification": answer.verification,
        "controles": list(answer.controles),
        "sources": sources_out(answer),
        "extractive": answer.extractive,
        "documents_ecartes": unchecked_out(answer),
    }


def verdict_headers(answer: Answer) -> dict[str, str]:
    """``x-ancre-ancree`` (``true``/``false``/``null``) and ``x-ancre-verification``."""
    return {
        "x-ancre-ancree": {True: "true", False: "false", None: "null"}[answer.ancree],
        "x-ancre-verification": answer.verification,
    }


def sources_block(answer: Answer) -> str:
    """What follows the answer's text on ``/v1``: a Markdown « Sources » list, one line per
    document (file name, then its folder as a code span / its URL as an autolink), and a warning
    line when the answer is not grounded, and one when documents were left out because their
    rights could not be checked live. ``""`` for a refusal (no source, grounded) otherwise."""
    parts: list[str] = []
    if answer.sources:
        lines = [f"- {s.filename} — {format_location(s.location)}" if s.location else f"- {s.filename}"
                 for s in answer.sources]
        parts.append("**Sources :**\n" + "\n".join(lines))
    if answer.ancree is False:
        parts.append(WARNING_UNGROUNDED)
    if answer.unverified:
        parts.append(f"⚠️ {unverified_note(answer.unverified)}")
    return "\n\n---\n" + "\n\n".join(parts) if parts else ""


def last_user_question(messages: Sequence[ChatMessage], max_chars: int) -> str:
    """The text of the last ``user`` message (text parts joined by newlines). Raises
    :class:`ApiError` 422 naming ``messages`` when there is none or it is empty, or the limit
    (``api.max_question_chars``) when it is longer than ``max_chars`` characters."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role != "user":
            continue
        if isinstance(m.content, str):
            text = m.content
        else:
            text = "\n".join(p.text for p in (m.content or []) if p.type == "text" and p.text)
        return check_question(text, max_chars, f"messages[{i}].content")
    raise ApiError(422, "invalid_value", "messages: no user message (the question is the last user message)", param="messages")


def check_question(text: str, max_chars: int, param: str) -> str:
    """``text`` stripped; raises :class:`ApiError` 422 when empty or over ``max_chars`` characters."""
    text = text.strip()
    if not text:
        raise ApiError(422, "invalid_value", f"{param}: the question is empty", param=param)
    if len(text) > max_chars:
        raise ApiError(
            422, "question_too_long",
            f"{param}: the question is {len(text)} characters long; the limit is {max_chars} (api.max_question_chars)",
            param=param,
        )
    return text


def _param(loc: Sequence[Any]) -> str:
    """``("body", "messages", 0, "role")`` → ``messages[0].role``."""
    out = ""
    for part in loc[1:] if loc and loc[0] in ("body", "query", "header", "path") else loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


# ----------------------------------------------------------------------------------- middleware


class ApiMetrics:
    """The API's Prometheus metrics on :attr:`registry`: ``ancre_api_requests_total{route,
    method,status}``, ``ancre_api_request_duration_seconds{route}`` (until the last byte, streams
    included), ``ancre_api_answers_total{endpoint,ancree}``."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("ancre_api_requests", "HTTP requests", ["route", "method", "status"], registry=r)
        self.duration = Histogram(
            "ancre_api_request_duration_seconds", "Request duration until the last byte", ["route"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600), registry=r,
        )
        self.answers = Counter("ancre_api_answers", "Answers given, by verdict", ["endpoint", "ancree"], registry=r)
        self.tasks = Counter("ancre_api_tasks", "Open WebUI side requests answered without retrieval", ["task"],
                             registry=r)

    def answer(self, endpoint: str, answer: Answer) -> None:
        self.answers.labels(endpoint, {True: "true", False: "false", None: "null"}[answer.ancree]).inc()


class _MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]
        t0 = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(label, scope["method"], str(status[0])).inc()
            self.metrics.duration.labels(label).observe(time.perf_counter() - t0)


class _BodyLimitMiddleware:
    """Reads the whole body (at most ``max_bytes``, within ``timeout_s`` seconds of the request's
    headers) before the app runs; beyond the size: 413; a body that has not fully arrived in
    time: 408 and the connection is closed (a client that never sends its body holds nothing)."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = _error(
            413, f"request body larger than {self.max_bytes} bytes (api.max_body_bytes)", "invalid_request_error",
            "request_too_large",
        )
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            try:
                n = int(declared)
            except ValueError:
                await _error(400, "invalid Content-Length", "invalid_request_error", "bad_request")(scope, receive, send)
                return
            if n > self.max_bytes:
                await too_large(scope, receive, send)
                return
        body = bytearray()
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                log.info("%s %s: request body not received within %g s (api.body_timeout_s): 408",
                         scope.get("method"), scope.get("path"), self.timeout_s)
                await _error(
                    408, f"request body not received within {self.timeout_s:g} s (api.body_timeout_s)",
                    "invalid_request_error", "request_timeout", headers={"Connection": "close"},
                )(scope, receive, send)
                return
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# ----------------------------------------------------------------------------------- health


def _llm_probe(cfg: LlmConfig) -> dict[str, Any]:
    """GET the answering model's server (Ollama ``/api/version``, OpenAI ``/v1/models``)."""
    if cfg.kind == "none":
        return {"status": "disabled", "kind": "none"}
    if cfg.kind == "ollama":
        url = f"{(cfg.url or DEFAULT_OLLAMA_URL).rstrip('/')}/api/version"
        headers: dict[str, str] = {}
    else:
        base = (cfg.url or "").rstrip("/")
        url = f"{base}/models" if base.endswith("/v1") else f"{base}/v1/models"
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    try:
        r = httpx.get(url, headers=headers, timeout=HEALTH_TIMEOUT_S)
    except httpx.HTTPError as e:
        log.warning("health: answering model unreachable at %s: %s", url, e)
        return {"status": "error", "kind": cfg.kind, "error": f"unreachable ({type(e).__name__})"}
    if r.status_code >= 400:
        return {"status": "error", "kind": cfg.kind, "error": f"HTTP {r.status_code}"}
    return {"status": "ok", "kind": cfg.kind}


def _check(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return {"status": "ok", **fn()}
    except Exception as e:  # noqa: BLE001 - a health check reports, it does not raise
        log.warning("health: %s check failed: %s", name, e)
        return {"status": "error", "error": type(e).__name__}


# ----------------------------------------------------------------------------------- the app


def create_app(
    source: Any,
    settings: Settings,
    *,
    registries: Sequence[CollectorRegistry] = (),
) -> FastAPI:
    """The API over ``source``: a :class:`~ancre.app.runtime.Runtime` (its
    ``answer_service`` is built at the first request that needs it) or a :class:`QueryService`
    (an :class:`~ancre.query.answer.AnswerService`). ``settings.api`` configures it;
    ``settings.llm`` is probed by ``/health``. ``registries``: more Prometheus registries
    exposed on ``/metrics`` (the daemon's under ``ancre serve``).

    Raises :class:`~ancre.errors.ConfigError` when no service key is configured (the API never
    runs open) or a secret's environment variable is missing.
    """
    cfg = settings.api
    secrets = Secrets.from_config(cfg)
    if hasattr(source, "answer_service"):
        def service() -> QueryService:
            return source.answer_service  # type: ignore[no-any-return]
    else:
        def service() -> QueryService:
            return source  # type: ignore[no-any-return]

    def not_ready() -> str | None:
        check = getattr(source, "index_not_ready", None)
        return check() if check is not None else None

    def require_ready() -> None:
        why = not_ready()
        if why is not None:
            raise ApiError(503, "index_not_ready", why, type="server_error")

    metrics = ApiMetrics()
    started = int(time.time())
    app = FastAPI(
        title="ancre",
        version="0.1.0",
        summary="Permission-trimmed, grounded answers over the company's documents.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.metrics = metrics
    app.add_middleware(_BodyLimitMiddleware, max_bytes=cfg.max_body_bytes, timeout_s=cfg.body_timeout_s)
    app.add_middleware(_MetricsMiddleware, metrics=metrics)

    # documented security schemes; the checks themselves are in ancre.api.identity
    bearer = HTTPBearer(auto_error=False, description="The service key (Open WebUI connection key).")
    email_header = APIKeyHeader(name=cfg.user_email_header, auto_error=False,
                                description="The user's e-mail, forwarded by Open WebUI.")

    async def require_key(request: Request, _key: Any = Security(bearer)) -> None:
        check_api_key(request.headers.get("authorization"), secrets.api_key)

    async def require_identity(request: Request, _key: Any = Security(bearer), _email: Any = Security(email_header)) -> Identity:
        body = await request.body() if secrets.signing_secret is not None else b""
        return authenticate(request.headers, cfg, secrets, method=request.method, path=request.url.path, body=body)

    errors = {401: {"model": ErrorResponse}, 408: {"model": ErrorResponse}, 413: {"model": ErrorResponse}, 422: {"model": ErrorResponse},
              502: {"model": ErrorResponse}, 503: {"model": ErrorResponse}}

    # ------------------------------------------------------------------ endpoints
    @app.get("/v1/models", response_model=ModelList, responses={401: errors[401]}, dependencies=[Depends(require_key)])
    def list_models() -> dict[str, Any]:
        """The one model this server serves."""
        return {"object": "list", "data": [{"id": cfg.model_id, "object": "model", "created": started, "owned_by": "ancre"}]}

    @app.post(
        "/v1/chat/completions",
        response_model=ChatCompletion,
        responses={**errors, 404: {"model": ErrorResponse},
                   200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
                         "description": "The answer; with stream=true, server-sent events ending with 'data: [DONE]'."}},
    )
    def chat_completions(request: Request, body: ChatCompletionRequest,
                         identity: Identity = Depends(require_identity)) -> Response:
        """OpenAI-compatible chat completion; the question is the last user message."""
        if body.model != cfg.model_id:
            raise ApiError(404, "model_not_found", f"model {body.model[:100]!r} does not exist; this server serves {cfg.model_id!r}",
                           param="model")
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        task = (request.headers.get(cfg.task_header) or "").strip() if cfg.task_header else ""
        if task:
            label = task_label(task)
            metrics.tasks.labels(label).inc()
            log.info("Open WebUI side request %s answered without retrieval", label)
            return _task_response(task_reply(task, body.messages), body.stream, cid, created, cfg.model_id)
        question = last_user_question(body.messages, cfg.max_question_chars)
        require_ready()
        svc = service()
        if body.stream:
            gen = svc.stream(question, identity.user, identity=identity.header)
            first = next(gen)  # retrieval and the first piece: errors still become proper statuses
            return StreamingResponse(
                _sse(first, gen, cid, created, cfg.model_id, metrics), media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        answer = svc.ask(question, identity.user, identity=identity.header)
        metrics.answer("chat", answer)
        content = {
            "id": cid, "object": "chat.completion", "created": created, "model": cfg.model_id,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.raw + sources_block(answer)},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            "ancre": verdict_out(answer),
        }
        return JSONResponse(content, headers=verdict_headers(answer))

    @app.post("/query", response_model=QueryAnswer,
              responses={**errors, 422: {"model": QueryBlocked | ErrorResponse,
                                         "description": "Not grounded (reponse_bloquee), or a bad request (error)."}})
    def query(body: QueryRequest, identity: Identity = Depends(require_identity)) -> Response:
        """A question in, the grounded answer out — or HTTP 422 when it is not grounded."""
        question = check_question(body.question, cfg.max_question_chars, "question")
        require_ready()
        answer = service().ask(question, identity.user, identity=identity.header)
        metrics.answer("query", answer)
        sources = sources_out(answer)
        if answer.ancree is False:
            return JSONResponse(
                {
                    "reponse_bloquee": answer.reponse, "sources": sources, "ancree": False,
                    "controles": list(answer.controles), "verification": answer.verification,
                    "citations_inventees": list(answer.invented), "affirmations_non_sourcees": list(answer.unsourced),
                    "documents_ecartes": unchecked_out(answer),
                },
                status_code=422, headers=verdict_headers(answer),
            )
        return JSONResponse(
            {
                "reponse": answer.reponse, "sources": sources, "ancree": answer.ancree,
                "controles": list(answer.controles), "verification": answer.verification,
                "extractive": answer.extractive, "documents_ecartes": unchecked_out(answer),
            },
            headers=verdict_headers(answer),
        )

    @app.get("/health", response_model=Health, responses={503: {"model": Health}})
    def health() -> JSONResponse:
        """Store, directory and answering-model reachability (no authentication)."""
        svc: QueryService | None = None
        try:
            svc = service()
        except Exception as e:  # noqa: BLE001
            log.warning("health: the query service cannot be built: %s", e)
            broken = {"status": "error", "error": type(e).__name__}
            checks: dict[str, dict[str, Any]] = {"store": broken, "directory": broken}
        if svc is not None:
            store, directory = svc.store, svc.directory

            def probe_directory() -> dict[str, Any]:
                directory.sid_of(PROBE_USER)  # reads the file / asks a domain controller
                return {}

            checks = {
                "store": _check("store", lambda: {"points": {c: store.count(c) for c in COLLECTIONS}}),
                "directory": _check("directory", probe_directory),
            }
        checks["llm"] = _llm_probe(settings.llm)
        try:
            reason = not_ready()
            checks["index"] = {"status": "ok"} if reason is None else {"status": "starting", "detail": reason}
        except Exception as e:  # noqa: BLE001 - a health check reports, it does not raise
            log.warning("health: index readiness check failed: %s", e)
            checks["index"] = {"status": "error", "error": type(e).__name__}
        ok = all(c["status"] in ("ok", "disabled") for c in checks.values())
        return JSONResponse({"status": "ok" if ok else "error", "checks": checks}, status_code=200 if ok else 503)

    @app.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
    def prometheus() -> Response:
        """Prometheus text exposition (no authentication)."""
        data = generate_latest(metrics.registry) + b"".join(generate_latest(r) for r in registries)
        return Response(data, media_type=CONTENT_TYPE_LATEST)

    # ------------------------------------------------------------------ errors
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return _error(e.status, e.message, e.type, e.code, e.param)

    @app.exception_handler(AuthError)
    async def _auth_error(request: Request, e: AuthError) -> JSONResponse:
        log.info("refused %s %s: %s", request.method, request.url.path, e.code)
        return _error(401, str(e), "invalid_request_error", e.code, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, e: RequestValidationError) -> JSONResponse:
        errs = e.errors()
        first = errs[0] if errs else {"loc": ("body",), "msg": "invalid request"}
        if first.get("type") == INVALID_TEXT:  # the message already names the field
            param = str(first.get("ctx", {}).get("param", "body"))
            return _error(422, str(first.get("msg")), "invalid_request_error", "invalid_value", param)
        param = "body" if first.get("type") == "json_invalid" else _param(first.get("loc", ()))
        more = f" (and {len(errs) - 1} more error(s))" if len(errs) > 1 else ""
        return _error(422, f"{param}: {first.get('msg', 'invalid value')}{more}", "invalid_request_error",
                      "invalid_value", param)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        if e.status_code == 400 and e.detail == _FASTAPI_BODY_ERROR:
            # FastAPI's answer to a body json.loads() cannot decode (not UTF-8, nested too deep):
            # a bad body, 422 like every other one (README, OpenAPI)
            return _error(422, "body: the request body is not JSON in UTF-8 (RFC 8259)", "invalid_request_error",
                          "invalid_value", "body")
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        return _error(e.status_code, str(e.detail), "invalid_request_error", code, headers=getattr(e, "headers", None))

    def _unavailable(status: int, code: str, message: str) -> Callable[[Request, Exception], Any]:
        async def handler(request: Request, e: Exception) -> JSONResponse:
            log.warning("%s %s: %s: %s", request.method, request.url.path, code, e)
            return _error(status, message, "server_error", code)
        return handler

    app.add_exception_handler(DirectoryError, _unavailable(
        503, "directory_unavailable", "the directory cannot be read: no answer is given (fail closed)"))
    app.add_exception_handler(AuditError, _unavailable(
        503, "audit_unavailable", "the audit log cannot be written: the answer is withheld"))
    app.add_exception_handler(LlmError, _unavailable(502, "model_unavailable", "the answering model failed"))
    app.add_exception_handler(EmbedderError, _unavailable(503, "index_unavailable", "the search index is unavailable"))
    app.add_exception_handler(StoreError, _unavailable(503, "index_unavailable", "the search index is unavailable"))
    app.add_exception_handler(AncreError, _unavailable(503, "service_unavailable", "the service is unavailable"))

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, e: Exception) -> JSONResponse:
        log.error("%s %s: internal error", request.method, request.url.path, exc_info=e)
        return _error(500, "internal error (see the server log)", "server_error", "internal_error")

    return app


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


def _sse(first: str | Answer, rest: Iterator[str | Answer], cid: str, created: int, model: str,
         metrics: ApiMetrics) -> Iterator[bytes]:
    """The SSE body: a role chunk, the raw pieces, the sources block, a last chunk with
    ``finish_reason: "stop"`` and the ``ancre`` verdict, then ``data: [DONE]``. A failure after
    the headers went out becomes an ``{"error": …}`` event (OpenAI's SDKs raise on it)."""
    try:
        yield _chunk(cid, created, model, {"role": "assistant", "content": ""})
        item: str | Answer = first
        while True:
            if isinstance(item, Answer):
                metrics.answer("chat", item)
                block = sources_block(item)
                if block:
                    yield _chunk(cid, created, model, {"content": block})
                yield _chunk(cid, created, model, {}, "stop", {"ancre": verdict_out(item)})
                break
            if item:
                yield _chunk(cid, created, model, {"content": item})
            try:
                item = next(rest)
            except StopIteration:
                break
    except Exception as e:  # noqa: BLE001 - the status line is gone: report in the stream
        if isinstance(e, LlmError):
            log.warning("stream %s: the answering model failed: %s", cid, e)
            err = error_body("the answering model failed", "server_error", "model_unavailable")
        elif isinstance(e, AuditError):
            log.warning("stream %s: audit log unavailable: %s", cid, e)
            err = error_body("the audit log cannot be written: the answer is withheld", "server_error", "audit_unavailable")
        else:
            log.error("stream %s: internal error", cid, exc_info=e)
            err = error_body("internal error (see the server log)", "server_error", "internal_error")
        yield f"data: {json.dumps(err)}\n\n".encode()
    finally:
        close = getattr(rest, "close", None)
        if close is not None:
            close()
    yield b"data: [DONE]\n\n"


__all__ = [
    "ApiError",
    "ApiMetrics",
    "QueryService",
    "WARNING_UNGROUNDED",
    "check_question",
    "create_app",
    "error_body",
    "last_user_question",
    "sources_block",
    "verdict_headers",
    "verdict_out",
]
