"""Text clean-up shared by extraction and embedding.

* :func:`collapse_leaders` removes table-of-contents leaders (``Objet ........ 2``). The seed
  lab found that runs of dots or underscores made nomic-embed-text return HTTP 500, so the
  embedders apply it too, right before embedding.
* :func:`normalize_pdf_text` tidies what pypdf returns for one page: NFKC (ligatures ``ﬁ`` → ``fi``,
  no-break spaces → spaces), NUL bytes removed, end-of-line hyphenation joined, leaders collapsed,
  whitespace tidied. Line breaks are kept (one per line, at most one blank line in a row).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["collapse_leaders", "normalize_pdf_text"]

_LEADER_CHARS = ".·_…"
# A run of leader characters, optionally separated by single spaces/tabs (". . . . ."), with the
# horizontal whitespace around it; whether it really is a leader is decided in _replace_leader.
_LEADER_RUN = re.compile(r"[ \t]*[.·_…](?:[ \t]?[.·_…])+[ \t]*")


def _replace_leader(m: re.Match[str]) -> str:
    run = m.group(0)
    core = "".join(c for c in run if c in _LEADER_CHARS)
    # 4+ leader characters ("....", "____", ". . . ."), or any run of 2+ with an ellipsis char in it
    # ("……", ".…."); "..." (a plain ellipsis) and "A · B" are left alone.
    if len(core) >= 4 or ("…" in core and len(core) >= 2):
        return " "
    return run


def collapse_leaders(text: str) -> str:
    """Collapse table-of-contents leaders to a single space.

    A leader is a run of 4 or more of ``.``, ``_``, ``·``, ``…`` (mixed or not, possibly separated
    by single spaces as in ``. . . . .``), or a run of 2 or more that contains an ellipsis character
    (``……``, ``.…``). The run and the spaces or tabs around it become one space:
    ``"1. Objet ....... 2"`` → ``"1. Objet 2"``. A three-dot ellipsis ``...`` is kept. Line breaks
    are never touched.
    """
    return _LEADER_RUN.sub(_replace_leader, text)


# "infor-\nmation": a letter, a hyphen (or soft hyphen) ending the line, a letter starting the next.
_EOL_HYPHEN = re.compile(r"(?<=\w)[-\u00ad][ \t]*\n[ \t]*(?=(\w))")
_SPACES = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n{3,}")


def _join_hyphen(m: re.Match[str]) -> str:
    nxt = m.group(1)
    if m.group(0)[0] == "\u00ad" or nxt.islower():
        return ""  # hyphenation inserted by the layout: "infor-\nmation" → "information"
    return "-"  # a compound broken at its own hyphen: "Jean-\nPierre" → "Jean-Pierre"


def normalize_pdf_text(text: str) -> str:
    """Clean one page of text extracted from a PDF.

    Steps, in order: Unicode NFKC; NUL bytes dropped; ``\\r\\n``/``\\r`` → ``\\n``; end-of-line
    hyphenation joined — ``infor-\\nmation`` → ``information`` when the next line starts with a
    lower-case letter, ``Jean-\\nPierre`` → ``Jean-Pierre`` (hyphen kept, line joined) when it starts
    with an upper-case letter or a digit; a hyphen inside a line (``Jean-Pierre``) is never touched;
    remaining soft hyphens dropped; :func:`collapse_leaders`; runs of spaces/tabs → one space, each
    line stripped, at most one blank line in a row, the whole stripped.

    Known limit: a lower-case compound split exactly at its hyphen (``porte-\\nmanteau``) loses the
    hyphen; the text layer does not say which hyphens are real.
    """
    text = unicodedata.normalize("NFKC", text).replace("\x00", "")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _EOL_HYPHEN.sub(_join_hyphen, text)
    text = text.replace("\u00ad", "")
    text = collapse_leaders(text)
    text = _SPACES.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", text).strip()
