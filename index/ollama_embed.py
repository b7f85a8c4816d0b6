"""``ollama`` embedder (``POST /api/embed``) and :class:`HttpEmbedder`, the HTTP machinery it shares
with the ``openai`` embedder (:mod:`ancre.index.openai_embed`).

What every HTTP embedder does (docs/ARCHITECTURE.md "Data model and the rights filter"):

- **Clean-up**: table-of-contents leaders (runs of dots/underscores) are collapsed with
  :func:`ancre.ingest.textclean.collapse_leaders` before embedding — they made
  nomic-embed-text answer HTTP 500 in the lab.
- **Prefixes**: ``document_prefix`` / ``query_prefix`` from the config; when unset, models whose
  name contains ``nomic-embed`` get ``search_document: `` / ``search_query: `` (nomic-embed-text
  model card: the task prefix is required), other models none. An explicit ``""`` means no prefix.
- **Batching**: ``batch_size`` texts per request.
- **Retries**: connect errors, timeouts and other transport errors, HTTP 429 and HTTP 5xx (except a
  "too long" answer) are retried up to ``retries`` times with exponential backoff
  (``backoff_s · 2^k`` seconds, capped at 30 s, at least the server's ``Retry-After``), then
  :class:`~ancre.errors.EmbedderError` naming the URL and the last error. Other HTTP errors fail at
  once. API keys never appear in errors or logs.
- **Too long**: an input the server rejects as too long (HTTP 400/413/422/500 whose error text
  mentions the context length, "too long", "exceed", "input length"...; Ollama with
  ``truncate: false`` answers ``400 {"error": "the input length exceeds the context length"}``) is
  split in two at a whitespace near the middle and each half is embedded (recursively, at most
  :data:`MAX_SPLIT_DEPTH` levels); the half vectors are averaged and re-normalised, so nothing is
  dropped. A batch rejected as too long is retried text by text to find the offender(s).
- **Output**: L2-normalised float32. ``dim`` comes from ``embedder.dim`` (then every answer is
  checked against it) or is probed with one embed call at construction.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import httpx
import numpy as np

from ancre.errors import ConfigError, EmbedderError
from ancre.ingest.textclean import collapse_leaders
from ancre.models import Closing
from ancre.settings import HttpEmbedderConfig, OllamaEmbedderConfig, resolve_secret

log = logging.getLogger(__name__)

OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434"
OLLAMA_DEFAULT_MODEL = "nomic-embed-text"
NOMIC_PREFIXES = ("search_document: ", "search_query: ")
"""Task prefixes nomic-embed-text expects (document, query)."""
MAX_SPLIT_DEPTH = 6
"""A too-long text is halved at most this many times (≤ 64 pieces) before giving up."""
MAX_BACKOFF_S = 30.0
PROBE_TEXT = "dimension probe"

_TOO_LONG_STATUS = frozenset({400, 413, 422, 500})
_TOO_LONG_TEXT = re.compile(
    r"context length|context window|too long|exceed|input length|maximum context|"
    r"must have less than|too many tokens",
    re.IGNORECASE,
)


def default_prefixes(model: str) -> tuple[str, str]:
    """``(document_prefix, query_prefix)`` a model needs when the config sets none:
    ``("search_document: ", "search_query: ")`` for nomic-embed models, else ``("", "")``."""
    return NOMIC_PREFIXES if "nomic-embed" in model.lower() else ("", "")


def split_in_two(text: str) -> tuple[str, str]:
    """Split ``text`` at the whitespace closest to its middle (searched in the middle half), or at
    the middle character when there is none there. ``left + sep + right == text`` up to the one
    whitespace character consumed."""
    n = len(text)
    mid = n // 2
    lo, hi = n // 4, (3 * n) // 4
    for d in range(mid - lo + 1):
        for i in (mid - d, mid + d):
            if lo <= i < hi and text[i].isspace():
                return text[:i], text[i + 1 :]
    return text[:mid], text[mid:]


def _error_text(r: httpx.Response) -> str:
    """The error message of a failed answer: Ollama ``{"error": "..."}``, OpenAI/vLLM
    ``{"error": {"message": "..."}}``, older vLLM ``{"message": "..."}``, else the raw body."""
    try:
        body = r.json()
    except ValueError:
        return r.text[:500] or r.reason_phrase
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"][:500]
        if isinstance(err, str):
            return err[:500]
        if isinstance(body.get("message"), str):
            return body["message"][:500]
    return r.text[:500]


def _retry_after(r: httpx.Response) -> float:
    try:
        return float(r.headers.get("retry-after", 0))
    except ValueError:
        return 0.0


class _TooLong(Exception):
    """The server rejected the input(s) as longer than the model's context."""


