"""Change feeds: the snapshot-diff poller (against a reference model, hypothesis), the cursors the
engine keeps (index/cursors.py), the daemon's feed runner and the order in which the daemon
picks a source's event source (push > change feed > local tree > poller)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ancre.connectors.base import ChangeBatch, ChangeEvent, ChangeFeed, Listing, Unreachable
from ancre.connectors.folder import FolderConnector
from ancre.connectors.poller import SnapshotCursor, SnapshotDiffPoller, Version, diff_listings, under
from ancre.daemon.queue import ChangeQueue
from ancre.daemon.watch import ConnectorWatcher, FeedRunner, FolderWatcher
from ancre.daemon.wiring import make_watcher
from ancre.errors import SourceUnavailableError
from ancre.index.cursors import CursorStore, cursor_kind
from ancre.models import Acl, ChangeKind, SourceItem
from ancre.settings.sources import FolderSourceConfig

PATHS = st.sampled_from(["a.txt", "b.txt", "d/c.txt", "d/e/f.txt", "d/e/g.txt", "x/y.txt", "de.txt"])
FOLDERS = st.sampled_from(["d", "d/e", "x", "de", "zz"])
VERSIONS = st.builds(Version, st.sampled_from(["1", "2"]), st.integers(0, 2), st.sampled_from([1.0, 2.0]),
                     st.sampled_from([None, "e1"]), st.sampled_from([None, "symlink"]))
LISTINGS = st.dictionaries(PATHS, VERSIONS, max_size=7)


def apply(replica: dict[str, Version], events: Sequence[ChangeEvent], truth: Mapping[str, Version]) -> dict[str, Version]:
    """The reference model of a consumer: each event re-reads its path from the source now
    (``truth``), as the sync engine's ``get_item`` does."""
    out = dict(replica)
    for ev in events:
        assert ev.path is not None and ev.kind in (ChangeKind.CREATED, ChangeKind.MODIFIED, ChangeKind.DELETED)
        if ev.kind == ChangeKind.DELETED:
            assert ev.path in out and ev.path not in truth
            del out[ev.path]
        else:
            assert ev.path in truth
            out[ev.path] = truth[ev.path]
    return out


@settings(max_examples=300, deadline=None)
@given(before=LISTINGS, after=LISTINGS, down=st.lists(FOLDERS, max_size=2, unique=True))
def test_the_events_transform_before_into_after(before: dict[str, Version], after: dict[str, Version], down: list[str]) -> None:
    unreachable = tuple(down)
    after = {p: v for p, v in after.items() if not under(p, unreachable)}  # a listing leaves those out
    events, kept = diff_listings("s", before, after, unreachable)
    replica = apply(before, events, after)
    expected = after | {p: v for p, v in before.items() if under(p, unreachable) and p not in after}
    assert replica == kept == expected
    assert not any(ev.kind == ChangeKind.DELETED and under(ev.path or "", unreachable) for ev in events), "no deletion under an outage"
    touched = [ev.path for ev in events]
    assert len(touched) == len(set(touched)), "one event per path"
    assert set(touched) == {p for p in set(before) | set(after) if (before.get(p) != after.get(p) and p in after) or
                            (p in before and p not in after and not under(p, unreachable))}, "events only where something changed"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(LISTINGS, st.lists(FOLDERS, max_size=2, unique=True)), min_size=1, max_size=6))
def test_a_replica_fed_by_the_poller_follows_the_source(steps: list[tuple[dict[str, Version], list[str]]]) -> None:
    conn = _Scripted()
    poller = SnapshotDiffPoller(conn, 1.0)
    conn.now, conn.down = {}, ()
    cursor = poller.changes(None).cursor
    replica: dict[str, Version] = {}
    for listing, down in steps:
        conn.down = tuple(down)
        conn.now = {p: v for p, v in listing.items() if not under(p, conn.down)}
        batch = poller.changes(cursor)
        replica = apply(replica, batch.events, conn.now)
        cursor = SnapshotCursor.model_validate_json(batch.cursor.model_dump_json())  # as the engine keeps it
        reachable = {p: v for p, v in replica.items() if not under(p, conn.down)}
        assert reachable == conn.now


