"""Word documents (``.docx``, ``.docm``, ``.dotx``, ``.dotm``): python-docx opens the package; the
body is walked on its lxml tree, because the python-docx API does not reach content controls,
text boxes or tracked changes.

The rules follow ECMA-376 Part 1 (WordprocessingML, §17): Word's *final* view of tracked changes
(``w:ins`` and ``w:moveTo`` kept, ``w:del``/``w:delText``/``w:moveFrom`` dropped, §17.13.5),
content controls ``w:sdt`` (§17.5.2) read through their ``w:sdtContent``, text boxes
``w:txbxContent`` (§17.17.1) emitted as paragraphs after the paragraph that anchors them, and of an
``mc:AlternateContent`` (Part 3, Markup Compatibility) only the first ``mc:Choice`` (else the
``mc:Fallback``) so a text box is not read twice. Field instructions (``w:instrText``) are not
text. Table rows become one :attr:`~ancre.models.BlockKind.TABLE_ROW` block each, non-empty cells
joined by ``" | "``; a horizontally merged cell (``w:gridSpan``, or legacy ``w:hMerge``
continuation) and a vertically merged cell (``w:vMerge`` continuation) count once. Headers come
first and footers last, all sections, identical ones once. Footnotes and endnotes (§17.11, parts
python-docx does not expose) follow the paragraph that cites them, marked ``[1]`` / ``[i]``
(:class:`DocxNotes`). Macros are never run nor indexed; the package checks and the Strict to
Transitional mapping are those of :mod:`ancre.ingest.formats.office`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions, Node, clean
from ancre.ingest.formats.office import open_package, open_word_document
from ancre.models import Block, BlockKind

__all__ = ["DocxNotes", "read_docx"]


_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_M = "http://schemas.openxmlformats.org/officeDocument/2006/math"


def _w(tag: str) -> str:
    return f"{{{_W}}}{tag}"


_T, _P, _TBL, _TR, _TC, _SDT = _w("t"), _w("p"), _w("tbl"), _w("tr"), _w("tc"), _w("sdt")
_SDT_CONTENT, _TXBX = _w("sdtContent"), _w("txbxContent")
_ALT = f"{{{_MC}}}AlternateContent"
_CHOICE, _FALLBACK = f"{{{_MC}}}Choice", f"{{{_MC}}}Fallback"
_MATH_T = f"{{{_M}}}t"
_VAL = _w("val")

# Inline subtrees that are not part of Word's final text.
_SKIP_INLINE = frozenset(
    _w(t)
    for t in (
        "pPr", "rPr", "del", "moveFrom", "delText", "instrText", "delInstrText", "sdtPr",
        "sdtEndPr", "commentReference",
    )
)
# Containers whose children are block-level content (paragraphs, tables, content controls).
_BLOCK_CONTAINERS = frozenset({_SDT_CONTENT, _w("customXml"), _w("ins"), _w("moveTo")})
_NOTE_REFS = {_w("footnoteReference"): "footnote", _w("endnoteReference"): "endnote"}
_INLINE_TEXT = {_w("tab"): " ", _w("ptab"): " ", _w("br"): "\n", _w("cr"): "\n",
                _w("noBreakHyphen"): "-"}


class _DocxWalker:
    """Walks WordprocessingML block content (body, header, cell, text box) into blocks."""

    def __init__(self, heading_level: Callable[[str], int], notes: DocxNotes | None = None) -> None:
        self._heading_level = heading_level  # styleId -> heading level (0 = not a heading)
        self._notes = notes  # footnotes / endnotes, read after the paragraph that cites them

    def blocks(self, container: Node) -> list[Block]:
        out: list[Block] = []
        for child in container:
            tag = child.tag
            if tag == _P:
                out.extend(self._paragraph(child))
            elif tag == _TBL:
                out.extend(self._table(child))
            elif tag == _SDT:
                content = child.find(_SDT_CONTENT)
                if content is not None:
                    out.extend(self.blocks(content))
            elif tag in _BLOCK_CONTAINERS:
                out.extend(self.blocks(child))
            elif tag == _ALT:
                branch = _alternate_branch(child)
                if branch is not None:
                    out.extend(self.blocks(branch))
        return out

    # paragraphs -------------------------------------------------------------------------------

    def _paragraph(self, p: Node) -> list[Block]:
        parts: list[str] = []
        boxes: list[Node] = []
        cited: list[tuple[str, str]] = []
        self._inline(p, parts, boxes, cited)
        text = clean("".join(parts))
        out: list[Block] = []
        if text:
            level = self._level(p)
            kind = BlockKind.HEADING if level else BlockKind.PARAGRAPH
            out.append(Block(kind, text, level=level))
        for box in boxes:  # text boxes anchored here, read after their anchor paragraph
            out.extend(self.blocks(box))
        if self._notes is not None:  # notes cited here, right after it (so in the same chunk)
            for note_type, note_id in cited:
                out.extend(self._notes.take(note_type, note_id, self))
        return out

    def _inline(
        self, el: Node, parts: list[str], boxes: list[Node], cited: list[tuple[str, str]]
    ) -> None:
        for child in el:
            tag = child.tag
            if not isinstance(tag, str) or tag in _SKIP_INLINE:
                continue  # comments / processing instructions, or not final text
            if tag in (_T, _MATH_T):
                parts.append(child.text or "")
            elif tag in _INLINE_TEXT:
                parts.append(_INLINE_TEXT[tag])
            elif tag in _NOTE_REFS:
                note_id = child.get(_w("id"), "")
                if self._notes is not None and self._notes.has(_NOTE_REFS[tag], note_id):
                    parts.append(self._notes.mark(_NOTE_REFS[tag], note_id))
                    cited.append((_NOTE_REFS[tag], note_id))
            elif tag == _TXBX:
                boxes.append(child)
            elif tag == _ALT:
                branch = _alternate_branch(child)
                if branch is not None:
                    self._inline(branch, parts, boxes, cited)
            else:  # runs, hyperlinks, w:ins, w:moveTo, inline w:sdt, smartTag, fldSimple, drawings...
                self._inline(child, parts, boxes, cited)

    def _level(self, p: Node) -> int:
        ppr = p.find(_w("pPr"))
        if ppr is None:
            return 0
        outline = ppr.find(_w("outlineLvl"))
        if outline is not None:
            return _outline_to_level(outline.get(_VAL))
        style = ppr.find(_w("pStyle"))
        return self._heading_level(style.get(_VAL, "")) if style is not None else 0

    # tables -----------------------------------------------------------------------------------

    def _table(self, tbl: Node) -> list[Block]:
        out: list[Block] = []
        for tr in _children(tbl, _TR):
            trpr = tr.find(_w("trPr"))
            if trpr is not None and trpr.find(_w("del")) is not None:
                continue  # a deleted row is not in the final view
            cells = [c for c in (self._cell(tc) for tc in _children(tr, _TC)) if c]
            if cells:
                out.append(Block(BlockKind.TABLE_ROW, " | ".join(cells)))
        return out

    def _cell(self, tc: Node) -> str:
        tcpr = tc.find(_w("tcPr"))
        if tcpr is not None:
            vmerge = tcpr.find(_w("vMerge"))
            if vmerge is not None and vmerge.get(_VAL, "continue") == "continue":
                return ""  # continuation of a vertically merged cell: its text is in the first row
            hmerge = tcpr.find(_w("hMerge"))
            if hmerge is not None and hmerge.get(_VAL, "continue") == "continue":
                return ""  # legacy horizontal merge continuation
            if tcpr.find(_w("cellDel")) is not None:
                return ""
        # nested tables flatten into the cell, row after row
        return " ".join(b.text.replace("\n", " ") for b in self.blocks(tc))


def _children(el: Node, tag: str) -> Iterable[Any]:
    """Direct children with ``tag``, looking through content controls and custom XML wrappers."""
    for child in el:
        if child.tag == tag:
            yield child
        elif child.tag == _SDT:
            content = child.find(_SDT_CONTENT)
            if content is not None:
                yield from _children(content, tag)
        elif child.tag == _w("customXml"):
            yield from _children(child, tag)


def _alternate_branch(alt: Node) -> Node | None:
    """The one branch of an ``mc:AlternateContent`` to read: the first Choice, else the Fallback."""
    choice = alt.find(_CHOICE)
    return choice if choice is not None else alt.find(_FALLBACK)


def _outline_to_level(val: str | None) -> int:
    """``w:outlineLvl`` 0..8 → heading level 1..9; 9 (body text) or garbage → 0."""
    try:
        n = int(val or "")
    except ValueError:
        return 0
    return n + 1 if 0 <= n <= 8 else 0


_HEADING_NAME = re.compile(r"^(?:heading|titre|überschrift|titolo|título)\s*(\d)$", re.IGNORECASE)


def _style_levels(styles_element: Node | None) -> Callable[[str], int]:
    """styleId → heading level, from the style's name (``heading 2``, ``Title``) or its outline level
    (own or inherited through ``w:basedOn``)."""
    by_id: dict[str, Any] = {}  # styleId -> its w:style element (lxml, untyped)
    if styles_element is not None:
        for st in styles_element.findall(_w("style")):
            sid = st.get(_w("styleId"))
            if sid:
                by_id[sid] = st
    cache: dict[str, int] = {}

    def level(style_id: str, depth: int = 0) -> int:
        if style_id in cache:
            return cache[style_id]
        st = by_id.get(style_id)
        result = 0
        if st is not None and depth < 20:
            name_el = st.find(_w("name"))
            name = (name_el.get(_VAL, "") if name_el is not None else "").strip()
            m = _HEADING_NAME.match(name) or _HEADING_NAME.match(style_id)
            outline = st.find(f"{_w('pPr')}/{_w('outlineLvl')}")
            based = st.find(_w("basedOn"))
            if m:
                result = int(m.group(1)) or 1
            elif name.lower() == "title" or style_id.lower() == "title":
                result = 1
            elif outline is not None:
                result = _outline_to_level(outline.get(_VAL))
            elif based is not None:
                result = level(based.get(_VAL, ""), depth + 1)
        cache[style_id] = result
        return result

    return level


_NOTE_SKIP_TYPES = frozenset({"separator", "continuationSeparator", "continuationNotice"})


def _parse_part_xml(part: Node) -> Node | None:
    """The root element of an XML package part: python-docx's parsed one, else its bytes parsed
    without entity expansion or network access; ``None`` when the part is not XML."""
    element = getattr(part, "element", None)
    if element is not None:
        return element
    from lxml import etree

    blob = getattr(part, "blob", b"")
    if not blob:
        return None
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    try:
        return etree.fromstring(blob, parser)
    except etree.XMLSyntaxError:
        return None


class DocxNotes:
    """Footnotes and endnotes of a WordprocessingML document (ECMA-376 Part 1, §17.11).

    Their text is in the ``footnotes`` / ``endnotes`` parts (``word/footnotes.xml``), which
    python-docx does not expose; a ``w:footnoteReference w:id="n"`` in the body cites one. The body
    walker puts a mark (``[1]`` for footnotes, ``[i]`` for endnotes, numbered in order of first
    citation, as Word numbers them by default) where the note is cited and reads the note's
    paragraphs right after the citing paragraph, the first one prefixed with the same mark, so a
    note lands in the chunk of the sentence it annotates. Notes never cited come at the end of the
    body (:meth:`remaining`): nothing is dropped. Separator notes (``w:type`` separator,
    continuationSeparator, continuationNotice) are not text.
    """

    def __init__(self, footnotes: Node | None = None, endnotes: Node | None = None) -> None:
        self._notes: dict[tuple[str, str], Node] = {}
        for note_type, root in (("footnote", footnotes), ("endnote", endnotes)):
            if root is None:
                continue
            for note in root.iter(_w(note_type)):
                if note.get(_w("type"), "normal") in _NOTE_SKIP_TYPES:
                    continue
                self._notes.setdefault((note_type, note.get(_w("id"), "")), note)
        self._marks: dict[tuple[str, str], str] = {}
        self._count = {"footnote": 0, "endnote": 0}
        self._taken: set[tuple[str, str]] = set()

    @classmethod
    def of_part(cls, document_part: Node) -> DocxNotes:
        """The notes of an opened package, from its main document part (python-docx's
        ``document.part``, or any part with ``rels``). Relationship types are matched on their
        last segment (``…/footnotes``, ``…/endnotes``), so Transitional and Strict packages and
        every Word body content type (.docx, .docm, .dotx, .dotm) are read alike."""
        roots: dict[str, Node | None] = {"footnotes": None, "endnotes": None}
        for rel in getattr(document_part, "rels", {}).values():
            kind = str(rel.reltype).rsplit("/", 1)[-1]
            if kind in roots and not rel.is_external and roots[kind] is None:
                roots[kind] = _parse_part_xml(rel.target_part)
        return cls(roots["footnotes"], roots["endnotes"])

    def has(self, note_type: str, note_id: str) -> bool:
        """Whether a note of ``note_type`` (``footnote``/``endnote``) with that ``w:id`` exists."""
        return (note_type, note_id) in self._notes

    def mark(self, note_type: str, note_id: str) -> str:
        """The note's mark (``[1]``, ``[ii]``), numbered on its first citation."""
        key = (note_type, note_id)
        if key not in self._marks:
            self._count[note_type] += 1
            n = self._count[note_type]
            self._marks[key] = f"[{n}]" if note_type == "footnote" else f"[{_roman(n)}]"
        return self._marks[key]

    def take(self, note_type: str, note_id: str, walker: _DocxWalker) -> list[Block]:
        """The note's blocks the first time it is asked for (later citations: ``[]``)."""
        key = (note_type, note_id)
        if key in self._taken or key not in self._notes:
            return []
        self._taken.add(key)
        blocks = [b if b.kind is BlockKind.TABLE_ROW else Block(BlockKind.PARAGRAPH, b.text)
                  for b in walker.blocks(self._notes[key])]
        if blocks:
            mark = self.mark(note_type, note_id)
            blocks[0] = Block(blocks[0].kind, f"{mark} {blocks[0].text}")
        return blocks

    def remaining(self, walker: _DocxWalker) -> list[Block]:
        """Blocks of the notes no paragraph cited, footnotes then endnotes, in part order."""
        out: list[Block] = []
        for note_type, note_id in list(self._notes):
            out.extend(self.take(note_type, note_id, walker))
        return out


