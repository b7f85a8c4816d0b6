"""The daemon status's document counts (:meth:`ProgressBook.doc_counts`) never keep rows a task
removed (issue 46): a status thread that read the state DB just before a purge, and stored its
counts just after the purge was recorded, used to cache the purged rows until the next task —
`test_daemon.py::test_events_signals_notify_and_restart` then saw ``{'indexed': 10}`` instead of 6
after a folder moved out of the tree."""

from __future__ import annotations

import threading
from pathlib import Path

from ancre.daemon.metrics import DaemonMetrics
from ancre.daemon.progress import ProgressBook
from ancre.daemon.sync import PassReport
from ancre.index.state import ItemState, StateDB
from ancre.models import ItemStatus, PassScope


def _row(path: str) -> ItemState:
    return ItemState(
        source="t", native_id=path, path=path, doc_id=path, collection="documents", size=1, mtime=0.0, etag=None,
        content_hash="h", acl_hash="a", chunk_count=1, status=ItemStatus.INDEXED, updated_at=0.0,
    )


class _SlowReader:
    """A state DB whose first ``all_items`` returns its rows, then waits for ``release`` before
    handing them back: the status thread is descheduled between its read and its cache store."""

    def __init__(self, state: StateDB) -> None:
        self.state = state
        self.read = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def all_items(self) -> list[ItemState]:
        rows = self.state.all_items()
        self.calls += 1
        if self.calls == 1:
            self.read.set()
            assert self.release.wait(10)
        return rows


def test_counts_read_before_a_purge_are_not_cached_after_it(tmp_path: Path) -> None:
    state = StateDB(tmp_path / "state.sqlite3")
    for p in ("docs/a.txt", "projets/p1.txt", "projets/p2.txt"):
        state.put(_row(p))
    book = ProgressBook(DaemonMetrics())
    slow = _SlowReader(state)
    seen: list[dict[str, object]] = []
    status_thread = threading.Thread(target=lambda: seen.append(book.doc_counts(slow)))  # type: ignore[arg-type]
    status_thread.start()
    assert slow.read.wait(10)  # the status thread has read three rows
    state.delete("t", "projets/p1.txt")  # the content lane purges a folder moved out …
    state.delete("t", "projets/p2.txt")
    book.record(PassReport(source="t", scope=PassScope.PATHS, deleted=2), "event")  # … and records the batch
    slow.release.set()
    status_thread.join(10)
    assert seen[0]["documents"] == {"t": {"indexed": 3}}  # what that thread read, for that one status
    assert book.doc_counts(slow)["documents"] == {"t": {"indexed": 1}}, "the purged rows must not stay in the status"
    state.close()
