"""SharePoint Online connector: Microsoft Graph + SharePoint REST (docs/SHAREPOINT.md).

:data:`KIND` is the ``sharepoint`` source kind of :data:`ancre.connectors.registry.REGISTRY`; the
connector, the Graph client and msal are imported only when a SharePoint source is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ancre.acl.providers import PrincipalProvider
from ancre.connectors.base import Connector, SourceContext, SourceKind
from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.errors import ConfigError
from ancre.settings.locations import check_ca_file
from ancre.settings.sources import SourceSettings

if TYPE_CHECKING:
    from ancre.connectors.sharepoint.graph import GraphClient


def _config(cfg: SourceSettings) -> SharePointSourceConfig:
    if not isinstance(cfg, SharePointSourceConfig):
        raise ConfigError(f"sources.{cfg.id}: not a sharepoint source")
    return cfg


def graph_client(cfg: SharePointSourceConfig) -> GraphClient:
    """The Graph client of a source (its credential, authority, endpoint, limits)."""
    from ancre.connectors.sharepoint.graph import GraphClient

    return GraphClient(graph_settings(cfg))


def graph_settings(cfg: SharePointSourceConfig) -> Any:
    """The :class:`~ancre.connectors.sharepoint.graph.GraphSettings` of a source. Raises
    :class:`~ancre.errors.ConfigError` naming ``sources.<id>.ca_file`` when that CA bundle can't
    be loaded."""
    from ancre.connectors.sharepoint import graph

    if cfg.ca_file is not None:  # one line naming the key, not OpenSSL's FileNotFoundError
        check_ca_file(cfg.ca_file, f"sources.{cfg.id}.ca_file")
    return graph.settings_from_source(cfg)


def rest_factory(cfg: SharePointSourceConfig) -> Any:
    """``site URL -> SharePointRest`` with the source's credential."""
    from ancre.connectors.sharepoint.rest import rest_client

    settings = graph_settings(cfg)
    return lambda site_url: rest_client(settings, site_url)


def build(cfg: SharePointSourceConfig, ctx: SourceContext) -> Connector:
    """The :class:`~ancre.connectors.sharepoint.connector.SharePointConnector` of a
    ``kind = "sharepoint"`` source (its drive snapshots in
    ``<data_dir>/sharepoint.sqlite3``, :mod:`ancre.connectors.sharepoint.snapshot`)."""
    from ancre.connectors.sharepoint.connector import SharePointConnector
    from ancre.connectors.sharepoint.snapshot import FILE_NAME, DriveSnapshotStore

    sp = _config(cfg)
    store = DriveSnapshotStore(Path(ctx.data_dir) / FILE_NAME)
    return SharePointConnector(sp, graph=graph_client(sp), rest=rest_factory(sp), snapshots=store, ignore=ctx.ignore)


def providers(cfg: SharePointSourceConfig, ctx: SourceContext) -> Sequence[PrincipalProvider]:
    """The source's principal provider: :class:`~ancre.connectors.sharepoint.provider.EntraProvider`
    named ``entra:<source id>``, over the source's configured sites (every site when none)."""
    from ancre.connectors.sharepoint.provider import EntraProvider, SiteRef

    sp = _config(cfg)
    graph = graph_client(sp)

    def sites() -> list[SiteRef]:
        from ancre.connectors.sharepoint.connector import resolve_sites

        return [SiteRef(site_id, url) for site_id, url in resolve_sites(graph, sp.sites)]

    return [EntraProvider(
        graph, tenant_id=sp.tenant_id, sites=sites, rest=rest_factory(sp), ttl_s=sp.identity_cache_ttl_s,
        name=f"entra:{sp.id}",
    )]


KIND = SourceKind("sharepoint", SharePointSourceConfig, build, providers)
"""The ``sharepoint`` source kind."""

__all__ = ["KIND", "SharePointSourceConfig", "build", "graph_client", "providers"]
