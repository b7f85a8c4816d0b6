"""The contract every connector honours (:class:`ancre.connectors.base.Connector`), run against each
source kind's harness (conftest.py): listing complete and stable, versions that follow content,
deletions, ACL-only changes, unreadable ACLs as *nobody*, odd names, an unreachable source
that is never an empty one, and the change feed the daemon runs on it (its own, or the
snapshot-diff poller): a baseline without events and a cursor that survives a JSON round trip."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from support.source_harness import SourceHarness

from ancre.acl.engine import acl_problem
from ancre.connectors.base import ChangeFeed, Connector, Listing
from ancre.connectors.poller import SnapshotDiffPoller
from ancre.errors import SourceUnavailableError
from ancre.models import AUTHENTICATED_USERS, EVERYONE, ChangeKind, SourceItem

FILES = {
    "a.txt": b"alpha",
    "docs/b.md": b"# bravo\n",
    "docs/deep/c.csv": b"x,y\n1,2\n",
}
ODD_NAMES = [
    unicodedata.normalize("NFC", "accents/Résumé é.txt"),
    unicodedata.normalize("NFD", "accents/Procès-verbal à.txt"),
    "spaces/a file  with spaces .txt",
    "signs/50% #1 (copie).txt",
]


def version(item: SourceItem) -> tuple[object, ...]:
    """What tells a sync that an item's content may have changed."""
    return (item.native_id, item.size, item.mtime, item.etag)


def listing(conn: Connector) -> dict[str, SourceItem]:
    out = conn.list_items()
    assert isinstance(out, Listing), "list_items returns a Listing (items and unreachable parts)"
    items = list(out.items)
    paths = [i.path for i in items]
    assert len(paths) == len(set(paths)), "a path is listed twice"
    return {i.path: i for i in items}


def populate(h: SourceHarness) -> None:
    for name, data in FILES.items():
        h.write(name, data)


def test_empty_tree_lists_nothing_without_error(source: SourceHarness) -> None:
    assert listing(source.connector) == {}
    assert source.connector.get_item(source.path("absent.txt")) is None


def test_listing_is_complete_and_stable(source: SourceHarness) -> None:
    populate(source)
    conn = source.connector
    first = listing(conn)
    assert set(first) == {source.path(n) for n in FILES}
    assert listing(conn) == first
    for path, item in first.items():
        assert item.source == conn.source_id and item.skip is None
        assert conn.get_item(path) == item
    by_path = {source.path(n): data for n, data in FILES.items()}
    for path, item in first.items():
        assert item.size == len(by_path[path])
        assert conn.fetch_content(item) == by_path[path]


def test_a_changed_file_changes_its_version(source: SourceHarness) -> None:
    populate(source)
    conn = source.connector
    path = source.path("docs/b.md")
    before = conn.get_item(path)
    assert before is not None
    source.write("docs/b.md", b"# bravo, rewritten\n")
    after = conn.get_item(path)
    assert after is not None and version(after) != version(before)
    assert listing(conn)[path] == after
    assert conn.fetch_content(after) == b"# bravo, rewritten\n"
    # the others did not move
    other = source.path("a.txt")
    assert conn.get_item(other) == listing(conn)[other]


def test_a_deleted_file_disappears(source: SourceHarness) -> None:
    populate(source)
    conn = source.connector
    path = source.path("docs/deep/c.csv")
    item = conn.get_item(path)
    assert item is not None
    source.delete("docs/deep/c.csv")
    assert path not in listing(conn)
    assert conn.get_item(path) is None
    assert path not in conn.read_acls([path])
    with pytest.raises(OSError):
        conn.fetch_content(item)


def test_an_acl_only_change_is_reported_as_such(source: SourceHarness) -> None:
    populate(source)
    conn = source.connector
    path = source.path("a.txt")
    item = conn.get_item(path)
    assert item is not None
    acl = conn.fetch_acl(item)
    assert acl.allow and acl_problem(acl) is None, acl
    assert conn.read_acls([path]) == {path: acl}
    source.change_acl("a.txt")
    again = conn.get_item(path)
    assert again is not None and version(again) == version(item), "an ACL change is not a content change"
    changed = conn.fetch_acl(again)
    assert changed.digest() != acl.digest() and changed.allow > acl.allow, (acl, changed)
    assert conn.read_acls([path]) == {path: changed}
    # the neighbours keep theirs
    other = conn.get_item(source.path("docs/b.md"))
    assert other is not None and conn.fetch_acl(other) == acl


