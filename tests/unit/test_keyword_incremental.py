"""BM25 kept in the embedded store, updated write by write, against a full rebuild.

The property: after any sequence of upserts, re-upserts, partial deletions, ACL changes and index
builds (a real child process, then the swap), the store's keyword search gives, for any question
and any principal set, exactly the scores of

- a store built from scratch with the final points in one write, and
- bm25s (the snapshot's library, ``method = "lucene"``) built over the same final chunks with the
  same rights mask, times ``k1 + 1``: the engine's BM25 keeps the ``(k1 + 1)`` factor of
  Robertson's term weight, which Lucene drops (a constant: the ranking is the same).

So an incremental update is never an approximation of the full rebuild, and the rights filter in
the query scores exactly the chunks the snapshot's mask would.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ancre.index.bm25 import K1, Bm25Entry, Bm25Index
from ancre.index.edge_store import EdgeStore
from ancre.index.store import PointWrite
from ancre.models import COLLECTIONS, Acl, ChunkPayload, point_id

DIM = 4
EMBEDDER = "test-embedder:v1"
DOCS = COLLECTIONS[0]
GROUPS = ("sid:S-1-5-21-9-1", "sid:S-1-5-21-9-2", "sid:S-1-5-21-9-3")
VOCAB = (
    "contrat", "maintenance", "pare-feu", "OPNsense", "salaire", "WD-EXCL-042", "serveur", "Baumont",
    "résiliation", "forfait", "mensuel", "sauvegarde", "VPN", "4 200", "CHF", "Rochat",
)
_VEC = (np.ones(DIM, dtype=np.float32) / 2)


def _chunk(doc: str, i: int, words: tuple[int, ...], acl: tuple[int, int]) -> PointWrite:
    allow = (GROUPS[acl[0] % 3],)
    deny = (GROUPS[acl[1] % 3],) if acl[1] >= 3 and acl[1] % 3 != acl[0] % 3 else ()
    payload = ChunkPayload(
        source="src", doc_id=doc, path=f"d/{doc}.docx", filename=f"{doc}.docx", location="", chunk_index=i,
        text=" ".join(VOCAB[w] for w in words), acl_allow=allow, acl_deny=deny, content_hash="h", indexed_at=0.0,
    )
    return PointWrite(point_id(doc, i), _VEC, payload)


_DOC = st.sampled_from([f"doc{i}" for i in range(5)])
_WORDS = st.lists(st.integers(0, len(VOCAB) - 1), min_size=1, max_size=8).map(tuple)
_OP = st.one_of(
    st.tuples(st.just("upsert"), _DOC, st.lists(_WORDS, min_size=1, max_size=4), st.tuples(st.integers(0, 5), st.integers(0, 5))),
    st.tuples(st.just("delete"), _DOC, st.integers(0, 3)),
    st.tuples(st.just("acl"), _DOC, st.tuples(st.integers(0, 5), st.integers(0, 5))),
    st.tuples(st.just("build")),
)
_QUESTION = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4).map(" ".join)
_PRINCIPALS = st.sets(st.sampled_from(GROUPS), min_size=1).map(frozenset)


def _scores(store: EdgeStore, question: str, principals: frozenset[str]) -> dict[str, float]:
    return {p.id: p.score or 0.0 for p in store.keyword_search(DOCS, question, principals, 1000)}


def _close(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-4 * max(1.0, abs(b[k])) for k in a)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OP, min_size=1, max_size=14), questions=st.lists(st.tuples(_QUESTION, _PRINCIPALS), min_size=3, max_size=6))
def test_incremental_keywords_equal_a_full_rebuild_and_bm25s(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple], questions: list[tuple[str, frozenset[str]]]
) -> None:
    data = tmp_path_factory.mktemp("kw")
    live = EdgeStore(data / "live")
    live.open(EMBEDDER, DIM)
    model: dict[str, PointWrite] = {}
    try:
        for op in ops:
            if op[0] == "upsert":
                _, doc, chunks, acl = op
                pts = [_chunk(doc, i, words, acl) for i, words in enumerate(chunks)]
                live.upsert(DOCS, pts)
                live.delete_doc(DOCS, doc, len(pts))  # as the sync engine does for a shorter version
                for key in [k for k, p in model.items() if p.payload.doc_id == doc]:
                    del model[key]
                model.update({p.id: p for p in pts})
            elif op[0] == "delete":
                _, doc, start = op
                live.delete_doc(DOCS, doc, start)
                for key in [k for k, p in model.items() if p.payload.doc_id == doc and p.payload.chunk_index >= start]:
                    del model[key]
            elif op[0] == "acl":
                _, doc, (a, d) = op
                acl = Acl(frozenset({GROUPS[a % 3]}), frozenset({GROUPS[d % 3]}) if d >= 3 and d % 3 != a % 3 else frozenset())
                live.set_acl(DOCS, doc, acl)
                from dataclasses import replace

                for key, p in list(model.items()):
                    if p.payload.doc_id == doc:
                        pl = replace(p.payload, acl_allow=tuple(sorted(acl.allow)), acl_deny=tuple(sorted(acl.deny)))
                        model[key] = PointWrite(p.id, p.vector, pl)
            elif model:
                live.maintain(force=True)

        fresh = EdgeStore(data / "fresh")
        fresh.open(EMBEDDER, DIM)
        try:
            if model:
                fresh.upsert(DOCS, list(model.values()))
            snapshot = Bm25Index.build([
                Bm25Entry(p.id, DOCS, p.payload.text, p.payload.filename, p.payload.acl_allow, p.payload.acl_deny)
                for p in model.values()
            ])
            for question, principals in questions:
                got = _scores(live, question, principals)
                assert _close(got, _scores(fresh, question, principals)), (question, principals)
                reference = {h.point_id: h.score * (K1 + 1) for h in snapshot.search(question, 1000, principals)}
                assert _close(got, reference), (question, principals, got, reference)
        finally:
            fresh.close()
    finally:
        live.close()


def test_a_write_is_searchable_by_the_next_query(tmp_path: Path) -> None:
    """No rebuild step between a write and the keyword side: upsert, re-upsert with other text,
    ACL change and deletion are each seen by the very next search."""
    store = EdgeStore(tmp_path)
    store.open(EMBEDDER, DIM)
    try:
        g = frozenset({GROUPS[0]})
        store.upsert(DOCS, [_chunk("a", 0, (3,), (0, 0))])  # OPNsense
        assert [p.payload.doc_id for p in store.keyword_search(DOCS, "opnsense", g, 5)] == ["a"]
        store.upsert(DOCS, [_chunk("a", 0, (7,), (0, 0))])  # now Baumont only
        assert store.keyword_search(DOCS, "opnsense", g, 5) == []
        assert [p.payload.doc_id for p in store.keyword_search(DOCS, "Baumont", g, 5)] == ["a"]
        store.set_acl(DOCS, "a", Acl(frozenset({GROUPS[1]})))
        assert store.keyword_search(DOCS, "Baumont", g, 5) == []
        store.delete_doc(DOCS, "a")
        assert store.keyword_search(DOCS, "Baumont", frozenset({GROUPS[1]}), 5) == []
    finally:
        store.close()
