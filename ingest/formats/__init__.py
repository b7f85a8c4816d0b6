"""The format readers of extraction, one module per format family, all with the one signature
:class:`~ancre.ingest.formats.base.Reader` ``(data, options) -> list[Block]``, and the registry
:data:`READERS` from a file name's extension to its reader.

- :mod:`~ancre.ingest.formats.docx` — Word (``.docx``, ``.docm``, ``.dotx``, ``.dotm``);
- :mod:`~ancre.ingest.formats.office` — the checks of every Office Open XML package, Excel
  (``.xlsx``, ``.xlsm``) and PowerPoint (``.pptx``, ``.pptm``);
- :mod:`~ancre.ingest.formats.pdf` — PDF, with :mod:`~ancre.ingest.formats.ocr` for scans;
- :mod:`~ancre.ingest.formats.odt` — OpenDocument text;
- :mod:`~ancre.ingest.formats.legacy` — RTF and Word 97–2003 ``.doc``;
- :mod:`~ancre.ingest.formats.text` — plain text and Markdown.

Adding a format = a reader in one of these modules (or a new one) and its extensions here.
Parser libraries are imported inside the readers, so importing this package stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from types import MappingProxyType

from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions, Reader
from ancre.ingest.formats.docx import read_docx
from ancre.ingest.formats.legacy import read_doc, read_rtf
from ancre.ingest.formats.odt import read_odt
from ancre.ingest.formats.office import read_presentation, read_workbook
from ancre.ingest.formats.pdf import read_pdf
from ancre.ingest.formats.text import read_markdown, read_txt

__all__ = ["DEFAULT_OPTIONS", "READERS", "SUPPORTED_EXTENSIONS", "ExtractOptions", "Reader", "extension_of", "reader_for"]

READERS: Mapping[str, Reader] = MappingProxyType({
    ".docx": read_docx,
    ".pdf": read_pdf,
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".txt": read_txt,
    ".odt": read_odt,
    ".rtf": read_rtf,
    ".doc": read_doc,
    ".docm": read_docx,
    ".dotx": read_docx,
    ".dotm": read_docx,
    ".xlsx": read_workbook,
    ".xlsm": read_workbook,
    ".pptx": read_presentation,
    ".pptm": read_presentation,
})
"""Extension (lower case, with the dot) → its reader."""

SUPPORTED_EXTENSIONS = frozenset(READERS)
"""Extensions a reader exists for (lower case, with the dot)."""


def extension_of(filename: str) -> str:
    """The lower-case extension of ``filename`` (``""`` when none), a Windows path too; trailing
    spaces and dots are not part of it (Windows and SharePoint drop them)."""
    return PurePosixPath(filename.replace("\\", "/").rstrip(" .")).suffix.lower()


def reader_for(filename: str) -> Reader | None:
    """The reader of ``filename``'s extension (:func:`extension_of`), ``None`` when there is none."""
    return READERS.get(extension_of(filename))
