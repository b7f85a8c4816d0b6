"""The API's errors, always in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``
(docs/API.md): :class:`ApiError` raised by the routes, and the exception handlers that map
every other failure to a status — 401 identity, 422 bad body (the message names the field), 503
directory / audit log / index unavailable or answering model not installed on its server
(``model_missing``: the log line names the model and the command that fixes it), 502 answering
model failed, a bland 500 for
anything else (logged server-side). No message carries a stack trace or document text. On the
chat route staff reach through Open WebUI (``/v1/chat/completions``) the ``message`` is the French
one of :mod:`ancre.api.staff` for the same ``code`` (the English detail goes to the log)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ancre.api.identity import AuthError
from ancre.api.schemas import INVALID_TEXT, ErrorResponse
from ancre.api.staff import STAFF_PATHS, StaffMessages
from ancre.errors import AncreError, AuditError, DirectoryError, EmbedderError, StoreError
from ancre.models import visible_identity
from ancre.query.llm import LlmError, ModelCallAborted, ModelNotFoundError

log = logging.getLogger("ancre.api")

_FASTAPI_BODY_ERROR = "There was an error parsing the body"
"""The detail of the HTTP 400 FastAPI raises when the body can't be decoded (answered 422 here)."""

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (401, 408, 413, 422, 502, 503)
}
"""The error statuses documented on the answering routes (OpenAPI)."""


class ApiError(AncreError):
    """An error answered as ``status`` with OpenAI's error shape. ``staff``: the French message
    staff read instead of ``message`` on the chat route, when the one for ``code``
    (:class:`~ancre.api.staff.StaffMessages`) is not precise enough."""

    def __init__(self, status: int, code: str, message: str, *, param: str | None = None, type: str = "invalid_request_error",
                 staff: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param, self.type = status, code, message, param, type
        self.staff = staff


def staff_message(scope_or_request: Any, code: str | None, message: str, french: str | None = None) -> str:
    """``message``, or on a route staff read through Open WebUI (:data:`~ancre.api.staff.STAFF_PATHS`)
    ``french`` or else the French message for ``code`` (:class:`~ancre.api.staff.StaffMessages`,
    kept on ``app.state.staff`` by :func:`~ancre.api.app.create_app`). ``scope_or_request``: a
    Starlette request or an ASGI scope."""
    scope = scope_or_request.scope if isinstance(scope_or_request, Request) else scope_or_request
    app = scope.get("app")
    staff = getattr(getattr(app, "state", None), "staff", None)
    if not isinstance(staff, StaffMessages) or scope.get("path") not in STAFF_PATHS:
        return message
    return french or staff.error(code)


def error_body(message: str, type: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(status: int, message: str, type: str, code: str | None, param: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """:func:`error_body` as a JSON response with ``status`` (HTTP status code)."""
    return JSONResponse(error_body(message, type, code, param), status_code=status, headers=headers)


def param_name(loc: Sequence[Any]) -> str:
    """A validation error's location as a field name: ``("body", "messages", 0, "role")`` →
    ``messages[0].role``."""
    out = ""
    for part in loc[1:] if loc and loc[0] in ("body", "query", "header", "path") else loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


async def _api_error(request: Request, e: ApiError) -> JSONResponse:
    return error_response(e.status, staff_message(request, e.code, e.message, e.staff), e.type, e.code, e.param)


async def _auth_error(request: Request, e: AuthError) -> JSONResponse:
    who = f" (Open WebUI user id {visible_identity(e.user_id)!r})" if e.user_id else ""
    if e.code == "invalid_identity_chars":
        # an account that looks like another one: the admin must see it, once, with its id
        log.warning("refused %s %s%s: %s: %s", request.method, request.url.path, who, e.code, e)
    else:
        log.info("refused %s %s%s: %s (%s)", request.method, request.url.path, who, e.code, e)
    staff = _staff(request)
    french = staff.unusable_identity(e.shown or "") if staff is not None and e.code == "invalid_identity_chars" else None
    return error_response(401, staff_message(request, e.code, str(e), french), "invalid_request_error", e.code,
                          headers={"WWW-Authenticate": "Bearer"})


def _staff(request: Request) -> StaffMessages | None:
    """The app's :class:`~ancre.api.staff.StaffMessages`, ``None`` when it has none."""
    staff = getattr(getattr(request.app, "state", None), "staff", None)
    return staff if isinstance(staff, StaffMessages) else None


async def _validation_error(request: Request, e: RequestValidationError) -> JSONResponse:
    errs = e.errors()
    first: Mapping[str, Any] = errs[0] if errs else {"loc": ("body",), "msg": "invalid request"}
    if first.get("type") == INVALID_TEXT:  # the message already names the field
        param = str(first.get("ctx", {}).get("param", "body"))
        return error_response(422, staff_message(request, "invalid_value", str(first.get("msg"))), "invalid_request_error",
                              "invalid_value", param)
    param = "body" if first.get("type") == "json_invalid" else param_name(first.get("loc", ()))
    more = f" (and {len(errs) - 1} more error(s))" if len(errs) > 1 else ""
    message = f"{param}: {first.get('msg', 'invalid value')}{more}"
    if staff_message(request, "invalid_value", message) != message:
        log.info("refused %s %s: %s", request.method, request.url.path, message)
    return error_response(422, staff_message(request, "invalid_value", message), "invalid_request_error",
                          "invalid_value", param)


async def _http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
    if e.status_code == 400 and e.detail == _FASTAPI_BODY_ERROR:
        # FastAPI's answer to a body json.loads() cannot decode (not UTF-8, nested too deep):
        # a bad body, 422 like every other one (docs/API.md, OpenAPI)
        message = staff_message(request, "invalid_value", "body: the request body is not JSON in UTF-8 (RFC 8259)")
        return error_response(422, message, "invalid_request_error", "invalid_value", "body")
    code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
    return error_response(e.status_code, str(e.detail), "invalid_request_error", code, headers=getattr(e, "headers", None))


def _unavailable(status: int, code: str, message: str) -> Callable[[Request, Exception], Any]:
    async def handler(request: Request, e: Exception) -> JSONResponse:
        log.warning("%s %s: %s: %s", request.method, request.url.path, code, e)
        return error_response(status, staff_message(request, code, message), "server_error", code)
    return handler


async def _internal_error(request: Request, e: Exception) -> JSONResponse:
    log.error("%s %s: internal error", request.method, request.url.path, exc_info=e)
    return error_response(500, staff_message(request, "internal_error", "internal error (see the server log)"),
                          "server_error", "internal_error")


def install_error_handlers(app: FastAPI) -> None:
    """Register every handler on ``app`` (module doc)."""
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]  # Starlette types handlers for Exception
    app.add_exception_handler(AuthError, _auth_error)  # type: ignore[arg-type]  # Starlette types handlers for Exception
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]  # Starlette types handlers for Exception
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]  # Starlette types handlers for Exception
    app.add_exception_handler(DirectoryError, _unavailable(
        503, "directory_unavailable", "the directory cannot be read: no answer is given (fail closed)"))
    app.add_exception_handler(AuditError, _unavailable(
        503, "audit_unavailable", "the audit log cannot be written: the answer is withheld"))
    app.add_exception_handler(ModelNotFoundError, _unavailable(
        503, "model_missing", "the answering model is not installed on its server (see the server log)"))
    app.add_exception_handler(LlmError, _unavailable(502, "model_unavailable", "the answering model failed"))
    app.add_exception_handler(EmbedderError, _unavailable(503, "index_unavailable", "the search index is unavailable"))
    app.add_exception_handler(StoreError, _unavailable(503, "index_unavailable", "the search index is unavailable"))
    app.add_exception_handler(AncreError, _unavailable(503, "service_unavailable", "the service is unavailable"))
    app.add_exception_handler(Exception, _internal_error)


