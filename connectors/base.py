"""The one ``Connector`` protocol every source implements (folder, SMB, SharePoint), the optional
capabilities the sync engine, the daemon and the CLI check with ``isinstance`` (never ``getattr``):
:class:`Watchable`, :class:`ChangeFeed`, :class:`SubtreeListing`, :class:`LocalTree`,
:class:`Closeable`, :class:`Checkable`; what a listing returns (:class:`Listing`), what a change feed
returns (:class:`ChangeBatch`); and what a connector factory receives (:class:`SourceContext`).
docs/DEVELOPING.md "Adding a source", docs/ARCHITECTURE.md."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from ancre.acl.directory import Directory
from ancre.acl.explain import AclTrace
from ancre.acl.providers import PrincipalProvider
from ancre.errors import ConfigError
from ancre.models import Acl, ChangeKind, SourceItem
from ancre.settings.sources import SourceSettings


@dataclass(frozen=True)
class SourceContext:
    """What a connector factory (:attr:`ancre.connectors.registry.SourceKind.build`) gets besides
    its source's config.

    ``directory``: builds (once, lazily: call it only when the source needs names resolved) the
    configured directory — raises :class:`~ancre.errors.ConfigError` when none is configured.
    ``ignore``: file-name globs never indexed (``ancre.toml`` ``ignore``). ``private_paths``:
    ancre's own files (data directory, audit folder and key), never a document even through a link.
    ``data_dir``: ancre's data directory (a connector may keep a cache of its own below it, in a
    file of its own — e.g. SharePoint's drive snapshots; never the engine's state DB, whose
    tables belong to the sync engine, and never a change feed's cursor, which the engine keeps).
    """

    directory: Callable[[], Directory]
    ignore: tuple[str, ...]
    private_paths: tuple[Path, ...]
    data_dir: Path


@dataclass(frozen=True)
class ChangeEvent:
    """A change reported by a source's watcher (watchdog, SMB2 CHANGE_NOTIFY, Graph delta).

    ``path`` is the relative POSIX path (NFC) that changed (file or folder), or ``None`` when the
    watcher lost track (overflow, STATUS_NOTIFY_ENUM_DIR, reconnect): a full reconciliation is
    then needed. ``kind``: ``created`` / ``modified`` / ``deleted`` / ``moved`` / ``acl`` /
    ``rescan``; for ``moved``, ``dest_path`` is the new path (``None`` when moved out of the tree).
    An ``acl`` event without a path (an ACL manifest edit) means every document's rights may
    have changed: the daemon re-reads them all in its rights lane, no rescan. ``reason``: why a
    ``rescan`` was asked for, when the source can say (prose for the log; ``""`` otherwise).
    """

    source: str
    path: str | None
    kind: ChangeKind
    dest_path: str | None = None
    reason: str = ""


ChangeCallback = Callable[[ChangeEvent], None]


@dataclass(frozen=True)
class Unreachable:
    """A part of a source its listing had to leave out: ``path``, the relative POSIX folder path
    (``""`` = the whole source), and ``reason``, why (prose for ``ancre status``)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Listing:
    """What :meth:`Connector.list_items` returns: every indexable ``items`` entry of the source,
    and the ``unreachable`` parts it could not list while the rest answered (a DFS link whose
    target is down, a SharePoint site that refuses the app). Nothing indexed under an unreachable
    part may be purged. Iterating a listing iterates its items."""

    items: tuple[SourceItem, ...]
    unreachable: tuple[Unreachable, ...] = ()

    @property
    def unreachable_paths(self) -> tuple[str, ...]:
        """The relative paths of :attr:`unreachable`, in listing order."""
        return tuple(u.path for u in self.unreachable)

    def __iter__(self) -> Iterator[SourceItem]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


CursorT = TypeVar("CursorT", bound=BaseModel)
"""A change feed's cursor: a pydantic model the engine persists as JSON between calls."""