def _roman(n: int) -> str:
    """1 → ``i``, 4 → ``iv``, 1990 → ``mcmxc`` (Word's default endnote numbering)."""
    out = []
    for value, digits in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
                          (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while n >= value:
            out.append(digits)
            n -= value
    return "".join(out)


def read_docx(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """The blocks of a Word package (see the module docstring): headers, body with notes after
    their citing paragraph, notes never cited, footers. ``options`` are not used."""
    from docx.opc.constants import RELATIONSHIP_TYPE as RT

    document = open_word_document(open_package(data))  # also .docm/.dotx/.dotm; checks the declared page count
    part = document.part
    try:
        styles_el = part.styles.element
    except Exception:  # python-docx on hostile input: a document without a styles part still has text
        styles_el = None
    notes = DocxNotes.of_part(part)
    levels = _style_levels(styles_el)
    walker = _DocxWalker(levels)
    body_walker = _DocxWalker(levels, notes)

    # Headers and footers of every section, in section order, each part once, identical texts once.
    headers: list[Block] = []
    footers: list[Block] = []
    seen_parts: set[str] = set()
    seen_texts: set[tuple[str, ...]] = set()
    for sect_pr in document.element.body.iter(_w("sectPr")):
        for ref in sect_pr:
            if ref.tag not in (_w("headerReference"), _w("footerReference")):
                continue
            rid = ref.get("{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id")
            rel = part.rels.get(rid) if rid else None
            if rel is None or rel.is_external or rel.reltype not in (RT.HEADER, RT.FOOTER):
                continue
            target = rel.target_part
            element = getattr(target, "element", None)  # None: not an XML part, nothing to read
            if element is None or str(target.partname) in seen_parts:
                continue
            seen_parts.add(str(target.partname))
            blocks = walker.blocks(element)
            key = tuple(b.text for b in blocks)
            if not blocks or key in seen_texts:
                continue
            seen_texts.add(key)
            (headers if rel.reltype == RT.HEADER else footers).extend(blocks)

    body = body_walker.blocks(document.element.body)
    return headers + body + notes.remaining(body_walker) + footers
