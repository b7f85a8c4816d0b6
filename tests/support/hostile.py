"""Hostile and tricky files for the extraction, connector and sync tests.

:func:`make_hostile_files` writes them into a folder and says, per relative file name, what the
pipeline must make of each one (:class:`Expect`). Everything is generated here (python-docx + lxml
for Word files, hand-written PDF objects + pypdf for PDFs), nothing is downloaded.

Status vocabulary (what a sync records for an item):

* ``indexed`` — text extracted; ``must_contain`` found, ``must_not_contain`` absent,
  each of ``count_once`` found exactly once in the extracted text;
* ``skipped`` — nothing to index, not an error: reasons in :data:`SKIP_REASONS`;
* ``failed`` — the file could not be read: reasons ``corrupt``, ``timeout``, ``crashed``;
* ``ignored`` — never listed by a connector (Office lock files ``~$*``), so no status at all.

:func:`make_office_files` does the same for the Office files (``.docm``/``.dotx``/``.dotm``,
Strict Open XML, Excel, PowerPoint, and their hostile cases: a part inflating to 300 MB, a huge
sheet, a formula-only sheet, an encrypted workbook, a deck of pictures only).

The module also holds test-only extraction targets for
:class:`ancre.ingest.worker.ExtractionPool` (``target="support.hostile:misbehave_on_marker"``).
"""

from __future__ import annotations

import io
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import docx
from docx.enum.section import WD_SECTION
from docx.shared import Inches
from lxml import etree
from pypdf import PdfReader, PdfWriter

from ancre.models import Block

SKIP_REASONS = frozenset({"encrypted", "empty", "unsupported", "too_large"})
"""Extraction reasons a sync records as ``skipped``; any other reason is ``failed``."""


def status_for_reason(reason: str) -> str:
    """``"skipped"`` for :data:`SKIP_REASONS`, else ``"failed"``."""
    return "skipped" if reason in SKIP_REASONS else "failed"


@dataclass(frozen=True)
class Expect:
    """What must become of one hostile file (see the module docstring for the statuses)."""

    status: str
    reason: str | None = None
    must_contain: tuple[str, ...] = ()
    must_not_contain: tuple[str, ...] = ()
    count_once: tuple[str, ...] = ()


# ------------------------------------------------------------------------- test-only extractors


def hang_forever(data: bytes, filename: str) -> tuple[Block, ...]:
    """An extractor that never returns (like pypdf on some PDFs)."""
    while True:
        time.sleep(0.05)


def crash_hard(data: bytes, filename: str) -> tuple[Block, ...]:
    """An extractor whose process dies at once (like a segfault in a C extension)."""
    os._exit(13)


def misbehave_on_marker(data: bytes, filename: str, limits: object = None, options: object = None) -> tuple[Block, ...]:
    """Dies on ``*.crash``, hangs on ``*.hang``, raises ``MemoryError`` on ``*.oom`` and
    ``RuntimeError`` on ``*.bug``; any other file is extracted normally (with ``limits``)."""
    from ancre.ingest.extract import extract_bytes

    if filename.endswith(".crash"):
        os._exit(13)
    if filename.endswith(".hang"):
        hang_forever(data, filename)
    if filename.endswith(".oom"):
        raise MemoryError
    if filename.endswith(".bug"):
        raise RuntimeError("bogus extractor")
    if options is not None:
        return extract_bytes(data, filename, options, limits)  # type: ignore[arg-type]
    return extract_bytes(data, filename, limits=limits)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------- PDFs


def _pdf_string(text: str) -> bytes:
    raw = text.encode("cp1252")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def build_pdf(objects: list[bytes], trailer_extra: bytes = b"") -> bytes:
    """A classic PDF (one xref table) from object bodies numbered 1..n; object 1 is the catalog."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\n" % (len(objects) + 1, trailer_extra)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def text_pdf(pages: list[list[str]], kids_loop: bool = False) -> bytes:
    """A PDF with one page per list of lines (Helvetica, WinAnsi: French accents work).

    ``kids_loop`` makes the page tree list itself among its kids (a cyclic page tree)."""
    n = len(pages)
    page_nums = [4 + 2 * i for i in range(n)]
    kids = b" ".join(b"%d 0 R" % p for p in page_nums) + (b" 2 0 R" if kids_loop else b"")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n),
        _FONT,
    ]
    for i, lines in enumerate(pages):
        ops = [b"BT /F1 11 Tf 14 TL 72 770 Td"]
        ops += [_pdf_string(line) + b" Tj T*" for line in lines]
        ops.append(b"ET")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (page_nums[i] + 1)
        )
        objects.append(_stream(b"\n".join(ops)))
    return build_pdf(objects)


def looping_xref_pdf(lines: list[str]) -> bytes:
    """A PDF whose trailer's ``/Prev`` points back at its own xref table (an endless chain)."""
    data = text_pdf([lines])
    start = int(data.rsplit(b"startxref", 1)[1].split()[0])
    return data.replace(b"/Root 1 0 R ", b"/Root 1 0 R /Prev %d " % start)


