"""``openai`` embedder: any OpenAI-compatible ``POST /v1/embeddings`` server (vLLM, TEI, LocalAI,
Ollama's own ``/v1``, the OpenAI API).

Request ``{"model", "input": [...]}`` with ``Authorization: Bearer <api_key>`` when a key is set;
answer ``{"data": [{"index": i, "embedding": [...]}, ...]}`` (OpenAI API reference, "Create
embeddings"), reordered by ``index``. Clean-up, prefixes, batching, retries and the split of
too-long inputs are :class:`~ancre.index.ollama_embed.HttpEmbedder`'s, shared with ``ollama``.
"""

from __future__ import annotations

from typing import Any

from ancre.index.ollama_embed import HttpEmbedder
from ancre.settings import OpenAIEmbedderConfig


def embeddings_endpoint(url: str) -> str:
    """``{url}/v1/embeddings``, or ``{url}/embeddings`` when ``url`` already ends with ``/v1``."""
    base = url.rstrip("/")
    return f"{base}/embeddings" if base.endswith("/v1") else f"{base}/v1/embeddings"


class OpenAIEmbedder(HttpEmbedder):
    """OpenAI-compatible embeddings client; ``name`` is ``openai:<model>`` (plus the prefixes when
    they differ from the model's defaults — nomic-embed models get their task prefixes here too).

    ``cfg.model`` and ``cfg.url`` are required by the config (no default URL: documents are never
    sent to a cloud API unless configured so). Raises :class:`~ancre.errors.ConfigError` for a URL
    that is not http(s), :class:`~ancre.errors.EmbedderError` when the dimension probe fails
    (``cfg.dim`` unset).
    """

    kind = "openai"

    def __init__(self, cfg: OpenAIEmbedderConfig, *, backoff_s: float = 0.5) -> None:
        endpoint = embeddings_endpoint(cfg.url)
        super().__init__(cfg, url=cfg.url, endpoint=endpoint, model=cfg.model, backoff_s=backoff_s)

    def _payload(self, inputs: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": inputs}

    def _extract(self, body: Any, n: int) -> list[Any]:
        items = sorted(body["data"], key=lambda d: d["index"])
        if [d["index"] for d in items] != list(range(len(items))):
            raise ValueError(f"indexes {[d['index'] for d in items]} are not 0..{len(items) - 1}")
        return [d["embedding"] for d in items]


__all__ = ["OpenAIEmbedder", "embeddings_endpoint"]
