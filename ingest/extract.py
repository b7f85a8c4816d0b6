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
  sections, identical ones once. Footnotes and endnotes (§17.11, parts python-docx does not
  expose) follow the paragraph that cites them, marked ``[1]`` / ``[i]`` (:class:`DocxNotes`).
* ``.docm``, ``.dotx``, ``.dotm`` — read like ``.docx`` (macros are never run nor indexed), and
  every Office package — Word, Excel (``.xlsx``, ``.xlsm``), PowerPoint (``.pptx``, ``.pptm``) —
  is first checked against the size limits from its zip directory and, when it is Strict Open
  XML, mapped to the Transitional namespaces: see :mod:`ancre.ingest.office`.
* ``.pdf`` — pypdf, page by page, each page cleaned by
  :func:`~ancre.ingest.textclean.normalize_pdf_text`; a ``PAGE_BREAK`` block opens every page
  after the first and every block carries its 1-based ``page``. An encrypted PDF whose user password
  is empty (only "permissions" set) is decrypted (AES needs the ``cryptography`` package). Lines
  are re-flowed into paragraphs (see :func:`_pdf_paragraphs`), one ``PARAGRAPH`` block each.
  Filled-in form fields (AcroForm, else XFA data) follow their page as ``name : value``
  paragraphs. A page with no text but an image is a scan: with ``ExtractOptions.ocr`` it is
  rendered by PDFium and read by Tesseract (:func:`ocr_pdf_pages`; blocks with ``ocr=True``);
  without OCR, a PDF whose every page is such a scan is ``no_text_layer`` (pages counted).
* ``.odt`` — odfpy (OpenDocument 1.2): headings, paragraphs, lists, tables, notes after their
  paragraph, text boxes, headers and footers of the master pages (:class:`_OdtWalker`).
* ``.rtf`` — striprtf, one paragraph per line.
* ``.doc`` — Word 97–2003 through Debian's ``antiword`` (a child process under the file's time
  limit); ``unsupported: legacy .doc (antiword is not installed)`` without it; an RTF file saved
  as ``.doc`` is read as RTF.
* ``.md``, ``.markdown``, ``.txt`` — UTF-8 (BOM dropped), else cp1252. Markdown is parsed with
  markdown-it-py (CommonMark + tables): ATX/setext headings become ``HEADING`` blocks with their
  level, table rows ``TABLE_ROW`` blocks, every other top-level block (paragraphs, lists, fenced code,
  quotes) a ``PARAGRAPH`` holding its source lines. Plain text is split on blank lines.

Everything but PDF text is NFC-normalised (PDF text is NFKC). Limits
(:class:`~ancre.ingest.limits.ExtractionLimits`: part sizes, expansion ratio, characters,
pages) make a document ``too_large`` as early as possible. Parsing runs untrusted input: use
:class:`ancre.ingest.worker.ExtractionPool` to run this in a process that can be killed.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ancre.errors import ExtractionError
from ancre.ingest.limits import CharBudget, ExtractionLimits, check_pages, using_limits
from ancre.ingest.office import (
    OFFICE_EXTENSIONS,
    open_package,
    open_word_document,
    read_presentation,
    read_workbook,
)
from ancre.ingest.textclean import collapse_leaders, normalize_pdf_text
from ancre.models import Block, BlockKind, nfc

__all__ = [
    "EXTRACTOR_REVISION", "SUPPORTED_EXTENSIONS", "DocxNotes", "ExtractOptions", "extract_bytes", "extractor_version",
]

SUPPORTED_EXTENSIONS = frozenset(
    {".docx", ".pdf", ".md", ".markdown", ".txt", ".odt", ".rtf", ".doc"} | OFFICE_EXTENSIONS
)
"""Extensions :func:`extract_bytes` reads (lower case, with the dot)."""

EXTRACTOR_REVISION = 2
"""Bump when a reader learns to read files it failed on before (2: Strict Open XML)."""

