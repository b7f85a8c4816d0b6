"""The source contract (:mod:`ancre.testing`, shipped in the package) run by every in-tree source
kind, each through its harness (conftest.py): listing, content, ACLs, live rights and the change
feed. A plug-in source runs the same mixins the same way (tests/examples/test_toy_contract.py
runs them on the toy source, registered through the ``ancre.sources`` entry point)."""

from __future__ import annotations

import pytest

from ancre.testing import AclHarness, SourceContract


class TestFolderSource(SourceContract):
    """A folder source whose rights come from an ACL manifest."""

    @pytest.fixture
    def harness(self, folder_source: AclHarness) -> AclHarness:
        return folder_source


class TestSmbSource(SourceContract):
    """An SMB source over the Samba AD DC's share (``flock /tmp/ancre-samba.lock``)."""

    @pytest.fixture
    def harness(self, smb_source: AclHarness) -> AclHarness:
        return smb_source


class TestSharePointSource(SourceContract):
    """A SharePoint source over the fake Microsoft tenant (Graph's documented JSON, on loopback)."""

    @pytest.fixture
    def harness(self, sharepoint_source: AclHarness) -> AclHarness:
        return sharepoint_source