class _Scripted:
    """A connector whose listing is ``now`` (path → version) with ``down`` unreachable."""

    source_id = "s"
    collection = "documents"

    def __init__(self) -> None:
        self.now: dict[str, Version] = {}
        self.down: tuple[str, ...] = ()
        self.fail = False

    def list_items(self) -> Listing:
        if self.fail:
            raise SourceUnavailableError("down")
        items = tuple(SourceItem("s", v.native_id, p, v.size, v.mtime, v.etag, v.skip) for p, v in sorted(self.now.items()))
        return Listing(items, tuple(Unreachable(p, "DFS target down") for p in self.down))

    def get_item(self, path: str) -> SourceItem | None:
        return None

    def fetch_content(self, item: SourceItem) -> bytes:
        return b""

    def fetch_acl(self, item: SourceItem) -> Acl:
        return Acl.nobody("test")

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        return {}

    def location(self, item: SourceItem) -> str:
        return ""

    def collection_for(self, item: SourceItem) -> str:
        return "documents"


def test_the_poller_baseline_has_no_event_and_an_outage_raises() -> None:
    conn = _Scripted()
    conn.now = {"a.txt": Version("1", 1, 1.0, None, None)}
    poller = SnapshotDiffPoller(conn, 2.5)
    assert isinstance(poller, ChangeFeed) and poller.poll_interval_s == 2.5
    base = poller.changes(None)
    assert base.events == () and base.cursor.items == conn.now
    conn.fail = True
    with pytest.raises(SourceUnavailableError):
        poller.changes(base.cursor)
    conn.fail = False
    conn.now = {}
    assert [(e.path, e.kind) for e in poller.changes(base.cursor).events] == [("a.txt", ChangeKind.DELETED)]


# ------------------------------------------------------------------------------------ cursors
class _Delta(BaseModel):
    link: str


