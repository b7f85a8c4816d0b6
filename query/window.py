"""The model's context window (docs/ARCHITECTURE.md "Data flow of a question" steps 4–6): the
prompt is sized to fit it, the window is asked for, and what the server really read is checked.

**Why.** Ollama uses its default window (``num_ctx``: 2,048 to 4,096 tokens in many versions) when
a request sets none, and cuts a longer prompt without an error: it keeps the first ``num_keep``
tokens and the end (``runner/ollamarunner/runner.go`` of ollama/ollama, « truncating input prompt
… keep=5 new=2048 »), so the system prompt and its rules are lost and the model answers from
extracts alone. An OpenAI-compatible server can't be given a window at all (vLLM's is its
``max_model_len``: a longer request is refused, 400).

**Sizing** (:meth:`ContextWindow.fit`): the model's context length comes from the server (Ollama
``POST /api/show``: ``model_info["<arch>.context_length"]``; vLLM ``GET /v1/models``:
``max_model_len``), capped by ``context_length`` from the configuration (also the value used when
the server says nothing). The prompt must leave the answer budget (``max_tokens``) free: when it
does not, ancre drops complements itself, least relevant first — the context's own order
(principal document first, then the others by their best result: :mod:`ancre.query.context`) read
from the end — then, the principal document alone left, its chunks farthest from its best hit; what
was dropped is recorded (:attr:`Fitted.dropped`, control ``contexte_reduit``). Ollama is then sent
``options.num_ctx`` = the prompt plus the answer budget, rounded up to a multiple of
:data:`WINDOW_STEP`, at least the configured ``num_ctx``, at most the model's length.

**Counting tokens.** ancre can't run the model's tokenizer. Where the server has a tokenizer
endpoint (vLLM ``POST /tokenize``), its own count is used. Elsewhere (Ollama has none),
:func:`estimate_tokens` gives a **conservative estimate** — an over-count, for sizing — and
:func:`min_tokens` a **lower bound**, for checking. Both cut the text the way byte-level BPE
tokenizers pre-tokenize it (the pattern of Qwen2/Qwen3 and Llama 3: letter runs, digits, runs of
other symbols, whitespace), since no token ever spans two such pieces:

- estimate: a letter run of *n* characters counts ⌈*n* / 2.5⌉ tokens, plus one per letter outside
  the Latin alphabets (scripts the vocabulary covers less); each digit one (Qwen splits numbers into
  digits); each other symbol one per UTF-8 byte; a run of line breaks one, other whitespace one
  unless it is a single space before a letter or a symbol (which it joins); and
  :data:`TEMPLATE_TOKENS` per message plus the generation prompt for the chat template (ChatML:
  ``<|im_start|>role\\n … <|im_end|>\\n``). On the bundled corpus this is 1.65 times what
  XLM-RoBERTa's tokenizer counts (1.48 at least; Qwen's, whose digits are one token each, counts more).
- lower bound: one token per letter run and per digit run — every real tokenizer needs at least
  that — and nothing for the rest (0.57 times XLM-RoBERTa's count on the corpus, 0.79 at most).

``tests/unit/test_window.py`` checks both against a real subword tokenizer (XLM-RoBERTa's, the
one multilingual-e5 ships) on every chunk of the bundled corpus.

**Checking** (:meth:`ContextWindow.run`): after the answer, the count the server reports
(Ollama ``prompt_eval_count``, OpenAI ``usage.prompt_tokens``) is compared with what was sent. A
count under the lower bound, one that filled the whole window sent, or one below the prompt's
count that is exactly a window's size (2,048, 4,096 … — what Ollama's cut leaves when the window
it applied was not ancre's, behind its OpenAI-compatible endpoint or on a server that ignores
``num_ctx``) means the server read a truncated prompt: the control ``contexte_tronque`` fires and the answer is not grounded
(:func:`apply_run`: HTTP 422 on ``/query``, the warning on ``/v1``), whatever it says. An answer
that stopped on the token budget (``done_reason`` / ``finish_reason`` ``"length"``) gets
``reponse_tronquee``: the user is told it is incomplete.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ancre.query.context import Context, find_versions
from ancre.query.llm import ChatClient, LlmError, ModelNotFoundError
from ancre.query.prompt import ChatMessage

if TYPE_CHECKING:  # grounding imports the judge, which sizes its prompt here
    from ancre.query.grounding import Verdict

log = logging.getLogger("ancre.query.window")

CONTROL_CONTEXT_TRUNCATED = "contexte_tronque"
"""The server read less of the prompt than was sent: the answer is not grounded."""
CONTROL_ANSWER_CUT = "reponse_tronquee"
"""The answer stopped on its token budget (``done_reason`` / ``finish_reason`` ``"length"``)."""
CONTROL_CONTEXT_REDUCED = "contexte_reduit"
"""Extracts were left out so that the prompt fits the model's context length."""

