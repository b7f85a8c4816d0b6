"""One contract suite for both Store backends: EdgeStore (qdrant-edge-py, embedded) and
QdrantStore on qdrant-client's local mode (speaks the server API)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ancre.config import load_settings
from ancre.errors import EmbedderMismatchError, StoreError, StoreLockedError
from ancre.index.edge_store import EdgeStore
from ancre.index.qdrant_store import QdrantStore
from ancre.index.store import KeywordStore, PointWrite, Store
from ancre.index.store_factory import make_store
from ancre.models import Acl, ChunkPayload, Grant, point_id
from ancre.settings import EdgeStoreConfig, LocalStoreConfig, QdrantStoreConfig

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

DIM = 8
EMBEDDER = "test-embedder:v1"
DOCS = "documents"

G1, G2, BAD, OTHER = "sid:S-1-5-21-1-1001", "sid:S-1-5-21-1-1002", "sid:S-1-5-21-1-666", "aad:nobody"


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _point(
    doc_id: str,
    chunk_index: int,
    allow: tuple[str, ...],
    deny: tuple[str, ...] = (),
    text: str | None = None,
    seed: int | None = None,
) -> PointWrite:
    payload = ChunkPayload(
        source="src",
        doc_id=doc_id,
        path=f"dir/{doc_id}.docx",
        filename=f"{doc_id}.docx",
        location="\\\\SRV\\Partage\\dir\\",
        chunk_index=chunk_index,
        text=text if text is not None else f"text of {doc_id} #{chunk_index}",
        acl_allow=allow,
        acl_deny=deny,
        content_hash=f"hash-{doc_id}",
        indexed_at=1_700_000_000.5,
        heading_path=("Titre", "Section"),
    )
    vec_seed = seed if seed is not None else zlib.crc32(f"{doc_id}:{chunk_index}".encode())
    return PointWrite(id=point_id(doc_id, chunk_index), vector=_vec(vec_seed), payload=payload)


def _docs(points: list) -> set[str]:
    return {p.payload.doc_id for p in points}


@pytest.fixture(params=["edge", "local"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """A factory of fresh (unopened) store objects over the same on-disk location."""
    made: list[Store] = []

    def factory() -> Store:
        store: Store
        store = EdgeStore(tmp_path / "data") if request.param == "edge" else QdrantStore.local(tmp_path / "local")
        made.append(store)
        return store

    yield factory
    for store in made:
        with contextlib.suppress(StoreError):
            store.close()


@pytest.fixture
def store(make: Callable[[], Store]) -> Store:
    s = make()
    s.open(EMBEDDER, DIM)
    return s


@pytest.fixture
def populated(store: Store) -> Store:
    """A: allow G1. B: allow G1, G2, deny BAD. C: allow G2. D: allow nobody. E: allow BAD."""
    store.upsert(
        DOCS,
        [
            _point("A", 0, (G1,), seed=1),
            _point("B", 0, (G1, G2), (BAD,), seed=2),
            _point("C", 0, (G2,), seed=3),
            _point("D", 0, (), seed=4),
            _point("E", 0, (BAD,), seed=5),
        ],
    )
    return store


# ------------------------------------------------------------------------------ open / embedder


def test_store_satisfies_protocol(store: Store) -> None:
    assert isinstance(store, Store)


@pytest.mark.parametrize(("name", "dim"), [("ollama:nomic-embed-text", DIM), (EMBEDDER, 16)])
def test_open_with_other_embedder_raises_mismatch(
    make: Callable[[], Store], name: str, dim: int
) -> None:
    first = make()
    first.open(EMBEDDER, DIM)
    first.upsert(DOCS, [_point("A", 0, (G1,))])
    first.close()

    bad = make()
    with pytest.raises(EmbedderMismatchError) as err:
        bad.open(name, dim)
    msg = str(err.value)
    assert repr(EMBEDDER) in msg and repr(name) in msg
    assert f"({DIM} dims)" in msg and f"({dim} dims)" in msg
    assert "ancre reindex --config" in msg

    if isinstance(bad, QdrantStore):
        bad.close()  # the local-mode client keeps its directory lock until closed
    again = make()  # EdgeStore: a failed open released its lock without close()
    again.open(EMBEDDER, DIM)
    assert again.count(DOCS) == 1


def test_methods_before_open_and_unknown_collection_raise(make: Callable[[], Store]) -> None:
    s = make()
    with pytest.raises(StoreError):
        s.count(DOCS)
    s.open(EMBEDDER, DIM)
    with pytest.raises(StoreError):
        s.count("nope")
    with pytest.raises(StoreError):
        bad = PointWrite(point_id("A", 0), np.ones(DIM + 1, np.float32), _point("A", 0, (G1,)).payload)
        s.upsert(DOCS, [bad])
    with pytest.raises(StoreError):
        s.search(DOCS, np.ones(3, np.float32), frozenset({G1}), 5)


# ------------------------------------------------------------------------------ rights filter


def test_search_applies_allow_and_deny(populated: Store) -> None:
    def found(principals: set[str]) -> set[str]:
        return _docs(populated.search(DOCS, _vec(1), frozenset(principals), 10))

    assert found({G1}) == {"A", "B"}
    assert found({G2}) == {"B", "C"}
    assert found({G1, G2}) == {"A", "B", "C"}
    assert found({G1, BAD}) == {"A", "E"}  # deny wins over G1's allow on B
    assert found({G2, BAD}) == {"C", "E"}
    assert found({OTHER}) == set()  # no matching principal: nothing, not even D (allow = ∅)


def test_search_orders_by_cosine_and_sets_score(populated: Store) -> None:
    hits = populated.search(DOCS, _vec(2), frozenset({G1, G2}), 10)
    assert hits[0].payload.doc_id == "B"
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    scores = [h.score for h in hits]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert populated.search(DOCS, _vec(2), frozenset({G1, G2}), 2) == hits[:2]


def test_empty_principal_set_reads_nothing(populated: Store) -> None:
    """Points with an empty allow list exist (D); an empty P must not match them nor anything."""
    empty: frozenset[str] = frozenset()
    ids = [point_id(d, 0) for d in "ABCDE"]
    assert populated.count(DOCS) == 5
    assert populated.search(DOCS, _vec(4), empty, 10) == []
    assert populated.retrieve(DOCS, ids, empty) == []
    assert populated.chunks_of(DOCS, "D", [0], empty) == []
    assert populated.chunks_of(DOCS, "A", [0], empty) == []


def test_empty_principal_set_never_queries_the_engine(populated: Store) -> None:
    """With the engine underneath broken, an empty P still answers ``[]`` (no call was made),
    while a non-empty P reaches the engine and fails as StoreError."""
    if isinstance(populated, EdgeStore):
        populated._shards.current(DOCS).shard.close()
    else:
        populated.client.close()
    empty: frozenset[str] = frozenset()
    assert populated.search(DOCS, _vec(1), empty, 10) == []
    assert populated.retrieve(DOCS, [point_id("A", 0)], empty) == []
    assert populated.chunks_of(DOCS, "A", [0], empty) == []
    with pytest.raises(StoreError):
        populated.search(DOCS, _vec(1), frozenset({G1}), 10)


def test_retrieve_drops_gone_and_forbidden_ids(populated: Store) -> None:
    gone = str(uuid.uuid4())
    ids = [point_id("A", 0), point_id("B", 0), point_id("C", 0), point_id("D", 0), gone, "not-a-uuid"]
    got = populated.retrieve(DOCS, ids, frozenset({G1}))
    assert {p.id for p in got} == {point_id("A", 0), point_id("B", 0)}
    assert all(p.score is None for p in got)

    populated.delete_doc(DOCS, "A")
    assert {p.id for p in populated.retrieve(DOCS, ids, frozenset({G1}))} == {point_id("B", 0)}
    assert populated.retrieve(DOCS, ids, frozenset({G1, BAD})) == []
    assert populated.retrieve(DOCS, [], frozenset({G1})) == []


def test_retrieve_returns_full_payload(populated: Store) -> None:
    (got,) = populated.retrieve(DOCS, [point_id("C", 0)], frozenset({G2}))
    assert got.payload == _point("C", 0, (G2,)).payload


# ------------------------------------------------------------------------------ chunks_of


def test_chunks_of_sorted_and_filtered(store: Store) -> None:
    store.upsert(DOCS, [_point("X", i, (G1,)) for i in (5, 3, 0, 1, 2, 4)])
    store.upsert(DOCS, [_point("Y", i, (G1,)) for i in range(3)])

    got = store.chunks_of(DOCS, "X", [4, 0, 2, 9, 2], frozenset({G1}))
    assert [p.payload.chunk_index for p in got] == [0, 2, 4]
    assert {p.payload.doc_id for p in got} == {"X"}
    assert [p.id for p in got] == [point_id("X", i) for i in (0, 2, 4)]

    assert store.chunks_of(DOCS, "X", [0, 1], frozenset({G2})) == []
    assert store.chunks_of(DOCS, "X", [], frozenset({G1})) == []
    store.set_acl(DOCS, "X", Acl(frozenset({G1}), frozenset({BAD})))
    assert store.chunks_of(DOCS, "X", [0, 1], frozenset({G1, BAD})) == []
    assert len(store.chunks_of(DOCS, "X", [0, 1], frozenset({G1}))) == 2


def test_vectors_of_gives_each_chunk_vector_by_its_text(store: Store) -> None:
    """Every point of the document (past one engine page of 1,024), keyed by its text, with the
    vector written; another document's points are not in it; an unknown document has none."""
    points = [_point("V", i, (G1,)) for i in range(1_030)]
    store.upsert(DOCS, [*points, _point("W", 0, (G2,)), _point("W", 1, ())])
    got = store.vectors_of(DOCS, "V")
    assert set(got) == {p.payload.text for p in points}
    for p in points:
        assert got[p.payload.text].dtype == np.float32 and np.allclose(got[p.payload.text], p.vector, atol=1e-6)
    assert store.vectors_of(DOCS, "unknown") == {}
    assert set(store.vectors_of(DOCS, "W")) == {"text of W #0", "text of W #1"}  # unfiltered: no rights asked
    assert store.vectors_of("documentation", "V") == {}


