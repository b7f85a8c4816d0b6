"""The API's ASGI middleware and metrics: Prometheus counters (:class:`ApiMetrics`, served on
``/metrics``) and the request-body limits (``api.max_body_bytes``, ``api.body_timeout_s``)."""

from __future__ import annotations

import asyncio
import logging
import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ancre.api.errors import error_response, staff_message
from ancre.query.answer import Answer

log = logging.getLogger("ancre.api")


class ApiMetrics:
    """The API's Prometheus metrics on :attr:`registry`: ``ancre_api_requests_total{route,
    method,status}``, ``ancre_api_request_duration_seconds{route}`` (until the last byte, streams
    included), ``ancre_api_answers_total{endpoint,ancree}``, ``ancre_api_tasks_total{task}``."""

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
        """Count one answer given on ``endpoint`` (``chat``, ``query``) by its verdict."""
        self.answers.labels(endpoint, {True: "true", False: "false", None: "null"}[answer.ancree]).inc()


class MetricsMiddleware:
    """Counts every HTTP request by route template, method and status, and times it until its
    last byte (:class:`ApiMetrics`)."""

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


class BodyLimitMiddleware:
    """Reads the whole body (at most ``max_bytes``, within ``timeout_s`` seconds of the request's
    headers) before the app runs; beyond the size: 413; a body that has not fully arrived in
    time: 408 and the connection is closed (a client that never sends its body holds nothing)."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    def _too_large(self, scope: Scope) -> ASGIApp:
        message = f"request body larger than {self.max_bytes} bytes (api.max_body_bytes)"
        return error_response(413, staff_message(scope, "body_too_large", message), "invalid_request_error",
                              "request_too_large")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            try:
                n = int(declared)
            except ValueError:
                await error_response(400, "invalid Content-Length", "invalid_request_error", "bad_request")(scope, receive, send)
                return
            if n > self.max_bytes:
                await self._too_large(scope)(scope, receive, send)
                return
        body = await self._read_body(scope, receive, send)
        if body is None:
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> bytearray | None:
        """The whole body, or ``None`` when the request was answered (413, 408) or abandoned."""
        body = bytearray()
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                log.info("%s %s: request body not received within %g s (api.body_timeout_s): 408",
                         scope.get("method"), scope.get("path"), self.timeout_s)
                detail = f"request body not received within {self.timeout_s:g} s (api.body_timeout_s)"
                await error_response(
                    408, staff_message(scope, "request_timeout", detail),
                    "invalid_request_error", "request_timeout", headers={"Connection": "close"},
                )(scope, receive, send)
                return None
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._too_large(scope)(scope, receive, send)
                return None
            if not message.get("more_body", False):
                return body


__all__ = ["ApiMetrics", "BodyLimitMiddleware", "MetricsMiddleware"]
