"""The sync engine (docs/ARCHITECTURE.md "Data flow of indexing"): diff a source's listing against the state DB and bring
the store in line — content change → re-embed; ACL-only change → payload update with zero
embeddings; vanished → points deleted; mass-deletion guard; BM25 rebuilt after any change.

Its parts: :mod:`.engine` (the passes: listing, per-item execution, purge), :mod:`.plan` (the
pure per-item decision, :func:`~ancre.daemon.sync.plan.plan_item`), :mod:`.retries` (failure and
retry bookkeeping), :mod:`.commit` (the batched, overlapped embedding and writing),
:mod:`.acl_refresh` (ACL-only updates and the rights refresh), :mod:`.bm25` (BM25 rebuild, index
maintenance), :mod:`.report` (:class:`PassReport`), :mod:`.paths` (event paths).

Crash safety: before the store is touched for a document its state row is set to ``pending``;
the row becomes ``indexed`` only after the store confirmed. A pass interrupted anywhere is
reconciled by the next one: pending rows are re-done (point ids are deterministic, so upserts are
idempotent) or purged if their file vanished. Documents to embed are written in batches (up to
32 documents / 128 chunks; a document with more chunks goes alone, embedded and upserted 128
chunks at a time, so memory stays bounded whatever its size), each batch embedded and written on
a thread of its own while the next files are extracted (:class:`~.commit.CommitPipe`, one batch in
flight): every row of a batch is ``pending`` before its first upsert. A document's points always have ``chunk_index`` below the
chunk count of its state row (pending rows record the larger of the old and new counts).

No poison pill: a document whose extraction times out or crashes, or whose indexing died half-way
(a ``pending`` row found again), is tried at most ``sync.max_attempts`` times per version, with
``sync.retry_backoff_s`` doubling between failed tries; it then stays ``failed`` with its reason
until its content changes (or a new extractor version, ``--force``). Failures that are properties
of the file (corrupt, encrypted, too large…) are not retried at all until then.

Three entry points: :meth:`SyncEngine.run_pass` (a full reconciliation),
:meth:`SyncEngine.sync_paths` (only the paths an event named, for the daemon) and
:meth:`SyncEngine.refresh_acls` (rights only, run by the daemon's rights thread *while* a pass
embeds: a revocation never waits behind content work). Passes and path syncs are serialised; a
refresh runs alongside them. Every ACL written to the store (upserts included) goes through the
process's one ACL writer (:class:`~ancre.index.acl_writer.AclWriter`, shared with the query core's
live rights check): each reading takes a ticket before it is read at the source, writes happen
under the writer's lock, and a document whose reading is older than the latest refresh of its
source or than another recorded reading (the live check's) has its ACL re-read before it is
written — so an ACL read before a revocation is never written after it. Test-only crash
points (:mod:`ancre.daemon.faults`) mark the places a ``kill -9`` is simulated.
"""

from __future__ import annotations

from ancre.daemon.sync.engine import SyncEngine
from ancre.daemon.sync.paths import clean_rel_path
from ancre.daemon.sync.plan import Action, Decision, Limits, plan_item
from ancre.daemon.sync.report import PassReport, ProgressFn, skip_reason_key
from ancre.models import ReasonCode

SKIP_REASONS = frozenset(c.value for c in ReasonCode if c.is_skip and c is not ReasonCode.NOT_READ)
"""Extraction outcomes recorded as status ``skipped`` (a property of the file, not an error);
every other extraction error is ``failed``."""

RETRYABLE_REASONS = frozenset(c.value for c in ReasonCode if c.is_retryable)
"""Failures that may be transient (a busy machine, a worker killed by the OOM killer, a bug hit
by a rare path): retried with backoff up to ``sync.max_attempts`` times per version."""

__all__ = [
    "RETRYABLE_REASONS", "SKIP_REASONS", "Action", "Decision", "Limits", "PassReport", "ProgressFn", "SyncEngine",
    "clean_rel_path", "plan_item", "skip_reason_key",
]
