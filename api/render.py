"""How an :class:`~ancre.query.answer.Answer` is written out by the API: the sources as JSON, the
``ancre`` verdict object, the ``x-ancre-*`` headers, and the Markdown « Sources » block appended
to a ``/v1`` answer (docs/API.md)."""

from __future__ import annotations

from typing import Any

from ancre.query.answer import Answer, unverified_note
from ancre.query.enrich import format_location
from ancre.query.links import neutralise
from ancre.query.listing import list_note
from ancre.query.versions import version_note
from ancre.query.window import CONTROL_ANSWER_CUT, CONTROL_CONTEXT_REDUCED, CONTROL_CONTEXT_TRUNCATED

WARNING_UNGROUNDED = (
    "⚠️ Attention : cette réponse n'a pas pu être rattachée aux documents disponibles "
    "(réponse non ancrée) ; vérifiez-la avant de vous en servir."
)
"""Appended to a ``/v1`` answer whose verdict is ``ancree: false`` (the answer is still given)."""
WARNING_CONTEXT_TRUNCATED = (
    " Le serveur du modèle n'a pas lu tous les extraits qui lui ont été envoyés (contexte tronqué) : "
    "la réponse a pu être écrite sans eux ni sans les consignes d'ancre."
)
"""Added to the warning when the model's server read less of the prompt than was sent."""
WARNING_INCOMPLETE = (
    "⚠️ Réponse incomplète : elle a atteint la longueur maximale permise au modèle et s'arrête avant la fin. "
    "Posez une question plus précise pour obtenir la suite."
)
"""Appended to an answer that stopped on the model's token budget (``reponse_tronquee``)."""


def dropped_note(answer: Answer) -> str:
    """The sentence shown when extracts were left out to fit the model's context length (``""``
    if none): how many, never which."""
    run = answer.model_run
    if run is None or CONTROL_CONTEXT_REDUCED not in answer.controles:
        return ""
    n = sum(d.chunks for d in run.fitted.dropped)
    what = "1 extrait n'a pas pu" if n == 1 else f"{n} extraits n'ont pas pu"
    return f"ℹ️ {what} être donné(s) au modèle, faute de place dans sa fenêtre de contexte : la réponse repose sur les autres."


def incomplete(answer: Answer) -> bool:
    """``reponse_incomplete``: the answer stopped on the model's token budget."""
    return CONTROL_ANSWER_CUT in answer.controles


def facts_out(answer: Answer) -> list[dict[str, Any]]:
    """``faits_non_sources``: ``[{texte, nature, phrase, documents, raison}]``, the facts control 5
    found not supported as the answer states them (``documents``: the files their claim cites,
    ``[]``: none; ``raison``: :class:`~ancre.query.facts.FactReason`)."""
    return [
        {"texte": f.text, "nature": str(f.kind), "phrase": f.sentence, "documents": list(f.cited), "raison": str(f.reason)}
        for f in answer.facts
    ]


def listing_out(answer: Answer) -> dict[str, Any] | None:
    """``liste``: for a list question, ``{documents, correspondances, passages, note}`` — the
    documents found and what the list rests on (:mod:`ancre.query.listing`); ``None`` otherwise."""
    if answer.listing is None:
        return None
    return {
        "documents": [d.filename for d in answer.listing.documents], "correspondances": answer.listing.matched,
        "passages": answer.listing.searched, "note": list_note(answer.listing),
    }


def versions_out(answer: Answer) -> list[dict[str, Any]]:
    """``versions``: ``[{documents, en_vigueur, raisons}]``, versions of one document among the
    sources, the one that looks current first (``en_vigueur``: ``null`` when it can't be told)."""
    return [{"documents": list(g.documents), "en_vigueur": g.current, "raisons": list(g.reasons)} for g in answer.versions]


def resolved_question(answer: Answer) -> str | None:
    """``question_traitee``: the standalone question answered for a follow-up, ``None`` when the
    question was answered as asked."""
    r = answer.resolution
    return r.question if r is not None and r.rewritten else None


def unsupported_note(answer: Answer) -> str:
    """The part of the warning that names control 5's findings (``""`` when none)."""
    if not answer.facts:
        return ""
    names = ", ".join(f"« {f.text} »" for f in answer.facts[:8])
    more = f" (et {len(answer.facts) - 8} autres)" if len(answer.facts) > 8 else ""
    # a fact is the model's text as written: an address in it is shown as text, like the answer's
    return neutralise(f" Non retrouvé dans les extraits cités : {names}{more}.", "").text


