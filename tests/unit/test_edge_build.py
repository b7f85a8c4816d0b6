"""Index builds of the embedded store (ancre.index.edge_build, edge_child, edge_pages, EdgeStore.maintain): built in a
real child process on a copy of the shard, swapped in while reads and writes go on, and never
losing a write made before, during or after the build."""

from __future__ import annotations

import errno
import mmap
import os
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ancre.errors import StoreError
from ancre.index import edge_build
from ancre.index.edge_build import copy_tree, refresh_copy
from ancre.index.edge_config import EdgeTuning
from ancre.index.edge_pages import prewarm, release_pages, release_wal
from ancre.index.edge_store import EdgeStore
from ancre.index.edge_writes import Journal
from ancre.index.store import PointWrite
from ancre.models import COLLECTIONS, Acl, ChunkPayload, point_id

DIM = 8
EMBEDDER = "test-embedder:v1"
DOCS, DOCUMENTATION = COLLECTIONS
GROUPS = ("sid:S-1-5-21-1-1001", "sid:S-1-5-21-1-1002", "sid:S-1-5-21-1-1003")
WORDS = ("contrat", "maintenance", "pare-feu", "OPNsense", "salaire", "WD-EXCL-042", "serveur", "Baumont")


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _points(doc: str, n: int, allow: tuple[str, ...], deny: tuple[str, ...] = (), salt: int = 0) -> list[PointWrite]:
    out = []
    for i in range(n):
        seed = zlib.crc32(f"{doc}:{i}:{salt}".encode())
        words = " ".join(WORDS[(seed >> k) % len(WORDS)] for k in range(0, 12, 3))
        payload = ChunkPayload(
            source="src", doc_id=doc, path=f"d/{doc}.docx", filename=f"{doc}.docx", location="",
            chunk_index=i, text=f"{words} {salt}", acl_allow=allow, acl_deny=deny, content_hash=f"h{salt}",
            indexed_at=1.0,
        )
        out.append(PointWrite(point_id(doc, i), _vec(seed), payload))
    return out


def _content(store: EdgeStore) -> dict[tuple[str, str], tuple]:
    """Every point of both collections: ``(collection, id)`` → (payload fields, vector rounded)."""
    out: dict[tuple[str, str], tuple] = {}
    for coll in COLLECTIONS:
        with store._use(coll) as shard:
            offset = None
            while True:
                recs, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=256, with_payload=True, with_vector=True))
                for r in recs:
                    pl = r.payload or {}
                    vec = r.vector[""] if isinstance(r.vector, dict) else r.vector
                    out[(coll, str(r.id))] = (
                        pl["doc_id"], pl["chunk_index"], pl["text"], tuple(pl["acl_allow"]), tuple(pl["acl_deny"]),
                        pl.get("bm25_terms"), tuple(np.round(np.asarray(vec, dtype=np.float32), 4)),
                    )
                if offset is None:
                    break
    return out


class Model:
    """What the store must hold after a sequence of writes (the reference the swap is checked
    against): ``(collection, id)`` → the payload fields and vector a fresh write gives."""

    def __init__(self) -> None:
        self.points: dict[tuple[str, str], PointWrite] = {}
        self.colls: dict[tuple[str, str], str] = {}

    def upsert(self, coll: str, pts: list[PointWrite]) -> None:
        for p in pts:
            self.points[(coll, p.id)] = p

    def delete_doc(self, coll: str, doc: str, start: int) -> None:
        for key in [k for k, p in self.points.items() if k[0] == coll and p.payload.doc_id == doc and p.payload.chunk_index >= start]:
            del self.points[key]

    def set_acl(self, coll: str, doc: str, acl: Acl) -> None:
        from dataclasses import replace

        for key, p in list(self.points.items()):
            if key[0] == coll and p.payload.doc_id == doc:
                pl = replace(p.payload, acl_allow=tuple(sorted(acl.allow)), acl_deny=tuple(sorted(acl.deny)))
                self.points[key] = PointWrite(p.id, p.vector, pl)

    def content(self) -> dict[tuple[str, str], tuple]:
        from ancre.index.keywords import chunk_terms, joined

        return {
            key: (
                p.payload.doc_id, p.payload.chunk_index, p.payload.text, p.payload.acl_allow, p.payload.acl_deny,
                joined(chunk_terms(p.payload.filename, p.payload.text)), tuple(np.round(p.vector, 4)),
            )
            for key, p in self.points.items()
        }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "data", tuning=EdgeTuning(build_after_points=60))
    s.open(EMBEDDER, DIM)
    yield s
    s.close()


