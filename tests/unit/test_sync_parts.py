"""Each part of the sync engine alone (docs/ARCHITECTURE.md "Data flow of indexing"): the planner,
the fetcher, the ACL reader, the chunk writer and its pipe, the recorder, the ACL refresher and the
keyword hooks — each built from what it needs only, over the real embedded store, the real state
DB, the process's ACL writer and the real extractors (in process), a source held in memory. The
engine's passes over them are covered end to end by tests/integration (test_sync_*, test_acl_writer,
test_revocation_priority, test_vector_reuse…)."""

from __future__ import annotations

import hashlib
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from ancre.connectors.base import Connector
from ancre.daemon.sync import SyncEngine
from ancre.daemon.sync.acl_reading import AclReader, AclReading
from ancre.daemon.sync.acl_refresh import AclRefresher
from ancre.daemon.sync.bm25 import KeywordHooks
from ancre.daemon.sync.commit import ChunkWriter, CommitPipe, Planned
from ancre.daemon.sync.fetch import Fetcher
from ancre.daemon.sync.plan import Action, Limits
from ancre.daemon.sync.planner import ItemPlanner, Settle
from ancre.daemon.sync.records import Recorder
from ancre.daemon.sync.report import PassReport
from ancre.daemon.sync.retries import Failure, RetryPolicy
from ancre.errors import EmbedderError, ExtractionError, SourceUnavailableError
from ancre.index.acl_writer import AclWriter
from ancre.index.bm25 import Bm25Manager
from ancre.index.edge_store import EdgeStore
from ancre.index.state import ItemState, StateDB
from ancre.ingest.extract import extract_bytes, extractor_version
from ancre.models import CHUNK_FORMAT, COLLECTIONS, Acl, Block, ItemStatus, ReasonCode, SourceItem
from ancre.settings import ChunkingConfig

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

SRC, DOCS, DOCUMENTATION = "s", "documents", "documentation"
ALICE, BOB = "sid:S-1-5-21-7-1001", "sid:S-1-5-21-7-1002"
LIMITS = Limits(max_bytes=10 * 2**20, retry=RetryPolicy(max_attempts=3, backoff_s=60.0, extractor=extractor_version()))
CONTRAT = (
    "# Contrat de maintenance Garage Dubois\n\n"
    "## Forfait\n\nLe forfait mensuel est de CHF 3 840 HT, facturé chaque trimestre.\n\n"
    "## Durée\n\nLe contrat court douze mois et se renouvelle tacitement.\n"
)


class HashEmbedder:
    """Deterministic 8-dimensional vectors (a CRC of the text seeds each): the same text, the same
    vector, as a real embedder; every call's texts are kept."""

    name, dim = "test-hash:v1", 8

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.fail = False

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise EmbedderError("connection refused")
        self.calls.append(list(texts))
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vec(text)

    def _vec(self, text: str) -> np.ndarray:
        v = np.random.default_rng(zlib.crc32(text.encode())).normal(size=self.dim).astype(np.float32)
        return v / np.linalg.norm(v)


class InProcess:
    """The real extractors, in this process (the engine's pool runs the same in a worker)."""

    def __init__(self) -> None:
        self.calls = 0
        self.error: ExtractionError | None = None

    def extract(self, data: bytes, filename: str) -> tuple[Block, ...]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return extract_bytes(data, filename)


@dataclass
class MemorySource:
    """A source held in memory: path → bytes and ACL; counts what is read at it. ``down``: every
    read raises ``SourceUnavailableError``; ``unreadable``: content reads raise ``OSError``."""

    files: dict[str, tuple[bytes, Acl]] = field(default_factory=dict)
    acl_reads: list[str] = field(default_factory=list)
    content_reads: list[str] = field(default_factory=list)
    down: bool = False
    unreadable: bool = False
    documentation: tuple[str, ...] = ()
    on_acl_read: object = None
    source_id: str = SRC
    collection: str = DOCS

    def item(self, path: str, *, mtime: float = 1000.0) -> SourceItem:
        data, _ = self.files[path]
        return SourceItem(SRC, path, path, len(data), mtime, None)

    def fetch_acl(self, item: SourceItem) -> Acl:
        if self.down:
            raise SourceUnavailableError("the server does not answer")
        self.acl_reads.append(item.path)
        if callable(self.on_acl_read):
            self.on_acl_read(item)
        return self.files[item.path][1]

    def fetch_content(self, item: SourceItem) -> bytes:
        if self.down:
            raise SourceUnavailableError("the server does not answer")
        if self.unreadable:
            raise PermissionError(13, "Permission denied", item.path)
        self.content_reads.append(item.path)
        return self.files[item.path][0]

    def location(self, item: SourceItem) -> str:
        return f"\\\\SRV\\Partage\\{item.path.rsplit('/', 1)[0]}"

    def collection_for(self, item: SourceItem) -> str:
        return DOCUMENTATION if item.path.startswith(self.documentation) and self.documentation else DOCS

    def as_connector(self) -> Connector:
        return cast(Connector, self)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "store")
    s.open(HashEmbedder.name, HashEmbedder.dim)
    yield s
    s.close()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDB]:
    db = StateDB(tmp_path / "state.sqlite3")
    yield db
    db.close()