class HttpEmbedder(Closing):
    """Base of the HTTP embedders: clean-up, prefixes, batching, retries, split-on-too-long,
    normalisation (see the module docstring). Subclasses set ``kind`` and implement
    :meth:`_payload` and :meth:`_extract`.

    Attributes: ``name`` (``<kind>:<model>``, plus ``[doc=…,query=…]`` when the prefixes differ
    from the model's defaults), ``dim``, ``model``, ``endpoint`` (full URL posted to),
    ``document_prefix``, ``query_prefix``. Thread-safe (one pooled ``httpx.Client``, timeout
    ``timeout_s`` seconds per request phase).

    Construction: ``url`` (base URL, checked), ``endpoint`` and ``model`` as the subclass resolved
    them from ``cfg``; the rest from ``cfg`` (``batch_size``, ``timeout_s``, ``retries``, ``dim``,
    the prefixes, ``api_key``); ``backoff_s`` the first retry delay in seconds. Raises
    :class:`~ancre.errors.ConfigError` for a bad ``url``/``model``, and
    :class:`~ancre.errors.EmbedderError` when the dimension probe fails.
    """

    kind: ClassVar[str]

    def __init__(
        self, cfg: HttpEmbedderConfig, *, url: str, endpoint: str, model: str, backoff_s: float = 0.5
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"embedder.url must start with http:// or https:// (got {url!r})")
        if not model:
            raise ConfigError(f'embedder.model is required for kind "{self.kind}"')
        self.model = model
        self.endpoint = endpoint
        self._batch_size = cfg.batch_size
        self._retries = cfg.retries
        self._backoff_s = backoff_s
        doc_default, query_default = default_prefixes(model)
        self.document_prefix = doc_default if cfg.document_prefix is None else cfg.document_prefix
        self.query_prefix = query_default if cfg.query_prefix is None else cfg.query_prefix
        self.name = f"{self.kind}:{model}"
        if (self.document_prefix, self.query_prefix) != (doc_default, query_default):
            self.name += f"[doc={self.document_prefix!r},query={self.query_prefix!r}]"
        key = resolve_secret(cfg.api_key, "embedder.api_key")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=cfg.timeout_s, headers=headers)
        if cfg.dim is not None:
            self.dim = cfg.dim
        else:
            try:
                self.dim = int(self._post([self.document_prefix + PROBE_TEXT]).shape[1])
            except _TooLong as e:
                self._client.close()
                msg = f"{self.endpoint}: dimension probe rejected as too long: {e}"
                raise EmbedderError(msg) from None
            except EmbedderError:
                self._client.close()
                raise

    def __repr__(self) -> str:  # no API key here, ever
        return f"{type(self).__name__}(name={self.name!r}, endpoint={self.endpoint!r}, dim={self.dim})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    # -- subclass hooks --------------------------------------------------------------------

    def _payload(self, inputs: list[str]) -> dict[str, Any]:
        """The JSON body embedding ``inputs`` (prefixes already applied)."""
        raise NotImplementedError

    def _extract(self, body: Any, n: int) -> list[Any]:
        """The ``n`` vectors, in input order, from a 200 answer's JSON (raise ``ValueError``,
        ``KeyError`` or ``TypeError`` on a malformed body)."""
        raise NotImplementedError

    # -- public API --------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dim)`` float32, L2-normalised, for ``n`` passages (leaders collapsed, document
        prefix applied). ``n = 0`` → ``(0, dim)`` without a request. Raises
        :class:`~ancre.errors.EmbedderError`."""
        clean = [collapse_leaders(t) for t in texts]
        parts = [
            self._embed_batch(clean[i : i + self._batch_size], self.document_prefix)
            for i in range(0, len(clean), self._batch_size)
        ]
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> np.ndarray:
        """``(dim,)`` float32, L2-normalised, for one question (leaders collapsed, query prefix
        applied). Raises :class:`~ancre.errors.EmbedderError`."""
        return self._embed_batch([collapse_leaders(text)], self.query_prefix)[0]

    # -- machinery ----------------------------------------------------------------------------

    def _embed_batch(self, texts: list[str], prefix: str) -> np.ndarray:
        """``(len(texts), dim)``; falls back to text-by-text when the batch is too long."""
        try:
            return self._post([prefix + t for t in texts])
        except _TooLong:
            if len(texts) > 1:
                log.info(
                    "%s: a batch of %d was rejected as too long; retrying one by one",
                    self.endpoint,
                    len(texts),
                )
            return np.stack([self._embed_one(t, prefix, 0) for t in texts])

    def _embed_one(self, text: str, prefix: str, depth: int) -> np.ndarray:
        """``(dim,)`` for one text, splitting it in two while the server says it is too long."""
        try:
            return self._post([prefix + text])[0]
        except _TooLong as e:
            if depth >= MAX_SPLIT_DEPTH or len(text) < 2:
                raise EmbedderError(
                    f"{self.endpoint}: input still too long after {depth} split(s) "
                    f"({len(text)} characters): {e}"
                ) from None
            halves = [h for h in split_in_two(text) if h.strip()]
            if not halves:
                raise EmbedderError(f"{self.endpoint}: blank input rejected as too long: {e}") from None
            log.info(
                "%s: input of %d characters too long; embedding it in two halves",
                self.endpoint,
                len(text),
            )
            v = np.sum([self._embed_one(h, prefix, depth + 1) for h in halves], axis=0)
            return (v / np.linalg.norm(v)).astype(np.float32)

    def _post(self, inputs: list[str]) -> np.ndarray:
        """One embedding request with retries → ``(len(inputs), dim)`` normalised float32.
        Raises :class:`_TooLong` or :class:`~ancre.errors.EmbedderError`."""
        attempts = self._retries + 1
        last = ""
        for attempt in range(attempts):
            wait = 0.0
            try:
                r = self._client.post(self.endpoint, json=self._payload(inputs))
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e}"
            else:
                if r.status_code == 200:
                    return self._vectors(r, len(inputs))
                msg = _error_text(r)
                if r.status_code in _TOO_LONG_STATUS and _TOO_LONG_TEXT.search(msg):
                    raise _TooLong(f"HTTP {r.status_code}: {msg}")
                last = f"HTTP {r.status_code}: {msg}"
                if r.status_code != 429 and r.status_code < 500:
                    raise EmbedderError(f"{self.name}: {self.endpoint} answered {last}")
                wait = _retry_after(r)
            if attempt + 1 < attempts:
                delay = min(max(self._backoff_s * 2**attempt, wait), MAX_BACKOFF_S)
                log.warning(
                    "%s: attempt %d/%d failed (%s); retrying in %.1f s",
                    self.endpoint,
                    attempt + 1,
                    attempts,
                    last,
                    delay,
                )
                time.sleep(delay)
        raise EmbedderError(f"{self.name}: {self.endpoint} (embedder.url) failed after {attempts} attempt(s): {last}")

    def _vectors(self, r: httpx.Response, n: int) -> np.ndarray:
        try:
            raw = self._extract(r.json(), n)
            arr = np.asarray(raw, dtype=np.float32)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise EmbedderError(f"{self.name}: {self.endpoint} sent a malformed answer: {e}") from None
        if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] == 0:
            raise EmbedderError(
                f"{self.name}: {self.endpoint} sent {arr.shape[0] if arr.ndim else 0} vector(s) "
                f"of shape {arr.shape[1:]} for {n} input(s)"
            )
        dim = getattr(self, "dim", None)  # unset only during the probe
        if dim is not None and arr.shape[1] != dim:
            raise EmbedderError(
                f"{self.name}: {self.endpoint} returned {arr.shape[1]}-dimension vectors, "
                f"expected {dim} "
                "(embedder.dim, or the dimension probed at start-up)"
            )
        norms = np.linalg.norm(arr.astype(np.float64), axis=1, keepdims=True)
        if not np.isfinite(norms).all() or not (norms > 0).all():
            raise EmbedderError(f"{self.name}: {self.endpoint} returned a zero or non-finite vector")
        return (arr / norms).astype(np.float32)


class OllamaEmbedder(HttpEmbedder):
    """Ollama's ``POST {url}/api/embed`` (docs.ollama.com/api/embed): body ``{"model", "input":
    [...], "keep_alive", "truncate": false}``, answer ``{"embeddings": [[...], ...]}``.

    ``truncate: false`` makes Ollama reject an over-long input instead of silently cutting its end;
    the input is then split and nothing is lost (module docstring). ``name`` is
    ``ollama:<model>`` (plus the prefixes when they differ from the model's defaults).
    Construction probes the dimension unless ``cfg.dim`` is set (raises
    :class:`~ancre.errors.EmbedderError` if the server can't be reached).
    """

    kind = "ollama"

    def __init__(self, cfg: OllamaEmbedderConfig, *, backoff_s: float = 0.5) -> None:
        self.keep_alive = cfg.keep_alive
        base = (cfg.url or OLLAMA_DEFAULT_URL).rstrip("/")
        model = cfg.model or OLLAMA_DEFAULT_MODEL
        super().__init__(cfg, url=base, endpoint=f"{base}/api/embed", model=model, backoff_s=backoff_s)

    def _payload(self, inputs: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": inputs, "keep_alive": self.keep_alive, "truncate": False}

    def _extract(self, body: Any, n: int) -> list[Any]:
        return list(body["embeddings"])


__all__ = [
    "MAX_SPLIT_DEPTH",
    "NOMIC_PREFIXES",
    "OLLAMA_DEFAULT_MODEL",
    "OLLAMA_DEFAULT_URL",
    "HttpEmbedder",
    "OllamaEmbedder",
    "default_prefixes",
    "split_in_two",
]
