"""Extraction formats: one reader signature behind one registry (:mod:`ancre.ingest.formats`)."""

from __future__ import annotations

import hashlib
import inspect

import pytest

from ancre.ingest.extract import SUPPORTED_EXTENSIONS, extract_bytes, extractor_version
from ancre.ingest.formats import READERS, extension_of, reader_for
from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions
from ancre.models import BlockKind

# the extensions read before the readers were split into modules: the same set, so the extractor
# version recorded with failed and skipped files does not change (they are not all tried again)
EXTENSIONS = {".docx", ".docm", ".dotx", ".dotm", ".xlsx", ".xlsm", ".pptx", ".pptm", ".pdf", ".md", ".markdown",
              ".txt", ".odt", ".rtf", ".doc"}


def test_the_registry_covers_the_supported_extensions_and_keeps_the_extractor_version() -> None:
    assert set(READERS) == set(SUPPORTED_EXTENSIONS) == EXTENSIONS
    assert extractor_version() == "2:" + hashlib.sha256(",".join(sorted(EXTENSIONS)).encode()).hexdigest()[:12]


@pytest.mark.parametrize("ext", sorted(EXTENSIONS))
def test_every_reader_has_the_one_signature(ext: str) -> None:
    reader = READERS[ext]
    params = list(inspect.signature(reader).parameters.values())
    assert [p.name for p in params] == ["data", "options"], reader
    assert params[1].default is DEFAULT_OPTIONS
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)


def test_extension_of_and_reader_for() -> None:
    assert extension_of("Dossier\\Rapport.PDF. ") == ".pdf"
    assert extension_of("sans-extension") == ""
    assert reader_for("notes.Markdown") is READERS[".markdown"]
    assert reader_for("archive.zip") is None


def test_a_reader_is_called_with_the_options() -> None:
    # the text reader ignores them, the pdf and doc readers use them: all take them the same way
    blocks = READERS[".md"](b"# Titre\n\nUn paragraphe.", ExtractOptions(ocr=False))
    assert [(b.kind, b.text) for b in blocks] == [(BlockKind.HEADING, "Titre"), (BlockKind.PARAGRAPH, "Un paragraphe.")]
    assert [b.text for b in extract_bytes(b"# Titre\n\nUn paragraphe.", "a.md")] == ["Titre", "Un paragraphe."]
