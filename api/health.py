"""``GET /health`` (store, directory, answering model and index readiness: 200 or 503, JSON) and
``GET /metrics`` (Prometheus text: the API's metrics and, under ``ancre serve``, the daemon's).
Neither needs authentication; neither discloses a document."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ancre.api.schemas import Health
from ancre.api.service import ApiContext
from ancre.errors import ConfigError
from ancre.settings import resolve_secret
from ancre.settings.query import DEFAULT_OLLAMA_URL, LlmConfig

log = logging.getLogger("ancre.api")

HEALTH_TIMEOUT_S = 3.0
"""Seconds allowed to each reachability probe of ``/health``."""


def llm_probe(cfg: LlmConfig) -> dict[str, Any]:
    """GET the answering model's server (Ollama ``/api/version``, OpenAI ``/v1/models``):
    ``{"status": "ok" | "error" | "disabled", "kind", "error"?}``; never raises."""
    if cfg.kind == "none":
        return {"status": "disabled", "kind": "none"}
    if cfg.kind == "ollama":
        url = f"{(cfg.url or DEFAULT_OLLAMA_URL).rstrip('/')}/api/version"
        headers: dict[str, str] = {}
    else:
        base = (cfg.url or "").rstrip("/")
        url = f"{base}/models" if base.endswith("/v1") else f"{base}/v1/models"
        try:
            key = resolve_secret(cfg.api_key, "llm.api_key")
        except ConfigError as e:
            return {"status": "error", "kind": cfg.kind, "error": str(e)}
        headers = {"Authorization": f"Bearer {key}"} if key else {}
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
    except Exception as e:  # a health check reports, it does not raise
        log.warning("health: %s check failed: %s", name, e)
        return {"status": "error", "error": type(e).__name__}


def _index_check(ctx: ApiContext) -> dict[str, Any]:
    try:
        reason = ctx.not_ready()
    except Exception as e:  # a health check reports, it does not raise
        log.warning("health: index readiness check failed: %s", e)
        return {"status": "error", "error": type(e).__name__}
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
        "llm": llm_probe(ctx.settings.llm),
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
