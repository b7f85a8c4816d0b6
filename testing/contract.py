"""The source contract, one mixin per capability: what every connector honours
(:class:`ancre.connectors.base.Connector` and its optional capabilities), as pytest test methods.

A source kind's test module subclasses the mixins of the capabilities it has and provides the
``harness`` fixture (a :class:`~ancre.testing.harness.SourceHarness`; an
:class:`~ancre.testing.harness.AclHarness` for :class:`AclContract`)::

    class TestMySource(SourceContract):          # or e.g. ListingContract, ContentContract, ...
        @pytest.fixture
        def harness(self, tmp_path):
            return MyHarness(tmp_path)

- :class:`ListingContract` — a complete and stable :class:`~ancre.connectors.base.Listing`,
  versions that follow content, deletions, odd names, long paths, an unreachable source that
  raises and is never an empty one;
- :class:`ContentContract` — ``fetch_content`` gives the file's bytes, the new ones after a
  change, ``OSError`` once it is gone;
- :class:`AclContract` — every file readable by someone, an ACL-only change that is not a
  content change, an unreadable ACL that admits nobody;
- :class:`LiveRightsContract` — ``read_acls`` (and ``read_acls_by_id`` when the connector is
  :class:`~ancre.connectors.base.AclsByNativeId`) answers from the source now, as ``fetch_acl``;
- :class:`ChangeFeedContract` — the change feed the daemon runs (the connector's own, else the
  snapshot-diff poller): a baseline without events, a cursor that survives a JSON round trip, and
  a feed that resumes from that cursor alone once the connector's own files are gone (or asks
  for a rescan, saying why);
- :class:`SourceContract` — all five.

pytest is imported only inside the tests (``ancre.testing`` imports without it: pytest is not
a dependency of ancre). docs/ARCHITECTURE.md "Adding a source".
"""

from __future__ import annotations

import unicodedata
from contextlib import AbstractContextManager
from typing import Any

from ancre.acl.engine import acl_problem
from ancre.connectors.base import AclsByNativeId, ChangeEvent, ChangeFeed, Connector, Listing
from ancre.connectors.poller import SnapshotDiffPoller
from ancre.errors import SourceUnavailableError
from ancre.models import AUTHENTICATED_USERS, EVERYONE, ChangeKind, SourceItem, nfc
from ancre.testing.harness import AclHarness, SourceHarness

FILES = {
    "a.txt": b"alpha",
    "docs/b.md": b"# bravo\n",
    "docs/deep/c.csv": b"x,y\n1,2\n",
}
"""The small tree most contract tests start from (name → bytes)."""

ODD_NAMES = (
    nfc("accents/Résumé é.txt"),
    unicodedata.normalize("NFD", "accents/Procès-verbal à.txt"),
    "spaces/a file  with spaces .txt",
    "signs/50% #1 (copie).txt",
)
"""Names a source must carry through unchanged but for NFC: accents composed and decomposed,
double and trailing spaces, ``%``, ``#`` and parentheses."""


def _raises(exc: type[BaseException]) -> AbstractContextManager[Any]:
    """``pytest.raises(exc)``, pytest imported only when a test runs."""
    import pytest

    return pytest.raises(exc)


def version(item: SourceItem) -> tuple[object, ...]:
    """What tells a sync that an item's content may have changed."""
    return (item.native_id, item.size, item.mtime, item.etag)


def listing(conn: Connector) -> dict[str, SourceItem]:
    """``conn``'s listing by path, checked to be a :class:`Listing` naming each path once."""
    out = conn.list_items()
    assert isinstance(out, Listing), "list_items returns a Listing (items and unreachable parts)"
    paths = [i.path for i in out.items]
    assert len(paths) == len(set(paths)), "a path is listed twice"
    return {i.path: i for i in out.items}


def populate(h: SourceHarness) -> dict[str, bytes]:
    """Write :data:`FILES`; ``{connector path: bytes}``."""
    for name, data in FILES.items():
        h.write(name, data)
    return {h.path(n): data for n, data in FILES.items()}