@dataclass(frozen=True)
class ChangeBatch(Generic[CursorT]):
    """What :meth:`ChangeFeed.changes` returns: the ``events`` seen since the cursor it was given,
    in order, and the ``cursor`` to give next time (the engine persists it only once the events
    are queued, so a crash replays them rather than losing them)."""

    events: tuple[ChangeEvent, ...]
    cursor: CursorT


@runtime_checkable
class Connector(Protocol):
    """A source of documents.

    ``list_items`` returns every indexable item (ignore rules, include/exclude globs and the max
    size already applied) as a :class:`Listing` and raises :class:`~ancre.errors.SourceUnavailableError` when the root
    can't be listed — never an empty listing for an unreachable root. Content and ACL are fetched
    lazily, item by item.
    """

    @property
    def source_id(self) -> str:
        """The ``id`` of the configured source."""
        ...

    @property
    def collection(self) -> str:
        """The source's default collection (``documents`` / ``documentation``)."""
        ...

    def list_items(self) -> Listing:
        """Every indexable item of the source, with the parts that could not be listed (see
        :class:`Listing`). Raises ``SourceUnavailableError`` when the source itself can't be
        listed."""
        ...

    def fetch_content(self, item: SourceItem) -> bytes:
        """The item's bytes. Raises ``OSError`` when this item can't be read (reported, the pass
        goes on) and ``SourceUnavailableError`` when the source itself is unreachable (the pass
        stops as suspect and purges nothing)."""
        ...

    def fetch_acl(self, item: SourceItem) -> Acl:
        """The item's read ACL. Never raises for an unreadable or malformed ACL: returns
        ``Acl.nobody(reason)``. Raises ``SourceUnavailableError`` only when the source itself is
        unreachable, so that an outage does not revoke everyone's rights."""
        ...

    def location(self, item: SourceItem) -> str:
        """Where a user finds the item's folder: UNC ``\\\\SRV\\Partage\\Dossier\\`` or a URL."""
        ...

    def collection_for(self, item: SourceItem) -> str:
        """The Qdrant collection (``documents`` / ``documentation``) this item feeds."""
        ...

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The *current* read ACL of each relative path, read from the source now (no cache of
        the connector's own), as :meth:`fetch_acl` computes it for a sync — used by the query
        core to check rights live before a document is shown (:mod:`ancre.query.live_acl`).

        Returns ``{path: Acl}`` with the paths as given; a path that no longer exists (deleted,
        renamed) is left out of the mapping. An unreadable or malformed ACL is
        ``Acl.nobody(reason)``. Raises :class:`~ancre.errors.SourceUnavailableError` when the
        source itself can't be reached (the caller decides: fail closed or the stored ACL).
        Thread-safe: the query core calls it from several threads with disjoint batches."""
        ...

    def get_item(self, path: str) -> SourceItem | None:
        """The current listing entry for one relative path, ``None`` if it does not exist or is not
        indexable (ignored name, excluded). Raises ``SourceUnavailableError`` when the root itself
        can't be reached (so that an event never turns an outage into deletions)."""
        ...


ConfigT = TypeVar("ConfigT", bound=SourceSettings)
"""A source kind's own config model (a :class:`~ancre.settings.sources.SourceSettings` subclass)."""


class CollectionFromConfig(Generic[ConfigT]):
    """Mixin giving a connector :meth:`collection_for` from its ``cfg`` (its kind's
    :class:`~ancre.settings.sources.SourceSettings` subclass, the type parameter): the one
    implementation shared by every connector."""

    cfg: ConfigT

    def collection_for(self, item: SourceItem) -> str:
        """``collection_overrides`` by top-level folder (case-insensitive), else the source's
        ``collection``."""
        return collection_for(self.cfg, item.path)


def collection_for(cfg: SourceSettings, path: str) -> str:
    """The collection (``documents`` / ``documentation``) of the relative POSIX ``path`` of
    source ``cfg``: its top-level folder's ``collection_overrides`` entry (folder names compared
    case-insensitively, as on Windows), else ``cfg.collection``. A file at the root has no
    top-level folder."""
    top = path.split("/", 1)[0].casefold() if "/" in path else ""
    for folder, coll in cfg.collection_overrides.items():
        if folder.casefold() == top:
            return coll
    return cfg.collection


# ------------------------------------------------------------------------------- capabilities
@runtime_checkable
class Watchable(Protocol):
    """A connector that can push changes (SMB2 CHANGE_NOTIFY, Graph delta...)."""

    def watch(self, on_change: ChangeCallback, stop: threading.Event) -> None:
        """Block, calling ``on_change`` for every change until ``stop`` is set. Emits a
        ``ChangeEvent(path=None, kind="rescan")`` whenever events may have been lost."""
        ...


@runtime_checkable
class SubtreeListing(Protocol):
    """A connector that lists one folder's subtree (a moved or created folder is synced without
    a full pass)."""

    def list_under(self, prefix: str) -> list[SourceItem]:
        """The indexable items below the folder ``prefix`` (relative POSIX path), with the rules
        of ``list_items``; ``[]`` when it is not a folder."""
        ...


@runtime_checkable
class PermissionSweep(Protocol):
    """A connector whose ``fetch_acl`` answers from permissions read earlier (at its last change
    poll or sweep, e.g. SharePoint: Graph delta misses some sharing changes) and that can re-read
    them all from the source now. A forced full pass (SIGHUP, ``ancre sync --force``: "content
    and ACLs re-read") calls :meth:`sweep_permissions` after listing."""

    def sweep_permissions(self) -> list[str]:
        """Re-read every item's permissions from the source; returns the relative paths whose ACL
        changed. Raises :class:`~ancre.errors.SourceUnavailableError` when the source can't be
        reached."""
        ...


@runtime_checkable
class AclsByNativeId(Protocol):
    """A connector whose items are identified by their native id rather than their path (two
    items of a SharePoint tenant may be shown under paths that were once the same; a path names
    what is there *now*, an id what was indexed). The live rights check reads such a source's
    ACLs by id."""

    def read_acls_by_id(self, native_ids: Sequence[str]) -> Mapping[str, Acl]:
        """As :meth:`Connector.read_acls`, keyed by :attr:`~ancre.models.SourceItem.native_id`:
        ``{native id: Acl}``, an id the source no longer has left out. Raises
        :class:`~ancre.errors.SourceUnavailableError`. Thread-safe."""
        ...


@runtime_checkable
class LocalTree(Protocol):
    """A connector over a tree of the local file system (or a mount): the daemon watches it with
    watchdog (inotify or polling) below ``root``, and ``acl_manifest`` (when not ``None``) too —
    an edit of that file may change every document's rights."""

    root: Path
    acl_manifest: Path | None


@runtime_checkable
class ChangeFeed(Protocol[CursorT]):
    """A connector that reports its changes when asked, from a cursor the engine keeps (Graph
    delta links, a snapshot-diff poller's last listing). The daemon calls :meth:`changes` every
    :attr:`poll_interval_s` seconds with the cursor the previous call returned (persisted across
    restarts), and queues the events like a watcher's."""

    cursor_type: type[CursorT]
    """The cursor's model, to read a persisted cursor back (``cursor_type.model_validate_json``)."""

    @property
    def poll_interval_s(self) -> float:
        """Seconds between two calls of :meth:`changes`."""
        ...

    def changes(self, cursor: CursorT | None) -> ChangeBatch[CursorT]:
        """The changes since ``cursor``. ``None`` (no cursor kept yet, or the kept one is
        unreadable): the feed takes its baseline now and returns no event — the engine runs a
        full pass at start, which covers what came before. An expired cursor (e.g. Graph 410
        ``resyncRequired``) gives a ``rescan`` event and a fresh cursor. Raises
        :class:`~ancre.errors.SourceUnavailableError` when the source can't be reached (the
        engine keeps the old cursor and tries again at the next interval)."""
        ...


@runtime_checkable
class Closeable(Protocol):
    """A connector holding connections or handles, released by :meth:`close` (idempotent)."""

    def close(self) -> None:
        """Release the connector's connections; calling it twice is harmless."""
        ...


@dataclass(frozen=True)
class SourceCheck:
    """Result of :meth:`Checkable.check`: ``ok``, what was seen (``detail``), and for a failure
    what to change (``fix``)."""

    ok: bool
    detail: str
    fix: str = ""


@runtime_checkable
class Checkable(Protocol):
    """A connector with its own ``ancre check`` (e.g. SMB: list the share root, read the root's
    security descriptor). Without it, ``ancre check`` lists the source and reads one ACL."""

    def check(self) -> SourceCheck:
        """Probe the source; never raises."""
        ...


@runtime_checkable
class WatchableConnector(Connector, Watchable, Protocol):
    """A :class:`Connector` that is :class:`Watchable` (what the daemon's connector watcher runs)."""


@dataclass(frozen=True)
class SourceKind(Generic[ConfigT]):
    """One kind of source, as :data:`ancre.connectors.registry.REGISTRY` lists it, generic in its
    config model ``ConfigT``: ``kind``, the value of ``kind`` in ``[[sources]]``; ``config``, its
    pydantic model (a :class:`~ancre.settings.sources.SourceSettings` subclass with
    ``kind: Literal[kind]``); ``build(cfg, ctx)``, the connector of one configured source (raises
    :class:`~ancre.errors.ConfigError` on a config it can't use); ``providers(cfg, ctx)``, the
    principal providers the source brings besides the directory (``None``: none), objects of
    ``ancre.acl.providers.PrincipalProvider``. A caller holding a plain ``SourceSettings`` narrows
    it with :meth:`config_of` first."""

    kind: str
    config: type[ConfigT]
    build: Callable[[ConfigT, SourceContext], Connector]
    providers: Callable[[ConfigT, SourceContext], Sequence[PrincipalProvider]] | None = None

    def config_of(self, cfg: SourceSettings) -> ConfigT:
        """``cfg`` as this kind's config model. Raises :class:`~ancre.errors.ConfigError` naming
        the source when ``cfg`` is another kind's."""
        if not isinstance(cfg, self.config):
            raise ConfigError(f"sources.{cfg.id}: not a {self.kind} source")
        return cfg


@runtime_checkable
class AclExplainable(Protocol):
    """A connector that can say why a path is readable or not, for ``ancre acl explain``
    (optional capability, checked with ``isinstance``)."""

    def explain_path(self, path: str) -> str:
        """``path`` as the relative POSIX path (NFC, ``/``-separated, no ``.``/``..``) sync gives
        that file: ``path`` may be relative to the source root, a UNC path or URL under the source's
        ``unc_root``, or a path the source alone knows how to read (a folder source: an absolute
        local path under its root). Raises :class:`~ancre.acl.explain.PathOutsideSourceError` for
        a path outside the source (see :func:`ancre.acl.explain.canonical_path`)."""
        ...

    def explain_acl(self, path: str) -> AclTrace:
        """The rights on ``path`` (as :meth:`explain_path` returns it; ``""`` = the root) as the
        source states them now — the ACEs that apply and where each is written, or the principals
        the source grants, plus share-level permissions — computed as :meth:`Connector.fetch_acl`
        computes them for a sync. Unreadable rights are a trace with ``unreadable`` set, not an
        error. Raises :class:`~ancre.errors.SourceUnavailableError` when the source can't be
        reached, :class:`~ancre.errors.DirectoryError` when the directory can't be read."""
        ...