def acl(*allow: str, deny: tuple[str, ...] = ()) -> Acl:
    return Acl(frozenset(allow), frozenset(deny))


def stored_acls(store: EdgeStore, doc_id: str) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    return {(p.payload.acl_allow, p.payload.acl_deny) for c in COLLECTIONS for p in store.scroll(c) if p.payload.doc_id == doc_id}


def chunk_texts(store: EdgeStore, doc_id: str) -> list[str]:
    pts = sorted((p for c in COLLECTIONS for p in store.scroll(c) if p.payload.doc_id == doc_id), key=lambda p: p.payload.chunk_index)
    return [p.payload.text for p in pts]


def fetcher(pool: InProcess | None = None, *, target_chars: int = 1000, max_chunks: int = 10_000) -> Fetcher:
    return Fetcher(pool or InProcess(), ChunkingConfig(target_chars=target_chars), max_chunks)


def indexed_row(item: SourceItem, reading: AclReading, *, content_hash: str, chunks: int, collection: str = DOCS) -> ItemState:
    return ItemState(
        source=item.source, native_id=item.native_id, path=item.path, doc_id=item.doc_id, collection=collection,
        size=item.size, mtime=item.mtime, etag=item.etag, content_hash=content_hash, acl_hash=reading.digest,
        chunk_count=chunks, status=ItemStatus.INDEXED, updated_at=1.0, chunking=CHUNK_FORMAT,
    )


# ----------------------------------------------------------------------------------- ACL reader


def test_acl_reader_takes_its_ticket_before_reading_and_reads_again_only_when_a_newer_reading_came() -> None:
    writer = AclWriter(cast(EdgeStore, None), None)
    src = MemorySource({"a.md": (b"# A", acl(ALICE))})
    during: list[int] = []
    src.on_acl_read = lambda _item: during.append(writer.ticket())  # a ticket taken while the source is read
    reader = AclReader(writer)
    item = src.item("a.md")
    r = reader.read(src.as_connector(), item)
    assert r.acl == acl(ALICE) and r.digest == acl(ALICE).digest() and r.ticket < during[0]

    assert reader.current(src.as_connector(), item, r) is r  # nothing newer: not read again
    writer.observe(SRC, item.doc_id, r.ticket)  # this very reading written
    assert reader.current(src.as_connector(), item, r) is r, "a reading written stays the newest: no second read"
    assert src.acl_reads == ["a.md"]

    writer.begin_refresh(SRC)  # a rights refresh of its source started after it was read
    src.files["a.md"] = (b"# A", acl(BOB))
    again = reader.current(src.as_connector(), item, r)
    assert again.acl == acl(BOB) and again.ticket > r.ticket and src.acl_reads == ["a.md", "a.md"]

    newer = writer.ticket()
    writer.observe(SRC, item.doc_id, newer)  # the live check wrote a reading taken later
    assert reader.current(src.as_connector(), item, again).ticket > newer


# -------------------------------------------------------------------------------------- fetcher