# ------------------------------------------------------------------------------ journal and copy


def test_journal_reads_back_entries_by_position(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j")
    ops = [("upsert", i, np.arange(i, dtype=np.float32)) for i in range(7)]
    for op in ops[:4]:
        j.append(op)
    assert len(j) == 4
    got = list(j.read(0, 4))
    assert [g[1] for g in got] == [0, 1, 2, 3] and np.array_equal(got[3][2], ops[3][2])
    for op in ops[4:]:
        j.append(op)
    assert [g[1] for g in j.read(2, 5)] == [2, 3, 4]
    assert [g[1] for g in j.read(5, len(j))] == [5, 6]
    assert list(j.read(7, 7)) == []
    j.close()
    assert not (tmp_path / "j").exists()


def test_refresh_copy_makes_an_exact_copy_of_what_changed_meanwhile(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "a").mkdir(parents=True)
    (src / "a" / "same").write_bytes(b"x" * 100)
    (src / "grows").write_bytes(b"1")
    (src / "gone").write_bytes(b"g")
    manifest = copy_tree(src, dst)
    (src / "grows").write_bytes(b"12345")
    (src / "gone").unlink()
    (src / "a" / "new").write_bytes(b"n")
    copied = refresh_copy(src, dst, manifest)
    assert copied == 6  # "grows" and "new", not the unchanged file
    assert sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file()) == ["a/new", "a/same", "grows"]
    assert (dst / "grows").read_bytes() == b"12345"


def test_a_copy_waits_for_each_piece_to_reach_the_disk_and_keeps_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(edge_build, "COPY_SYNC_BYTES", 4096)
    synced: list[int] = []
    real_sync = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(os.fstat(fd).st_size), real_sync(fd))[1])
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "seg").mkdir(parents=True)
    blobs = {"seg/big": os.urandom(4096 * 5 + 123), "small": b"abc", "empty": b""}
    for rel, data in blobs.items():
        (src / rel).write_bytes(data)
    copy_tree(src, dst)
    for rel, data in blobs.items():
        assert (dst / rel).read_bytes() == data
    # the big file was synced after each 4 KiB piece: never more than one piece unsynced
    big = [n for n in synced if n > 3]
    assert big == [4096 * k for k in range(1, 6)] + [4096 * 5 + 123]


def test_a_copy_without_copy_file_range_keeps_every_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unsupported(*_a: object, **_k: object) -> int:
        raise OSError(errno.EXDEV, "cross-device")

    monkeypatch.setattr(os, "copy_file_range", unsupported)
    monkeypatch.setattr(edge_build, "COPY_SYNC_BYTES", 1000)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    data = os.urandom(3500)
    (src / "f").write_bytes(data)
    copy_tree(src, dst)
    assert (dst / "f").read_bytes() == data


def test_prewarm_reads_the_chosen_files_smallest_first_within_its_budget(tmp_path: Path) -> None:
    (tmp_path / "wal").mkdir()
    (tmp_path / "seg").mkdir()
    sizes = {"seg/a": 10, "seg/b": 3000, "seg/c": 70_000, "wal/open-1": 500}
    for rel, n in sizes.items():
        (tmp_path / rel).write_bytes(b"x" * n)
    assert prewarm(tmp_path, budget_bytes=10**9) == sum(sizes.values())
    assert prewarm(tmp_path, max_file_bytes=4096, budget_bytes=10**9) == 10 + 500 + 3000
    assert prewarm(tmp_path, skip=("wal",), budget_bytes=10**9) == 10 + 3000 + 70_000
    assert prewarm(tmp_path, budget_bytes=4000) == 10 + 500 + 3000  # the 70 kB file would pass it
    assert prewarm(tmp_path, budget_bytes=10**9, should_stop=lambda: True) == 0
    assert prewarm(tmp_path / "missing", budget_bytes=10**9) == 0