def sources_out(answer: Answer) -> list[dict[str, str]]:
    """The answer's sources as JSON objects ``{filename, location, path}``."""
    return [{"filename": s.filename, "location": s.location, "path": s.path} for s in answer.sources]


def unchecked_out(answer: Answer) -> list[dict[str, Any]]:
    """``documents_ecartes``: ``[{source, documents, raison}]``, the documents left out because
    their rights could not be checked live (never their names)."""
    return [{"source": u.source, "documents": u.documents, "raison": u.outcome} for u in answer.unverified]


def verdict_out(answer: Answer) -> dict[str, Any]:
    """The ``ancre`` object: ``{ancree, verification, controles, sources, extractive,
    documents_ecartes, faits_non_sources, versions, question_traitee, reponse_incomplete}``, and ``liste``
    for a list question."""
    return {
        "ancree": answer.ancree,
        "verification": answer.verification,
        "controles": list(answer.controles),
        "sources": sources_out(answer),
        "extractive": answer.extractive,
        "documents_ecartes": unchecked_out(answer),
        "faits_non_sources": facts_out(answer),
        "versions": versions_out(answer),
        "question_traitee": resolved_question(answer),
        "reponse_incomplete": incomplete(answer),
    } | ({} if answer.listing is None else {"liste": listing_out(answer)})


def verdict_headers(answer: Answer) -> dict[str, str]:
    """``x-ancre-ancree`` (``true``/``false``/``null``) and ``x-ancre-verification``."""
    return {
        "x-ancre-ancree": {True: "true", False: "false", None: "null"}[answer.ancree],
        "x-ancre-verification": answer.verification,
    }


def sources_block(answer: Answer, *, with_sources: bool = True) -> str:
    """What follows the answer's text on ``/v1``: « Question traitée : … » for a resolved
    follow-up, a Markdown « Sources » list, one line per document (file name, then its folder as a
    code span / its URL as an autolink), a note on versions of one document among the sources
    (which looks current and why) and, for a list question, the note that the list may be partial,
    when the answer is not extractive (the extractive text has them), a line saying the answer is
    incomplete when it stopped on the model's token budget, a warning line when the answer is not
    grounded — naming the facts found in no cited extract, and saying so when the model's server
    did not read every extract —, a note when extracts were left out to fit the model's context
    length, and one when documents were left out because their rights could not be checked live. ``""``
    for a refusal (no source, grounded) otherwise. ``with_sources=False``: all but the « Sources »
    list (the sources go as native events, :mod:`ancre.api.native_sources`)."""
    parts: list[str] = []
    shown = answer.resolution.shown() if answer.resolution is not None else ""
    if shown:
        parts.append(f"*{shown}*")
    if answer.sources and with_sources:
        lines = [f"- {s.filename} — {format_location(s.location)}" if s.location else f"- {s.filename}"
                 for s in answer.sources]
        parts.append("**Sources :**\n" + "\n".join(lines))
    if answer.versions and not answer.extractive:
        parts.extend(f"⚠️ {version_note(g, format_location)}" for g in answer.versions)
    if incomplete(answer):
        parts.append(WARNING_INCOMPLETE)
    if answer.listing is not None and not answer.extractive:
        parts.append(f"ℹ️ {list_note(answer.listing)}")
    if answer.ancree is False:
        truncated = WARNING_CONTEXT_TRUNCATED if CONTROL_CONTEXT_TRUNCATED in answer.controles else ""
        parts.append(WARNING_UNGROUNDED + truncated + unsupported_note(answer))
    if dropped_note(answer):
        parts.append(dropped_note(answer))
    if answer.unverified:
        parts.append(f"⚠️ {unverified_note(answer.unverified)}")
    return "\n\n---\n" + "\n\n".join(parts) if parts else ""


__all__ = [
    "WARNING_CONTEXT_TRUNCATED", "WARNING_INCOMPLETE", "WARNING_UNGROUNDED", "dropped_note", "facts_out", "incomplete",
    "listing_out", "resolved_question", "sources_block", "sources_out", "unchecked_out",
    "unsupported_note", "verdict_headers", "verdict_out", "versions_out",
]
