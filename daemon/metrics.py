"""Prometheus metrics of the daemon (prometheus-client), on a registry of their own so that a
process embedding the daemon (``ancre serve``) can expose them next to its own.

=====================================================  ========================================
``ancre_documents{source,status}``                      documents in the state DB by status
``ancre_chunks{source}``                                chunks of indexed documents
``ancre_item_problems{source,status,reason}``           failed/skipped/pending documents by reason,
                                                        and indexed ones with status ``acl_unreadable``
``ancre_items_synced_total{source,result}``             per-item results of passes and batches
``ancre_embedded_chunks_total{source}``                 chunks embedded
``ancre_reused_chunks_total{source}``                   chunks written without embedding: same
                                                        text as a stored or just-embedded one
``ancre_passes_total{source,trigger,scope,outcome}``    passes (``scope=full``) and event batches
``ancre_sync_duration_seconds{source,scope}``           duration of passes and batches
``ancre_last_successful_sync_timestamp_seconds{source}``  end of the last ``ok`` pass or batch
``ancre_queue_depth``                                   queued paths + pending full passes
``ancre_sync_documents_done{source}`` / ``…_todo``       items of the running pass or batch done / to do
``ancre_event_to_searchable_seconds``                   first event on a path → BM25 published
``ancre_bm25_generation`` / ``ancre_bm25_rebuild_seconds``  BM25 snapshots
``ancre_disk_full``                                     1 while indexing waits for free space
                                                        (a pass stopped as ``disk_full``), else 0
``ancre_data_free_bytes``                               free bytes of the index folder's file system
=====================================================  ========================================
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import start_http_server

from ancre.daemon.sync import PassReport
from ancre.index.state import ItemState
from ancre.models import ItemStatus, PassOutcome

DELAY_BUCKETS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
_RESULTS = ("new", "changed", "acl_only", "deleted", "unchanged", "failed", "skipped")


def reason_class(item: ItemState) -> str:
    """The ``reason`` label of a row in ``ancre_item_problems``: its reason code (``corrupt``,
    ``timeout``…), ``acl_problem`` for an indexed row whose ACL could not be read, else ``none``."""
    if item.reason_code is not None:
        return item.reason_code.value
    return "acl_problem" if item.status == ItemStatus.INDEXED and item.acl_problem else "none"


class DaemonMetrics:
    """The daemon's metrics (see the module doc) on :attr:`registry`."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.documents = Gauge("ancre_documents", "Documents in the state DB by status", ["source", "status"], registry=r)
        self.chunks = Gauge("ancre_chunks", "Chunks of indexed documents", ["source"], registry=r)
        self.problems = Gauge(
            "ancre_item_problems", "Failed, skipped or pending documents by reason", ["source", "status", "reason"], registry=r
        )
        self.items = Counter(
            "ancre_items_synced", "Per-item results of sync passes and event batches", ["source", "result"], registry=r
        )
        self.embedded = Counter("ancre_embedded_chunks", "Chunks embedded", ["source"], registry=r)
        self.reused = Counter(
            "ancre_reused_chunks", "Chunks written without embedding (same text as a stored or just-embedded one)",
            ["source"], registry=r,
        )
        self.passes = Counter(
            "ancre_passes", "Full passes (scope=full) and event batches (scope=paths)",
            ["source", "trigger", "scope", "outcome"], registry=r,
        )
        self.duration = Histogram(
            "ancre_sync_duration_seconds", "Duration of passes and event batches", ["source", "scope"],
            buckets=DURATION_BUCKETS, registry=r,
        )
        self.last_success = Gauge(
            "ancre_last_successful_sync_timestamp_seconds", "Unix time of the last ok pass or batch", ["source"], registry=r
        )
        self.queue_depth = Gauge("ancre_queue_depth", "Queued paths plus pending full passes", registry=r)
        self.docs_done = Gauge(
            "ancre_sync_documents_done", "Items of the running pass or batch already synced (0 when none runs)",
            ["source"], registry=r,
        )
        self.docs_todo = Gauge(
            "ancre_sync_documents_todo", "Items of the running pass or batch still to sync (0 when none runs)",
            ["source"], registry=r,
        )
        self.delay = Histogram(
            "ancre_event_to_searchable_seconds", "First event on a path until the BM25 index with the change is published",
            buckets=DELAY_BUCKETS, registry=r,
        )
        self.bm25_generation = Gauge("ancre_bm25_generation", "Current BM25 generation", registry=r)
        self.bm25_rebuild = Histogram("ancre_bm25_rebuild_seconds", "BM25 rebuild duration", buckets=DURATION_BUCKETS, registry=r)
        self.disk_full = Gauge(
            "ancre_disk_full", "1 while indexing waits for free space on the data folder's file system, else 0", registry=r
        )
        self.free_bytes = Gauge("ancre_data_free_bytes", "Free bytes of the index folder's file system", registry=r)
        self._lock = threading.Lock()
        self._problem_keys: set[tuple[str, str, str]] = set()
        self._doc_keys: set[tuple[str, str]] = set()
        self.server_port: int | None = None
        self._server: Any = None

    def record(self, rep: PassReport, trigger: str, finished_at: float) -> None:
        """Count one pass or batch report."""
        src = rep.source
        self.passes.labels(src, trigger, rep.scope, rep.outcome).inc()
        self.duration.labels(src, rep.scope).observe(rep.duration_s)
        for result in _RESULTS:
            n = getattr(rep, result)
            if n:
                self.items.labels(src, result).inc(n)
        if rep.embedded_chunks:
            self.embedded.labels(src).inc(rep.embedded_chunks)
        if rep.reused_chunks:
            self.reused.labels(src).inc(rep.reused_chunks)
        if rep.outcome == PassOutcome.OK:
            self.last_success.labels(src).set(finished_at)

    def progress(self, source: str, done: int, total: int) -> None:
        """The running pass or batch of ``source`` has ``done`` of ``total`` items behind it
        (``progress(source, 0, 0)`` once it ended)."""
        self.docs_done.labels(source).set(done)
        self.docs_todo.labels(source).set(max(0, total - done))

    def refresh_state(self, items: Iterable[ItemState]) -> None:
        """Set the document, chunk and problem gauges from the state DB rows (stale label sets
        are reset to 0)."""
        docs: dict[tuple[str, str], int] = {}
        chunks: dict[str, int] = {}
        problems: dict[tuple[str, str, str], int] = {}
        for it in items:
            docs[(it.source, it.status)] = docs.get((it.source, it.status), 0) + 1
            chunks[it.source] = chunks.get(it.source, 0) + (it.chunk_count if it.status == ItemStatus.INDEXED else 0)
            if it.status != ItemStatus.INDEXED or it.acl_problem:  # an indexed row's acl_problem: readable by nobody
                key = (it.source, it.status if it.status != ItemStatus.INDEXED else "acl_unreadable", reason_class(it))
                problems[key] = problems.get(key, 0) + 1
        with self._lock:
            for dkey in self._doc_keys - docs.keys():
                self.documents.labels(*dkey).set(0)
            for pkey in self._problem_keys - problems.keys():
                self.problems.labels(*pkey).set(0)
            for dkey, n in docs.items():
                self.documents.labels(*dkey).set(n)
            for src, n in chunks.items():
                self.chunks.labels(src).set(n)
            for pkey, n in problems.items():
                self.problems.labels(*pkey).set(n)
            self._doc_keys |= docs.keys()
            self._problem_keys |= problems.keys()

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (0: any free port) from a daemon thread; returns
        the bound port. Raises ``OSError`` when the port can't be bound."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        self.server_port = int(server.server_port)
        return self.server_port

    def close(self) -> None:
        """Stop the HTTP server, if any."""
        server = self._server
        if server is not None:
            server.shutdown()
            server.server_close()
            self._server = None


__all__ = ["DaemonMetrics", "reason_class"]
