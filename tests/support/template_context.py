"""Contexts made of a generated template share's documents (:mod:`support.template_corpus`) without a
store: each document is extracted, given its subject and chunked by the product's own pipeline
(:func:`ancre.ingest.extract.extract_bytes`, :func:`ancre.ingest.subject.document_subject`,
:func:`ancre.ingest.chunking.chunk_blocks`, :func:`ancre.ingest.subject.chunk_header`), so unit tests
of the answer side read the extracts, subjects and headers a synced index would give."""

from __future__ import annotations

from pathlib import PurePosixPath

from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.extract import extract_bytes
from ancre.ingest.subject import chunk_header, document_subject
from ancre.query.context import Context, Extract, Source, find_versions
from ancre.settings import ChunkingConfig
from support.template_corpus import TemplateCorpus

UNC = "\\\\SRV-FICHIERS\\Partage\\"


def extracts(corpus: TemplateCorpus, path: str) -> tuple[Extract, ...]:
    """Every chunk of the share's ``path`` (relative, POSIX) as an :class:`Extract`."""
    data = (corpus.share / path).read_bytes()
    name = PurePosixPath(path).name
    blocks = extract_bytes(data, name)
    subject = document_subject(blocks, path)
    cfg = ChunkingConfig()
    folder = str(PurePosixPath(path).parent)
    doc_id = f"partage:{path}"
    return tuple(
        Extract(name, doc_id, c.chunk_index, c.text, UNC + folder.replace("/", "\\") + "\\", path, "documents",
                0.03 if c.chunk_index == 0 else None, tuple(c.heading_path), subject=subject,
                header=chunk_header(subject, c.heading_path))
        for c in chunk_blocks(doc_id, blocks, cfg.target_chars, cfg.overlap_chars)
    )


def context(corpus: TemplateCorpus, *paths: str) -> Context:
    """A context showing every chunk of ``paths`` in this order, with its version groups."""
    shown: list[Extract] = []
    sources: list[Source] = []
    for i, path in enumerate(paths):
        ex = extracts(corpus, path)
        shown.extend(ex)
        first = ex[0]
        sources.append(Source(first.filename, first.doc_id, path, first.location, "documents", "acl", 0.03 - i * 0.001))
    return Context(tuple(shown), tuple(sources), len(paths) == 1, find_versions(shown, sources))


__all__ = ["context", "extracts"]
