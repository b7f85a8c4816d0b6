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
    num_ctx: int | None = Field(None, ge=512)
    """Ollama context window in tokens (``options.num_ctx``); the server's default when unset."""


class JudgeConfig(_Section):
    """The grounding judge: a second call through Ollama ``/api/chat`` (``format: json``,
    ``think: false``, temperature 0). A judge that fails never makes an answer grounded: the
    answer passes with ``verification: non_effectuee``."""

    enabled: bool = True
    """Run the judge after each generated answer (``false``: answers pass with ``verification: non_effectuee``)."""
    model: str = "qwen3:4b"
    """Ollama model of the judge."""
    url: Annotated[str | None, HTTP] = None
    """Ollama base URL; defaults to ``llm.url`` when ``llm.kind = "ollama"``, else
    ``http://127.0.0.1:11434``."""
    keep_alive: str = "2h"
    """Ollama ``keep_alive`` of the judge's model."""
    timeout_s: float = Field(60.0, gt=0)
    """Seconds allowed to read the judge's verdict."""
    connect_timeout_s: float = Field(5.0, gt=0)
    """Seconds allowed to connect to the judge's server."""


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
    SHA-256 (:mod:`ancre.query.audit_chain`)."""


__all__ = [
    "DEFAULT_OLLAMA_URL",
    "MAX_ANSWER_TEMPERATURE",
    "AuditConfig",
    "ContextConfig",
    "JudgeConfig",
    "LlmConfig",
]
