"""Settings sections of ancre: pydantic models with no dependency on any other ancre package
(the bottom layer, docs/ARCHITECTURE.md). The root :class:`~ancre.config.Settings` assembles them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from ancre.errors import ConfigError
from ancre.settings.reference import SecretText

DEFAULT_IGNORE = ("~$*", ".~lock.*#", "*.tmp", ".goutputstream-*", "Thumbs.db", "desktop.ini")
"""File-name globs never indexed: Office lock files, LibreOffice locks, editor temp files,
Windows shell metadata."""


class _Section(BaseModel):
    # a field's docstring is its description (docs/CONFIGURATION.md is generated from them)
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class EmbedderConfig(_Section):
    """Which embedder writes and queries the vectors. ``kind``: ``e5-local`` (default, in-process,
    no server), ``ollama`` (``/api/embed``), ``openai`` (``/v1/embeddings``)."""

    kind: Literal["e5-local", "ollama", "openai"] = "e5-local"
    """Embedder: ``e5-local`` (in-process multilingual e5, no server), ``ollama`` (``/api/embed``)
    or ``openai`` (any OpenAI-compatible ``/v1/embeddings`` server). Changing it needs ``ancre reindex``."""
    model: str | None = None
    """Model name; defaults: ``multilingual-e5-small`` / ``nomic-embed-text`` / required for openai."""
    url: str | None = None
    """Server base URL (ollama default ``http://127.0.0.1:11434``)."""
    api_key: SecretText | None = None
    """Bearer key sent to the embedding server (``openai``; ``ANCRE_EMBEDDER__API_KEY`` keeps it out of the file)."""
    batch_size: int = Field(32, ge=1, le=4096)
    """Texts (chunks) embedded per request or per in-process batch."""
    keep_alive: str = "30m"
    """Ollama ``keep_alive``: how long the model stays loaded after a call (``"30m"``, ``"2h"``)."""
    timeout_s: float = Field(120.0, gt=0)
    """Seconds one embedding request may take."""
    retries: int = Field(4, ge=0, le=20)
    """Retries of a failed embedding request (connection error, HTTP 429 or 5xx), with exponential backoff."""
    dim: int | None = Field(None, ge=1)
    """Expected dimension for ``openai``/``ollama`` (probed from the server when not set)."""
    document_prefix: str | None = None
    """Text put before every chunk embedded (``ollama``/``openai``; e.g. ``"search_document: "``);
    unset: the model's known prefix, if any. Refused by ``e5-local``, which sets its own."""
    query_prefix: str | None = None
    """Text put before every question embedded (e.g. ``"search_query: "``); unset: the model's known prefix."""


class StoreConfig(_Section):
    """Where the vectors live. ``edge``: embedded Qdrant engine (qdrant-edge-py) under the data dir,
    one owning process. ``qdrant``: a Qdrant server/cluster at ``url``; ``local``: qdrant-client's
    local mode under ``path`` (tests only: it filters in Python)."""

    kind_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        "edge": ("build_after_points",), "qdrant": ("url", "api_key", "timeout_s"), "local": ("path",),
    }
    """The keys only one ``kind`` reads (docs/CONFIGURATION.md lists them per kind)."""

    kind: Literal["edge", "qdrant", "local"] = "edge"
    """Vector store: ``edge`` (embedded Qdrant engine under ``data_dir``, one owning process),
    ``qdrant`` (a Qdrant server or cluster at ``url``) or ``local`` (qdrant-client's local mode; tests only)."""
    url: str | None = None
    """Qdrant server URL (``http://127.0.0.1:6333``); required with ``kind = "qdrant"``."""
    api_key: SecretText | None = None
    """Qdrant API key (``kind = "qdrant"``; ``ANCRE_STORE__API_KEY`` keeps it out of the file)."""
    path: Path | None = None
    """``kind = "local"``: folder of qdrant-client's local store; default ``<data_dir>/qdrant-local``
    (``edge`` always lives in ``<data_dir>/qdrant``)."""
    timeout_s: float = Field(30.0, gt=0)
    """Seconds one request to the Qdrant server may take."""
    bm25: Literal["snapshot", "qdrant"] = "qdrant"
    """Where the keyword side lives: ``qdrant`` (BM25 kept in the Qdrant engine, updated with every
    write: the embedded engine's BM25 text index for ``kind = "edge"``, the default there; sparse
    vectors with IDF on a server) or ``snapshot`` (bm25s snapshot files under the data dir, rebuilt
    from the store after each change; the default for ``kind = "qdrant"`` / ``"local"``, whose
    collections were built without sparse vectors). README "Configuration"."""
    build_after_points: int = Field(20_000, ge=1)
    """``kind = "edge"``: points not yet in the store's HNSW index (searched exactly) that start an
    index build in a separate process (README "Scale")."""

    @model_validator(mode="before")
    @classmethod
    def _bm25_default(cls, data: object) -> object:
        if isinstance(data, dict) and "bm25" not in data and data.get("kind", "edge") != "edge":
            return {**data, "bm25": "snapshot"}
        return data

    @model_validator(mode="after")
    def _url_for_server(self) -> StoreConfig:
        if self.kind == "qdrant" and not self.url:
            raise ValueError("store.url is required when store.kind = 'qdrant'")
        return self


