"""Relative paths of an event-driven sync (:meth:`SyncEngine.sync_paths
<ancre.daemon.sync.SyncEngine.sync_paths>`): cleaning them, listing a folder's items."""

from __future__ import annotations

import os
from pathlib import Path

from ancre.connectors.base import Connector, LocalTree, SubtreeListing
from ancre.models import SourceItem, nfc


def clean_rel_path(path: str) -> str | None:
    """``path`` as a relative POSIX path in NFC without leading or trailing ``/`` (always read
    relative to the source root); ``None`` when it is empty or has an empty, ``.`` or ``..``
    segment (which could point outside the source)."""
    rel = nfc(path).strip("/")
    if not rel or any(part in ("", ".", "..") for part in rel.split("/")):
        return None
    return rel


def items_under(connector: Connector, prefix: str) -> list[SourceItem]:
    """The indexable items below the folder ``prefix`` (empty if it is not an existing folder).

    A :class:`~ancre.connectors.base.SubtreeListing` connector lists it itself; a
    :class:`~ancre.connectors.base.LocalTree` one is walked below ``root/prefix`` with each file checked by ``get_item``
    (ignore and include/exclude rules apply). Any other connector returns nothing here: its
    watcher reports files one by one and the periodic reconciliation finds the rest.
    """
    if isinstance(connector, SubtreeListing):
        return list(connector.list_under(prefix))
    if not isinstance(connector, LocalTree):
        return []
    root = connector.root
    base = root / prefix
    if base.is_symlink() or not base.is_dir():
        return []
    out: list[SourceItem] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            item = connector.get_item(rel)
            if item is not None:
                out.append(item)
    return out
