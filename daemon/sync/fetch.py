"""The sync engine's fetching and extracting (:class:`Fetcher`): an item's bytes from its source
and their SHA-256, then its text extracted in the worker process, its subject and its chunks, each
with its contextual header (docs/ARCHITECTURE.md "Data flow of indexing", step 3). Reads and
computes; writes nothing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

from ancre.connectors.base import Connector
from ancre.daemon.faults import crash_point
from ancre.errors import ExtractionError
from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.subject import chunk_header, document_subject
from ancre.models import Block, Chunk, SourceItem, Subject
from ancre.settings import ChunkingConfig


class Extractor(Protocol):
    """What extracts a file's text: :class:`~ancre.ingest.worker.ExtractionPool` (a worker process
    with time and size limits)."""

    def extract(self, data: bytes, filename: str) -> tuple[Block, ...]:
        """The blocks of ``data`` (``filename`` picks the format); raises
        :class:`~ancre.errors.ExtractionError`."""
        ...


class Fetched(NamedTuple):
    """An item's bytes as read from its source and their SHA-256 (hex); unpack it at once, so that
    the bytes are dropped as soon as they are extracted (peak memory)."""

    data: bytes
    content_hash: str


@dataclass(frozen=True)
class Extracted:
    """Whose document it is (:func:`~ancre.ingest.subject.document_subject`) and its chunks."""

    subject: Subject
    chunks: list[Chunk]


class Fetcher:
    """Fetches items' bytes and extracts them with ``pool``, chunked as ``chunking`` says into at
    most ``max_chunks`` chunks (``extraction.max_chunks``)."""

    def __init__(self, pool: Extractor, chunking: ChunkingConfig, max_chunks: int) -> None:
        self.pool = pool
        self.chunking = chunking
        self.max_chunks = max_chunks

    @staticmethod
    def fetch(connector: Connector, item: SourceItem) -> Fetched:
        """``item``'s bytes and their SHA-256. Raises ``OSError`` (unreadable now) and
        ``SourceUnavailableError`` as ``connector.fetch_content`` does."""
        data = connector.fetch_content(item)
        return Fetched(data, hashlib.sha256(data).hexdigest())

    def extract(self, item: SourceItem, data: bytes) -> tuple[Block, ...]:
        """The blocks of ``item``'s bytes ``data``, extracted in the worker process. Raises
        :class:`~ancre.errors.ExtractionError` as the extractor does."""
        crash_point("extract")
        return self.pool.extract(data, item.filename)

    def chunk(self, item: SourceItem, blocks: tuple[Block, ...]) -> Extracted:
        """``item``'s subject and chunks from its extracted ``blocks``. Raises
        :class:`~ancre.errors.ExtractionError` as :meth:`chunks_of` does."""
        subject = document_subject(blocks, item.path)
        return Extracted(subject, self.chunks_of(item, blocks, subject))

    def chunks_of(self, item: SourceItem, blocks: tuple[Block, ...], subject: Subject) -> list[Chunk]:
        """The chunks of ``item``'s extracted ``blocks``, each with its contextual header
        (:func:`~ancre.ingest.subject.chunk_header` of the document's ``subject``). Raises
        :class:`~ancre.errors.ExtractionError` (``empty``: no text; ``too_large``: over
        ``max_chunks`` chunks)."""
        cfg = self.chunking
        chunks = [
            replace(c, header=chunk_header(subject, c.heading_path))
            for c in chunk_blocks(item.doc_id, blocks, cfg.target_chars, cfg.overlap_chars)
        ]
        if not chunks:
            raise ExtractionError("empty", "no text found")
        if len(chunks) > self.max_chunks:
            raise ExtractionError("too_large", f"{len(chunks)} chunks > extraction.max_chunks ({self.max_chunks})")
        return chunks


__all__ = ["Extracted", "Extractor", "Fetched", "Fetcher"]
