"""Rights checked live at answer time (README "How it stays safe", "Rights checked live").

The index's ACLs follow the sources through sync passes, change notifications and the periodic
ACL sweep — but a server may send no notification (Samba sends none for a file's own security
descriptor), drop them, or the watch may be down. So before a document is shown by ``search`` or
put in the context of ``ask``, :class:`LiveAclChecker` re-reads its *current* ACL from its source
through :meth:`~ancre.connectors.base.Connector.read_acls` (SMB: a QUERY_INFO for the security
descriptor, with the share permissions, as a sync computes it; folder sources: the ACL manifest,
re-read when it changed) — or, for a source whose items are identified by their native id
(:class:`~ancre.connectors.base.AclsByNativeId`: SharePoint, drive id + item id), through
``read_acls_by_id``, so that a document's rights are always those of the item that was indexed,
never of whatever now sits at its path. Readings are keyed by ``doc_id``:

- **batched and concurrent**: the documents of one question are grouped by source and read in up
  to ``query.live_acl_workers`` batches at once on one bounded thread pool; the question waits at
  most ``query.live_acl_timeout_s`` seconds;
- **a short TTL cache**: a reading is reused for ``query.live_acl_ttl_s`` seconds (any user: it is
  the document's ACL, not a decision), but never when it disagrees with the ACL the index holds
  (the sync may have written a newer one meanwhile): then the source is read again;
- **a changed ACL updates the index at once**: the store payload of every chunk of the document
  (no re-embedding), then the state DB's ACL digest — the same two writes as a sync pass's
  ACL-only update, through the same ACL writer, the process's one, built by the composition root
  (:class:`~ancre.index.acl_writer.AclWriter`: a
  ticket is taken before each batch is read, and a reading older than one the sync engine's rights
  lane recorded meanwhile, or than a refresh of its source, is not written: the newer one stands,
  and this question is then decided on both, fail closed) — and the rights are evaluated on the
  fresh ACL;
- **a source that can't be reached** (or does not answer in time): with
  ``query.live_acl_on_unreachable = "deny"`` (default) the document is left out and the answer
  says so (:func:`unverified`); with ``"stored"`` the ACL in the index decides;
- a document that no longer exists at its source is left out (the next sync purges it).

Every decision is a :class:`RightsCheck`, kept with the retrieval and written to the audit log.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Literal

from ancre.acl.engine import acl_problem
from ancre.connectors.base import AclsByNativeId, Closeable, Connector
from ancre.errors import AncreError, SourceUnavailableError
from ancre.index.acl_writer import AclWrite, AclWriter
from ancre.models import Acl, ChunkPayload
from ancre.settings import QueryConfig

log = logging.getLogger("ancre.query.live_acl")

Outcome = Literal["live", "changed", "gone", "unreachable", "stored", "no_source", "off"]
"""How a document's rights were decided for one question:

- ``live``: its ACL was read from the source (for this question, or within the TTL) and equals
  the index's;
- ``changed``: read from the source, it differs: the index was updated at once and the fresh ACL
  decided;
- ``gone``: the source no longer has the document: left out;
- ``unreachable``: the source could not be reached in time: left out (fail closed);
- ``stored``: the source could not be reached and ``live_acl_on_unreachable = "stored"``: the ACL
  in the index decided;
- ``no_source``: the document's source is not configured (any more) or its connector can't be
  built: left out;
