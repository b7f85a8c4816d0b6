"""Which document libraries a SharePoint source reads: its sites (``sites``, or every site of the
tenant), their drives of type ``documentLibrary`` matching ``libraries`` / ``libraries_exclude``,
and how a site's URL becomes the start of its items' paths (:func:`site_segment`). A site (or
library) answering 401/403/404 is *refused*: left out with its reason, never an error (Graph
"site: get", "drive: list")."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.connectors.sharepoint.graph import GraphError, unreachable_key
from ancre.connectors.sharepoint.snapshot import Drive
from ancre.errors import SourceUnavailableError
from ancre.models import nfc

REFUSED = (401, 403, 404)
"""Statuses of a site or library that refuses us (or is gone): skipped with a reason."""


def site_segment(url: str) -> str:
    """How a site starts its items' paths: its server-relative URL without the leading ``/``
    (``https://h/sites/Direction`` → ``sites/Direction``, ``…/teams/Projets`` →
    ``teams/Projets``, a subsite ``…/sites/A/Projets`` → ``sites/A/Projets``), percent-decoded,
    NFC; ``""`` for the root site."""
    return nfc(unquote(urlsplit(url).path).strip("/"))


def site_ref(url: str) -> str:
    """The Graph path of a site URL: ``https://h/sites/X`` → ``/sites/h:/sites/X``."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return f"/sites/{parts.hostname}:{quote(path)}" if path else f"/sites/{parts.hostname}"


def refusal(e: GraphError) -> str:
    """Why a refused site or library is left out: ``"<status> <code>: <message>"``."""
    return f"{e.status} {e.code}: {e.message}"


def resolve_sites(graph: Any, urls: Sequence[str]) -> list[tuple[str, str]]:
    """``(Graph site id, web URL)`` of each site URL (every site of the tenant when ``urls`` is
    empty); sites that refuse us (401/403/404) are left out. Raises ``GraphError`` /
    ``SourceUnavailableError`` otherwise."""
    out: list[tuple[str, str]] = []
    if not urls:
        return [(str(s["id"]), str(s.get("webUrl", ""))) for s in graph.pages("/sites", params={"search": "*"})]
    for url in urls:
        try:
            site = graph.get(site_ref(url))
        except GraphError as e:
            if e.status in REFUSED:
                continue
            raise
        out.append((str(site["id"]), str(site.get("webUrl") or url)))
    return out


def sites(graph: Any, cfg: SharePointSourceConfig) -> list[tuple[str, dict[str, Any] | str]]:
    """``(site segment, site JSON or refusal reason)`` for every configured site (every site of
    the tenant when ``cfg.sites`` is empty). Raises ``GraphError`` but for a refusal."""
    out: list[tuple[str, dict[str, Any] | str]] = []
    if not cfg.sites:
        for site in graph.pages("/sites", params={"search": "*"}):
            out.append((site_segment(str(site.get("webUrl", ""))), site))
        return out
    for url in cfg.sites:
        try:
            out.append((site_segment(url), graph.get(site_ref(url))))
        except GraphError as e:
            if e.status not in REFUSED:
                raise
            out.append((site_segment(url), refusal(e)))
    return out


def library_selected(cfg: SharePointSourceConfig, name: str) -> bool:
    """Whether library ``name`` matches ``libraries`` (all when empty) and no
    ``libraries_exclude`` glob (case-insensitive ``fnmatch``)."""
    low = name.casefold()
    if cfg.libraries and not any(fnmatch.fnmatchcase(low, p.casefold()) for p in cfg.libraries):
        return False
    return not any(fnmatch.fnmatchcase(low, p.casefold()) for p in cfg.libraries_exclude)


def _site_drives(graph: Any, cfg: SharePointSourceConfig, seg: str, site: dict[str, Any]) -> list[Drive]:
    out: list[Drive] = []
    for d in graph.pages(f"/sites/{site['id']}/drives"):
        library = d.get("driveType", "documentLibrary") == "documentLibrary"
        if library and library_selected(cfg, str(d.get("name", ""))):
            out.append(Drive(
                str(site["id"]), str(site.get("webUrl", "")), seg, str(d["id"]), str(d.get("name", "")),
                str(d.get("webUrl", "")),
            ))
    return out


def discover(graph: Any, cfg: SharePointSourceConfig) -> tuple[list[Drive], dict[str, str]]:
    """The libraries to read now (snapshots empty) and the refused sites (segment → why).
    Raises ``SourceUnavailableError`` when no site at all answers, or when the token endpoint or
    Graph does not answer (the message then names ``sources.<id>.authority`` /
    ``sources.<id>.graph_url``), ``GraphError`` when Graph fails otherwise."""
    try:
        return _discover(graph, cfg)
    except SourceUnavailableError as e:
        key = unreachable_key(e)
        if key is None:
            raise
        raise SourceUnavailableError(f"{e} (sources.{cfg.id}.{key} = {getattr(cfg, key)})") from e


def _discover(graph: Any, cfg: SharePointSourceConfig) -> tuple[list[Drive], dict[str, str]]:
    drives: list[Drive] = []
    refused: dict[str, str] = {}
    found = sites(graph, cfg)
    for seg, site in found:
        if isinstance(site, str):
            refused[seg] = site
            continue
        try:
            drives += _site_drives(graph, cfg, seg, site)
        except GraphError as e:
            if e.status not in REFUSED:
                raise
            refused[seg] = refusal(e)
    if found and len(refused) == len(found):
        raise SourceUnavailableError(
            f"source {cfg.id}: no site could be read ({'; '.join(f'{k}: {v}' for k, v in refused.items())}; "
            f"sources.{cfg.id}.sites)"
        )
    return drives, refused


__all__ = ["REFUSED", "discover", "library_selected", "refusal", "resolve_sites", "site_ref", "site_segment", "sites"]
