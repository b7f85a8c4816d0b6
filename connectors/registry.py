"""The source kinds ancre knows: one line per kind in :data:`REGISTRY`.

Adding a source kind = one module in ``connectors/`` (its config model, a subclass of
:class:`~ancre.settings.sources.SourceSettings` with ``kind: Literal["…"]``; its connector; and
``KIND = SourceKind(...)``) plus one line here (README "Adding a source"). The configuration
(:class:`ancre.config.Settings`), the runtime, the CLI and the daemon look kinds up here and never
switch on ``kind`` themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ancre.connectors import folder, sharepoint, smb
from ancre.connectors.base import SourceContext, SourceKind
from ancre.errors import ConfigError

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


__all__ = ["DEFAULT_KIND", "REGISTRY", "SourceContext", "SourceKind", "source_kind"]