def populated_item(h: SourceHarness, name: str) -> tuple[Connector, str, SourceItem]:
    """:func:`populate`, then ``(connector, path, item)`` of the tree's ``name`` (checked listed)."""
    populate(h)
    path = h.path(name)
    item = h.connector.get_item(path)
    assert item is not None, f"{path} is not listed"
    return h.connector, path, item


def change_feed(conn: Connector) -> ChangeFeed[Any]:
    """How the daemon asks ``conn`` for its changes when it has no push: its own change feed, else
    the snapshot-diff poller over its listing."""
    return conn if isinstance(conn, ChangeFeed) else SnapshotDiffPoller(conn, 1.0)


class ListingContract:
    """``list_items`` and ``get_item`` (every connector)."""

    def test_empty_tree_lists_nothing_without_error(self, harness: SourceHarness) -> None:
        assert listing(harness.connector) == {}
        assert harness.connector.get_item(harness.path("absent.txt")) is None

    def test_listing_is_complete_and_stable(self, harness: SourceHarness) -> None:
        sizes = {p: len(d) for p, d in populate(harness).items()}
        conn = harness.connector
        first = listing(conn)
        assert set(first) == set(sizes)
        assert listing(conn) == first, "two listings of an unchanged tree are equal"
        for path, item in first.items():
            assert item.source == conn.source_id and item.skip is None and item.size == sizes[path]
            assert conn.get_item(path) == item

    def test_a_changed_file_changes_its_version(self, harness: SourceHarness) -> None:
        conn, path, before = populated_item(harness, "docs/b.md")
        harness.write("docs/b.md", b"# bravo, rewritten\n")
        after = conn.get_item(path)
        assert after is not None and version(after) != version(before)
        assert listing(conn)[path] == after
        other = harness.path("a.txt")
        assert conn.get_item(other) == listing(conn)[other], "the others did not move"

    def test_a_deleted_file_disappears(self, harness: SourceHarness) -> None:
        conn, path, _ = populated_item(harness, "docs/deep/c.csv")
        harness.delete("docs/deep/c.csv")
        assert path not in listing(conn)
        assert conn.get_item(path) is None

    def test_odd_names_round_trip(self, harness: SourceHarness) -> None:
        for name in ODD_NAMES:
            harness.write(name, f"contenu de {name}".encode())
        conn = harness.connector
        paths = {harness.path(n) for n in ODD_NAMES}
        assert all(p == nfc(p) for p in paths), "paths are NFC"
        assert set(listing(conn)) == paths
        for path in paths:
            item = conn.get_item(path)
            assert item is not None and item.path == path, path

    def test_a_250_character_path_round_trips(self, harness: SourceHarness) -> None:
        stem = "long/" + "d" * 100 + "/"
        name = stem + "e" * (250 - len(harness.path(stem + ".txt"))) + ".txt"
        path = harness.path(name)
        assert len(path) == 250
        harness.write(name, b"long")
        assert set(listing(harness.connector)) == {path}
        assert harness.connector.get_item(path) is not None

    def test_an_unreachable_source_raises_never_lists_empty(self, harness: SourceHarness) -> None:
        expected = set(populate(harness))
        conn = harness.connector
        assert conn.get_item(harness.path("a.txt")) is not None
        with harness.unreachable():
            with _raises(SourceUnavailableError):
                conn.list_items()
            with _raises(SourceUnavailableError):
                conn.get_item(harness.path("a.txt"))
        assert set(listing(conn)) == expected, "back: the same listing as before"


