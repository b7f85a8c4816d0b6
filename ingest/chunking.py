"""Structure-aware chunking of extracted blocks (docs/ARCHITECTURE.md "Data model and the rights filter").

Rules, in reading order:

* A heading opens a new section: the chunk being filled is closed (unless it holds only headings,
  so a title and its first sub-heading stay with the first paragraph) and the heading path is
  updated by level (a level-2 heading replaces the previous level-2 one and everything below it).
* Paragraphs and table rows are packed, separated by ``"\\n"``, into chunks of at most
  ``target_chars`` characters. A unit that does not fit in an empty chunk is split: at sentence
  ends first, then between words, and a single longer "word" is cut. A table row is split only in
  that last resort; otherwise rows stay whole.
* **Context line (our choice):** a chunk that continues a section, rather than starting at its
  heading, begins with the nearest heading's text on its own line; a chunk that continues a table
  also repeats the table's first row (its header) after it. Both help retrieval, BM25 and vectors
  alike, since a bare "CHF 220 HT" says little without "Astreinte (par heure)" or "Conditions
  financières". Neither is added when it would take more than half of ``target_chars``.
* ``overlap_chars`` > 0 repeats the end of the previous chunk at the start of the next one within
  the same section: its last whole lines when they fit, else the end of its last line from a word
  boundary (inside a table only whole rows are repeated).
* A chunk holding text of a block read by OCR (``Block.ocr``) is marked ``Chunk.ocr``.
* Page breaks carry no text and open no chunk. No chunk is empty; ``chunk_index`` is 0..n-1 in
  reading order, and point ids follow from :attr:`ancre.models.Chunk.point_id`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ancre.models import Block, BlockKind, Chunk

__all__ = ["chunk_blocks"]

_SENTENCE_END = re.compile(r"(?<=[.!?…;:])\s+")


def _pieces(text: str, limit: int) -> list[str]:
    """Cut ``text`` into sentences; a sentence longer than ``limit`` characters into words; a word
    longer than that into ``limit``-sized slices. Every piece is non-empty and at most ``limit``."""
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        if len(sentence) <= limit:
            if sentence:
                out.append(sentence)
            continue
        for word in sentence.split():
            out.extend(word[i : i + limit] for i in range(0, len(word), limit))
    return out


def _tail(text: str, n: int, whole_lines_only: bool) -> str:
    """At most ``n`` characters from the end of ``text``: its last whole lines if any fit, else
    (unless ``whole_lines_only``) the end of its last line from a word boundary."""
    if n <= 0 or not text:
        return ""
    lines = text.split("\n")
    kept: list[str] = []
    size = -1
    for line in reversed(lines):
        if size + 1 + len(line) > n:
            break
        kept.insert(0, line)
        size += 1 + len(line)
    if kept:
        return "\n".join(kept)
    if whole_lines_only:
        return ""
    cut = lines[-1][-n:]
    space = re.search(r"\s", cut)
    return cut[space.end() :] if space else ""


class _Packer:
    """Greedy packer of lines into chunks; see the module docstring for the rules."""

    def __init__(self, doc_id: str, target: int, overlap: int) -> None:
        self.doc_id, self.target, self.overlap = doc_id, target, overlap
        self.chunks: list[Chunk] = []
        self.path: list[tuple[int, str]] = []  # (level, heading text), outermost first
        self.table_header: str | None = None  # first row of the table being read, if any
        self.lines: list[str] = []  # the chunk being filled
        self.size = 0  # len("\n".join(self.lines))
        self.n_context = 0  # leading lines that only repeat context (heading, table header, overlap)
        self.has_body = False  # holds a paragraph or table row (not only headings / context)
        self.last_body = ""  # text of the last emitted chunk without its context lines
        self.block_ocr = False  # the block being added was read by OCR
        self.ocr = False  # the chunk being filled holds OCR'd text

    def _fits(self, text: str) -> bool:
        return self.size + (1 if self.lines else 0) + len(text) <= self.target

    def _new_line(self, text: str) -> None:
        self.size += len(text) + (1 if self.lines else 0)
        self.lines.append(text)
        self.ocr |= self.block_ocr

    def emit(self) -> None:
        """Close the chunk being filled (dropped if it holds only context lines)."""
        if len(self.lines) > self.n_context:
            path = tuple(t for _, t in self.path)
            self.chunks.append(Chunk(self.doc_id, len(self.chunks), "\n".join(self.lines), path, self.ocr))
            self.last_body = "\n".join(self.lines[self.n_context :])
        self.lines, self.size, self.n_context, self.has_body = [], 0, 0, False
        self.ocr = False

    def _continue(self, in_table: bool, unit: str) -> None:
        """Close the full chunk; open the next one of the same section with its context lines."""
        self.emit()
        context: list[str] = []
        if self.path:
            context.append(self.path[-1][1])
        if in_table and self.table_header and self.table_header != unit:
            context.append(self.table_header)
        budget = self.target // 2
        for line in context:
            if self.size + 1 + len(line) <= budget:
                self._new_line(line)
                self.n_context += 1
        tail = _tail(self.last_body, min(self.overlap, budget - self.size - 1), in_table)
        if tail:
            self._new_line(tail)
            self.n_context += 1

    def heading(self, text: str, level: int) -> None:
        if self.has_body or not self._fits(text):
            self.emit()
        level = max(level, 1)
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, text))
        self.table_header = None
        self.add(text, body=False)

    def add(self, text: str, *, body: bool, in_table: bool = False) -> None:
        """Add one block's text: whole if it fits here or in the next chunk, else split."""
        if self._fits(text):
            self._new_line(text)
            self.has_body |= body
            return
        if self.has_body:
            self._continue(in_table, text)
            if self._fits(text):
                self._new_line(text)
                self.has_body |= body
                return
        started = False  # last resort: sentences, then words, packed on one line per chunk
        for piece in _pieces(text, self.target):
            if started and self.size + 1 + len(piece) <= self.target:
                self.lines[-1] += " " + piece
                self.size += 1 + len(piece)
                self.ocr |= self.block_ocr
            elif not started and self._fits(piece):
                self._new_line(piece)
            else:
                self._continue(in_table, text)
                if not self._fits(piece):  # the context leaves too little room: drop it
                    self.lines, self.size, self.n_context = [], 0, 0
                self._new_line(piece)
            started = True
            self.has_body |= body


