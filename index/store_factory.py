"""Build the configured :class:`~ancre.index.store.Store` backend from :class:`StoreConfig`."""

from __future__ import annotations

from pathlib import Path

from ancre.errors import ConfigError
from ancre.index.embedders import Embedder
from ancre.index.store import Store
from ancre.settings import StoreConfig


def make_store(cfg: StoreConfig, data_dir: Path) -> Store:
    """The store for ``cfg.kind``, not yet opened (call ``open(embedder_name, dim)``):

    - ``edge``: :class:`~ancre.index.edge_store.EdgeStore` under ``data_dir/qdrant/``, with BM25
      in its text index when ``cfg.bm25 = "qdrant"`` (the default) and index builds after
      ``cfg.build_after_points`` unindexed points;
    - ``qdrant``: :class:`~ancre.index.qdrant_store.QdrantStore` on ``cfg.url`` with
      ``cfg.api_key`` and ``cfg.timeout_s`` (seconds);
    - ``local``: qdrant-client local mode under ``cfg.path`` (default ``data_dir/qdrant-local``).

    With ``cfg.bm25 = "qdrant"`` the server backends keep BM25 as sparse vectors
    (:mod:`ancre.index.sparse_bm25`). Raises :class:`ConfigError` when ``kind = "qdrant"`` has no
    ``url``.
    """
    if cfg.kind == "edge":
        from ancre.index.edge_store import EdgeStore, EdgeTuning

        return EdgeStore(
            data_dir, keywords=cfg.bm25 == "qdrant", tuning=EdgeTuning(build_after_points=cfg.build_after_points)
        )

    from ancre.index.qdrant_store import QdrantStore

    sparse = cfg.bm25 == "qdrant"
    if cfg.kind == "qdrant":
        if not cfg.url:
            raise ConfigError("store.url is required when store.kind = 'qdrant'")
        return QdrantStore.from_url(cfg.url, cfg.api_key, cfg.timeout_s, sparse_bm25=sparse)
    return QdrantStore.local(cfg.path or Path(data_dir) / "qdrant-local", sparse_bm25=sparse)


def open_store(cfg: StoreConfig, data_dir: Path, embedder: Embedder) -> Store:
    """:func:`make_store`, opened and checked against ``embedder`` (its ``name`` and ``dim``).

    Raises :class:`~ancre.errors.StoreLockedError` when another process owns the embedded store,
    :class:`~ancre.errors.EmbedderMismatchError` when the index was built by another embedder,
    :class:`~ancre.errors.StoreError` when the store can't be opened or reached.
    """
    store = make_store(cfg, data_dir)
    store.open(embedder.name, embedder.dim)
    return store
