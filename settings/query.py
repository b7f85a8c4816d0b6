"""Configuration sections of the query core's grounding half, to be hooked into
:class:`ancre.config.Settings` as ``llm``, ``judge``, ``context`` and ``audit``.

The numbers are the seed lab's (docs/ARCHITECTURE.md "Data flow of a question" steps 4-10).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ancre.settings.locations import HTTP, PathRole
from ancre.settings.secrets import Secret

MAX_ANSWER_TEMPERATURE = 0.3
"""Answers are never generated above this temperature (docs/ARCHITECTURE.md "Data flow of a question" step 5)."""

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class LlmConfig(_Section):
    """The answering model. ``kind``: ``none`` (default: extractive mode, no model — answers quote
    the best extracts, so ``ancre ask`` works on a fresh machine), ``ollama`` (``/api/chat``),
    ``openai`` (any OpenAI-compatible ``/v1/chat/completions`` server, e.g. vLLM)."""

    kind: Literal["none", "ollama", "openai"] = "none"
    """Answering model: ``none`` (extractive answers, no model), ``ollama`` (``/api/chat``) or
    ``openai`` (any OpenAI-compatible ``/v1/chat/completions`` server)."""
    model: str | None = None
    """Model name; default ``qwen2.5:14b`` for ollama, required for openai."""
    url: Annotated[str | None, HTTP] = None
    """Server base URL (ollama default ``http://127.0.0.1:11434``; openai: required, with or
    without the trailing ``/v1``)."""
    api_key: Secret = None
    """Bearer key sent to the ``openai`` server (``ANCRE_LLM__API_KEY`` keeps it out of the file)."""
    temperature: float = Field(0.2, ge=0.0, le=MAX_ANSWER_TEMPERATURE)
    """Sampling temperature of answers; at most 0.3."""
    keep_alive: str = "30m"
    """Ollama ``keep_alive``: how long the model stays loaded after a call (``"30m"``, ``"2h"``)."""
    timeout_s: float = Field(600.0, gt=0)
    """Seconds allowed to read the answer (CPU-only servers took 3 to 5 minutes in the lab)."""
    connect_timeout_s: float = Field(10.0, gt=0)
    """Seconds allowed to connect to the model server."""
    num_ctx: int = Field(8192, ge=512)
    """Ollama context window in tokens (``options.num_ctx``): the smallest ancre asks for. A
    question whose prompt and answer need more gets the next multiple of 4,096 above, within the
    model's context length (Ollama reloads the model when ``num_ctx`` changes: few sizes, few
    reloads); the model is pre-loaded with this one. Without ``num_ctx`` Ollama would use its
    default (2,048 to 4,096 tokens in many versions) and silently cut a longer prompt."""
    max_tokens: int = Field(2048, ge=16)
    """Answer budget in tokens (Ollama ``options.num_predict``, OpenAI ``max_tokens``), reserved in
    the window; an answer cut there is flagged ``reponse_tronquee``."""
    context_length: int | None = Field(None, ge=512)
    """The most context ancre uses, in tokens: the model's context length when the server does
    not say it (Ollama's ``/api/show`` and vLLM's ``/v1/models`` do), and a cap under what it says
    (the memory of the machine). Unset: what the server says; nothing if it says nothing."""


class JudgeConfig(_Section):
    """The grounding judge: a second model call through the same client code as answers — Ollama
    ``/api/chat`` (``format: json``, ``think: false``) or an OpenAI-compatible server
    (``response_format: json_object``, ``chat_template_kwargs.enable_thinking: false``),
    temperature 0. A judge that fails never makes an answer grounded: the answer passes with
    ``verification: non_effectuee``."""

    enabled: bool = True
    """Run the judge after each generated answer (``false``: answers pass with ``verification: non_effectuee``)."""
    kind: Literal["ollama", "openai"] | None = None
    """Server of the judge: ``ollama`` or ``openai`` (any OpenAI-compatible server, e.g. vLLM);
    default: the answering model's (``llm.kind``), ``ollama`` when that is ``none``."""
    model: str = "qwen3:4b"
    """Model of the judge (on vLLM, the served model name, e.g. ``Qwen/Qwen3-4B``)."""
    url: Annotated[str | None, HTTP] = None
    """Server base URL; default ``llm.url`` when the judge's kind is the answering model's, else
    ``http://127.0.0.1:11434`` for ollama (required for openai)."""
    api_key: Secret = None
    """Bearer key sent to an ``openai`` judge server; default ``llm.api_key`` when the judge uses
    the answering model's server."""
    keep_alive: str = "2h"
    """Ollama ``keep_alive`` of the judge's model."""
    timeout_s: float = Field(60.0, gt=0)
    """Seconds allowed to read the judge's verdict."""
    connect_timeout_s: float = Field(5.0, gt=0)
    """Seconds allowed to connect to the judge's server."""
    num_ctx: int = Field(8192, ge=512)
    """Ollama context window of the judge in tokens: the smallest ancre asks for (see ``llm.num_ctx``)."""
    max_tokens: int = Field(512, ge=16)
    """The verdict's budget in tokens."""
    context_length: int | None = Field(None, ge=512)
    """The most context the judge gets, in tokens (see ``llm.context_length``)."""