def test_fetcher_reads_the_bytes_and_gives_the_subject_and_headed_chunks() -> None:
    src = MemorySource({"Clients/Garage Dubois/contrat-maintenance.md": (CONTRAT.encode(), acl(ALICE))})
    item = src.item("Clients/Garage Dubois/contrat-maintenance.md")
    f = fetcher(target_chars=100)
    data, content_hash = f.fetch(src.as_connector(), item)
    assert data == CONTRAT.encode() and content_hash == hashlib.sha256(data).hexdigest()
    doc = f.chunk(item, f.extract(item, data))
    assert doc.subject.title == "Contrat de maintenance Garage Dubois"
    assert [c.chunk_index for c in doc.chunks] == list(range(len(doc.chunks))) and len(doc.chunks) >= 2
    assert all(c.header.startswith("Document : Contrat de maintenance Garage Dubois") for c in doc.chunks)
    assert any("CHF 3 840 HT" in c.text and "Section : Forfait" in c.header for c in doc.chunks)


def test_fetcher_refuses_a_document_without_text_or_with_too_many_chunks() -> None:
    src = MemorySource({"vide.md": (b"   \n\n", acl(ALICE)), "long.md": (("\n\n".join(f"{i}. " + "mot " * 30 for i in range(12))).encode(), acl(ALICE))})
    f = fetcher(target_chars=100, max_chunks=5)
    item = src.item("long.md")
    with pytest.raises(ExtractionError) as e:
        f.chunk(item, f.extract(item, src.files["long.md"][0]))
    assert e.value.reason == "too_large" and "extraction.max_chunks (5)" in e.value.detail
    with pytest.raises(ExtractionError) as e:
        empty = src.item("vide.md")
        f.chunk(empty, f.extract(empty, src.files["vide.md"][0]))
    assert e.value.reason == "empty"


# -------------------------------------------------------------------------------------- planner


@dataclass
class Planner:
    planner: ItemPlanner
    src: MemorySource
    pool: InProcess
    dropped: list[tuple[str, str]]


@pytest.fixture
def plan() -> Planner:
    src = MemorySource({"a.md": (CONTRAT.encode(), acl(ALICE)), "guide/b.md": (b"# Guide\n\nTexte du guide.\n", acl(ALICE))})
    pool = InProcess()
    dropped: list[tuple[str, str]] = []
    planner = ItemPlanner(fetcher(pool), AclReader(AclWriter(cast(EdgeStore, None), None)), lambda c, d: dropped.append((c, d)))
    return Planner(planner, src, pool, dropped)


def test_planner_plans_a_new_document_reading_its_acl_then_its_bytes_once(plan: Planner) -> None:
    item = plan.src.item("a.md")
    rep = PassReport(source=SRC)
    got = plan.planner.plan(plan.src.as_connector(), item, None, rep, force=False, limits=LIMITS)
    assert isinstance(got, Planned)
    assert got.reading.acl == acl(ALICE) and got.content_hash == hashlib.sha256(CONTRAT.encode()).hexdigest()
    assert got.chunks and got.subject is not None and got.collection == DOCS and got.prev is None
    assert plan.src.acl_reads == ["a.md"] and plan.src.content_reads == ["a.md"] and plan.pool.calls == 1
    assert rep == PassReport(source=SRC)  # planning counts nothing but unreadable bytes


def test_planner_settles_an_unchanged_document_on_its_stat_without_reading_its_bytes(plan: Planner) -> None:
    item = plan.src.item("a.md")
    first = plan.planner.plan(plan.src.as_connector(), item, None, PassReport(source=SRC), force=False, limits=LIMITS)
    assert isinstance(first, Planned)
    prev = indexed_row(item, first.reading, content_hash=first.content_hash, chunks=len(first.chunks))
    plan.src.content_reads.clear()
    got = plan.planner.plan(plan.src.as_connector(), item, prev, PassReport(source=SRC), force=False, limits=LIMITS)
    assert isinstance(got, Settle) and got.decision.action is Action.ACL_ONLY and not got.decision.touch
    assert got.reading is not None and got.reading.acl == acl(ALICE) and got.content_hash is None
    assert plan.src.content_reads == [] and plan.pool.calls == 1

    touched = replace(item, mtime=2000.0)  # touched, same bytes: ACL only, its stat refreshed, no extraction
    got = plan.planner.plan(plan.src.as_connector(), touched, prev, PassReport(source=SRC), force=False, limits=LIMITS)
    assert isinstance(got, Settle) and got.decision.action is Action.ACL_ONLY and got.decision.touch
    assert got.content_hash == first.content_hash and plan.src.content_reads == ["a.md"] and plan.pool.calls == 1


