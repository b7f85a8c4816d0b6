"""Wires the parts from a :class:`~ancre.config.Settings`: store, embedder, state DB, BM25
snapshots, directory, connectors, sync engine, retriever and answer service. Used by the CLI, the daemon and the API
so that every entry point builds them the same way."""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ancre.acl.directory import CachedDirectory, Directory, FileDirectory
from ancre.config import Settings, SourceSettings
from ancre.connectors.base import Closeable, Connector, SourceContext
from ancre.connectors.registry import source_kind
from ancre.acl.providers import DirectoryProvider, PrincipalProvider, PrincipalResolver
from ancre.daemon.private import restrict_umask, tighten_tree
from ancre.index.state import StateDB
from ancre.errors import ConfigError
from ancre.index.bm25 import Bm25Manager
from ancre.index.embedder_factory import make_embedder
from ancre.index.embedders import Embedder
from ancre.index.store import Store
from ancre.index.store_factory import make_store
from ancre.models import COLLECTIONS

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
        (:mod:`ancre.daemon.private`)."""
        self.settings = settings
        self.data_dir = Path(settings.data_dir)
        restrict_umask()
        tighten_tree(self.data_dir)
        if settings.audit.dir is not None:
            tighten_tree(Path(settings.audit.dir))
        self._built: list[Connector] = []

    @cached_property
    def embedder(self) -> Embedder:
        """The configured embedder (``e5-local`` by default)."""
        return make_embedder(self.settings.embedder)

    @cached_property
    def store(self) -> Store:
        """The store, opened and checked against the embedder (raises ``EmbedderMismatchError``,
        ``StoreLockedError``)."""
        st = make_store(self.settings.store, self.data_dir)
        st.open(self.embedder.name, self.embedder.dim)
        return st

    @cached_property
    def state(self) -> StateDB:
        """The sync state DB (``<data_dir>/state.sqlite3``)."""
        return StateDB(self.data_dir / "state.sqlite3")

    @cached_property
    def bm25(self) -> Bm25Manager:
        """BM25 snapshots (``<data_dir>/bm25``)."""
        return Bm25Manager(self.data_dir / "bm25")

    @cached_property
    def directory(self) -> Directory:
        """Who is in which group, cached ``directory.cache_ttl_s`` seconds."""
        cfg = self.settings.directory
        if cfg.kind == "file":
            if cfg.path is None:
                raise ConfigError("directory.path is required when directory.kind = 'file'")
            inner: Directory = FileDirectory(Path(cfg.path))
        elif cfg.kind == "ldap":
            from ancre.acl.ldap_directory import LdapDirectory

            inner = LdapDirectory.from_config(cfg)
        else:
            raise ConfigError(f"directory.kind = {cfg.kind!r} is not available in this build")
        return CachedDirectory(inner, cfg.cache_ttl_s)

    @cached_property
    def principals(self) -> PrincipalResolver:
        """P(user) for the query side, the CLI and the daemon: the union of the directory's ``sid:``
        principals and those of every provider the configured sources declare
        (:meth:`principal_providers`). A provider that fails makes the resolution raise
        (``DirectoryError``: fail closed). Raises ``ConfigError`` as :attr:`directory` does."""
        return PrincipalResolver([DirectoryProvider(self.directory), *self.principal_providers()])

    def principal_providers(self) -> list[PrincipalProvider]:
        """The principal providers the configured sources add to the directory's, in config order.

        Hook for the source registry: each source whose registry entry declares
        ``SourceKind.providers`` contributes ``kind.providers(src_settings, source_context)``
        (e.g. ``aad:`` / ``sp:`` principals of a SharePoint site).
        """
        out: list[PrincipalProvider] = []
        for src in self.settings.sources:
            kind = source_kind(src.kind)
            if kind.providers is not None:
                out.extend(kind.providers(src, self.source_context()))
        return out

    def connector(self, src: SourceSettings) -> Connector:
        """A new connector of one configured source, built by its kind's factory
        (:data:`ancre.connectors.registry.REGISTRY`); closed by :meth:`close` if the caller has
        not. Raises :class:`ConfigError` for a kind this build does not know."""
        conn = source_kind(src.kind).build(src, self.source_context())
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
        a = self.settings.audit
        paths = [self.data_dir]
        paths += [Path(p) for p in (a.dir, a.key_file) if p is not None]
        return tuple(paths)

    def connectors(self) -> list[Connector]:
        """Connectors of every configured source, in config order."""
        return [self.connector(s) for s in self.settings.sources]

    @cached_property
    def engine(self) -> SyncEngine:
        """The sync engine (starts the extraction worker on first use)."""
        from ancre.ingest.extract import ExtractOptions
        from ancre.ingest.limits import ExtractionLimits
        from ancre.ingest.worker import ExtractionPool
        from ancre.daemon.sync import SyncEngine

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
        return SyncEngine(self.settings, self.store, self.embedder, self.state, self.bm25, pool)

    @cached_property
    def live_acl(self) -> LiveAclChecker:
        """The query side's live rights check: its own connectors (built at the first question
        that needs each source, kept for the process), the store and the state DB it updates."""
        from ancre.query.live_acl import LiveAclChecker

        return LiveAclChecker(
            lambda source_id: self.connector(self.settings.source(source_id)),
            self.store, self.state, self.settings.query,
        )

    @cached_property
    def retriever(self) -> Retriever:
        """The query core's hybrid retriever, with the live rights check unless
        ``query.live_acl = false``."""
        from ancre.query.retrieval import Retriever

        live = self.live_acl if self.settings.query.live_acl else None
        return Retriever(
            self.store, self.embedder, self.bm25, self.settings.query, live,
            keyword_in_store=self.settings.store.bm25 == "qdrant",
        )

    @cached_property
    def answer_service(self) -> AnswerService:
        """Grounded answers (issue 3): the chat client of ``llm`` (none: extractive mode), the
        judge of ``judge`` when a model is configured and ``judge.enabled``, and the audit log of
        ``audit`` (default folder ``<data_dir>/audit``, key ``<data_dir>/audit.key``)."""
        from ancre.query.answer import AnswerService
        from ancre.query.audit import AuditLog, load_or_create_key
        from ancre.query.judge import Judge
        from ancre.query.llm import make_chat_client

        cfg = self.settings
        chat = make_chat_client(cfg.llm)
        judge = Judge.from_config(cfg.judge, cfg.llm) if chat is not None and cfg.judge.enabled else None
        audit = None
        if cfg.audit.enabled:
            key = None
            if cfg.audit.pseudonymize:
                key = load_or_create_key(Path(cfg.audit.key_file or self.data_dir / "audit.key"))
            audit = AuditLog(Path(cfg.audit.dir or self.data_dir / "audit"), cfg.audit.retention_days, key)
        return AnswerService(
            self.retriever, self.store, self.directory, cfg, chat, judge, audit, resolver=self.principals
        )

    def index_not_ready(self) -> str | None:
        """``None`` once every configured source has finished a first pass; else why answers
        would rest on an incomplete index (the API answers 503 meanwhile instead of confident
        refusals). With no pass recorded here but points in the store (an API running apart from
        the daemon on a Qdrant server), the index is taken as ready."""
        if getattr(self, "_ready", False):
            return None
        finished = {src for src, _start, end, _outcome, _summary in self.state.last_passes(1000) if end is not None}
        missing = [s.id for s in self.settings.sources if s.id not in finished]
        if not missing:
            self._ready = True
            return None
        if not finished and any(self.store.count(c) for c in COLLECTIONS):
            self._ready = True
            return None
        return f"the index is being built: first sync of {', '.join(missing)} not finished"

    def close(self) -> None:
        """Release the extraction worker, every connector built here (the
        :class:`~ancre.connectors.base.Closeable` ones), the state DB and the store (and its lock)."""
        if "answer_service" in self.__dict__:
            self.answer_service.close()
        if "live_acl" in self.__dict__:
            self.live_acl.close()
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

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