def test_vectors_of_reads_the_dense_vector_beside_the_keyword_one(sparse: EdgeStore | QdrantStore) -> None:
    """With BM25 kept in the engine (a named sparse vector next to the dense one), the dense one."""
    p = _point("S", 0, (G1,), text="Relais RX-7731 remplacé")
    sparse.upsert(DOCS, [p])
    got = sparse.vectors_of(DOCS, "S")
    assert list(got) == [p.payload.text] and np.allclose(got[p.payload.text], p.vector, atol=1e-6)


# ------------------------------------------------------------------------------ grants

ORDERED = Acl.of([Grant(frozenset({G1})), Grant(frozenset({G2}), frozenset({BAD}))])
"""An ordered walk's ACL: allow G1 first, then deny BAD, then allow G2. A member of G1 and BAD
reads (G1's allow came before the deny); a member of G2 and BAD does not."""


def _with_acl(point: PointWrite, acl: Acl) -> PointWrite:
    fields = ChunkPayload.acl_fields(acl)
    payload = replace(
        point.payload,
        acl_allow=tuple(fields["acl_allow"]),  # type: ignore[arg-type]
        acl_deny=tuple(fields["acl_deny"]),  # type: ignore[arg-type]
        acl_grants=tuple(fields["acl_grants"]),  # type: ignore[arg-type]
    )
    return replace(point, payload=payload)