def stream_error(cid: str, e: Exception, staff: StaffMessages | None = None) -> dict[str, Any]:
    """The ``{"error": …}`` event sent when a streamed answer fails after its headers went out
    (OpenAI's SDKs raise on it); ``cid``: the completion id, for the log; ``staff``: the French
    messages to send instead of the English ones (the chat route)."""
    if isinstance(e, ModelCallAborted):  # the client left: nobody reads this event
        log.info("stream %s: the client disconnected; the answer was stopped", cid)
        code, message = "interrupted", "the answer was stopped"
    elif isinstance(e, ModelNotFoundError):
        log.warning("stream %s: %s", cid, e)
        code, message = "model_missing", "the answering model is not installed on its server (see the server log)"
    elif isinstance(e, LlmError):
        log.warning("stream %s: the answering model failed: %s", cid, e)
        code, message = "model_unavailable", "the answering model failed"
    elif isinstance(e, AuditError):
        log.warning("stream %s: audit log unavailable: %s", cid, e)
        code, message = "audit_unavailable", "the audit log cannot be written: the answer is withheld"
    else:
        log.error("stream %s: internal error", cid, exc_info=e)
        code, message = "internal_error", "internal error (see the server log)"
    return error_body(staff.error(code) if staff is not None else message, "server_error", code)


__all__ = ["ERROR_RESPONSES", "ApiError", "error_body", "error_response", "install_error_handlers", "param_name",
           "staff_message", "stream_error"]
