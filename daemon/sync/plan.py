"""What the sync engine does with one listed item (:func:`plan_item`): a pure decision.

The engine asks :func:`plan_item` up to three times per item, handing it each fact as it learns
it: first without the ACL (an item the source did not read is recorded as ``skipped`` before any
read), then with the ACL read (size limit; an unchanged file settled on its stat), then with the
content hash (identical bytes; the poison-pill guard). A document indexed in an older chunk
format (:data:`~ancre.models.CHUNK_FORMAT`: before subjects and contextual headers) is read and
re-indexed like a changed one. The decision names what to do
(:class:`Action`), never does it: the engine (:mod:`ancre.daemon.sync.engine`) does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ancre.daemon.sync.retries import Failure, RetryPolicy, crashed_half_way, may_retry
from ancre.index.state import ItemState
from ancre.models import CHUNK_FORMAT, ItemStatus, ReasonCode, SourceItem


class Action(StrEnum):
    """What to do with one listed item."""

    READ_ACL = "read_acl"
    """Read its ACL, then ask again."""
    READ_CONTENT = "read_content"
    """Read its bytes (their SHA-256), then ask again."""
    RECORD = "record"
    """Record it as :attr:`Decision.failure` says (``skipped``/``failed``; its old points dropped)."""
    KEEP_PROBLEM = "keep_problem"
    """An unchanged ``failed``/``skipped`` document not due for a retry: counted again with its
    recorded reason (its stat fields refreshed when :attr:`Decision.touch`); retried later or when
    the file changes."""
    ACL_ONLY = "acl_only"
    """Content unchanged and indexed: its ACL written if it changed (zero embeddings); its stat
    fields refreshed when :attr:`Decision.touch` (touched, identical bytes)."""
    REINDEX = "reindex"
    """Extract, chunk, embed and write it."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """The output of :func:`plan_item`."""

    action: Action
    failure: Failure | None = None
    """For :attr:`Action.RECORD`: the status and reason to record."""
    touch: bool = False
    """For :attr:`Action.ACL_ONLY` / :attr:`Action.KEEP_PROBLEM`: write the item's new size,
    mtime and etag to its row."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """The configured limits a decision depends on: ``max_bytes`` (``sources.<id>.max_size_mb``
    in bytes) and the retry policy."""

    max_bytes: int
    retry: RetryPolicy
    chunking: str = CHUNK_FORMAT
    """The chunk format written now: an indexed row of another one is re-indexed."""


def _same_stat(item: SourceItem, prev: ItemState | None, collection: str) -> bool:
    """Whether ``prev`` records exactly ``item``'s listing (a rename keeps id, size and mtime:
    its payload must follow, so the path counts)."""
    return (
        prev is not None and prev.size == item.size and prev.mtime == item.mtime and prev.etag == item.etag
        and prev.collection == collection and prev.path == item.path
    )


def _too_large(item: SourceItem, max_bytes: int) -> Failure:
    return Failure(
        status=ItemStatus.SKIPPED, reason_code=ReasonCode.TOO_LARGE,
        detail=f"{item.size / 2**20:.1f} MiB > sources.{item.source}.max_size_mb ({max_bytes / 2**20:g})",
    )


def _settled_by_stat(prev: ItemState, limits: Limits, now: float) -> Decision | None:
    """An item listed exactly as recorded: kept as it is (failed/skipped not due, indexed) or
    ``None`` (pending, or a retry due: read it)."""
    if prev.status in (ItemStatus.FAILED, ItemStatus.SKIPPED) and not may_retry(prev, limits.retry, now):
        return Decision(action=Action.KEEP_PROBLEM)
    if prev.status == ItemStatus.INDEXED and prev.chunking == limits.chunking:
        return Decision(action=Action.ACL_ONLY)
    return None  # pending, a retry due, or indexed in an older chunk format: read it


def _settled_by_content(
    item: SourceItem, prev: ItemState, collection: str, content_hash: str, limits: Limits, *, force: bool, now: float,
) -> Decision | None:
    """Known bytes: no re-embedding (indexed), the same outcome (a failure not due), the
    poison-pill guard (a pending version that died half-way too often), or ``None``: reindex."""
    if prev.content_hash != content_hash:
        return None
    if (prev.status == ItemStatus.INDEXED and prev.collection == collection and prev.path == item.path
            and prev.chunking == limits.chunking):
        return Decision(action=Action.ACL_ONLY, touch=True)
    if not force and prev.status in (ItemStatus.FAILED, ItemStatus.SKIPPED) and not may_retry(prev, limits.retry, now):
        return Decision(action=Action.KEEP_PROBLEM, touch=True)
    if prev.status == ItemStatus.PENDING and prev.attempts >= limits.retry.max_attempts:
        return Decision(action=Action.RECORD, failure=crashed_half_way(prev.attempts))
    return None


def plan_item(
    item: SourceItem,
    prev: ItemState | None,
    *,
    collection: str,
    limits: Limits,
    now: float,
    acl_read: bool,
    content_hash: str | None = None,
    force: bool = False,
) -> Decision:
    """What to do with the listed ``item`` given its state row ``prev`` (``None``: never seen),
    the collection it belongs to now, whether its ACL was read yet (``acl_read``), its content's
    SHA-256 (hex) once read, ``force`` (``--force``: settle nothing on stat) and ``now`` (epoch
    seconds, for retry backoffs). Pure: no I/O, the same inputs give the same decision."""
    if item.skip is not None:  # a link not followed: reported, never read (its old points go)
        return Decision(
            action=Action.RECORD,
            failure=Failure(status=ItemStatus.SKIPPED, reason_code=ReasonCode.NOT_READ, detail=item.skip),
        )
    if not acl_read:
        return Decision(action=Action.READ_ACL)
    if item.size > limits.max_bytes:
        return Decision(action=Action.RECORD, failure=_too_large(item, limits.max_bytes))
    if not force and prev is not None and _same_stat(item, prev, collection):
        settled = _settled_by_stat(prev, limits, now)
        if settled is not None:
            return settled
    if content_hash is None:
        return Decision(action=Action.READ_CONTENT)
    if prev is not None:
        settled = _settled_by_content(item, prev, collection, content_hash, limits, force=force, now=now)
        if settled is not None:
            return settled
    return Decision(action=Action.REINDEX)


__all__ = ["Action", "Decision", "Limits", "plan_item"]
