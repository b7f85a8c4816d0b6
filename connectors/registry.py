"""The source kinds ancre knows: one line per kind in :data:`REGISTRY`.

Adding a source kind = one module in ``connectors/`` (its config model, a subclass of
:class:`~ancre.settings.sources.SourceSettings` with ``kind: Literal["…"]``; its connector; and
``KIND = SourceKind(...)``) plus one line here (README "Adding a source"). The configuration
(:class:`ancre.config.Settings`), the runtime, the CLI and the daemon look kinds up here and never
switch on ``kind`` themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from ancre.acl.providers import PrincipalProvider
from ancre.connectors import folder, sharepoint, smb
from ancre.connectors.base import Connector, SourceContext, SourceKind
from ancre.errors import ConfigError
from ancre.settings.sources import SourceSettings

REGISTRY: Mapping[str, SourceKind] = MappingProxyType({
    folder.KIND.kind: folder.KIND,
    smb.KIND.kind: smb.KIND,
    sharepoint.KIND.kind: sharepoint.KIND,
})
"""kind → :class:`SourceKind`, in the order the kinds are documented."""

DEFAULT_KIND = "folder"
"""The kind of a ``[[sources]]`` entry without ``kind``."""


def source_kind(kind: str) -> SourceKind:
    """The registered kind ``kind``. Raises :class:`ConfigError` naming the known kinds."""
    try:
        return REGISTRY[kind]
    except KeyError:
        raise ConfigError(f"unknown source kind {kind!r} (known: {', '.join(REGISTRY)})") from None


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
    "REGISTRY",
    "SourceContext",
    "SourceKind",
    "make_connector",
    "principal_providers",
    "source_kind",
]
