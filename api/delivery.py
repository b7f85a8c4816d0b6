"""How an answer is written out on ``/v1/chat/completions`` for Open WebUI's staff: the text, what
is said before and after it, and its sources (docs/OPENWEBUI.md).

In order:

1. when the question came with attachments (:mod:`ancre.api.attachments`), one sentence saying
   they are not read (:data:`~ancre.api.staff.ATTACHMENTS_NOTE`);
2. the answer's text as written (``Answer.raw``), with its citations numbered ``[n]`` for native
   sources or kept as ``[file name]`` (``api.citations = "markdown"``, and every non-streamed
   answer), and any other ``[digit`` escaped (:mod:`ancre.api.native_sources`). The standard
   refusal is replaced by what really happened when the user is unknown to the directory (control
   ``utilisateur_inconnu``), and followed by a note in extractive mode (:mod:`ancre.api.staff`);
3. the warnings (not grounded, documents left out unchecked) — and, for Markdown sources, the
   « Sources » block before them (:func:`~ancre.api.render.sources_block`);
4. native sources only: one Open WebUI ``source`` event per source, in citation order.

The audit record, the verdict and ``Answer.raw`` are the query core's and are never changed
here: only what the user reads is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ancre.api.attachments import UserTurn
from ancre.api.native_sources import InlineCitations
from ancre.api.render import sources_block
from ancre.api.staff import ATTACHMENTS_NOTE, EXTRACTIVE_REFUSAL_NOTE, StaffMessages
from ancre.query.answer import CONTROL_UNKNOWN_USER, Answer
from ancre.query.grounding import CONTROL_NO_CHUNK
from ancre.query.prompt import REFUSAL


@dataclass(frozen=True)
class Delivery:
    """What shapes one answer's text: ``turn`` (the question and its attachments), ``native``
    (sources as Open WebUI events, citations numbered), ``identity`` (the user's e-mail as
    received, named to him when the directory does not know him) and ``staff`` (the French
    messages)."""

    turn: UserTurn
    native: bool
    identity: str
    staff: StaffMessages

    def prefix(self) -> str:
        """What comes before the answer's text (``""`` or the attachments note, then a blank line)."""
        return f"{ATTACHMENTS_NOTE}\n\n" if self.turn.attachments else ""

    def refusal(self, text: str, answer: Answer) -> str:
        """``text`` — the standard refusal — said as what it is for ``answer``."""
        if CONTROL_UNKNOWN_USER in answer.controles:
            return self.staff.unknown_user(self.identity)
        if answer.extractive and CONTROL_NO_CHUNK not in answer.controles:
            return f"{text}\n\n{EXTRACTIVE_REFUSAL_NOTE}"
        return text

    def complete(self, answer: Answer) -> str:
        """The whole text of a non-streamed answer: Markdown sources (no event channel)."""
        body = answer.raw
        if body.strip() == REFUSAL:
            body = self.refusal(body, answer)
        return self.prefix() + InlineCitations(number=False).rewrite(body) + sources_block(answer)

    def writer(self) -> StreamWriter:
        """A writer for one streamed answer."""
        return StreamWriter(self)


@dataclass
class StreamWriter:
    """One streamed answer's text: :meth:`text` for each raw piece (returns what to send now),
    then :meth:`end` with the final :class:`Answer` (returns the rest of the text and the
    ``source`` events). A piece that is the standard refusal is held until the answer says why
    it was given (it always comes right before the answer, in one piece)."""

    delivery: Delivery
    numbering: InlineCitations = field(init=False)
    _started: bool = field(default=False, init=False)
    _held: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.numbering = InlineCitations(self.delivery.turn.first_citation, number=self.delivery.native)

    def _start(self) -> str:
        if self._started:
            return ""
        self._started = True
        return self.delivery.prefix()

    def text(self, piece: str) -> str:
        """The text to send for the raw ``piece`` (possibly ``""``: held back)."""
        out = self._start()
        if self._held is not None:
            out += self.numbering.feed(self._held)
            self._held = None
        if piece.strip() == REFUSAL:
            self._held = piece
            return out
        return out + self.numbering.feed(piece)

    def end(self, answer: Answer) -> tuple[str, list[dict[str, Any]]]:
        """``(text, events)``: the rest of the text, the footer, and the ``source`` events
        (``[]`` for Markdown sources)."""
        out = self._start()
        if self._held is not None:
            out += self.numbering.feed(self.delivery.refusal(self._held, answer))
            self._held = None
        out += self.numbering.finish()
        if not self.delivery.native:
            return out + sources_block(answer), []
        return out + sources_block(answer, with_sources=False), self.numbering.events(answer)

    def abandon(self) -> str:
        """The text still held when the answer ends without a final :class:`Answer` (a failure)."""
        out = self.numbering.feed(self._held) if self._held is not None else ""
        self._held = None
        return out + self.numbering.finish()


__all__ = ["Delivery", "StreamWriter"]