WINDOW_STEP = 4096
"""Ollama windows are multiples of this (few distinct sizes: Ollama reloads a model whose
``num_ctx`` changes)."""
WINDOW_SIZES = frozenset(2**k for k in range(9, 19))
"""Windows a server applies by default (512 to 262,144 tokens: Ollama's 2,048, its 4k/32k/256k VRAM
tiers, llama.cpp's): a prompt Ollama cut is evaluated as exactly its window (the first ``num_keep``
tokens and the end, ``new == num_ctx``), and a whole prompt of exactly such a size is rare."""
TEMPLATE_TOKENS = 8
"""Tokens of chat template counted per message, and for the generation prompt."""
INFO_TTL_S = 600.0
"""Seconds a server's description of the model is reused."""
FAILED_INFO_TTL_S = 60.0
"""Seconds before a server that could not describe the model is asked again."""
SERVER_COUNT_SLACK = 0.98
"""A server's own count (vLLM ``/tokenize``) stands for the lower bound, less this margin."""

_PIECES = re.compile(r"[^\W\d_]+|\d+|[\r\n]+|[^\S\r\n]+|[^\w\s]|_")
_ABSORBS_SPACE = re.compile(r"[^\W\d]|[^\w\s]")
"""What a single space before it joins (a letter or a symbol): not a token of its own."""


def estimate_tokens(text: str) -> int:
    """A conservative estimate (an over-count) of ``text``'s tokens (see the module doc)."""
    total = 0
    for m in _PIECES.finditer(text):
        piece = m.group()
        c = piece[0]
        if c.isdigit():
            total += len(piece)
        elif c.isalpha():
            total += math.ceil(len(piece) / 2.5) + sum(1 for ch in piece if ord(ch) > 0x24F)
        elif c in "\r\n":
            total += 1
        elif not c.isspace():
            total += len(piece.encode("utf-8"))
        elif piece != " " or not _ABSORBS_SPACE.match(text, m.end()):
            total += 1  # a run of spaces (a table's alignment), the space before a number: its own token
    return total


def min_tokens(text: str) -> int:
    """A lower bound of ``text``'s tokens in any subword tokenizer: its letter and digit runs."""
    return sum(1 for m in _PIECES.finditer(text) if m.group()[0].isalnum())


def messages_estimate(messages: Sequence[ChatMessage]) -> int:
    """:func:`estimate_tokens` of a chat request: the messages with their template."""
    return sum(estimate_tokens(m.content) + TEMPLATE_TOKENS for m in messages) + TEMPLATE_TOKENS


def messages_min(messages: Sequence[ChatMessage]) -> int:
    """:func:`min_tokens` of a chat request."""
    return sum(min_tokens(m.content) for m in messages)


class PromptTooLarge(LlmError):
    """The question's prompt can't fit the model's context length even with one extract."""


@dataclass(frozen=True)
class Dropped:
    """Extracts left out to fit the window: ``chunks`` of the document ``filename``
    (``whole``: the document was left out entirely)."""

    filename: str
    doc_id: str
    chunks: int
    whole: bool


@dataclass(frozen=True)
class Fitted:
    """A prompt sized for the model: the ``context`` it holds (extracts may have been dropped:
    ``dropped``), its ``messages``, the window sent (``num_ctx``, Ollama; ``None`` where a request
    can't set it), its tokens (``prompt_tokens``, counted by the server or estimated:
    ``counted_by`` ``"serveur"`` / ``"estimation"``) and their lower bound (``prompt_min``), and
    the model's context length as used (``context_length``, ``None``: unknown)."""

    context: Context
    messages: tuple[ChatMessage, ...]
    num_ctx: int | None
    prompt_tokens: int
    prompt_min: int
    counted_by: str
    context_length: int | None
    dropped: tuple[Dropped, ...] = ()