def zero_page_pdf() -> bytes:
    """A well-formed PDF with an empty page tree."""
    return build_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"])


def encrypted_pdf(lines: list[str], user_password: str) -> bytes:
    """``lines`` on one page, encrypted with AES-128 (owner password ``proprietaire``)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf([lines]))))
    writer.encrypt(user_password=user_password, owner_password="proprietaire", algorithm="AES-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


# ----------------------------------------------------------------------------------- Word files

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_NS_DECL = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
    'xmlns:v="urn:schemas-microsoft-com:vml"'
)


def _xml(fragment: str) -> etree._Element:
    """Parse one WordprocessingML element written with the ``w:``/``mc:``/... prefixes."""
    wrapped = f"<root {_NS_DECL}>{fragment}</root>"
    return etree.fromstring(wrapped.encode())[0]


def _save(document: docx.document.Document) -> bytes:
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def simple_docx(title: str, paragraphs: list[str]) -> bytes:
    """A plain Word file: a level-1 heading and paragraphs."""
    document = docx.Document()
    document.add_heading(title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    return _save(document)


def tricky_docx() -> bytes:
    """A Word file with every construct the extractor must read once (or not at all).

    Markers: MARQUEURSDTBLOC (block content control), MARQUEURSDTLIGNE (inline content control),
    MARQUEURINS (tracked insertion, kept), MARQUEURDEL (tracked deletion, dropped), MARQUEURMOVE
    (moved text: the moveFrom copy dropped, the moveTo copy kept), MARQUEURTXBX (text box inside an
    mc:AlternateContent with the same box in its VML fallback), MARQUEURFUSION (cell spanning two
    grid columns), MARQUEURVERTICAL (cell spanning three rows), MARQUEURIMBRIQUE (nested table),
    MARQUEURENTETE (table in the header, two sections with identical headers), MARQUEURPIED
    (footer), MARQUEURCHAMP (a field instruction: not text), MARQUEURLIEN (hyperlink text),
    MARQUEURLIGNESUPPRIMEE (a deleted table row: dropped).
    """
    document = docx.Document()
    document.add_heading("Document piégé", level=1)
    document.add_paragraph("Paragraphe ordinaire MARQUEURCORPS.")
    body = document.element.body

    def add(fragment: str) -> None:
        body.sectPr.addprevious(_xml(fragment))  # sectPr must stay the body's last child

    add(
        '<w:sdt><w:sdtPr><w:alias w:val="Client"/><w:tag w:val="client"/></w:sdtPr><w:sdtContent>'
        "<w:p><w:r><w:t>Contrôle de contenu MARQUEURSDTBLOC</w:t></w:r></w:p>"
        "</w:sdtContent></w:sdt>"
    )
    add(
        '<w:p><w:r><w:t xml:space="preserve">Le client est </w:t></w:r>'
        "<w:sdt><w:sdtPr><w:showingPlcHdr/></w:sdtPr><w:sdtContent>"
        "<w:r><w:t>MARQUEURSDTLIGNE</w:t></w:r></w:sdtContent></w:sdt>"
        '<w:r><w:t xml:space="preserve"> selon le contrat.</w:t></w:r></w:p>'
    )
    add(
        '<w:p><w:r><w:t xml:space="preserve">Montant révisé : </w:t></w:r>'
        '<w:ins w:id="101" w:author="Relecteur" w:date="2025-01-01T00:00:00Z">'
        "<w:r><w:t>MARQUEURINS</w:t></w:r></w:ins>"
        '<w:del w:id="102" w:author="Relecteur" w:date="2025-01-01T00:00:00Z">'
        "<w:r><w:delText>MARQUEURDEL</w:delText></w:r></w:del></w:p>"
    )
    add(
        '<w:p><w:moveFrom w:id="103" w:author="Relecteur">'
        "<w:r><w:t>MARQUEURMOVE</w:t></w:r></w:moveFrom>"
        '<w:r><w:t xml:space="preserve">Phrase déplacée : </w:t></w:r>'
        '<w:moveTo w:id="104" w:author="Relecteur"><w:r><w:t>MARQUEURMOVE</w:t></w:r></w:moveTo></w:p>'
    )
    add(
        '<w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        '<w:r><w:instrText xml:space="preserve"> DOCPROPERTY MARQUEURCHAMP </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>Valeur du champ</w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
        '<w:hyperlink w:anchor="x"><w:r><w:t xml:space="preserve"> MARQUEURLIEN</w:t></w:r></w:hyperlink></w:p>'
    )
    box = "<w:txbxContent><w:p><w:r><w:t>Encadré MARQUEURTXBX</w:t></w:r></w:p></w:txbxContent>"
    add(
        '<w:p><w:r><w:t xml:space="preserve">Ancre de la zone de texte. </w:t></w:r><w:r>'
        '<mc:AlternateContent><mc:Choice Requires="wps"><w:drawing>'
        '<wp:anchor distT="0" distB="0" distL="0" distR="0" simplePos="0" relativeHeight="1" '
        'behindDoc="0" locked="0" layoutInCell="1" allowOverlap="1"><wp:simplePos x="0" y="0"/>'
        '<wp:positionH relativeFrom="column"><wp:posOffset>0</wp:posOffset></wp:positionH>'
        '<wp:positionV relativeFrom="paragraph"><wp:posOffset>0</wp:posOffset></wp:positionV>'
        '<wp:extent cx="1828800" cy="457200"/><wp:wrapNone/><wp:docPr id="50" name="Zone 1"/>'
        '<a:graphic><a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape">'
        f"<wps:wsp><wps:cNvSpPr txBox=\"1\"/><wps:spPr/><wps:txbx>{box}</wps:txbx><wps:bodyPr/></wps:wsp>"
        "</a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>"
        f'<mc:Fallback><w:pict><v:shape id="z1" type="#_x0000_t202"><v:textbox>{box}</v:textbox>'
        "</v:shape></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>"
    )

    # merged cells: a gridSpan across two columns, a vMerge down three rows, a nested table
    table = document.add_table(rows=4, cols=3)
    table.cell(0, 0).text = "Poste"
    table.cell(0, 1).text = "Détail"
    table.cell(0, 2).text = "Montant"
    wide = table.cell(1, 0).merge(table.cell(1, 1))
    wide.text = "MARQUEURFUSION"
    table.cell(1, 2).text = "CHF 100"
    tall = table.cell(1, 2).merge(table.cell(3, 2))
    tall.text = "MARQUEURVERTICAL"
    table.cell(2, 0).text = "Ligne deux"
    table.cell(2, 1).text = "Sous-détail"
    table.cell(3, 0).text = "Ligne trois"
    nested = table.cell(3, 1).add_table(rows=1, cols=2)
    nested.cell(0, 0).text = "Imbriqué"
    nested.cell(0, 1).text = "MARQUEURIMBRIQUE"
    deleted = table.add_row()
    deleted.cells[0].text = "MARQUEURLIGNESUPPRIMEE"
    tr = deleted._element  # python-docx has no API for tracked row deletion: mark it in the XML
    tr_pr = tr.find(f"{{{_W}}}trPr")
    if tr_pr is None:
        tr_pr = _xml("<w:trPr/>")
        tr.insert(0, tr_pr)
    tr_pr.append(_xml('<w:del w:id="105" w:author="Relecteur" w:date="2025-01-01T00:00:00Z"/>'))
    for vm in list(tr.iter(f"{{{_W}}}vMerge")):  # must not continue the vertical merge above
        vm.getparent().remove(vm)

    document.add_paragraph("Après le tableau MARQUEURAPRES.")

    # header with a table, footer; a second section with its own (identical) header and footer
    document.add_section(WD_SECTION.NEW_PAGE)
    first, second = document.sections[0], document.sections[1]
    second.header.is_linked_to_previous = False
    second.footer.is_linked_to_previous = False
    for section in (first, second):
        header_table = section.header.add_table(rows=1, cols=2, width=Inches(4))
        header_table.cell(0, 0).text = "Société"
        header_table.cell(0, 1).text = "MARQUEURENTETE"
        section.footer.paragraphs[0].text = "Pied de page MARQUEURPIED"
    document.add_paragraph("Deuxième section MARQUEURSECTION2.")
    return _save(document)


# ------------------------------------------------------------------- Office packages


def rezip(data: bytes, replace: dict[str, bytes | None] | None = None, add: dict[str, bytes] | None = None) -> bytes:
    """A copy of the zip ``data`` with members replaced (``None``: removed) or added."""
    replace, add = replace or {}, add or {}
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename in replace:
                if replace[info.filename] is not None:
                    dst.writestr(info.filename, replace[info.filename])
            else:
                dst.writestr(info, src.read(info))
        for name, blob in add.items():
            dst.writestr(name, blob)
    return out.getvalue()


def _patch(data: bytes, name: str, old: bytes, new: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        blob = zf.read(name)
    assert old in blob, (name, old)
    return rezip(data, {name: blob.replace(old, new)})


def expanding_docx(inflated_mb: int = 300) -> bytes:
    """A valid Word file of about 1 MB whose ``word/document.xml`` inflates to ``inflated_mb`` MB
    (the same paragraph over and over), streamed so that building it never holds it in memory."""
    base = simple_docx("Contrat gonflé", ["Début du contrat."])
    with zipfile.ZipFile(io.BytesIO(base)) as zf:
        xml = zf.read("word/document.xml")
    head, _, tail = xml.partition(b"<w:body>")
    para = b"<w:p><w:r><w:t>Clause r\xc3\xa9p\xc3\xa9t\xc3\xa9e MARQUEURGONFLE du contrat de maintenance.</w:t></w:r></w:p>"
    block = para * 10_000
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as dst:
        for info in src.infolist():
            if info.filename != "word/document.xml":
                dst.writestr(info, src.read(info))
                continue
            with dst.open("word/document.xml", "w", force_zip64=True) as f:
                f.write(head + b"<w:body>")
                for _ in range(inflated_mb * 1024 * 1024 // len(block) + 1):
                    f.write(block)
                f.write(tail)
    return out.getvalue()


_DOCX_MAIN = b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
WORD_TYPES = {
    ".docm": b"application/vnd.ms-word.document.macroEnabled.main+xml",
    ".dotx": b"application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
    ".dotm": b"application/vnd.ms-word.template.macroEnabledTemplate.main+xml",
}
MACRO_MARKER = "MARQUEURMACRO"


def _vba_project() -> bytes:
    """Stand-in for a VBA project part: binary bytes holding a macro's source text."""
    return b"\xd0\xcf\x11\xe0" + f"Sub AutoOpen()\r\n  MsgBox \"{MACRO_MARKER}\"\r\nEnd Sub".encode() + b"\x00" * 64