class ContextConfig(_Section):
    """Context building (docs/ARCHITECTURE.md "Data flow of a question" step 4)."""

    principal_max: int = Field(9, ge=1, le=200)
    """Chunks of the principal document (the best chunk's document), around the best chunk."""
    other_docs: int = Field(6, ge=0, le=100)
    """Other distinct documents after the principal one."""
    chunks_per_complement: int = Field(4, ge=1, le=100)
    """Consecutive chunks taken from each other document, around its best hit."""
    max_chunks: int = Field(14, ge=1, le=500)
    """Total cap when no document clearly leads."""
    threshold: float = Field(0.01, ge=0.0)
    """RRF margin by which the principal document must lead (see :mod:`ancre.query.context`)."""


class AuditConfig(_Section):
    """The nLPD audit log: one JSON line per question, daily files, mode 0600."""

    enabled: bool = True
    """Write one audit record per question (nLPD); ``false`` writes none."""
    dir: Annotated[Path | None, PathRole.WRITE_DIR] = None
    """Folder of the daily files; default ``<data_dir>/audit``."""
    retention_days: int = Field(365, ge=0)
    """Daily files older than this many days are deleted; ``0`` keeps them forever."""
    pseudonymize: bool = False
    """Log an HMAC-SHA256 of the user name (keyed by ``key_file``) instead of the name."""
    key_file: Annotated[Path | None, PathRole.KEY_FILE] = None
    """Pseudonymisation key (created with 32 random bytes, mode 0600, when missing); default
    ``<data_dir>/audit.key``."""
    chain_key_file: Annotated[Path | None, PathRole.KEY_FILE] = None
    """HMAC key of the audit's hash chain (created with 32 random bytes, mode 0600, when missing;
    best kept outside the audit folder, e.g. a systemd credential); unset: the chain is plain
    SHA-256 (:mod:`ancre.audit.chain`)."""
    witnesses: tuple[Literal["state", "syslog"], ...] = ("state",)
    """Where each record's chain position and hash are also kept, out of reach of the audit
    folder, so that records cut from the end of the log are found (:mod:`ancre.audit.witness`;
    docs/SECURITY.md "A tamper-evident audit", the threat table): ``state`` the state database
    (``<data_dir>/state.sqlite3``), ``syslog`` the system log (journald or rsyslog, through
    ``syslog_socket``). ``[]``: none — ``ancre audit verify`` then fails unless told the log was
    started without one (``--started-without-witness``)."""
    syslog_socket: Annotated[Path | None, PathRole.PEER] = None
    """The system log's Unix datagram socket the ``syslog`` witness sends to (RFC 3164, facility
    authpriv, tag ``ancre-audit``); unset: ``/dev/log``."""
    syslog_files: Annotated[tuple[Path, ...], PathRole.PEER] = ()
    """Files where the syslog daemon writes the ``syslog`` witness's marks (e.g.
    ``["/var/log/auth.log", "/var/log/auth.log.1"]``, rotated ``.gz`` files too), read by
    ``ancre audit verify``; empty: read them from the journal (``journalctl``)."""


__all__ = [
    "DEFAULT_OLLAMA_URL",
    "MAX_ANSWER_TEMPERATURE",
    "AuditConfig",
    "ContextConfig",
    "JudgeConfig",
    "LlmConfig",
]
