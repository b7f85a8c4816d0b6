"""How an :class:`~ancre.query.answer.Answer` is written out by the API: the sources as JSON, the
``ancre`` verdict object, the ``x-ancre-*`` headers, and the Markdown « Sources » block appended
to a ``/v1`` answer (README "API")."""

from __future__ import annotations

from typing import Any

from ancre.query.answer import Answer, unverified_note
from ancre.query.enrich import format_location

WARNING_UNGROUNDED = (
    "⚠️ Attention : cette réponse n'a pas pu être rattachée aux documents disponibles "
    "(réponse non ancrée) ; vérifiez-la avant de vous en servir."
)
"""Appended to a ``/v1`` answer whose verdict is ``ancree: false`` (the answer is still given)."""


def sources_out(answer: Answer) -> list[dict[str, str]]:
    """The answer's sources as JSON objects ``{filename, location, path}``."""
    return [{"filename": s.filename, "location": s.location, "path": s.path} for s in answer.sources]


def unchecked_out(answer: Answer) -> list[dict[str, Any]]:
    """``documents_ecartes``: ``[{source, documents, raison}]``, the documents left out because
    their rights could not be checked live (never their names)."""
    return [{"source": u.source, "documents": u.documents, "raison": u.outcome} for u in answer.unverified]


def verdict_out(answer: Answer) -> dict[str, Any]:
    """The ``ancre`` object: ``{ancree, verification, controles, sources, extractive,
    documents_ecartes}``."""
    return {
        "ancree": answer.ancree,
        "verification": answer.verification,
        "controles": list(answer.controles),
        "sources": sources_out(answer),
        "extractive": answer.extractive,
        "documents_ecartes": unchecked_out(answer),
    }


def verdict_headers(answer: Answer) -> dict[str, str]:
    """``x-ancre-ancree`` (``true``/``false``/``null``) and ``x-ancre-verification``."""
    return {
        "x-ancre-ancree": {True: "true", False: "false", None: "null"}[answer.ancree],
        "x-ancre-verification": answer.verification,
    }


def sources_block(answer: Answer, *, with_sources: bool = True) -> str:
    """What follows the answer's text on ``/v1``: a Markdown « Sources » list, one line per
    document (file name, then its folder as a code span / its URL as an autolink), and a warning
    line when the answer is not grounded, and one when documents were left out because their
    rights could not be checked live. ``""`` for a refusal (no source, grounded) otherwise.
    ``with_sources=False``: the warnings only (the sources go as native events,
    :mod:`ancre.api.native_sources`)."""
    parts: list[str] = []
    if answer.sources and with_sources:
        lines = [f"- {s.filename} — {format_location(s.location)}" if s.location else f"- {s.filename}"
                 for s in answer.sources]
        parts.append("**Sources :**\n" + "\n".join(lines))
    if answer.ancree is False:
        parts.append(WARNING_UNGROUNDED)
    if answer.unverified:
        parts.append(f"⚠️ {unverified_note(answer.unverified)}")
    return "\n\n---\n" + "\n\n".join(parts) if parts else ""


__all__ = ["WARNING_UNGROUNDED", "sources_block", "sources_out", "unchecked_out", "verdict_headers", "verdict_out"]
