"""The question a request asks: checked for emptiness and length (``api.max_question_chars``)."""

from __future__ import annotations

from collections.abc import Sequence

from ancre.api.errors import ApiError
from ancre.api.schemas import ChatMessage


def check_question(text: str, max_chars: int, param: str) -> str:
    """``text`` stripped; raises :class:`ApiError` 422 naming ``param`` when empty or over
    ``max_chars`` characters."""
    text = text.strip()
    if not text:
        raise ApiError(422, "invalid_value", f"{param}: the question is empty", param=param,
                       staff="Votre message ne contient pas de question : écrivez votre question.")
    if len(text) > max_chars:
        raise ApiError(
            422, "question_too_long",
            f"{param}: the question is {len(text)} characters long; the limit is {max_chars} (api.max_question_chars)",
            param=param,
            staff=f"Votre question fait {len(text)} caractères ; ancre en accepte au plus {max_chars}. Raccourcissez-la "
                  "(ancre ne lit pas les documents collés ou joints : posez seulement votre question).",
        )
    return text


def last_user_question(messages: Sequence[ChatMessage], max_chars: int) -> str:
    """The text of the last ``user`` message (text parts joined by newlines). Raises
    :class:`ApiError` 422 naming ``messages`` when there is none or it is empty, or the limit
    (``api.max_question_chars``) when it is longer than ``max_chars`` characters."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role != "user":
            continue
        if isinstance(m.content, str):
            text = m.content
        else:
            text = "\n".join(p.text for p in (m.content or []) if p.type == "text" and p.text)
        return check_question(text, max_chars, f"messages[{i}].content")
    raise ApiError(422, "invalid_value", "messages: no user message (the question is the last user message)", param="messages")


def earlier_user_questions(messages: Sequence[ChatMessage]) -> list[str]:
    """The text of every ``user`` message before the last one, oldest first (empty ones
    skipped): the conversation a follow-up is resolved from. Assistant messages are never read —
    an earlier answer is no evidence."""
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    out = []
    for m in messages[:last]:
        if m.role != "user":
            continue
        text = (
            m.content
            if isinstance(m.content, str)
            else "\n".join(p.text for p in (m.content or []) if p.type == "text" and p.text)
        )
        if text and text.strip():
            out.append(text.strip())
    return out


__all__ = ["check_question", "earlier_user_questions", "last_user_question"]