class ContentContract:
    """``fetch_content`` (every connector)."""

    def test_content_is_the_files_bytes(self, harness: SourceHarness) -> None:
        expected = populate(harness)
        for path, item in listing(harness.connector).items():
            assert harness.connector.fetch_content(item) == expected[path], path

    def test_a_changed_file_gives_its_new_bytes(self, harness: SourceHarness) -> None:
        populate(harness)
        harness.write("docs/b.md", b"# bravo, rewritten\n")
        item = harness.connector.get_item(harness.path("docs/b.md"))
        assert item is not None and harness.connector.fetch_content(item) == b"# bravo, rewritten\n"

    def test_a_deleted_file_cant_be_read(self, harness: SourceHarness) -> None:
        _, _, item = populated_item(harness, "docs/deep/c.csv")
        harness.delete("docs/deep/c.csv")
        with _raises(OSError):
            harness.connector.fetch_content(item)

    def test_odd_names_are_read(self, harness: SourceHarness) -> None:
        for name in ODD_NAMES:
            harness.write(name, f"contenu de {name}".encode())
        for name in ODD_NAMES:
            item = harness.connector.get_item(harness.path(name))
            assert item is not None and harness.connector.fetch_content(item) == f"contenu de {name}".encode(), name


class AclContract:
    """``fetch_acl`` and rights that change apart from content (a connector whose harness is an
    :class:`~ancre.testing.harness.AclHarness`)."""

    def test_every_file_is_readable_by_someone(self, harness: AclHarness) -> None:
        populate(harness)
        for path, item in listing(harness.connector).items():
            acl = harness.connector.fetch_acl(item)
            assert acl.allow and acl_problem(acl) is None, (path, acl)

    def test_an_acl_only_change_is_reported_as_such(self, harness: AclHarness) -> None:
        conn, path, item = populated_item(harness, "a.txt")
        acl = conn.fetch_acl(item)
        harness.change_acl("a.txt")
        again = conn.get_item(path)
        assert again is not None and version(again) == version(item), "an ACL change is not a content change"
        changed = conn.fetch_acl(again)
        assert changed.digest() != acl.digest() and changed.allow > acl.allow, (acl, changed)
        assert conn.read_acls([path]) == {path: changed}
        other = conn.get_item(harness.path("docs/b.md"))
        assert other is not None and conn.fetch_acl(other) == acl, "the neighbours keep theirs"

    def test_an_unreadable_acl_is_nobody(self, harness: AclHarness) -> None:
        conn, path, _ = populated_item(harness, "docs/b.md")
        harness.break_acl("docs/b.md")
        item = conn.get_item(path)
        assert item is not None
        acl = conn.fetch_acl(item)
        assert acl.allow == frozenset() and acl_problem(acl) is not None, acl
        assert not acl.readable_by(frozenset({EVERYONE, AUTHENTICATED_USERS}))
        assert conn.read_acls([path]) == {path: acl}


class LiveRightsContract:
    """``read_acls`` — the query-time check of rights, read from the source now — and, for an
    :class:`~ancre.connectors.base.AclsByNativeId` connector, ``read_acls_by_id``; of paths the
    connector listed (the live check reads what a sync indexed)."""

    def test_live_rights_are_those_a_sync_reads(self, harness: SourceHarness) -> None:
        populate(harness)
        conn = harness.connector
        items = listing(conn)
        live = conn.read_acls(list(items))
        assert live == {p: conn.fetch_acl(it) for p, it in items.items()}
        if isinstance(conn, AclsByNativeId):
            by_id = conn.read_acls_by_id([it.native_id for it in items.values()])
            assert by_id == {it.native_id: live[p] for p, it in items.items()}

    def test_a_path_gone_is_left_out(self, harness: SourceHarness) -> None:
        conn, gone, item = populated_item(harness, "docs/deep/c.csv")
        kept = harness.path("a.txt")
        harness.delete("docs/deep/c.csv")
        assert set(conn.read_acls([gone, kept, harness.path("never.txt")])) == {kept}
        if isinstance(conn, AclsByNativeId):
            assert conn.read_acls_by_id([item.native_id]) == {}

    def test_odd_names_have_live_rights(self, harness: SourceHarness) -> None:
        for name in ODD_NAMES:
            harness.write(name, b"x")
        paths = [harness.path(n) for n in ODD_NAMES]
        assert set(listing(harness.connector)) == set(paths)  # the live check reads what a sync indexed
        assert set(harness.connector.read_acls(paths)) == set(paths)

    def test_an_unreachable_source_raises(self, harness: SourceHarness) -> None:
        populate(harness)
        listing(harness.connector)
        with harness.unreachable(), _raises(SourceUnavailableError):
            harness.connector.read_acls([harness.path("a.txt")])


