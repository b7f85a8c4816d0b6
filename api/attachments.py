"""What Open WebUI adds to a question — attached files, knowledge, web results — recognised and
set aside: ancre answers the user's own question from its own documents only.

When a chat carries sources of Open WebUI's own (a file attached to the message, a knowledge
collection, web search results), Open WebUI 0.12 renders them into its RAG template
(``open_webui.config.DEFAULT_RAG_TEMPLATE``: task instructions, then
``<context>{{CONTEXT}}</context>``, each source as ``<source id="N" name="…">text</source>``,
``open_webui.utils.middleware.get_source_context``) and, by default (``RAG_SYSTEM_CONTEXT``
false), puts the rendered template *before* the user's own text in the last user message
(``add_or_update_user_message(…, append=False)``: ``"<template>\\n<question>"``); with
``RAG_SYSTEM_CONTEXT=true`` it goes to the system message instead. Templates of earlier releases
(still stored in an upgraded instance's config) also repeat the question as
``<user_query>{{QUERY}}</user_query>`` after the context. And when the model's native tools are
on (its *Builtin Tools* capability), each user message with files starts with
``<attached_files>\n<file type="file" id="…" name="…"/>…\n</attached_files>\n\n``
(``open_webui.utils.middleware.add_file_context``), earlier turns included.

:func:`user_turn` therefore takes as the question what follows the template's last
``</context>`` (without a ``<user_query>`` or ``<attached_files>`` block), never the attachment's text — which is
neither searched, nor given to the model, nor written to the audit log. It also counts the
sources Open WebUI shows for that message: they come first in the message's ``sources``, so the
citations ancre numbers start after them (:mod:`ancre.api.native_sources`). Images (``image_url``
parts) are attachments too, and are not read either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ancre.api.errors import ApiError
from ancre.api.questions import check_question, earlier_user_questions
from ancre.api.schemas import ChatMessage

_CONTEXT_OPEN = "<context>"
_CONTEXT_CLOSE = "</context>"
_SOURCE_ID_RE = re.compile(r"<source\b[^>]*?\bid=\"(\d{1,6})\"")
_SOURCE_TAG_RE = re.compile(r"<source\b")
_USER_QUERY_RE = re.compile(r"<user_query>(.*?)</user_query>", re.DOTALL)
_ATTACHED_RE = re.compile(r"\A\s*<attached_files>\n(.*?)\n</attached_files>\s*", re.DOTALL)
_FILE_TAG_RE = re.compile(r"<file\b")
_ATTACHMENT_PARTS = frozenset({"image_url", "input_image", "file", "input_file", "input_audio"})
"""Content part types that carry an attachment rather than text (OpenAI chat schema)."""


@dataclass(frozen=True)
class UserTurn:
    """The user's own question and what came with it. ``question``: stripped, checked for
    length; ``attachments``: how many sources or attached parts Open WebUI added (set aside,
    0 when none); ``openwebui_sources``: how many sources Open WebUI itself lists first for this
    message (its ``<source id>`` numbers), so that ancre's citations are numbered from
    ``openwebui_sources + 1``; ``history``: the user's own text of the earlier ``user`` messages,
    oldest first (the conversation a follow-up is resolved from, their attachments set aside too)."""

    question: str
    attachments: int = 0
    openwebui_sources: int = 0
    history: tuple[str, ...] = ()

    @property
    def first_citation(self) -> int:
        """The number of ancre's first citation (``[n]``) in this message."""
        return self.openwebui_sources + 1


def _text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p.text for p in (message.content or []) if p.type == "text" and p.text)


def _attached_parts(message: ChatMessage) -> int:
    if isinstance(message.content, list):
        return sum(1 for p in message.content if p.type in _ATTACHMENT_PARTS)
    return 0


def _is_template(text: str) -> bool:
    """Whether ``text`` holds Open WebUI's rendered RAG template (its ``<context>`` block)."""
    close = text.rfind(_CONTEXT_CLOSE)
    return close >= 0 and text.find(_CONTEXT_OPEN) >= 0 and text.find(_CONTEXT_OPEN) < close


def _source_count(template: str) -> int:
    """Open WebUI's sources in a rendered template: its highest ``<source id>`` (ids are 1, 2, …
    in the order of the message's sources), or 1 when it has sources without ids."""
    context = template[: template.rfind(_CONTEXT_CLOSE)]
    ids = [int(i) for i in _SOURCE_ID_RE.findall(context)]
    if ids:
        return max(ids)
    return 1 if _SOURCE_TAG_RE.search(context) else 0


def own_question(text: str) -> tuple[str, int]:
    """``(question, attachments)``: the user's own text in a message Open WebUI may have wrapped
    in its RAG template and prefixed with its ``<attached_files>`` block, and how many sources
    or files these carried (0: neither, ``text`` as is)."""
    sources = 0
    if _is_template(text):
        close = text.rfind(_CONTEXT_CLOSE)
        sources = max(_source_count(text), 1)
        after = text[close + len(_CONTEXT_CLOSE):]
        queries = _USER_QUERY_RE.findall(after)
        text = _USER_QUERY_RE.sub("", after)
        if not text.strip() and queries:
            text = queries[-1]
    files = 0
    attached = _ATTACHED_RE.match(text)
    if attached is not None:
        files = max(len(_FILE_TAG_RE.findall(attached.group(1))), 1)
        text = text[attached.end():]
    return (text.strip() if sources or files else text), max(sources, files)


def user_text(message: ChatMessage) -> str:
    """The user's own text of any ``user`` message of the conversation, without what Open WebUI
    added (:func:`own_question`) — for earlier turns too, which keep their ``<attached_files>``."""
    return own_question(_text(message))[0]


def user_turn(messages: Sequence[ChatMessage], max_chars: int) -> UserTurn:
    """The last ``user`` message's own question (see the module doc), checked like
    :func:`~ancre.api.questions.check_question` (empty, or over ``max_chars`` characters:
    :class:`ApiError` 422 naming ``messages[i].content``), with the attachments set aside, and the
    earlier user turns' own text as ``history``.
    Raises :class:`ApiError` 422 naming ``messages`` when there is no user message."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role != "user":
            continue
        text = _text(m)
        question, attached = own_question(text)
        sources = max(_source_count(text), 1) if _is_template(text) else 0
        for s in messages:
            if s.role in ("system", "developer") and _is_template(_text(s)):  # RAG_SYSTEM_CONTEXT=true
                sources = max(sources, _source_count(_text(s)), 1)
        history = tuple(h for h in (own_question(t)[0].strip() for t in earlier_user_questions(messages)) if h)
        return UserTurn(check_question(question, max_chars, f"messages[{i}].content"),
                        attachments=max(attached, sources) + _attached_parts(m), openwebui_sources=sources,
                        history=history)
    raise ApiError(422, "invalid_value", "messages: no user message (the question is the last user message)", param="messages")


__all__ = ["UserTurn", "own_question", "user_text", "user_turn"]