def word_variant(suffix: str, title: str, paragraphs: list[str]) -> bytes:
    """A ``.docm`` / ``.dotx`` / ``.dotm`` file: a python-docx document whose main part has that
    format's content type; the macro-enabled ones carry a VBA project part (``word/vbaProject.bin``,
    with its relationship) and ``word/vbaData.xml`` naming :data:`MACRO_MARKER`."""
    data = _patch(simple_docx(title, paragraphs), "[Content_Types].xml", _DOCX_MAIN, WORD_TYPES[suffix])
    if suffix.endswith("m"):
        data = _patch(
            data, "[Content_Types].xml", b"</Types>",
            b'<Default Extension="bin" ContentType="application/vnd.ms-office.vbaProject"/>'
            b'<Override PartName="/word/vbaData.xml" ContentType="application/vnd.ms-word.vbaData+xml"/></Types>',
        )
        data = _patch(
            data, "word/_rels/document.xml.rels", b"</Relationships>",
            b'<Relationship Id="rIdVba" Type="http://schemas.microsoft.com/office/2006/relationships/vbaProject" '
            b'Target="vbaProject.bin"/></Relationships>',
        )
        data = rezip(data, add={
            "word/vbaProject.bin": _vba_project(),
            "word/vbaData.xml": (
                '<wne:vbaSuppData xmlns:wne="http://schemas.microsoft.com/office/word/2006/wordml">'
                f'<wne:mcds><wne:mcd wne:macroName="PROJECT.MODULE1.{MACRO_MARKER}" wne:name="Project.Module1.{MACRO_MARKER}" '
                'wne:bEncrypt="00" wne:cmg="56"/></wne:mcds></wne:vbaSuppData>'
            ).encode(),
        })
    return data