def test_planner_never_reads_a_link_not_followed(plan: Planner) -> None:
    link = replace(plan.src.item("a.md"), skip="symlink")
    got = plan.planner.plan(plan.src.as_connector(), link, None, PassReport(source=SRC), force=False, limits=LIMITS)
    assert isinstance(got, Settle) and got.decision.action is Action.RECORD and got.reading is None
    assert got.decision.failure is not None and got.decision.failure.reason_code is ReasonCode.NOT_READ
    assert plan.src.acl_reads == [] and plan.src.content_reads == []


def test_planner_turns_an_extraction_failure_into_a_record_with_its_retry(plan: Planner) -> None:
    plan.pool.error = ExtractionError("timeout", "after 20 s")
    got = plan.planner.plan(plan.src.as_connector(), plan.src.item("a.md"), None, PassReport(source=SRC), force=False, limits=LIMITS)
    assert isinstance(got, Settle) and got.decision.action is Action.RECORD
    f = got.decision.failure
    assert f is not None and f.status is ItemStatus.FAILED and f.reason_code is ReasonCode.TIMEOUT and f.attempts == 1
    assert f.retry_at is not None and f.detail == "after 20 s (try 1 of 3)"
    assert got.reading is not None and got.reading.acl == acl(ALICE)
    assert got.content_hash == hashlib.sha256(CONTRAT.encode()).hexdigest()


def test_planner_counts_unreadable_bytes_and_settles_nothing(plan: Planner) -> None:
    plan.src.unreadable = True
    rep = PassReport(source=SRC)
    assert plan.planner.plan(plan.src.as_connector(), plan.src.item("a.md"), None, rep, force=False, limits=LIMITS) is None
    assert rep.failed == 1 and rep.problems[0][0] == "a.md" and rep.problems[0][2].startswith("unreadable")


def test_planner_drops_the_points_a_document_left_in_the_collection_it_moved_out_of(plan: Planner) -> None:
    item = plan.src.item("guide/b.md")
    first = plan.planner.plan(plan.src.as_connector(), item, None, PassReport(source=SRC), force=False, limits=LIMITS)
    assert isinstance(first, Planned) and not plan.dropped
    prev = indexed_row(item, first.reading, content_hash=first.content_hash, chunks=1)
    plan.src.documentation = ("guide/",)  # the configuration now puts guide/ in "documentation"
    got = plan.planner.plan(plan.src.as_connector(), item, prev, PassReport(source=SRC), force=False, limits=LIMITS)
    assert isinstance(got, Planned) and got.collection == DOCUMENTATION
    assert plan.dropped == [(DOCS, item.doc_id)]


def test_planner_lets_an_outage_through(plan: Planner) -> None:
    plan.src.down = True
    with pytest.raises(SourceUnavailableError):
        plan.planner.plan(plan.src.as_connector(), plan.src.item("a.md"), None, PassReport(source=SRC), force=False, limits=LIMITS)


# --------------------------------------------------------------------------------- chunk writer


@dataclass
class Writing:
    writer: ChunkWriter
    acl_writer: AclWriter
    src: MemorySource
    embedder: HashEmbedder
    planner: ItemPlanner


@pytest.fixture
def writing(store: EdgeStore, state: StateDB) -> Writing:
    acl_writer = AclWriter(store, state)
    reader = AclReader(acl_writer)
    embedder = HashEmbedder()
    src = MemorySource({"a.md": (CONTRAT.encode(), acl(ALICE)), "COPIES/a.md": (CONTRAT.encode(), acl(ALICE))})
    planner = ItemPlanner(fetcher(target_chars=100), reader, store.delete_doc)
    return Writing(ChunkWriter(store, embedder, state, acl_writer, reader), acl_writer, src, embedder, planner)


def planned(w: Writing, path: str, prev: ItemState | None = None) -> Planned:
    p = w.planner.plan(w.src.as_connector(), w.src.item(path), prev, PassReport(source=SRC), force=False, limits=LIMITS)
    assert isinstance(p, Planned)
    return p


