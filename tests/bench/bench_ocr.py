"""OCR of scanned pages: seconds per page (``--only ocr``).

A French A4 page of ~30 lines (11 pt, DejaVu Sans) is drawn with Pillow and wrapped as an
image-only PDF at 300 dpi (and 200 dpi for comparison); the extractor's OCR path
(:func:`ancre.ingest.formats.ocr.ocr_pdf_pages`: PDFium rendering + Tesseract ``fra+eng``) reads
it, single-threaded as in the extractor. Rendering and recognition are timed apart, per page, and each run checks that a known
sentence of the page was recognised word for word. Without Tesseract the bench prints a row
saying so.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ → `support`

from support.office_builders import scanned_pdf

SENTENCE = "La franchise annuelle est fixée à 2500 francs par sinistre."
_BODY = (
    "Le prestataire assure la maintenance préventive et corrective des postes de travail, "
    "des serveurs et du réseau de l'étude, selon les niveaux de service décrits ci-dessous."
)


def _page_lines() -> list[str]:
    words = (_BODY + " ") * 12
    lines, line = [], ""
    for word in words.split():
        if len(line) + len(word) + 1 > 78:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines = lines[:28]
    lines.insert(10, SENTENCE)
    return ["Conditions particulières du contrat de maintenance", *lines]


def run(quick: bool = False) -> list[dict]:
    """One row per resolution: pages, render s/page, OCR s/page, total s/page, sentence found."""
    if shutil.which("tesseract") is None:
        return [{"dpi": 0, "pages": 0, "note": "tesseract not installed"}]
    import pypdfium2
    import pytesseract

    from ancre.ingest.extract import ExtractOptions
    from ancre.ingest.formats.ocr import tesseract_languages

    os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # as the extractor does (ocr_pdf_pages)
    pages = 1 if quick else 3
    rows = []
    for dpi in (300,) if quick else (300, 200):
        data = scanned_pdf([_page_lines()] * pages, dpi=300)
        langs = tesseract_languages(ExtractOptions().ocr_languages)
        render_s = ocr_s = 0.0
        found = 0
        pdf = pypdfium2.PdfDocument(data)
        for i in range(pages):
            t0 = time.perf_counter()
            page = pdf[i]
            image = page.render(scale=dpi / 72, grayscale=True).to_pil()
            page.close()
            t1 = time.perf_counter()
            text = pytesseract.image_to_string(image, lang=langs, config="--psm 3")  # as ocr_pdf_pages
            t2 = time.perf_counter()
            render_s += t1 - t0
            ocr_s += t2 - t1
            found += SENTENCE in " ".join(text.split())
        pdf.close()
        rows.append({
            "dpi": dpi, "pages": pages, "render_s": render_s / pages, "ocr_s": ocr_s / pages,
            "total_s": (render_s + ocr_s) / pages, "found": f"{found}/{pages}", "langs": langs,
        })
    return rows


def render(rows: list[dict]) -> None:
    """Print ``rows`` as a table."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title="OCR of a scanned French A4 page (PDFium render + Tesseract), seconds per page")
    for col in ("dpi", "pages", "render s/page", "OCR s/page", "total s/page", "sentence found", "languages"):
        t.add_column(col, justify="right")
    for r in rows:
        if "note" in r:
            t.add_row("-", "-", "-", "-", "-", r["note"], "-")
            continue
        t.add_row(str(r["dpi"]), str(r["pages"]), f"{r['render_s']:.2f}", f"{r['ocr_s']:.2f}",
                  f"{r['total_s']:.2f}", r["found"], r["langs"])
    Console().print(t)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    """The 300 dpi figure."""
    for r in rows:
        if r.get("dpi") == 300:
            return [("OCR seconds per page (300 dpi)", f"{r['total_s']:.2f} s ({r['found']} found)", "(measured)")]
    return [("OCR seconds per page", "tesseract not installed", "(measured)")]