@dataclass(frozen=True)
class ExtractOptions:
    """Settings of one extraction (from ``[extraction]``, see README.md "Configuration").

    ``ocr``: OCR the PDF pages that have no text layer (Tesseract); ``ocr_languages``: Tesseract
    language codes joined by ``+`` (only those installed are used); ``ocr_dpi``: rendering
    resolution of a page for OCR (dots per inch); ``time_limit_s``: the file's time limit in
    seconds, also the bound on each external program run (``tesseract``, ``antiword``) so that none
    outlives a worker killed on that limit for long; ``ocr_timeout_per_page_s``: seconds added to
    the file's limit per scanned page to OCR, at most ``ocr_timeout_max_s`` per file (asked of the
    worker pool with :func:`ancre.ingest.worker.request_more_time`).
    """

    ocr: bool = True
    ocr_languages: str = "fra+eng"
    ocr_dpi: int = 300
    time_limit_s: float = 60.0
    ocr_timeout_per_page_s: float = 30.0
    ocr_timeout_max_s: float = 1800.0


_Node = Any
"""A node of a parser without type information: an lxml element (python-docx's XML), an odfpy
node, a pypdf object read from the file. Attribute access on it is checked by the tests."""


DEFAULT_OPTIONS = ExtractOptions()



def extractor_version() -> str:
    """The version recorded with a failed or skipped document: the revision and the extensions
    a reader exists for. When it changes (an upgrade), those documents are tried again."""
    import hashlib

    digest = hashlib.sha256(",".join(sorted(_READERS)).encode()).hexdigest()[:12]
    return f"{EXTRACTOR_REVISION}:{digest}"


def extract_bytes(
    data: bytes, filename: str, options: ExtractOptions = DEFAULT_OPTIONS, limits: ExtractionLimits | None = None
) -> tuple[Block, ...]:
    """Extract the text blocks of a file, in reading order.

    ``data`` is the whole file; ``filename`` only serves to pick the format by its extension;
    ``options`` (OCR, time limit) as in :class:`ExtractOptions`; ``limits`` default to
    :class:`~ancre.ingest.limits.ExtractionLimits` ``()``. Returns at least one non-empty
    block; blocks read by OCR have ``ocr=True``.

    Raises :class:`~ancre.errors.ExtractionError` with ``reason``:
    ``"unsupported"`` (extension not in :data:`SUPPORTED_EXTENSIONS`, or a legacy ``.doc`` when
    ``antiword`` is not installed), ``"empty"`` (0 bytes, a PDF with no page, or no text at all),
    ``"no_text_layer"`` (a PDF whose pages are images without text — a scan — and OCR is off,
    unavailable or found nothing; ``detail`` counts the pages), ``"encrypted"`` (a PDF, Office file
    or ``.doc`` that needs a password), ``"corrupt"`` (the parser rejected the file; ``detail`` says
    why), ``"timeout"`` (OCR or ``antiword`` ran past the file's time limit; ``detail`` says how
    far), ``"too_large"`` (over a limit; ``detail`` names it, e.g. ``extraction.max_part_mb``).
    """
    # trailing spaces and dots are not part of a name's extension (Windows and SharePoint drop them)
    ext = PurePosixPath(filename.replace("\\", "/").rstrip(" .")).suffix.lower()
    reader = _READERS.get(ext)
    if reader is None:
        raise ExtractionError("unsupported", f"extension {ext or '(none)'!r}")
    if not data:
        raise ExtractionError("empty", "0 bytes")
    try:
        with using_limits(limits or ExtractionLimits()):
            if ext in OFFICE_EXTENSIONS:
                data = open_package(data)
            blocks = reader(data, options) if reader in _WITH_OPTIONS else reader(data)
            CharBudget().count(sum(len(b.text) for b in blocks))
    except (ExtractionError, MemoryError):
        raise
    except Exception as exc:  # untrusted input: any parser failure means a corrupt file
        raise ExtractionError("corrupt", f"{type(exc).__name__}: {exc}"[:500]) from exc
    kept = tuple(b for b in blocks if b.kind is BlockKind.PAGE_BREAK or b.text.strip())
    if not any(b.kind is not BlockKind.PAGE_BREAK for b in kept):
        raise ExtractionError("empty", "no text")
    return kept


# --------------------------------------------------------------------------------------- helpers

_WS = re.compile(r"[^\S\n]+")
_NL_RUNS = re.compile(r"\s*\n\s*")


