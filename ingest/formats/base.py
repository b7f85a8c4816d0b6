"""What every format reader shares: the one reader signature (:class:`Reader`), the options of
an extraction (:class:`ExtractOptions`) and the text clean-up every reader applies.

A reader takes the whole file and the extraction's options and returns its blocks in reading
order; it runs inside :func:`ancre.ingest.limits.using_limits` (the current
:class:`~ancre.ingest.limits.ExtractionLimits` are read with
:func:`~ancre.ingest.limits.current_limits` and :class:`~ancre.ingest.limits.CharBudget`), raises
:class:`~ancre.errors.ExtractionError` for what it can name (``encrypted``, ``too_large``,
``no_text_layer``, ``timeout`` …) and lets parser exceptions propagate:
:func:`ancre.ingest.extract.extract_bytes` makes them ``corrupt``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from ancre.ingest.textclean import collapse_leaders
from ancre.models import Block, nfc

__all__ = ["DEFAULT_OPTIONS", "ExtractOptions", "Node", "Reader", "clean", "decode_text"]


@dataclass(frozen=True)
class ExtractOptions:
    """Settings of one extraction (from ``[extraction]``, see docs/INDEXING.md "Limits").

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


DEFAULT_OPTIONS = ExtractOptions()


class Reader(Protocol):
    """A format's reader: ``(data, options) -> blocks``. ``data`` is the whole file (bytes),
    ``options`` the extraction's :class:`ExtractOptions`; the blocks are in reading order (empty
    ones are dropped by the caller). Raises :class:`~ancre.errors.ExtractionError` or any parser
    exception (see the module docstring)."""

    def __call__(self, data: bytes, options: ExtractOptions, /) -> list[Block]: ...


Node = Any
"""A node of a parser without type information: an lxml element (python-docx's XML), an odfpy
node, a pypdf object read from the file. Attribute access on it is checked by the tests."""


_WS = re.compile(r"[^\S\n]+")
_NL_RUNS = re.compile(r"\s*\n\s*")


def clean(text: str) -> str:
    """NFC, leaders collapsed, runs of spaces/tabs → one space, stripped; line breaks kept."""
    text = nfc(text).replace("\x00", "")
    text = collapse_leaders(text)
    text = _WS.sub(" ", text)
    return _NL_RUNS.sub("\n", text).strip()


def decode_text(data: bytes) -> str:
    """Text file bytes as text: UTF-8 (a BOM dropped), else cp1252."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # cp1252 leaves 5 bytes undefined; "replace" keeps a stray byte from failing the whole file
        return data.decode("cp1252", errors="replace")
