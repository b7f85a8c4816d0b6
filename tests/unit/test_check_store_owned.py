"""`ancre check` while the service runs: the store's owner is the running ancre, and the check says
so as a fine state (docs/OPERATIONS.md, a deploy walkthrough found the old line advising to stop it)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from ancre.app.check import check_store
from ancre.index.edge_store import EdgeStore
from ancre.settings.sections import EdgeStoreConfig


def test_a_store_owned_by_the_running_ancre_is_ok_and_names_its_owner(tmp_path: Path) -> None:
    owner = EdgeStore(tmp_path, min_free_bytes=0)
    owner.open("e5-test", 8)
    try:
        rt = SimpleNamespace(settings=SimpleNamespace(store=EdgeStoreConfig()), store=_Lazy(EdgeStore(tmp_path, min_free_bytes=0)))
        res = check_store(rt)  # type: ignore[arg-type]
    finally:
        owner.close()
    assert res.ok, res
    assert f"owned by the running ancre (PID {os.getpid()}" in res.detail
    assert "Stop that process" not in res.detail


class _Lazy:
    """A store opened at its first use, as the runtime's is: opening it raises the owner's lock."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store

    def count(self, collection: str) -> int:
        EdgeStore.open(self._store, "e5-test", 8)
        return self._store.count(collection)