class DirectoryConfig(_Section):
    """Who is in which group. ``file``: a JSON file in the corpus ``directory.json`` format;
    ``ldap``: Active Directory over LDAP (:class:`ancre.acl.ldap_directory.LdapDirectory`)."""

    kind_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        "file": ("path",),
        "ldap": ("url", "urls", "base_dn", "bind_dn", "bind_password", "bind_password_env", "tls", "ca_file",
                 "tls_server_name", "user_attributes", "netbios", "timeout_s", "check_user"),
    }
    """The keys only one ``kind`` reads (docs/CONFIGURATION.md lists them per kind)."""

    kind: Literal["file", "ldap"] = "file"
    """Directory: ``file`` (users and nested groups in a ``directory.json`` file) or ``ldap`` (Active Directory)."""
    path: Path | None = None
    """``kind = "file"``: the ``directory.json`` file (relative paths against the config file's folder)."""
    cache_ttl_s: float = Field(60.0, ge=0)
    """Seconds a user's groups (and an unknown user's absence) are cached."""

    # --- kind = "ldap" ---------------------------------------------------------------------------
    url: str | None = None
    """``ldaps://dc1.axonix.ch`` or ``ldap://dc1.axonix.ch`` (StartTLS unless ``tls = "none"``)."""
    urls: tuple[str, ...] = ()
    """More domain controllers, tried in order after ``url``."""
    base_dn: str | None = None
    """Search base, e.g. ``DC=axonix,DC=ch``."""
    bind_dn: str | None = None
    """Service account for the simple bind (DN, UPN or ``DOMAIN\\user``); unset = anonymous."""
    bind_password: SecretStr | None = None
    """The bind password (prefer ``bind_password_env``)."""
    bind_password_env: str | None = None
    """Name of an environment variable holding the bind password."""
    tls: Literal["ldaps", "starttls", "none"] | None = None
    """Transport security; default from the URL scheme: ``ldaps://`` → ldaps, ``ldap://`` → starttls."""
    ca_file: Path | None = None
    """PEM CA bundle that signed the DCs' certificates (default: the system's)."""
    tls_server_name: str | None = None
    """The name checked in the DC's certificate when the URL uses another one (an IP address, an
    alias, a load balancer): e.g. ``dc1.axonix.ch`` with ``url = "ldaps://10.0.0.5"``. Default: the
    URL's host."""
    user_attributes: tuple[str, ...] = ("sAMAccountName", "userPrincipalName", "mail")
    """Attributes a user name is looked up by, in order of precedence."""
    netbios: str | None = None
    """NetBIOS domain name shown in names (``AXONIX\\GG_RH``); read from the directory when unset."""
    timeout_s: float = Field(10.0, gt=0)
    """Connect and answer timeout, seconds."""
    check_user: str | None = None
    """The account ``ancre check`` and ``ancre sync`` resolve to test the directory (default: the
    first account the directory lists that resolves)."""

    @model_validator(mode="after")
    def _ldap_fields(self) -> DirectoryConfig:
        if self.kind == "ldap":
            if not (self.url or self.urls):
                raise ValueError("directory.url is required when directory.kind = 'ldap'")
            if not self.base_dn:
                raise ValueError("directory.base_dn is required when directory.kind = 'ldap'")
            if self.bind_password is not None and self.bind_password_env:
                raise ValueError("directory: set bind_password or bind_password_env, not both")
        return self

    @property
    def ldap_urls(self) -> tuple[str, ...]:
        """``url`` then ``urls``, without duplicates."""
        return tuple(dict.fromkeys(([self.url] if self.url else []) + list(self.urls)))