def test_chunk_writer_writes_points_with_their_acl_then_the_indexed_row(writing: Writing, store: EdgeStore, state: StateDB) -> None:
    p = planned(writing, "a.md")
    writing.src.acl_reads.clear()
    rep = PassReport(source=SRC)
    writing.writer.commit(writing.src.as_connector(), [p], rep)
    doc = p.item.doc_id
    assert chunk_texts(store, doc) == [c.text for c in p.chunks]
    assert stored_acls(store, doc) == {((ALICE,), ())}
    row = state.get(SRC, "a.md")
    assert row is not None and row.status is ItemStatus.INDEXED and row.acl_hash == acl(ALICE).digest()
    assert row.chunk_count == len(p.chunks) and row.chunking == CHUNK_FORMAT and row.content_hash == p.content_hash
    assert rep.new == 1 and rep.embedded_chunks == len(p.chunks) and rep.reused_chunks == 0
    assert writing.src.acl_reads == [], "no newer reading came: the document's ACL is not read again"


def test_chunk_writer_embeds_only_the_passages_that_changed_and_nothing_for_a_copy(writing: Writing, store: EdgeStore, state: StateDB) -> None:
    first = planned(writing, "a.md")
    writing.writer.commit(writing.src.as_connector(), [first], PassReport(source=SRC))
    writing.embedder.calls.clear()
    copy_rep = PassReport(source=SRC)
    writing.writer.commit(writing.src.as_connector(), [planned(writing, "COPIES/a.md")], copy_rep)
    assert writing.embedder.calls == [] and copy_rep.reused_chunks == len(first.chunks)

    edited = CONTRAT.replace("douze mois", "vingt-quatre mois")
    writing.src.files["a.md"] = (edited.encode(), acl(ALICE))
    prev = state.get(SRC, "a.md")
    again = planned(writing, "a.md", prev)
    rep = PassReport(source=SRC)
    writing.writer.commit(writing.src.as_connector(), [again], rep)
    (texts,) = writing.embedder.calls
    assert len(texts) == 1 and "vingt-quatre mois" in texts[0]
    assert rep.changed == 1 and rep.embedded_chunks == 1 and rep.reused_chunks == len(again.chunks) - 1
    assert any("vingt-quatre mois" in t for t in chunk_texts(store, again.item.doc_id))


def test_chunk_writer_writes_the_acl_read_again_after_a_rights_refresh_began(writing: Writing, store: EdgeStore, state: StateDB) -> None:
    p = planned(writing, "a.md")  # read: Alice may read it
    writing.src.files["a.md"] = (CONTRAT.encode(), acl(ALICE, deny=(ALICE,)))  # revoked at the source
    writing.acl_writer.begin_refresh(SRC)  # the rights lane starts its refresh meanwhile
    writing.writer.commit(writing.src.as_connector(), [p], PassReport(source=SRC))
    assert stored_acls(store, p.item.doc_id) == {((ALICE,), (ALICE,))}, "a point kept the ACL read before the revocation"
    row = state.get(SRC, "a.md")
    assert row is not None and row.acl_hash == acl(ALICE, deny=(ALICE,)).digest()


def test_chunk_writer_gives_the_pending_rows_their_try_back_when_the_embedder_fails(writing: Writing, state: StateDB) -> None:
    p = planned(writing, "a.md")
    writing.embedder.fail = True
    with pytest.raises(EmbedderError):
        writing.writer.commit(writing.src.as_connector(), [p], PassReport(source=SRC))
    row = state.get(SRC, "a.md")
    assert row is not None and row.status is ItemStatus.PENDING and row.attempts == 0  # not the document's fault


def test_commit_pipe_overlaps_one_batch_and_raises_its_error_in_the_caller() -> None:
    started, release = threading.Event(), threading.Event()
    done: list[str] = []

    def commit(_conn: Connector, batch: list[Planned], rep: PassReport) -> None:
        started.set()
        assert release.wait(10)
        rep.new += len(batch)
        done.append("first")

    rep = PassReport(source=SRC)
    pipe = CommitPipe(commit, cast(Connector, None), rep)
    pipe.submit([cast(Planned, object())])
    assert started.wait(10) and not done  # the caller goes on while the batch is written
    release.set()
    pipe.wait()
    assert done == ["first"] and rep.new == 1

    def failing(_conn: Connector, batch: list[Planned], rep: PassReport) -> None:
        raise EmbedderError("connection refused")

    pipe = CommitPipe(failing, cast(Connector, None), rep)
    pipe.submit([cast(Planned, object())])
    with pytest.raises(EmbedderError):
        pipe.wait()
    serial = CommitPipe(failing, cast(Connector, None), rep, overlap=False)
    with pytest.raises(EmbedderError):  # in the caller's thread, at once
        serial.submit([cast(Planned, object())])


