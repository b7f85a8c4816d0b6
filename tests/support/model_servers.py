"""Model servers as their documentation describes them, on a real HTTP server on 127.0.0.1
(:class:`~support.httpserver.ScriptedServer`): :class:`FakeOllama` (Ollama's API and its
OpenAI-compatible endpoint) and :class:`FakeVllm` (vLLM's OpenAI-compatible server).

Sources, cited beside each route below:

- Ollama: the API reference, ``docs/api.md`` of ollama/ollama ("Generate a chat completion", "Load
  a model", "Show Model Information", "List Local Models", "Version"), ``docs/api/errors.mdx``
  (errors: ``{"error": "…"}``, 404 for a model that doesn't exist), ``docs/context-length.mdx`` and
  ``docs/api/openai-compatibility.mdx`` (the OpenAI endpoint can't set the context size), and for
  what the API reference does not say — how a prompt longer than ``num_ctx`` is cut — the
  runner's source, ``runner/ollamarunner/runner.go`` (« truncating input prompt »: the first
  ``num_keep`` tokens and the end are kept, ``new == num_ctx``) and ``llm/server.go`` (a
  ``num_ctx`` above the model's trained length is lowered to it); ``num_keep`` defaults to 4
  (``api/types.go``), plus the BOS token: keep=5 in the log line.
- vLLM: "OpenAI-Compatible Server" (``/v1/models`` cards with ``max_model_len``, ``/tokenize`` →
  ``{"count", "max_model_len", "tokens"}``, chat completions with ``usage``, ``finish_reason``,
  ``stream_options.include_usage``), "Reasoning Outputs" (``reasoning``, formerly
  ``reasoning_content``; Qwen3's ``chat_template_kwargs.enable_thinking``), and its protocol's
  errors (``{"error": {"message", "type", "param", "code"}}``: 404 « The model `x` does not
  exist. », 400 « This model's maximum context length is … »).

Tokens: neither server's tokenizer can run here, so both count with :func:`tokens` — the text cut
as a byte-level BPE pre-tokenizer cuts it, letter runs in pieces of at most 4 characters, digits one
by one — and the chat template is ChatML (Qwen2.5's and Qwen3's), each special token one token. The
fakes answer *from what they read*: a scripted answer may be a function of the request, which
carries the prompt as evaluated (:class:`Seen`), so a test can show what a model that lost its
system prompt would write.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from support.httpserver import Request, ScriptedServer, ndjson, sse

_TOKEN = re.compile(r"<\|im_(?:start|end)\|>| ?[^\W\d_]{1,4}|\d| ?(?:[^\w\s]|_)|\s+")


def tokens(text: str) -> list[str]:
    """The fakes' tokenizer: pieces that join back into ``text`` (see the module doc)."""
    out = _TOKEN.findall(text)
    assert "".join(out) == text
    return out


