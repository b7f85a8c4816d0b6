"""The hallucination controls (docs/ARCHITECTURE.md "Data flow of a question" steps 6–7): five deterministic controls, then
the optional judge, folded into one :class:`Verdict`.

1. no chunk retrieved → the standard refusal, no model called (:data:`CONTROL_NO_CHUNK`);
2. a short refusal (< 200 characters, contains « ne figure pas dans les documents
   disponibles ») passes (:data:`CONTROL_REFUSAL`) — if it is the refusal sentence alone
   (:func:`refusal_only`) and cites nothing: any other statement (« … disponibles. Toutefois, le
   forfait est de CHF 1 500 HT ») or a short *partial* answer (« CHF 3 840 HT [x.docx] ; la date
   ne figure pas dans les documents disponibles ») makes claims, so it goes on through every
   control and the judge;
3. every citation must name a shown source; a cited file that was not shown is invented
   (:data:`CONTROL_INVENTED`, see :mod:`ancre.query.citations`);
4. an answer longer than 200 characters without any valid citation is not grounded
   (:data:`CONTROL_UNCITED`);
5. every figure, amount, date, duration, code and proper or product name it states must occur,
   normalised, in an extract its claim cites, of the document whose subject it speaks of, next
   to the same field (:data:`CONTROL_FACT`, :mod:`ancre.query.facts`): « CHF 3 000 HT
   [03_Contrat_Maintenance_Etude_Rochat.docx] » for a contract that says CHF 3 840 HT, another
   client's fee under this client's name, the hourly rate as the monthly fee, a replaced
   version's figure called « en vigueur », a figure its sentence does not cite are not grounded,
   and the unsupported spans are listed in :attr:`Verdict.facts`. When control 4 fired, the
   facts of uncited sentences are not listed again.

When 3 to 5 pass, the judge decides (:data:`CONTROL_JUDGE` when it finds unsupported
affirmations). ``ancree`` is ``True`` only when something positively established it: a refusal,
verbatim extractive quotes, or the judge. A missing, failing or unreadable judge leaves it
``None`` with ``verification = "non_effectuee"``: never a silent "grounded".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ancre.models import nfc
from ancre.query.citations import scan_citations
from ancre.query.context import Context
from ancre.query.facts import UnsupportedFact, unsupported_facts
from ancre.query.judge import Judge
from ancre.query.prompt import REFUSAL_MARKER

CONTROL_NO_CHUNK = "aucun_extrait"
CONTROL_REFUSAL = "refus"
CONTROL_INVENTED = "citation_inventee"
CONTROL_UNCITED = "sans_citation"
CONTROL_FACT = "fait_non_source"
CONTROL_JUDGE = "juge"

SHORT_ANSWER_CHARS = 200
"""Control 2's and control 4's limit, in characters (of the stripped, NFC answer)."""

Verification = Literal["effectuee", "non_effectuee", "non_requise"]


@dataclass(frozen=True)
class Verdict:
    """Outcome of the controls for one answer.

    ``ancree``: ``True`` grounded, ``False`` not grounded, ``None`` not established (judge absent
    or failed). ``controls``: the controls that fired, in order (``aucun_extrait``, ``refus``,
    ``citation_inventee``, ``sans_citation``, ``fait_non_source``, ``juge``). ``invented``: invented citation names;
    ``cited``: file names of the shown sources validly cited; ``verification``: whether the judge
    ran (``effectuee``), should have but could not (``non_effectuee``), or was not needed
    (``non_requise``: refusal, failed deterministic control, extractive answer);
    ``unsourced``: the affirmations the judge found unsupported; ``facts``: the facts control 5
    found in no extract the answer cites.
    """

    ancree: bool | None
    controls: tuple[str, ...] = ()
    invented: tuple[str, ...] = ()
    cited: tuple[str, ...] = ()
    verification: Verification = "non_requise"
    unsourced: tuple[str, ...] = ()
    facts: tuple[UnsupportedFact, ...] = ()


def _normalized(text: str) -> str:
    text = nfc(text).replace("\u2019", "'").replace("\u00a0", " ")
    return re.sub(r"\s+", " ", text).strip()


def is_refusal(answer: str) -> bool:
    """Control 2: shorter than 200 characters and containing the refusal marker (case and
    whitespace insensitive)."""
    text = _normalized(answer)
    return len(text) < SHORT_ANSWER_CHARS and REFUSAL_MARKER in text.casefold()


_SENTENCES = re.compile(r"(?<=[.!?…])\s+|\n+")


def refusal_only(answer: str) -> bool:
    """Whether ``answer`` is the refusal sentence alone: :func:`is_refusal`, and nothing but
    punctuation outside its sentences that hold the refusal marker (« Cette information ne
    figure pas dans les documents disponibles. Toutefois, … » is not)."""
    if not is_refusal(answer):
        return False
    rest = [p for p in _SENTENCES.split(_normalized(answer)) if REFUSAL_MARKER not in p.casefold()]
    return not any(re.search(r"[^\W_]", p) for p in rest)


def no_context_verdict() -> Verdict:
    """Control 1's verdict: no chunk, the standard refusal was returned without any model call."""
    return Verdict(True, (CONTROL_NO_CHUNK,))


