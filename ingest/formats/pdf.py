"""PDF (``.pdf``): pypdf, page by page, each page cleaned by
:func:`~ancre.ingest.textclean.normalize_pdf_text`; a ``PAGE_BREAK`` block opens every page after
the first and every block carries its 1-based ``page``. An encrypted PDF whose user password is
empty (only "permissions" set) is decrypted (AES needs the ``cryptography`` package). Lines are
re-flowed into paragraphs (see :func:`pdf_paragraphs`), one ``PARAGRAPH`` block each. Filled-in
form fields (AcroForm, else XFA data) follow their page as ``name : value`` paragraphs. A page
with no text but an image is a scan: with ``ExtractOptions.ocr`` it is rendered by PDFium and read
by Tesseract (:func:`~ancre.ingest.formats.ocr.ocr_pdf_pages`; blocks with ``ocr=True``); without
OCR, a PDF whose every page is such a scan is ``no_text_layer`` (pages counted). PDF text is
NFKC-normalised.
"""

from __future__ import annotations

import io
import re
import time

from ancre.errors import ExtractionError
from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions, Node, clean
from ancre.ingest.formats.ocr import OcrUnavailable, ocr_pdf_pages
from ancre.ingest.limits import CharBudget, check_pages
from ancre.ingest.textclean import normalize_pdf_text
from ancre.models import Block, BlockKind

__all__ = ["pdf_paragraphs", "read_pdf"]


def read_pdf(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """The blocks of a PDF (see the module docstring). Raises ``encrypted``, ``empty`` (no page),
    ``too_large``, ``no_text_layer``, ``timeout`` (OCR)."""
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
        blocks = [Block(BlockKind.PARAGRAPH, para, page=number) for para in pdf_paragraphs(text)]
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


def _has_image(page: Node) -> bool:
    """Whether a PDF page paints at least one image (an image XObject, also inside a form XObject,
    or an inline image): with no text layer, such a page is a scan."""
    try:
        return len(page.images) > 0
    except Exception:  # pypdf on hostile input: a broken image dictionary still means "there is an image"
        return True


class _PdfFields:
    """Names and values of a PDF's interactive form (ISO 32000-1 §12.7): AcroForm fields, each as
    a ``name : value`` paragraph on the page of its widget (fields with no widget on any page come
    after the last page); when no AcroForm field holds a value, the XFA ``datasets`` packet's
    filled-in leaves (XFA 3.3, "datasets"), as ``name : value`` after the last page. The name is
    the field's user-facing name (``/TU``) when it has one, else its qualified name (``/T`` parts
    joined by dots). Empty values and an unchecked box (``/Off``) are left out; a checked box
    reads as its export value (``Oui``, ``Yes``…)."""

    def __init__(self, reader: Node) -> None:
        self._reader = reader
        self._seen: set[str] = set()
        try:
            self._fields = reader.get_fields() or {}
        except Exception:  # pypdf on hostile input: a broken form never costs the page text
            self._fields = {}
        self._any_value = False

    @staticmethod
    def _value(raw: Node) -> str:
        if raw is None:
            return ""
        if isinstance(raw, list):
            return ", ".join(v for v in (_PdfFields._value(x) for x in raw) if v)
        text = str(raw)
        if text.startswith("/"):  # a name object: check box or radio state
            text = "" if text == "/Off" else text[1:]
        return clean(text)

    def _line(self, qualified: str, field: Node) -> str | None:
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
        label = clean(str(get("/TU") or "")) or qualified
        return f"{label} : {value}"

    def of_page(self, page: Node, number: int) -> list[Block]:
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
        except Exception:  # pypdf on hostile input: a broken annotation keeps the fields read so far
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
        except Exception:  # pypdf on hostile input: a broken XFA packet costs only the XFA data
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
            lines.append(f"{etree.QName(el).localname} : {clean(el.text or '')}")
        return lines


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
        except OcrUnavailable as exc:
            why = f"OCR unavailable: {exc}"
        else:
            for number, text in zip(numbers, texts, strict=True):
                per_page[number - 1] = [
                    Block(BlockKind.PARAGRAPH, para, page=number, ocr=True)
                    for para in pdf_paragraphs(normalize_pdf_text(text))
                ]
            if has_other_text or any(per_page[n - 1] for n in numbers):
                return
            why = "OCR found no text"
    if not has_other_text:
        raise ExtractionError(
            "no_text_layer", f"{len(numbers)} of {total} pages are images without text; {why}"
        )


_LIST_MARKER = re.compile(r"^(?:\d+(?:\.\d+)*[.)]?\s|[-–—•*▪◦·]\s|[a-zA-Z][.)]\s)")


def pdf_paragraphs(text: str) -> list[str]:
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