def chunk_blocks(
    doc_id: str,
    blocks: Sequence[Block],
    target_chars: int = 1000,
    overlap_chars: int = 0,
) -> list[Chunk]:
    """Cut a document's blocks into chunks of at most ``target_chars`` characters.

    ``doc_id`` goes into every chunk; ``blocks`` come from
    :func:`ancre.ingest.extract.extract_bytes` in reading order; ``target_chars`` is the maximum
    chunk length in characters (every chunk's ``len(text) <= target_chars``); ``overlap_chars`` how
    many characters of a chunk's end are repeated at the start of the next one in the same section
    (0 = none). Returns chunks with ``chunk_index`` 0..n-1 and their ``heading_path``; ``[]`` for no
    block or only empty blocks. See the module docstring for the rules. Raises ``ValueError`` when
    ``target_chars < 1`` or ``overlap_chars`` is negative or not below ``target_chars``.
    """
    if target_chars < 1:
        raise ValueError(f"target_chars must be >= 1, got {target_chars}")
    if not 0 <= overlap_chars < target_chars:
        raise ValueError(f"overlap_chars must be in [0, target_chars), got {overlap_chars}")
    packer = _Packer(doc_id, target_chars, overlap_chars)
    previous_kind: BlockKind | None = None
    for block in blocks:
        text = block.text.strip()
        if block.kind is BlockKind.PAGE_BREAK or not text:
            continue
        packer.block_ocr = block.ocr
        if block.kind is BlockKind.HEADING:
            packer.heading(text, block.level)
        elif block.kind is BlockKind.TABLE_ROW:
            if previous_kind is not BlockKind.TABLE_ROW:
                packer.table_header = text
            packer.add(text, body=True, in_table=True)
        else:
            packer.table_header = None
            packer.add(text, body=True)
        previous_kind = block.kind
    packer.emit()
    return packer.chunks
