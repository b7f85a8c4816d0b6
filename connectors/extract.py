"""Turn a file's bytes into text blocks in reading order (:class:`~ancre.models.Block`).

Dispatch is on the file name's extension (case-insensitive):

* ``.docx`` — python-docx opens the package; the body is walked on its lxml tree, because the
  python-docx API does not reach content controls, text boxes or tracked changes. The rules follow
  ECMA-376 Part 1 (WordprocessingML, §17): Word's *final* view of tracked changes (``w:ins`` and
  ``w:moveTo`` kept, ``w:del``/``w:delText``/``w:moveFrom`` dropped, §17.13.5), content controls
  ``w:sdt`` (§17.5.2) read through their ``w:sdtContent``, text boxes ``w:txbxContent`` (§17.17.1)
  emitted as paragraphs after the paragraph that anchors them, and of an ``mc:AlternateContent``
  (Part 3, Markup Compatibility) only the first ``mc:Choice`` (else the ``mc:Fallback``) so a text
  box is not read twice. Field instructions (``w:instrText``) are not text. Table rows become one
  :attr:`~ancre.models.BlockKind.TABLE_ROW` block each, non-empty cells joined by ``" | "``; a
  horizontally merged cell (``w:gridSpan``, or legacy ``w:hMerge`` continuation) and a vertically
  merged cell (``w:vMerge`` continuation) count once. Headers come first and footers last, all
  sections, identical ones once.
* ``.docm``, ``.dotx``, ``.dotm`` — read like ``.docx`` (macros are never run nor indexed), and
  every Office package — Word, Excel (``.xlsx``, ``.xlsm``), PowerPoint (``.pptx``, ``.pptm``) —
  is first checked against the size limits from its zip directory and, when it is Strict Open
  XML, mapped to the Transitional namespaces: see :mod:`ancre.connectors.office`.
* ``.pdf`` — pypdf, page by page, each page cleaned by
  :func:`~ancre.connectors.textclean.normalize_pdf_text`; a ``PAGE_BREAK`` block opens every page
  after the first and every block carries its 1-based ``page``. An encrypted PDF whose user password
  is empty (only "permissions" set) is decrypted (AES needs the ``cryptography`` package). Lines
  are re-flowed into paragraphs (see :func:`_pdf_paragraphs`), one ``PARAGRAPH`` block each.
* ``.md``, ``.markdown``, ``.txt`` — UTF-8 (BOM dropped), else cp1252. Markdown is parsed with
  markdown-it-py (CommonMark + tables): ATX/setext headings become ``HEADING`` blocks with their
  level, table rows ``TABLE_ROW`` blocks, every other top-level block (paragraphs, lists, fenced code,
  quotes) a ``PARAGRAPH`` holding its source lines. Plain text is split on blank lines.

Everything but PDF text is NFC-normalised (PDF text is NFKC). Limits
(:class:`~ancre.connectors.limits.ExtractionLimits`: part sizes, expansion ratio, characters,
pages) make a document ``too_large`` as early as possible. Parsing runs untrusted input: use
:class:`ancre.connectors.worker.ExtractionPool` to run this in a process that can be killed.
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import PurePosixPath

from ancre.connectors.limits import CharBudget, ExtractionLimits, check_pages, using_limits
from ancre.connectors.office import (
    OFFICE_EXTENSIONS,
    open_package,
    open_word_document,
    read_presentation,
    read_workbook,
)
from ancre.connectors.textclean import collapse_leaders, normalize_pdf_text
from ancre.errors import ExtractionError
from ancre.models import Block, BlockKind

__all__ = ["EXTRACTOR_REVISION", "SUPPORTED_EXTENSIONS", "extract_bytes", "extractor_version"]

SUPPORTED_EXTENSIONS = frozenset({".docx", ".pdf", ".md", ".markdown", ".txt"} | OFFICE_EXTENSIONS)
"""Extensions :func:`extract_bytes` reads (lower case, with the dot)."""

EXTRACTOR_REVISION = 2
"""Bump when a reader learns to read files it failed on before (2: Strict Open XML)."""


def extractor_version() -> str:
    """The version recorded with a failed or skipped document: the revision and the extensions
    a reader exists for. When it changes (an upgrade), those documents are tried again."""
    import hashlib

    digest = hashlib.sha256(",".join(sorted(_READERS)).encode()).hexdigest()[:12]
    return f"{EXTRACTOR_REVISION}:{digest}"


def extract_bytes(data: bytes, filename: str, limits: ExtractionLimits | None = None) -> tuple[Block, ...]:
    """Extract the text blocks of a file, in reading order.

    ``data`` is the whole file; ``filename`` only serves to pick the format by its extension;
    ``limits`` default to :class:`~ancre.connectors.limits.ExtractionLimits` ``()``.
    Returns at least one non-empty block.

    Raises :class:`~ancre.errors.ExtractionError` with ``reason``:
    ``"unsupported"`` (extension not in :data:`SUPPORTED_EXTENSIONS`), ``"empty"`` (0 bytes, a PDF
    with no page, or no text at all), ``"encrypted"`` (a PDF that needs a real password),
    ``"corrupt"`` (the parser rejected the file; ``detail`` says why), ``"too_large"`` (over a
    limit; ``detail`` names it, e.g. ``extraction.max_part_mb``).
    """
    ext = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    reader = _READERS.get(ext)
    if reader is None:
        raise ExtractionError("unsupported", f"extension {ext or '(none)'!r}")
    if not data:
        raise ExtractionError("empty", "0 bytes")
    try:
        with using_limits(limits or ExtractionLimits()):
            if ext in OFFICE_EXTENSIONS:
                data = open_package(data)
            blocks = reader(data)
            CharBudget().count(sum(len(b.text) for b in blocks))
    except (ExtractionError, MemoryError):
        raise
    except Exception as exc:  # untrusted input: any parser failure means a corrupt file
        raise ExtractionError("corrupt", f"{type(exc).__name__}: {exc}"[:500]) from exc
    blocks = tuple(b for b in blocks if b.kind is BlockKind.PAGE_BREAK or b.text.strip())
    if not any(b.kind is not BlockKind.PAGE_BREAK for b in blocks):
        raise ExtractionError("empty", "no text")
    return blocks


# --------------------------------------------------------------------------------------- helpers

_WS = re.compile(r"[^\S\n]+")
_NL_RUNS = re.compile(r"\s*\n\s*")


def _clean(text: str) -> str:
    """NFC, leaders collapsed, runs of spaces/tabs → one space, stripped; line breaks kept."""
    text = unicodedata.normalize("NFC", text).replace("\x00", "")
    text = collapse_leaders(text)
    text = _WS.sub(" ", text)
    return _NL_RUNS.sub("\n", text).strip()


def _decode_text(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # cp1252 leaves 5 bytes undefined; "replace" keeps a stray byte from failing the whole file
        return data.decode("cp1252", errors="replace")


# ------------------------------------------------------------------------------------------ docx

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
        "sdtEndPr", "footnoteReference", "endnoteReference", "commentReference",
    )
)
# Containers whose children are block-level content (paragraphs, tables, content controls).
_BLOCK_CONTAINERS = frozenset({_SDT_CONTENT, _w("customXml"), _w("ins"), _w("moveTo")})
_INLINE_TEXT = {_w("tab"): " ", _w("ptab"): " ", _w("br"): "\n", _w("cr"): "\n",
                _w("noBreakHyphen"): "-"}


class _DocxWalker:
    """Walks WordprocessingML block content (body, header, cell, text box) into blocks."""

    def __init__(self, heading_level: Callable[[str], int]) -> None:
        self._heading_level = heading_level  # styleId -> heading level (0 = not a heading)

    def blocks(self, container: object) -> list[Block]:
        out: list[Block] = []
        for child in container:  # type: ignore[attr-defined]
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

    def _paragraph(self, p: object) -> list[Block]:
        parts: list[str] = []
        boxes: list[object] = []
        self._inline(p, parts, boxes)
        text = _clean("".join(parts))
        out: list[Block] = []
        if text:
            level = self._level(p)
            kind = BlockKind.HEADING if level else BlockKind.PARAGRAPH
            out.append(Block(kind, text, level=level))
        for box in boxes:  # text boxes anchored here, read after their anchor paragraph
            out.extend(self.blocks(box))
        return out

    def _inline(self, el: object, parts: list[str], boxes: list[object]) -> None:
        for child in el:  # type: ignore[attr-defined]
            tag = child.tag
            if not isinstance(tag, str) or tag in _SKIP_INLINE:
                continue  # comments / processing instructions, or not final text
            if tag == _T or tag == _MATH_T:
                parts.append(child.text or "")
            elif tag in _INLINE_TEXT:
                parts.append(_INLINE_TEXT[tag])
            elif tag == _TXBX:
                boxes.append(child)
            elif tag == _ALT:
                branch = _alternate_branch(child)
                if branch is not None:
                    self._inline(branch, parts, boxes)
            else:  # runs, hyperlinks, w:ins, w:moveTo, inline w:sdt, smartTag, fldSimple, drawings...
                self._inline(child, parts, boxes)

    def _level(self, p: object) -> int:
        ppr = p.find(_w("pPr"))  # type: ignore[attr-defined]
        if ppr is None:
            return 0
        outline = ppr.find(_w("outlineLvl"))
        if outline is not None:
            return _outline_to_level(outline.get(_VAL))
        style = ppr.find(_w("pStyle"))
        return self._heading_level(style.get(_VAL, "")) if style is not None else 0

    # tables -----------------------------------------------------------------------------------

    def _table(self, tbl: object) -> list[Block]:
        out: list[Block] = []
        for tr in _children(tbl, _TR):
            trpr = tr.find(_w("trPr"))
            if trpr is not None and trpr.find(_w("del")) is not None:
                continue  # a deleted row is not in the final view
            cells = [c for c in (self._cell(tc) for tc in _children(tr, _TC)) if c]
            if cells:
                out.append(Block(BlockKind.TABLE_ROW, " | ".join(cells)))
        return out

    def _cell(self, tc: object) -> str:
        tcpr = tc.find(_w("tcPr"))  # type: ignore[attr-defined]
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


def _children(el: object, tag: str) -> Iterable[object]:
    """Direct children with ``tag``, looking through content controls and custom XML wrappers."""
    for child in el:  # type: ignore[attr-defined]
        if child.tag == tag:
            yield child
        elif child.tag == _SDT:
            content = child.find(_SDT_CONTENT)
            if content is not None:
                yield from _children(content, tag)
        elif child.tag == _w("customXml"):
            yield from _children(child, tag)


def _alternate_branch(alt: object) -> object | None:
    """The one branch of an ``mc:AlternateContent`` to read: the first Choice, else the Fallback."""
    choice = alt.find(_CHOICE)  # type: ignore[attr-defined]
    return choice if choice is not None else alt.find(_FALLBACK)  # type: ignore[attr-defined]


def _outline_to_level(val: str | None) -> int:
    """``w:outlineLvl`` 0..8 → heading level 1..9; 9 (body text) or garbage → 0."""
    try:
        n = int(val or "")
    except ValueError:
        return 0
    return n + 1 if 0 <= n <= 8 else 0


_HEADING_NAME = re.compile(r"^(?:heading|titre|überschrift|titolo|título)\s*(\d)$", re.I)


def _style_levels(styles_element: object | None) -> Callable[[str], int]:
    """styleId → heading level, from the style's name (``heading 2``, ``Title``) or its outline level
    (own or inherited through ``w:basedOn``)."""
    by_id: dict[str, object] = {}
    if styles_element is not None:
        for st in styles_element.findall(_w("style")):  # type: ignore[attr-defined]
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


def _read_docx(data: bytes) -> list[Block]:
    from docx.opc.constants import RELATIONSHIP_TYPE as RT

    document = open_word_document(data)  # also .docm/.dotx/.dotm; checks the declared page count
    part = document.part
    try:
        styles_el = part.styles.element
    except Exception:  # a document without a styles part still has text
        styles_el = None
    walker = _DocxWalker(_style_levels(styles_el))

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

    return headers + walker.blocks(document.element.body) + footers


# ------------------------------------------------------------------------------------------- pdf


def _read_pdf(data: bytes) -> list[Block]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        try:
            ok = reader.decrypt("")
        except DependencyError as exc:
            raise ExtractionError("encrypted", f"cannot decrypt: {exc}") from exc
        if not ok:
            raise ExtractionError("encrypted", "a password is needed to open it")
    try:
        pages = reader.pages
        count = len(pages)
    except FileNotDecryptedError as exc:
        raise ExtractionError("encrypted", str(exc)) from exc
    if count == 0:
        raise ExtractionError("empty", "the PDF has no page")
    check_pages(count)
    budget = CharBudget()
    out: list[Block] = []
    for number in range(1, count + 1):
        text = budget.add(normalize_pdf_text(pages[number - 1].extract_text() or ""))
        if number > 1:
            out.append(Block(BlockKind.PAGE_BREAK, "", page=number))
        out.extend(Block(BlockKind.PARAGRAPH, para, page=number) for para in _pdf_paragraphs(text))
    return out


_LIST_MARKER = re.compile(r"^(?:\d+(?:\.\d+)*[.)]?\s|[-–—•*▪◦·]\s|[a-zA-Z][.)]\s)")


def _pdf_paragraphs(text: str) -> list[str]:
    """Re-flow the hard-wrapped lines of a cleaned PDF page into paragraphs.

    The text layer has no paragraphs, only lines. A line is joined to the next (with a space) when
    it is "full" — at least 70 % of the page's longest line, which is at least 40 characters — and
    the next line does not start like a list item or numbered heading (``1. ``, ``- ``, ``a) ``).
    A blank line, a short line (a heading, a paragraph's last line, a table-of-contents entry) or a
    list marker ends a paragraph.
    """
    lines = text.split("\n")
    longest = max((len(line) for line in lines), default=0)
    full = 0.7 * longest if longest >= 40 else float("inf")
    paragraphs: list[str] = []
    current: list[str] = []
    for line in lines:
        if not line:
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        if current and (len(current[-1]) < full or _LIST_MARKER.match(line)):
            paragraphs.append(" ".join(current))
            current = []
        current.append(line)
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


# ------------------------------------------------------------------------------------ md and txt


def _read_txt(data: bytes) -> list[Block]:
    text = _decode_text(data).replace("\r\n", "\n").replace("\r", "\n")
    return [Block(BlockKind.PARAGRAPH, t) for t in (_clean(p) for p in re.split(r"\n\s*\n", text)) if t]


def _read_markdown(data: bytes) -> list[Block]:
    from markdown_it import MarkdownIt

    text = _decode_text(data).replace("\r\n", "\n").replace("\r", "\n")
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
            heading = _clean(inline.content)
            if heading:
                out.append(Block(BlockKind.HEADING, heading, level=int(tok.tag[1:])))
        elif tok.type == "table_open":
            j = i + 1
            row: list[str] = []
            while j < len(tokens) and tokens[j].type != "table_close":
                t = tokens[j]
                if t.type == "inline":
                    row.append(_clean(t.content))
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
            cleaned = _clean(source) if tok.type not in ("fence", "code_block") else source.strip()
            if cleaned:
                out.append(Block(BlockKind.PARAGRAPH, unicodedata.normalize("NFC", cleaned)))
        i += 1
    return out


_READERS: dict[str, Callable[[bytes], list[Block]]] = {
    ".docx": _read_docx,
    ".pdf": _read_pdf,
    ".md": _read_markdown,
    ".markdown": _read_markdown,
    ".txt": _read_txt,
    ".docm": _read_docx,
    ".dotx": _read_docx,
    ".dotm": _read_docx,
    ".xlsx": read_workbook,
    ".xlsm": read_workbook,
    ".pptx": read_presentation,
    ".pptm": read_presentation,
}
