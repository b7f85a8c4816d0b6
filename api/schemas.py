"""Request and response bodies of the API (pydantic), as published in ``/openapi.json``.

The ``/v1`` shapes follow the OpenAI API reference ("Create chat completion", "List models",
error object ``{"error": {"message", "type", "param", "code"}}``); fields ancre does not use
(temperature, top_p, user, tools, …) are accepted and ignored — the answering temperature is
the server's (never above 0.3).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

INVALID_TEXT = "invalid_text"
"""Validation error type of a request string that is not valid Unicode text (see :func:`text_error`)."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


def text_error(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first string in a decoded JSON value (``dict``/``list``/``str``, keys included) that is
    not valid Unicode text, as ``(param, reason)`` — ``param`` like ``messages[0].content`` — or
    ``None`` when all are valid. Invalid: a lone surrogate code point (U+D800–U+DFFF: JSON's
    ``"\\ud800"`` escape decodes to one, RFC 8259 §8.2), which cannot be encoded as UTF-8 and so
    could reach neither the embedder, the model nor the audit log."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            return path or "body", f"lone surrogate U+{ord(value[e.start]):04X} at character {e.start} is not valid Unicode text"
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            key = str(k)
            found = text_error(key, path or "body") if isinstance(k, str) else None
            if found is not None:
                return found[0], f"a key: {found[1]}"
            found = text_error(v, f"{path}.{key}" if path else key)
            if found is not None:
                return found
        return None
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = text_error(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


class _RequestBody(BaseModel):
    """A request body: every string in it, extra fields included, must be valid Unicode text —
    checked once here, at the edge, before any field is used (HTTP 422 naming the field)."""

    @model_validator(mode="before")
    @classmethod
    def _valid_text(cls, data: Any) -> Any:
        found = text_error(data)
        if found is not None:
            raise PydanticCustomError(INVALID_TEXT, "{param}: {reason}", {"param": found[0], "reason": found[1]})
        return data


class ContentPart(_Open):
    """One part of a multi-part message content (``{"type": "text", "text": …}``; other types
    such as ``image_url`` are ignored)."""

    type: str
    text: str | None = None


class ChatMessage(_Open):
    """One message of the conversation. Only the last ``user`` message is used."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class ChatCompletionRequest(_RequestBody, _Open):
    """``POST /v1/chat/completions`` body (OpenAI schema; extra fields ignored)."""

    model: str = Field(description="The model id of GET /v1/models (default 'ancre').", examples=["ancre"])
    messages: list[ChatMessage] = Field(min_length=1, description="The conversation; the question is the last user message.")
    stream: bool | None = Field(False, description="Server-sent events ending with 'data: [DONE]'.")


class QueryRequest(_RequestBody):
    """``POST /query`` body."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, description="The question, in French or any language.")


class SourceOut(BaseModel):
    """A document shown with an answer: file name, folder (UNC or SharePoint URL), path in its source."""

    filename: str
    location: str
    path: str


class Unchecked(BaseModel):
    """Documents of one source left out because their rights could not be checked live."""

    source: str
    documents: int
    raison: Literal["unreachable", "no_source"] = Field(
        description="unreachable: the source did not answer in time; no_source: not configured"
    )


class FactOut(BaseModel):
    """A fact of the answer not supported as it states it (control 5)."""

    texte: str = Field(description="The fact as written in the answer, e.g. 'CHF 3 000 HT'.")
    nature: Literal["montant", "nombre", "duree", "date", "heure", "code", "nom"]
    phrase: str = Field(description="The sentence that states it.")
    documents: list[str] = Field(description="The files its claim cites; [] when it cites none.")
    raison: Literal["absent", "non_cite", "autre_sujet", "autre_champ", "version_remplacee"] = Field(
        "absent",
        description=(
            "absent: in no cited extract; non_cite: its sentence cites nothing; autre_sujet: in a cited extract of "
            "another subject (another client); autre_champ: the value of another field; version_remplacee: a "
            "replaced version's value stated as the one in force"
        ),
    )


class ListOut(BaseModel):
    """The documents a list question found (« Liste tous les contrats … »): the list may be partial."""

    documents: list[str] = Field(description="File names of the documents found, best first.")
    correspondances: int = Field(description="How many documents matched.")
    passages: int = Field(description="How many passages the search returned: what the list rests on.")
    note: str = Field(description="The sentence telling the list may be incomplete.")


class VersionsOut(BaseModel):
    """Documents among the sources that are versions of one another."""

    documents: list[str] = Field(description="File names, the one that looks current first.")
    en_vigueur: str | None = Field(description="The file that looks current; null when it can't be told.")
    raisons: list[str]


class Verdict(BaseModel):
    """The ``ancre`` object of a chat completion (and of the last streamed chunk)."""

    ancree: bool | None = Field(description="true grounded, false not grounded, null not established")
    verification: Literal["effectuee", "non_effectuee", "non_requise"]
    controles: list[str]
    sources: list[SourceOut]
    extractive: bool
    documents_ecartes: list[Unchecked] = []
    faits_non_sources: list[FactOut] = []
    versions: list[VersionsOut] = []
    question_traitee: str | None = Field(None, description="The standalone question answered for a follow-up.")
    reponse_incomplete: bool = Field(False, description="The answer stopped on the model's token budget (reponse_tronquee).")
    liste: ListOut | None = Field(None, description="For a list question: the documents found (maybe partial).")


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ChatCompletion(BaseModel):
    """Non-streamed answer: the text is the answer followed by its sources block."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage = Usage()
    ancre: Verdict


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "ancre"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class QueryAnswer(BaseModel):
    """``/query`` 200: grounded (``ancree`` true) or not established (``ancree`` null,
    ``verification`` ``non_effectuee``: the judge could not run). ``reponse`` has each citation
    followed by its folder."""

    reponse: str
    sources: list[SourceOut]
    ancree: bool | None
    controles: list[str]
    verification: Literal["effectuee", "non_effectuee", "non_requise"]
    extractive: bool
    documents_ecartes: list[Unchecked] = []
    versions: list[VersionsOut] = []
    question_traitee: str | None = None
    reponse_incomplete: bool = False
    liste: ListOut | None = None


class QueryBlocked(BaseModel):
    """``/query`` 422: the answer is not grounded; it is given in ``reponse_bloquee`` only."""

    reponse_bloquee: str
    sources: list[SourceOut]
    ancree: Literal[False] = False
    controles: list[str]
    verification: Literal["effectuee", "non_effectuee", "non_requise"]
    citations_inventees: list[str]
    affirmations_non_sourcees: list[str]
    faits_non_sources: list[FactOut] = []
    documents_ecartes: list[Unchecked] = []
    versions: list[VersionsOut] = []
    reponse_incomplete: bool = False
    liste: ListOut | None = None


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """Every error, on every path (OpenAI's error shape)."""

    error: ErrorBody


class Check(_Open):
    status: Literal["ok", "error", "disabled", "starting"]


class Health(BaseModel):
    """``GET /health``: 200 when every check is ``ok`` or ``disabled``, else 503."""

    status: Literal["ok", "error"]
    checks: dict[str, Check]


__all__ = [
    "INVALID_TEXT",
    "ChatCompletion",
    "ChatCompletionRequest",
    "ChatMessage",
    "ContentPart",
    "ErrorBody",
    "ErrorResponse",
    "FactOut",
    "Health",
    "ModelCard",
    "ModelList",
    "QueryAnswer",
    "QueryBlocked",
    "QueryRequest",
    "SourceOut",
    "Verdict",
    "VersionsOut",
    "text_error",
]