def test_every_read_evaluates_grants_exactly(store: Store) -> None:
    store.upsert(DOCS, [_with_acl(_point("G", i, ()), ORDERED) for i in range(2)])
    ids = [point_id("G", 0), point_id("G", 1)]
    for user, readable in (({G1, BAD}, True), ({G2, BAD}, False), ({G2}, True), ({BAD}, False)):
        p = frozenset(user)
        assert ("G" in _docs(store.search(DOCS, _vec(1), p, 10))) is readable, user
        assert (len(store.retrieve(DOCS, ids, p)) == 2) is readable, user
        assert (len(store.chunks_of(DOCS, "G", [0, 1], p)) == 2) is readable, user
        assert store.retrieve(DOCS, ids, p) == [] or readable


def test_an_expired_grant_stops_admitting_at_that_instant(store: Store) -> None:
    expires = time.time() + 1.5
    store.upsert(DOCS, [_with_acl(_point("L", 0, ()), Acl.of([Grant(frozenset({G1}), expires=expires)]))])
    user = frozenset({G1})
    assert _docs(store.search(DOCS, _vec(1), user, 10)) == {"L"}
    while time.time() < expires:
        time.sleep(0.1)
    assert store.search(DOCS, _vec(1), user, 10) == []
    assert store.retrieve(DOCS, [point_id("L", 0)], user) == []
    assert store.chunks_of(DOCS, "L", [0], user) == []


