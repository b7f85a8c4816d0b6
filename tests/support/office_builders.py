"""Office files built by the tests for the "dropped text" cases: Word footnotes and
endnotes, PDF form fields (AcroForm and XFA), scanned (image-only) PDF pages, OpenDocument text,
RTF and Word 97 binary documents. Nothing is downloaded; each builder returns the file's bytes.

* Word: python-docx writes the body; the footnotes/endnotes parts (which python-docx cannot write)
  are added as package parts with their relationships (ECMA-376 Part 1, §17.11).
* PDF forms: hand-written PDF objects (ISO 32000-1 §12.7) through :func:`support.hostile.build_pdf`.
* Scans: Pillow draws the sentence on a white A4 page at the given resolution and saves it as an
  image-only PDF (no text layer).
* .odt: odfpy. .rtf: RTF 1.9 control words written by hand (a few lines of plain text markup).
* .doc: a minimal Word 97 file — a Compound File Binary container ([MS-CFB]) holding a
  ``WordDocument`` stream (FIB, then the text as 8-bit cp1252) and a ``1Table`` stream with the
  piece table (Clx, [MS-DOC] §2.9.38) — enough for a reader that follows the piece table, as
  antiword does. No stylesheet, no formatting: it checks that the text is reached, not layout.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import docx
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.packuri import PackURI
from docx.opc.part import Part
from lxml import etree

from support.hostile import _FONT, _pdf_string, _stream, build_pdf

_W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


# ------------------------------------------------------------------------------------------ Word


def _notes_xml(kind: str, notes: list[str]) -> bytes:
    """``w:footnotes`` / ``w:endnotes`` with Word's two separator notes (ids -1, 0) and one note
    per text (ids 1..n), each starting with its reference mark run, as Word writes them."""
    ref = "footnoteRef" if kind == "footnote" else "endnoteRef"
    body = [
        f'<w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>',
        (f'<w:{kind} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/>'
         f"</w:r></w:p></w:{kind}>"),
    ]
    for i, text in enumerate(notes, 1):
        body.append(
            f'<w:{kind} w:id="{i}"><w:p><w:r><w:{ref}/></w:r><w:r><w:t xml:space="preserve"> '
            f"{_esc(text)}</w:t></w:r></w:p></w:{kind}>"
        )
    return (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        f'<w:{kind}s xmlns:w="{_W_NS}">{"".join(body)}</w:{kind}s>'
    ).encode()


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def docx_with_notes(
    paragraphs: list[tuple[str, list[str], list[str]]],
    *,
    orphan_footnote: str | None = None,
) -> bytes:
    """A Word file whose paragraphs cite footnotes and endnotes.

    ``paragraphs``: ``(text, footnotes, endnotes)``; each note text becomes a note cited at the
    end of its paragraph. ``orphan_footnote``: one more footnote that no paragraph cites."""
    document = docx.Document()
    document.add_heading("Contrat de maintenance", level=1)
    footnotes: list[str] = []
    endnotes: list[str] = []
    for text, fns, ens in paragraphs:
        p = document.add_paragraph(text)
        for kind, notes, pool in (("footnote", fns, footnotes), ("endnote", ens, endnotes)):
            for note in notes:
                pool.append(note)
                run = etree.fromstring(
                    f'<w:r xmlns:w="{_W_NS}"><w:{kind}Reference w:id="{len(pool)}"/></w:r>'
                )
                p._p.append(run)
    if orphan_footnote is not None:
        footnotes.append(orphan_footnote)
    part = document.part
    for kind, notes, reltype in (("footnote", footnotes, RT.FOOTNOTES), ("endnote", endnotes, RT.ENDNOTES)):
        if not notes:
            continue
        content_type = f"application/vnd.openxmlformats-officedocument.wordprocessingml.{kind}s+xml"
        note_part = Part(PackURI(f"/word/{kind}s.xml"), content_type, _notes_xml(kind, notes), part.package)
        part.relate_to(note_part, reltype)
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


# ------------------------------------------------------------------------------------ PDF forms


def form_pdf(labels: list[str], fields: list[tuple[str, str, str | None]], *, nested: tuple[str, str, str] | None = None) -> bytes:
    """A one-page PDF with static ``labels`` and an AcroForm.

    ``fields``: ``(name, value, tooltip)``; a value starting with ``/`` is a check box state
    (``/Oui`` checked, ``/Off`` unchecked), anything else a filled-in text field. ``nested``:
    ``(parent, kid, value)``, a text field ``kid`` under a non-terminal field ``parent`` (qualified
    name ``parent.kid``). Widgets carry the values; the page's content stream has only the labels
    (as in a PDF filled in a viewer, whose appearance streams pypdf does not read)."""
    n_fields = len(fields) + (2 if nested else 0)
    first_field = 6
    field_refs = [first_field + i for i in range(len(fields))]
    objects = [
        b"",  # catalog, below
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _FONT,
        b"",  # page, below
    ]
    ops = [b"BT /F1 11 Tf 14 TL 72 770 Td"] + [_pdf_string(line) + b" Tj T*" for line in labels] + [b"ET"]
    objects.append(_stream(b"\n".join(ops)))
    widgets = []
    for i, (name, value, tooltip) in enumerate(fields):
        y = 700 - 30 * i
        if value.startswith("/"):
            kind = b"/FT /Btn /V %s /AS %s" % (value.encode(), value.encode())
        else:
            kind = b"/FT /Tx /V " + _pdf_string(value)
        tu = b" /TU " + _pdf_string(tooltip) if tooltip else b""
        objects.append(
            b"<< /Type /Annot /Subtype /Widget %s /T %s%s /Rect [300 %d 500 %d] /P 4 0 R /F 4 >>"
            % (kind, _pdf_string(name), tu, y, y + 20)
        )
        widgets.append(field_refs[i])
    top_fields = list(field_refs)
    if nested:
        parent_num = first_field + len(fields)
        kid_num = parent_num + 1
        parent, kid, value = nested
        objects.append(b"<< /T %s /Kids [%d 0 R] >>" % (_pdf_string(parent), kid_num))
        objects.append(
            b"<< /Type /Annot /Subtype /Widget /FT /Tx /Parent %d 0 R /T %s /V %s "
            b"/Rect [300 400 500 420] /P 4 0 R >>" % (parent_num, _pdf_string(kid), _pdf_string(value))
        )
        widgets.append(kid_num)
        top_fields.append(parent_num)
    assert len(objects) == 5 + n_fields
    fields_arr = b" ".join(b"%d 0 R" % n for n in top_fields)
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [%s] /NeedAppearances true >> >>" % fields_arr
    annots = b" ".join(b"%d 0 R" % n for n in widgets)
    objects[3] = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 5 0 R /Annots [%s] >>" % annots
    )
    return build_pdf(objects)


def xfa_pdf(labels: list[str], data: dict[str, str]) -> bytes:
    """A one-page PDF whose form is XFA only: the AcroForm has no field, its ``/XFA`` array holds a
    ``datasets`` packet with ``data`` as ``<name>value</name>`` leaves."""
    leaves = "".join(f"<{k}>{_esc(v)}</{k}>" for k, v in data.items())
    datasets = (
        '<xfa:datasets xmlns:xfa="http://www.xfa.org/schema/xfa-data/1.0/"><xfa:data>'
        f"<formulaire>{leaves}</formulaire></xfa:data></xfa:datasets>"
    ).encode()
    ops = [b"BT /F1 11 Tf 14 TL 72 770 Td"] + [_pdf_string(line) + b" Tj T*" for line in labels] + [b"ET"]
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [] /XFA [(datasets) 6 0 R] >> >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _FONT,
        (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
         b"/Contents 5 0 R >>"),
        _stream(b"\n".join(ops)),
        _stream(datasets),
    ]
    return build_pdf(objects)


# ----------------------------------------------------------------------------------------- scans


DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
"""Debian's fonts-dejavu-core (installed by .ci/setup-test-deps.sh): it has the French accents,
which Pillow's bundled default font lacks."""


