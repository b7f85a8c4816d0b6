"""The source contract, shipped with ancre so that a source kind in a package of its own (entry
point group ``ancre.sources``) runs the same tests as the in-tree ones, by subclassing.

One mixin per capability (:mod:`ancre.testing.contract`): :class:`ListingContract`,
:class:`ContentContract`, :class:`AclContract`, :class:`LiveRightsContract`,
:class:`ChangeFeedContract`, and :class:`SourceContract` for all five. A test class subclasses
those its source has and provides a ``harness`` fixture (:class:`SourceHarness`, or
:class:`AclHarness` for the ACL contract)::

    import pytest
    from ancre.testing import ChangeFeedContract, ContentContract, ListingContract, LiveRightsContract

    class TestToySource(ListingContract, ContentContract, LiveRightsContract, ChangeFeedContract):
        @pytest.fixture
        def harness(self, tmp_path):
            return ToyHarness(tmp_path)

The tests are pytest tests, but importing this package needs no pytest (it is imported inside
the tests only): pytest is a dependency of the tests, not of ancre. docs/ARCHITECTURE.md
"Adding a source".
"""

from __future__ import annotations

from ancre.testing.contract import (
    AclContract,
    ChangeFeedContract,
    ContentContract,
    ListingContract,
    LiveRightsContract,
    SourceContract,
    change_feed,
)
from ancre.testing.harness import AclHarness, SourceHarness

__all__ = [
    "AclContract",
    "AclHarness",
    "ChangeFeedContract",
    "ContentContract",
    "ListingContract",
    "LiveRightsContract",
    "SourceContract",
    "SourceHarness",
    "change_feed",
]
