"""Office Open XML packages (ECMA-376 / ISO/IEC 29500): the checks every package goes through,
and the Excel and PowerPoint readers. Word bodies are walked by :mod:`ancre.ingest.formats.docx`.

Before a package is parsed (:func:`open_package`):

* an OLE2 compound file (the container of a *password-protected* Office file: its streams
  ``EncryptionInfo`` / ``EncryptedPackage``, MS-OFFCRYPTO §2.3.4) is ``encrypted``; any other OLE2
  file (a legacy binary .doc/.xls renamed) is ``corrupt``;
* every part's sizes are read from the zip directory (nothing inflated): a part over
  ``extraction.max_part_mb``, all parts over ``extraction.max_package_mb``, or a part over 1 MiB
  that expands more than ``extraction.max_expansion_ratio`` times is ``too_large``. Python's
  :mod:`zipfile` never inflates a member past the size its directory declares (it fails the CRC
  instead), so a lying directory cannot get around this;
* a **Strict** package (ISO/IEC 29500 Strict: namespaces under ``http://purl.oclc.org/ooxml/``,
  which python-docx, openpyxl and python-pptx do not know) is rewritten in memory with the
  Transitional namespace and relationship-type URIs (``…/ooxml/wordprocessingml/main`` →
  ``http://schemas.openxmlformats.org/wordprocessingml/2006/main``; ``extendedProperties`` and
  ``customProperties`` become ``extended-properties`` / ``custom-properties``).

Word: ``.docm`` (macro-enabled), ``.dotx`` / ``.dotm`` (templates) open as Word documents
(python-docx only accepts the ``.docx`` main content type): their body is read like a .docx; the
VBA project (``vbaProject.bin``) is a binary part that is never read, run or indexed.

Excel (``.xlsx``, ``.xlsm``), openpyxl in read-only mode with cached values (``data_only``):
formulas are never text, a formula without a cached value is empty. Each worksheet with a value
gives a ``HEADING`` (the sheet name) and one ``TABLE_ROW`` per row with values (non-empty cells
joined by ``" | "``); the chunker keeps rows whole and repeats the sheet's first row (its header)
in every chunk. Rows are read straight from openpyxl's streaming sheet parser, so only cells
present in the file cost anything (a sheet claiming ``A1:XFD1048576`` is not padded).

PowerPoint (``.pptx``, ``.pptm``), python-pptx: per slide (a ``PAGE_BREAK`` before each slide
after the first, every block carrying its 1-based slide number in ``page``) the title as a
``HEADING``, then the text frames of every shape (groups included) paragraph by paragraph, tables
row by row, then the speaker notes. Pictures, charts and media carry no text.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any

from ancre.errors import ExtractionError
from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions, clean
from ancre.ingest.limits import RATIO_GRACE_BYTES, CharBudget, check_pages, current_limits, mib, too_large
from ancre.models import Block, BlockKind

__all__ = [
    "OFFICE_EXTENSIONS",
    "open_package",
    "open_word_document",
    "read_presentation",
    "read_workbook",
    "strict_to_transitional",
]

OFFICE_EXTENSIONS = frozenset({".docx", ".docm", ".dotx", ".dotm", ".xlsx", ".xlsm", ".pptx", ".pptm"})
"""Extensions read as Office Open XML packages (lower case, with the dot)."""

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


# ------------------------------------------------------------------------------- package checks


def open_package(data: bytes) -> bytes:
    """Check the package ``data`` against the current limits and return the bytes to parse
    (``data`` itself, or a Transitional rewrite of a Strict package).

    Raises :class:`~ancre.errors.ExtractionError`: ``encrypted`` (password-protected Office file),
    ``corrupt`` (not a zip package, or a legacy OLE2 file), ``too_large`` (a part, the package or
    a part's expansion ratio over its limit; the detail names the part and the key).
    """
    if data.startswith(_OLE_MAGIC):
        raise _ole_error(data)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise ExtractionError("corrupt", f"not an Office Open XML package ({exc})") from None
    with zf:
        check_parts(zf.infolist())
        if _is_strict(zf):
            return strict_to_transitional(zf)
    return data


def check_parts(infos: Iterable[zipfile.ZipInfo]) -> None:
    """Raise ``too_large`` when one zip member or all of them are over the current limits
    (sizes from the zip directory: nothing is inflated)."""
    lim = current_limits()
    total = 0
    for info in infos:
        size, packed = info.file_size, max(info.compress_size, 1)
        if size > lim.max_part_bytes:
            raise too_large(
                f"{info.filename} inflates to {mib(size)} (compressed {mib(info.compress_size)}) "
                f"> extraction.max_part_mb ({lim.max_part_bytes / (1 << 20):g})"
            )
        if size > RATIO_GRACE_BYTES and size > lim.max_expansion_ratio * packed:
            raise too_large(
                f"{info.filename} expands {size / packed:.0f} times ({mib(info.compress_size)} → {mib(size)}) "
                f"> extraction.max_expansion_ratio ({lim.max_expansion_ratio:g})"
            )
        total += size
        if total > lim.max_package_bytes:
            raise too_large(
                f"the package inflates to more than {mib(total)} "
                f"> extraction.max_package_mb ({lim.max_package_bytes / (1 << 20):g})"
            )


def _ole_error(data: bytes) -> ExtractionError:
    import olefile

    try:
        with olefile.OleFileIO(data) as ole:
            encrypted = ole.exists("EncryptedPackage") or ole.exists("EncryptionInfo")  # type: ignore[arg-type]  # olefile takes str stream names; its stub says bytes
    except Exception as exc:  # olefile on hostile input: a damaged compound file
        return ExtractionError("corrupt", f"damaged OLE2 compound file ({type(exc).__name__}: {exc})"[:500])
    if encrypted:
        return ExtractionError("encrypted", "password-protected Office file (EncryptedPackage)")
    return ExtractionError("corrupt", "an OLE2 compound file (legacy binary Office format), not an Office Open XML package")


# ------------------------------------------------------------------------------- Strict OOXML

_STRICT_MARK = b"http://purl.oclc.org/ooxml/"
_STRICT_URI = re.compile(rb"http://purl\.oclc\.org/ooxml/([A-Za-z]+)/([A-Za-z]+)(?:/([A-Za-z]+))?")
_RENAMED = {b"extendedProperties": b"extended-properties", b"customProperties": b"custom-properties"}


def _transitional_uri(m: re.Match[bytes]) -> bytes:
    area, name, rel = m.group(1), m.group(2), m.group(3)
    out = b"http://schemas.openxmlformats.org/" + area + b"/2006/" + _RENAMED.get(name, name)
    return out + (b"/" + _RENAMED.get(rel, rel) if rel else b"")


def _is_strict(zf: zipfile.ZipFile) -> bool:
    try:
        rels = zf.read("_rels/.rels")
    except KeyError:
        return False
    return _STRICT_MARK in rels


def strict_to_transitional(zf: zipfile.ZipFile) -> bytes:
    """A copy of the package ``zf`` (already size-checked) whose XML parts and relationships
    use the Transitional URIs instead of the Strict ones (ISO/IEC 29500-1 Strict vs -4
    Transitional namespaces); other parts are copied as they are. Returns the new zip's bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in zf.infolist():
            blob = zf.read(info)
            if info.filename.lower().endswith((".xml", ".rels")):
                blob = _STRICT_URI.sub(_transitional_uri, blob)
            dst.writestr(info.filename, blob)
            del blob
    return out.getvalue()


# ------------------------------------------------------------------------------------- Word

_WORD_MAIN_TYPES = (
    "application/vnd.ms-word.document.macroEnabled.main+xml",  # .docm
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",  # .dotx
    "application/vnd.ms-word.template.macroEnabledTemplate.main+xml",  # .dotm
)
_PAGES = re.compile(rb"<(?:[\w.-]+:)?Pages>\s*(\d+)\s*</")


def open_word_document(data: bytes) -> Any:
    """The python-docx ``Document`` of a Word package (``.docx``, ``.docm``, ``.dotx``,
    ``.dotm``). The page count Word recorded (``docProps/app.xml``) is checked against
    ``extraction.max_pages`` before the package is loaded. Raises ``too_large``, or
    ``corrupt`` when the main part is not a Word document."""
    from docx.opc.part import PartFactory
    from docx.package import Package
    from docx.parts.document import DocumentPart

    pages = declared_pages(data)
    if pages is not None:
        check_pages(pages)
    for content_type in _WORD_MAIN_TYPES:
        PartFactory.part_type_for.setdefault(content_type, DocumentPart)
    part = Package.open(io.BytesIO(data)).main_document_part
    if not isinstance(part, DocumentPart):
        raise ExtractionError("corrupt", f"not a Word document (main part {part.content_type})")
    return part.document


def declared_pages(data: bytes) -> int | None:
    """The ``Pages`` count of ``docProps/app.xml`` (as last saved), or ``None``."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        try:
            app = zf.read("docProps/app.xml")
        except KeyError:
            return None
    m = _PAGES.search(app)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------------ Excel

_CELL_ERRORS = frozenset({"#NULL!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#N/A", "#GETTING_DATA"})


def _cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "VRAI" if value else "FAUX"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time(0) else value.isoformat(sep=" ", timespec="minutes")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    text = str(value)
    return "" if text in _CELL_ERRORS else text


def _sheet_rows(wb: Any, ws: Any) -> Iterator[list[object]]:
    """Values of the cells present in each row of a read-only worksheet, in file order."""
    from openpyxl.worksheet._reader import WorkSheetParser

    with ws._get_source() as src:
        parser = WorkSheetParser(
            src, ws._shared_strings, data_only=True, epoch=wb.epoch,
            date_formats=wb._date_formats, timedelta_formats=wb._timedelta_formats,
        )
        for _row_number, cells in parser.parse():
            yield [c["value"] for c in cells]


def read_workbook(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """Blocks of an Excel workbook (see the module docstring), the package checked first
    (:func:`open_package`). Raises ``too_large`` as soon as the text passes
    ``extraction.max_chars``; parser errors propagate (the caller makes them ``corrupt``).
    ``options`` are not used."""
    from openpyxl import load_workbook

    data = open_package(data)
    budget = CharBudget()
    wb = load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_links=False, keep_vba=False)
    out: list[Block] = []
    try:
        for ws in wb.worksheets:
            heading = False
            for values in _sheet_rows(wb, ws):
                cells = [t for t in (clean(_cell_text(v)).replace("\n", " ") for v in values) if t]
                if not cells:
                    continue
                if not heading:
                    out.append(Block(BlockKind.HEADING, budget.add(clean(ws.title) or "Feuille"), level=1))
                    heading = True
                out.append(Block(BlockKind.TABLE_ROW, budget.add(" | ".join(cells))))
    finally:
        wb.close()
    return out


# ------------------------------------------------------------------------------- PowerPoint


def read_presentation(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """Blocks of a PowerPoint deck (see the module docstring), the package checked first
    (:func:`open_package`). Raises ``too_large`` for more slides than ``extraction.max_pages`` or
    more text than ``extraction.max_chars``. ``options`` are not used."""
    from pptx import Presentation

    data = open_package(data)
    budget = CharBudget()
    slides = Presentation(io.BytesIO(data)).slides
    check_pages(len(slides), "slides")
    out: list[Block] = []

    def paragraphs(frame: Any, page: int) -> None:
        for p in frame.paragraphs:
            text = clean(p.text.replace("\v", "\n"))
            if text:
                out.append(Block(BlockKind.PARAGRAPH, budget.add(text), page=page))

    def shapes(items: Iterable[Any], page: int, skip: int | None) -> None:
        for shape in items:
            if shape.shape_id == skip:
                continue
            if getattr(shape, "shapes", None) is not None and not getattr(shape, "has_text_frame", False):
                shapes(shape.shapes, page, skip)  # a group
            elif getattr(shape, "has_table", False):
                for row in shape.table.rows:
                    cells = [clean(c.text).replace("\n", " ") for c in row.cells if not c.is_spanned]
                    text = " | ".join(c for c in cells if c)
                    if text:
                        out.append(Block(BlockKind.TABLE_ROW, budget.add(text), page=page))
            elif getattr(shape, "has_text_frame", False):
                paragraphs(shape.text_frame, page)

    for number, slide in enumerate(slides, 1):
        if number > 1:
            out.append(Block(BlockKind.PAGE_BREAK, "", page=number))
        title = slide.shapes.title
        title_text = clean(title.text_frame.text).replace("\n", " ") if title is not None and title.has_text_frame else ""
        if title_text:
            out.append(Block(BlockKind.HEADING, budget.add(title_text), level=1, page=number))
        shapes(slide.shapes, number, title.shape_id if title is not None else None)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None:
                paragraphs(notes, number)
    return out
