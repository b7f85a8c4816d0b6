"""Per-item Graph reads of the SharePoint connector, 20 per JSON ``$batch`` ("Combine multiple
requests in one HTTP call using JSON batching"): an item's permission list ("List sharing
permissions on a driveItem"), its sensitivity labels (:mod:`ancre.connectors.sharepoint.labels`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ancre.connectors.sharepoint.graph import BatchRequest, GraphClient
from ancre.connectors.sharepoint.snapshot import Drive
from ancre.errors import SourceUnavailableError

BATCH = 20
"""Requests per ``$batch`` (Graph's limit)."""
PERM_FIELDS = ("id", "roles", "link", "grantedToV2", "grantedToIdentitiesV2", "expirationDateTime")
"""The fields of a Graph ``permission`` a snapshot keeps."""


def _answer(status: int, body: Any, what: str) -> Any:
    """A ``$batch`` answer as :func:`batch_get` returns it. Raises ``SourceUnavailableError`` on
    5xx / 429."""
    if 200 <= status < 300:
        return body or {}
    err = body.get("error") if isinstance(body, Mapping) else None
    msg = f"{err.get('code', '')}: {err.get('message', '')}" if isinstance(err, Mapping) else ""
    if status >= 500 or status == 429:
        raise SourceUnavailableError(f"Graph {what}: {status} {msg}")
    return f"{status} {msg}".strip()


def batch_get(graph: GraphClient, drive_id: str, ids: Sequence[str], suffix: str, method: str = "GET") -> dict[str, Any]:
    """``{item id: JSON body | "<status> <message>"}`` for ``<method> /drives/{d}/items/{i}/<suffix>``,
    :data:`BATCH` per ``$batch``. Raises ``SourceUnavailableError`` (Graph down, 5xx, 429)."""
    out: dict[str, Any] = {}
    for start in range(0, len(ids), BATCH):
        chunk = ids[start:start + BATCH]
        reqs = [
            BatchRequest(id=str(n), method=method, url=f"/drives/{drive_id}/items/{iid}/{suffix}",
                         body={} if method == "POST" else None,
                         headers={"Content-Type": "application/json"} if method == "POST" else None)
            for n, iid in enumerate(chunk)
        ]
        answers = graph.batch(reqs)
        for n, iid in enumerate(chunk):
            r = answers.get(str(n))
            out[iid] = "no answer in $batch" if r is None else _answer(r.status, r.body, f"{suffix} of {iid}")
    return out


def perms(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The permission entries of a ``GET …/permissions`` body, :data:`PERM_FIELDS` only."""
    return [{k: p[k] for k in PERM_FIELDS if k in p} for p in body.get("value") or ()]


def read_permissions(graph: GraphClient, drive: Drive, ids: Sequence[str]) -> None:
    """Read the permissions of items ``ids`` of ``drive`` into its snapshot (a ``str`` reason
    for an item whose read failed). Raises ``SourceUnavailableError``."""
    for iid, body in batch_get(graph, drive.drive_id, list(ids), "permissions").items():
        drive.items[iid].perms = body if isinstance(body, str) else perms(body)


__all__ = ["BATCH", "PERM_FIELDS", "batch_get", "perms", "read_permissions"]
