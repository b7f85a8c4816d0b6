"""The query core as a library: what another Python service imports to search and answer over
ancre's index with each user's rights (README "Using the query core from Python",
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
ancre's own entry points build it the same way: the composition root
(:class:`ancre.app.runtime.Runtime`) hands it the parts it built, the API
(:func:`ancre.api.app.create_app`) serves it, and :meth:`QueryCore.open` builds the parts from a
config with the same factories (:func:`~ancre.index.store_factory.open_store`,
:func:`~ancre.index.embedder_factory.make_embedder`,
:func:`~ancre.acl.directory_factory.make_directory`,
:func:`~ancre.connectors.registry.make_connector`,
:func:`~ancre.connectors.registry.principal_providers`).

Every result is trimmed to what the user may read *now*: an unknown user gets nothing, a
directory that can't be read raises :class:`~ancre.errors.DirectoryError` (fail closed, never
"no filter"). Thread-safe: one :class:`QueryCore` serves concurrent requests.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from ancre.acl.directory import Directory, resolve_account
from ancre.acl.directory_factory import make_directory
from ancre.acl.providers import DirectoryProvider, PrincipalResolver
from ancre.config import Settings, config_path, load_settings
from ancre.connectors.base import Connector, SourceContext
from ancre.connectors.registry import make_connector, principal_providers
from ancre.index.acl_writer import AclWriter
from ancre.index.bm25 import Bm25Manager
from ancre.index.embedder_factory import make_embedder
from ancre.index.embedders import Embedder
from ancre.index.private import make_private
from ancre.index.state import StateDB
from ancre.index.store import Store
from ancre.index.store_factory import open_store
from ancre.models import COLLECTIONS
from ancre.query.answer import Answer, AnswerService, AnswerStream
from ancre.query.audit import open_audit_log
from ancre.query.judge import Judge
from ancre.query.live_acl import LiveAclChecker, Unverified
from ancre.query.llm import make_chat_client
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


@dataclass(frozen=True)
class QueryParts:
    """The index-side parts the query core reads, built by the composition root
    (:class:`ancre.app.runtime.Runtime`) or by :meth:`from_settings`.

    ``store``: opened and checked against ``embedder``; ``bm25``: the keyword snapshots
    (``<data_dir>/bm25``); ``state``: the sync state DB (passes finished, ACL digests the live
    check updates); ``directory``: resolves the account a user name designates; ``connector``:
    source id → a connector of that configured source (called once per source, at the first
    question whose results need a live rights check; raises :class:`~ancre.errors.ConfigError`
    for an unknown id); ``principals``: P(user), the union of the principal providers (the
    directory's ``sid:``, and those the sources bring, e.g. Entra ``aad:``/``sp:``); ``None``:
    the directory alone. ``acl_writer``: the process's ACL writer, shared with its sync engine
    (:mod:`ancre.index.acl_writer`); ``None``: the live check has one of its own.
    """

    store: Store
    embedder: Embedder
    bm25: Bm25Manager
    state: StateDB
    directory: Directory
    connector: Callable[[str], Connector]
    principals: PrincipalResolver | None = None
    acl_writer: AclWriter | None = None

    @property
    def resolver(self) -> PrincipalResolver:
        """:attr:`principals`, or the directory alone when not given."""
        return self.principals if self.principals is not None else PrincipalResolver([DirectoryProvider(self.directory)])

    @classmethod
    def from_settings(cls, settings: Settings) -> QueryParts:
        """Build and open every part from ``settings``, as the composition root does.

        Raises :class:`~ancre.errors.ConfigError` (a bad ``[embedder]``, ``[store]``,
        ``[directory]`` section), :class:`~ancre.errors.StoreLockedError` (another process owns
        the embedded store), :class:`~ancre.errors.EmbedderMismatchError`,
        :class:`~ancre.errors.StoreError`, :class:`~ancre.errors.EmbedderError`; nothing is left
        open when it raises.
        """
        data_dir = Path(settings.data_dir)
        directory = make_directory(settings.directory)
        embedder = make_embedder(settings.embedder)
        store = open_store(settings.store, data_dir, embedder)
        try:
            state = StateDB(data_dir / "state.sqlite3")
        except BaseException:
            store.close()
            raise

        ctx = SourceContext(
            directory=lambda: directory, ignore=settings.ignore, private_paths=settings.private_paths(),
            data_dir=data_dir, state=lambda: state,
        )

        def connector(source_id: str) -> Connector:
            return make_connector(settings.source(source_id), ctx)

        resolver = PrincipalResolver([DirectoryProvider(directory), *principal_providers(settings.sources, ctx)])
        # no sync engine here: with a Qdrant server the daemon elsewhere is the one ACL writer
        writer = AclWriter(store, state, read_only=settings.store.kind != "edge")
        return cls(store, embedder, Bm25Manager(data_dir / "bm25"), state, directory, connector, resolver, writer)


def build_answer_service(
    settings: Settings, retriever: Retriever, store: Store, directory: Directory, resolver: PrincipalResolver | None = None
) -> AnswerService:
    """Grounded answers (issue 3): the chat client of ``llm`` (none: extractive mode), the judge of
    ``judge`` when a model is configured and ``judge.enabled``, and the audit log of ``audit``
    (default folder ``<data_dir>/audit``, key ``<data_dir>/audit.key``, created 0600 when
    pseudonymising and missing). Raises :class:`~ancre.errors.ConfigError` naming ``llm.url`` /
    ``llm.model`` when missing."""
    chat = make_chat_client(settings.llm)
    judge = Judge.from_config(settings.judge, settings.llm) if chat is not None and settings.judge.enabled else None
    audit = None
    a = settings.audit
    if a.enabled:
        audit = open_audit_log(a, Path(settings.data_dir))
    return AnswerService(retriever, store, directory, settings, chat, judge, audit, resolver=resolver)


class QueryCore:
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
            self.live_acl = LiveAclChecker(parts.connector, parts.store, parts.state, settings.query, writer=parts.acl_writer)
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
        process through its control socket (README "Running under systemd"): same methods, same
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
        make_private(Path(settings.data_dir), Path(settings.audit.dir) if settings.audit.dir is not None else None)
        parts = QueryParts.from_settings(settings)
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


__all__ = [
    "PROBE_USER",
    "QueryCore",
    "QueryParts",
    "SearchHit",
    "SearchResult",
    "build_answer_service",
]