def _clean(text: str) -> str:
    """NFC, leaders collapsed, runs of spaces/tabs → one space, stripped; line breaks kept."""
    text = nfc(text).replace("\x00", "")
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

    def blocks(self, container: _Node) -> list[Block]:
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

    def _paragraph(self, p: _Node) -> list[Block]:
        parts: list[str] = []
        boxes: list[_Node] = []
        cited: list[tuple[str, str]] = []
        self._inline(p, parts, boxes, cited)
        text = _clean("".join(parts))
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
        self, el: _Node, parts: list[str], boxes: list[_Node], cited: list[tuple[str, str]]
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

    def _level(self, p: _Node) -> int:
        ppr = p.find(_w("pPr"))
        if ppr is None:
            return 0
        outline = ppr.find(_w("outlineLvl"))
        if outline is not None:
            return _outline_to_level(outline.get(_VAL))
        style = ppr.find(_w("pStyle"))
        return self._heading_level(style.get(_VAL, "")) if style is not None else 0

    # tables -----------------------------------------------------------------------------------

    def _table(self, tbl: _Node) -> list[Block]:
        out: list[Block] = []
        for tr in _children(tbl, _TR):
            trpr = tr.find(_w("trPr"))
            if trpr is not None and trpr.find(_w("del")) is not None:
                continue  # a deleted row is not in the final view
            cells = [c for c in (self._cell(tc) for tc in _children(tr, _TC)) if c]
            if cells:
                out.append(Block(BlockKind.TABLE_ROW, " | ".join(cells)))
        return out

    def _cell(self, tc: _Node) -> str:
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


def _children(el: _Node, tag: str) -> Iterable[Any]:
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


def _alternate_branch(alt: _Node) -> _Node | None:
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


def _style_levels(styles_element: _Node | None) -> Callable[[str], int]:
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


def _parse_part_xml(part: _Node) -> _Node | None:
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

    def __init__(self, footnotes: _Node | None = None, endnotes: _Node | None = None) -> None:
        self._notes: dict[tuple[str, str], _Node] = {}
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
    def of_part(cls, document_part: _Node) -> DocxNotes:
        """The notes of an opened package, from its main document part (python-docx's
        ``document.part``, or any part with ``rels``). Relationship types are matched on their
        last segment (``…/footnotes``, ``…/endnotes``), so Transitional and Strict packages and
        every Word body content type (.docx, .docm, .dotx, .dotm) are read alike."""
        roots: dict[str, _Node | None] = {"footnotes": None, "endnotes": None}
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


def _read_docx(data: bytes) -> list[Block]:
    from docx.opc.constants import RELATIONSHIP_TYPE as RT

    document = open_word_document(data)  # also .docm/.dotx/.dotm; checks the declared page count
    part = document.part
    try:
        styles_el = part.styles.element
    except Exception:  # noqa: BLE001 - python-docx on hostile input: a document without a styles part still has text
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


# ------------------------------------------------------------------------------------------- pdf


