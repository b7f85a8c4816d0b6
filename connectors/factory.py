"""Build the connector of one configured source (the one place that maps a source's ``kind`` to
its connector class; docs/ARCHITECTURE.md "Adding a source")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ancre.acl.directory import Directory
from ancre.connectors.base import Connector
from ancre.connectors.folder import FolderConnector
from ancre.errors import ConfigError
from ancre.settings import SourceConfig


def make_connector(
    src: SourceConfig,
    *,
    directory: Callable[[], Directory],
    ignore: tuple[str, ...],
    private_paths: tuple[Path, ...] = (),
) -> Connector:
    """The connector of ``src``.

    ``directory`` returns the configured directory; it is called only when the source needs one
    (a folder source with an ACL manifest or ``principals``; an SMB source with ``share_allow`` /
    ``share_deny`` names to resolve). ``ignore``: never-indexed file-name globs
    (``Settings.ignore``); ``private_paths``: ancre's own files, never a document even through a
    link (folder sources).

    Raises :class:`~ancre.errors.ConfigError` for a kind this build does not provide or a source
    missing a required key.
    """
    if src.kind == "folder":
        d = directory() if (src.acl_manifest is not None or src.principals) else None
        return FolderConnector(src, directory=d, ignore=ignore, private_dirs=private_paths)
    if src.kind == "smb":
        from ancre.connectors.smb import SmbConnector

        # the directory resolves share_allow/share_deny names (and group nesting, over LDAP)
        d = directory() if (src.share_allow or src.share_deny) else None
        return SmbConnector(src, directory=d, ignore=ignore)
    raise ConfigError(f"sources.{src.id}.kind = {src.kind!r} is not available in this build")


__all__ = ["make_connector"]