def check_deterministic(answer: str, context: Context, question: str = "") -> Verdict:
    """Controls 1–5 on the raw answer (before enrichment); ``question`` is what retrieval used
    (control 5 lets a negative sentence repeat its names). When they all pass the verdict is
    ``ancree=None, verification="non_effectuee"``: a judge has yet to establish it."""
    if context.empty:
        return Verdict(is_refusal(answer), (CONTROL_NO_CHUNK,))
    scan = scan_citations(answer, context.sources)
    if refusal_only(answer) and not scan.citations:
        return Verdict(True, (CONTROL_REFUSAL,))
    fired: list[str] = []
    if scan.invented:
        fired.append(CONTROL_INVENTED)
    if len(_normalized(answer)) > SHORT_ANSWER_CHARS and not scan.valid:
        fired.append(CONTROL_UNCITED)
    facts = unsupported_facts(answer, context, question, scan, uncited=CONTROL_UNCITED not in fired)
    if facts:
        fired.append(CONTROL_FACT)
    if fired:
        return Verdict(False, tuple(fired), scan.invented, scan.cited, facts=facts)
    return Verdict(None, (), (), scan.cited, "non_effectuee")


def ground(
    question: str,
    answer: str,
    context: Context,
    judge: Judge | None = None,
    *,
    extractive: bool = False,
) -> Verdict:
    """The full verdict on ``answer``: controls 1–5, then ``judge`` when they pass.

    ``extractive=True`` marks an :class:`~ancre.query.llm.ExtractiveAnswerer` answer: verbatim
    quotes of shown extracts, grounded by construction (``verification = "non_requise"``); its
    refusal goes through control 2 like any other.
    Never raises (the judge's failures become ``non_effectuee``).
    """
    if extractive and not context.empty and not is_refusal(answer):
        scan = scan_citations(answer, context.sources)
        return Verdict(True, (), (), scan.cited, "non_requise")
    verdict = check_deterministic(answer, context, question)
    if verdict.verification != "non_effectuee" or judge is None:
        return verdict
    result = judge.check(question, answer, context)
    if result is None:
        return verdict
    return Verdict(
        result.ancree,
        () if result.ancree else (CONTROL_JUDGE,),
        (),
        verdict.cited,
        "effectuee",
        result.affirmations_non_sourcees,
    )


__all__ = [
    "CONTROL_FACT",
    "CONTROL_INVENTED",
    "CONTROL_JUDGE",
    "CONTROL_NO_CHUNK",
    "CONTROL_REFUSAL",
    "CONTROL_UNCITED",
    "SHORT_ANSWER_CHARS",
    "Verdict",
    "Verification",
    "check_deterministic",
    "ground",
    "is_refusal",
    "no_context_verdict",
    "refusal_only",
]
