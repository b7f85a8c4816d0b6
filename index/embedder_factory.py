"""Build the configured :class:`~ancre.index.embedders.Embedder` from ``[embedder]``."""

from __future__ import annotations

from ancre.errors import ConfigError
from ancre.index.embedders import Embedder
from ancre.settings import E5LocalEmbedderConfig, EmbedderConfig, OllamaEmbedderConfig


def make_embedder(cfg: EmbedderConfig) -> Embedder:
    """The embedder of ``cfg``'s variant:

    - :class:`~ancre.settings.sections.E5LocalEmbedderConfig`:
      :class:`~ancre.index.e5_local.E5LocalEmbedder` (model defaults to ``multilingual-e5-small``;
      ``dim``, if set, must be 384);
    - :class:`~ancre.settings.sections.OllamaEmbedderConfig`:
      :class:`~ancre.index.ollama_embed.OllamaEmbedder` (defaults ``http://127.0.0.1:11434``,
      ``nomic-embed-text``);
    - :class:`~ancre.settings.sections.OpenAIEmbedderConfig`:
      :class:`~ancre.index.openai_embed.OpenAIEmbedder`.

    Raises :class:`~ancre.errors.ConfigError` naming the key (``embedder.dim``, ``embedder.model``,
    ``embedder.url``), and :class:`~ancre.errors.EmbedderError` when an HTTP embedder can't probe
    its dimension (``embedder.dim`` unset and the server unreachable).
    """
    if isinstance(cfg, E5LocalEmbedderConfig):
        from ancre.index.e5_local import E5_DIM, E5LocalEmbedder

        if cfg.dim is not None and cfg.dim != E5_DIM:
            raise ConfigError(f'embedder.dim must be {E5_DIM} for kind "e5-local" (got {cfg.dim})')
        return E5LocalEmbedder(cfg.model or "multilingual-e5-small", batch_size=cfg.batch_size)
    if isinstance(cfg, OllamaEmbedderConfig):
        from ancre.index.ollama_embed import OllamaEmbedder

        return OllamaEmbedder(cfg)
    from ancre.index.openai_embed import OpenAIEmbedder

    return OpenAIEmbedder(cfg)


__all__ = ["make_embedder"]
