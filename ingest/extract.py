"""Turn a file's bytes into text blocks in reading order (:class:`~ancre.models.Block`).

Dispatch is on the file name's extension (case-insensitive), through the registry
:data:`ancre.ingest.formats.READERS`; each format family is a module of :mod:`ancre.ingest.formats`
with the one reader signature :class:`~ancre.ingest.formats.base.Reader`:

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
  XML, mapped to the Transitional namespaces: see :mod:`ancre.ingest.formats.office`.
* ``.pdf`` — pypdf, page by page, each page cleaned by
  :func:`~ancre.ingest.textclean.normalize_pdf_text`; a ``PAGE_BREAK`` block opens every page
  after the first and every block carries its 1-based ``page``. An encrypted PDF whose user password
  is empty (only "permissions" set) is decrypted (AES needs the ``cryptography`` package). Lines
  are re-flowed into paragraphs (see :func:`~ancre.ingest.formats.pdf.pdf_paragraphs`), one ``PARAGRAPH`` block each.
  Filled-in form fields (AcroForm, else XFA data) follow their page as ``name : value``
  paragraphs. A page with no text but an image is a scan: with ``ExtractOptions.ocr`` it is
  rendered by PDFium and read by Tesseract (:func:`~ancre.ingest.formats.ocr.ocr_pdf_pages`; blocks with ``ocr=True``);
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

import hashlib

from ancre.errors import ExtractionError
from ancre.ingest.formats import READERS, SUPPORTED_EXTENSIONS, extension_of
from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions
from ancre.ingest.formats.docx import DocxNotes
from ancre.ingest.formats.ocr import ocr_pdf_pages
from ancre.ingest.limits import CharBudget, ExtractionLimits, using_limits
from ancre.models import Block, BlockKind

__all__ = [
    "DEFAULT_OPTIONS", "EXTRACTOR_REVISION", "SUPPORTED_EXTENSIONS", "DocxNotes", "ExtractOptions", "extract_bytes",
    "extractor_version", "ocr_pdf_pages",
]

EXTRACTOR_REVISION = 2
"""Bump when a reader learns to read files it failed on before (2: Strict Open XML)."""


def extractor_version() -> str:
    """The version recorded with a failed or skipped document: the revision and the extensions
    a reader exists for. When it changes (an upgrade), those documents are tried again."""
    digest = hashlib.sha256(",".join(sorted(READERS)).encode()).hexdigest()[:12]
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
    ext = extension_of(filename)
    reader = READERS.get(ext)
    if reader is None:
        raise ExtractionError("unsupported", f"extension {ext or '(none)'!r}")
    if not data:
        raise ExtractionError("empty", "0 bytes")
    try:
        with using_limits(limits or ExtractionLimits()):
            blocks = reader(data, options)
            CharBudget().count(sum(len(b.text) for b in blocks))
    except (ExtractionError, MemoryError):
        raise
    except Exception as exc:  # untrusted input: any parser failure means a corrupt file
        raise ExtractionError("corrupt", f"{type(exc).__name__}: {exc}"[:500]) from exc
    kept = tuple(b for b in blocks if b.kind is BlockKind.PAGE_BREAK or b.text.strip())
    if not any(b.kind is not BlockKind.PAGE_BREAK for b in kept):
        raise ExtractionError("empty", "no text")
    return kept
