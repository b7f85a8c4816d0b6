"""The composition root: wires the parts from a :class:`~ancre.config.Settings` — store,
embedder, state DB, BM25 snapshots, directory, connectors, sync engine — and hands the query side
its parts (:class:`~ancre.query.core.QueryCore`: retriever, live rights check, answer service).
Used by the CLI, the daemon and the API so that every entry point builds them the same way; each
part comes from one factory below (:func:`~ancre.index.store_factory.open_store`,
:func:`~ancre.index.embedder_factory.make_embedder`,
:func:`~ancre.acl.directory_factory.make_directory`,
:func:`~ancre.connectors.registry.make_connector`), the ones :meth:`QueryCore.open
<ancre.query.core.QueryCore.open>` uses too (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Self

from ancre.acl.directory import Directory
from ancre.acl.directory_factory import make_directory
from ancre.acl.providers import DirectoryProvider, PrincipalProvider, PrincipalResolver
from ancre.config import Settings, SourceSettings
from ancre.connectors.base import Closeable, Connector, SourceContext
from ancre.connectors.registry import make_connector, principal_providers
from ancre.index.acl_writer import AclWriter
from ancre.index.bm25 import Bm25Manager
from ancre.index.embedder_factory import make_embedder
from ancre.index.embedders import Embedder
from ancre.index.private import make_private
from ancre.index.state import StateDB
from ancre.index.store import Maintainable, Store
from ancre.index.store_factory import open_store
from ancre.query.core import QueryCore, QueryParts

log = logging.getLogger("ancre.app.runtime")

if TYPE_CHECKING:
    from ancre.daemon.sync import SyncEngine
    from ancre.query.answer import AnswerService
    from ancre.query.live_acl import LiveAclChecker
    from ancre.query.retrieval import Retriever


class Runtime:
    """Lazily-built components of one ancre process. Close it to release the store lock."""

    def __init__(self, settings: Settings) -> None:
        """Builds nothing yet, but makes ancre's files private: the process umask gains 077 and an
        existing data directory (and audit folder) loses group/other permissions
        (:func:`ancre.index.private.make_private`)."""
        self.settings = settings
        self.data_dir = Path(settings.data_dir)
        make_private(self.data_dir, Path(settings.audit.dir) if settings.audit.dir is not None else None)
        self._built: list[Connector] = []

    @cached_property
    def embedder(self) -> Embedder:
        """The configured embedder (``e5-local`` by default)."""
        return make_embedder(self.settings.embedder)

    @cached_property
    def store(self) -> Store:
        """The store, opened and checked against the embedder (raises ``EmbedderMismatchError``,
        ``StoreLockedError``)."""
        return open_store(self.settings.store, self.data_dir, self.embedder)

    def store_needs_build(self) -> bool:
        """Whether the store keeps indexes built apart from its writes and they need a build now
        (:class:`~ancre.index.store.Maintainable`)."""
        store = self.store
        return isinstance(store, Maintainable) and store.needs_build()

    @cached_property
    def state(self) -> StateDB:
        """The sync state DB (``<data_dir>/state.sqlite3``)."""
        return StateDB(self.data_dir / "state.sqlite3")

    @cached_property
    def acl_writer(self) -> AclWriter:
        """The process's one ACL writer, shared by the sync engine and the query core's live
        rights check (:mod:`ancre.index.acl_writer`). Read-only with a Qdrant server until this
        process builds a sync engine: a query process apart from the daemon never writes ACLs."""
        return AclWriter(self.store, self.state, read_only=self.settings.store.kind != "edge")

    @cached_property
    def bm25(self) -> Bm25Manager:
        """BM25 snapshots (``<data_dir>/bm25``)."""
        return Bm25Manager(self.data_dir / "bm25")

    @cached_property
    def directory(self) -> Directory:
        """Who is in which group, cached ``directory.cache_ttl_s`` seconds."""
        return make_directory(self.settings.directory)

    @cached_property
    def principals(self) -> PrincipalResolver:
        """P(user) for the query side, the CLI and the daemon: the union of the directory's ``sid:``
        principals and those of every provider the configured sources declare
        (``SourceKind.providers`` in :mod:`ancre.connectors.registry`). A provider that fails makes the resolution raise
        (``DirectoryError``: fail closed). Raises ``ConfigError`` as :attr:`directory` does."""
        return PrincipalResolver([DirectoryProvider(self.directory), *self.principal_providers()])

    def principal_providers(self) -> list[PrincipalProvider]:
        """The principal providers the configured sources add to the directory's, in config
        order (``SourceKind.providers``, e.g. the Entra provider of a SharePoint source)."""
        return principal_providers(self.settings.sources, self.source_context())

    def connector(self, src: SourceSettings) -> Connector:
        """A new connector of one configured source, built by its kind's factory
        (:data:`ancre.connectors.registry.REGISTRY`); closed by :meth:`close` if the caller has
        not. Raises :class:`ConfigError` for a kind this build does not know."""
        conn = make_connector(src, self.source_context())
        self._built.append(conn)
        return conn

    def source_context(self) -> SourceContext:
        """What a connector factory gets: the (lazily built) directory, the ignore globs, ancre's
        private paths and the data directory."""
        return SourceContext(
            directory=lambda: self.directory, ignore=self.settings.ignore,
            private_paths=self.private_paths(), data_dir=self.data_dir, state=lambda: self.state,
        )

    def private_paths(self) -> tuple[Path, ...]:
        """ancre's own files (data directory, audit folder and key): never a document, even
        through a link."""
        return self.settings.private_paths()

    def connectors(self) -> list[Connector]:
        """Connectors of every configured source, in config order."""
        return [self.connector(s) for s in self.settings.sources]

    @cached_property
    def engine(self) -> SyncEngine:
        """The sync engine (starts the extraction worker on first use)."""
        from ancre.daemon.sync import SyncEngine
        from ancre.ingest.extract import ExtractOptions
        from ancre.ingest.limits import ExtractionLimits
        from ancre.ingest.worker import ExtractionPool

        ex = self.settings.extraction
        options = ExtractOptions(
            ocr=ex.ocr, ocr_languages=ex.ocr_languages, ocr_dpi=ex.ocr_dpi, time_limit_s=ex.timeout_s,
            ocr_timeout_per_page_s=ex.ocr_timeout_per_page_s, ocr_timeout_max_s=ex.ocr_timeout_max_s,
        )
        pool = ExtractionPool(
            timeout_s=ex.timeout_s, options=options, max_extra_s=ex.ocr_timeout_max_s if ex.ocr else 0.0,
            limits=ExtractionLimits.from_config(ex),
        )
        self._pool = pool
        self.acl_writer.read_only = False  # this process syncs: it is the index's ACL writer
        return SyncEngine(self.settings, self.store, self.embedder, self.state, self.bm25, pool, acl_writer=self.acl_writer)

    @cached_property
    def query_core(self) -> QueryCore:
        """The query core over this runtime's parts (opens the store; the connectors of its live
        rights check are built at the first question that needs each source, kept for the
        process). The runtime owns the parts: closing the core leaves them open."""
        parts = QueryParts(
            store=self.store, embedder=self.embedder, bm25=self.bm25, state=self.state, directory=self.directory,
            connector=lambda source_id: self.connector(self.settings.source(source_id)),
            principals=self.principals, acl_writer=self.acl_writer,
        )
        return QueryCore(self.settings, parts)

    @property
    def live_acl(self) -> LiveAclChecker | None:
        """The query side's live rights check (``None`` when ``query.live_acl = false``)."""
        return self.query_core.live_acl

    @property
    def retriever(self) -> Retriever:
        """The query core's hybrid retriever, with the live rights check unless
        ``query.live_acl = false``."""
        return self.query_core.retriever

    @property
    def answer_service(self) -> AnswerService:
        """Grounded answers: :attr:`QueryCore.answers <ancre.query.core.QueryCore.answers>`."""
        return self.query_core.answers

    def index_not_ready(self) -> str | None:
        """``None`` once every configured source has finished a first pass, else why not
        (:meth:`QueryCore.not_ready <ancre.query.core.QueryCore.not_ready>`)."""
        return self.query_core.not_ready()

    def close(self) -> None:
        """Release the query core, the extraction worker, every connector built here (the
        :class:`~ancre.connectors.base.Closeable` ones), the state DB and the store (and its lock)."""
        if "query_core" in self.__dict__:
            self.query_core.close()
        built, self._built = self._built, []
        for conn in built:
            if isinstance(conn, Closeable):
                try:
                    conn.close()
                except Exception as e:  # noqa: BLE001 - the store and state must still be released
                    log.debug("closing connector %s: %s", conn.source_id, e)
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()
        if "state" in self.__dict__:
            self.state.close()
        if "store" in self.__dict__:
            self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

