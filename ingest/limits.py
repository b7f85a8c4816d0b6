"""Extraction limits: how big a document may be before it is ``skipped`` as ``too_large``.

Every limit is decided as early and as cheaply as possible: the parts of an Office package from
its zip directory before anything is inflated, a PDF's or a deck's page count before any page is
read, characters while the text is produced. An :class:`~ancre.errors.ExtractionError` with reason
``too_large`` and a detail naming the configuration key (``extraction.max_part_mb``) says which
limit tripped. The limits of the call in progress are held in a context variable so that the
format readers of :mod:`ancre.ingest.extract` keep their ``reader(data)`` signature.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ancre.errors import ExtractionError

__all__ = ["CharBudget", "ExtractionLimits", "check_pages", "current_limits", "too_large", "using_limits"]

MIB = 1024 * 1024
RATIO_GRACE_BYTES = MIB
"""Parts smaller than this (uncompressed) are never judged by their expansion ratio: tiny parts
compress at any ratio (Apache POI's ``ZipSecureFile`` has the same kind of grace size)."""


@dataclass(frozen=True)
class ExtractionLimits:
    """The limits of one extraction (bytes, characters, pages). Picklable: it crosses to the
    extraction worker. Defaults are those of :class:`ancre.config.ExtractionConfig`."""

    max_part_bytes: int = 64 * MIB
    """Largest uncompressed size of one part (zip member) of an Office package."""
    max_package_bytes: int = 256 * MIB
    """Largest uncompressed size of all parts of an Office package together."""
    max_expansion_ratio: float = 200.0
    """Largest uncompressed/compressed size ratio of a part over :data:`RATIO_GRACE_BYTES`."""
    max_chars: int = 5_000_000
    """Characters of text extracted from one document."""
    max_pages: int = 5_000
    """Pages (PDF), slides (deck) or declared pages (Word)."""

    @classmethod
    def from_config(cls, cfg: Any) -> ExtractionLimits:
        """From an :class:`ancre.config.ExtractionConfig` (sizes there are in MiB)."""
        return cls(
            max_part_bytes=int(cfg.max_part_mb * MIB),
            max_package_bytes=int(cfg.max_package_mb * MIB),
            max_expansion_ratio=float(cfg.max_expansion_ratio),
            max_chars=int(cfg.max_chars),
            max_pages=int(cfg.max_pages),
        )


_CURRENT: ContextVar[ExtractionLimits] = ContextVar("ancre_extraction_limits", default=ExtractionLimits())  # noqa: B039 - a frozen dataclass


def current_limits() -> ExtractionLimits:
    """The limits of the extraction in progress (the defaults outside :func:`using_limits`)."""
    return _CURRENT.get()


@contextmanager
def using_limits(limits: ExtractionLimits) -> Iterator[ExtractionLimits]:
    """Make ``limits`` current for the block (per thread / per context)."""
    token = _CURRENT.set(limits)
    try:
        yield limits
    finally:
        _CURRENT.reset(token)


def too_large(detail: str) -> ExtractionError:
    """The error for a document over a limit: reason ``too_large``, ``detail`` naming the limit."""
    return ExtractionError("too_large", detail)


def mib(n: int) -> str:
    """``314572800`` → ``"300.0 MiB"``."""
    return f"{n / MIB:.1f} MiB"


def check_pages(count: int, what: str = "pages") -> None:
    """Raise ``too_large`` when ``count`` pages (or slides) exceed ``extraction.max_pages``."""
    limit = current_limits().max_pages
    if count > limit:
        raise too_large(f"{count} {what} > extraction.max_pages ({limit})")


class CharBudget:
    """Counts the characters a reader produces; :meth:`add` raises ``too_large`` as soon as the
    total passes ``extraction.max_chars`` (so a streaming reader stops early)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = current_limits().max_chars if limit is None else limit
        self.used = 0

    def add(self, text: str) -> str:
        """Count ``text`` and return it; raises :class:`ExtractionError` (``too_large``)."""
        self.count(len(text))
        return text

    def count(self, n: int) -> None:
        """Count ``n`` more characters; raises :class:`ExtractionError` (``too_large``)."""
        self.used += n
        if self.used > self.limit:
            raise too_large(f"text longer than extraction.max_chars ({self.limit} characters)")
