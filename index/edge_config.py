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
    384-dim vectors and ancre's rights filter at 100k–1M points, on the scale bench's two
    workloads (README "Benchmarks", scale table; the ``clustered`` one is calibrated on e5's
    embeddings and is the one that decided them).

    How a question is searched in a segment (the engine decides, from its payload index's estimate
    of the points the rights filter keeps there):

    - ``full_scan_kb``: when the filter keeps fewer points than this many KB of vectors (30,000 KB:
      20,000 points of 384 float32), the engine scans those points' int8 vectors and rescores the
      best on the originals — the nearest readable chunks, whatever the graph: recall@30 1.000 for
      the users who may read under 5 % of a million chunks, at a vector-search p95 of 13 ms, where
      the graph with ACORN gave 1.000 at 71 ms and the graph alone 0.995 (worst 0.93);
    - else the HNSW graph (``hnsw_m`` edges per node, build beam ``hnsw_ef_construct``) over the
      int8 vectors, ``oversampling`` × the limit rescored on the float32 originals, with a beam
      widened as the filter narrows (:func:`~ancre.index.edge_search.plan_search`): ``hnsw_ef``
      divided by the share of the shard's points the filter keeps, at most ``hnsw_ef_max``. A
      filter that keeps a share ``s`` leaves a node about ``s·m`` of its links, and on clustered
      embeddings the paths to a question's nearest readable chunks break: at 1M (clustered), the
      users reading 20–60 % got recall@30 0.944 (worst 0.80) with the fixed beam of 64, 0.996
      (worst 0.97) with 96 / s, 0.998 (worst 0.97) with 128 / s (retrieval p50 34 ms at 1M on
      both of the bench's workloads, where the fixed 64 measured 41 ms on the same store); at
      100k (clustered) 128 / s left one question of a reader of 20–60 % at 0.87 in two builds of
      five (the graph differs from one build to the next), where 192 / s (the default, up to
      768) gave 0.933 on the same builds at ~2 ms more; at 1M it buys no recall and costs
      6–13 ms of p50 on the clustered workload (43–47 ms, where 128 measured 34–41 ms;
      docs/BENCHMARKS.md, the scale section);
    - ``payload_links``: the payload fields whose values get graph links of their own (the
      engine's filterable HNSW: the points of each value, e.g. each group of ``acl_allow``, are
      linked among themselves, ``payload_m`` links each, default ``hnsw_m``; only for values
      between a quarter of the full-scan threshold and about a fifth of the segment). The engine
      links every indexed field unless told not to: the BM25 text index too, one graph per frequent
      term, 58 % of a build's CPU and 67 % of the graph at 100k for no vector search (Qdrant's
      documentation: a field only used for text search gets ``enable_hnsw: false``). The other
      fields keep theirs: with the ACL's links only, recall@30 on the clustered workload at 100k
      (beam 256) fell from 0.998 (worst 0.90) to 0.991 (worst 0.80), and with none at all, on a
      harder variant of it, to 0.82 (worst 0.00): a filtered graph search gets stranded;
    - ``acorn``: ACORN (neighbours of filtered-out nodes explored) for a filter the engine
      estimates to keep less than ``acorn_max_selectivity`` of a segment — off: the int8 scan
      answers those filters, and ACORN was the slow tail of every run (p95 71 ms at 1M
      clustered; ~240 ms for users reading 20–36 % at 1M structured under the engine's default
      0.4).

    How the store is built:

    - ``max_segment_points``: the largest indexed segment a build makes. A build indexes the
      new points into segments of their own and merges only segments smaller than this (the
      engine's merge optimizer, once there are more than ``segments``), so one build costs at
      most a segment of this size, never the whole store; the segments of a query are searched in
      parallel by the engine's search threads (one per core);
    - ``build_after_points``: points not yet in an indexed segment (searched exactly) that make
      :meth:`~ancre.index.edge_store.EdgeStore.maintain` start a build; below it the exact search
      is fast enough.

    A store built with other :meth:`index_settings` is rebuilt by its next build.
    """

    hnsw_m: int = 16
    hnsw_ef_construct: int = 100
    hnsw_ef: int = 192
    hnsw_ef_max: int = 768
    full_scan_kb: int = 30_000
    payload_m: int | None = None
    payload_links: tuple[str, ...] = PAYLOAD_INDEXES
    acorn: bool = False
    acorn_max_selectivity: float = 0.1
    oversampling: float = 2.0
    segments: int = 8
    max_segment_points: int = 250_000
    build_after_points: int = 20_000

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (what the build process receives)."""
        return asdict(self)

    def index_settings(self) -> dict[str, Any]:
        """The settings a shard's indexed segments are built with (a change of one of them makes
        the engine rebuild every segment at the next build), as recorded in ``ancre_meta.json``."""
        return {
            "hnsw_m": self.hnsw_m, "hnsw_ef_construct": self.hnsw_ef_construct, "full_scan_kb": self.full_scan_kb,
            "payload_m": self.payload_m, "payload_links": list(self.payload_links),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EdgeTuning:
        """The tuning :meth:`to_dict` gave (lists back to tuples)."""
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**fields)


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
            m=tuning.hnsw_m, ef_construct=tuning.hnsw_ef_construct, full_scan_threshold=tuning.full_scan_kb,
            max_indexing_threads=0, payload_m=tuning.payload_m, memory=qe.Memory.Cold,
        ),
        quantization_config=qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Cold),
        optimizers=qe.EdgeOptimizersConfig(
            default_segment_number=tuning.segments, indexing_threshold=1, prevent_unoptimized=False,
            max_segment_size=max(1, tuning.max_segment_points * dim * 4 // 1024),  # KB of float32 vectors
        ),
        payload_memory=qe.Memory.Cold,
    )


