"""Open WebUI's side requests ("tasks"): recognised, answered without retrieval, never audited.

Besides the user's question, Open WebUI (0.12) sends its chat model prompts of its own — a
title, tags and follow-up suggestions after each answer, search/retrieval queries, autocomplete,
an emoji… — to the *task model*, which is the chat model unless an admin sets one. In the
request body they are ordinary chat completions; Open WebUI removes its ``metadata.task`` before
calling an OpenAI connection. What it does forward is the connection's custom headers, with
``{{TASK}}`` replaced by the task name (``open_webui.utils.headers.parse_custom_headers``) and by
``""`` for the user's own question. So the connection is given the header
``{"X-OpenWebUI-Task": "{{TASK}}"}`` (``api.task_header``), and a request whose value is not
empty is a side request: :func:`task_reply` answers it at once, in the format Open WebUI parses
(``open_webui.utils.middleware.background_tasks_handler``, ``open_webui.config`` templates):

======================== =============================================== ====================
task                     reply                                           Open WebUI then
======================== =============================================== ====================
title_generation         ``{"title": "<the question, shortened>"}``      titles the chat
tags_generation          ``{"tags": []}``                                adds no tag
follow_up_generation     ``{"follow_ups": []}``                          suggests nothing
query_generation         ``{"queries": []}``                             searches nothing more
autocomplete_generation  ``{"text": ""}``                                completes nothing
image_prompt_generation  ``{"prompt": ""}``                              —
function_calling         ``{"tool_calls": []}``                          calls no tool
emoji_generation, other  ``""``                                          —
======================== =============================================== ====================

No retrieval runs and no document text is returned, so a side request discloses nothing and is
not a question: it leaves no audit record (the follow-up prompt carries the previous answer,
which must not be logged again as a question). It is counted in ``ancre_api_tasks_total{task}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ancre.api.schemas import ChatMessage

KNOWN_TASKS = frozenset({
    "title_generation", "tags_generation", "follow_up_generation", "query_generation",
    "autocomplete_generation", "image_prompt_generation", "function_calling", "emoji_generation",
    "moa_response_generation",
})  # fmt: skip
"""Open WebUI 0.12's task names (``open_webui.constants.TASKS``)."""

TITLE_MAX_CHARS = 50
"""Longest title returned for ``title_generation`` (a cut title ends with « … »)."""

_HISTORY_RE = re.compile(r"<chat_history>(.*?)</chat_history>", re.DOTALL)
_USER_LINE_RE = re.compile(r"^USER:[ \t]*(.*\S)", re.MULTILINE)


def _text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p.text for p in (message.content or []) if p.type == "text" and p.text)


def short_title(question: str, max_chars: int = TITLE_MAX_CHARS) -> str:
    """``question`` as a chat title: one line, closing punctuation removed, at most ``max_chars``
    characters, cut at a word boundary with « … »; ``""`` for an empty question."""
    title = " ".join(question.split()).rstrip(" ?!.:;…").strip()
    if len(title) <= max_chars:
        return title
    cut = title[: max_chars - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip(" ,;:'’-") + "…"


def title_question(messages: Sequence[ChatMessage]) -> str:
    """The user's question inside Open WebUI's title prompt: the last ``USER:`` line of its
    ``<chat_history>`` block (Open WebUI renders the history as ``ROLE: content`` lines), ``""``
    when the prompt has none (a customised template)."""
    for m in reversed(messages):
        if m.role != "user":
            continue
        history = _HISTORY_RE.search(_text(m))
        users = _USER_LINE_RE.findall(history.group(1)) if history else []
        return users[-1] if users else ""
    return ""


def task_label(task: str) -> str:
    """The metric label of a task header value: the task name if Open WebUI knows it, else ``other``."""
    return task if task in KNOWN_TASKS else "other"


def task_reply(task: str, messages: Sequence[ChatMessage]) -> str:
    """The assistant message content answering the side request ``task`` (see the module doc).
    An empty title makes Open WebUI fall back to the question itself."""
    if task == "title_generation":
        return json.dumps({"title": short_title(title_question(messages))}, ensure_ascii=False)
    key = {"tags_generation": "tags", "follow_up_generation": "follow_ups", "query_generation": "queries",
           "function_calling": "tool_calls"}.get(task)
    if key is not None:
        return json.dumps({key: []})
    if task == "autocomplete_generation":
        return json.dumps({"text": ""})
    if task == "image_prompt_generation":
        return json.dumps({"prompt": ""})
    return ""


__all__ = ["KNOWN_TASKS", "TITLE_MAX_CHARS", "short_title", "task_label", "task_reply", "title_question"]
