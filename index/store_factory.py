"""Build the configured :class:`~ancre.index.store.Store` backend from :class:`StoreConfig`."""

from __future__ import annotations

from pathlib import Path

from ancre.index.embedders import Embedder
from ancre.index.store import Store
from ancre.settings import EdgeStoreConfig, QdrantStoreConfig, StoreConfig, resolve_secret


def make_store(cfg: StoreConfig, data_dir: Path) -> Store:
    """The store of ``cfg``'s variant, not yet opened (call ``open(embedder_name, dim)``):

    - :class:`~ancre.settings.sections.EdgeStoreConfig`: :class:`~ancre.index.edge_store.EdgeStore`
      under ``data_dir/qdrant/``, with BM25 in its text index when ``cfg.bm25 = "qdrant"`` (the
      default) and index builds after ``cfg.build_after_points`` unindexed points;
    - :class:`~ancre.settings.sections.QdrantStoreConfig`:
      :class:`~ancre.index.qdrant_store.QdrantStore` on ``cfg.url`` with ``cfg.api_key`` and
      ``cfg.timeout_s`` (seconds);
    - :class:`~ancre.settings.sections.LocalStoreConfig`: qdrant-client local mode under
      ``cfg.path`` (default ``data_dir/qdrant-local``).

    With ``cfg.bm25 = "qdrant"`` the server backends keep BM25 as sparse vectors
    (:mod:`ancre.index.sparse_bm25`). Raises :class:`~ancre.errors.ConfigError` when the API
    key's variable or file is missing.
    """
    if isinstance(cfg, EdgeStoreConfig):
        from ancre.index.edge_store import EdgeStore, EdgeTuning

        return EdgeStore(
            data_dir, keywords=cfg.bm25 == "qdrant", tuning=EdgeTuning(build_after_points=cfg.build_after_points),
            min_free_bytes=int(cfg.min_free_mb * 2**20),
        )

    from ancre.index.qdrant_store import QdrantStore

    sparse = cfg.bm25 == "qdrant"
    if isinstance(cfg, QdrantStoreConfig):
        api_key = resolve_secret(cfg.api_key, "store.api_key")
        return QdrantStore.from_url(cfg.url, api_key, cfg.timeout_s, sparse_bm25=sparse)
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