def chatml(messages: list[dict[str, Any]]) -> str:
    """The prompt a ChatML template renders (Qwen2.5 / Qwen3), generation prompt included."""
    body = "".join(f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


@dataclass(frozen=True)
class Seen(Request):
    """A chat request with what the server made of it: ``prompt``, the text evaluated (after any
    truncation), its token count ``evaluated`` and the window used, ``num_ctx``."""

    prompt: str = ""
    evaluated: int = 0
    num_ctx: int = 0


Scripted = str | Callable[[Seen], Any]
"""An answer: its content, or a function of the request (with the prompt as evaluated) returning
the content (``str``) or any :class:`~support.httpserver.ScriptedServer` answer."""


@dataclass
class Model:
    """A model the fake serves: ``answer`` (scripted), ``context_length`` (its trained length,
    ``model_info["<arch>.context_length"]``), ``arch``, ``thinking`` (reasoning written before the
    answer by a thinking model, ``""``: none)."""

    answer: Scripted = "OK"
    context_length: int = 32768
    arch: str = "qwen2"
    thinking: str = ""


def _cut_answer(text: str, budget: int | None) -> tuple[str, str]:
    """``(text, reason)``: the answer within ``budget`` tokens (``None``/negative: no limit) and
    ``"length"`` when it was cut, else ``"stop"``."""
    toks = tokens(text)
    if budget is None or budget < 0 or len(toks) <= budget:
        return text, "stop"
    return "".join(toks[:budget]), "length"


@dataclass
class FakeOllama:
    """Ollama on ``srv`` serving ``models`` (name with tag → :class:`Model`). ``default_num_ctx``:
    the window of a request without ``options.num_ctx`` (``OLLAMA_CONTEXT_LENGTH``; 2,048 in many
    versions); ``num_keep``: tokens kept at the start when a prompt is cut; ``force_window``: a
    window applied whatever the request says (a server that truncates anyway, to force a
    shortfall). ``seen`` lists every chat request as evaluated."""

    srv: ScriptedServer
    models: dict[str, Model]
    default_num_ctx: int = 2048
    num_keep: int = 5
    force_window: int | None = None
    version: str = "0.12.0"
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.srv.route("POST", "/api/chat", self._chat)
        self.srv.route("POST", "/api/show", self._show)
        self.srv.route("GET", "/api/tags", self._tags)
        # docs/api.md, "Version": {"version": "0.5.1"}
        self.srv.route("GET", "/api/version", lambda req: (200, {"version": self.version}))
        self.srv.route("POST", "/v1/chat/completions", self._openai_chat)
        self.srv.route("GET", "/v1/models", self._openai_models)

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _missing(name: str) -> tuple[int, dict[str, str]]:
        # docs/api/errors.mdx: 404 Not Found (model doesn't exist), {"error": "…"}; the message is
        # server/routes.go's fmt.Sprintf("model '%s' not found", req.Model)
        return 404, {"error": f"model '{name}' not found"}

    def _evaluate(self, req: Request, model: Model, num_ctx: int | None) -> Seen:
        """The prompt as the runner evaluates it: cut to the window like runner.go does."""
        window = self.force_window or min(num_ctx or self.default_num_ctx, model.context_length)
        toks = tokens(chatml(req.json["messages"]))
        if len(toks) > window:  # runner/ollamarunner/runner.go: inputs[:numKeep] + inputs[numKeep+discard:]
            discard = len(toks) - window
            toks = toks[: self.num_keep] + toks[self.num_keep + discard :]
        seen = Seen(req.method, req.path, req.query, req.headers, req.body, req.json,
                    prompt="".join(toks), evaluated=len(toks), num_ctx=window)
        self.seen.append(seen)
        return seen

    @staticmethod
    def _content(model: Model, seen: Seen) -> Any:
        return model.answer(seen) if callable(model.answer) else model.answer

    # -- Ollama API ---------------------------------------------------------------------------

    def _chat(self, req: Request) -> Any:
        body = req.json
        name = body["model"]
        model = self.models.get(name)
        if model is None:
            return self._missing(name)
        stamp = {"model": name, "created_at": "2026-01-15T08:30:00.000000Z"}
        if not body.get("messages"):
            # docs/api.md, "Load a model" (/api/chat with an empty messages array)
            return 200, {**stamp, "message": {"role": "assistant", "content": ""}, "done_reason": "load", "done": True}
        options = body.get("options") or {}
        seen = self._evaluate(req, model, options.get("num_ctx"))
        scripted = self._content(model, seen)
        if not isinstance(scripted, str):
            return scripted
        content, reason = _cut_answer(scripted, options.get("num_predict"))
        thinking = model.thinking if model.thinking and body.get("think") is not False else ""
        # docs/api.md, "Chat request (No streaming)" / final streamed object: done_reason,
        # prompt_eval_count (the prompt's tokens), eval_count, durations in nanoseconds
        final = {**stamp, "done_reason": reason, "done": True, "total_duration": 4883583458,
                 "load_duration": 1334875, "prompt_eval_count": seen.evaluated, "prompt_eval_duration": 342546000,
                 "eval_count": len(tokens(content)), "eval_duration": 4535599000}
        if not body.get("stream", True):
            msg: dict[str, Any] = {"role": "assistant", "content": content}
            if thinking:
                msg["thinking"] = thinking
            return 200, {**final, "message": msg}
        # docs/api.md, "Chat request (Streaming)": one object per piece, then the final one
        frames: list[dict[str, Any]] = []
        if thinking:
            frames.append({**stamp, "message": {"role": "assistant", "content": "", "thinking": thinking}, "done": False})
        toks = tokens(content)
        frames += [{**stamp, "message": {"role": "assistant", "content": "".join(toks[i : i + 3])}, "done": False}
                   for i in range(0, len(toks), 3)]
        return ndjson([*frames, {**final, "message": {"role": "assistant", "content": ""}}])

    def _show(self, req: Request) -> Any:
        name = req.json.get("model") or req.json.get("name")
        model = self.models.get(name)
        if model is None:
            return self._missing(name)
        # docs/api.md, "Show Model Information": model_info["<arch>.context_length"]
        return 200, {
            "modelfile": f"# Modelfile generated by \"ollama show\"\nFROM {name}\n",
            "parameters": 'stop "<|im_start|>"\nstop "<|im_end|>"',
            "template": "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}…",
            "details": {"parent_model": "", "format": "gguf", "family": model.arch, "families": [model.arch],
                        "parameter_size": "14.8B", "quantization_level": "Q4_K_M"},
            "model_info": {
                "general.architecture": model.arch, "general.file_type": 15, "general.parameter_count": 14770033664,
                f"{model.arch}.attention.head_count": 40, f"{model.arch}.block_count": 48,
                f"{model.arch}.context_length": model.context_length, f"{model.arch}.embedding_length": 5120,
                "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
            },
            "capabilities": ["completion", "tools"] + (["thinking"] if model.thinking else []),
        }

    def _tags(self, req: Request) -> Any:
        # docs/api.md, "List Local Models"
        return 200, {"models": [
            {"name": name, "model": name, "modified_at": "2025-05-10T08:06:48.639712648-07:00", "size": 8988124069,
             "digest": "7cdf5a0187d5c58cc5d369b255592f7841d1c4696d45a8c8a9489440385b22f6",
             "details": {"parent_model": "", "format": "gguf", "family": m.arch, "families": [m.arch],
                         "parameter_size": "14.8B", "quantization_level": "Q4_K_M"}}
            for name, m in self.models.items()
        ]}

    # -- Ollama's OpenAI-compatible endpoint ---------------------------------------------------

    def _openai_chat(self, req: Request) -> Any:
        # docs/api/openai-compatibility.mdx: "The OpenAI API does not have a way of setting the
        # context size": the default window holds, whatever the request
        name = req.json["model"]
        model = self.models.get(name)
        if model is None:
            return 404, {"error": {"message": f"model '{name}' not found", "type": "api_error", "param": None,
                                   "code": None}}
        seen = self._evaluate(req, model, None)
        scripted = self._content(model, seen)
        if not isinstance(scripted, str):
            return scripted
        content, reason = _cut_answer(scripted, req.json.get("max_tokens"))
        return openai_reply(req, name, content, reason, seen.evaluated)

    def _openai_models(self, req: Request) -> Any:
        return 200, {"object": "list", "data": [
            {"id": name, "object": "model", "created": 1715000000, "owned_by": "library"} for name in self.models]}


def openai_reply(req: Request, model: str, content: str, reason: str, prompt_tokens: int,
                 reasoning: str | None = None) -> Any:
    """A chat completion, streamed (SSE) or not, as vLLM's OpenAI-compatible server writes it
    ("OpenAI-Compatible Server"; ``reasoning`` as in "Reasoning Outputs")."""
    stamp = {"id": "chatcmpl-9f1c", "created": int(time.time()), "model": model}
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + len(tokens(content)),
             "completion_tokens": len(tokens(content)), "prompt_tokens_details": None}
    if not req.json.get("stream"):
        msg: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": []}
        if reasoning is not None:
            msg["reasoning"] = reasoning
        return 200, {**stamp, "object": "chat.completion", "choices": [
            {"index": 0, "message": msg, "logprobs": None, "finish_reason": reason, "stop_reason": None}],
            "usage": usage, "prompt_logprobs": None}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**stamp, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def events() -> Iterator[Any]:
        yield chunk({"role": "assistant", "content": ""})
        if reasoning:
            yield chunk({"reasoning": reasoning})
        toks = tokens(content)
        for i in range(0, len(toks), 3):
            yield chunk({"content": "".join(toks[i : i + 3])})
        yield chunk({}, reason)
        if (req.json.get("stream_options") or {}).get("include_usage"):
            yield {**stamp, "object": "chat.completion.chunk", "choices": [], "usage": usage}

    return sse(events())