def scan_image(lines: list[str], dpi: int = 300, font_pt: float = 12.0):  # -> PIL.Image.Image
    """A white A4 page at ``dpi`` with ``lines`` drawn in black, ``font_pt`` points high, in
    DejaVu Sans (Pillow's bundled font when DejaVu is missing: then accents are not drawn)."""
    from PIL import Image, ImageDraw, ImageFont

    width, height = round(8.27 * dpi), round(11.69 * dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    size = round(font_pt * dpi / 72)
    font = ImageFont.truetype(str(DEJAVU), size) if DEJAVU.is_file() else ImageFont.load_default(size=size)
    y = round(1.2 * dpi)
    for line in lines:
        draw.text((round(1.0 * dpi), y), line, fill=0, font=font)
        y += round(size * 1.6)
    return image


def scanned_pdf(pages: list[list[str] | None], dpi: int = 300) -> bytes:
    """A PDF of image-only pages (a scan): each page is :func:`scan_image` of its lines; ``None``
    is a blank scanned page (an image with nothing on it)."""
    images = [scan_image(lines or [], dpi) for lines in pages]
    buf = io.BytesIO()
    images[0].save(buf, "PDF", resolution=float(dpi), save_all=True, append_images=images[1:])
    return buf.getvalue()


# ------------------------------------------------------------------------------------------- odt


def odt_document(title: str, paragraph: str, footnote: str, table: list[list[str]]) -> bytes:
    """An OpenDocument text (odfpy): a level-1 heading, a paragraph citing a footnote, a table."""
    from odf.opendocument import OpenDocumentText
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import H, Note, NoteBody, NoteCitation, P

    doc = OpenDocumentText()
    doc.text.addElement(H(outlinelevel=1, text=title))
    p = P(text=paragraph)
    note = Note(id="ftn1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text=footnote))
    note.addElement(body)
    p.addElement(note)
    doc.text.addElement(p)
    t = Table(name="Tarifs")
    t.addElement(TableColumn(numbercolumnsrepeated=max(len(r) for r in table)))
    for row in table:
        tr = TableRow()
        for cell in row:
            tc = TableCell()
            tc.addElement(P(text=cell))
            tr.addElement(tc)
        t.addElement(tr)
    doc.text.addElement(t)
    buf = io.BytesIO()
    doc.write(buf)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------- rtf


def _rtf_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in "\\{}":
            out.append("\\" + ch)
        elif ord(ch) < 128:
            out.append(ch)
        else:
            try:
                out.append(f"\\'{ch.encode('cp1252')[0]:02x}")
            except UnicodeEncodeError:
                out.append(f"\\u{ord(ch) if ord(ch) < 32768 else ord(ch) - 65536}?")
    return "".join(out)


def rtf_document(paragraphs: list[str]) -> bytes:
    """An RTF file (cp1252, ``\\'xx`` escapes for accents, ``\\u`` for the rest), one ``\\par``
    per paragraph, the first one bold."""
    body = []
    for i, text in enumerate(paragraphs):
        style = "\\b " if i == 0 else ""
        end = "\\b0" if i == 0 else ""
        body.append(f"\\pard\\plain\\f0\\fs22 {style}{_rtf_escape(text)}{end}\\par\n")
    return (
        "{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0\\fswiss Arial;}}\n"
        "{\\info{\\title Document RTF}}\n" + "".join(body) + "}\n"
    ).encode("ascii")


# ------------------------------------------------------------------------------------------- doc

_ENDOFCHAIN, _FATSECT, _FREESECT, _NOSTREAM = 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF, 0xFFFFFFFF


def compound_file(streams: dict[str, bytes]) -> bytes:
    """A version-3 Compound File Binary ([MS-CFB]) with the given root-level streams.

    Every stream is padded with zeros to at least 4096 bytes (the mini-stream cutoff; its recorded
    size includes the padding) so that all live in regular 512-byte sectors; at most 4 streams (one directory sector), at most 128 FAT entries
    (one FAT sector, ~64 KB of data)."""
    assert 1 <= len(streams) <= 3
    sector = 512
    names = list(streams)
    datas = [streams[n].ljust(max(4096, -(-len(streams[n]) // sector) * sector), b"\0") for n in names]
    fat: list[int] = [_FATSECT, _ENDOFCHAIN]  # sector 0: FAT, sector 1: directory
    starts = []
    for data in datas:
        count = len(data) // sector
        start = len(fat)
        starts.append(start)
        fat.extend(range(start + 1, start + count))
        fat.append(_ENDOFCHAIN)
    assert len(fat) <= 128, "test builder limit: one FAT sector"
    fat_bytes = struct.pack("<128I", *(fat + [_FREESECT] * (128 - len(fat))))

    def entry(name: str, kind: int, left: int, right: int, child: int, start: int, size: int) -> bytes:
        raw = name.encode("utf-16-le") + b"\0\0"
        return (
            raw.ljust(64, b"\0")
            + struct.pack("<HBBIII", len(raw), kind, 1, left, right, child)
            + b"\0" * 16  # CLSID
            + struct.pack("<I", 0)  # state bits
            + b"\0" * 16  # creation and modification times
            + struct.pack("<IQ", start, size)
        )

    # Red-black tree of the root's children (all black, which [MS-CFB] allows for a valid tree):
    # ordered by name length then upper-case name; chained as right siblings in that order.
    order = sorted(range(len(names)), key=lambda i: (len(names[i]), names[i].upper()))
    dir_entries = [b""] * (len(names) + 1)
    for pos, i in enumerate(order):
        right = order[pos + 1] + 1 if pos + 1 < len(order) else _NOSTREAM
        dir_entries[i + 1] = entry(names[i], 2, _NOSTREAM, right, _NOSTREAM, starts[i], len(datas[i]))
    dir_entries[0] = entry("Root Entry", 5, _NOSTREAM, _NOSTREAM, order[0] + 1, _ENDOFCHAIN, 0)
    # empty directory slots must read as unused entries with NOSTREAM links
    empty = b"\0" * 64 + struct.pack("<HBBIII", 0, 0, 0, _NOSTREAM, _NOSTREAM, _NOSTREAM) + b"\0" * 48
    directory = b"".join(dir_entries) + empty * (4 - len(dir_entries))

    header = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 16
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
        + b"\0" * 6
        + struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, _ENDOFCHAIN, 0, _ENDOFCHAIN, 0)
        + struct.pack("<I", 0) + struct.pack("<108I", *([_FREESECT] * 108))
    )
    assert len(header) == sector
    return header + fat_bytes + directory + b"".join(datas)


def word97_document(paragraphs: list[str]) -> bytes:
    """A minimal Word 97 binary document ([MS-DOC]) holding ``paragraphs`` (cp1252 text).

    ``WordDocument``: a FIB (FibBase with wIdent 0xA5EC, nFib 0x00C1, fWhichTblStm = 1;
    FibRgLw97.ccpText; FibRgFcLcb97 with fcStshf, fcSttbfFfn and fcClx set), then the text at
    offset 0x800 as 8-bit characters, paragraphs ended by a carriage return. ``1Table``: the Clx —
    one Pcdt with a PlcPcd of a single piece whose FcCompressed points at that text (fCompressed:
    fc = 2 × offset) —, a stylesheet (STSH) with one empty style and a font table (SttbfFfn) with
    one font: antiword reads those two without checking their length, so without them it reads
    uninitialised memory (and crashes now and then).
    """
    text = "".join(p + "\r" for p in paragraphs).encode("cp1252")
    text_offset = 0x800
    ccp = len(text)
    # FibBase (32 bytes)
    flags = 0x0200 | 0x1000  # fWhichTblStm (bit 9): the table stream is 1Table; fExtChar (bit 12)
    fib = struct.pack("<HHHHH", 0xA5EC, 0x00C1, 0, 0x0409, 0) + struct.pack("<HHH", flags, 0x00BF, 0)
    fib += struct.pack("<I", 0) + struct.pack("<BBHH", 0, 0, 0, 0) + struct.pack("<II", 0, 0)
    fib = fib[:32].ljust(32, b"\0")
    # csw + FibRgW97 (14 shorts)
    fib += struct.pack("<H", 14) + b"\0" * 28
    # cslw + FibRgLw97 (22 longs): cbMac, then reserved ×2, ccpText, ccpFtn, ccpHdd, …
    lw = [0] * 22
    lw[0] = text_offset + ccp  # cbMac
    lw[3] = ccp  # ccpText
    fib += struct.pack("<H", 22) + struct.pack("<22I", *lw)
    # cbRgFcLcb + FibRgFcLcb97 (93 pairs); fcClx/lcbClx is pair 33
    pcd = struct.pack("<HIH", 0, (text_offset * 2) | 0x40000000, 0)
    plc = struct.pack("<II", 0, ccp) + pcd
    clx = b"\x02" + struct.pack("<I", len(plc)) + plc
    # STSH: cbStshi, Stshi (cstd = 1, cbSTDBaseInFile = 10, flags, stiMaxWhenSaved,
    # istdMaxFixedWhenSaved, nVerBuiltInNamesWhenSaved, rgftcStandardChpStsh ×3), one empty LPStd
    stsh = struct.pack("<H", 18) + struct.pack("<9H", 1, 10, 0, 0, 0, 0, 0, 0, 0) + struct.pack("<H", 0)
    # SttbfFfn: cData = 1, cbExtra = 0, one FFN (cbFfnM1, 39 bytes of fixed fields, xszFfn UTF-16)
    name = "Times New Roman".encode("utf-16-le") + b"\0\0"
    ffn = struct.pack("<B", 40 + len(name) - 1) + b"\0" * 39 + name
    sttbf = struct.pack("<HH", 1, 0) + ffn
    table = clx + stsh + sttbf
    pairs = [0] * (93 * 2)
    pairs[1 * 2], pairs[1 * 2 + 1] = len(clx), len(stsh)  # fcStshf / lcbStshf
    pairs[15 * 2], pairs[15 * 2 + 1] = len(clx) + len(stsh), len(sttbf)  # fcSttbfFfn / lcbSttbfFfn
    pairs[33 * 2], pairs[33 * 2 + 1] = 0, len(clx)  # fcClx / lcbClx: the Clx opens 1Table
    fib += struct.pack("<H", 93) + struct.pack("<186I", *pairs)
    fib += struct.pack("<H", 0)  # cswNew
    # FibBase.fcMin / fcMac (offsets 0x18, 0x1C) for readers of the Word 6 layout
    fib = fib[:0x18] + struct.pack("<II", text_offset, text_offset + ccp) + fib[0x20:]
    word_document = fib.ljust(text_offset, b"\0") + text
    return compound_file({"WordDocument": word_document, "1Table": table})


# ------------------------------------------------------------------------ test-only extractors


def slow_after_asking(data: bytes, filename: str):  # -> tuple[Block, ...]
    """Works ``float(data)`` seconds after asking the pool for that plus 1 s more
    (:func:`ancre.ingest.worker.request_more_time`), then returns one block ``done``."""
    import time

    from ancre.ingest.worker import request_more_time
    from ancre.models import Block, BlockKind

    seconds = float(data)
    request_more_time(seconds + 1)
    time.sleep(seconds)
    return (Block(BlockKind.PARAGRAPH, "done"),)
