"""Fields every source kind shares (``[[sources]]`` in ``ancre.toml``).

Each connector module declares its own subclass of :class:`SourceSettings` with a
``kind: Literal["…"]`` field (``FolderSourceConfig`` in :mod:`ancre.connectors.folder`,
``SmbSourceConfig`` in :mod:`ancre.connectors.smb`); :mod:`ancre.connectors.registry` lists them and
:class:`ancre.config.Settings` validates ``sources`` as the discriminated union of the registered
models (README "Adding a source", docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ancre.settings.daemon import WatchMode

Collection = Literal["documents", "documentation"]
"""The two Qdrant collections a document may feed."""


class SourceSettings(BaseModel):
    """One source of documents: the keys common to every kind (frozen; an unknown key is an
    error). ``kind`` names the connector (:data:`ancre.connectors.registry.REGISTRY`); subclasses
    narrow it to their own literal and add their keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: str
    collection: Collection = "documents"
    unc_root: str | None = None
    """UNC path of the root as users know it (``\\\\SRV-FICHIERS\\Partage``), used in citations."""
    include: tuple[str, ...] = ()
    """Glob patterns on the relative path; empty = everything."""
    exclude: tuple[str, ...] = ()
    max_size_mb: float = Field(50.0, gt=0)
    """Files larger than this many mebibytes (2²⁰ bytes) are recorded ``skipped`` and not read."""
    collection_overrides: dict[str, Collection] = Field(default_factory=dict)
    """Top-level folder → collection, e.g. ``{DOCUMENTATION = "documentation"}``."""
    watch: WatchMode = "auto"
    """How the daemon watches this source (see :data:`ancre.settings.daemon.WatchMode`);
    a connector with a ``watch()`` capability (SMB CHANGE_NOTIFY) uses it unless ``off``."""
    poll_interval_s: float = Field(5.0, gt=0)
    """Seconds between two directory snapshots when the source is polled."""


__all__ = ["Collection", "SourceSettings"]