def test_set_acl_writes_and_clears_grants(populated: Store) -> None:
    populated.set_acl(DOCS, "B", ORDERED)
    assert "B" in _docs(populated.search(DOCS, _vec(2), frozenset({G1, BAD}), 10))
    assert "B" not in _docs(populated.search(DOCS, _vec(2), frozenset({G2, BAD}), 10))
    populated.set_acl(DOCS, "B", Acl(frozenset({G2}), frozenset({BAD})))
    (got,) = populated.retrieve(DOCS, [point_id("B", 0)], frozenset({G2}))
    assert got.payload.acl_grants == ()
    assert "B" not in _docs(populated.search(DOCS, _vec(2), frozenset({G1, BAD}), 10))


def test_search_fills_its_limit_past_points_the_grants_refuse(store: Store) -> None:
    """Points the prefilter admits but the grants refuse, nearest to the query, do not starve
    the result: the search asks the engine for more until ``limit`` readable points are found."""
    refused = Acl.of([Grant(frozenset({G1}), frozenset({BAD})), Grant(frozenset({G2}))])
    assert refused.deny == frozenset()  # the prefilter admits {G1, BAD}: only the grants refuse
    near = [_with_acl(_point(f"N{i}", 0, (), seed=1), refused) for i in range(12)]
    far = [_point(f"F{i}", 0, (G1,), seed=100 + i) for i in range(3)]
    store.upsert(DOCS, near + far)
    hits = store.search(DOCS, _vec(1), frozenset({G1, BAD}), 3)
    assert _docs(hits) == {"F0", "F1", "F2"}


# ------------------------------------------------------------------------------ writes


def test_set_acl_changes_visibility_not_content(populated: Store) -> None:
    before = populated.search(DOCS, _vec(3), frozenset({G2}), 1)[0]
    assert before.payload.doc_id == "C"

    populated.set_acl(DOCS, "C", Acl(frozenset({G1}), frozenset()))
    assert "C" not in _docs(populated.search(DOCS, _vec(3), frozenset({G2}), 10))
    after = populated.search(DOCS, _vec(3), frozenset({G1}), 1)[0]
    assert after.id == before.id
    assert after.score == pytest.approx(before.score, abs=1e-5)  # same vector
    assert after.payload.acl_allow == (G1,)
    assert after.payload.text == before.payload.text
    assert after.payload.heading_path == before.payload.heading_path
    assert after.payload.indexed_at == before.payload.indexed_at

    populated.set_acl(DOCS, "C", Acl(frozenset({G1, G2}), frozenset({G2})))
    assert "C" not in _docs(populated.search(DOCS, _vec(3), frozenset({G2}), 10))
    assert "C" in _docs(populated.search(DOCS, _vec(3), frozenset({G1}), 10))
    populated.set_acl(DOCS, "C", Acl.nobody("acl_unreadable: test"))
    assert "C" not in _docs(populated.search(DOCS, _vec(3), frozenset({G1, G2}), 10))
    assert populated.count(DOCS) == 5


def test_delete_doc_from_chunk_index(store: Store) -> None:
    store.upsert(DOCS, [_point(doc, i, (G1,)) for doc in ("X", "Y") for i in range(5)])
    store.delete_doc(DOCS, "X", from_chunk_index=3)
    assert store.count(DOCS) == 8
    left = store.chunks_of(DOCS, "X", range(10), frozenset({G1}))
    assert [p.payload.chunk_index for p in left] == [0, 1, 2]

    store.delete_doc(DOCS, "X")
    assert store.count(DOCS) == 5
    assert store.chunks_of(DOCS, "X", range(10), frozenset({G1})) == []
    assert len(store.chunks_of(DOCS, "Y", range(10), frozenset({G1}))) == 5
    store.delete_doc(DOCS, "absent")  # no-op
    assert store.count(DOCS) == 5


def test_upsert_is_idempotent_by_id(store: Store) -> None:
    points = [_point("X", i, (G1,)) for i in range(4)]
    store.upsert(DOCS, points)
    store.upsert(DOCS, points)
    assert store.count(DOCS) == 4
    store.upsert(DOCS, [_point("X", 1, (G2,), text="new text")])
    assert store.count(DOCS) == 4
    (p,) = store.chunks_of(DOCS, "X", [1], frozenset({G2}))
    assert p.payload.text == "new text"
    assert store.chunks_of(DOCS, "X", [1], frozenset({G1})) == []