# ------------------------------------------------------------------------------------- recorder


def test_recorder_drops_the_points_of_a_document_that_failed_and_records_its_try(writing: Writing, store: EdgeStore, state: StateDB) -> None:
    p = planned(writing, "a.md")
    writing.writer.commit(writing.src.as_connector(), [p], PassReport(source=SRC))
    prev = state.get(SRC, "a.md")
    rec = Recorder(store, state, clock=lambda: 5000.0)
    rep = PassReport(source=SRC)
    rec.record_error(p.item, prev, DOCS, p.reading.digest, ExtractionError("crashed", "worker died"), rep,
                     retry=LIMITS.retry, content_hash="other")
    assert chunk_texts(store, p.item.doc_id) == [], "a document that failed still answers with its old chunks"
    row = state.get(SRC, "a.md")
    assert row is not None and row.status is ItemStatus.FAILED and row.reason_code is ReasonCode.CRASHED
    assert row.attempts == 1 and row.retry_at == 5000.0 + 60.0 and row.chunk_count == 0 and row.extractor == extractor_version()
    assert rep.failed == 1 and rep.problems == [("a.md", "failed", "crashed: worker died (try 1 of 3)")]

    later = replace(p.item, mtime=9000.0)
    rep = PassReport(source=SRC)
    rec.keep(later, row, p.reading.digest, rep, touch=True)
    kept = state.get(SRC, "a.md")
    assert kept == replace(row, mtime=9000.0) and rep.failed == 1  # the same outcome, its stat refreshed

    skipped = Failure(status=ItemStatus.SKIPPED, reason_code=ReasonCode.TOO_LARGE, detail="60.0 MiB > 50")
    rep = PassReport(source=SRC)
    rec.record(p.item, kept, DOCS, "", skipped, rep, content_hash=None)
    final = state.get(SRC, "a.md")
    assert final is not None and final.status is ItemStatus.SKIPPED and final.attempts == 0 and rep.skipped == 1


# -------------------------------------------------------------------------------- ACL refresher


def test_acl_refresher_writes_an_acl_only_change_without_embedding(writing: Writing, store: EdgeStore, state: StateDB) -> None:
    p = planned(writing, "a.md")
    writing.writer.commit(writing.src.as_connector(), [p], PassReport(source=SRC))
    prev = state.get(SRC, "a.md")
    assert prev is not None
    reader = AclReader(writing.acl_writer)
    rights = AclRefresher(state, writing.acl_writer, reader)
    conn = writing.src.as_connector()
    writing.embedder.calls.clear()

    rep = PassReport(source=SRC)
    rights.acl_only(conn, p.item, prev, DOCS, reader.read(conn, p.item), rep)
    assert rep.unchanged == 1 and rep.acl_only == 0 and state.get(SRC, "a.md") == prev  # nothing to write

    writing.src.files["a.md"] = (CONTRAT.encode(), acl(ALICE, BOB))
    rep = PassReport(source=SRC)
    rights.acl_only(conn, p.item, prev, DOCS, reader.read(conn, p.item), rep, mtime=2000.0)
    assert rep.acl_only == 1 and stored_acls(store, p.item.doc_id) == {((ALICE, BOB), ())}
    row = state.get(SRC, "a.md")
    assert row is not None and row.acl_hash == acl(ALICE, BOB).digest() and row.mtime == 2000.0
    assert writing.embedder.calls == []


