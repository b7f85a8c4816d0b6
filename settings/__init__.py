"""Settings sections: the bottom layer of ancre (pydantic models that import no other ancre
package but :mod:`ancre.errors` and :mod:`ancre.models`). The root
:class:`~ancre.config.Settings` assembles them with the sources (docs/ARCHITECTURE.md)."""

from ancre.settings.api import ApiConfig
from ancre.settings.daemon import LIBRARY_LOGGERS, DaemonConfig, LoggingConfig, LogLevel, WatchMode
from ancre.settings.query import (
    DEFAULT_OLLAMA_URL,
    MAX_ANSWER_TEMPERATURE,
    AuditConfig,
    ContextConfig,
    JudgeConfig,
    LlmConfig,
)
from ancre.settings.reports import ReportsConfig
from ancre.settings.secrets import Secret, SecretRef, resolve_secret
from ancre.settings.sections import (
    DEFAULT_IGNORE,
    ChunkingConfig,
    DirectoryConfig,
    E5LocalEmbedderConfig,
    EdgeStoreConfig,
    EmbedderConfig,
    ExtractionConfig,
    FileDirectoryConfig,
    HttpEmbedderConfig,
    LdapDirectoryConfig,
    LocalStoreConfig,
    OllamaEmbedderConfig,
    OpenAIEmbedderConfig,
    QdrantStoreConfig,
    QueryConfig,
    StoreConfig,
    SyncConfig,
)
from ancre.settings.sources import Collection, SourceSettings

__all__ = [
    "DEFAULT_IGNORE",
    "DEFAULT_OLLAMA_URL",
    "LIBRARY_LOGGERS",
    "MAX_ANSWER_TEMPERATURE",
    "ApiConfig",
    "AuditConfig",
    "ChunkingConfig",
    "Collection",
    "ContextConfig",
    "DaemonConfig",
    "DirectoryConfig",
    "E5LocalEmbedderConfig",
    "EdgeStoreConfig",
    "EmbedderConfig",
    "ExtractionConfig",
    "FileDirectoryConfig",
    "HttpEmbedderConfig",
    "JudgeConfig",
    "LdapDirectoryConfig",
    "LlmConfig",
    "LocalStoreConfig",
    "LogLevel",
    "LoggingConfig",
    "OllamaEmbedderConfig",
    "OpenAIEmbedderConfig",
    "QdrantStoreConfig",
    "QueryConfig",
    "ReportsConfig",
    "Secret",
    "SecretRef",
    "SourceSettings",
    "StoreConfig",
    "SyncConfig",
    "WatchMode",
    "resolve_secret",
]
