"""Plain text and Markdown (``.txt``, ``.md``, ``.markdown``): UTF-8 (BOM dropped), else cp1252.
Markdown is parsed with markdown-it-py (CommonMark + tables): ATX/setext headings become
``HEADING`` blocks with their level, table rows ``TABLE_ROW`` blocks, every other top-level block
(paragraphs, lists, fenced code, quotes) a ``PARAGRAPH`` holding its source lines. Plain text is
split on blank lines.
"""

from __future__ import annotations

import re

from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions, clean, decode_text
from ancre.models import Block, BlockKind, nfc

__all__ = ["read_markdown", "read_txt"]


def read_txt(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """One paragraph per run of lines between blank lines. ``options`` are not used."""
    text = decode_text(data).replace("\r\n", "\n").replace("\r", "\n")
    return [Block(BlockKind.PARAGRAPH, t) for t in (clean(p) for p in re.split(r"\n\s*\n", text)) if t]


def read_markdown(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """Headings, table rows and top-level blocks (see the module docstring). ``options`` are not
    used."""
    from markdown_it import MarkdownIt

    text = decode_text(data).replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    out: list[Block] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level != 0 or tok.nesting == -1:
            i += 1
            continue
        if tok.type == "heading_open":
            inline = tokens[i + 1]
            heading = clean(inline.content)
            if heading:
                out.append(Block(BlockKind.HEADING, heading, level=int(tok.tag[1:])))
        elif tok.type == "table_open":
            j = i + 1
            row: list[str] = []
            while j < len(tokens) and tokens[j].type != "table_close":
                t = tokens[j]
                if t.type == "inline":
                    row.append(clean(t.content))
                elif t.type == "tr_close":
                    if any(row):
                        out.append(Block(BlockKind.TABLE_ROW, " | ".join(c for c in row if c)))
                    row = []
                j += 1
            i = j
        elif tok.map is not None:  # paragraph, list, fence, code, blockquote, html, hr: source lines
            start, end = tok.map
            source = "\n".join(lines[start:end])
            if tok.type == "hr":
                source = ""
            cleaned = clean(source) if tok.type not in ("fence", "code_block") else source.strip()
            if cleaned:
                out.append(Block(BlockKind.PARAGRAPH, nfc(cleaned)))
        i += 1
    return out
