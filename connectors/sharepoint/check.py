"""``ancre check`` for a SharePoint source: get a token, resolve the sites and their libraries,
read one library's list id and role assignments (SharePoint REST), and probe every site's REST
(its site groups); a refusal names the permission the app registration lacks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ancre.connectors.base import SourceCheck
from ancre.connectors.sharepoint.auth import SecretCredential
from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.connectors.sharepoint.discovery import discover
from ancre.connectors.sharepoint.graph import unreachable_key
from ancre.connectors.sharepoint.library import RestFactory, read_library
from ancre.connectors.sharepoint.snapshot import Drive


def rest_refusals(rest: RestFactory | None, drives: Sequence[Drive]) -> dict[str, str]:
    """``site segment -> why`` for each site of ``drives`` whose SharePoint REST refuses the
    app (its site groups, as the principal provider reads them). Never raises."""
    out: dict[str, str] = {}
    for seg, url in sorted({(d.site_seg, d.site_url) for d in drives}):
        if rest is None:
            out[seg] = "SharePoint REST not configured"
            continue
        try:
            rest(url).site_groups()
        except Exception as e:  # a check reports, it does not crash
            out[seg] = f"{type(e).__name__}: {e}"[:300]
    return out


def _rest_problem(cfg: SharePointSourceConfig, rest: RestFactory | None, drives: Sequence[Drive]) -> SourceCheck | None:
    no_rest = rest_refusals(rest, drives)
    if not no_rest:
        return None
    what = "; ".join(f"{seg or 'root site'}: {why}" for seg, why in sorted(no_rest.items()))
    return SourceCheck(
        False,
        f"{len(drives)} libraries; SharePoint REST refused on {len(no_rest)} site(s) — their site groups can't "
        f"be resolved, documents only those groups read are readable by nobody: {what}",
        "grant the app Sites.Read.All under SharePoint (certificate credential) on those sites, or leave them "
        f"out of sources.{cfg.id}.sites",
    )


def _discovery_fix(cfg: SharePointSourceConfig, e: Exception) -> str:
    """What to fix when the sites could not be discovered, naming the key: the authority that
    does not answer, Graph that does not answer, else the app registration."""
    key = unreachable_key(e.__cause__ if isinstance(e.__cause__, Exception) else e)
    if key is not None:
        return f"check sources.{cfg.id}.{key} ({getattr(cfg, key)}): the server must answer from this host"
    return (f"check sources.{cfg.id}.tenant_id / client_id / the credential, and that the app has "
            "Sites.Read.All (or Sites.Selected) with admin consent (docs/SHAREPOINT.md)")


def check_source(cfg: SharePointSourceConfig, graph: Any, rest: RestFactory | None) -> SourceCheck:
    """The check of source ``cfg`` through ``graph`` (a ``GraphClient``) and ``rest`` (see the
    module doc). Never raises."""
    try:
        drives, refused = discover(graph, cfg)
    except Exception as e:  # a check reports, it does not crash
        return SourceCheck(False, f"SharePoint {cfg.tenant_id}: {type(e).__name__}: {e}", _discovery_fix(cfg, e))
    if not drives:
        return SourceCheck(
            False, f"no document library found ({refused or 'no site'})", f"check sources.{cfg.id}.sites / libraries"
        )
    d = drives[0]
    try:
        d.list_id = str(graph.get(f"/drives/{d.drive_id}/list", params={"$select": "id"}).get("id") or "") or None
    except Exception as e:  # check() never raises: any failure is the check's answer
        return SourceCheck(False, f"{d.prefix}: library list unreadable: {e}", "the app needs Sites.Read.All")
    library = read_library(rest, d)
    if isinstance(library, str) and isinstance(graph.settings.credential, SecretCredential):
        return SourceCheck(
            False, f"{len(drives)} libraries; {d.prefix}: {library}",
            "SharePoint REST needs a certificate credential (certificate_path or pfx_path), not a client secret",
        )
    problem = _rest_problem(cfg, rest, drives)
    if problem is not None:
        return problem
    n = len(library) if isinstance(library, list) else 0
    extra = f"; refused: {', '.join(f'{k} ({v})' for k, v in refused.items())}" if refused else ""
    return SourceCheck(not refused, f"{len(drives)} libraries; {d.prefix}: {n} role assignments read{extra}",
                       "grant the app access to the refused sites" if refused else "")


__all__ = ["check_source", "rest_refusals"]