@dataclass
class FakeVllm:
    """vLLM's OpenAI-compatible server on ``srv`` serving ``models`` (served name →
    :class:`Model`, whose ``context_length`` is the ``max_model_len``). ``reasoning_parser``:
    started with ``--reasoning-parser`` (the reasoning goes to ``reasoning``; without it, a
    thinking model writes its ``<think>`` block in the content). ``tokenize``: whether
    ``/tokenize`` is served. ``seen`` lists every chat request."""

    srv: ScriptedServer
    models: dict[str, Model]
    reasoning_parser: bool = True
    tokenize: bool = True
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.srv.route("GET", "/v1/models", self._models)
        self.srv.route("POST", "/v1/chat/completions", self._chat)
        if self.tokenize:
            self.srv.route("POST", "/tokenize", self._tokenize)

    @staticmethod
    def _error(status: int, message: str, type: str, param: str | None = None) -> tuple[int, dict[str, Any]]:
        # vllm/entrypoints/openai/protocol.py: ErrorResponse {"error": ErrorInfo(message, type, param, code)}
        return status, {"error": {"message": message, "type": type, "param": param, "code": status}}

    def _models(self, req: Request) -> Any:
        # "OpenAI-Compatible Server": ModelCard(id, object, created, owned_by, root, parent, max_model_len, permission)
        return 200, {"object": "list", "data": [
            {"id": name, "object": "model", "created": 1715000000, "owned_by": "vllm", "root": name, "parent": None,
             "max_model_len": m.context_length, "permission": [{"id": "modelperm-1", "object": "model_permission",
                                                                 "allow_sampling": True, "allow_view": True}]}
            for name, m in self.models.items()]}

    def _tokenize(self, req: Request) -> Any:
        # "OpenAI-Compatible Server", Tokenizer API: TokenizeResponse(count, max_model_len, tokens)
        body = req.json
        model = self.models.get(body.get("model") or next(iter(self.models)))
        if model is None:
            return self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError", "model")
        text = chatml(body["messages"]) if "messages" in body else body.get("prompt", "")
        toks = tokens(text)
        return 200, {"count": len(toks), "max_model_len": model.context_length, "tokens": list(range(len(toks))),
                     "token_strs": None}

    def _chat(self, req: Request) -> Any:
        body = req.json
        name = body["model"]
        model = self.models.get(name)
        if model is None:
            return self._error(404, f"The model `{name}` does not exist.", "NotFoundError", "model")
        toks = tokens(chatml(body["messages"]))
        budget = body.get("max_tokens") or 0
        if len(toks) + budget > model.context_length:  # vLLM refuses; it never cuts a prompt silently
            return self._error(
                400, f"This model's maximum context length is {model.context_length} tokens. However, you requested "
                     f"{len(toks) + budget} tokens ({len(toks)} in the messages, {budget} in the completion). Please "
                     "reduce the length of the messages or completion.", "BadRequestError")
        seen = Seen(req.method, req.path, req.query, req.headers, req.body, body, prompt="".join(toks),
                    evaluated=len(toks), num_ctx=model.context_length)
        self.seen.append(seen)
        scripted = model.answer(seen) if callable(model.answer) else model.answer
        if not isinstance(scripted, str):
            return scripted
        thinks = bool(model.thinking) and (body.get("chat_template_kwargs") or {}).get("enable_thinking") is not False
        if thinks and not self.reasoning_parser:  # "Reasoning Outputs": without a parser, in the content
            content, reason = _cut_answer(f"<think>\n{model.thinking}\n</think>\n\n{scripted}", body.get("max_tokens"))
            return openai_reply(req, name, content, reason, len(toks))
        content, reason = _cut_answer(scripted, body.get("max_tokens"))
        return openai_reply(req, name, content, reason, len(toks), model.thinking if thinks else None)


__all__ = ["FakeOllama", "FakeVllm", "Model", "Seen", "chatml", "openai_reply", "tokens"]