def keyword_index_params(*, linked: bool | None = None) -> qe.TextIndexParams:
    """The text index of :data:`~ancre.index.keywords.KEYWORD_FIELD`: whitespace tokens taken as
    they are (ancre's own tokenizer made them), BM25 scoring, on disk in indexed segments;
    ``linked``: whether the graph gets extra links per frequent term (``enable_hnsw``)."""
    return qe.TextIndexParams(
        tokenizer=qe.TokenizerType.Whitespace, lowercase=False, ascii_folding=False,
        stopwords=qe.StopwordsSet(languages=set(), custom=set()), stemmer=qe.DisabledStemmer(),
        phrase_matching=False, scoring=True, memory=qe.Memory.Cold, enable_hnsw=linked,
    )


def _field_params(field: str, linked: bool | None) -> qe.KeywordIndexParams | qe.IntegerIndexParams:
    """A payload index of :data:`~ancre.index.store.PAYLOAD_INDEXES`, memory-mapped in indexed
    segments (an appendable segment keeps its own in RAM); ``linked``: whether the graph gets
    extra links among the points of each of its values (``enable_hnsw``)."""
    if field in INTEGER_INDEXES:
        return qe.IntegerIndexParams(lookup=True, range=True, memory=qe.Memory.Cold, enable_hnsw=linked)
    return qe.KeywordIndexParams(memory=qe.Memory.Cold, enable_hnsw=linked)


def _linked(field: str, tuning: EdgeTuning) -> bool:
    return field in tuning.payload_links


def ensure_payload_indexes(
    shard: qe.EdgeShard, *, keywords: bool, tuning: EdgeTuning | None = None, upgrade: bool = False
) -> None:
    """Create the payload indexes a shard lacks (:data:`~ancre.index.store.PAYLOAD_INDEXES`, and
    the keyword text index when ``keywords``), then flush. ``upgrade`` (a build process only: it
    re-reads every point) also re-creates the indexes made with another memory placement or
    other graph links than ``tuning`` asks (by an older ancre)."""
    tuning = tuning or EdgeTuning()
    schema = shard.info().payload_schema
    wanted = {field: _linked(field, tuning) for field in (*PAYLOAD_INDEXES, KEYWORD_FIELD)}
    for field in (*PAYLOAD_INDEXES, KEYWORD_FIELD) if keywords else PAYLOAD_INDEXES:
        info = schema.get(field)
        params = None if info is None else info.params
        stale = getattr(params, "memory", None) != qe.Memory.Cold or getattr(params, "enable_hnsw", None) != wanted[field]
        if info is not None and upgrade and stale:
            shard.update(qe.UpdateOperation.delete_field_index(field))
            info = None
        if info is None:
            made = (keyword_index_params(linked=wanted[field]) if field == KEYWORD_FIELD
                    else _field_params(field, wanted[field]))
            shard.update(qe.UpdateOperation.create_field_index(field, made))
    shard.flush()