class ExtractionConfig(_Section):
    """Text extraction: each file runs in a worker process killed after ``timeout_s`` seconds.

    The ``max_*`` limits are decided as early and cheaply as possible; a document over one is
    recorded ``skipped`` with reason ``too_large: …`` naming the key (README.md, "Configuration").
    The defaults let a 300-page contract through with a wide margin."""

    timeout_s: float = Field(60.0, gt=0)
    """Seconds one file's extraction may take in its worker process before the worker is killed
    and the file recorded ``failed`` (retried up to ``sync.max_attempts``)."""
    workers: int = Field(1, ge=1, le=64)
    """Extraction worker processes; accepted for forward compatibility, files are extracted one at
    a time in one worker process."""
    ocr: bool = True
    """OCR (Tesseract) the PDF pages that are images without a text layer (scans); off, or without
    Tesseract, a PDF with no text layer at all is ``skipped: no_text_layer``."""
    ocr_languages: str = Field("fra+eng", pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")
    """Tesseract language codes joined by ``+``; those not installed are left out."""
    ocr_dpi: int = Field(300, ge=72, le=600)
    """Resolution a scanned page is rendered at for OCR (Tesseract reads best at 300 dpi)."""
    ocr_timeout_per_page_s: float = Field(30.0, ge=0)
    """Seconds added to a file's ``timeout_s`` for each scanned page it OCRs…"""
    ocr_timeout_max_s: float = Field(1800.0, ge=0)
    """…at most this many per file."""
    max_part_mb: float = Field(64.0, gt=0)
    """Office packages (.docx, .xlsx, .pptx…): largest uncompressed size of one part (zip member),
    in MiB, read from the zip directory before anything is inflated."""
    max_package_mb: float = Field(256.0, gt=0)
    """Office packages: largest uncompressed size of all parts together, in MiB."""
    max_expansion_ratio: float = Field(200.0, gt=1)
    """Office packages: largest uncompressed/compressed ratio of a part over 1 MiB (a "zip bomb";
    real Office XML compresses 5 to 30 times)."""
    max_chars: int = Field(5_000_000, ge=1000)
    """Characters of text extracted from one document."""
    max_chunks: int = Field(10_000, ge=1)
    """Chunks one document may be cut into."""
    max_pages: int = Field(5_000, ge=1)
    """Pages of a PDF, slides of a deck, pages a Word file declares (``docProps/app.xml``)."""


class ChunkingConfig(_Section):
    """Structure-aware chunking: target chunk size in characters."""

    target_chars: int = Field(1000, ge=100, le=20000)
    """Target size of one chunk, in characters (headings, paragraphs and table rows are kept whole)."""
    overlap_chars: int = Field(0, ge=0, le=2000)
    """Characters of the previous chunk repeated at the start of the next one."""


class SyncConfig(_Section):
    """Sync pass behaviour. ``mass_delete_ratio``: a pass in which more than this share of a
    source's indexed items vanished purges nothing and is reported suspect."""

    mass_delete_ratio: float = Field(0.5, gt=0, le=1)
    """Share (0 to 1) of a source's indexed items that may vanish in one pass; above it the pass
    purges nothing and is reported suspect (a root unmounted by mistake is not a mass deletion)."""
    mass_delete_min_items: int = Field(4, ge=0)
    """Below this many indexed items the ratio guard does not apply (a root that is missing still does)."""
    max_attempts: int = Field(3, ge=1, le=100)
    """Tries of one version of a document whose extraction timed out or crashed, or whose
    indexing died half-way, before it is left ``failed`` until its content changes."""
    retry_backoff_s: float = Field(600.0, ge=0)
    """Wait before the 2nd try of a failed document; doubled for each later try."""


class QueryConfig(_Section):
    """Retrieval numbers (docs/ARCHITECTURE.md "Data flow of a question", validated in the seed lab)."""

    candidates: int = Field(30, ge=1, le=1000)
    """Candidates taken from each side (vector and BM25) before fusion."""
    rrf_k: int = Field(60, ge=1)
    """The ``k`` of Reciprocal Rank Fusion: a candidate at rank ``r`` scores ``1 / (k + r)`` per side."""
    limit: int = Field(10, ge=1, le=1000)
    """Fused results returned by ``ancre search`` and the search API unless asked otherwise."""
    live_acl: bool = True
    """Re-read each candidate document's ACL from its source before it is shown or put in a
    context (:mod:`ancre.query.live_acl`); ``false`` trusts the index (sync, notifications and the
    ACL sweep) alone."""
    live_acl_ttl_s: float = Field(5.0, ge=0, le=3600)
    """Seconds a live reading of a document's ACL is reused by later questions (``0``: never)."""
    live_acl_timeout_s: float = Field(3.0, gt=0, le=600)
    """Seconds one question waits for the live readings; a source that has not answered by then
    counts as unreachable."""
    live_acl_on_unreachable: Literal["deny", "stored"] = "deny"
    """A document whose source can't be reached: ``deny`` leaves it out (fail closed, the answer
    says so), ``stored`` falls back to the ACL stored in the index (availability first)."""
    live_acl_workers: int = Field(8, ge=1, le=64)
    """Concurrent live ACL readings (one bounded thread pool per process)."""


def resolve_secret(value: SecretStr | None, env_name: str | None, key: str) -> str | None:
    """The secret from the config (``value``) or from the environment variable ``env_name``;
    ``None`` when neither is set. Raises :class:`ConfigError` naming ``key`` when ``env_name`` is
    set but the variable is not. The value is never logged."""
    if env_name:
        secret = os.environ.get(env_name)
        if secret is None:
            raise ConfigError(f"{key}_env: environment variable {env_name} is not set")
        return secret
    return value.get_secret_value() if value is not None else None


