"""The sync engine's keyword hooks (:class:`KeywordHooks`): the BM25 snapshot rebuilt from the
store after a pass that changed it (docs/ARCHITECTURE.md "Data flow of indexing", step 4), or an
empty one published when the store keeps BM25 itself."""

from __future__ import annotations

from collections.abc import Callable

from ancre.daemon.faults import crash_point
from ancre.index.bm25 import Bm25Entry, Bm25Index, Bm25Manager
from ancre.index.store import KeywordStore, Store
from ancre.models import COLLECTIONS


class KeywordHooks:
    """Keeps the BM25 snapshots of ``bm25`` in line with ``store``; ``in_store``: ``[store] bm25 =
    "qdrant"`` (the store's own BM25 answers once it is ready)."""

    def __init__(self, store: Store, bm25: Bm25Manager, *, in_store: bool) -> None:
        self.store = store
        self.bm25 = bm25
        self.in_store = in_store

    def stale(self) -> bool:
        """Whether the published BM25 snapshot is missing or unusable (another tokenizer version,
        damaged files), so that even a pass that changed nothing rebuilds it. Reads the snapshot
        from disk with a fresh manager: the in-memory copy may hide a damaged current file. An
        empty store needs no snapshot."""
        if Bm25Manager(self.bm25.index_dir).is_current():
            return False
        return any(self.store.count(c) for c in COLLECTIONS)

    def rebuild(self, should_stop: Callable[[], bool] | None = None) -> int | None:
        """Rebuild the BM25 index from the store (the truth) and publish it; returns the new
        generation number, or ``None`` when ``should_stop`` turned true while reading the store
        (nothing published). Safe to call while another thread writes the store (reads are
        concurrent; the snapshot is as of the scroll). Raises ``OSError``/``StoreError``."""
        entries: list[Bm25Entry] = []
        store = self.store
        if self.in_store and isinstance(store, KeywordStore) and store.keywords_ready:
            crash_point("bm25_publish")  # BM25 lives in the store: an empty snapshot
            return self.bm25.publish(Bm25Index.empty())
        for coll in COLLECTIONS:
            for p in self.store.scroll(coll):
                pl = p.payload
                entries.append(
                    Bm25Entry(p.id, coll, pl.text, pl.filename, pl.acl_allow, pl.acl_deny, pl.acl_grants, pl.header)
                )
                if should_stop is not None and len(entries) % 1024 == 0 and should_stop():
                    return None
        index = Bm25Index.build(entries)
        crash_point("bm25_publish")
        return self.bm25.publish(index)


__all__ = ["KeywordHooks"]