_TO_STRICT = [
    (b"http://schemas.openxmlformats.org/officeDocument/2006/relationships/extended-properties",
     b"http://purl.oclc.org/ooxml/officeDocument/relationships/extendedProperties"),
    (b"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties",
     b"http://purl.oclc.org/ooxml/officeDocument/extendedProperties"),
    (b"http://schemas.openxmlformats.org/officeDocument/2006/relationships",
     b"http://purl.oclc.org/ooxml/officeDocument/relationships"),
    (b"http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes",
     b"http://purl.oclc.org/ooxml/officeDocument/docPropsVTypes"),
    (b"http://schemas.openxmlformats.org/officeDocument/2006/math", b"http://purl.oclc.org/ooxml/officeDocument/math"),
    (b"http://schemas.openxmlformats.org/wordprocessingml/2006/main", b"http://purl.oclc.org/ooxml/wordprocessingml/main"),
    (b"http://schemas.openxmlformats.org/drawingml/2006/main", b"http://purl.oclc.org/ooxml/drawingml/main"),
    (b"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
     b"http://purl.oclc.org/ooxml/drawingml/wordprocessingDrawing"),
    (b"http://schemas.openxmlformats.org/drawingml/2006/picture", b"http://purl.oclc.org/ooxml/drawingml/picture"),
]
"""Transitional → Strict URIs (ISO/IEC 29500-1 Strict namespaces), most specific first."""


