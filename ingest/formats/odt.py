"""OpenDocument text (``.odt``): odfpy (OpenDocument 1.2): headings, paragraphs, lists, tables,
notes after their paragraph, text boxes, headers and footers of the master pages
(:class:`_OdtWalker`)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions, Node, clean
from ancre.models import Block, BlockKind

__all__ = ["read_odt"]


_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_ODF_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
_ODF_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_ODF_STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
# Not part of the text as read: tracked deletions, comments, generated-field declarations.
_ODF_SKIP = frozenset({
    (_ODF_TEXT, "tracked-changes"), (_ODF_OFFICE, "annotation"), (_ODF_TEXT, "note-citation"),
    (_ODF_TEXT, "sequence-decls"), (_ODF_TEXT, "variable-decls"), (_ODF_TEXT, "user-field-decls"),
    (_ODF_OFFICE, "forms"), (_ODF_TABLE, "covered-table-cell"),
})


class _OdtWalker:
    """Walks an OpenDocument text body (ODF 1.2 Part 1, §5–§9, read with odfpy) into blocks:
    ``text:h`` headings with their ``text:outline-level``, ``text:p`` paragraphs (also inside lists,
    sections and frames), table rows joined by ``" | "``; ``text:s`` / ``text:tab`` /
    ``text:line-break`` become spaces and line breaks; a footnote or endnote (``text:note``) leaves
    its citation mark (``[1]``) in the paragraph and its body follows the paragraph; text boxes
    (``draw:text-box``) follow their anchor paragraph; tracked deletions and comments are not text."""

    def __init__(self) -> None:
        self._after: list[list[tuple[str, Any]]] = []  # per open paragraph: notes / boxes to read after it

    def blocks(self, container: Node) -> list[Block]:
        out: list[Block] = []
        for child in getattr(container, "childNodes", ()):
            qname = getattr(child, "qname", None)
            if qname is None or qname in _ODF_SKIP:
                continue
            if qname in ((_ODF_TEXT, "p"), (_ODF_TEXT, "h")):
                out.extend(self._paragraph(child, qname[1] == "h"))
            elif qname == (_ODF_TABLE, "table"):
                out.extend(self._table(child))
            else:  # lists, list items, sections, indexes, frames, shapes, soft page breaks…
                out.extend(self.blocks(child))
        return out

    def _paragraph(self, p: Node, heading: bool) -> list[Block]:
        parts: list[str] = []
        after: list[tuple[str, Any]] = []  # (mark, odfpy node) read after the paragraph
        self._inline(p, parts, after)
        text = clean("".join(parts))
        out: list[Block] = []
        if text:
            level = 0
            if heading:
                try:
                    level = max(1, int(p.getAttrNS(_ODF_TEXT, "outline-level") or 1))
                except ValueError:
                    level = 1
            out.append(Block(BlockKind.HEADING if level else BlockKind.PARAGRAPH, text, level=level))
        for mark, body in after:
            blocks = [Block(BlockKind.PARAGRAPH, b.text) for b in self.blocks(body)]
            if blocks and mark:
                blocks[0] = Block(BlockKind.PARAGRAPH, f"{mark} {blocks[0].text}")
            out.extend(blocks)
        return out

    def _inline(self, el: Node, parts: list[str], after: list[tuple[str, Any]]) -> None:
        for child in getattr(el, "childNodes", ()):
            if child.nodeType == child.TEXT_NODE:
                parts.append(child.data)
                continue
            qname = getattr(child, "qname", None)
            if qname is None or qname in _ODF_SKIP:
                continue
            local = qname[1] if qname[0] == _ODF_TEXT else None
            if local == "s":
                try:
                    parts.append(" " * max(1, int(child.getAttrNS(_ODF_TEXT, "c") or 1)))
                except ValueError:
                    parts.append(" ")
            elif local == "tab":
                parts.append(" ")
            elif local == "line-break":
                parts.append("\n")
            elif local == "note":
                mark = ""
                for sub in child.childNodes:
                    if getattr(sub, "qname", None) == (_ODF_TEXT, "note-citation"):
                        mark = f"[{clean(str(sub))}]"
                    elif getattr(sub, "qname", None) == (_ODF_TEXT, "note-body"):
                        after.append((mark, sub))
                parts.append(mark)
            elif qname == (_ODF_DRAW, "text-box"):
                after.append(("", child))
            else:  # spans, links, frames, fields, bookmarks, changes that are kept…
                self._inline(child, parts, after)

    def _table(self, table: Node) -> list[Block]:
        out: list[Block] = []
        for row in _odf_descendants(table, (_ODF_TABLE, "table-row"), stop=(_ODF_TABLE, "table")):
            cells = []
            for cell in row.childNodes:
                if getattr(cell, "qname", None) == (_ODF_TABLE, "table-cell"):
                    text = " ".join(b.text.replace("\n", " ") for b in self.blocks(cell))
                    if text:
                        cells.append(text)
            if cells:
                out.append(Block(BlockKind.TABLE_ROW, " | ".join(cells)))
        return out


def _odf_descendants(el: Node, qname: tuple[str, str], stop: tuple[str, str]) -> Iterable[Any]:
    """Elements ``qname`` below ``el`` in document order, not looking inside nested ``stop``."""
    for child in getattr(el, "childNodes", ()):
        q = getattr(child, "qname", None)
        if q == qname:
            yield child
        elif q is not None and q != stop:
            yield from _odf_descendants(child, qname, stop)


def read_odt(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """Headers, body and footers of an OpenDocument text. ``options`` are not used."""
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    walker = _OdtWalker()
    headers: list[Block] = []
    footers: list[Block] = []
    seen: set[tuple[str, ...]] = set()
    for master in _odf_descendants(document.masterstyles, (_ODF_STYLE, "master-page"), stop=("", "")):
        for part in master.childNodes:
            q = getattr(part, "qname", None)
            if q not in ((_ODF_STYLE, "header"), (_ODF_STYLE, "footer")):
                continue
            blocks = walker.blocks(part)
            key = tuple(b.text for b in blocks)
            if blocks and key not in seen:
                seen.add(key)
                (headers if q[1] == "header" else footers).extend(blocks)
    return headers + walker.blocks(document.text) + footers
