"""``GET /health`` (store, directory, the answering model and judge on their servers, index
readiness: 200 or 503, JSON) and
``GET /metrics`` (Prometheus text: the API's metrics and, under ``ancre serve``, the daemon's).
Neither needs authentication; neither discloses a document."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ancre.api.schemas import Health
from ancre.api.service import ApiContext
from ancre.config import Settings
from ancre.errors import ConfigError, ControlError
from ancre.query.model_status import statuses

log = logging.getLogger("ancre.api")

HEALTH_TIMEOUT_S = 3.0
"""Seconds allowed to each reachability probe of ``/health``."""


def llm_probe(settings: Settings) -> dict[str, Any]:
    """The configured models on their servers (:func:`~ancre.query.model_status.statuses`: Ollama
    ``/api/tags``, OpenAI ``/v1/models``): ``{"status": "ok" | "error" | "disabled", "kind",
    "models": {name: "present" | "absent" | "unreachable"}, "error"?}`` — ``error`` when one is
    not there or its server can't be reached (logged with the fix). Never raises."""
    if settings.llm.kind == "none":
        return {"status": "disabled", "kind": "none"}
    try:
        found = statuses(settings, HEALTH_TIMEOUT_S)
    except ConfigError as e:
        return {"status": "error", "kind": settings.llm.kind, "error": str(e)}
    models = {s.model: s.label for s in found}
    bad = [s for s in found if s.present is not True]
    for s in bad:
        log.warning("health: %s model %s %s at %s: %s", s.role, s.model, s.label, s.url, s.error or s.fix)
    out: dict[str, Any] = {"status": "error" if bad else "ok", "kind": settings.llm.kind, "models": models}
    if bad:
        out["error"] = ", ".join(f"{s.role} model {s.model} {s.label}" for s in bad)
    return out


_CONTROL_DETAIL = "the daemon does not answer on its control socket (starting, restarting or stopped)"
"""What ``/health`` says of a part the daemon serves while it does not answer (``ancre api
--via-daemon``): a fixed sentence, never the error's text (paths) to an unauthenticated caller."""


def _failed(e: Exception) -> dict[str, Any]:
    out: dict[str, Any] = {"status": "error", "error": type(e).__name__}
    if isinstance(e, ControlError):
        out["detail"] = _CONTROL_DETAIL
    return out


def _check(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return {"status": "ok", **fn()}
    except Exception as e:  # a health check reports, it does not raise
        log.warning("health: %s check failed: %s", name, e)
        return _failed(e)


def _index_check(ctx: ApiContext) -> dict[str, Any]:
    try:
        reason = ctx.not_ready()
    except Exception as e:  # a health check reports, it does not raise
        log.warning("health: index readiness check failed: %s", e)
        return _failed(e)
    return {"status": "ok"} if reason is None else {"status": "starting", "detail": reason}


def health_checks(ctx: ApiContext) -> dict[str, dict[str, Any]]:
    """``{"store", "directory", "llm", "index"}`` → ``{"status": "ok" | "error" | "disabled" |
    "starting", …}``."""
    svc = ctx.service

    def probe_directory() -> dict[str, Any]:
        svc.probe_directory()  # reads the file / asks a domain controller
        return {}

    return {
        "store": _check("store", lambda: {"points": dict(svc.points())}),
        "directory": _check("directory", probe_directory),
        "llm": llm_probe(ctx.settings),
        "index": _index_check(ctx),
    }


def health_router(ctx: ApiContext, registries: Sequence[CollectorRegistry]) -> APIRouter:
    """``/health`` and ``/metrics`` (``registries``: more Prometheus registries to expose)."""
    router = APIRouter()

    @router.get("/health", response_model=Health, responses={503: {"model": Health}})
    def health() -> JSONResponse:
        """Store, directory and answering-model reachability (no authentication)."""
        checks = health_checks(ctx)
        ok = all(c["status"] in ("ok", "disabled") for c in checks.values())
        return JSONResponse({"status": "ok" if ok else "error", "checks": checks}, status_code=200 if ok else 503)

    @router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
    def prometheus() -> Response:
        """Prometheus text exposition (no authentication)."""
        data = generate_latest(ctx.metrics.registry) + b"".join(generate_latest(r) for r in registries)
        return Response(data, media_type=CONTENT_TYPE_LATEST)

    return router


__all__ = ["HEALTH_TIMEOUT_S", "health_checks", "health_router", "llm_probe"]
