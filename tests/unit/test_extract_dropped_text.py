"""Text that must never be dropped without a word: Word footnotes and endnotes, PDF form
fields, scanned pages (OCR or ``skipped: no_text_layer``), and .odt / .rtf / .doc files. Every
input is built by the test (tests/support/office_builders.py)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from support.hostile import text_pdf
from support.office_builders import (
    docx_with_notes,
    form_pdf,
    odt_document,
    rtf_document,
    scanned_pdf,
    word97_document,
    xfa_pdf,
)

from ancre.daemon.sync import SKIP_REASONS, skip_reason_key
from ancre.errors import ExtractionError
from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.extract import SUPPORTED_EXTENSIONS, ExtractOptions, extract_bytes
from ancre.ingest.worker import ExtractionPool
from ancre.models import BlockKind, ReasonCode

HAS_TESSERACT = shutil.which("tesseract") is not None
needs_tesseract = pytest.mark.skipif(
    not HAS_TESSERACT, reason="tesseract not installed (make test installs tesseract-ocr when root)"
)
needs_antiword = pytest.mark.skipif(
    shutil.which("antiword") is None, reason="antiword not installed (make test installs it when root)"
)
NO_OCR = ExtractOptions(ocr=False)

SCAN_SENTENCE = "La franchise annuelle est fixée à 2500 francs."


def _text(blocks) -> str:
    return "\n".join(b.text for b in blocks)


@pytest.fixture(scope="module")
def pool() -> Iterator[ExtractionPool]:
    # as the daemon builds it: OCR asks for ocr_timeout_per_page_s more per scanned page
    with ExtractionPool(timeout_s=10, options=ExtractOptions(time_limit_s=10), max_extra_s=300) as p:
        yield p


# ----------------------------------------------------------------------------- Word notes


def test_footnote_and_endnote_follow_the_paragraph_that_cites_them() -> None:
    data = docx_with_notes(
        [
            ("La responsabilité du prestataire est limitée.", ["Plafond de responsabilité : CHF 250 000 par sinistre."], []),
            ("Le contrat est conclu pour trois ans.", [], ["Renouvellement tacite sauf résiliation MARQUEURFIN."]),
            ("Dernier paragraphe sans note.", [], []),
        ],
        orphan_footnote="Note orpheline MARQUEURORPHELIN.",
    )
    blocks = extract_bytes(data, "contrat.docx")
    texts = [b.text for b in blocks]
    cite = texts.index("La responsabilité du prestataire est limitée.[1]")
    assert texts[cite + 1] == "[1] Plafond de responsabilité : CHF 250 000 par sinistre."
    cite2 = texts.index("Le contrat est conclu pour trois ans.[i]")
    assert texts[cite2 + 1] == "[i] Renouvellement tacite sauf résiliation MARQUEURFIN."
    # a note no paragraph cites is not dropped; the separators are not text
    assert any("MARQUEURORPHELIN" in t for t in texts)
    assert sum("Plafond de responsabilité" in t for t in texts) == 1
    # the cap lands in the same chunk as the sentence it annotates
    chunks = chunk_blocks("d", blocks, 1000)
    assert any("limitée" in c.text and "CHF 250 000" in c.text for c in chunks)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/vnd.ms-word.document.macroEnabled.main+xml",  # .docm
        "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",  # .dotx
    ],
)
def test_notes_are_read_from_any_word_body_package(content_type: str) -> None:
    """DocxNotes works on the opened package whatever the main part's content type, so the
    .docm/.dotx/.dotm readers get footnotes and endnotes too."""
    import io
    import zipfile

    from docx.opc.package import OpcPackage
    from lxml import etree

    from ancre.ingest.formats.docx import DocxNotes, _DocxWalker, _style_levels

    data = docx_with_notes([("Clause de garantie.", ["Garantie de 24 mois MARQUEURDOCM."], ["Fin MARQUEURFIN."])])
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            blob = src.read(info)
            if info.filename == "[Content_Types].xml":
                blob = blob.replace(
                    b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
                    content_type.encode(),
                )
            dst.writestr(info, blob)
    part = OpcPackage.open(io.BytesIO(out.getvalue())).main_document_part
    assert part.content_type == content_type
    notes = DocxNotes.of_part(part)
    assert notes.has("footnote", "1") and notes.has("endnote", "1")
    body = etree.fromstring(part.blob).find(f"{{{_W}}}body")
    blocks = _DocxWalker(_style_levels(None), notes).blocks(body)
    assert [b.text for b in blocks] == [
        "Contrat de maintenance", "Clause de garantie.[1][i]", "[1] Garantie de 24 mois MARQUEURDOCM.",
        "[i] Fin MARQUEURFIN.",
    ]


_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def test_docx_without_notes_is_unchanged() -> None:
    data = docx_with_notes([("Texte simple.", [], [])])
    assert [b.text for b in extract_bytes(data, "x.docx")] == ["Contrat de maintenance", "Texte simple."]


# ------------------------------------------------------------------------------ PDF forms


def test_acroform_field_values_are_extracted_on_their_page() -> None:
    data = form_pdf(
        ["Demande d'intervention", "Nom du demandeur :", "Urgent :"],
        [("nom", "Jeanne Rochat", "Nom du demandeur"), ("urgent", "/Oui", None), ("vide", "", None),
         ("coche", "/Off", None)],
        nested=("adresse", "ville", "Yverdon-les-Bains"),
    )
    blocks = extract_bytes(data, "demande.pdf")
    text = _text(blocks)
    assert "Demande d'intervention" in text  # the static labels, as before
    assert "Nom du demandeur : Jeanne Rochat" in text
    assert "urgent : Oui" in text
    assert "adresse.ville : Yverdon-les-Bains" in text
    assert "vide" not in text and "coche" not in text
    assert all(b.page == 1 for b in blocks)


def test_xfa_datasets_are_extracted_when_acroform_is_empty() -> None:
    data = xfa_pdf(["Formulaire XFA"], {"numeroDossier": "D-2024-117", "montant": "CHF 12 500"})
    text = _text(extract_bytes(data, "xfa.pdf"))
    assert "numeroDossier : D-2024-117" in text and "montant : CHF 12 500" in text


# ------------------------------------------------------------------------------------ scans


def test_scan_without_ocr_is_no_text_layer_with_pages_counted() -> None:
    data = scanned_pdf([[SCAN_SENTENCE], [SCAN_SENTENCE]], dpi=100)
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(data, "scan.pdf", NO_OCR)
    assert exc.value.reason == "no_text_layer"
    assert "2 of 2 pages" in exc.value.detail and "OCR disabled" in exc.value.detail
    assert "no_text_layer" in SKIP_REASONS  # a sync records it as skipped, never as empty


def test_scan_when_tesseract_is_missing_is_no_text_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytesseract

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(scanned_pdf([[SCAN_SENTENCE]], dpi=100), "scan.pdf")
    assert exc.value.reason == "no_text_layer"
    assert "tesseract is not installed" in exc.value.detail


def test_a_blank_text_page_is_still_empty() -> None:
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(text_pdf([[]]), "blanche.pdf")
    assert exc.value.reason == "empty"


def test_text_pages_are_kept_when_other_pages_are_scans_and_ocr_is_off() -> None:
    data = _merge_pdfs(text_pdf([["Page tapée MARQUEURTEXTE."]]), scanned_pdf([[SCAN_SENTENCE]], dpi=100))
    blocks = extract_bytes(data, "mixte.pdf", NO_OCR)
    assert "MARQUEURTEXTE" in _text(blocks) and not any(b.ocr for b in blocks)


@needs_tesseract
def test_ocr_of_a_french_scan_at_300_dpi_finds_its_sentence(pool: ExtractionPool) -> None:
    data = scanned_pdf([["Conditions particulières", SCAN_SENTENCE]], dpi=300)
    blocks = pool.extract(data, "scan.pdf")  # in the worker, under its time limit
    text = " ".join(_text(blocks).split())
    assert SCAN_SENTENCE in text
    assert all(b.ocr for b in blocks if b.kind is not BlockKind.PAGE_BREAK)
    chunks = chunk_blocks("d", blocks, 1000)
    assert chunks and all(c.ocr for c in chunks)


def _merge_pdfs(*parts: bytes) -> bytes:
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for part in parts:
        for page in PdfReader(io.BytesIO(part)).pages:
            writer.add_page(page)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


@needs_tesseract
def test_mixed_pdf_ocrs_only_its_scanned_page_in_place() -> None:
    data = _merge_pdfs(text_pdf([["Page tapée MARQUEURTEXTE."]]), scanned_pdf([[SCAN_SENTENCE]], dpi=200),
                       text_pdf([["Dernière page tapée."]]))
    blocks = [b for b in extract_bytes(data, "mixte.pdf", ExtractOptions(ocr_dpi=200))
              if b.kind is not BlockKind.PAGE_BREAK]
    assert [(b.page, b.ocr) for b in blocks] == [(1, False), (2, True), (3, False)]
    assert SCAN_SENTENCE in " ".join(blocks[1].text.split())


@needs_tesseract
def test_ocr_over_the_time_limit_says_how_far_it_got() -> None:
    data = scanned_pdf([[SCAN_SENTENCE]] * 3, dpi=150)
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(data, "long.pdf", ExtractOptions(ocr_dpi=150, time_limit_s=0.3, ocr_timeout_per_page_s=0))
    assert exc.value.reason == "timeout"
    assert "of 3 scanned pages" in exc.value.detail and "ocr_timeout_per_page_s" in exc.value.detail


def test_pool_grants_the_extra_time_asked_for_up_to_its_maximum() -> None:
    target = "support.office_builders:slow_after_asking"
    with ExtractionPool(timeout_s=2, target=target, max_extra_s=4) as pool:
        pool.extract(b"0", "warm.txt")  # the worker's start is not what is measured here
        assert pool.extract(b"4", "x.txt")[0].text == "done"  # 2 s + the 4 s granted > 4 s of work
        with pytest.raises(ExtractionError) as exc:
            pool.extract(b"10", "x.txt")  # asks for 11 s, gets 4: killed after 6 s
        assert exc.value.reason == "timeout" and exc.value.detail == "after 6 s"
    with ExtractionPool(timeout_s=2, target=target) as pool:
        pool.extract(b"0", "warm.txt")
        with pytest.raises(ExtractionError) as exc:
            pool.extract(b"4", "x.txt")  # max_extra_s = 0: the request is not granted
        assert exc.value.reason == "timeout" and exc.value.detail == "after 2 s"


@needs_tesseract
def test_ocr_of_a_blank_scan_is_no_text_layer() -> None:
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(scanned_pdf([None], dpi=150), "blanc.pdf", ExtractOptions(ocr_dpi=150))
    assert exc.value.reason == "no_text_layer" and "OCR found no text" in exc.value.detail


# ---------------------------------------------------------------------------------- formats


def test_odt_heading_paragraph_footnote_and_table() -> None:
    data = odt_document(
        "Procédure de sauvegarde",
        "Les sauvegardes sont chiffrées.",
        "Clé conservée au coffre MARQUEURODT.",
        [["Prestation", "Prix"], ["Astreinte", "CHF 220"]],
    )
    blocks = extract_bytes(data, "proc.odt")
    assert blocks[0].kind is BlockKind.HEADING and blocks[0].text == "Procédure de sauvegarde"
    texts = [b.text for b in blocks]
    i = texts.index("Les sauvegardes sont chiffrées.[1]")
    assert texts[i + 1] == "[1] Clé conservée au coffre MARQUEURODT."
    rows = [b.text for b in blocks if b.kind is BlockKind.TABLE_ROW]
    assert rows == ["Prestation | Prix", "Astreinte | CHF 220"]


def test_rtf_paragraphs_with_accents() -> None:
    data = rtf_document(["Titre du mémo", "Le délai de résiliation est de trois mois — MARQUEURRTF."])
    texts = [b.text for b in extract_bytes(data, "memo.rtf")]
    assert texts == ["Titre du mémo", "Le délai de résiliation est de trois mois — MARQUEURRTF."]


def test_rtf_that_is_not_rtf_is_corrupt() -> None:
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(b"plain text", "faux.rtf")
    assert exc.value.reason == "corrupt"


@needs_antiword
def test_word97_doc_through_antiword(pool: ExtractionPool) -> None:
    data = word97_document(["Contrat de maintenance", "Le forfait mensuel est de CHF 3 840 HT — MARQUEURDOC."])
    texts = [b.text for b in pool.extract(data, "ancien.doc")]
    assert texts == ["Contrat de maintenance", "Le forfait mensuel est de CHF 3 840 HT — MARQUEURDOC."]


@needs_antiword
def test_doc_that_is_not_word_or_encrypted_gets_a_reason() -> None:
    import struct

    from support.office_builders import compound_file

    with pytest.raises(ExtractionError) as exc:
        extract_bytes(compound_file({"Workbook": b"x" * 100}), "classeur.doc")
    assert exc.value.reason == "corrupt" and "Excel" in exc.value.detail
    data = word97_document(["Secret."])
    fib = data.index(b"\xec\xa5\xc1\x00")
    flags = struct.unpack_from("<H", data, fib + 10)[0] | 0x0100  # FibBase.fEncrypted
    data = data[: fib + 10] + struct.pack("<H", flags) + data[fib + 12 :]
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(data, "chiffre.doc")
    assert exc.value.reason == "encrypted"
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(b"garbage" * 10, "x.doc")
    assert exc.value.reason == "corrupt"


def test_doc_without_antiword_is_unsupported_legacy_doc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    with pytest.raises(ExtractionError) as exc:
        extract_bytes(word97_document(["Texte."]), "ancien.doc")
    assert exc.value.reason == "unsupported" and exc.value.detail.startswith("legacy .doc")
    assert skip_reason_key(ReasonCode.UNSUPPORTED, exc.value.detail).startswith("unsupported: legacy .doc")


def test_rtf_saved_as_doc_is_read_as_rtf() -> None:
    data = rtf_document(["Mémo enregistré en .doc MARQUEURRTFDOC."])
    assert "MARQUEURRTFDOC" in _text(extract_bytes(data, "memo.doc"))


def test_supported_extensions_and_skip_keys() -> None:
    assert {".odt", ".rtf", ".doc"} <= SUPPORTED_EXTENSIONS
    assert skip_reason_key(ReasonCode.NO_TEXT_LAYER, "3 of 3 pages are images without text; OCR disabled") == "no_text_layer"
    assert skip_reason_key(ReasonCode.UNSUPPORTED, "extension '.png'") == "unsupported: extension '.png'"
    assert skip_reason_key(ReasonCode.EMPTY, "no text") == "empty"
    assert skip_reason_key(ReasonCode.NOT_READ, "symlink") == "symlink"
    assert skip_reason_key(None, None) == "(none)"