def test_cursors_round_trip_and_a_stale_one_is_dropped(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite3"
    store = CursorStore(db)
    assert store.load("sp", _Delta) is None
    store.save("sp", _Delta(link="https://graph/delta?token=1"))
    again = CursorStore(db)  # another connection to the same file: persisted
    assert again.load("sp", _Delta) == _Delta(link="https://graph/delta?token=1")
    row = again.get("sp")
    assert row is not None and row.kind == cursor_kind(_Delta) and row.updated_at > 0
    # a cursor of another model (the source changed kind) is dropped, the feed called with None
    assert again.load("sp", SnapshotCursor) is None and again.get("sp") is None
    again.set("sp", cursor_kind(_Delta), '{"nope": 1}')
    assert again.load("sp", _Delta) is None and again.sources() == []
    again.save("a", _Delta(link="x"))
    again.delete("a")
    assert again.get("a") is None
    store.close()
    again.close()


# ------------------------------------------------------------------------------------- runner
class _Feed:
    """A change feed scripted by ``answers`` (a batch, or an exception to raise)."""

    cursor_type = _Delta
    poll_interval_s = 0.05

    def __init__(self, answers: list[ChangeBatch[_Delta] | Exception]) -> None:
        self.answers = answers
        self.seen: list[_Delta | None] = []
        self.called = threading.Event()

    def changes(self, cursor: _Delta | None) -> ChangeBatch[_Delta]:
        self.seen.append(cursor)
        answer = self.answers.pop(0) if self.answers else ChangeBatch((), cursor or _Delta(link="0"))
        self.called.set()
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_the_runner_queues_events_and_keeps_the_cursor_after(tmp_path: Path) -> None:
    cursors = CursorStore(tmp_path / "state.sqlite3")
    cursors.save("s", _Delta(link="1"))
    ev = ChangeEvent("s", "a.txt", ChangeKind.CREATED)
    feed = _Feed([
        ChangeBatch((ev,), _Delta(link="2")),
        SourceUnavailableError("503"),
        RuntimeError("boom"),
        ChangeBatch((), _Delta(link="3")),
    ])
    queue = ChangeQueue(debounce_s=0, max_delay_s=1, queue_max=10, batch_max=10)
    seen_at_queue: list[_Delta | None] = []

    def on_change(e: ChangeEvent) -> None:
        seen_at_queue.append(cursors.load("s", _Delta))  # queued before the cursor moves
        queue.add_event(e)

    r = FeedRunner("s", feed, cursors, on_change)
    assert r.poll_once() and seen_at_queue == [_Delta(link="1")] and cursors.load("s", _Delta) == _Delta(link="2")
    assert queue.pending() == 1
    assert not r.poll_once() and r.effective_mode == "down"
    assert cursors.load("s", _Delta) == _Delta(link="2"), "an outage keeps the cursor"
    assert not r.poll_once()
    assert r.poll_once() and r.effective_mode == "feed"
    assert feed.seen == [_Delta(link="1"), _Delta(link="2"), _Delta(link="2"), _Delta(link="2")]
    assert cursors.load("s", _Delta) == _Delta(link="3")


def test_the_runner_thread_polls_and_stops(tmp_path: Path) -> None:
    cursors = CursorStore(tmp_path / "state.sqlite3")
    feed = _Feed([])
    r = FeedRunner("s", feed, cursors, lambda e: None)
    r.start()
    assert feed.called.wait(5)
    r.stop(timeout=5)
    assert r._thread is not None and not r._thread.is_alive()
    assert feed.seen[0] is None, "no cursor kept yet: the feed takes its baseline"
    assert cursors.load("s", _Delta) == _Delta(link="0")


# --------------------------------------------------------------------------------- precedence
class _Watching(_Scripted):
    def watch(self, on_change: object, stop: threading.Event) -> None:
        stop.wait()


class _Fed(_Scripted):
    cursor_type = _Delta
    poll_interval_s = 1.0

    def changes(self, cursor: _Delta | None) -> ChangeBatch[_Delta]:
        return ChangeBatch((), _Delta(link="x"))


class _FedAndWatching(_Fed, _Watching):
    pass


def test_the_event_source_follows_the_capabilities(tmp_path: Path) -> None:
    cfg = FolderSourceConfig(id="s", root=tmp_path, principals=("sid:S-1-1-0",), poll_interval_s=7.0)
    cursors = CursorStore(tmp_path / "state.sqlite3")

    def pick(conn: object) -> object:
        return make_watcher(cfg, conn, lambda e: None, (), cursors)  # type: ignore[arg-type]

    assert isinstance(pick(_FedAndWatching()), ConnectorWatcher), "push first"
    fed = pick(_Fed())
    assert isinstance(fed, FeedRunner) and fed.effective_mode == "feed" and isinstance(fed.feed, _Fed)
    folder = FolderConnector(cfg, directory=None, ignore=())
    assert isinstance(pick(folder), FolderWatcher), "a local tree keeps watchdog"
    polled = pick(_Scripted())
    assert isinstance(polled, FeedRunner) and isinstance(polled.feed, SnapshotDiffPoller)
    assert polled.effective_mode == "poll" and polled.feed.poll_interval_s == 7.0


def test_the_cursor_of_a_source_no_longer_configured_is_dropped(tmp_path: Path) -> None:
    from ancre.daemon.wiring import start_watchers

    cursors = CursorStore(tmp_path / "state.sqlite3")
    cursors.save("old", _Delta(link="1"))
    cursors.save("s", _Delta(link="2"))
    cfg = FolderSourceConfig(id="s", root=tmp_path, principals=("sid:S-1-1-0",), watch="off")
    assert start_watchers([cfg], {"s": _Fed()}, lambda e: None, (), cursors) == []  # type: ignore[dict-item]
    assert cursors.sources() == ["s"]
