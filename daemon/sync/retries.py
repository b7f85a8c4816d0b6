"""Failure and retry bookkeeping of the sync engine (pure: no I/O, the clock passed in).

No poison pill: a document whose extraction times out or crashes, or whose indexing died half-way
(a ``pending`` row found again), is tried at most ``sync.max_attempts`` times per version, with
``sync.retry_backoff_s`` doubling between failed tries; it then stays ``failed`` with its reason
until its content changes (or a new extractor version, ``--force``). Failures that are properties
of the file (:attr:`ReasonCode.is_skip <ancre.models.ReasonCode.is_skip>`: corrupt, encrypted, too
large…) are not retried at all until then.
"""

from __future__ import annotations

from dataclasses import dataclass

from ancre.index.state import ItemState
from ancre.models import ItemStatus, ReasonCode


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """``max_attempts`` tries per version, the first retry ``backoff_s`` seconds after a failure
    (doubled per try); ``extractor``: the running extractor version (a new one retries all)."""

    max_attempts: int
    backoff_s: float
    extractor: str


@dataclass(frozen=True, kw_only=True)
class Failure:
    """How a failed try is recorded: the row's status, reason and try bookkeeping."""

    status: ItemStatus
    reason_code: ReasonCode
    detail: str | None
    attempts: int = 0
    retry_at: float | None = None
    """Epoch seconds of the earliest next try; ``None``: not before the file changes."""


def may_retry(prev: ItemState, policy: RetryPolicy, now: float) -> bool:
    """Whether a ``failed``/``skipped`` row of an unchanged document is tried again at ``now``
    (epoch seconds): another extractor version than the one that failed, or a transient failure
    (:attr:`ReasonCode.is_retryable <ancre.models.ReasonCode.is_retryable>`) with tries left whose
    backoff has expired."""
    if prev.extractor != policy.extractor:
        return True
    return (
        prev.status == ItemStatus.FAILED
        and prev.reason_code is not None
        and prev.reason_code.is_retryable
        and prev.attempts < policy.max_attempts
        and now >= (prev.retry_at or 0.0)
    )


def code_of(reason: str, detail: str) -> tuple[ReasonCode, str | None]:
    """``(code, detail)`` of an :class:`~ancre.errors.ExtractionError`'s ``reason`` and
    ``detail``; a reason that is no :class:`~ancre.models.ReasonCode` is an ``error`` keeping it
    in the detail."""
    try:
        return ReasonCode(reason), detail or None
    except ValueError:
        return ReasonCode.ERROR, f"{reason}: {detail}" if detail else reason


def failure(
    code: ReasonCode, detail: str | None, prev: ItemState | None, content_hash: str | None,
    policy: RetryPolicy, now: float,
) -> Failure:
    """How an extraction (or indexing) failure of ``code`` is recorded: ``skipped`` for a property
    of the file, else ``failed``; a transient failure counts one more try of this version (the
    count of ``prev`` goes on when its ``content_hash`` is the same) and, with tries left, gets a
    ``retry_at`` (``backoff_s`` doubled per try); the detail says which try it was."""
    status = ItemStatus.SKIPPED if code.is_skip else ItemStatus.FAILED
    if not code.is_retryable:
        return Failure(status=status, reason_code=code, detail=detail)
    same = prev is not None and content_hash is not None and prev.content_hash == content_hash
    attempts = (prev.attempts if same and prev is not None else 0) + 1
    retry_at = None
    if attempts < policy.max_attempts:
        retry_at = now + policy.backoff_s * 2 ** (attempts - 1)
        note = f"(try {attempts} of {policy.max_attempts})"
    else:
        attempts = max(attempts, policy.max_attempts)
        note = f"(gave up after {attempts} tries; tried again when the file changes)"
    return Failure(
        status=status, reason_code=code, detail=f"{detail} {note}" if detail else note,
        attempts=attempts, retry_at=retry_at,
    )


def crashed_half_way(attempts: int) -> Failure:
    """A version whose indexing died half-way ``attempts`` times (the process was killed): failed
    for good, until the file changes."""
    return Failure(
        status=ItemStatus.FAILED, reason_code=ReasonCode.CRASHED,
        detail=f"indexing stopped half-way {attempts} times (the process died); tried again when the file changes",
        attempts=attempts,
    )
