"""Chat model clients (docs/ARCHITECTURE.md "Data flow of a question" steps 5 and 7) and the extractive fallback.

- :class:`OllamaChat`: Ollama ``POST /api/chat`` (Ollama API reference, "Generate a chat
  completion"): ``{"model", "messages", "stream", "keep_alive", "options": {"temperature"},
  "format"?, "think"?}``; answer ``{"message": {"content", "thinking"?}, "done": true}``, or with
  ``stream: true`` one such JSON object per line (NDJSON) until ``"done": true``.
- :class:`OpenAIChat`: any OpenAI-compatible ``POST /v1/chat/completions`` server (vLLM, LocalAI,
  llama.cpp, Ollama's own ``/v1``): ``choices[0].message.content`` (``reasoning_content`` as the
  thinking), or with ``stream: true`` server-sent events ``data: {choices[0].delta.content}``
  ending with ``data: [DONE]`` (OpenAI API reference, "Create chat completion").
- :class:`ExtractiveAnswerer`: with no model configured, the answer quotes the extracts that
  carry the question's terms, each cited, and says it is extractive — or refuses.

Temperatures are clamped to [0, :data:`MAX_ANSWER_TEMPERATURE`] (0.3) by both clients. Every
failure (connection, timeout, HTTP status ≥ 400, unreadable body) is raised as :class:`LlmError`.

**Stopping a call from another thread** (:class:`Abort`): a thread that makes model calls for one
answer binds that answer's :class:`Abort` around them (``with abort.bound(): …``). Every request
made by the clients while it is bound goes over a connection of its own (never a pooled one) whose
socket is registered with the abort; :meth:`Abort.cancel`, from any thread, shuts those sockets
down (``shutdown(SHUT_RDWR)``): a thread blocked waiting for the model's headers or its next
piece wakes up at once, the call raises :class:`ModelCallAborted`, and the server sees the
connection close — Ollama and vLLM stop generating for a client that went away.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import httpx
from httpx_sse import SSEError, connect_sse

from ancre.errors import AncreError, ConfigError
from ancre.index.tokenize import tokenize
from ancre.query.context import Context, Extract, broad_topic
from ancre.query.markdown import quote_extract
from ancre.query.prompt import REFUSAL, ChatMessage
from ancre.query.relevance import MIN_COVERAGE, TermStats, coverage, on_topic, question_terms
from ancre.query.thinking import ThinkFilter, filtered, strip_thinking
from ancre.query.versions import VersionGroup, similarity, version_note
from ancre.settings import resolve_secret
from ancre.settings.query import DEFAULT_OLLAMA_URL, MAX_ANSWER_TEMPERATURE, LlmConfig

DEFAULT_OLLAMA_MODEL = "qwen2.5:14b"
DEFAULT_TEMPERATURE = 0.2

EXTRACTIVE_HEADER = (
    "Réponse extractive (aucun modèle de langage configuré) : "
    "voici les passages les plus pertinents des documents."
)
"""First line of every extractive answer."""


log = logging.getLogger("ancre.query.llm")


class LlmError(AncreError):
    """A chat model call failed: server unreachable, timeout, HTTP error, unreadable answer."""


class ModelCallAborted(LlmError):
    """A model call stopped by :meth:`Abort.cancel` (its answer was abandoned)."""


_bound = threading.local()


class Abort:
    """Stops the model calls of one answer from any thread (see the module doc).

    ``cancel()`` is idempotent and thread-safe; ``cancelled`` tells whether it was called;
    ``check()`` raises :class:`ModelCallAborted` once it was; ``bound()`` is the context manager
    under which the calling thread's model requests are registered with this abort."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._sockets: list[socket.socket] = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Stop every call made under this abort, now and later (their sockets shut down)."""
        with self._lock:
            self._cancelled = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shutdown(sock)

    def check(self) -> None:
        """Raises :class:`ModelCallAborted` when cancelled."""
        if self._cancelled:
            raise ModelCallAborted("the answer was abandoned: model call stopped")

    def register(self, sock: socket.socket) -> None:
        """Shut ``sock`` down when cancelled (at once if already cancelled)."""
        with self._lock:
            if not self._cancelled:
                self._sockets.append(sock)
                return
        _shutdown(sock)

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` request extension: registers each new connection's socket."""
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                self.register(sock)

    @contextmanager
    def bound(self) -> Iterator[Abort]:
        """Bind this abort to the calling thread for the duration of the ``with`` block."""
        previous = getattr(_bound, "abort", None)
        _bound.abort = self
        try:
            yield self
        finally:
            _bound.abort = previous


def current_abort() -> Abort | None:
    """The :class:`Abort` bound to the calling thread, if any."""
    return getattr(_bound, "abort", None)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError as e:  # already closed
        log.debug("shutting down a model connection: %s", e)


@dataclass(frozen=True)
class ChatResult:
    """A complete chat answer: ``content`` (the text, reasoning blocks removed:
    :func:`~ancre.query.thinking.strip_thinking`), ``thinking`` (reasoning the server returned
    apart — or, when it returned none, the raw content the blocks were removed from; ``""`` when
    none), ``done_reason`` (why generation stopped: ``"stop"``, ``"length"`` when the answer
    budget was reached; ``None`` when the server did not say) and ``prompt_tokens`` (the tokens
    the server says it evaluated: Ollama ``prompt_eval_count``, OpenAI ``usage.prompt_tokens``;
    ``None`` when it did not say)."""

    content: str
    thinking: str = ""
    done_reason: str | None = None
    prompt_tokens: int | None = None


class ChatStream(Iterator[str]):
    """A streamed answer: iterate it for the text pieces (reasoning blocks removed, also across
    pieces: :class:`~ancre.query.thinking.ThinkFilter`); once it is exhausted, ``done_reason`` and
    ``prompt_tokens`` are those of :class:`ChatResult` (``None`` until then, or when the server
    did not say). :meth:`close` releases the HTTP stream at once."""

    def __init__(self, pieces: Iterator[str]) -> None:
        self._pieces = pieces
        self.done_reason: str | None = None
        self.prompt_tokens: int | None = None

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> str:
        return next(self._pieces)

    def close(self) -> None:
        """Stop reading (the HTTP stream is closed)."""
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()


class ModelNotFoundError(LlmError):
    """The server answered that it has no such model (Ollama ``404 {"error": "model 'x' not
    found"}``, vLLM ``404 … "The model `x` does not exist."``). ``model``, ``url`` and ``kind``
    name it; ``fix`` is what the admin runs (``ollama pull qwen2.5:14b``)."""

    def __init__(self, kind: str, model: str, url: str) -> None:
        self.kind, self.model, self.url = kind, model, url
        super().__init__(f"model {model!r} is not on the {kind} server at {url}: {self.fix}")

    @property
    def fix(self) -> str:
        """The command or setting that fixes it."""
        if self.kind == "ollama":
            return f"run `ollama pull {self.model}` on that server (or fix the model name)"
        return "serve it there (vLLM: `vllm serve <model> --served-model-name …`) or fix the model name"


@dataclass(frozen=True)
class ModelInfo:
    """What a server says of one model: ``present`` (``False``: not there; ``None``: the server
    can't say) and ``context_length`` (tokens; ``None`` when not said)."""

    present: bool | None
    context_length: int | None = None


@runtime_checkable
class ChatClient(Protocol):
    """A chat model backend. ``model`` names the model (audit, messages); ``kind`` is
    ``"ollama"`` or ``"openai"``; ``sets_window`` tells whether a request can set the context
    window (Ollama's ``options.num_ctx``)."""

    model: str
    kind: str
    sets_window: bool

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float,
        format: str | None = None,
        think: bool | None = None,
        num_ctx: int | None = None,
    ) -> ChatResult:
        """One complete answer. ``format="json"`` asks for a JSON object; ``think`` switches a
        reasoning model's thinking on/off (``None``: server default); ``num_ctx``: the context
        window in tokens (Ollama; default the client's). Raises :class:`LlmError`
        (:class:`ModelNotFoundError` for a model the server does not have)."""
        ...

    def stream(
        self, messages: Sequence[ChatMessage], *, temperature: float, think: bool | None = None,
        num_ctx: int | None = None,
    ) -> ChatStream:
        """The answer's text as it is generated, piece by piece (thinking excluded). Raises
        :class:`LlmError`, possibly after some pieces were yielded."""
        ...

    def info(self) -> ModelInfo:
        """What the server says of the model (see the clients). Raises :class:`LlmError` when it
        can't be asked."""
        ...

    def models(self) -> tuple[str, ...]:
        """The models the server has (Ollama ``/api/tags``, OpenAI ``/v1/models``). Raises
        :class:`LlmError`."""
        ...

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int | None:
        """The server's own token count of ``messages`` with its chat template, where it has a
        tokenizer endpoint (vLLM ``/tokenize``); ``None`` elsewhere. Never raises."""
        ...

    def preload(self, num_ctx: int | None = None) -> bool:
        """Load the model now (Ollama: an empty chat request with ``keep_alive`` and the window
        questions will use); ``False`` where there is nothing to do. Raises :class:`LlmError`."""
        ...

    def close(self) -> None:
        """Release the HTTP connections."""
        ...


def clamp_temperature(temperature: float) -> float:
    """``temperature`` limited to [0, 0.3] (docs/ARCHITECTURE.md "Data flow of a question" step 5: never above 0.3); a NaN
    becomes the default 0.2."""
    if math.isnan(temperature):
        return DEFAULT_TEMPERATURE
    return min(max(temperature, 0.0), MAX_ANSWER_TEMPERATURE)


def _wire(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _error_text(response: httpx.Response) -> str:
    """The server's error message from a failed response (JSON ``error`` field or raw text)."""
    # a body that cannot be read or is not JSON only costs the message: the raw text stands in
    with contextlib.suppress(httpx.HTTPError, httpx.StreamError, ValueError):
        response.read()
        body = response.json()
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            err = err.get("message")
        if not err and isinstance(body, dict) and body.get("object") == "error":
            err = body.get("message")  # vLLM before 0.10: the error object at the top level
        if err:
            return str(err)
    return response.text[:300]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class _HttpChat:
    """Shared HTTP plumbing of the chat clients: one pooled :class:`httpx.Client`, the
    :meth:`chat` / :meth:`stream` calls, reasoning blocks removed, every failure mapped to
    :class:`LlmError`. A subclass sets ``endpoint`` and implements the wire format:
    :meth:`_body`, :meth:`_result` and :meth:`_pieces`, and the server's descriptions."""

    endpoint: str
    kind = ""
    sets_window = False
    _stream_errors: tuple[type[Exception], ...] = (httpx.HTTPError, ValueError)
    """What a broken stream raises, besides :class:`LlmError` (mapped by :meth:`_fail`)."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        timeout_s: float,
        connect_timeout_s: float,
        headers: dict[str, str] | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self._http = httpx.Client(timeout=timeout, headers=headers or {})
        # calls under an Abort: a connection per call, so that its socket is known from the start
        self._http_own = httpx.Client(
            timeout=timeout, headers=headers or {}, limits=httpx.Limits(max_keepalive_connections=0)
        )

    def close(self) -> None:
        """Release the HTTP connections."""
        self._http.close()
        self._http_own.close()

    def _client(self) -> tuple[httpx.Client, dict[str, Any], Abort | None]:
        """The client and request extensions for a call from this thread (see :class:`Abort`)."""
        abort = current_abort()
        if abort is None:
            return self._http, {}, None
        abort.check()
        return self._http_own, {"trace": abort.trace}, abort

    # -- wire format (subclass) -------------------------------------------------------------

    def _body(
        self, messages: Sequence[ChatMessage], temperature: float, stream: bool, format: str | None,
        think: bool | None, num_ctx: int | None,
    ) -> dict[str, Any]:
        """The JSON request body."""
        raise NotImplementedError

    def _result(self, body: Any) -> ChatResult:
        """The answer in a complete (non-streamed) JSON answer, as the server wrote it (reasoning
        blocks still in); raises :class:`LlmError`."""
        raise NotImplementedError

    def _pieces(self, client: httpx.Client, ext: dict[str, Any], body: dict[str, Any], out: ChatStream) -> Iterator[str]:
        """Post the streaming ``body`` with ``client`` (request ``extensions`` ``ext``), yield the
        answer's text pieces and set ``out.done_reason`` / ``out.prompt_tokens`` from the last
        message (raises :class:`LlmError` or one of :attr:`_stream_errors`)."""
        raise NotImplementedError

    def info(self) -> ModelInfo:
        """See :meth:`ChatClient.info`."""
        raise NotImplementedError

    def models(self) -> tuple[str, ...]:
        """See :meth:`ChatClient.models`."""
        raise NotImplementedError

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int | None:
        """See :meth:`ChatClient.count_tokens` (``None`` here)."""
        return None

    def preload(self, num_ctx: int | None = None) -> bool:
        """See :meth:`ChatClient.preload` (nothing to do here)."""
        return False

    # -- calls --------------------------------------------------------------------------------

    def chat(
        self, messages: Sequence[ChatMessage], *, temperature: float,
        format: str | None = None, think: bool | None = None, num_ctx: int | None = None,
    ) -> ChatResult:
        """See :meth:`ChatClient.chat`. Raises :class:`LlmError`."""
        raw = self._result(self._post(self._body(messages, temperature, False, format, think, num_ctx)))
        content = strip_thinking(raw.content)
        thinking = raw.thinking or (raw.content if content != raw.content else "")
        return replace(raw, content=content, thinking=thinking)

    def stream(
        self, messages: Sequence[ChatMessage], *, temperature: float, think: bool | None = None,
        num_ctx: int | None = None,
    ) -> ChatStream:
        """See :meth:`ChatClient.stream`. Raises :class:`LlmError`, possibly after some pieces."""
        body = self._body(messages, temperature, True, None, think, num_ctx)
        out = ChatStream(iter(()))
        out._pieces = self._streamed(body, out)
        return out

    def _streamed(self, body: dict[str, Any], out: ChatStream) -> Iterator[str]:
        client, ext, abort = self._client()
        think = ThinkFilter()
        try:
            yield from filtered(self._pieces(client, ext, body, out), think)
        except LlmError:
            if abort is not None and abort.cancelled:
                raise ModelCallAborted(f"{self.model} at {self.endpoint}: stopped, the answer was abandoned") from None
            raise
        except self._stream_errors as exc:
            if abort is not None and abort.cancelled:
                raise ModelCallAborted(f"{self.model} at {self.endpoint}: stopped, the answer was abandoned") from exc
            raise self._fail(exc) from exc

    def _error(self, what: str) -> LlmError:
        return LlmError(f"{self.model} at {self.endpoint}: {what}")

    def _check_status(self, r: httpx.Response) -> None:
        if r.status_code >= 400:
            text = _error_text(r)
            if r.status_code == 404 and ("not found" in text.lower() or "does not exist" in text.lower()):
                raise ModelNotFoundError(self.kind, self.model, self.url)
            raise self._error(f"HTTP {r.status_code}: {text}")

    def _fail(self, exc: Exception) -> LlmError:
        if isinstance(exc, httpx.TimeoutException):
            return self._error(f"no answer within {self.timeout_s:g} s")
        if isinstance(exc, httpx.HTTPError):
            return self._error(f"{type(exc).__name__}: {exc}")
        return self._error(f"unreadable answer: {exc}")

    def _post(self, body: dict[str, Any]) -> Any:
        client, ext, abort = self._client()
        try:
            r = client.post(self.endpoint, json=body, extensions=ext)
            self._check_status(r)
            return r.json()
        except LlmError:
            raise
        except (httpx.HTTPError, ValueError) as exc:
            if abort is not None and abort.cancelled:
                raise ModelCallAborted(f"{self.model} at {self.endpoint}: stopped, the answer was abandoned") from exc
            raise self._fail(exc) from exc

    def _get_json(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """``(status, JSON body or None)`` of a short description request; raises :class:`LlmError`
        when the server can't be reached or answers 5xx."""
        try:
            r = self._http.request(method, url, json=body)
        except httpx.HTTPError as exc:
            raise self._fail(exc) from exc
        if r.status_code >= 500:
            raise LlmError(f"{url}: HTTP {r.status_code}: {_error_text(r)}")
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, None


def ollama_name(name: str) -> str:
    """An Ollama model name with its tag (``llama3.2`` → ``llama3.2:latest``; Ollama API
    reference, "Model names": the tag defaults to ``latest``)."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


class OllamaChat(_HttpChat):
    """Ollama ``/api/chat`` client. ``keep_alive`` is Ollama's duration string (``"30m"``, ``"2h"``);
    ``timeout_s`` bounds each read in seconds (a streamed answer may take longer overall);
    ``num_ctx`` sets ``options.num_ctx`` (context window in tokens) when a call gives none;
    ``max_tokens`` sets ``options.num_predict``.

    Read back (Ollama API reference, "Generate a chat completion"): ``message.content`` /
    ``message.thinking``, and on the final object ``done_reason`` (``"stop"``, ``"length"``) and
    ``prompt_eval_count`` (the prompt's tokens, cached ones included)."""

    kind = "ollama"
    sets_window = True

    def __init__(
        self,
        url: str = DEFAULT_OLLAMA_URL,
        model: str = DEFAULT_OLLAMA_MODEL,
        *,
        keep_alive: str = "30m",
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        num_ctx: int | None = None,
        max_tokens: int | None = None,
    ) -> None:
        super().__init__(url, model, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, max_tokens=max_tokens)
        self.endpoint = f"{self.url}/api/chat"
        self.keep_alive = keep_alive
        self.num_ctx = num_ctx

    def _body(
        self, messages: Sequence[ChatMessage], temperature: float, stream: bool, format: str | None,
        think: bool | None, num_ctx: int | None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"temperature": clamp_temperature(temperature)}
        window = num_ctx or self.num_ctx
        if window:
            options["num_ctx"] = window
        if self.max_tokens:
            options["num_predict"] = self.max_tokens
        body: dict[str, Any] = {
            "model": self.model,
            "messages": _wire(messages),
            "stream": stream,
            "keep_alive": self.keep_alive,
            "options": options,
        }
        if format is not None:
            body["format"] = format
        if think is not None:
            body["think"] = think
        return body

    def _result(self, body: Any) -> ChatResult:
        if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
            raise self._error(f"answer without a message: {str(body)[:200]}")
        msg = body["message"]
        reason = body.get("done_reason")
        return ChatResult(str(msg.get("content") or ""), str(msg.get("thinking") or ""),
                          str(reason) if reason else None, _int(body.get("prompt_eval_count")))

    def _pieces(self, client: httpx.Client, ext: dict[str, Any], body: dict[str, Any], out: ChatStream) -> Iterator[str]:
        """Reads the NDJSON lines until ``"done": true``."""
        with client.stream("POST", self.endpoint, json=body, extensions=ext) as r:
            self._check_status(r)
            for line in r.iter_lines():
                if not line.strip():
                    continue
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError(f"not an object: {line[:200]}")
                if obj.get("error"):
                    raise self._error(str(obj["error"]))
                piece = (obj.get("message") or {}).get("content") or ""
                if piece:
                    yield piece
                if obj.get("done"):
                    out.done_reason = str(obj["done_reason"]) if obj.get("done_reason") else None
                    out.prompt_tokens = _int(obj.get("prompt_eval_count"))
                    return

    def info(self) -> ModelInfo:
        """``POST /api/show`` (Ollama API reference, "Show Model Information"): the context length
        is ``model_info["<general.architecture>.context_length"]``; 404 ``model '…' not found`` →
        absent. A server without the route says nothing (``present = None``)."""
        status, body = self._get_json("POST", f"{self.url}/api/show", {"model": self.model})
        if status == 404:
            err = str(body.get("error", "")) if isinstance(body, dict) else ""
            return ModelInfo(False if "not found" in err.lower() else None)
        if status >= 400 or not isinstance(body, dict):
            return ModelInfo(None)
        info = body.get("model_info")
        if not isinstance(info, dict):
            return ModelInfo(True)
        arch = info.get("general.architecture")
        return ModelInfo(True, _int(info.get(f"{arch}.context_length")) if arch else None)

    def models(self) -> tuple[str, ...]:
        """``GET /api/tags`` (Ollama API reference, "List Local Models"): each model's ``name``."""
        status, body = self._get_json("GET", f"{self.url}/api/tags")
        if status >= 400 or not isinstance(body, dict) or not isinstance(body.get("models"), list):
            raise LlmError(f"{self.url}/api/tags: HTTP {status}: not Ollama's model list")
        return tuple(str(m.get("name") or m.get("model")) for m in body["models"] if isinstance(m, dict))

    def preload(self, num_ctx: int | None = None) -> bool:
        """``POST /api/chat`` with no message (Ollama API reference, "Load a model"), with
        ``keep_alive`` and ``options.num_ctx`` — the window questions will use, so that the first
        one does not reload the model with another."""
        body: dict[str, Any] = {"model": self.model, "messages": [], "keep_alive": self.keep_alive}
        window = num_ctx or self.num_ctx
        if window:
            body["options"] = {"num_ctx": window}
        self._post(body)
        return True


def chat_endpoint(url: str) -> str:
    """``{url}/v1/chat/completions``, or ``{url}/chat/completions`` when ``url`` ends with ``/v1``."""
    base = url.rstrip("/")
    return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"


def server_root(url: str) -> str:
    """An OpenAI-compatible server's root: ``url`` without a trailing ``/v1``."""
    base = url.rstrip("/")
    return base.removesuffix("/v1")


class OpenAIChat(_HttpChat):
    """OpenAI-compatible chat client (vLLM first). ``format="json"`` becomes
    ``response_format: {"type": "json_object"}``; ``think`` becomes vLLM's
    ``chat_template_kwargs: {"enable_thinking": think}`` (Qwen3 templates) and is only sent when
    not ``None``; ``max_tokens`` is sent as is; a stream asks for its ``usage``
    (``stream_options.include_usage``).

    Read back (vLLM docs, "OpenAI-Compatible Server" and "Reasoning Outputs"):
    ``choices[0].message.content`` and ``reasoning`` (formerly ``reasoning_content``),
    ``choices[0].finish_reason`` (``"stop"``, ``"length"``) and ``usage.prompt_tokens``. The
    window can't be set by a request: the server's ``max_model_len`` holds."""

    kind = "openai"

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        max_tokens: int | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        super().__init__(
            url, model, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, headers=headers,
            max_tokens=max_tokens,
        )
        self.endpoint = chat_endpoint(url)
        self._tokenize: bool | None = None  # whether /tokenize answers (unknown until asked)

    def _body(
        self, messages: Sequence[ChatMessage], temperature: float, stream: bool, format: str | None,
        think: bool | None, num_ctx: int | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": _wire(messages),
            "temperature": clamp_temperature(temperature),
            "stream": stream,
        }
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        if stream:
            body["stream_options"] = {"include_usage": True}
        if format == "json":
            body["response_format"] = {"type": "json_object"}
        if think is not None:
            body["chat_template_kwargs"] = {"enable_thinking": think}
        return body

    _stream_errors = (httpx.HTTPError, SSEError, ValueError, AttributeError)

    def _result(self, body: Any) -> ChatResult:
        try:
            choice = body["choices"][0]
            msg = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise self._error(f"answer without choices: {str(body)[:200]}") from None
        thinking = msg.get("reasoning") or msg.get("reasoning_content") or ""
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        reason = choice.get("finish_reason")
        return ChatResult(str(msg.get("content") or ""), str(thinking), str(reason) if reason else None,
                          _int(usage.get("prompt_tokens")))

    def _pieces(self, client: httpx.Client, ext: dict[str, Any], body: dict[str, Any], out: ChatStream) -> Iterator[str]:
        """Reads the server-sent events until ``[DONE]``."""
        with connect_sse(client, "POST", self.endpoint, json=body, extensions=ext) as source:
            self._check_status(source.response)
            for event in source.iter_sse():
                if event.data.strip() == "[DONE]":
                    return
                if not event.data.strip():
                    continue
                obj = json.loads(event.data)
                if isinstance(obj, dict) and obj.get("error"):
                    raise self._error(str(obj["error"]))
                if isinstance(obj.get("usage"), dict):  # the last chunk (include_usage), choices []
                    out.prompt_tokens = _int(obj["usage"].get("prompt_tokens"))
                for choice in obj.get("choices") or ():
                    if choice.get("finish_reason"):
                        out.done_reason = str(choice["finish_reason"])
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if piece:
                        yield piece

    def _model_cards(self) -> list[dict[str, Any]]:
        status, body = self._get_json("GET", f"{server_root(self.url)}/v1/models")
        if status >= 400 or not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise LlmError(f"{server_root(self.url)}/v1/models: HTTP {status}: not a model list")
        return [m for m in body["data"] if isinstance(m, dict)]

    def info(self) -> ModelInfo:
        """``GET /v1/models``: the model is there when a card has its ``id``; vLLM's cards say
        ``max_model_len`` (vLLM docs, "OpenAI-Compatible Server"; other servers: ``None``)."""
        card = next((m for m in self._model_cards() if m.get("id") == self.model), None)
        if card is None:
            return ModelInfo(False)
        return ModelInfo(True, _int(card.get("max_model_len")))

    def models(self) -> tuple[str, ...]:
        """``GET /v1/models``: each card's ``id``."""
        return tuple(str(m.get("id")) for m in self._model_cards())

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int | None:
        """vLLM's ``POST /tokenize`` with the messages (vLLM docs, "OpenAI-Compatible Server",
        Tokenizer API: ``{"count", "max_model_len", "tokens"}``), the chat template and the
        generation prompt applied as for a chat completion. ``None`` from a server without it
        (then never asked again). Never raises."""
        if self._tokenize is False:
            return None
        body = {"model": self.model, "messages": _wire(messages), "add_generation_prompt": True}
        try:
            status, out = self._get_json("POST", f"{server_root(self.url)}/tokenize", body)
        except LlmError as e:
            log.debug("token count from %s: %s", self.url, e)
            return None
        count = _int(out.get("count")) if status < 400 and isinstance(out, dict) else None
        self._tokenize = count is not None
        return count

    def server_is_ollama(self) -> bool:
        """Whether the server also answers Ollama's ``GET /api/version`` (Ollama API reference,
        "Version"): an Ollama behind its OpenAI-compatible endpoint, which can't set the window.
        Never raises."""
        try:
            status, body = self._get_json("GET", f"{server_root(self.url)}/api/version")
        except LlmError:
            return False
        return status == 200 and isinstance(body, dict) and "version" in body


def make_client(
    kind: str, url: str | None, model: str | None, *, where: str, api_key: str | None = None,
    keep_alive: str = "30m", timeout_s: float = 600.0, connect_timeout_s: float = 10.0,
    num_ctx: int | None = None, max_tokens: int | None = None,
) -> ChatClient:
    """The chat client of ``kind`` (``"ollama"`` or ``"openai"``), for the answering model and the
    judge alike. ``where`` names the config section in errors (``llm``, ``judge``). Raises
    :class:`~ancre.errors.ConfigError` naming ``<where>.url`` / ``<where>.model`` when an
    OpenAI-compatible server lacks them."""
    if kind == "ollama":
        return OllamaChat(url or DEFAULT_OLLAMA_URL, model or DEFAULT_OLLAMA_MODEL, keep_alive=keep_alive,
                          timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, num_ctx=num_ctx,
                          max_tokens=max_tokens)
    if not url:
        raise ConfigError(f'{where}.url is required for kind "openai"')
    if not model:
        raise ConfigError(f'{where}.model is required for kind "openai"')
    return OpenAIChat(url, model, api_key=api_key, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s,
                      max_tokens=max_tokens)


def make_chat_client(cfg: LlmConfig) -> ChatClient | None:
    """The answering client for ``cfg``; ``None`` for ``kind = "none"`` (extractive mode).
    Raises :class:`~ancre.errors.ConfigError` naming ``llm.url`` / ``llm.model`` when missing."""
    if cfg.kind == "none":
        return None
    return make_client(
        cfg.kind, cfg.url, cfg.model, where="llm", api_key=resolve_secret(cfg.api_key, "llm.api_key"),
        keep_alive=cfg.keep_alive, timeout_s=cfg.timeout_s, connect_timeout_s=cfg.connect_timeout_s,
        num_ctx=cfg.num_ctx, max_tokens=cfg.max_tokens,
    )


def _shorten(text: str, max_chars: int) -> str:
    text = text.strip()
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip() + " …"


class ExtractiveAnswerer:
    """The no-model answer: up to ``max_quotes`` extracts of the context, quoted (a Markdown
    block quote of escaped text and tables, :func:`~ancre.query.markdown.quote_extract`; at most
    ``max_chars`` characters of text each) and each followed by its ``[filename]`` paragraph, under
    :data:`EXTRACTIVE_HEADER`; or :data:`REFUSAL`.

    With the ``question`` (always, from :class:`~ancre.query.answer.AnswerService`), it answers
    only when the extracts carry what the question names and asks (:mod:`ancre.query.relevance`):
    the quotes come from on-topic documents (every named term and every term rare among the user's
    chunks in the document's shown text, file name or path), ranked by coverage of the question's
    content terms (in the extract and its file name) then by RRF score, and the best must contain
    at least one content term — otherwise the standard refusal, as a model following the prompt
    would give. Common words never make it refuse. Without a question (``None``), the best
    retrieval hits are quoted unconditionally.
    """

    model = "extractive"

    def __init__(self, max_quotes: int = 3, max_chars: int = 700) -> None:
        self.max_quotes = max_quotes
        self.max_chars = max_chars

    def best_extracts(self, context: Context) -> list[Extract]:
        """The retrieval hits by RRF score (best first), or the first extracts if none is a hit."""
        hits = sorted((e for e in context.extracts if e.score is not None), key=lambda e: -(e.score or 0))
        return (hits or list(context.extracts))[: self.max_quotes]

    def select(
        self, context: Context, question: str | None = None, stats: TermStats | None = None
    ) -> list[Extract]:
        """The extracts to quote, best first; ``[]`` means refuse (see the class doc). ``stats``:
        the index's document frequencies (:data:`~ancre.query.relevance.TermStats`)."""
        if question is None:
            return self.best_extracts(context)
        if context.empty:
            return []
        terms = question_terms(question, stats)
        if terms.empty:
            return []
        shown: dict[tuple[str, str], list[str]] = {}
        for e in context.extracts:
            shown.setdefault((e.collection, e.doc_id), [e.filename, e.path, e.header]).append(e.text)
        head = broad_topic(question)
        if head is not None and len(terms.distinctive) > 1:
            # a broad question or a comparison names several subjects: each document holds its own
            topical = {key for key, texts in shown.items()
                       if any(on_topic(replace(terms, distinctive=(t,)), "\n".join(texts)) for t in terms.distinctive)}
        else:
            topical = {key for key, texts in shown.items() if on_topic(terms, "\n".join(texts))}
        if head is not None:  # « résume les contrats … »: only documents that are such things
            topical = {key for key in topical if head in set(tokenize("\n".join(shown[key])))}
        # an extract is read with its file name: "4. Conditions financières" of
        # 03_Contrat_Maintenance_Etude_Rochat.docx is about the Rochat maintenance contract even
        # though the chunk itself does not say so, and must outrank the title page (its header
        # said whose document it is above; it would give every passage of it the same words here)
        ranked = sorted(
            (
                (coverage(terms, f"{e.filename}\n{e.text}"), e.score or 0.0, -i, e)
                for i, e in enumerate(context.extracts)
                if (e.collection, e.doc_id) in topical
            ),
            key=lambda x: (-x[0], -x[1], -x[2]),
        )
        if not ranked:
            return []
        if not terms.anchored and (terms.unknown or ranked[0][0] < MIN_COVERAGE):
            return []
        chosen = [e for cov, _, _, e in ranked if cov > 0 or not terms.content] or [ranked[0][3]]
        if head is not None:  # a broad question: the best extract of each document first
            firsts: dict[tuple[str, str], Extract] = {}
            for e in chosen:
                firsts.setdefault((e.collection, e.doc_id), e)
            chosen = list(firsts.values()) + [e for e in chosen if e not in firsts.values()]
            return chosen[: max(self.max_quotes, min(len(firsts), MAX_BROAD_QUOTES))]
        return chosen[: self.max_quotes]

    def answer(
        self,
        context: Context,
        question: str | None = None,
        stats: TermStats | None = None,
        *,
        concise: bool = False,
        details: bool = False,
        folder: Callable[[str], str] | None = None,
    ) -> str:
        """The extractive answer text (Markdown), or :data:`REFUSAL`. ``concise`` / ``details``:
        Open WebUI's regenerate variants (one short quote; up to :data:`MAX_BROAD_QUOTES` longer
        ones). When the quotes come from documents that are versions of one another
        (:attr:`Context.versions`), the matching passage of each version is quoted, the one that
        looks current first, each labelled, under a note naming both files, their folders
        (``folder`` formats a location) and why one looks current."""
        quotes, chars = self.max_quotes, self.max_chars
        if concise:
            quotes, chars = 1, min(self.max_chars, 350)
        elif details:
            quotes, chars = MAX_BROAD_QUOTES, max(self.max_chars, 1200)
        picker = ExtractiveAnswerer(quotes, chars)
        best = picker.select(context, question, stats)
        if not best:
            return REFUSAL
        best, groups = _with_versions(best, context)
        parts = [EXTRACTIVE_HEADER]
        parts += [f"⚠️ {version_note(g, folder)}" for g in groups]
        shown_doc: str | None = None
        for e in best:
            label = _version_label(groups, e) if e.doc_id != shown_doc else None  # one label per document's quotes
            shown_doc = e.doc_id
            lead = f"{label}\n\n" if label else ""
            # a blank line: the citation is its own paragraph, never a lazy line of the quote's last one
            parts.append(f"{lead}{quote_extract(_shorten(e.text, chars))}\n\n[{e.filename}]")
        return "\n\n".join(parts)


MAX_BROAD_QUOTES = 5
"""Quotes of an extractive answer to a broad question (one per document first) or to « Add Details »."""


def _section(e: Extract) -> str:
    return e.heading_path[-1] if e.heading_path else ""


def _with_versions(best: list[Extract], context: Context) -> tuple[list[Extract], list[VersionGroup]]:
    """``best`` with, for each quote from a versioned document, the matching passage of the
    other versions (same section heading, else the most similar text); then grouped: one
    document's quotes together (in the order of its best quote), the documents in the order of
    their best quote, a version group's documents together, current first. Returns the quotes and
    the groups concerned."""
    groups = [g for g in context.versions if any(_member(g, e) is not None for e in best)]
    out: list[Extract] = list(best)
    for e in best:
        group = next((g for g in groups if _member(g, e) is not None), None)
        for i in range(len(group.documents) if group is not None else 0):
            assert group is not None
            candidates = [x for x in context.extracts if _member(group, x) == i and x.doc_id != e.doc_id]
            if not candidates or any(_member(group, x) == i for x in out):
                continue
            same = [x for x in candidates if _section(x) and _section(x) == _section(e)]
            out.append(same[0] if same else max(candidates, key=lambda x: similarity(x.text, e.text)))

    def family(x: Extract) -> tuple[int, int]:
        """(rank of the group or document's first quote, rank within the group)."""
        group = next((g for g in groups if _member(g, x) is not None), None)
        if group is None:
            return min(i for i, y in enumerate(out) if y.doc_id == x.doc_id), 0
        first = min(i for i, y in enumerate(out) if _member(group, y) is not None)
        return first, _member(group, x) or 0

    return sorted(out, key=lambda x: (*family(x), out.index(x))), groups


def _member(group: VersionGroup, e: Extract) -> int | None:
    """``e``'s document's place in ``group`` (0: the one that looks current), ``None`` if not in it."""
    for i, (name, path) in enumerate(zip(group.documents, group.paths or group.documents, strict=True)):
        if e.filename == name and (not group.paths or e.path == path):
            return i
    return None


_LABELS = {
    "unknown": "**Version d'un même document (en vigueur : inconnue)** :",
    "current": "**Version en vigueur (probable)** :",
    "replaced": "**Version antérieure (remplacée)** :",
}


def _version_label(groups: list[VersionGroup], e: Extract) -> str | None:
    """The label of a quote of a versioned document (``None``: not versioned)."""
    for g in groups:
        i = _member(g, e)
        if i is not None:
            return _LABELS[g.role(e.filename, g.paths[i] if g.paths else "")]
    return None


__all__ = [
    "DEFAULT_OLLAMA_MODEL",
    "DEFAULT_TEMPERATURE",
    "EXTRACTIVE_HEADER",
    "MAX_BROAD_QUOTES",
    "Abort",
    "ChatClient",
    "ChatResult",
    "ChatStream",
    "ExtractiveAnswerer",
    "LlmError",
    "ModelCallAborted",
    "ModelInfo",
    "ModelNotFoundError",
    "OllamaChat",
    "OpenAIChat",
    "chat_endpoint",
    "clamp_temperature",
    "current_abort",
    "make_chat_client",
    "make_client",
    "ollama_name",
    "server_root",
]
