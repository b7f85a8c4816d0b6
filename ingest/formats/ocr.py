"""OCR of scanned PDF pages: each page rendered by PDFium (pypdfium2) and read by Tesseract
(pytesseract), under the file's time limit (:func:`ocr_pdf_pages`)."""

from __future__ import annotations

import os
import time

from ancre.errors import ExtractionError
from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions

__all__ = ["OcrUnavailable", "ocr_pdf_pages", "tesseract_languages"]


class OcrUnavailable(Exception):
    """Tesseract or its language data is missing."""


def tesseract_languages(wanted: str) -> str:
    """The languages of ``wanted`` (``fra+eng``) that Tesseract has data for, joined by ``+``.
    Raises :class:`OcrUnavailable` when Tesseract or every wanted language is missing."""
    import pytesseract

    try:
        installed = set(pytesseract.get_languages(config=""))
    except (pytesseract.TesseractNotFoundError, OSError) as exc:
        raise OcrUnavailable("tesseract is not installed") from exc
    langs = [lang for lang in wanted.split("+") if lang in installed]
    if not langs:
        raise OcrUnavailable(f"no Tesseract data for {wanted!r} (installed: {sorted(installed)})")
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
    which keys to raise. Raises ``OcrUnavailable`` when Tesseract or every wanted language is
    missing."""
    import pypdfium2
    import pytesseract

    from ancre.ingest.worker import request_more_time

    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    langs = tesseract_languages(options.ocr_languages)
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