def strict_docx(title: str, paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    """A Word file in Strict Open XML: a python-docx document whose every XML part and
    relationship uses the ``http://purl.oclc.org/ooxml/…`` URIs (as Word's "Strict Open XML
    Document" save does)."""
    document = docx.Document()
    document.add_heading(title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        t = document.add_table(rows=len(table), cols=len(table[0]))
        for i, row in enumerate(table):
            for j, text in enumerate(row):
                t.cell(i, j).text = text
    data = _save(document)
    replace: dict[str, bytes | None] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            if info.filename.endswith((".xml", ".rels")) and info.filename != "[Content_Types].xml":
                blob = zf.read(info)
                for old, new in _TO_STRICT:
                    blob = blob.replace(old, new)
                replace[info.filename] = blob
    return rezip(data, replace)


def xlsx_bytes(sheets: dict[str, list[list[object]]], *, macro_enabled: bool = False) -> bytes:
    """A workbook written by openpyxl, one sheet per entry (rows of values; a string starting
    with ``=`` is a formula, saved without a cached value, as openpyxl does). ``macro_enabled``:
    the ``.xlsm`` main content type and a VBA project part."""
    from openpyxl import Workbook

    wb = Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    data = buf.getvalue()
    if macro_enabled:
        data = _patch(
            data, "[Content_Types].xml", b"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml",
            b"application/vnd.ms-excel.sheet.macroEnabled.main+xml",
        )
        data = rezip(data, add={"xl/vbaProject.bin": _vba_project()})
    return data


def xlsx_with_sheet_xml(name: str, sheet_data: bytes | None = None, *, dimension: str = "A1", inflated_mb: int = 0) -> bytes:
    """A one-sheet workbook whose ``xl/worksheets/sheet1.xml`` is written here: ``sheet_data``
    (``<row>`` elements) under ``<dimension ref=…>``, or, with ``inflated_mb``, rows of numbers
    streamed until the part inflates to that many MB."""
    base = xlsx_bytes({name: [["x"]]})
    head = (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        b'<dimension ref="' + dimension.encode() + b'"/><sheetData>'
    )
    tail = b"</sheetData></worksheet>"
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as dst:
        for info in src.infolist():
            if info.filename != "xl/worksheets/sheet1.xml":
                dst.writestr(info, src.read(info))
                continue
            with dst.open(info.filename, "w", force_zip64=True) as f:
                f.write(head)
                if inflated_mb:
                    rows = b"".join(
                        b'<row r="%d"><c r="A%d"><v>%d</v></c><c r="B%d"><v>3840.5</v></c></row>' % (i, i, i, i)
                        for i in range(1, 301)
                    )
                    for _ in range(inflated_mb * 1024 * 1024 // len(rows) + 1):
                        f.write(rows)
                else:
                    f.write(sheet_data or b"")
                f.write(tail)
    return out.getvalue()


def encrypted_xlsx(password: str = "motdepasse") -> bytes:
    """A password-protected workbook (ECMA-376 Agile Encryption, as Excel writes it), encrypted
    with msoffcrypto-tool."""
    from msoffcrypto.format.ooxml import OOXMLFile

    plain = xlsx_bytes({"Salaires": [["Nom", "Salaire"], ["MARQUEURXLSXSECRET", 120000]]})
    out = io.BytesIO()
    OOXMLFile(io.BytesIO(plain)).encrypt(password, out)
    return out.getvalue()


def _png(width: int = 4, height: int = 4) -> bytes:
    import struct
    import zlib

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def pptx_bytes(slides: list[dict[str, object]], *, macro_enabled: bool = False) -> bytes:
    """A deck written by python-pptx. Each slide: ``title`` (str), ``body`` (list of lines, in
    the content placeholder), ``table`` (rows of cells), ``group`` (text of a text box inside a
    group shape), ``notes`` (speaker notes), ``images`` (count of pictures; a slide with only
    ``images`` uses the blank layout)."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    for spec in slides:
        layout = prs.slide_layouts[1] if ("title" in spec or "body" in spec) else prs.slide_layouts[6]
        slide = prs.slides.add_slide(layout)
        if "title" in spec:
            slide.shapes.title.text = str(spec["title"])
        if "body" in spec:
            slide.placeholders[1].text_frame.text = "\n".join(spec["body"])  # type: ignore[arg-type]
        elif layout is prs.slide_layouts[1]:
            slide.placeholders[1]._element.getparent().remove(slide.placeholders[1]._element)
        if "table" in spec:
            rows = spec["table"]  # type: ignore[assignment]
            shape = slide.shapes.add_table(len(rows), len(rows[0]), Inches(1), Inches(4), Inches(6), Inches(2))
            for i, row in enumerate(rows):
                for j, text in enumerate(row):
                    shape.table.cell(i, j).text = text
        if "group" in spec:
            group = slide.shapes.add_group_shape()
            group.shapes.add_textbox(Inches(1), Inches(6), Inches(3), Inches(1)).text_frame.text = str(spec["group"])
        for k in range(int(spec.get("images", 0))):  # type: ignore[call-overload]
            slide.shapes.add_picture(io.BytesIO(_png()), Inches(1 + k), Inches(1))
        if "notes" in spec:
            slide.notes_slide.notes_text_frame.text = str(spec["notes"])
    buf = io.BytesIO()
    prs.save(buf)
    data = buf.getvalue()
    if macro_enabled:
        data = _patch(
            data, "[Content_Types].xml", b"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml",
            b"application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",
        )
    return data


def make_office_files(folder: Path) -> dict[str, Expect]:
    """Write the Word variants, Strict, Excel and PowerPoint files (normal and hostile) into
    ``folder`` and return what must become of each. The sentences named
    ``SENTENCES`` are the ones a search must find."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, tuple[bytes, Expect]] = {
        "macros.docm": (
            word_variant(".docm", "Procédure macro", [SENTENCES["docm"]]),
            Expect("indexed", must_contain=("MARQUEURDOCM", "Procédure macro"), must_not_contain=(MACRO_MARKER, "AutoOpen")),
        ),
        "modele.dotx": (
            word_variant(".dotx", "Modèle de lettre", ["Modèle de courrier MARQUEURDOTX pour les clients."]),
            Expect("indexed", must_contain=("MARQUEURDOTX",)),
        ),
        "modele_macros.dotm": (
            word_variant(".dotm", "Modèle avec macros", ["Gabarit MARQUEURDOTM de facture."]),
            Expect("indexed", must_contain=("MARQUEURDOTM",), must_not_contain=(MACRO_MARKER,)),
        ),
        "strict.docx": (
            strict_docx("Contrat Strict", [SENTENCES["strict"]], [["Poste", "Montant"], ["Forfait MARQUEURSTRICTTABLE", "CHF 990"]]),
            Expect("indexed", must_contain=("MARQUEURSTRICT", "Contrat Strict", "Forfait MARQUEURSTRICTTABLE | CHF 990")),
        ),
        "gonfle.docx": (expanding_docx(300), Expect("skipped", "too_large")),
        "budget.xlsx": (
            xlsx_bytes({
                "Budget 2026": [["Poste", "Montant", "Total"], ["Licences MARQUEURCELLULE", 1200, "=B2*2"]]
                + [[f"Ligne {i}", i, f"=B{i + 2}*2"] for i in range(1, 200)],
                "Vide": [],
                "Fournisseurs": [["Nom", "Ville"], [SENTENCES["xlsx"], "Lausanne"]],
            }),
            Expect("indexed", must_contain=("Budget 2026", "Licences MARQUEURCELLULE | 1200", "MARQUEURFOURNISSEUR"),
                   must_not_contain=("=B2", "B2*2", "Vide")),
        ),
        "macros.xlsm": (
            xlsx_bytes({"Feuil1": [["Clé", "Valeur"], ["MARQUEURXLSM", 3.5]]}, macro_enabled=True),
            Expect("indexed", must_contain=("MARQUEURXLSM | 3.5",), must_not_contain=(MACRO_MARKER,)),
        ),
        "feuille_enorme.xlsx": (xlsx_with_sheet_xml("Données", inflated_mb=100), Expect("skipped", "too_large")),
        "dimension_geante.xlsx": (
            xlsx_with_sheet_xml(
                "Creuse",
                b'<row r="1"><c r="A1" t="inlineStr"><is><t>MARQUEURCOINHAUT</t></is></c></row>'
                b'<row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>MARQUEURCOINBAS</t></is></c></row>',
                dimension="A1:XFD1048576",
            ),
            Expect("indexed", must_contain=("MARQUEURCOINHAUT", "MARQUEURCOINBAS")),
        ),
        "formules.xlsx": (
            xlsx_bytes({"Calculs": [["=1+1", "=SUM(A1:A1)"], ["=A1*3", "=NOW()"]]}),
            Expect("skipped", "empty"),
        ),
        "chiffre.xlsx": (encrypted_xlsx(), Expect("skipped", "encrypted")),
        "presentation.pptx": (
            pptx_bytes([
                {"title": "Migration Azure MARQUEURTITRE", "body": ["Calendrier en trois phases", SENTENCES["pptx"]],
                 "notes": "Notes de l'orateur MARQUEURNOTES"},
                {"title": "Budget", "table": [["Phase", "Coût"], ["Pilote MARQUEURTABLEAU", "CHF 12 000"]],
                 "group": "Texte groupé MARQUEURGROUPE"},
            ]),
            Expect("indexed", must_contain=("MARQUEURTITRE", "MARQUEURDIAPO", "MARQUEURNOTES",
                                            "Pilote MARQUEURTABLEAU | CHF 12 000", "MARQUEURGROUPE")),
        ),
        "macros.pptm": (
            pptx_bytes([{"title": "Deck MARQUEURPPTM"}], macro_enabled=True),
            Expect("indexed", must_contain=("MARQUEURPPTM",)),
        ),
        "images.pptx": (pptx_bytes([{"images": 2}, {"images": 1}]), Expect("skipped", "empty")),
    }
    for name, (data, _) in files.items():
        (folder / name).write_bytes(data)
    return {name: exp for name, (_, exp) in files.items()}


SENTENCES = {
    "docm": "La procédure de clôture mensuelle MARQUEURDOCM est validée par la fiduciaire.",
    "strict": "Le contrat au format strict MARQUEURSTRICT prévoit une astreinte le samedi.",
    "xlsx": "Fiduciaire Rochat MARQUEURFOURNISSEUR",
    "pptx": "La bascule MARQUEURDIAPO vers Azure a lieu en mars.",
}
"""A sentence from each kind of file, for the search tests."""


# ------------------------------------------------------------------------------------- the set


TOC_LINES = [
    "Guide d'exploitation",
    "Table des matières",
    "1. Introduction ........................................................ 2",
    "2. Sauvegardes . . . . . . . . . . . . . . . . . . . . . . . . . . . . 3",
    "3. Annexes …………………………………… 4",
    "Le système d'infor-",
    "mation est administré par Jean-",
    "Pierre Rochat et Jean-Pierre Martin, MARQUEURPDF.",
]


def make_hostile_files(folder: Path) -> dict[str, Expect]:
    """Write the hostile and tricky files into ``folder`` (created if needed) and return, for each
    file name relative to ``folder``, what must become of it."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    expect: dict[str, Expect] = {}

    def put(name: str, data: bytes, exp: Expect) -> None:
        files[name] = data
        expect[name] = exp

    good = simple_docx("Contrat", ["Texte complet du contrat MARQUEURTRONQUE. " * 40])
    put("tronque.docx", good[: len(good) // 2], Expect("failed", "corrupt"))
    put("texte_renomme.docx", b"Ceci n'est pas un fichier Word.\n", Expect("failed", "corrupt"))
    not_docx = io.BytesIO()
    with zipfile.ZipFile(not_docx, "w") as zf:
        zf.writestr("notes.txt", "une archive zip quelconque")
    put("archive_zip.docx", not_docx.getvalue(), Expect("failed", "corrupt"))
    no_body = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(no_body, "w") as dst:
        for info in src.infolist():
            if info.filename != "word/document.xml":
                dst.writestr(info, src.read(info))
    put("sans_document_xml.docx", no_body.getvalue(), Expect("failed", "corrupt"))

    put(
        "xref_en_boucle.pdf",
        looping_xref_pdf(["Rapport annuel MARQUEURBOUCLE", "Chiffre d'affaires en hausse."]),
        Expect("indexed", must_contain=("MARQUEURBOUCLE",)),
    )
    put(
        "arbre_pages_cyclique.pdf",
        text_pdf([["Page MARQUEURCYCLE"]], kids_loop=True),
        Expect("failed", "corrupt"),
    )
    put(
        "chiffre_sans_mot_de_passe.pdf",
        encrypted_pdf(["Note protégée MARQUEURCHIFFRE", "Lecture libre, impression interdite."], ""),
        Expect("indexed", must_contain=("MARQUEURCHIFFRE", "Note protégée")),
    )
    put(
        "chiffre_mot_de_passe.pdf",
        encrypted_pdf(["Salaires MARQUEURSECRET"], "motdepasse"),
        Expect("skipped", "encrypted"),
    )
    put("zero_page.pdf", zero_page_pdf(), Expect("skipped", "empty"))
    put("page_blanche.pdf", text_pdf([[]]), Expect("skipped", "empty"))
    put(
        "sommaire.pdf",
        text_pdf([TOC_LINES, ["Deuxième page MARQUEURPAGE2."]]),
        Expect(
            "indexed",
            must_contain=("information", "Jean-Pierre Rochat", "Jean-Pierre Martin",
                          "1. Introduction 2", "MARQUEURPAGE2"),
            must_not_contain=("....", ". . . .", "…", "infor-", "Jean- Pierre", "JeanPierre"),
        ),
    )
    put("vide.txt", b"", Expect("skipped", "empty"))
    put("vide.docx", b"", Expect("skipped", "empty"))
    put("blancs.md", b"  \n\n\t\n", Expect("skipped", "empty"))
    put("photo.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 32, Expect("skipped", "unsupported"))
    put(
        "Devis (v2) [final].docx",
        simple_docx("Devis", ["Devis révisé MARQUEURDEVIS pour 12 postes."]),
        Expect("indexed", must_contain=("MARQUEURDEVIS", "12 postes")),
    )
    put(
        "R\u00e9sum\u00e9 \u00e9tude.md".replace("\u00e9", "e\u0301"),
        "# Re\u0301sume\u0301\n\nL'e\u0301tude MARQUEURNFD porte sur 3 sites.\n".encode(),
        Expect("indexed", must_contain=("MARQUEURNFD", "L'\u00e9tude", "R\u00e9sum\u00e9")),
    )
    put(
        "ancien_windows.txt",
        "Procédure d'été MARQUEURCP1252 : réservée.\r\n".encode("cp1252"),
        Expect("indexed", must_contain=("Procédure d'été", "MARQUEURCP1252")),
    )
    put(
        "avec_bom.md",
        "\ufeff# Titre BOM\n\nTexte MARQUEURBOM.\n\n```\ncode MARQUEURCODE\n```\n".encode(),
        Expect("indexed", must_contain=("Titre BOM", "MARQUEURBOM", "MARQUEURCODE"),
               must_not_contain=("\ufeff",)),
    )
    put(
        "~$21_Contrat_Maintenance_Baumont_Industries.docx",
        b"\x0bJean Dupont" + b"\x00" * 40 + "J\x00e\x00a\x00n\x00".encode("latin-1") + b"\x00" * 100,
        Expect("ignored"),
    )
    put(
        "piege.docx",
        tricky_docx(),
        Expect(
            "indexed",
            must_contain=("MARQUEURCORPS", "MARQUEURAPRES", "MARQUEURSECTION2",
                          "Le client est MARQUEURSDTLIGNE selon le contrat.",
                          "Montant révisé : MARQUEURINS", "MARQUEURLIEN", "Valeur du champ"),
            must_not_contain=("MARQUEURDEL", "MARQUEURCHAMP", "MARQUEURLIGNESUPPRIMEE"),
            count_once=("MARQUEURSDTBLOC", "MARQUEURSDTLIGNE", "MARQUEURINS", "MARQUEURMOVE",
                        "MARQUEURTXBX", "MARQUEURFUSION", "MARQUEURVERTICAL", "MARQUEURIMBRIQUE",
                        "MARQUEURENTETE", "MARQUEURPIED"),
        ),
    )
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return expect