def test_an_unreadable_acl_is_nobody(source: SourceHarness) -> None:
    populate(source)
    conn = source.connector
    path = source.path("docs/b.md")
    source.break_acl("docs/b.md")
    item = conn.get_item(path)
    assert item is not None
    acl = conn.fetch_acl(item)
    assert acl.allow == frozenset() and acl_problem(acl) is not None, acl
    assert not acl.readable_by(frozenset({EVERYONE, AUTHENTICATED_USERS}))
    assert conn.read_acls([path]) == {path: acl}


@pytest.mark.parametrize("name", ODD_NAMES, ids=["nfc", "nfd", "spaces", "percent-hash"])
def test_odd_names_round_trip(source: SourceHarness, name: str) -> None:
    data = f"contenu de {name}".encode()
    source.write(name, data)
    conn = source.connector
    path = source.path(name)
    assert path == unicodedata.normalize("NFC", path)
    assert set(listing(conn)) == {path}
    item = conn.get_item(path)
    assert item is not None and item.path == path
    assert conn.fetch_content(item) == data
    assert conn.fetch_acl(item).allow
    assert set(conn.read_acls([path])) == {path}


def test_a_250_character_path_round_trips(source: SourceHarness) -> None:
    stem = "long/" + "d" * 100 + "/"
    fill = 250 - len(source.path(stem + ".txt"))
    name = stem + "e" * fill + ".txt"
    path = source.path(name)
    assert len(path) == 250
    source.write(name, b"long")
    conn = source.connector
    assert set(listing(conn)) == {path}
    item = conn.get_item(path)
    assert item is not None and conn.fetch_content(item) == b"long"


def test_an_unreachable_source_raises_never_lists_empty(source: SourceHarness) -> None:
    populate(source)
    conn = source.connector
    item = conn.get_item(source.path("a.txt"))
    assert item is not None
    with source.unreachable():
        with pytest.raises(SourceUnavailableError):
            list(conn.list_items())
        with pytest.raises(SourceUnavailableError):
            conn.get_item(source.path("a.txt"))
        with pytest.raises(SourceUnavailableError):
            conn.read_acls([source.path("a.txt")])
    # back: the same listing as before
    assert set(listing(conn)) == {source.path(n) for n in FILES}


def change_feed(conn: Connector) -> ChangeFeed[Any]:
    """How the daemon asks ``conn`` for its changes when it has no push: its own change feed, else
    the snapshot-diff poller over its listing."""
    return conn if isinstance(conn, ChangeFeed) else SnapshotDiffPoller(conn, 1.0)


def test_the_change_feed_baseline_and_its_cursor_round_trip(source: SourceHarness) -> None:
    populate(source)
    feed = change_feed(source.connector)
    base = feed.changes(None)
    assert base.events == (), "no cursor yet: a baseline, no event (the startup pass covers the rest)"
    assert isinstance(base.cursor, feed.cursor_type)
    kept = feed.cursor_type.model_validate_json(base.cursor.model_dump_json())
    assert kept == base.cursor, "the engine keeps the cursor as JSON: it must come back equal"
    source.write("docs/new.txt", b"nouveau")
    batch = feed.changes(kept)
    new = source.path("docs/new.txt")
    assert any(e.path == new and e.kind != ChangeKind.DELETED for e in batch.events) or any(
        e.kind == ChangeKind.RESCAN for e in batch.events
    ), batch.events
    assert not any(e.kind == ChangeKind.DELETED for e in batch.events), batch.events
    again = feed.cursor_type.model_validate_json(batch.cursor.model_dump_json())
    with source.unreachable(), pytest.raises(SourceUnavailableError):
        feed.changes(again)
