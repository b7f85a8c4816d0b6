"""The sync engine (docs/ARCHITECTURE.md "Data flow of indexing"): diff a source's listing against the state DB and bring
the store in line — content change → re-embed; ACL-only change → payload update with zero
embeddings; vanished → points deleted; mass-deletion guard; BM25 rebuilt after any change.

:class:`SyncEngine` (:mod:`.engine`) runs the passes — listing, the items in order, the purge —
over parts that are objects with narrow interfaces, each built from what it needs and testable
alone; none shares state with another:

- planning — :class:`~.planner.ItemPlanner`: what to do with one item, asking the pure
  :func:`~.plan.plan_item` as each fact is read (:mod:`.retries`: the failure and retry
  bookkeeping, pure too); it returns a document to embed or what to settle, and writes nothing;
- ACL readings — :class:`~.acl_reading.AclReader`: a ticket from the ACL writer, then the reading;
  read again when a newer one came first;
- fetching and extracting — :class:`~.fetch.Fetcher`: the bytes and their hash, the text in the
  extraction worker, the subject, the chunks with their headers;
- writing — :class:`~.commit.ChunkWriter` (pending rows, embedding with the stored vectors reused,
  upserts, indexed rows; :class:`~.commit.CommitPipe` overlaps it with the next extractions) and
  :class:`~.records.Recorder` (the rows of failed and skipped documents);
- the ACL refresh — :class:`~.acl_refresh.AclRefresher`: ACL-only updates during a pass and the
  rights lane's refresh;
- the keyword hooks — :class:`~.bm25.KeywordHooks`: the BM25 snapshot rebuilt from the store.

:mod:`.report` holds :class:`PassReport`, :mod:`.paths` the event paths.

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
live rights check, built by the composition root): each reading takes a ticket before it is read
at the source, writes happen under the writer's lock — an ACL-only change through
:meth:`AclWriter.write <ancre.index.acl_writer.AclWriter.write>`, the one path to the store's
``set_acl`` —, and a document whose reading is older than the latest refresh of its source or
than another recorded reading (the live check's) has its ACL re-read before it is written — so
an ACL read before a revocation is never written after it. Test-only crash
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