@dataclass(frozen=True)
class ModelRun:
    """One model call as the server reported it: the ``fitted`` prompt, the ``model``, the
    tokens the server says it evaluated (``evaluated``, ``None``: not said) and ``done_reason``."""

    fitted: Fitted
    model: str
    evaluated: int | None = None
    done_reason: str | None = None

    @property
    def context_truncated(self) -> bool:
        """The server read less than the prompt: fewer tokens than its lower bound, the whole
        window sent or more, or — fewer than the prompt's count — exactly a window's size
        (:data:`WINDOW_SIZES`, the model's length): the shape of Ollama's cut."""
        n = self.evaluated
        if n is None:
            return False
        f = self.fitted
        if n < f.prompt_min or (f.num_ctx is not None and n >= f.num_ctx):
            return True
        return n < f.prompt_tokens and (n in WINDOW_SIZES or n == f.context_length)

    @property
    def answer_cut(self) -> bool:
        """The answer stopped on its token budget."""
        return self.done_reason == "length"

    def audit(self) -> dict[str, Any]:
        """The audit log's ``model`` object (:mod:`ancre.query.audit`)."""
        f = self.fitted
        return {
            "name": self.model, "num_ctx": f.num_ctx, "context_length": f.context_length,
            "prompt_tokens": f.prompt_tokens, "prompt_min": f.prompt_min, "counted_by": f.counted_by,
            "prompt_eval_count": self.evaluated, "done_reason": self.done_reason,
            "dropped": [{"filename": d.filename, "doc_id": d.doc_id, "chunks": d.chunks, "whole": d.whole}
                        for d in f.dropped],
        }


def drop_one(context: Context) -> tuple[Context, Dropped] | None:
    """``context`` less its least relevant part — the last document after the principal one, or,
    the principal alone left, its chunk farthest from its best hit — and what was dropped;
    ``None`` when one extract is all that is left."""
    if len(context.sources) > 1:
        last = context.sources[-1]
        key = (last.collection, last.doc_id)
        keep = tuple(e for e in context.extracts if (e.collection, e.doc_id) != key)
        gone = Dropped(last.filename, last.doc_id, len(context.extracts) - len(keep), True)
        sources = context.sources[:-1]
    else:
        if len(context.extracts) <= 1:
            return None
        hits = [e for e in context.extracts if e.score is not None] or list(context.extracts)
        best = max(hits, key=lambda e: e.score or 0.0).chunk_index
        far = max(context.extracts, key=lambda e: (abs(e.chunk_index - best), e.chunk_index))
        keep = tuple(e for e in context.extracts if e is not far)
        gone = Dropped(far.filename, far.doc_id, 1, False)
        sources = context.sources
    return replace(context, extracts=keep, sources=sources, versions=find_versions(keep, sources)), gone


def _merge(dropped: list[Dropped]) -> tuple[Dropped, ...]:
    """One entry per document, in the order first dropped."""
    out: dict[str, Dropped] = {}
    for d in dropped:
        prev = out.get(d.doc_id)
        out[d.doc_id] = d if prev is None else replace(prev, chunks=prev.chunks + d.chunks, whole=prev.whole or d.whole)
    return tuple(out.values())