def test_scroll_yields_every_point_and_collections_are_separate(store: Store) -> None:
    points = [_point(f"doc{i % 4}", i, (G1,) if i % 2 else ()) for i in range(25)]
    store.upsert(DOCS, points)
    store.upsert("documentation", [_point("manual", 0, (G2,))])

    scrolled = list(store.scroll(DOCS, batch=7))
    assert len(scrolled) == 25
    assert {p.id: p.payload for p in scrolled} == {p.id: p.payload for p in points}
    assert store.count(DOCS) == 25
    assert store.count("documentation") == 1
    assert [p.payload.doc_id for p in store.scroll("documentation")] == ["manual"]
    assert store.search(DOCS, _vec(0), frozenset({G2}), 10) == []


def test_data_survives_close_and_reopen(make: Callable[[], Store]) -> None:
    first = make()
    first.open(EMBEDDER, DIM)
    first.upsert(DOCS, [_point("X", i, (G1,), seed=i) for i in range(3)])
    first.set_acl(DOCS, "X", Acl(frozenset({G2}), frozenset()))
    first.delete_doc(DOCS, "X", 2)
    first.close()
    first.close()  # idempotent

    second = make()
    second.open(EMBEDDER, DIM)
    assert second.count(DOCS) == 2
    got = second.search(DOCS, _vec(1), frozenset({G2}), 5)
    assert got[0].id == point_id("X", 1)
    assert got[0].score == pytest.approx(1.0, abs=1e-4)
    assert second.search(DOCS, _vec(1), frozenset({G1}), 5) == []


def test_drop_all_allows_another_embedder(make: Callable[[], Store]) -> None:
    first = make()
    first.open(EMBEDDER, DIM)
    first.upsert(DOCS, [_point("X", 0, (G1,), seed=1)])
    first.close()
    dropper = make()
    dropper.drop_all()
    dropper.close()
    other = make()
    other.open("other-embedder", DIM * 2)  # no mismatch any more: the store is empty
    assert other.count(DOCS) == 0 and other.count("documentation") == 0


# ------------------------------------------------------------------------------ factory


def test_make_store_builds_each_kind(tmp_path: Path) -> None:
    edge = make_store(EdgeStoreConfig(), tmp_path)
    assert isinstance(edge, EdgeStore) and edge.root == tmp_path / "qdrant"
    local = make_store(LocalStoreConfig(kind="local", path=tmp_path / "loc"), tmp_path)
    try:
        assert isinstance(local, QdrantStore)
        local.open(EMBEDDER, DIM)
        assert local.count(DOCS) == 0
    finally:
        local.close()
    server = make_store(QdrantStoreConfig(kind="qdrant", url="http://127.0.0.1:1"), tmp_path)
    assert isinstance(server, QdrantStore)
    with pytest.raises(StoreError):  # nothing listens there: a StoreError, not a raw client error
        server.open(EMBEDDER, DIM)
    server.close()


# ------------------------------------------------------------------------------ EdgeStore only

