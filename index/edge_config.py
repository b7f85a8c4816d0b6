"""How the embedded store's shards are configured and tuned: the one module that both the store
(:mod:`ancre.index.edge_store`, the process that serves) and its build process
(:mod:`ancre.index.edge_child`) import, so the two open a shard with the same engine configuration
and the same payload indexes.

- :class:`EdgeTuning`: the index and search settings (measured defaults);
- :func:`shard_config`: the engine configuration of every shard (vectors, HNSW, int8
  quantization, segments, memory placement);
- :func:`ensure_payload_indexes`: the payload indexes of the rights filter and of the keyword
  search, created where a shard lacks them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import qdrant_edge as qe

from ancre.index._filters import INTEGER_INDEXES
from ancre.index.keywords import KEYWORD_FIELD
from ancre.index.store import PAYLOAD_INDEXES


@dataclass(frozen=True)
class EdgeTuning:
    """How the embedded engine indexes and searches. The defaults were measured on 2 cores with
    384-dim vectors and ancre's rights filter at 100k–1M points (README "Benchmarks", scale table).

    - ``hnsw_m`` / ``hnsw_ef_construct``: the graph's edges per node and build beam; ``hnsw_ef``:
      the search beam; ``acorn``: ACORN filtered search (neighbours of filtered-out nodes are
      explored, so a selective rights filter still finds its nearest points), used only for a
      filter the engine estimates to keep less than ``acorn_max_selectivity`` (0–1) of the points
      — 0.1. ACORN costs more the more points the filter keeps: at 1M points (scale bench, 2
      cores) a user who may read 20–36 % of them waited ~240 ms for the vector search with
      ACORN against ~26 ms without, for the same recall@30 (1.000), and the vector search's
      p50 / p95 / p99 went from 37 / 283 / 315 ms at the engine's default 0.4 to 33 / 41 / 43 ms
      at 0.1; users who read 1–2 % (where ACORN applies) kept recall@30 1.000 at 28 ms p50. ACORN
      on every search (1.0) had made it 3× slower at 100k already;
    - ``oversampling``: candidates taken from the int8-quantized vectors, as a multiple of the
      limit, then rescored on the float32 originals;
    - ``max_segment_points``: the largest indexed segment a build makes. A build indexes the
      new points into segments of their own and merges only segments smaller than this (the
      engine's merge optimizer, once there are more than ``segments``), so one build costs at
      most a segment of this size, never the whole store; the segments of a query are searched in
      parallel by the engine's search threads (one per core);
    - ``build_after_points``: points not yet in an indexed segment (searched exactly) that make
      :meth:`~ancre.index.edge_store.EdgeStore.maintain` start a build; below it the exact search
      is fast enough.
    """

    hnsw_m: int = 16
    hnsw_ef_construct: int = 100
    hnsw_ef: int = 64
    acorn: bool = True
    acorn_max_selectivity: float = 0.1
    oversampling: float = 2.0
    segments: int = 8
    max_segment_points: int = 250_000
    build_after_points: int = 20_000

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (what the build process receives)."""
        return asdict(self)


def shard_config(dim: int, tuning: EdgeTuning) -> qe.EdgeConfig:
    """The engine configuration of every shard: cosine ``dim``-dim vectors, HNSW and int8 scalar
    quantization for the indexed segments, payload on disk. Everything of an indexed segment is
    memory-mapped, none of it read in at load (``Memory.Cold``: the float32 originals, the
    quantized vectors, the graph, the payload and its indexes). The engine drops these files from
    the page cache when it opens them and reads its payload-index flags page by page, holding
    the GIL, so a build reads the built shard into the page cache before and after loading it
    (:func:`~ancre.index.edge_pages.prewarm`): at 840k points the load then holds the GIL
    0.4-0.7 s instead of 1.45 s, and the first questions on it find their pages in memory. The
    engine never optimizes by itself: only a build does (:mod:`ancre.index.edge_build`)."""
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine, memory=qe.Memory.Cold),
        hnsw_config=qe.HnswIndexConfig(
            m=tuning.hnsw_m, ef_construct=tuning.hnsw_ef_construct, full_scan_threshold=10_000,
            max_indexing_threads=0, memory=qe.Memory.Cold,
        ),
        quantization_config=qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Cold),
        optimizers=qe.EdgeOptimizersConfig(
            default_segment_number=tuning.segments, indexing_threshold=1, prevent_unoptimized=False,
            max_segment_size=max(1, tuning.max_segment_points * dim * 4 // 1024),  # KB of float32 vectors
        ),
        payload_memory=qe.Memory.Cold,
    )


def keyword_index_params() -> qe.TextIndexParams:
    """The text index of :data:`~ancre.index.keywords.KEYWORD_FIELD`: whitespace tokens taken as
    they are (ancre's own tokenizer made them), BM25 scoring, on disk in indexed segments."""
    return qe.TextIndexParams(
        tokenizer=qe.TokenizerType.Whitespace, lowercase=False, ascii_folding=False,
        stopwords=qe.StopwordsSet(languages=set(), custom=set()), stemmer=qe.DisabledStemmer(),
        phrase_matching=False, scoring=True, memory=qe.Memory.Cold,
    )


def _field_params(field: str) -> qe.KeywordIndexParams | qe.IntegerIndexParams:
    """A payload index of :data:`~ancre.index.store.PAYLOAD_INDEXES`, memory-mapped in indexed
    segments (an appendable segment keeps its own in RAM)."""
    if field in INTEGER_INDEXES:
        return qe.IntegerIndexParams(lookup=True, range=True, memory=qe.Memory.Cold)
    return qe.KeywordIndexParams(memory=qe.Memory.Cold)


def ensure_payload_indexes(shard: qe.EdgeShard, *, keywords: bool, upgrade: bool = False) -> None:
    """Create the payload indexes a shard lacks (:data:`~ancre.index.store.PAYLOAD_INDEXES`, and
    the keyword text index when ``keywords``), then flush. ``upgrade`` (a build process only: it
    re-reads every point) also re-creates the indexes made with another memory placement than
    :func:`_field_params` (by an older ancre)."""
    schema = shard.info().payload_schema
    for field in PAYLOAD_INDEXES:
        info = schema.get(field)
        if info is not None and upgrade and getattr(info.params, "memory", None) != qe.Memory.Cold:
            shard.update(qe.UpdateOperation.delete_field_index(field))
            info = None
        if info is None:
            shard.update(qe.UpdateOperation.create_field_index(field, _field_params(field)))
    if keywords and KEYWORD_FIELD not in schema:
        shard.update(qe.UpdateOperation.create_field_index(KEYWORD_FIELD, keyword_index_params()))
    shard.flush()