def _read_pdf(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    started = time.monotonic()
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
    fields = _PdfFields(reader)
    per_page: list[list[Block]] = []
    scanned: list[int] = []  # 1-based numbers of pages that are images without a text layer
    for number in range(1, count + 1):
        page = pages[number - 1]
        text = budget.add(normalize_pdf_text(page.extract_text() or ""))
        blocks = [Block(BlockKind.PARAGRAPH, para, page=number) for para in _pdf_paragraphs(text)]
        if not blocks and _has_image(page):
            scanned.append(number)
        blocks.extend(fields.of_page(page, number))
        per_page.append(blocks)
    tail = fields.remaining(count)
    if scanned:
        _ocr_pages(data, scanned, per_page, options, started, has_other_text=bool(tail) or any(per_page))
    out: list[Block] = []
    for number, blocks in enumerate(per_page, start=1):
        if number > 1:
            out.append(Block(BlockKind.PAGE_BREAK, "", page=number))
        out.extend(blocks)
    return out + tail


def _has_image(page: _Node) -> bool:
    """Whether a PDF page paints at least one image (an image XObject, also inside a form XObject,
    or an inline image): with no text layer, such a page is a scan."""
    try:
        return len(page.images) > 0
    except Exception:  # noqa: BLE001 - pypdf on hostile input: a broken image dictionary still means "there is an image"
        return True


class _PdfFields:
    """Names and values of a PDF's interactive form (ISO 32000-1 §12.7): AcroForm fields, each as
    a ``name : value`` paragraph on the page of its widget (fields with no widget on any page come
    after the last page); when no AcroForm field holds a value, the XFA ``datasets`` packet's
    filled-in leaves (XFA 3.3, "datasets"), as ``name : value`` after the last page. The name is
    the field's user-facing name (``/TU``) when it has one, else its qualified name (``/T`` parts
    joined by dots). Empty values and an unchecked box (``/Off``) are left out; a checked box
    reads as its export value (``Oui``, ``Yes``…)."""

    def __init__(self, reader: _Node) -> None:
        self._reader = reader
        self._seen: set[str] = set()
        try:
            self._fields = reader.get_fields() or {}
        except Exception:  # noqa: BLE001 - pypdf on hostile input: a broken form never costs the page text
            self._fields = {}
        self._any_value = False

    @staticmethod
    def _value(raw: _Node) -> str:
        if raw is None:
            return ""
        if isinstance(raw, list):
            return ", ".join(v for v in (_PdfFields._value(x) for x in raw) if v)
        text = str(raw)
        if text.startswith("/"):  # a name object: check box or radio state
            text = "" if text == "/Off" else text[1:]
        return _clean(text)

    def _line(self, qualified: str, field: _Node) -> str | None:
        if qualified in self._seen:
            return None
        get = getattr(field, "get", None)
        if get is None:
            return None
        value = self._value(get("/V"))
        if not value:
            return None
        self._seen.add(qualified)
        self._any_value = True
        label = _clean(str(get("/TU") or "")) or qualified
        return f"{label} : {value}"

    def of_page(self, page: _Node, number: int) -> list[Block]:
        """The fields whose widget sits on ``page``, in annotation order."""
        out: list[Block] = []
        try:
            annots = page.get("/Annots") or []
            for ref in annots:
                annot = ref.get_object()
                if annot.get("/Subtype") != "/Widget":
                    continue
                names: list[str] = []
                node = annot
                for _ in range(32):  # walk up to the terminal field's ancestors for its full name
                    if node.get("/T") is not None:
                        names.insert(0, str(node["/T"]))
                    parent = node.get("/Parent")
                    if parent is None:
                        break
                    node = parent.get_object()
                qualified = ".".join(names)
                field = self._fields.get(qualified)
                line = self._line(qualified, field if field is not None else annot)
                if line:
                    out.append(Block(BlockKind.PARAGRAPH, line, page=number))
        except Exception:  # noqa: BLE001 - pypdf on hostile input: a broken annotation keeps the fields read so far
            return out
        return out

    def remaining(self, last_page: int) -> list[Block]:
        """Fields with a value that no page's widget showed, then the XFA data if no AcroForm
        field had a value."""
        out = [Block(BlockKind.PARAGRAPH, line, page=last_page)
               for line in (self._line(q, f) for q, f in self._fields.items()) if line]
        if not self._any_value:
            out.extend(Block(BlockKind.PARAGRAPH, line, page=last_page) for line in self._xfa())
        return out

    def _xfa(self) -> list[str]:
        try:
            packets = self._reader.xfa or {}
        except Exception:  # noqa: BLE001 - pypdf on hostile input: a broken XFA packet costs only the XFA data
            return []
        data = packets.get("datasets") if isinstance(packets, dict) else None
        if not data:
            return []
        from lxml import etree

        parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
        try:
            root = etree.fromstring(data if isinstance(data, bytes) else str(data).encode(), parser)
        except etree.XMLSyntaxError:
            return []
        lines: list[str] = []
        for el in root.iter():
            if not isinstance(el.tag, str) or len(el) or not (el.text or "").strip():
                continue
            lines.append(f"{etree.QName(el).localname} : {_clean(el.text or '')}")
        return lines


class _OcrUnavailable(Exception):
    """Tesseract or its language data is missing."""


def _ocr_pages(
    data: bytes,
    numbers: list[int],
    per_page: list[list[Block]],
    options: ExtractOptions,
    started: float,
    *,
    has_other_text: bool,
) -> None:
    """OCR the scanned pages ``numbers`` (1-based) in place into ``per_page`` (blocks with
    ``ocr=True``). Without OCR (off, Tesseract or its languages missing) a PDF with text elsewhere
    keeps that text; one with no text at all raises ``no_text_layer`` counting its pages."""
    total = len(per_page)
    why = "OCR disabled ([extraction] ocr = false)"
    if options.ocr:
        try:
            texts = ocr_pdf_pages(data, numbers, options, started)
        except _OcrUnavailable as exc:
            why = f"OCR unavailable: {exc}"
        else:
            for number, text in zip(numbers, texts, strict=True):
                per_page[number - 1] = [
                    Block(BlockKind.PARAGRAPH, para, page=number, ocr=True)
                    for para in _pdf_paragraphs(normalize_pdf_text(text))
                ]
            if has_other_text or any(per_page[n - 1] for n in numbers):
                return
            why = "OCR found no text"
    if not has_other_text:
        raise ExtractionError(
            "no_text_layer", f"{len(numbers)} of {total} pages are images without text; {why}"
        )


def _tesseract_languages(wanted: str) -> str:
    import pytesseract

    try:
        installed = set(pytesseract.get_languages(config=""))
    except (pytesseract.TesseractNotFoundError, OSError) as exc:
        raise _OcrUnavailable("tesseract is not installed") from exc
    langs = [lang for lang in wanted.split("+") if lang in installed]
    if not langs:
        raise _OcrUnavailable(f"no Tesseract data for {wanted!r} (installed: {sorted(installed)})")
    return "+".join(langs)


def ocr_pdf_pages(
    data: bytes, numbers: list[int], options: ExtractOptions = DEFAULT_OPTIONS, started: float | None = None
) -> list[str]:
    """OCR pages ``numbers`` (1-based) of a PDF: each page rendered at ``options.ocr_dpi`` with
    PDFium (pypdfium2), then read by Tesseract (pytesseract) in ``options.ocr_languages`` (those
    installed), one Tesseract thread (``OMP_THREAD_LIMIT=1`` unless set: on a small shared
    machine Tesseract's OpenMP threads make it about twice slower). Returns one text per page
    number, in order.

    Time: the file's extraction began at ``started`` (``time.monotonic()``, default now) with
    ``options.time_limit_s`` seconds; OCR first asks the worker pool for
    ``ocr_timeout_per_page_s`` more per page (at most ``ocr_timeout_max_s``), and must end 5 % of
    the base limit before the pool's deadline so that the worker answers before it is killed.
    Past that, raises :class:`ExtractionError` ``timeout`` saying how many pages were read and
    which keys to raise. Raises ``_OcrUnavailable`` when Tesseract or every wanted language is
    missing."""
    import pypdfium2
    import pytesseract

    from ancre.ingest.worker import request_more_time

    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    langs = _tesseract_languages(options.ocr_languages)
    extra = min(len(numbers) * options.ocr_timeout_per_page_s, options.ocr_timeout_max_s)
    request_more_time(extra)
    start = time.monotonic() if started is None else started
    deadline = start + 0.95 * options.time_limit_s + extra
    pdf = pypdfium2.PdfDocument(data)
    texts: list[str] = []

    def over(done: int) -> ExtractionError:
        return ExtractionError(
            "timeout",
            f"OCR read {done} of {len(numbers)} scanned pages within the file's time limit "
            f"({options.time_limit_s:g} s + {extra:g} s for OCR); raise [extraction] "
            "ocr_timeout_per_page_s / ocr_timeout_max_s for such scans",
        )

    try:
        for number in numbers:
            if time.monotonic() >= deadline:
                raise over(len(texts))
            page = pdf[number - 1]
            try:
                image = page.render(scale=options.ocr_dpi / 72, grayscale=True).to_pil()
            finally:
                page.close()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise over(len(texts))
            try:
                texts.append(pytesseract.image_to_string(image, lang=langs, config="--psm 3", timeout=remaining))
            except RuntimeError as exc:  # pytesseract's timeout: it killed tesseract
                raise over(len(texts)) from exc
    finally:
        pdf.close()
    return texts


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
                out.append(Block(BlockKind.PARAGRAPH, nfc(cleaned)))
        i += 1
    return out


# ------------------------------------------------------------------------------------------- odt

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

    def blocks(self, container: _Node) -> list[Block]:
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

    def _paragraph(self, p: _Node, heading: bool) -> list[Block]:
        parts: list[str] = []
        after: list[tuple[str, Any]] = []  # (mark, odfpy node) read after the paragraph
        self._inline(p, parts, after)
        text = _clean("".join(parts))
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

    def _inline(self, el: _Node, parts: list[str], after: list[tuple[str, Any]]) -> None:
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
                        mark = f"[{_clean(str(sub))}]"
                    elif getattr(sub, "qname", None) == (_ODF_TEXT, "note-body"):
                        after.append((mark, sub))
                parts.append(mark)
            elif qname == (_ODF_DRAW, "text-box"):
                after.append(("", child))
            else:  # spans, links, frames, fields, bookmarks, changes that are kept…
                self._inline(child, parts, after)

    def _table(self, table: _Node) -> list[Block]:
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


def _odf_descendants(el: _Node, qname: tuple[str, str], stop: tuple[str, str]) -> Iterable[Any]:
    """Elements ``qname`` below ``el`` in document order, not looking inside nested ``stop``."""
    for child in getattr(el, "childNodes", ()):
        q = getattr(child, "qname", None)
        if q == qname:
            yield child
        elif q is not None and q != stop:
            yield from _odf_descendants(child, qname, stop)


def _read_odt(data: bytes) -> list[Block]:
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


# ------------------------------------------------------------------------------------------- rtf


def _read_rtf(data: bytes) -> list[Block]:
    from striprtf.striprtf import rtf_to_text

    if not data.lstrip()[:5] == b"{\\rtf":
        raise ExtractionError("corrupt", "not an RTF file (no {\\rtf header)")
    # RTF is 7-bit; \'xx escapes are decoded by striprtf in the document's code page (\ansicpg)
    text = rtf_to_text(data.decode("latin-1"), errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _lines_to_blocks(text)


def _lines_to_blocks(text: str) -> list[Block]:
    """One paragraph per line of converter output; lines with ``|`` cell separators are table rows."""
    out: list[Block] = []
    for line in text.split("\n"):
        if "|" in line and line.strip().strip("|").strip():
            cells = [c for c in (_clean(c) for c in line.strip().strip("|").split("|")) if c]
            if len(cells) > 1:
                out.append(Block(BlockKind.TABLE_ROW, " | ".join(cells)))
                continue
        cleaned = _clean(line)
        if cleaned:
            out.append(Block(BlockKind.PARAGRAPH, cleaned))
    return out


# ------------------------------------------------------------------------------------------- doc

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def _read_doc(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """Word 97–2003 (and Word 6/95) binary documents through Debian's ``antiword`` (UTF-8 output,
    no line wrapping), run as a child process bounded by ``options.time_limit_s``."""
    import shutil
    import subprocess
    import tempfile

    if not data.startswith(_OLE_MAGIC):
        if data.lstrip()[:5] == b"{\\rtf":  # Word saves RTF under .doc too: read it as RTF
            return _read_rtf(data)
        raise ExtractionError("corrupt", "not a Word 97-2003 file (no OLE compound file header)")
    exe = shutil.which("antiword")
    if exe is None:
        raise ExtractionError("unsupported", "legacy .doc (antiword is not installed)")
    with tempfile.TemporaryDirectory(prefix="ancre-doc-") as tmp:
        path = os.path.join(tmp, "document.doc")
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            proc = subprocess.run(
                [exe, "-m", "UTF-8.txt", "-w", "0", path],
                capture_output=True, timeout=options.time_limit_s, check=False,
                # antiword wants a HOME (for ~/.antiword); the service account may have none
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": tmp},
            )
        except subprocess.TimeoutExpired as exc:
            raise ExtractionError("timeout", f"antiword after {options.time_limit_s:g} s") from exc
    err = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        low = err.lower()
        if "encrypt" in low or "password" in low:
            raise ExtractionError("encrypted", err[:300])
        if proc.returncode < 0:  # antiword died on a signal (it segfaults on some damaged files)
            import signal

            try:
                sig = signal.Signals(-proc.returncode).name
            except ValueError:
                sig = str(-proc.returncode)
            raise ExtractionError("corrupt", f"antiword died on {sig} {err[:200]}".strip())
        raise ExtractionError("corrupt", f"antiword: {err[:300] or f'exit {proc.returncode}'}")
    text = proc.stdout.decode("utf-8", "replace")
    # antiword marks pictures and drawings it cannot render; they are not text
    text = re.sub(r"\[pic\]|\[picture\]", "", text)
    return _lines_to_blocks(text)


_READERS: dict[str, Callable[..., list[Block]]] = {  # (data) or, in _WITH_OPTIONS, (data, options)
    ".docx": _read_docx,
    ".pdf": _read_pdf,
    ".md": _read_markdown,
    ".markdown": _read_markdown,
    ".txt": _read_txt,
    ".odt": _read_odt,
    ".rtf": _read_rtf,
    ".doc": _read_doc,
    ".docm": _read_docx,
    ".dotx": _read_docx,
    ".dotm": _read_docx,
    ".xlsx": read_workbook,
    ".xlsm": read_workbook,
    ".pptx": read_presentation,
    ".pptm": read_presentation,
}
_WITH_OPTIONS: frozenset[Callable[..., list[Block]]] = frozenset({_read_pdf, _read_doc})
"""Readers that take :class:`ExtractOptions` as a second argument."""