class ContextWindow:
    """Sizes prompts for ``client``'s model (see the module doc). ``num_ctx``: the smallest
    window asked for; ``max_tokens``: the answer budget; ``context_length``: the configured cap
    (and the length when the server does not say). Thread-safe."""

    def __init__(self, client: ChatClient, *, num_ctx: int, max_tokens: int, context_length: int | None = None) -> None:
        self.client = client
        self.num_ctx = num_ctx
        self.max_tokens = max_tokens
        self.context_length = context_length
        self._lock = threading.Lock()
        self._known: tuple[float, int | None] | None = None  # (until when, the server's length)

    def limit(self) -> int | None:
        """The model's context length in tokens as used: the server's, capped by the configured
        one; ``None`` when neither says. Raises :class:`~ancre.query.llm.ModelNotFoundError` when
        the server says it has no such model; another failure to ask leaves the configured one."""
        with self._lock:
            known = self._known
        now = time.monotonic()
        if known is None or now > known[0]:
            try:
                info = self.client.info()
            except ModelNotFoundError:
                raise
            except LlmError as e:  # asked again in a minute, not at every question
                log.warning("%s: the model's context length could not be read (%s)", self.client.model, e)
                info, ttl = None, FAILED_INFO_TTL_S
            else:
                ttl = INFO_TTL_S
            if info is not None and info.present is False:  # never kept: the admin may pull it now
                raise ModelNotFoundError(self.client.kind, self.client.model, getattr(self.client, "url", ""))
            known = (now + ttl, info.context_length if info is not None else None)
            with self._lock:
                self._known = known
        server = known[1]
        if server is None or self.context_length is None:
            return server if server is not None else self.context_length
        return min(server, self.context_length)

    def window(self, prompt_tokens: int, limit: int | None) -> int | None:
        """The ``num_ctx`` to send for a prompt of ``prompt_tokens`` (``None`` where requests
        can't set one)."""
        if not self.client.sets_window:
            return None
        size = max(self.num_ctx, math.ceil((prompt_tokens + self.max_tokens) / WINDOW_STEP) * WINDOW_STEP)
        return size if limit is None else min(size, limit)

    def _count(self, messages: Sequence[ChatMessage]) -> tuple[int, int, str]:
        counted = self.client.count_tokens(messages)
        if counted is not None:
            return counted, int(counted * SERVER_COUNT_SLACK), "serveur"
        return messages_estimate(messages), messages_min(messages), "estimation"

    def fit(self, context: Context, render: Callable[[Context], Sequence[ChatMessage]], *, drop: bool = True) -> Fitted:
        """The prompt ``render`` makes of ``context``, sized (see the module doc); ``drop=False``
        (the judge, who must read what the answer read) leaves out nothing. Raises
        :class:`PromptTooLarge` when it can't fit (even with one extract), and as :meth:`limit`."""
        limit = self.limit()
        budget = None if limit is None else limit - self.max_tokens
        dropped: list[Dropped] = []
        while True:
            messages = tuple(render(context))
            tokens, least, how = self._count(messages)
            if budget is None or tokens <= budget:
                break
            smaller = drop_one(context) if drop else None
            if smaller is None:
                raise PromptTooLarge(
                    f"{self.client.model}: the prompt needs {tokens} tokens and {self.max_tokens} are kept for the "
                    f"answer, over the context length of {limit} (llm.context_length, llm.max_tokens)")
            context, gone = smaller
            dropped.append(gone)
        if dropped:
            log.info("%s: %d extract(s) left out so that the prompt (%d tokens, %s) fits %d",
                     self.client.model, sum(d.chunks for d in dropped), tokens, how, limit)
        return Fitted(context, messages, self.window(tokens, limit), tokens, least, how, limit, _merge(dropped))

    def run(self, fitted: Fitted, done_reason: str | None, evaluated: int | None) -> ModelRun:
        """The call's :class:`ModelRun`; logs a truncated prompt (one line, for the admin)."""
        out = ModelRun(fitted, self.client.model, evaluated, done_reason)
        if out.context_truncated:
            log.warning(
                "%s read %s tokens of a prompt of at least %d (window %s): the server truncated it; "
                "the answer is marked %s (raise the server's context length, or use kind = \"ollama\" for an "
                "Ollama server)", self.client.model, evaluated, fitted.prompt_min, fitted.num_ctx,
                CONTROL_CONTEXT_TRUNCATED)
        return out


def apply_run(verdict: Verdict, run: ModelRun | None) -> Verdict:
    """``verdict`` with what the model call adds: ``contexte_tronque`` (then not grounded,
    whatever the judge said), ``reponse_tronquee``, ``contexte_reduit``."""
    if run is None:
        return verdict
    extra: list[str] = []
    if run.context_truncated:
        extra.append(CONTROL_CONTEXT_TRUNCATED)
    if run.answer_cut:
        extra.append(CONTROL_ANSWER_CUT)
    if run.fitted.dropped:
        extra.append(CONTROL_CONTEXT_REDUCED)
    if not extra:
        return verdict
    out = replace(verdict, controls=(*verdict.controls, *extra))
    if run.context_truncated:  # established by the control: the judge is not needed
        out = replace(out, ancree=False, verification="non_requise")
    return out


__all__ = [
    "CONTROL_ANSWER_CUT",
    "CONTROL_CONTEXT_REDUCED",
    "CONTROL_CONTEXT_TRUNCATED",
    "TEMPLATE_TOKENS",
    "WINDOW_SIZES",
    "WINDOW_STEP",
    "ContextWindow",
    "Dropped",
    "Fitted",
    "ModelRun",
    "PromptTooLarge",
    "apply_run",
    "drop_one",
    "estimate_tokens",
    "messages_estimate",
    "messages_min",
    "min_tokens",
]
