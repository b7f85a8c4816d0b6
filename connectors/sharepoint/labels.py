"""Sensitivity labels of SharePoint files, for ``exclude_labels``: read with
``POST /drives/{d}/items/{i}/extractSensitivityLabels`` (batched), their names from
``GET /security/informationProtection/sensitivityLabels``; a file carrying an excluded label,
or whose labels can't be read (``423`` for double-key encryption), is listed with ``skip`` set."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ancre.connectors.sharepoint.graph import GraphClient, GraphError
from ancre.connectors.sharepoint.reads import batch_get
from ancre.connectors.sharepoint.snapshot import Drive, Entry

log = logging.getLogger("ancre.sharepoint")


class LabelReader:
    """Reads files' labels into a snapshot; the tenant's label names are read once, at the first
    need. Not thread-safe: the connector calls it under its lock."""

    def __init__(self, graph: GraphClient) -> None:
        self.graph = graph
        self._names: dict[str, str] | None = None

    def names(self) -> dict[str, str]:
        """Label id → name (lower-cased id), read once; empty when Graph refuses it (then
        ``exclude_labels`` match label ids only)."""
        if self._names is None:
            try:
                self._names = {
                    str(x.get("id", "")).casefold(): str(x.get("name") or x.get("displayName") or "")
                    for x in self.graph.pages("/security/informationProtection/sensitivityLabels")
                }
            except GraphError as e:
                log.warning("sensitivity label names unavailable (%s): exclude_labels match ids only", e)
                self._names = {}
        return self._names

    def _labels(self, body: Mapping[str, Any]) -> list[str]:
        out: list[str] = []
        for lab in body.get("labels") or ():
            for k in ("sensitivityLabelId", "id", "name", "displayName"):
                if lab.get(k):
                    out.append(str(lab[k]).casefold())
            name = self.names().get(str(lab.get("sensitivityLabelId", "")).casefold())
            if name:
                out.append(name.casefold())
        return out

    def read(self, drive: Drive, ids: Sequence[str]) -> None:
        """Read the labels of files ``ids`` of ``drive`` into its snapshot (ids and names, lower
        case; a ``str`` reason when unreadable). Raises ``SourceUnavailableError``."""
        for iid, body in batch_get(self.graph, drive.drive_id, list(ids), "extractSensitivityLabels", "POST").items():
            drive.items[iid].labels = body if isinstance(body, str) else self._labels(body)


def label_skip(exclude_labels: Sequence[str], e: Entry) -> str | None:
    """The ``skip`` reason of file ``e`` under ``exclude_labels`` (``None``: listed normally):
    ``label: <label> is in exclude_labels`` or ``label_unreadable: <why>``."""
    if not exclude_labels:
        return None
    if isinstance(e.labels, str):
        return f"label_unreadable: {e.labels}"
    if e.labels is None:
        return "label_unreadable: not read"
    excluded = {x.casefold() for x in exclude_labels}
    hit = next((lab for lab in e.labels if lab in excluded), None)
    return f"label: {hit} is in exclude_labels" if hit else None


__all__ = ["LabelReader", "label_skip"]