def _names(events: tuple[ChangeEvent, ...]) -> set[tuple[str | None, ChangeKind]]:
    return {(e.path, e.kind) for e in events}


class ChangeFeedContract:
    """The change feed the daemon runs on the source (its own, else the snapshot-diff poller,
    :func:`change_feed`), with the cursor the engine keeps as JSON between calls."""

    def test_the_baseline_has_no_event_and_its_cursor_round_trips(self, harness: SourceHarness) -> None:
        populate(harness)
        feed = change_feed(harness.connector)
        base = feed.changes(None)
        assert base.events == (), "no cursor yet: a baseline, no event (the startup pass covers the rest)"
        assert isinstance(base.cursor, feed.cursor_type)
        kept = feed.cursor_type.model_validate_json(base.cursor.model_dump_json())
        assert kept == base.cursor, "the engine keeps the cursor as JSON: it must come back equal"
        assert feed.changes(kept).events == (), "nothing changed: no event"

    def test_a_new_file_is_an_event_and_nothing_is_deleted(self, harness: SourceHarness) -> None:
        populate(harness)
        feed = change_feed(harness.connector)
        cursor = feed.changes(None).cursor
        harness.write("docs/new.txt", b"nouveau")
        batch = feed.changes(cursor)
        new = harness.path("docs/new.txt")
        assert any(e.path == new and e.kind != ChangeKind.DELETED for e in batch.events) or any(
            e.kind == ChangeKind.RESCAN for e in batch.events
        ), batch.events
        assert not any(e.kind == ChangeKind.DELETED for e in batch.events), batch.events

    def test_the_feed_resumes_from_the_engines_cursor_alone(self, harness: SourceHarness) -> None:
        """Between two rounds the connector is rebuilt without any file of its own: the round
        resumes from the cursor the engine kept — every change since is reported — or asks for a
        rescan and says why."""
        populate(harness)
        cursor = change_feed(harness.connector).changes(None).cursor
        kept = cursor.model_dump_json()
        harness.write("docs/after.txt", b"apres")
        harness.delete("docs/deep/c.csv")
        feed = change_feed(harness.reopen())
        batch = feed.changes(feed.cursor_type.model_validate_json(kept))
        rescans = [e for e in batch.events if e.kind == ChangeKind.RESCAN]
        assert all(e.reason for e in rescans), f"a rescan says why: {rescans}"
        got = _names(batch.events)
        assert rescans or any(p == harness.path("docs/after.txt") for p, k in got if k != ChangeKind.DELETED), got
        assert rescans or (harness.path("docs/deep/c.csv"), ChangeKind.DELETED) in got, got
        assert not any(p == harness.path("a.txt") for p, _ in got), f"an unchanged file is no event: {got}"
        assert change_feed(harness.connector).changes(batch.cursor).events == (), "resumed: the next round is quiet"

    def test_an_unreachable_source_raises_and_keeps_the_cursor_usable(self, harness: SourceHarness) -> None:
        populate(harness)
        feed = change_feed(harness.connector)
        cursor = feed.changes(None).cursor
        with harness.unreachable(), _raises(SourceUnavailableError):
            feed.changes(cursor)
        assert feed.changes(cursor).events == (), "the same cursor works once the source is back"


class SourceContract(ListingContract, ContentContract, AclContract, LiveRightsContract, ChangeFeedContract):
    """Every capability's contract (the ``harness`` fixture must give an
    :class:`~ancre.testing.harness.AclHarness`)."""


__all__ = [
    "FILES",
    "ODD_NAMES",
    "AclContract",
    "ChangeFeedContract",
    "ContentContract",
    "ListingContract",
    "LiveRightsContract",
    "SourceContract",
    "change_feed",
    "listing",
    "populate",
    "populated_item",
    "version",
]