def test_acl_refresher_rereads_every_live_document_and_never_writes_over_a_newer_reading(
    writing: Writing, store: EdgeStore, state: StateDB,
) -> None:
    for path in ("a.md", "COPIES/a.md"):
        writing.writer.commit(writing.src.as_connector(), [planned(writing, path)], PassReport(source=SRC))
    rights = AclRefresher(state, writing.acl_writer, AclReader(writing.acl_writer))
    writing.src.files["a.md"] = (CONTRAT.encode(), acl(BOB))
    rep = rights.refresh(writing.src.as_connector())
    assert rep.scope == "acl" and rep.listed == 2 and rep.acl_only == 1 and rep.unchanged == 1 and rep.outcome == "ok"
    assert stored_acls(store, "s:a.md") == {((BOB,), ())} and stored_acls(store, "s:COPIES/a.md") == {((ALICE,), ())}
    row = state.get(SRC, "a.md")
    assert row is not None and row.acl_hash == acl(BOB).digest()

    # the refresh's reading of COPIES/a.md is taken, then the live check writes a newer one: it stands
    newer = acl(ALICE, deny=(ALICE,))

    def live_check_writes_first(item: SourceItem) -> None:
        if item.path == "COPIES/a.md":
            writing.src.on_acl_read = None
            writing.acl_writer.write(SRC, DOCS, item.doc_id, newer, writing.acl_writer.ticket())

    writing.src.files["COPIES/a.md"] = (CONTRAT.encode(), acl(ALICE, BOB))  # what the refresh reads: wider
    writing.src.on_acl_read = live_check_writes_first
    rep = rights.refresh(writing.src.as_connector(), ["COPIES/a.md"])
    assert rep.listed == 1 and rep.acl_only == 0 and rep.unchanged == 1
    assert stored_acls(store, "s:COPIES/a.md") == {((ALICE,), (ALICE,))}, "an older reading widened the store"

    writing.src.down = True
    rep = rights.refresh(writing.src.as_connector())
    assert rep.outcome == "suspect" and rep.acl_only == 0
    assert stored_acls(store, "s:COPIES/a.md") == {((ALICE,), (ALICE,))}  # an outage never revokes nor grants


# -------------------------------------------------------------------------------- keyword hooks


def test_keyword_hooks_rebuild_the_snapshot_from_the_store(writing: Writing, store: EdgeStore, tmp_path: Path) -> None:
    bm25 = Bm25Manager(tmp_path / "bm25")
    hooks = KeywordHooks(store, bm25, in_store=False)
    assert not hooks.stale()  # an empty store needs no snapshot
    writing.writer.commit(writing.src.as_connector(), [planned(writing, "a.md")], PassReport(source=SRC))
    assert hooks.stale()  # points, no snapshot yet
    assert hooks.rebuild(should_stop=lambda: True) in (None, 1)  # fewer than 1,024 entries: never asked
    gen = hooks.rebuild()
    assert gen is not None and gen >= 1 and not hooks.stale()
    hits = bm25.get().search("forfait mensuel", 5, frozenset({ALICE}))
    assert hits and {h.collection for h in hits} == {DOCS}
    assert bm25.get().search("forfait mensuel", 5, frozenset({BOB})) == []  # the rights mask travels with it

    in_store = KeywordHooks(store, bm25, in_store=True)  # the store keeps BM25 itself: an empty snapshot
    gen2 = in_store.rebuild()
    assert gen2 == gen + 1 and bm25.get().search("forfait mensuel", 5, frozenset({ALICE})) == []


# ---------------------------------------------------------------------------------- composition


def test_the_engine_is_its_parts_over_one_acl_writer(store: EdgeStore, state: StateDB, tmp_path: Path) -> None:
    from ancre.config import Settings

    settings = Settings(data_dir=tmp_path, sources=[])
    writer = AclWriter(store, state)
    engine = SyncEngine(settings, store, HashEmbedder(), state, Bm25Manager(tmp_path / "bm25"), InProcess(), acl_writer=writer)
    assert engine.planner.acls is engine.writer.acls is engine.rights.acls
    assert engine.planner.acls.writer is engine.writer.writer is engine.rights.writer is writer
    assert engine.planner.fetcher is engine.fetcher
    with pytest.raises(ValueError, match="read-only"):
        SyncEngine(settings, store, HashEmbedder(), state, Bm25Manager(tmp_path / "b"), InProcess(),
                   acl_writer=AclWriter(store, state, read_only=True))


def test_parts_share_no_private_state() -> None:
    """No part reaches into another's private attributes, and none inherits from another: the
    engine is composed, not mixed."""
    import ast
    import inspect

    import ancre.daemon.sync as sync_pkg

    folder = Path(inspect.getfile(sync_pkg)).parent
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                assert not node.bases or all(isinstance(b, ast.Name) and b.id in {"NamedTuple", "Protocol", "StrEnum"} for b in node.bases), (
                    f"{path.name}: class {node.name} inherits from {[ast.unparse(b) for b in node.bases]}"
                )
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id in {"self", "cls"}, (
                    f"{path.name}:{node.lineno}: {ast.unparse(node)} reaches into another object's private state"
                )
