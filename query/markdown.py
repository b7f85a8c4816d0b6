r"""Document text quoted in Markdown answers, so that it renders as the document reads.

Answers are Markdown (Open WebUI renders them with ``marked``, GitHub-flavoured). A quoted extract
is document text, not Markdown: « 4. Conditions financières » must not become a numbered list,
« # », « - », « * » or « _x_ » in a document must not become a heading, a list or emphasis, and
``<b>`` must not become HTML. So each text line is escaped (CommonMark §2.4: any ASCII
punctuation may be backslash-escaped; only the characters that could start a construct are), and
each line is its own paragraph inside the block quote.

Brackets: a link, an image, a footnote or a reference needs an unescaped ``]``, so ``]`` is
escaped and ``[`` is not — Open WebUI (0.12) reads ``\[ … \]`` as display math (``[Menu]``
written ``\[Menu\]`` vanishes from the page), and links any ``[2]`` or ``[2#x]`` to its 2nd
source (open-webui#11592): ``[2\]`` and ``[2\#x\]`` (``#`` escaped too, its ``#…`` part
would swallow the backslash) render as written and link nothing.

Table rows — extraction writes each row as its non-empty cells joined by ``" | "``
(:mod:`ancre.ingest.extract`) — become a GFM table: consecutive rows form one table whose first
row is the header, rows padded to the widest one (GFM drops cells beyond the header's count).
"""

from __future__ import annotations

import re

CELL_SEPARATOR = " | "
"""How extraction joins the cells of a table row."""

_BACKSLASH_RE = re.compile(r"\\(?=[!-/:-@\[-`{-~]|$)")
_INLINE_RE = re.compile(r"[`*\]<>~$#]")
_ENTITY_RE = re.compile(r"&(?=#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{1,31};)")
_UNDERSCORE_RE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_ORDERED_RE = re.compile(r"^(\d{1,9})([.)])(?=[ \t]|$)")
_BLOCK_START_RE = re.compile(r"^([#>+=|-])")


def escape_inline(text: str) -> str:
    """``text`` with the characters that could open an inline construct backslash-escaped:
    backticks and ``* ] < > ~ $ #``, an ``&`` that would start an entity, a ``_`` that is not inside a word
    (intraword ``_`` never makes emphasis: ``03_Contrat_Rochat`` stays as is), and a ``\\`` only
    where it would escape or break a line (before ASCII punctuation or at the end): a Windows
    path ``C:\\Axonix\\Agent`` stays as written."""
    text = _BACKSLASH_RE.sub(r"\\\\", text)
    text = _INLINE_RE.sub(lambda m: "\\" + m.group(0), text)
    text = _ENTITY_RE.sub(r"\\&", text)
    return _UNDERSCORE_RE.sub(r"\\_", text)


def escape_line(line: str) -> str:
    """One line of document text as a Markdown paragraph line: leading spaces dropped (no
    indented code), inline constructs escaped, and a leading list / heading / quote / thematic
    break / setext / table marker escaped (``4. Titre`` → ``4\\. Titre``, ``# x`` → ``\\# x``)."""
    line = escape_inline(line.strip())
    line = _ORDERED_RE.sub(r"\1\\\2", line)
    return _BLOCK_START_RE.sub(r"\\\1", line)


def is_table_row(line: str) -> bool:
    """Whether an extract line is a table row as extraction writes it (cells joined by ``" | "``)."""
    return CELL_SEPARATOR in line.strip()


def table(rows: list[str]) -> str:
    """Table rows (cells joined by ``" | "``) as a GFM table, the first row as its header."""
    cells = [[escape_inline(c.strip()).replace("|", "\\|") for c in r.strip().split(CELL_SEPARATOR)] for r in rows]
    width = max(len(r) for r in cells)
    padded = [r + [""] * (width - len(r)) for r in cells]
    lines = ["| " + " | ".join(padded[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in padded[1:]]
    return "\n".join(lines)


def extract_blocks(text: str) -> list[str]:
    """``text`` (an extract) as Markdown blocks: each non-empty line an escaped paragraph
    (:func:`escape_line`), each run of table rows one GFM table (:func:`table`)."""
    blocks: list[str] = []
    rows: list[str] = []
    for raw in text.splitlines():
        if is_table_row(raw):
            rows.append(raw)
            continue
        if rows:
            blocks.append(table(rows))
            rows = []
        if raw.strip():
            blocks.append(escape_line(raw))
    if rows:
        blocks.append(table(rows))
    return blocks


def quote_extract(text: str) -> str:
    """``text`` (an extract) as a Markdown block quote: its :func:`extract_blocks`, separated by
    an empty quoted line."""
    blocks = extract_blocks(text)
    return "\n>\n".join("\n".join(f"> {line}" for line in block.splitlines()) for block in blocks)


__all__ = [
    "CELL_SEPARATOR",
    "escape_inline",
    "escape_line",
    "extract_blocks",
    "is_table_row",
    "quote_extract",
    "table",
]
