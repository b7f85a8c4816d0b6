"""The sync engine's BM25 and index-maintenance hooks (:class:`Bm25Hooks`): the BM25 snapshot
rebuilt from the store after a pass that changed it, the store's own index builds."""

from __future__ import annotations

from collections.abc import Callable

from ancre.daemon.faults import crash_point
from ancre.daemon.sync.base import EngineBase
from ancre.index.bm25 import Bm25Entry, Bm25Index, Bm25Manager
from ancre.index.store import KeywordStore, Maintainable
from ancre.models import COLLECTIONS


class Bm25Hooks(EngineBase):
    """BM25 rebuild and store maintenance of a :class:`~ancre.daemon.sync.SyncEngine`."""

    def _bm25_stale(self) -> bool:
        """Whether the published BM25 snapshot is missing or unusable (another tokenizer version,
        damaged files), so that even a pass that changed nothing rebuilds it. Reads the snapshot
        from disk with a fresh manager: the in-memory copy may hide a damaged current file. An
        empty store needs no snapshot."""
        if Bm25Manager(self.bm25.index_dir).is_current():
            return False
        return any(self.store.count(c) for c in COLLECTIONS)

    def rebuild_bm25(self, should_stop: Callable[[], bool] | None = None) -> int | None:
        """Rebuild the BM25 index from the store (the truth) and publish it; returns the new
        generation number, or ``None`` when ``should_stop`` turned true while reading the store
        (nothing published). Safe to call while another thread writes the store (reads are
        concurrent; the snapshot is as of the scroll). Raises ``OSError``/``StoreError``."""
        entries: list[Bm25Entry] = []
        store = self.store
        if self.settings.store.bm25 == "qdrant" and isinstance(store, KeywordStore) and store.keywords_ready:
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

    def maintain_index(self, should_stop: Callable[[], bool] | None = None, *, force: bool = False) -> list[object]:
        """Build the store's indexes if it keeps them apart from its writes
        (:class:`~ancre.index.store.Maintainable`: the embedded store's HNSW builds, in a separate
        process, queries going on) and they need it (``force``: now); blocking. Returns one report
        per build. Raises ``StoreError`` when a build fails (the live index is intact)."""
        store = self.store
        if not isinstance(store, Maintainable):
            return []
        return list(store.maintain(force=force, should_stop=should_stop))
