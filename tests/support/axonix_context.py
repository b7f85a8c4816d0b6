"""Contexts made of the bundled Axonix documents' real chunks, without a store: each document is
extracted and chunked by the product's own pipeline (:func:`ancre.ingest.extract.extract_bytes`,
:func:`ancre.ingest.chunking.chunk_blocks` with the default chunk size), so unit tests of the
answer-side controls read the same extracts a synced index would show."""

from __future__ import annotations

from functools import cache
from pathlib import PurePosixPath

from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.extract import extract_bytes
from ancre.query.context import Context, Extract, Source, find_versions
from ancre.settings import ChunkingConfig
from support.corpus import CORPUS

UNC = "\\\\SRV-FICHIERS\\Partage\\"
SHARE = CORPUS / "share"


@cache
def paths() -> dict[str, str]:
    """File name → path relative to the share (POSIX)."""
    return {p.name: p.relative_to(SHARE).as_posix() for p in SHARE.rglob("*") if p.is_file()}


@cache
def extracts(filename: str) -> tuple[Extract, ...]:
    """Every chunk of the share's ``filename`` as an :class:`Extract` (reading order)."""
    path = paths()[filename]
    blocks = extract_bytes((SHARE / path).read_bytes(), filename)
    chunking = ChunkingConfig()
    folder = str(PurePosixPath(path).parent)
    location = UNC + folder.replace("/", "\\") + "\\"
    doc_id = f"partage:{path}"
    collection = "documentation" if path.startswith("DOCUMENTATION/") else "documents"
    return tuple(
        Extract(filename, doc_id, c.chunk_index, c.text, location, path, collection, 0.03 if i == 0 else None,
                tuple(c.heading_path))
        for i, c in enumerate(chunk_blocks(doc_id, blocks, chunking.target_chars, chunking.overlap_chars))
    )


def context(*filenames: str, chunks: dict[str, range] | None = None) -> Context:
    """A context showing ``filenames`` in this order (all their chunks, or those of ``chunks``),
    with its version groups."""
    shown: list[Extract] = []
    sources: list[Source] = []
    for i, name in enumerate(filenames):
        ex = extracts(name)
        if chunks and name in chunks:
            ex = tuple(e for e in ex if e.chunk_index in chunks[name])
        shown.extend(ex)
        first = ex[0]
        sources.append(Source(name, first.doc_id, first.path, first.location, first.collection, "acl", 0.03 - i * 0.001))
    return Context(tuple(shown), tuple(sources), len(filenames) == 1, find_versions(shown, sources))


__all__ = ["context", "extracts", "paths"]