def _rss_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of ``path`` (``/proc/self/smaps``)."""
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="utf-8") as f:
        for line in f:
            head = line.split(None, 5)
            if head and "-" in head[0] and len(head) >= 5 and head[0][0] in "0123456789abcdef":
                inside = len(head) == 6 and head[5].strip() == str(path)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs /proc/self/smaps (Linux)")
def test_release_pages_drops_the_mappings_under_a_folder_and_no_other(tmp_path: Path) -> None:
    old, other = tmp_path / "old@1", tmp_path / "live@2"
    old.mkdir()
    other.mkdir()
    data = os.urandom(1 << 20)
    maps = []
    for folder in (old, other):
        (folder / "vectors.dat").write_bytes(data)
        f = open(folder / "vectors.dat", "r+b")  # noqa: SIM115 - closed below
        m = mmap.mmap(f.fileno(), 0)
        assert m[:] == data  # every page touched
        maps.append((f, m))
    try:
        assert _rss_kib((old / "vectors.dat").resolve()) >= 1024 and _rss_kib((other / "vectors.dat").resolve()) >= 1024
        assert release_pages(old) == 1
        assert _rss_kib((old / "vectors.dat").resolve()) == 0
        assert _rss_kib((other / "vectors.dat").resolve()) >= 1024  # the live shard is untouched
        assert maps[0][1][:] == data  # a later read still sees the file
    finally:
        for f, m in maps:
            m.close()
            f.close()


def _pageout_here(path: Path) -> bool:
    """MADV_PAGEOUT reclaims file pages here: Linux 5.4+, and ``path`` not on tmpfs (whose pages
    only swap could take)."""
    release = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    if release < (5, 4):
        return False
    best, fstype = "", ""
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            _, mnt, kind, *_ = line.split()
            if str(path.resolve()).startswith(mnt.rstrip("/") + "/") and len(mnt) > len(best):
                best, fstype = mnt, kind
    return fstype not in ("tmpfs", "ramfs")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs /proc/self/smaps (Linux)")
def test_release_wal_gives_back_the_wal_pages_and_keeps_their_content(tmp_path: Path) -> None:
    if not _pageout_here(tmp_path):
        pytest.skip("MADV_PAGEOUT cannot reclaim file pages here (kernel < 5.4 or tmpfs)")
    shard = tmp_path / "documents@1"
    (shard / "wal").mkdir(parents=True)
    (shard / "segments").mkdir()
    data = os.urandom(4 << 20)
    maps = []
    for rel in ("wal/closed-3", "wal/open-4", "segments/vectors.dat"):
        with open(shard / rel, "wb") as w:  # on disk, as the engine's flush leaves its WAL:
            w.write(data)  # only clean pages can be reclaimed
            w.flush()
            os.fsync(w.fileno())
        f = open(shard / rel, "r+b")  # noqa: SIM115 - closed below
        m = mmap.mmap(f.fileno(), 0)
        assert m[:] == data  # every page touched
        maps.append((f, m))
    maps[1][1][:5] = b"entry"  # the open segment takes a write, flushed as the engine does
    maps[1][1].flush()
    wal = [(shard / rel).resolve() for rel in ("wal/closed-3", "wal/open-4")]
    try:
        assert [_rss_kib(p) for p in wal] == [4096, 4096]
        assert release_wal(shard) == 2
        # the kernel may keep a few pages it could not take at once (a folio still in a per-CPU
        # batch, a large folio it could not split): most of them go
        left = [_rss_kib(p) for p in wal]
        assert all(kib < 1024 for kib in left), left
        assert _rss_kib((shard / "segments/vectors.dat").resolve()) == 4096  # the shard's search files stay
        assert maps[0][1][:] == data
        assert maps[1][1][:] == b"entry" + data[5:]  # nothing written is lost
        assert (shard / "wal/open-4").read_bytes()[:5] == b"entry"
        assert release_wal(tmp_path / "missing") == 0
    finally:
        for f, m in maps:
            m.close()
            f.close()


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs /proc/self/smaps (Linux)")
def test_a_store_holds_no_wal_pages_after_open_and_after_maintain(tmp_path: Path) -> None:
    """The engine reads every retained WAL segment when it loads a shard: the store gives those
    pages back, and those its writes left at each :meth:`EdgeStore.maintain`; every point is
    still there after a reopen."""
    if not _pageout_here(tmp_path):
        pytest.skip("MADV_PAGEOUT cannot reclaim file pages here (kernel < 5.4 or tmpfs)")

    def wal_kib(s: EdgeStore) -> int:
        return sum(_rss_kib(p.resolve()) for c in COLLECTIONS for p in (s._shards.current(c).path / "wal").iterdir())

    tuning = EdgeTuning(build_after_points=10**6)
    s = EdgeStore(tmp_path / "data", tuning=tuning)
    s.open(EMBEDDER, DIM)
    for d in range(60):
        s.upsert(DOCS if d % 3 else DOCUMENTATION, _points(f"D{d}", 20, (GROUPS[d % 3],)))
    written = wal_kib(s)
    assert written >= 256  # the writes left WAL pages in this process
    assert s.maintain() == []  # nothing to build; the pages are given back
    assert wal_kib(s) < written // 4
    before = _content(s)
    s.close()
    s = EdgeStore(tmp_path / "data", tuning=tuning)
    s.open(EMBEDDER, DIM)
    try:
        assert wal_kib(s) < written // 4
        assert _content(s) == before
        s.upsert(DOCS, _points("after", 3, (GROUPS[0],)))
        assert len(_content(s)) == len(before) + 3
    finally:
        s.close()


# ------------------------------------------------------------------------------ build and swap


def test_build_swaps_in_an_indexed_shard_that_answers_the_same(store: EdgeStore, tmp_path: Path) -> None:
    for d in range(40):
        store.upsert(DOCS if d % 4 else DOCUMENTATION, _points(f"D{d}", 5, (GROUPS[d % 3],), (GROUPS[2],) if d % 7 == 0 else ()))
    principals = frozenset(GROUPS[:2])
    q = _vec(99)
    before = {c: [p.id for p in store.search(c, q, principals, 10, exact=True)] for c in COLLECTIONS}
    def kw(c: str) -> set[tuple[str, float]]:  # every match (no tie at a cut-off), order aside
        return {(p.id, round(p.score or 0, 4)) for p in store.keyword_search(c, "OPNsense pare-feu", principals, 1000)}

    kw_before = {c: kw(c) for c in COLLECTIONS}
    assert all(kw_before.values())
    content = _content(store)
    assert store.unindexed_points(DOCS) == 150 and store.needs_build()

    reports = store.maintain()
    assert [r.collection for r in reports] == [DOCS]  # documentation has 50 points (< 60): not yet
    assert reports[0].child.indexed_vectors == 150 and reports[0].child.points == 150
    assert reports[0].warmed_mib > 0  # the built shard was read into the page cache before the swap
    assert store.unindexed_points(DOCS) == 0 and store.unindexed_points(DOCUMENTATION) == 50
    root = tmp_path / "data" / "qdrant"
    assert (root / "documents.current").read_text().strip() == "documents@1"
    assert not (root / "documents").exists() and (root / "documentation").is_dir()
    assert _content(store) == content
    for c in COLLECTIONS:
        assert [p.id for p in store.search(c, q, principals, 10)] == before[c]
        assert kw(c) == kw_before[c]

    store.close()
    again = EdgeStore(tmp_path / "data")
    again.open(EMBEDDER, DIM)
    try:
        assert _content(again) == content and again.unindexed_points(DOCS) == 0
        assert sorted(p.name for p in root.iterdir()) == [
            "LOCK", "OPEN", "ancre_meta.json", "documentation", "documents.current", "documents@1",
        ]
    finally:
        again.close()


def _op(store: EdgeStore, model: Model, op: tuple) -> None:
    kind, coll, doc, a, b = op
    if kind == "upsert":
        pts = _points(doc, a, (GROUPS[b % 3],), salt=b)
        store.upsert(coll, pts)
        model.upsert(coll, pts)
    elif kind == "delete":
        store.delete_doc(coll, doc, a)
        model.delete_doc(coll, doc, a)
    else:
        acl = Acl(frozenset({GROUPS[a % 3]}), frozenset({GROUPS[b % 3]}) if b % 2 else frozenset())
        store.set_acl(coll, doc, acl)
        model.set_acl(coll, doc, acl)


_OPS = st.tuples(
    st.sampled_from(["upsert", "upsert", "delete", "acl"]),
    st.sampled_from(COLLECTIONS),
    st.sampled_from([f"D{i}" for i in range(6)]),
    st.integers(0, 4),
    st.integers(0, 5),
)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.lists(_OPS, min_size=1, max_size=12), copying=st.lists(_OPS, max_size=6),
       building=st.lists(_OPS, max_size=12), after=st.lists(_OPS, max_size=6))
def test_the_swap_never_loses_a_write(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
    before: list, copying: list, building: list, after: list,
) -> None:
    """Writes made before a build, while its copy is taken (they must be copied again or
    journaled), while the child builds (journaled, replayed onto the built shard) and after the
    swap all end up in the store exactly as a reference model of the same writes says."""
    data = tmp_path_factory.mktemp("swap")
    store = EdgeStore(data)
    store.open(EMBEDDER, DIM)
    model = Model()
    real_copy, real_child = edge_build.copy_tree, edge_build.run_child

    def copy_then_write(src: Path, dst: Path):  # writes land between the copy and its refresh
        manifest = real_copy(src, dst)
        for op in copying:
            _op(store, model, op)
        return manifest

    def child_while_writing(path: Path, spec: dict, stop: Callable[[], bool] | None):
        result = real_child(path, spec, stop)
        for op in building:  # the child is done but not yet swapped in: journaled
            _op(store, model, op)
        return result

    monkeypatch.setattr(edge_build, "copy_tree", copy_then_write)
    monkeypatch.setattr(edge_build, "run_child", child_while_writing)
    try:
        for op in before:
            _op(store, model, op)
        store.upsert(DOCS, _points("BASE", 1, (GROUPS[0],)))
        model.upsert(DOCS, _points("BASE", 1, (GROUPS[0],)))
        store.maintain(force=True)
        for op in after:
            _op(store, model, op)
        assert _content(store) == model.content()
    finally:
        monkeypatch.undo()
        store.close()
    again = EdgeStore(data)
    again.open(EMBEDDER, DIM)
    try:
        assert _content(again) == model.content()
    finally:
        again.close()


def test_reads_and_writes_go_on_during_a_build(store: EdgeStore) -> None:
    """A writer and a reader thread keep going while the child builds and the shard is swapped:
    no read fails, every write is there after the swap."""
    model = Model()
    for d in range(30):
        pts = _points(f"D{d}", 4, (GROUPS[0],))
        store.upsert(DOCS, pts)
        model.upsert(DOCS, pts)
    done = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        while not done.is_set():
            try:
                store.search(DOCS, _vec(reads[0]), frozenset({GROUPS[0]}), 5)
                store.keyword_search(DOCS, "contrat", frozenset({GROUPS[0]}), 5)
                reads[0] += 1
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return

    def writer() -> None:
        k = 0
        while not done.is_set():
            pts = _points(f"W{k}", 2, (GROUPS[1],), salt=k)
            store.upsert(DOCS, pts)
            model.upsert(DOCS, pts)
            if k % 3 == 0:
                store.set_acl(DOCS, f"D{k % 30}", Acl(frozenset({GROUPS[2]})))
                model.set_acl(DOCS, f"D{k % 30}", Acl(frozenset({GROUPS[2]})))
            k += 1

    threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
    for t in threads:
        t.start()
    try:
        reports = store.maintain(force=True)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert reads[0] > 0 and reports and reports[0].replayed > 0
    assert _content(store) == model.content()


def test_a_stopped_build_leaves_the_live_shard_as_it_was(store: EdgeStore, tmp_path: Path) -> None:
    store.upsert(DOCS, _points("A", 60, (GROUPS[0],)))
    content = _content(store)
    calls = [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] > 2  # once the child runs

    with pytest.raises(StoreError, match="stopped"):
        store.maintain(should_stop=stop)
    root = tmp_path / "data" / "qdrant"
    assert sorted(p.name for p in root.iterdir()) == ["LOCK", "OPEN", "ancre_meta.json", "documentation", "documents"]
    assert _content(store) == content and store.unindexed_points(DOCS) == 60
    store.upsert(DOCS, _points("B", 1, (GROUPS[0],)))  # still writable


def test_open_removes_what_an_interrupted_build_left(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path)
    store.open(EMBEDDER, DIM)
    store.upsert(DOCS, _points("A", 3, (GROUPS[0],)))
    store.close()
    root = tmp_path / "qdrant"
    (root / "documents@4").mkdir()  # a copy whose build died before the swap
    (root / ".journal-documents@4").write_bytes(b"x")
    store = EdgeStore(tmp_path)
    store.open(EMBEDDER, DIM)
    try:
        assert not (root / "documents@4").exists() and not (root / ".journal-documents@4").exists()
        assert store.count(DOCS) == 3
    finally:
        store.close()
    (root / "documents.current").write_text("documents@9\n")  # names a shard that is not there
    with pytest.raises(StoreError, match="names no shard"):
        EdgeStore(tmp_path).open(EMBEDDER, DIM)


# ------------------------------------------------------------------------------ the daemon's lane


def _wait(cond: Callable[[], bool], timeout: float = 300.0) -> bool:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_the_daemon_lane_keeps_the_store_indexed_after_each_change(store: EdgeStore) -> None:
    """The index-build thread (what ``ancre daemon`` runs) leaves the store HNSW-indexed: it builds
    at start when points wait, and again when poked after a change brings enough new points —
    while searches keep answering (exact on the new points until then)."""
    from types import SimpleNamespace

    from ancre.daemon.maintenance import IndexMaintainer
    from ancre.daemon.sync import SyncEngine

    stop = threading.Event()
    holder = SimpleNamespace(store=store)
    engine = SimpleNamespace(maintain_index=SyncEngine.maintain_index.__get__(holder))
    built: list[list[object]] = []
    lane = IndexMaintainer(engine, should_stop=stop.is_set, on_built=built.append, check_every_s=3600)  # type: ignore[arg-type]
    for d in range(14):
        store.upsert(DOCS, _points(f"A{d}", 5, (GROUPS[0],)))
    assert store.unindexed_points(DOCS) == 70
    lane.start()
    try:
        assert _wait(lambda: store.unindexed_points(DOCS) == 0 and lane.builds == 1 and not lane.building)
        assert [r.collection for r in built[0]] == [DOCS]  # type: ignore[attr-defined]
        for d in range(13):  # a change: 65 new points, searched exactly until the next build
            store.upsert(DOCS, _points(f"B{d}", 5, (GROUPS[1],)))
        assert store.unindexed_points(DOCS) == 65
        assert {p.payload.doc_id for p in store.search(DOCS, _vec(5), frozenset({GROUPS[1]}), 100)} == {f"B{d}" for d in range(13)}
        lane.poke()
        assert _wait(lambda: store.unindexed_points(DOCS) == 0 and lane.builds == 2 and not lane.building)
        assert len({p.payload.doc_id for p in store.search(DOCS, _vec(5), frozenset({GROUPS[1]}), 100)}) == 13
        assert lane.last_error is None
    finally:
        stop.set()
        assert lane.join(60)


def test_a_store_built_with_other_index_settings_is_rebuilt_once(tmp_path: Path) -> None:
    """An upgrade that changes how segments are indexed (here the full-scan threshold) makes the
    next ``maintain()`` rebuild every non-empty collection, once; the points stay as they were."""
    import json

    old = EdgeTuning(build_after_points=10**6, full_scan_kb=10_000)
    s = EdgeStore(tmp_path / "data", tuning=old)
    s.open(EMBEDDER, DIM)
    s.upsert(DOCS, _points("A", 30, (GROUPS[0],)))
    s.maintain(force=True)
    assert not s.needs_build()
    content = _content(s)
    s.close()

    new = EdgeTuning(build_after_points=10**6, full_scan_kb=20_000)
    s = EdgeStore(tmp_path / "data", tuning=new)
    s.open(EMBEDDER, DIM)
    try:
        assert s.needs_build()  # nothing unindexed, but built with other settings
        reports = s.maintain()
        assert [r.collection for r in reports] == [DOCS]  # documentation is empty: nothing to rebuild
        assert not s.needs_build() and s.maintain() == []
        assert _content(s) == content
        meta = json.loads((tmp_path / "data" / "qdrant" / "ancre_meta.json").read_text())
        assert meta["index"] == new.index_settings()
        for cfg in (tmp_path / "data" / "qdrant").glob("documents@*/segments/*/vector_index/hnsw_config.json"):
            assert json.loads(cfg.read_text())["full_scan_threshold"] == 20_000 * 1024 // (DIM * 4)
    finally:
        s.close()
    s = EdgeStore(tmp_path / "data", tuning=new)
    s.open(EMBEDDER, DIM)
    try:
        assert not s.needs_build()
    finally:
        s.close()
