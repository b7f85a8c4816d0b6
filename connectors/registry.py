"""The source kinds ancre knows: one line per kind in :data:`REGISTRY`.

Each line names the kind, its config model and the module of its connector. The config model (a
subclass of :class:`~ancre.settings.sources.SourceSettings` with ``kind: Literal["…"]``) lives in a
module that imports no client library (``ancre.settings.sources`` for ``folder`` and ``smb``,
``ancre.connectors.sharepoint.config``), so that :class:`ancre.config.Settings` validates
``[[sources]]`` without importing smbprotocol, impacket or msal. The connector module, whose
``KIND = SourceKind(...)`` gives the factory and the principal providers, is imported only when a
source of that kind is built (:func:`source_kind`). Adding a source kind = its module plus one
line here (docs/DEVELOPING.md "Adding a source"). The configuration, the runtime, the CLI and the daemon look
kinds up here and never switch on ``kind`` themselves.

A kind kept outside ancre (a plugin package) adds the same line through the Python entry-point
group :data:`ENTRY_POINT_GROUP` (``ancre.sources``): the entry point named after the kind points
at a :class:`RegisteredKind` (``toy = "toy_source:REGISTERED"``). Entry points are read once, when
this module is first imported — before :mod:`ancre.config` builds the ``[[sources]]`` union — and
a plugin never replaces a built-in kind.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import MappingProxyType

from ancre.acl.providers import PrincipalProvider
from ancre.connectors.base import Connector, SourceContext, SourceKind
from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.errors import ConfigError
from ancre.settings.sources import FolderSourceConfig, SmbSourceConfig, SourceSettings


@dataclass(frozen=True)
class RegisteredKind:
    """One line of :data:`REGISTRY`: ``kind`` (the value of ``kind`` in ``[[sources]]``), its
    ``config`` model, and ``module``, the import path of the module whose ``KIND`` is the kind's
    :class:`~ancre.connectors.base.SourceKind` (imported by :meth:`load`)."""

    kind: str
    config: type[SourceSettings]
    module: str

    def load(self) -> SourceKind:
        """The kind's :class:`SourceKind`, importing :attr:`module` on first use (cached). Raises
        :class:`ConfigError` when the module can't be imported or its ``KIND`` is not this kind
        with this config model (a registry line out of step with its module)."""
        return _load(self)


@functools.cache
def _load(entry: RegisteredKind) -> SourceKind:
    try:
        module = importlib.import_module(entry.module)
    except ImportError as e:
        raise ConfigError(f"source kind {entry.kind!r}: its connector {entry.module} can't be imported: {e}") from e
    kind = getattr(module, "KIND", None)
    if not isinstance(kind, SourceKind) or kind.kind != entry.kind or kind.config is not entry.config:
        raise ConfigError(
            f"source kind {entry.kind!r}: {entry.module}.KIND is not SourceKind({entry.kind!r}, {entry.config.__name__}, …)"
        )
    return kind


log = logging.getLogger("ancre.connectors.registry")

ENTRY_POINT_GROUP = "ancre.sources"
"""The entry-point group of source kinds kept outside ancre (see the module doc)."""

_BUILT_IN: dict[str, RegisteredKind] = {
    "folder": RegisteredKind("folder", FolderSourceConfig, "ancre.connectors.folder"),
    "smb": RegisteredKind("smb", SmbSourceConfig, "ancre.connectors.smb"),
    "sharepoint": RegisteredKind("sharepoint", SharePointSourceConfig, "ancre.connectors.sharepoint"),
}


def _plugin_kinds(known: Mapping[str, RegisteredKind]) -> dict[str, RegisteredKind]:
    """The :class:`RegisteredKind` of each entry point of :data:`ENTRY_POINT_GROUP` whose name is
    not a ``known`` kind; an entry point that can't be loaded, is not a ``RegisteredKind`` or
    whose kind is not its name is logged and left out (the config then names the kind unknown)."""
    found: dict[str, RegisteredKind] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in known or ep.name in found:
            log.error("source kind %r of entry point %s is already registered: ignored", ep.name, ep.value)
            continue
        try:
            entry = ep.load()
        except Exception as e:  # a broken plugin must not stop ancre
            log.error("source kind %r: entry point %s can't be loaded: %s", ep.name, ep.value, e)
            continue
        if not isinstance(entry, RegisteredKind) or entry.kind != ep.name:
            log.error("source kind %r: entry point %s is not RegisteredKind(%r, …): ignored", ep.name, ep.value, ep.name)
            continue
        found[ep.name] = entry
    return found


REGISTRY: Mapping[str, RegisteredKind] = MappingProxyType(_BUILT_IN | _plugin_kinds(_BUILT_IN))
"""kind → :class:`RegisteredKind`: the built-in kinds in the order they are documented, then
those of the ``ancre.sources`` entry points."""

DEFAULT_KIND = "folder"
"""The kind of a ``[[sources]]`` entry without ``kind``."""


def source_kind(kind: str) -> SourceKind:
    """The registered kind ``kind``, its connector module imported. Raises :class:`ConfigError`
    naming the known kinds for an unknown one (or, from :meth:`RegisteredKind.load`, when its
    module can't be imported)."""
    try:
        entry = REGISTRY[kind]
    except KeyError:
        raise ConfigError(f"unknown source kind {kind!r} (known: {', '.join(REGISTRY)})") from None
    return entry.load()


def make_connector(src: SourceSettings, ctx: SourceContext) -> Connector:
    """A new connector of the configured source ``src``, built by its kind's factory with ``ctx``.
    Raises :class:`ConfigError` for an unknown kind or a config the factory can't use."""
    return source_kind(src.kind).build(src, ctx)


def principal_providers(sources: Iterable[SourceSettings], ctx: SourceContext) -> list[PrincipalProvider]:
    """The principal providers the configured ``sources`` bring besides the directory, in config
    order (``SourceKind.providers``: e.g. the Entra provider of a SharePoint source)."""
    out: list[PrincipalProvider] = []
    for src in sources:
        kind = source_kind(src.kind)
        if kind.providers is not None:
            out.extend(kind.providers(src, ctx))
    return out


__all__ = [
    "DEFAULT_KIND",
    "ENTRY_POINT_GROUP",
    "REGISTRY",
    "RegisteredKind",
    "SourceContext",
    "SourceKind",
    "make_connector",
    "principal_providers",
    "source_kind",
]
