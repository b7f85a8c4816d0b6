"""The composition root: the one place that turns a :class:`~ancre.config.Settings` into ancre's
wired parts (docs/ARCHITECTURE.md "Composition root").

:class:`Bootstrap` builds each part lazily, once, with one factory each — the embedder
(:func:`~ancre.index.embedder_factory.make_embedder`), the store checked against it
(:func:`~ancre.index.store_factory.open_store`), the state DB, the BM25 snapshots, the directory
(:func:`~ancre.acl.directory_factory.make_directory`), P(user) as the union of the directory's
provider and every configured source's (:func:`~ancre.connectors.registry.principal_providers`),
the process's one ACL writer, the change feeds' cursor store, and the connectors
(:func:`~ancre.connectors.registry.make_connector`) — and hands
the query side its :class:`QueryParts`; :func:`build_answer_service` wires the answering model,
the judge and the audit log. Every entry point goes through it: the CLI, the daemon and the API
through :class:`ancre.app.runtime.Runtime` (a :class:`Bootstrap` that adds the sync engine), a
program importing the query core through :meth:`QueryCore.open
<ancre.query.core.QueryCore.open>`. It lives in the query layer so that both can import it. No
other module of ancre builds a connector, an ACL writer or a cursor store
(``tests/unit/test_one_write_path.py`` keeps it so).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ancre.acl.directory import Directory
from ancre.acl.directory_factory import make_directory
from ancre.acl.providers import DirectoryProvider, PrincipalProvider, PrincipalResolver, directory_resolver
from ancre.audit.record import open_audit_log
from ancre.config import Settings, SourceSettings
from ancre.connectors.base import Closeable, Connector, SourceContext
from ancre.connectors.registry import make_connector, principal_providers
from ancre.index.acl_writer import AclWriter
from ancre.index.bm25 import Bm25Manager
from ancre.index.cursors import CursorStore
from ancre.index.embedder_factory import make_embedder
from ancre.index.embedders import Embedder
from ancre.index.private import make_private
from ancre.index.state import StateDB
from ancre.index.store import Store
from ancre.index.store_factory import open_store
from ancre.models import Closing
from ancre.query.answer import AnswerService
from ancre.query.judge import Judge
from ancre.query.llm import make_chat_client
from ancre.query.retrieval import Retriever

log = logging.getLogger("ancre.query.bootstrap")


@dataclass(frozen=True)
class QueryParts:
    """The index-side parts the query core reads, built by :meth:`Bootstrap.query_parts` (or by
    hand, e.g. in a test).

    ``store``: opened and checked against ``embedder``; ``bm25``: the keyword snapshots
    (``<data_dir>/bm25``); ``state``: the sync state DB (passes finished, ACL digests the live
    check updates); ``directory``: resolves the account a user name designates; ``connector``:
    source id → a connector of that configured source (called once per source, at the first
    question whose results need a live rights check; raises :class:`~ancre.errors.ConfigError`
    for an unknown id); ``principals``: P(user), the union of the principal providers (the
    directory's ``sid:``, and those the sources bring, e.g. Entra ``aad:``/``sp:``); ``None``:
    the directory alone. ``acl_writer``: the process's one ACL writer, shared with its sync
    engine (:mod:`ancre.index.acl_writer`), through which the live check writes back what it
    read.
    """

    store: Store
    embedder: Embedder
    bm25: Bm25Manager
    state: StateDB
    directory: Directory
    connector: Callable[[str], Connector]
    acl_writer: AclWriter
    principals: PrincipalResolver | None = None

    @property
    def resolver(self) -> PrincipalResolver:
        """:attr:`principals`, or the directory alone when not given
        (:func:`~ancre.acl.providers.directory_resolver`)."""
        return self.principals if self.principals is not None else directory_resolver(self.directory)

    @classmethod
    def from_settings(cls, settings: Settings) -> QueryParts:
        """Build and open every part from ``settings`` through a :class:`Bootstrap` of their own
        (:meth:`Bootstrap.query_parts`; it makes ancre's files private first).

        Raises :class:`~ancre.errors.ConfigError` (a bad ``[embedder]``, ``[store]``,
        ``[directory]`` section), :class:`~ancre.errors.StoreLockedError` (another process owns
        the embedded store), :class:`~ancre.errors.EmbedderMismatchError`,
        :class:`~ancre.errors.StoreError`, :class:`~ancre.errors.EmbedderError`; nothing is left
        open when it raises.
        """
        boot = Bootstrap(settings)
        try:
            return boot.query_parts()
        except BaseException:
            boot.close()
            raise


def build_answer_service(
    settings: Settings, retriever: Retriever, store: Store, directory: Directory, resolver: PrincipalResolver | None = None
) -> AnswerService:
    """Grounded answers: the chat client of ``llm`` (none: extractive mode), the judge of
    ``judge`` when a model is configured and ``judge.enabled``, and the audit log of ``audit``
    (default folder ``<data_dir>/audit``, key ``<data_dir>/audit.key``, created 0600 when
    pseudonymising and missing). ``resolver``: P(user) (default: the directory alone). Raises
    :class:`~ancre.errors.ConfigError` naming ``llm.url`` / ``llm.model`` when missing."""
    chat = make_chat_client(settings.llm)
    judge = Judge.from_config(settings.judge, settings.llm) if chat is not None and settings.judge.enabled else None
    audit = None
    a = settings.audit
    if a.enabled:
        audit = open_audit_log(a, Path(settings.data_dir))
    return AnswerService(retriever, store, directory, settings, chat, judge, audit, resolver=resolver)


class Bootstrap(Closing):
    """The parts of one ancre process, each built from ``settings`` at first use and kept.

    Building one makes ancre's files private: the process umask gains 077 and an existing data
    directory (and audit folder) loses group/other permissions
    (:func:`~ancre.index.private.make_private`). :meth:`close` releases what was built (the
    connectors, the state DB, the store and its lock). Not thread-safe while building: build the
    parts a process shares before serving from several threads.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.data_dir = Path(settings.data_dir)
        make_private(self.data_dir, Path(settings.audit.dir) if settings.audit.dir is not None else None)
        self._built: list[Connector] = []

    @cached_property
    def embedder(self) -> Embedder:
        """The configured embedder (``e5-local`` by default). Raises ``ConfigError``."""
        return make_embedder(self.settings.embedder)

    @cached_property
    def store(self) -> Store:
        """The store, opened and checked against the embedder (raises ``EmbedderMismatchError``,
        ``StoreLockedError``, ``StoreError``)."""
        return open_store(self.settings.store, self.data_dir, self.embedder)

    @cached_property
    def state(self) -> StateDB:
        """The sync state DB (``<data_dir>/state.sqlite3``)."""
        return StateDB(self.data_dir / "state.sqlite3")

    @cached_property
    def cursors(self) -> CursorStore:
        """The change feeds' cursors the engine keeps (the ``source_cursors`` table of the state
        DB's file, :mod:`ancre.index.cursors`)."""
        return CursorStore(self.data_dir / "state.sqlite3")

    @cached_property
    def bm25(self) -> Bm25Manager:
        """BM25 snapshots (``<data_dir>/bm25``)."""
        return Bm25Manager(self.data_dir / "bm25")

    @cached_property
    def acl_writer(self) -> AclWriter:
        """The process's one ACL writer, shared by the sync engine and the query core's live
        rights check (:mod:`ancre.index.acl_writer`). Read-only with a Qdrant server until this
        process builds a sync engine: a query process apart from the daemon never writes ACLs."""
        return AclWriter(self.store, self.state, read_only=self.settings.store.kind != "edge")

    @cached_property
    def directory(self) -> Directory:
        """Who is in which group, cached ``directory.cache_ttl_s`` seconds. Raises ``ConfigError``."""
        return make_directory(self.settings.directory)

    @cached_property
    def principals(self) -> PrincipalResolver:
        """P(user) for the query side, the CLI and the daemon: the union of the directory's ``sid:``
        principals and those of every provider the configured sources declare
        (:meth:`principal_providers`). A provider that fails makes the resolution raise
        (``DirectoryError``: fail closed). Raises ``ConfigError`` as :attr:`directory` does."""
        return PrincipalResolver([DirectoryProvider(self.directory), *self.principal_providers()])

    def principal_providers(self) -> list[PrincipalProvider]:
        """The principal providers the configured sources add to the directory's, in config
        order (``SourceKind.providers`` in :mod:`ancre.connectors.registry`, e.g. the Entra
        provider of a SharePoint source)."""
        return principal_providers(self.settings.sources, self.source_context())

    def source_context(self) -> SourceContext:
        """What a connector factory gets: the (lazily built) directory, the ignore globs, ancre's
        private paths and the data directory."""
        return SourceContext(
            directory=lambda: self.directory, ignore=self.settings.ignore,
            private_paths=self.private_paths(), data_dir=self.data_dir,
        )

    def private_paths(self) -> tuple[Path, ...]:
        """ancre's own files (data directory, audit folder and key): never a document, even
        through a link."""
        return self.settings.private_paths()

    def connector(self, src: SourceSettings) -> Connector:
        """A new connector of one configured source, built by its kind's factory
        (:data:`ancre.connectors.registry.REGISTRY`); closed by :meth:`close` if the caller has
        not. Raises :class:`~ancre.errors.ConfigError` for a kind this build does not know."""
        conn = make_connector(src, self.source_context())
        self._built.append(conn)
        return conn

    def connectors(self) -> list[Connector]:
        """Connectors of every configured source, in config order."""
        return [self.connector(s) for s in self.settings.sources]

    @contextmanager
    def scoped_connector(self, src: SourceSettings) -> Iterator[Connector]:
        """A new connector of one configured source for the ``with`` block only, built as
        :meth:`connector` builds it and closed at the block's end (a question to a process that
        runs for long, e.g. ``acl explain`` through the control socket: it keeps no connection).
        Raises as :meth:`connector`."""
        conn = make_connector(src, self.source_context())
        try:
            yield conn
        finally:
            if isinstance(conn, Closeable):
                conn.close()

    def query_parts(self) -> QueryParts:
        """The query core's parts over this bootstrap's (opens the store and the state DB).
        ``connector`` builds a connector of the configured source of that id
        (:meth:`connector`). Raises as :attr:`store` and :attr:`directory` (the parts already
        built stay open, released by :meth:`close`)."""
        return QueryParts(
            store=self.store, embedder=self.embedder, bm25=self.bm25, state=self.state,
            directory=self.directory, connector=lambda source_id: self.connector(self.settings.source(source_id)),
            principals=self.principals, acl_writer=self.acl_writer,
        )

    def close(self) -> None:
        """Release every connector built here (the :class:`~ancre.connectors.base.Closeable`
        ones), the cursor store, the state DB and the store (and its lock)."""
        built, self._built = self._built, []
        for conn in built:
            if isinstance(conn, Closeable):
                try:
                    conn.close()
                except Exception as e:  # the store and state must still be released
                    log.debug("closing connector %s: %s", conn.source_id, e)
        if "cursors" in self.__dict__:
            self.cursors.close()
        if "state" in self.__dict__:
            self.state.close()
        if "store" in self.__dict__:
            self.store.close()


__all__ = ["Bootstrap", "QueryParts", "build_answer_service"]
