"""The RAG API (FastAPI): OpenAI-compatible ``/v1`` for Open WebUI, ``/query`` for machines.

A thin layer over the query core (:class:`~ancre.query.core.QueryCore`, or any
:class:`~ancre.api.service.QueryService`), split by responsibility: :mod:`ancre.api.chat`
(``/v1``), :mod:`ancre.api.query_route` (``/query``), :mod:`ancre.api.health` (``/health``,
``/metrics``), :mod:`ancre.api.service` (the service protocol, authentication dependencies),
:mod:`ancre.api.errors`, :mod:`ancre.api.render` (answers written out),
:mod:`ancre.api.middleware` (metrics, body limits); for Open WebUI :mod:`ancre.api.delivery`
(what staff read), :mod:`ancre.api.native_sources` (its source events and ``[n]`` citations),
:mod:`ancre.api.attachments` (its RAG template set aside), :mod:`ancre.api.staff` (French
messages).

``GET /v1/models``, ``POST /v1/chat/completions``
    OpenAI-compatible routes for Open WebUI: see :mod:`ancre.api.chat` (the last user message
    only, the answer always returned with its sources — native events when streamed, else a
    Markdown block —, the verdict in headers and an ``ancre`` object, Open WebUI's side requests
    answered without retrieval).
``POST /query`` ``{"question"}``
    200 ``{reponse, sources, ancree, controles, verification, extractive}`` when the answer is
    grounded (``ancree: true``, refusals included) or not established (``ancree: null``,
    ``verification: "non_effectuee"``: the judge could not run — such answers pass, and say
    so); 422 ``{reponse_bloquee, sources, ancree: false, controles, verification,
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

import time
from collections.abc import Sequence

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from ancre.api.chat import chat_router
from ancre.api.errors import ApiError, error_body, install_error_handlers
from ancre.api.health import health_router
from ancre.api.identity import Secrets
from ancre.api.middleware import ApiMetrics, BodyLimitMiddleware, MetricsMiddleware
from ancre.api.query_route import query_router
from ancre.api.questions import check_question, last_user_question
from ancre.api.render import WARNING_UNGROUNDED, sources_block, verdict_headers, verdict_out
from ancre.api.service import ApiContext, QueryService, Readiness, auth_dependencies
from ancre.api.staff import StaffMessages
from ancre.config import Settings


def _always_ready() -> str | None:
    return None


def create_app(
    service: QueryService,
    settings: Settings,
    *,
    not_ready: Readiness = _always_ready,
    registries: Sequence[CollectorRegistry] = (),
) -> FastAPI:
    """The API over ``service`` (a :class:`~ancre.query.core.QueryCore`). ``not_ready``: ``None``
    when the index may answer, else why not — questions are then answered 503
    ``index_not_ready`` and ``/health`` reports ``starting`` (ancre's servers pass
    :meth:`QueryCore.not_ready <ancre.query.core.QueryCore.not_ready>`); default: always ready.
    ``settings.api`` configures it; ``settings.llm`` is probed by ``/health``. ``registries``:
    more Prometheus registries exposed on ``/metrics`` (the daemon's under ``ancre serve``).

    Raises :class:`~ancre.errors.ConfigError` when no service key is configured (the API never
    runs open) or a secret's environment variable is missing.
    """
    ctx = ApiContext(service, not_ready, settings, Secrets.from_config(settings.api), ApiMetrics(), int(time.time()))
    app = FastAPI(
        title="ancre",
        version="0.1.0",
        summary="Permission-trimmed, grounded answers over the company's documents.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.metrics = ctx.metrics
    app.state.staff = StaffMessages(settings.api.support_contact)  # French errors on the chat route
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.api.max_body_bytes, timeout_s=settings.api.body_timeout_s)
    app.add_middleware(MetricsMiddleware, metrics=ctx.metrics)
    auth = auth_dependencies(ctx)
    app.include_router(chat_router(ctx, auth))
    app.include_router(query_router(ctx, auth))
    app.include_router(health_router(ctx, registries))
    install_error_handlers(app)
    return app


__all__ = [
    "WARNING_UNGROUNDED",
    "ApiError",
    "ApiMetrics",
    "QueryService",
    "check_question",
    "create_app",
    "error_body",
    "last_user_question",
    "sources_block",
    "verdict_headers",
    "verdict_out",
]
