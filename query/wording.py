"""Whole words in French text (questions, extracts, file names): the one pattern of a word's edges
that the query side's wording rules share (:func:`any_word`)."""

from __future__ import annotations

import re

WORD_START = r"(?<![^\W_])"
"""Not after a letter or a digit (``_`` separates words, unlike ``\\b``: ``CLIENTS_2024`` holds
the word ``CLIENTS``)."""
WORD_END = r"(?![^\W_])"
"""Not before a letter or a digit."""


def any_word(*alternatives: str) -> re.Pattern[str]:
    """A case-insensitive pattern of any of ``alternatives`` (regular expressions, joined by
    ``|``) as a whole word (:data:`WORD_START`, :data:`WORD_END`)."""
    return re.compile(rf"{WORD_START}(?:{'|'.join(alternatives)}){WORD_END}", re.IGNORECASE)


__all__ = ["WORD_END", "WORD_START", "any_word"]