- ``off``: ``query.live_acl = false``: the index's ACL decided.
"""

UNVERIFIED_OUTCOMES = frozenset({"unreachable", "no_source"})
"""Outcomes of documents left out because their rights could not be checked."""


@dataclass(frozen=True)
class RightsCheck:
    """The rights decision on one document for one question. ``readable``: whether the asking
    user may see it; ``reason``: why it was left out or not checked (the source's error, the
    fresh ACL's own reason), ``None`` otherwise; ``age_s``: seconds since its ACL was read from the
    source (``0.0`` when read for this question or not read at all)."""

    doc_id: str
    source: str
    path: str
    filename: str
    collection: str
    outcome: Outcome
    readable: bool
    reason: str | None = None
    age_s: float = 0.0

    @property
    def live(self) -> bool:
        """Whether the rights were checked against the source (now or within the TTL)."""
        return self.outcome in ("live", "changed", "gone")


@dataclass(frozen=True)
class Unverified:
    """Documents of one source left out of a result because their rights could not be checked:
    ``documents`` how many, ``reason`` one of the source's errors (for logs and admins; the user
    is told only the source and the count)."""

    source: str
    documents: int
    outcome: Outcome
    reason: str


def unverified(checks: Iterable[RightsCheck]) -> tuple[Unverified, ...]:
    """The documents left out because their rights could not be checked, grouped by source (in
    order of first appearance)."""
    groups: dict[str, list[RightsCheck]] = {}
    for c in checks:
        if c.outcome in UNVERIFIED_OUTCOMES:
            groups.setdefault(c.source, []).append(c)
    return tuple(Unverified(s, len(cs), cs[0].outcome, cs[0].reason or "") for s, cs in groups.items())


def unchecked(payloads: Iterable[ChunkPayload], principals: frozenset[str]) -> dict[str, RightsCheck]:
    """``off`` checks (the index's ACL decides) for documents when the live check is disabled."""
    out: dict[str, RightsCheck] = {}
    for pl in payloads:
        if pl.doc_id not in out:
            stored = pl.acl()
            out[pl.doc_id] = RightsCheck(
                pl.doc_id, pl.source, pl.path, pl.filename, pl.collection, "off", stored.readable_by(principals)
            )
    return out


@dataclass(frozen=True)
class _Reading:
    acl: Acl | None  # None: the path no longer exists
    at: float  # clock() when read
    ticket: int = 0  # AclWriter ticket taken before it was read


def _slices(docs: list[ChunkPayload], n: int) -> list[list[ChunkPayload]]:
    """``docs`` cut into at most ``n`` batches of nearly equal size, in order."""
    if not docs:
        return []
    size = math.ceil(len(docs) / min(n, len(docs)))
    return [docs[i : i + size] for i in range(0, len(docs), size)]


def _read(conn: Connector, batch: list[ChunkPayload]) -> dict[str, Acl | None]:
    """``{doc_id: current ACL, or None when gone}`` of ``batch``'s documents: by native id for
    an :class:`~ancre.connectors.base.AclsByNativeId` source (``doc_id`` is
    ``<source>:<native id>``), by path otherwise."""
    if isinstance(conn, AclsByNativeId):
        ids = {pl.doc_id: pl.doc_id[len(pl.source) + 1 :] for pl in batch}
        got = conn.read_acls_by_id(list(ids.values()))
        return {doc: got.get(nid) for doc, nid in ids.items()}
    by_path = conn.read_acls([pl.path for pl in batch])
    return {pl.doc_id: by_path.get(pl.path) for pl in batch}


_Key = tuple[str, str]
"""A document's reading key: ``(source, doc_id)``."""

_Failure = tuple[Outcome, str]
"""Why a document's ACL could not be read: ``(outcome, reason)``."""


@dataclass(frozen=True)
class _Batch:
    """Documents of one source read in one call; ``ticket``: the ACL writer's ticket taken
    before the reading."""

    source: str
    docs: list[ChunkPayload]
    ticket: int


def _decided(
    pl: ChunkPayload, outcome: Outcome, readable: bool, principals: frozenset[str], reason: str | None = None,
    age: float = 0.0,
) -> RightsCheck:
    """The :class:`RightsCheck` of ``pl``'s document: never readable with empty ``principals``;
    ``age`` seconds rounded to the millisecond, never negative."""
    return RightsCheck(
        pl.doc_id, pl.source, pl.path, pl.filename, pl.collection, outcome,
        readable and bool(principals), reason, round(max(0.0, age), 3),
    )


class LiveAclChecker:
    """Reads documents' current ACLs from their sources for the query core (see the module doc).

    ``connector_for(source_id)`` returns the connector of a configured source (built once, then
    kept; raises :class:`~ancre.errors.AncreError` for an unknown source or a bad configuration);
    ``writer``: the process's one ACL writer, shared with the sync engine, which writes a changed
    ACL into the store's payloads and the state DB's digest (read-only: nothing is written);
    ``cfg`` gives ``live_acl_ttl_s``, ``live_acl_timeout_s``, ``live_acl_on_unreachable`` and
    ``live_acl_workers``; ``clock``: monotonic seconds (tests move it). Thread-safe;
    :meth:`close` stops the pool and closes the connectors it built.
    """

    def __init__(
        self,
        connector_for: Callable[[str], Connector],
        writer: AclWriter,
        cfg: QueryConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connector_for = connector_for
        self.writer = writer
        self.cfg = cfg
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], _Reading] = {}
        self._connectors: dict[str, Connector] = {}
        self._pool = ThreadPoolExecutor(max_workers=cfg.live_acl_workers, thread_name_prefix="ancre-live-acl")
        self.reads = 0
        """Documents whose ACL was read from their sources so far (a cache hit reads nothing)."""

    # ------------------------------------------------------------------ parts

    def _connector(self, source: str) -> Connector:
        with self._lock:
            conn = self._connectors.get(source)
        if conn is None:
            conn = self._connector_for(source)
            with self._lock:
                conn = self._connectors.setdefault(source, conn)
        return conn

    def _cached(self, pl: ChunkPayload, stored: Acl, now: float) -> _Reading | None:
        """A reading young enough and not contradicted by the index, or ``None``."""
        ttl = self.cfg.live_acl_ttl_s
        if ttl <= 0:
            return None
        with self._lock:
            hit = self._cache.get((pl.source, pl.doc_id))
        if hit is None or now - hit.at >= ttl:
            return None
        if hit.acl is not None and hit.acl.digest() != stored.digest():
            return None  # the index moved on (a sync wrote a newer ACL): read again
        return hit

    def _remember(self, key: tuple[str, str], reading: _Reading) -> None:
        with self._lock:
            self._cache[key] = reading
            if len(self._cache) > 50_000:
                ttl = self.cfg.live_acl_ttl_s
                for k in [k for k, r in self._cache.items() if reading.at - r.at >= ttl]:
                    del self._cache[k]

    def forget(self) -> None:
        """Drop every cached reading (the next question reads every ACL again)."""
        with self._lock:
            self._cache.clear()

    def _apply(self, pl: ChunkPayload, fresh: Acl, ticket: int) -> AclWrite:
        """Write a changed ACL read at ``ticket`` to the index through the ACL writer: the
        store's payloads, then the state DB's digest (the order of the sync engine's ACL-only
        update). A failure is logged: the fresh ACL still decides this question and the next sync
        applies it."""
        try:
            done = self.writer.write(pl.source, pl.collection, pl.doc_id, fresh, ticket, reason=acl_problem(fresh))
        except Exception as e:  # the decision does not depend on the write
            log.warning("live ACL check: %s changed but the index could not be updated: %s", pl.doc_id, e)
            return AclWrite.READ_ONLY
        if done is AclWrite.WRITTEN:
            log.info(
                "live ACL check: the ACL of %s changed at its source; index updated", pl.doc_id,
                extra={"doc_id": pl.doc_id, "source": pl.source},
            )
        elif done is AclWrite.STALE:
            log.info("live ACL check: a newer reading of the ACL of %s was recorded meanwhile; it stands", pl.doc_id,
                     extra={"doc_id": pl.doc_id, "source": pl.source})
        return done

    # ------------------------------------------------------------------ API

    def check(self, payloads: Sequence[ChunkPayload], principals: frozenset[str]) -> dict[str, RightsCheck]:
        """The rights of each distinct document of ``payloads`` (one payload per document is
        enough: its ``source``, ``path``, ``collection`` and stored ACL are used) for a user
        holding ``principals``, keyed by ``doc_id``. Blocks at most about
        ``live_acl_timeout_s`` seconds. Never raises for a source's failure (see
        :data:`Outcome`); with an empty principal set nothing is readable."""
        docs: dict[str, ChunkPayload] = {}
        for pl in payloads:
            docs.setdefault(pl.doc_id, pl)
        now = self._clock()
        # a document is identified by its doc_id (<source>:<native id>), never by its path
        readings, todo = self._from_cache(docs, now)
        failures: dict[_Key, _Failure] = {}
        batches = self._submit(todo, failures)
        if batches:
            self._collect(batches, readings, failures)
        self._log_unreachable(failures)
        out: dict[str, RightsCheck] = {}
        for doc_id, pl in docs.items():
            key = (pl.source, doc_id)
            stored = pl.acl()
            if key in failures:
                out[doc_id] = self._decide_failed(pl, stored, failures[key], principals)
            else:
                out[doc_id] = self._decide_read(pl, stored, readings[key], principals, now)
        return out

    # ------------------------------------------------------------------ steps of check

    def _from_cache(
        self, docs: dict[str, ChunkPayload], now: float
    ) -> tuple[dict[_Key, _Reading], dict[str, list[ChunkPayload]]]:
        """The cached readings of ``docs`` still valid at ``now``, and the other documents to read,
        grouped by source (in order of first appearance)."""
        readings: dict[_Key, _Reading] = {}
        todo: dict[str, list[ChunkPayload]] = defaultdict(list)
        for pl in docs.values():
            key = (pl.source, pl.doc_id)
            hit = self._cached(pl, pl.acl(), now)
            if hit is not None:
                readings[key] = hit
            else:
                todo[pl.source].append(pl)
        return readings, todo

    def _submit(
        self, todo: dict[str, list[ChunkPayload]], failures: dict[_Key, _Failure]
    ) -> dict[Future[dict[str, Acl | None]], _Batch]:
        """Submit the readings of ``todo`` to the pool, in up to ``live_acl_workers`` batches per
        source, each with the writer's ticket taken before it is read; a source whose connector
        can't be built gets ``no_source`` in ``failures`` for each of its documents."""
        futures: dict[Future[dict[str, Acl | None]], _Batch] = {}
        for source, pending in todo.items():
            if not pending:
                continue
            try:
                conn = self._connector(source)
            except AncreError as e:
                for pl in pending:
                    failures[(source, pl.doc_id)] = ("no_source", f"source {source!r}: {e}")
                continue
            for batch in _slices(pending, self.cfg.live_acl_workers):
                ticket = self.writer.ticket()  # before the reading: orders its write-back
                futures[self._pool.submit(_read, conn, batch)] = _Batch(source, batch, ticket)
        return futures

    def _collect(
        self,
        futures: dict[Future[dict[str, Acl | None]], _Batch],
        readings: dict[_Key, _Reading],
        failures: dict[_Key, _Failure],
    ) -> None:
        """Wait at most ``live_acl_timeout_s`` seconds for ``futures``: each answered batch's
        readings go to ``readings`` (and the cache), each batch that timed out or failed marks its
        documents ``unreachable`` in ``failures`` (fail closed)."""
        timeout = self.cfg.live_acl_timeout_s
        done, not_done = wait(futures, timeout=timeout)
        read_at = self._clock()
        for fut in not_done:
            fut.cancel()
            b = futures[fut]
            for pl in b.docs:
                failures[(b.source, pl.doc_id)] = ("unreachable", f"source {b.source!r}: no answer within {timeout:g} s")
        for fut in done:
            b = futures[fut]
            try:
                got = fut.result()
            except SourceUnavailableError as e:
                reason = str(e)
            except Exception as e:  # any failure of a source: fail closed
                log.warning("live ACL check: source %s failed: %s: %s", b.source, type(e).__name__, e)
                reason = f"source {b.source!r}: {type(e).__name__}: {e}"
            else:
                for pl in b.docs:
                    reading = _Reading(got.get(pl.doc_id), read_at, b.ticket)
                    readings[(b.source, pl.doc_id)] = reading
                    self._remember((b.source, pl.doc_id), reading)
                with self._lock:
                    self.reads += len(b.docs)
                continue
            for pl in b.docs:
                failures[(b.source, pl.doc_id)] = ("unreachable", reason)

    def _log_unreachable(self, failures: dict[_Key, _Failure]) -> None:
        """One warning per source that could not be reached in ``failures``."""
        for source in {s for (s, _p), (o, _r) in failures.items() if o == "unreachable"}:
            log.warning(
                "live ACL check: source %s unreachable: its documents are %s", source,
                "judged on the stored ACL" if self.cfg.live_acl_on_unreachable == "stored" else "left out",
            )

    def _decide_failed(
        self, pl: ChunkPayload, stored: Acl, failure: _Failure, principals: frozenset[str]
    ) -> RightsCheck:
        """The decision on a document whose ACL could not be read: left out, or judged on the
        ``stored`` ACL for an unreachable source with ``live_acl_on_unreachable = "stored"``."""
        outcome, reason = failure
        if outcome == "unreachable" and self.cfg.live_acl_on_unreachable == "stored":
            return _decided(pl, "stored", stored.readable_by(principals), principals, reason)
        return _decided(pl, outcome, False, principals, reason)

    def _decide_read(
        self, pl: ChunkPayload, stored: Acl, reading: _Reading, principals: frozenset[str], now: float
    ) -> RightsCheck:
        """The decision on a document from its ``reading``: ``gone``, ``changed`` (the index is
        updated at once; a stale write-back is decided on both ACLs, fail closed) or ``live``."""
        age = now - reading.at if reading.at < now else 0.0
        if reading.acl is None:
            return _decided(pl, "gone", False, principals, "no longer at its source", age)
        fresh = reading.acl
        if fresh.digest() != stored.digest():
            readable = fresh.readable_by(principals)
            if self._apply(pl, fresh, reading.ticket) is AclWrite.STALE:
                readable = readable and stored.readable_by(principals)  # fail closed on both readings
            return _decided(pl, "changed", readable, principals, fresh.reason, age)
        return _decided(pl, "live", fresh.readable_by(principals), principals, fresh.reason, age)

    def close(self) -> None:
        """Stop the pool (pending readings are cancelled) and close the connectors built here."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            conns = list(self._connectors.values())
            self._connectors.clear()
        for conn in conns:
            if isinstance(conn, Closeable):
                try:
                    conn.close()
                except Exception as e:  # closing must not fail the caller
                    log.debug("closing connector %s: %s", conn.source_id, e)


__all__ = [
    "UNVERIFIED_OUTCOMES",
    "LiveAclChecker",
    "Outcome",
    "RightsCheck",
    "Unverified",
    "unchecked",
    "unverified",
]
