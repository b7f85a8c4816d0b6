"""The query core as a library: what another Python service imports to search and answer over
ancre's index with each user's rights (docs/API.md, "Using the query core from Python",
docs/ARCHITECTURE.md "Data flow of a question")::

    from ancre.query import QueryCore

    with QueryCore.open("/etc/ancre/ancre.toml") as core:
        result = core.search("forfait de maintenance Baumont", "alice")
        answer = core.ask("Quel est le forfait mensuel du contrat Baumont ?", "alice")

:class:`QueryCore` is built from the index-side parts (:class:`QueryParts`: store, embedder, BM25
snapshots, state DB, directory, connector factory) and wires the query side once: the live rights
check (:class:`~ancre.query.live_acl.LiveAclChecker`, unless ``query.live_acl = false``), the
hybrid :class:`~ancre.query.retrieval.Retriever` and the
:class:`~ancre.query.answer.AnswerService` with its answering model, judge and audit log.
ancre's own entry points build it the same way, from the parts of the one composition root
(:class:`~ancre.query.bootstrap.Bootstrap`): :class:`ancre.app.runtime.Runtime` (a bootstrap
that adds the sync engine) hands it its parts, the API (:func:`ancre.api.app.create_app`) serves
the runtime's core, and :meth:`QueryCore.open` builds a bootstrap of its own from the config.

Every result is trimmed to what the user may read *now*: an unknown user gets nothing, a
directory that can't be read raises :class:`~ancre.errors.DirectoryError` (fail closed, never
"no filter"). Thread-safe: one :class:`QueryCore` serves concurrent requests.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ancre.acl.directory import resolve_account
from ancre.config import Settings, config_path, load_settings
from ancre.models import COLLECTIONS, Closing
from ancre.query.answer import Answer, AnswerService, AnswerStream
from ancre.query.bootstrap import QueryParts, build_answer_service
from ancre.query.live_acl import LiveAclChecker, Unverified
from ancre.query.retrieval import Retriever

if TYPE_CHECKING:
    from ancre.query.remote import RemoteQueryCore

PROBE_USER = "ancre-health-probe"
"""A name looked up in the directory by :meth:`QueryCore.probe_directory` (unknown: only
reachability matters)."""


@dataclass(frozen=True)
class SearchHit:
    """One passage found for a question, best first in :attr:`SearchResult.hits`.

    ``filename``: the document's file name; ``path``: its path relative to its source (POSIX
    ``/``); ``source``: the configured source id; ``location``: the folder a user opens, a UNC
    path (``\\\\SRV-FICHIERS\\Partage\\CLIENTS\\``) or a SharePoint folder URL; ``doc_id``:
    ``<source>:<native id>``; ``chunk_index``: the passage's rank in its document (0-based);
    ``score``: the Reciprocal Rank Fusion score, in [0, 2/61 ≈ 0.033] (higher is better;
    :func:`~ancre.query.retrieval.rrf`); ``found_by``: the candidate lists that had it
    (``"vector"``, ``"bm25"``); ``collection``: ``"documents"`` or ``"documentation"``;
    ``text``: the passage itself (the snippet).
    """

    filename: str
    path: str
    source: str
    location: str
    doc_id: str
    chunk_index: int
    score: float
    found_by: tuple[str, ...]
    collection: str
    text: str


@dataclass(frozen=True)
class SearchResult:
    """What :meth:`QueryCore.search` found for ``user``.

    ``account``: the directory account ``user`` designates (``None``: the directory does not know
    the user, so nothing is readable and ``hits`` is empty); ``hits``: at most ``limit`` passages,
    best first, each readable by the user now; ``unverified``: documents left out because their
    rights could not be checked live (their source unreachable), counted per source — never named.
    """

    question: str
    user: str
    account: str | None
    hits: tuple[SearchHit, ...]
    unverified: tuple[Unverified, ...] = ()


class QueryCore(Closing):
    """Permission-trimmed search and grounded answers over ancre's index (see the module doc).

    Build it with :meth:`open` (from a config) or from parts the caller owns
    (``QueryCore(settings, parts)``, what :class:`ancre.app.runtime.Runtime` does). ``owns_parts``:
    :meth:`close` also closes the state DB and the store (releasing the embedded store's lock).
    The answering side (model client, judge, audit log) is built at the first :meth:`ask` /
    :meth:`stream`.
    """

    def __init__(self, settings: Settings, parts: QueryParts, *, owns_parts: bool = False) -> None:
        self.settings = settings
        self.parts = parts
        self._owns_parts = owns_parts
        self.live_acl: LiveAclChecker | None = None
        """The live rights check, ``None`` when ``query.live_acl = false`` (the index decides)."""
        if settings.query.live_acl:
            self.live_acl = LiveAclChecker(parts.connector, parts.acl_writer, settings.query)
        self.retriever = Retriever(
            parts.store, parts.embedder, parts.bm25, settings.query, self.live_acl,
            keyword_in_store=settings.store.bm25 == "qdrant",
        )
        """The hybrid retriever (vector + BM25, RRF, rights re-read, live check)."""
        self._answers: AnswerService | None = None
        self._lock = threading.Lock()
        self._ready = False

    @classmethod
    def open(cls, config: Settings | str | os.PathLike[str] | None = None) -> QueryCore | RemoteQueryCore:
        """The query core over the index ``config`` describes: a loaded
        :class:`~ancre.config.Settings`, a TOML file, or ``None`` for ``$ANCRE_CONFIG`` else
        ``./ancre.toml``.

        With the embedded store (``store.kind = "edge"``) owned by a running ``ancre daemon`` /
        ``ancre serve``, returns a :class:`~ancre.query.remote.RemoteQueryCore` that asks that
        process through its control socket (docs/DEPLOY.md, "The admin commands"): same methods, same
        typed results. Otherwise opens the index in this process: like every ancre entry point,
        makes ancre's files private first (the process umask gains 077;
        :func:`~ancre.index.private.make_private`). Close it (or use it as a context manager) to
        release the store.

        Raises :class:`~ancre.errors.ConfigError` (missing file, bad key or value, named),
        :class:`~ancre.errors.ControlPermissionError` when the index is owned by a running ancre
        whose control socket this process may not open, :class:`~ancre.errors.StoreLockedError`
        when the embedded store is owned by another process that serves no control socket (with
        ``store.kind = "qdrant"`` any number of processes share the server),
        :class:`~ancre.errors.EmbedderMismatchError` when the index was built by another
        embedder, :class:`~ancre.errors.StoreError` / :class:`~ancre.errors.EmbedderError` when a
        backend can't be reached.
        """
        settings = config if isinstance(config, Settings) else load_settings(config_path(config))
        if settings.store.kind == "edge":
            from ancre.query.remote import ControlClient, RemoteQueryCore

            client = ControlClient.find(settings)
            if client is not None:
                return RemoteQueryCore(client)
        parts = QueryParts.from_settings(settings)  # makes ancre's files private first
        try:
            return cls(settings, parts, owns_parts=True)
        except BaseException:
            parts.state.close()
            parts.store.close()
            raise

    # ------------------------------------------------------------------ parts

    @property
    def answers(self) -> AnswerService:
        """The answer service (built on first use; see :func:`build_answer_service`)."""
        with self._lock:
            if self._answers is None:
                self._answers = build_answer_service(
                    self.settings, self.retriever, self.parts.store, self.parts.directory, self.parts.resolver
                )
            return self._answers

    # ------------------------------------------------------------------ questions

    def account(self, user: str) -> str | None:
        """The directory account ``user`` designates (sAMAccountName, UPN or ``DOMAIN\\user``
        in; ``None`` when the directory does not know it). Raises
        :class:`~ancre.errors.DirectoryError` when the directory can't be read."""
        return resolve_account(self.parts.directory, user)

    def principals(self, user: str) -> frozenset[str]:
        """The principals ``user`` holds now: the union of every principal provider's answer
        (:class:`~ancre.acl.providers.PrincipalResolver`: ``sid:S-1-…`` from the directory — own
        SID, groups transitively, Everyone, Authenticated Users — and e.g. ``aad:``/``sp:`` from
        a SharePoint source's Entra provider), each cached for its provider's TTL;
        ``frozenset()`` for a user no provider knows (nothing is readable). Raises
        :class:`~ancre.errors.DirectoryError` when the directory can't be read."""
        account = self.account(user)
        return self.parts.resolver.principals(account if account is not None else user)

    def search(self, question: str, user: str, *, limit: int | None = None) -> SearchResult:
        """The passages best matching ``question`` among those ``user`` may read now: hybrid
        retrieval (vector + BM25, fused by RRF), rights re-read from the store and checked live
        against the sources (:mod:`ancre.query.retrieval`). ``limit``: at most this many hits
        (default ``query.limit``). Not audited (no answer is given).

        Raises :class:`~ancre.errors.DirectoryError` (directory unreadable: nothing is returned),
        :class:`~ancre.errors.EmbedderError` / :class:`~ancre.errors.StoreError` from the backends.
        """
        account = self.account(user)
        principals = self.parts.resolver.principals(account if account is not None else user)
        res = self.retriever.retrieve(question, principals, limit=limit)
        hits = tuple(
            SearchHit(
                filename=r.filename, path=r.path, source=r.doc_id.partition(":")[0], location=r.location,
                doc_id=r.doc_id, chunk_index=r.chunk_index, score=r.score, found_by=tuple(r.found_by),
                collection=r.collection, text=r.text,
            )
            for r in res.results
        )
        return SearchResult(question, user, account, hits, res.unverified)

    def ask(
        self, question: str, user: str, *, asked_by: str | None = None, history: Sequence[str] | None = None
    ) -> Answer:
        """The grounded answer to ``question`` from what ``user`` may read now (an
        :class:`~ancre.query.answer.Answer`: text with citations and their folders, sources,
        ``ancree`` verdict, controls; the standard refusal ``REFUSAL`` with no source when nothing
        readable answers it). Audited: one line naming ``asked_by`` (the identity as received —
        the forwarded e-mail, or the admin who asked on the user's behalf; default ``user``) and
        the resolved account. ``history``: the earlier user questions of a conversation, oldest
        first — a follow-up (« Et quelle est sa durée ? ») is answered as the standalone question
        they make it (:attr:`Answer.resolution <ancre.query.answer.Answer.resolution>`).

        Raises :class:`~ancre.errors.DirectoryError`, :class:`~ancre.errors.EmbedderError`,
        :class:`~ancre.errors.StoreError`, :class:`~ancre.query.llm.LlmError` (the answering model
        failed), :class:`~ancre.errors.AuditError` (the audit line can't be written: no answer).
        """
        return self.answers.ask(question, user, identity=asked_by, history=history)

    def stream(
        self, question: str, user: str, *, asked_by: str | None = None, history: Sequence[str] | None = None
    ) -> AnswerStream:
        """:meth:`ask`, streamed: the model's raw text in pieces, then the final
        :class:`~ancre.query.answer.Answer` (:meth:`ancre.query.answer.AnswerService.stream`:
        its ``start`` audit record is written before the first piece; :meth:`AnswerStream.cancel
        <ancre.query.answer.AnswerStream.cancel>` from another thread stops the model request).
        Raises as :meth:`ask`, possibly after some pieces."""
        return self.answers.stream(question, user, identity=asked_by, history=history)

    # ------------------------------------------------------------------ health

    def not_ready(self) -> str | None:
        """``None`` once every configured source has finished a first sync pass; else why answers
        would rest on an incomplete index (``"the index is being built: first sync of partage not
        finished"``; the API answers 503 meanwhile instead of confident refusals). With no pass
        recorded in this state DB but points in the store (an API apart from the daemon on a
        Qdrant server), the index is taken as ready. Once ready, stays ready. Raises
        :class:`~ancre.errors.StoreError` when the store can't be read."""
        if self._ready:
            return None
        finished = {src for src, _start, end, _outcome, _summary in self.parts.state.last_passes(1000) if end is not None}
        missing = [s.id for s in self.settings.sources if s.id not in finished]
        if not missing or (not finished and any(self.parts.store.count(c) for c in COLLECTIONS)):
            self._ready = True
            return None
        return f"the index is being built: first sync of {', '.join(missing)} not finished"

    def points(self) -> Mapping[str, int]:
        """Points (passages) in each collection: ``{"documents": n, "documentation": m}``. Raises
        :class:`~ancre.errors.StoreError` when the store can't be read."""
        return {c: self.parts.store.count(c) for c in COLLECTIONS}

    def probe_directory(self) -> None:
        """Read the directory once, bypassing its cache (a file read, or a query to a domain
        controller). Raises :class:`~ancre.errors.DirectoryError` when it can't be read."""
        self.parts.directory.sid_of(PROBE_USER)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Release the model clients and the audit log, the live check's connectors, and — when
        the core owns its parts (:meth:`open`) — the state DB and the store (its lock)."""
        with self._lock:
            answers, self._answers = self._answers, None
        if answers is not None:
            answers.close()
        if self.live_acl is not None:
            self.live_acl.close()
        if self._owns_parts:
            self.parts.state.close()
            self.parts.store.close()


__all__ = [
    "PROBE_USER",
    "QueryCore",
    "QueryParts",
    "SearchHit",
    "SearchResult",
    "build_answer_service",
]
