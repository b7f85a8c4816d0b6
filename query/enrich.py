"""Citation enrichment (docs/ARCHITECTURE.md "Data flow of a question" step 8), done *after* every check so that the controls
and the judge see the raw citations.

Each valid citation gets its document's folder:
``[nom.docx]`` → ``[nom.docx : `\\\\SRV\\Partage\\Dossier\\`]``
(the UNC folder in an inline code span, so Markdown keeps the backslashes); a SharePoint (or any
``http(s)``) location becomes an autolink ``[nom.docx : <https://…/Documents%20partages/>]``
(spaces percent-encoded: CommonMark autolinks may not contain spaces). Invented citations and
brackets that are not citations are left untouched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote

from ancre.query.citations import scan_citations
from ancre.query.context import Source


def _code_span(text: str) -> str:
    """``text`` as a CommonMark inline code span (fence longer than any backtick run inside)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def format_location(location: str) -> str:
    """How a folder is shown in a citation: an autolink for a URL, a code span otherwise."""
    if location.startswith(("http://", "https://")):
        return f"<{quote(location, safe=':/?#[]@!$&()*+,;=%~')}>"
    return _code_span(location)


def enrich_citations(answer: str, sources: Iterable[Source]) -> str:
    """``answer`` (NFC-normalised) with each valid citation followed by `` : <folder>``.
    Sources without a location leave their citations as they are."""
    by_doc = {s.doc_id: s for s in sources}
    scan = scan_citations(answer, by_doc.values())
    text = scan.text
    for c in reversed(scan.valid):
        src = by_doc.get(c.doc_id or "")
        if src is None or not src.location:
            continue
        text = f"{text[: c.end]} : {format_location(src.location)}{text[c.end :]}"
    return text


__all__ = ["enrich_citations", "format_location"]
