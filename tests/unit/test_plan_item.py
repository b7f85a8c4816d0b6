"""The sync engine's per-item decision (:func:`ancre.daemon.sync.plan.plan_item`) is a pure
function: one table row per branch (the expected decision read from the engine's behaviour before
it was split out of ``SyncEngine._plan_item``), and a property test driving it the way the engine
does (without the ACL, with it, with the content hash) against a small reference model: the old
method's control flow in one piece, its retry rule reading the reason *text* as it did — plus
the one rule added since: an indexed row written in an older chunk format (before subjects and
contextual headers, ``chunking`` ``None``) is read and re-indexed like a changed document."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ancre.daemon.sync.plan import Action, Decision, Limits, plan_item
from ancre.daemon.sync.retries import Failure, RetryPolicy, code_of, failure
from ancre.index.state import ItemState
from ancre.models import CHUNK_FORMAT, ItemStatus, ReasonCode, SourceItem

EXTRACTOR = "7:current"
LIMITS = Limits(max_bytes=2**20, retry=RetryPolicy(max_attempts=3, backoff_s=60.0, extractor=EXTRACTOR))
NOW = 1000.0
DOCS = "documents"


def _item(**kw: Any) -> SourceItem:
    base: dict[str, Any] = {"source": "s", "native_id": "n", "path": "a.md", "size": 10, "mtime": 1.0, "etag": None}
    return SourceItem(**{**base, **kw})


def _prev(**kw: Any) -> ItemState:
    base: dict[str, Any] = {
        "source": "s", "native_id": "n", "path": "a.md", "doc_id": "s:n", "collection": DOCS, "size": 10,
        "mtime": 1.0, "etag": None, "content_hash": "h1", "acl_hash": "a", "chunk_count": 2,
        "status": ItemStatus.INDEXED, "updated_at": 1.0, "extractor": EXTRACTOR, "chunking": CHUNK_FORMAT,
    }
    return ItemState(**{**base, **kw})


def _failed(code: ReasonCode, **kw: Any) -> ItemState:
    status = ItemStatus.SKIPPED if code.is_skip else ItemStatus.FAILED
    return _prev(status=status, reason_code=code, detail="x", chunk_count=0, **kw)


KEEP = Decision(action=Action.KEEP_PROBLEM)
KEEP_TOUCH = Decision(action=Action.KEEP_PROBLEM, touch=True)
ACL_ONLY = Decision(action=Action.ACL_ONLY)
ACL_TOUCH = Decision(action=Action.ACL_ONLY, touch=True)
READ_ACL = Decision(action=Action.READ_ACL)
READ = Decision(action=Action.READ_CONTENT)
REINDEX = Decision(action=Action.REINDEX)
TOUCHED = {"mtime": 2.0}
"""An item whose stat changed since its row was written (its bytes may be the same)."""

# (id, item fields, prev row or None, plan_item keywords, expected decision)
TABLE: list[tuple[str, dict[str, Any], ItemState | None, dict[str, Any], Decision]] = [
    ("link not followed: recorded, never read", {"skip": "symlink"}, _prev(), {"acl_read": False},
     Decision(action=Action.RECORD, failure=Failure(status=ItemStatus.SKIPPED, reason_code=ReasonCode.NOT_READ,
                                                   detail="symlink"))),
    ("new item: ACL first", {}, None, {"acl_read": False}, READ_ACL),
    ("over max_size_mb: skipped too_large", {"size": 2 * 2**20}, _prev(), {"acl_read": True},
     Decision(action=Action.RECORD, failure=Failure(status=ItemStatus.SKIPPED, reason_code=ReasonCode.TOO_LARGE,
                                                   detail="2.0 MiB > sources.s.max_size_mb (1)"))),
    ("new item: content next", {}, None, {"acl_read": True}, READ),
    ("new item, content read: reindex", {}, None, {"acl_read": True, "content_hash": "h1"}, REINDEX),
    ("same stat, indexed: ACL only", {}, _prev(), {"acl_read": True}, ACL_ONLY),
    ("same stat, indexed, --force: content read", {}, _prev(), {"acl_read": True, "force": True}, READ),
    ("same stat, indexed before subjects: content read", {}, _prev(chunking=None), {"acl_read": True}, READ),
    ("same bytes, indexed before subjects: reindexed", {}, _prev(chunking=None),
     {"acl_read": True, "content_hash": "h1"}, REINDEX),
    ("touched, same bytes, indexed in another chunk format: reindexed", TOUCHED, _prev(chunking="subject-0"),
     {"acl_read": True, "content_hash": "h1"}, REINDEX),
    ("same stat, corrupt: kept", {}, _failed(ReasonCode.CORRUPT), {"acl_read": True}, KEEP),
    ("same stat, skipped empty: kept", {}, _failed(ReasonCode.EMPTY), {"acl_read": True}, KEEP),
    ("same stat, timeout in backoff: kept", {}, _failed(ReasonCode.TIMEOUT, attempts=1, retry_at=NOW + 1),
     {"acl_read": True}, KEEP),
    ("same stat, timeout backoff over: retried", {}, _failed(ReasonCode.TIMEOUT, attempts=1, retry_at=NOW - 1),
     {"acl_read": True}, READ),
    ("same stat, crashed, tries used up: kept", {}, _failed(ReasonCode.CRASHED, attempts=3),
     {"acl_read": True}, KEEP),
    ("same stat, skipped by another extractor: retried", {}, _failed(ReasonCode.UNSUPPORTED, extractor="6:old"),
     {"acl_read": True}, READ),
    ("same stat, pending (died half-way): redone", {}, _prev(status=ItemStatus.PENDING), {"acl_read": True}, READ),
    ("renamed, indexed: content read", {"path": "b.md"}, _prev(), {"acl_read": True}, READ),
    ("renamed, same bytes: reindexed (payload follows)", {"path": "b.md"}, _prev(),
     {"acl_read": True, "content_hash": "h1"}, REINDEX),
    ("moved to another collection, same bytes: reindexed", {}, _prev(collection="other"),
     {"acl_read": True, "content_hash": "h1"}, REINDEX),
    ("touched, indexed, same bytes: ACL only with stat", TOUCHED, _prev(), {"acl_read": True, "content_hash": "h1"},
     ACL_TOUCH),
    ("touched, indexed, same bytes, --force: ACL only with stat", TOUCHED, _prev(),
     {"acl_read": True, "content_hash": "h1", "force": True}, ACL_TOUCH),
    ("touched, indexed, new bytes: reindexed", TOUCHED, _prev(), {"acl_read": True, "content_hash": "h2"}, REINDEX),
    ("touched, corrupt, same bytes: kept with stat", TOUCHED, _failed(ReasonCode.CORRUPT),
     {"acl_read": True, "content_hash": "h1"}, KEEP_TOUCH),
    ("touched, corrupt, same bytes, --force: reindexed", TOUCHED, _failed(ReasonCode.CORRUPT),
     {"acl_read": True, "content_hash": "h1", "force": True}, REINDEX),
    ("touched, corrupt, new bytes: reindexed", TOUCHED, _failed(ReasonCode.CORRUPT),
     {"acl_read": True, "content_hash": "h2"}, REINDEX),
    ("pending, same bytes, died half-way 3 times: crashed for good", TOUCHED,
     _prev(status=ItemStatus.PENDING, attempts=3), {"acl_read": True, "content_hash": "h1"},
     Decision(action=Action.RECORD, failure=Failure(
         status=ItemStatus.FAILED, reason_code=ReasonCode.CRASHED, attempts=3,
         detail="indexing stopped half-way 3 times (the process died); tried again when the file changes"))),
    ("pending, same bytes, tries left: reindexed", TOUCHED, _prev(status=ItemStatus.PENDING, attempts=2),
     {"acl_read": True, "content_hash": "h1"}, REINDEX),
]


@pytest.mark.parametrize(("item", "prev", "facts", "expected"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_plan_item_table(item: dict[str, Any], prev: ItemState | None, facts: dict[str, Any], expected: Decision) -> None:
    got = plan_item(_item(**item), prev, collection=DOCS, limits=LIMITS, now=NOW, **facts)
    assert got == expected


def test_table_covers_every_action() -> None:
    assert {row[4].action for row in TABLE} == set(Action)


# ---------------------------------------------------------------------------------------------
def _reference(item: SourceItem, prev: ItemState | None, collection: str, content_hash: str, force: bool) -> tuple[Action, bool, ReasonCode | None]:
    """The former ``SyncEngine._plan_item`` control flow, side effects replaced by the decision
    they made: ``(action, touch, recorded code)``."""

    def may_retry(p: ItemState) -> bool:
        if p.extractor != EXTRACTOR:
            return True
        code = (p.reason or "").split(":", 1)[0]  # how the former code read it: from the text
        return (p.status == ItemStatus.FAILED and code in {"timeout", "crashed", "error"}
                and p.attempts < LIMITS.retry.max_attempts and (p.retry_at or 0.0) <= NOW)

    if item.skip is not None:
        return Action.RECORD, False, ReasonCode.NOT_READ
    same_stat = (prev is not None and prev.size == item.size and prev.mtime == item.mtime and prev.etag == item.etag
                 and prev.collection == collection and prev.path == item.path)
    if item.size > LIMITS.max_bytes:
        return Action.RECORD, False, ReasonCode.TOO_LARGE
    if same_stat and not force and prev is not None:
        if prev.status in (ItemStatus.FAILED, ItemStatus.SKIPPED) and not may_retry(prev):
            return Action.KEEP_PROBLEM, False, None
        if prev.status == ItemStatus.INDEXED and prev.chunking == CHUNK_FORMAT:
            return Action.ACL_ONLY, False, None
    if (prev is not None and prev.status == ItemStatus.INDEXED and prev.content_hash == content_hash
            and prev.collection == collection and prev.path == item.path and prev.chunking == CHUNK_FORMAT):
        return Action.ACL_ONLY, True, None
    same_version = prev is not None and prev.content_hash == content_hash
    if (same_version and prev is not None and not force and prev.status in (ItemStatus.FAILED, ItemStatus.SKIPPED)
            and not may_retry(prev)):
        return Action.KEEP_PROBLEM, True, None
    if same_version and prev is not None and prev.status == ItemStatus.PENDING and prev.attempts >= LIMITS.retry.max_attempts:
        return Action.RECORD, False, ReasonCode.CRASHED
    return Action.REINDEX, False, None


_STORED_CODES = [c for c in ReasonCode if c is not ReasonCode.UNREADABLE]


@st.composite
def _rows(draw: st.DrawFn) -> ItemState | None:
    if draw(st.booleans()):
        return None
    status = draw(st.sampled_from(list(ItemStatus)))
    code = None
    if status in (ItemStatus.FAILED, ItemStatus.SKIPPED):
        code = draw(st.sampled_from([c for c in _STORED_CODES if c.is_skip == (status == ItemStatus.SKIPPED)]))
    return _prev(
        status=status, reason_code=code, detail="detail (try 1 of 3)" if code is not None else None,
        size=draw(st.sampled_from([10, 11])), mtime=draw(st.sampled_from([1.0, 2.0])),
        etag=draw(st.sampled_from([None, "e"])), path=draw(st.sampled_from(["a.md", "b.md"])),
        collection=draw(st.sampled_from([DOCS, "other"])), content_hash=draw(st.sampled_from(["h1", "h2", None])),
        attempts=draw(st.integers(0, 4)), retry_at=draw(st.sampled_from([None, NOW - 1, NOW + 1])),
        extractor=draw(st.sampled_from([EXTRACTOR, "6:old", None])),
        chunking=draw(st.sampled_from([CHUNK_FORMAT, CHUNK_FORMAT, None])),
    )


_items = st.builds(
    _item, size=st.sampled_from([10, 11, 2 * 2**20]), mtime=st.sampled_from([1.0, 2.0]),
    etag=st.sampled_from([None, "e"]), path=st.sampled_from(["a.md", "b.md"]),
    skip=st.sampled_from([None, None, None, "symlink"]),
)


@settings(max_examples=600, deadline=None)
@given(item=_items, prev=_rows(), collection=st.sampled_from([DOCS, "other"]),
       content_hash=st.sampled_from(["h1", "h2"]), force=st.booleans())
def test_plan_item_asked_as_the_engine_does_agrees_with_the_former_method(
    item: SourceItem, prev: ItemState | None, collection: str, content_hash: str, force: bool,
) -> None:
    def ask(**facts: Any) -> Decision:
        return plan_item(item, prev, collection=collection, limits=LIMITS, now=NOW, force=force, **facts)

    d = ask(acl_read=False)
    if d.action is Action.READ_ACL:
        d = ask(acl_read=True)
    if d.action is Action.READ_CONTENT:
        d = ask(acl_read=True, content_hash=content_hash)
    assert d.action not in (Action.READ_ACL, Action.READ_CONTENT)
    assert (d.action, d.touch, d.failure.reason_code if d.failure else None) == _reference(
        item, prev, collection, content_hash, force
    )
    assert ask(acl_read=True, content_hash=content_hash) == ask(acl_read=True, content_hash=content_hash)  # pure


# ---------------------------------------------------------------------------------------------
POLICY = LIMITS.retry


@pytest.mark.parametrize(
    ("code", "detail", "prev", "content_hash", "expected"),
    [
        (ReasonCode.CORRUPT, "bad xref", None, "h1",
         Failure(status=ItemStatus.FAILED, reason_code=ReasonCode.CORRUPT, detail="bad xref")),
        (ReasonCode.ENCRYPTED, None, None, "h1",
         Failure(status=ItemStatus.SKIPPED, reason_code=ReasonCode.ENCRYPTED, detail=None)),
        (ReasonCode.TIMEOUT, "30 s", None, "h1",
         Failure(status=ItemStatus.FAILED, reason_code=ReasonCode.TIMEOUT, detail="30 s (try 1 of 3)", attempts=1,
                 retry_at=NOW + 60.0)),
        (ReasonCode.CRASHED, "killed", _failed(ReasonCode.CRASHED, attempts=1), "h1",
         Failure(status=ItemStatus.FAILED, reason_code=ReasonCode.CRASHED, detail="killed (try 2 of 3)", attempts=2,
                 retry_at=NOW + 120.0)),
        (ReasonCode.CRASHED, "killed", _failed(ReasonCode.CRASHED, attempts=1), "h2",  # a new version: count anew
         Failure(status=ItemStatus.FAILED, reason_code=ReasonCode.CRASHED, detail="killed (try 1 of 3)", attempts=1,
                 retry_at=NOW + 60.0)),
        (ReasonCode.ERROR, None, _failed(ReasonCode.ERROR, attempts=2), "h1",
         Failure(status=ItemStatus.FAILED, reason_code=ReasonCode.ERROR, attempts=3,
                 detail="(gave up after 3 tries; tried again when the file changes)")),
    ],
    ids=["corrupt", "encrypted: skipped", "timeout: first try", "crash: second try", "crash: new version",
         "error: gave up"],
)
def test_failure_bookkeeping(
    code: ReasonCode, detail: str | None, prev: ItemState | None, content_hash: str, expected: Failure,
) -> None:
    got = failure(code, detail, prev, content_hash, POLICY, NOW)
    assert got == expected
    if expected.detail == "(gave up after 3 tries; tried again when the file changes)":
        assert code.text(got.detail) == "error (gave up after 3 tries; tried again when the file changes)"


def test_reason_codes_are_the_stored_strings() -> None:
    assert {c.value for c in ReasonCode} == {
        "corrupt", "encrypted", "empty", "too_large", "unsupported", "no_text_layer", "timeout", "crashed", "error",
        "unreadable", "not_read",
    }
    assert {c for c in ReasonCode if c.is_skip} == {
        ReasonCode.ENCRYPTED, ReasonCode.EMPTY, ReasonCode.TOO_LARGE, ReasonCode.UNSUPPORTED, ReasonCode.NO_TEXT_LAYER,
        ReasonCode.NOT_READ,
    }
    assert code_of("timeout", "") == (ReasonCode.TIMEOUT, None)
    assert code_of("weird", "x") == (ReasonCode.ERROR, "weird: x")  # an unknown code is an error, kept in the detail
