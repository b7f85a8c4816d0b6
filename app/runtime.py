"""The process's runtime: the composition root (:class:`~ancre.query.bootstrap.Bootstrap`: store,
embedder, state DB, BM25 snapshots, directory, principal providers, ACL writer, connectors) plus
the sync engine and the query core over those same parts
(:class:`~ancre.query.core.QueryCore`: retriever, live rights check, answer service). Used by the
CLI, the daemon and the API; :meth:`QueryCore.open <ancre.query.core.QueryCore.open>` builds the
same parts through the same :class:`~ancre.query.bootstrap.Bootstrap` (docs/ARCHITECTURE.md
"Composition root")."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from ancre.index.store import Maintainable
from ancre.query.bootstrap import Bootstrap
from ancre.query.core import QueryCore

if TYPE_CHECKING:
    from ancre.daemon.sync import SyncEngine
    from ancre.query.answer import AnswerService
    from ancre.query.live_acl import LiveAclChecker
    from ancre.query.retrieval import Retriever


class Runtime(Bootstrap):
    """Lazily-built components of one ancre process: the :class:`~ancre.query.bootstrap.Bootstrap`
    parts, the sync engine and the query core. Close it to release the store lock."""

    def store_needs_build(self) -> bool:
        """Whether the store keeps indexes built apart from its writes and they need a build now
        (:class:`~ancre.index.store.Maintainable`)."""
        store = self.store
        return isinstance(store, Maintainable) and store.needs_build()

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
        return QueryCore(self.settings, self.query_parts())

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
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()
        super().close()