_CHILD = textwrap.dedent(
    """
    import dataclasses, os, signal, sys
    from pathlib import Path
    import numpy as np
    from ancre.errors import StoreLockedError
    from ancre.index.edge_store import EdgeStore
    from ancre.index.store import PointWrite
    from ancre.models import Acl, ChunkPayload, point_id

    data, mode = Path(sys.argv[1]), sys.argv[2]
    store = EdgeStore(data)
    try:
        store.open("test-embedder:v1", 8)
    except StoreLockedError as exc:
        print("LOCKED", exc)
        sys.exit(3)
    if mode == "open":
        print("OPENED")
        store.close()
        sys.exit(0)
    # mode == "kill": write, then die without closing or flushing anything else
    payload = ChunkPayload(
        source="src", doc_id="K", path="K.txt", filename="K.txt", location="", chunk_index=0, text="t", acl_allow=("g",),
        acl_deny=(), content_hash="h", indexed_at=0.0,
    )
    pts = []
    for i in range(50):
        v = np.random.default_rng(i).normal(size=8).astype(np.float32)
        pts.append(PointWrite(point_id("K", i), v, dataclasses.replace(payload, chunk_index=i)))
    store.upsert("documents", pts)
    store.set_acl("documents", "K", Acl(frozenset({"g2"})))
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _child(data_dir: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(data_dir), mode],
        check=False, capture_output=True,
        text=True,
        timeout=120,
    )


def test_edge_second_process_gets_store_locked_error(tmp_path: Path) -> None:
    owner = EdgeStore(tmp_path)
    owner.open(EMBEDDER, DIM)
    try:
        res = _child(tmp_path, "open")
        assert res.returncode == 3, res.stderr
        assert f"PID {os.getpid()}" in res.stdout
        assert "ancre serve" in res.stdout and "Qdrant server" in res.stdout

        with pytest.raises(StoreLockedError):  # a second owner in this process too
            EdgeStore(tmp_path).open(EMBEDDER, DIM)
    finally:
        owner.close()

    res = _child(tmp_path, "open")
    assert res.returncode == 0 and "OPENED" in res.stdout, res.stderr


def test_edge_writes_survive_kill_9(tmp_path: Path) -> None:
    res = _child(tmp_path, "kill")
    assert res.returncode == -9, res.stderr

    store = EdgeStore(tmp_path)  # the lock died with the process
    store.open(EMBEDDER, DIM)
    try:
        assert store.count(DOCS) == 50
        got = store.chunks_of(DOCS, "K", range(50), frozenset({"g2"}))
        assert [p.payload.chunk_index for p in got] == list(range(50))
        assert store.chunks_of(DOCS, "K", [0], frozenset({"g"})) == []
    finally:
        store.close()


def test_edge_layout_and_meta(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path)
    store.open(EMBEDDER, DIM)
    store.close()
    root = tmp_path / "qdrant"
    assert (root / "documents" / "edge_config.json").exists()
    assert (root / "documentation" / "edge_config.json").exists()
    assert '"dim": 8' in (root / "ancre_meta.json").read_text()
    (root / "ancre_meta.json").unlink()
    with pytest.raises(StoreError, match="ancre reindex"):
        EdgeStore(tmp_path).open(EMBEDDER, DIM)


# ------------------------------------------------------------------------------ BM25 in the store


@pytest.fixture(params=["edge", "local-sparse"])
def sparse(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EdgeStore | QdrantStore]:
    """A store keeping BM25 itself (``[store] bm25 = "qdrant"``): the embedded store's text
    index (the default), or qdrant-client local mode with sparse vectors and the IDF modifier (as
    a Qdrant server with ``kind = "qdrant"``)."""
    s: EdgeStore | QdrantStore
    s = EdgeStore(tmp_path / "edge") if request.param == "edge" else QdrantStore.local(tmp_path / "sparse", sparse_bm25=True)
    s.open(EMBEDDER, DIM)
    assert isinstance(s, KeywordStore) and s.keywords_ready
    yield s
    s.close()


def test_keyword_search_filters_rights_in_the_query(sparse: EdgeStore | QdrantStore) -> None:
    """60 notes G1 may read repeat a code; one note G2 may read says it once: G2's search finds
    his note, ranked first, and nothing else; deny wins; an empty principal set reads nothing."""
    notes = [_point(f"N{i}", 0, (G1,), text=f"Relais RX-7731 remplacé, RX-7731 conforme {i}.") for i in range(60)]
    offer = _point("OFFER", 0, (G2,), text="Offre : passerelles, formation, support. Modèle RX-7731. Prix HT.")
    denied = _point("DENIED", 0, (G2,), (BAD,), text="RX-7731 RX-7731 salle serveur")
    sparse.upsert(DOCS, [*notes, offer, denied])
    hits = sparse.keyword_search(DOCS, "Quelle est la référence RX-7731 ?", frozenset({G2}), 30)
    assert len(hits) == 2 and _docs(hits) == {"OFFER", "DENIED"}
    assert all(h.score and h.score > 0 for h in hits)
    assert _docs(sparse.keyword_search(DOCS, "RX-7731", frozenset({G2, BAD}), 30)) == {"OFFER"}
    assert len(sparse.keyword_search(DOCS, "RX-7731", frozenset({G1}), 30)) == 30
    assert sparse.keyword_search(DOCS, "RX-7731", frozenset(), 30) == []
    assert sparse.keyword_search(DOCS, "le la les", frozenset({G1}), 30) == []
    # the extractive gate's frequencies, counted over what each may read: the denied note's words
    # are in no chunk of G2 with BAD, the notes' in none of G2's
    assert sparse.keyword_term_counts(["serveur", "remplac"], 100, frozenset({G2, BAD})) == (1, {"serveur": 0, "remplac": 0})
    assert sparse.keyword_term_counts(["serveur", "remplac"], 100, frozenset({G2})) == (2, {"serveur": 1, "remplac": 0})
    assert sparse.keyword_term_counts(["serveur", "remplac"], 100, frozenset({G1})) == (60, {"serveur": 0, "remplac": 60})
    assert sparse.keyword_term_counts(["serveur"], 100, frozenset()) == (0, {"serveur": 0})


def test_keyword_search_idf_is_computed_by_qdrant(sparse: EdgeStore | QdrantStore) -> None:
    """A term in every chunk weighs less than a term in one (IDF over the collection), and the
    IDF follows the collection as points come and go."""
    sparse.upsert(DOCS, [_point(f"D{i}", 0, (G1,), text=f"contrat maintenance {i}") for i in range(20)])
    sparse.upsert(DOCS, [_point("RARE", 0, (G1,), text="contrat maintenance pare-feu OPNsense")])
    hits = sparse.keyword_search(DOCS, "contrat OPNsense", frozenset({G1}), 5)
    assert hits[0].payload.doc_id == "RARE"
    common = sparse.keyword_search(DOCS, "contrat", frozenset({G1}), 30)
    rare = sparse.keyword_search(DOCS, "opnsense", frozenset({G1}), 30)
    assert rare[0].score > 2 * max(h.score or 0 for h in common)
    sparse.delete_doc(DOCS, "RARE")
    assert sparse.keyword_search(DOCS, "opnsense", frozenset({G1}), 30) == []
    n, df = sparse.keyword_term_counts(["contrat", "opnsens", "absent"], cap=3)
    assert n == 20 and df == {"contrat": 4, "opnsens": 0, "absent": 0}


def test_keyword_search_follows_acl_changes_at_once(sparse: EdgeStore | QdrantStore) -> None:
    sparse.upsert(DOCS, [_point("A", 0, (G1,), text="WD-EXCL-042 exclut le dossier")])
    assert _docs(sparse.keyword_search(DOCS, "WD-EXCL-042", frozenset({G1}), 5)) == {"A"}
    sparse.set_acl(DOCS, "A", Acl(frozenset({G2})))
    assert sparse.keyword_search(DOCS, "WD-EXCL-042", frozenset({G1}), 5) == []
    assert _docs(sparse.keyword_search(DOCS, "WD-EXCL-042", frozenset({G2}), 5)) == {"A"}


def test_keyword_search_finds_file_names_and_long_codes(sparse: EdgeStore | QdrantStore) -> None:
    """The file name is searched with the text; a long code or file name is one term."""
    sparse.upsert(DOCS, [_point("21_Contrat_Maintenance_Baumont_Industries", 0, (G1,), text="Annexe tarifaire.")])
    sparse.upsert(DOCS, [_point("B", 0, (G1,), text="Chemin C:\\Axonix\\Agent\\Logs et code 4471-ZETA-PRIME-2026")])
    got = sparse.keyword_search(DOCS, "21_Contrat_Maintenance_Baumont_Industries.docx", frozenset({G1}), 5)
    assert got[0].payload.doc_id == "21_Contrat_Maintenance_Baumont_Industries"
    assert _docs(sparse.keyword_search(DOCS, "4471-ZETA-PRIME-2026", frozenset({G1}), 5)) == {"B"}
    assert _docs(sparse.keyword_search(DOCS, "c:\\axonix\\agent\\logs", frozenset({G1}), 5)) == {"B"}


def test_keyword_search_evaluates_grants_exactly_and_fills_its_limit(sparse: EdgeStore | QdrantStore) -> None:
    """The keyword side applies the exact grant check of every other read: an ordered walk's ACL
    admits G1+BAD, not G2+BAD; points the prefilter admits but the grants refuse, scoring best,
    do not starve the result; an expired grant admits nobody from that instant."""
    sparse.upsert(DOCS, [_with_acl(_point("G", 0, (), text="WD-EXCL-042 exclusion"), ORDERED)])
    assert _docs(sparse.keyword_search(DOCS, "WD-EXCL-042", frozenset({G1, BAD}), 5)) == {"G"}
    assert sparse.keyword_search(DOCS, "WD-EXCL-042", frozenset({G2, BAD}), 5) == []
    refused = Acl.of([Grant(frozenset({G1}), frozenset({BAD})), Grant(frozenset({G2}))])
    sparse.upsert(DOCS, [_with_acl(_point(f"N{i}", 0, (), text="RX-7731 RX-7731 RX-7731"), refused) for i in range(12)])
    sparse.upsert(DOCS, [_point(f"F{i}", 0, (G1,), text=f"RX-7731 et bien d'autres mots encore {i}") for i in range(3)])
    assert _docs(sparse.keyword_search(DOCS, "RX-7731", frozenset({G1, BAD}), 3)) == {"F0", "F1", "F2"}
    expires = time.time() + 1.5
    sparse.upsert(DOCS, [_with_acl(_point("L", 0, (), text="OPNsense"), Acl.of([Grant(frozenset({G2}), expires=expires)]))])
    assert _docs(sparse.keyword_search(DOCS, "OPNsense", frozenset({G2}), 5)) == {"L"}
    while time.time() < expires:
        time.sleep(0.1)
    assert sparse.keyword_search(DOCS, "OPNsense", frozenset({G2}), 5) == []


def test_keyword_option_must_match_how_the_collections_were_built(tmp_path: Path) -> None:
    plain = QdrantStore.local(tmp_path / "q")
    plain.open(EMBEDDER, DIM)
    with pytest.raises(StoreError, match="keeps no BM25"):
        plain.keyword_search(DOCS, "x", frozenset({G1}), 5)
    plain.close()
    with pytest.raises(StoreError, match="reindex"):
        QdrantStore.local(tmp_path / "q", sparse_bm25=True).open(EMBEDDER, DIM)
    edge = EdgeStore(tmp_path / "e", keywords=False)
    edge.open(EMBEDDER, DIM)
    with pytest.raises(StoreError, match="keeps no BM25"):
        edge.keyword_search(DOCS, "x", frozenset({G1}), 5)
    edge.close()


def test_keyword_option_defaults_per_store_kind() -> None:
    """BM25 lives in the embedded store by default; a server keeps the snapshot unless told (its
    collections were made without sparse vectors)."""
    def store(**table: object) -> Any:
        return load_settings(None, store=table).store

    assert load_settings(None).store == EdgeStoreConfig() and EdgeStoreConfig().bm25 == "qdrant"
    assert store(kind="edge", bm25="snapshot").bm25 == "snapshot"
    assert store(kind="qdrant", url="http://127.0.0.1:6333").bm25 == "snapshot"
    assert store(kind="local").bm25 == "snapshot"
    assert store(kind="qdrant", url="http://127.0.0.1:6333", bm25="qdrant").bm25 == "qdrant"
    edge = make_store(EdgeStoreConfig(build_after_points=7), Path("/nonexistent"))
    assert isinstance(edge, EdgeStore) and edge.keywords and edge.tuning.build_after_points == 7
    assert not make_store(EdgeStoreConfig(bm25="snapshot"), Path("/nonexistent")).keywords  # type: ignore[attr-defined]


def test_edge_keywords_are_filled_in_for_a_store_written_without_them(tmp_path: Path) -> None:
    """A store written while keywords were off (or by an ancre without them) is not keyword-ready
    when they are turned on — the snapshot answers meanwhile — until a build gave every point its
    terms; then they are found, and so is every point written meanwhile."""
    old = EdgeStore(tmp_path, keywords=False)
    old.open(EMBEDDER, DIM)
    old.upsert(DOCS, [_point(f"OLD{i}", 0, (G1,), text=f"rapport trimestriel OPNsense {i}") for i in range(5)])
    old.close()
    store = EdgeStore(tmp_path)
    store.open(EMBEDDER, DIM)
    try:
        assert not store.keywords_ready and store.needs_build()
        store.upsert(DOCS, [_point("NEW", 0, (G1,), text="OPNsense pare-feu")])
        reports = store.maintain()
        assert [r.collection for r in reports] == [DOCS]  # the empty collection needs no build
        assert store.keywords_ready and not store.needs_build()
        assert _docs(store.keyword_search(DOCS, "OPNsense", frozenset({G1}), 10)) == {f"OLD{i}" for i in range(5)} | {"NEW"}
    finally:
        store.close()
    again = EdgeStore(tmp_path)
    again.open(EMBEDDER, DIM)
    assert again.keywords_ready
    again.close()
