"""A plug-in source runs the shipped source contract by subclassing (:mod:`ancre.testing`): the
toy source kind (toy_source.py, registered through the ``ancre.sources`` entry point in
test_toy_source.py) over its HTTP store. Its rights come from its configuration (``readers``),
not per file, so it runs every capability's contract but the ACL one (no per-file rights to
change or break)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from toy_source import KIND, ToyConnector, ToySourceConfig, ToyStore

from ancre.connectors.base import Connector, SourceContext
from ancre.models import nfc
from ancre.testing import ChangeFeedContract, ContentContract, ListingContract, LiveRightsContract, SourceHarness


class ToyHarness:
    """A toy source over a fresh :class:`ToyStore` readable by Everyone."""

    def __init__(self, data_dir: Path) -> None:
        self.store = ToyStore().start()
        self.cfg = ToySourceConfig(id="toy", kind="toy", url=self.store.url, readers=("sid:S-1-1-0",))

        def no_directory():  # type: ignore[no-untyped-def]
            raise AssertionError("the toy source resolves no name")

        self.ctx = SourceContext(directory=no_directory, ignore=(), private_paths=(), data_dir=data_dir)
        self.connector: Connector = KIND.build(self.cfg, self.ctx)

    def path(self, name: str) -> str:
        return nfc(name)

    def write(self, name: str, data: bytes) -> None:
        self.store.put(name, data)

    def delete(self, name: str) -> None:
        self.store.delete(name)

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        self.store.down = True
        try:
            yield
        finally:
            self.store.down = False

    def reopen(self) -> Connector:
        assert isinstance(self.connector, ToyConnector)
        self.connector.close()  # keeps no file of its own
        self.connector = KIND.build(self.cfg, self.ctx)
        return self.connector

    def close(self) -> None:
        assert isinstance(self.connector, ToyConnector)
        self.connector.close()
        self.store.stop()


class TestToySource(ListingContract, ContentContract, LiveRightsContract, ChangeFeedContract):
    """The toy source under the contract of each capability it has."""

    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[SourceHarness]:
        h = ToyHarness(tmp_path)
        try:
            yield h
        finally:
            h.close()
