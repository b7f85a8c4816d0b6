"""``[[sources]] kind = "sharepoint"`` validation (ancre.connectors.sharepoint.config)."""

from __future__ import annotations

import pytest

from ancre.config import load_settings
from ancre.connectors.registry import source_kind
from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.errors import ConfigError

BASE = {"id": "sp", "kind": "sharepoint", "tenant_id": "t", "client_id": "c"}


def test_registered_kind_and_defaults() -> None:
    s = load_settings(None, sources=[{**BASE, "client_secret_env": "SP_SECRET"}])
    src = s.sources[0]
    assert isinstance(src, SharePointSourceConfig) and source_kind("sharepoint").config is SharePointSourceConfig
    assert src.sharing_links == "specific_people" and not src.sharing_delta and src.exclude_labels == ()
    assert src.graph_url == "https://graph.microsoft.com/v1.0"


@pytest.mark.parametrize(
    "extra",
    [
        {},  # no credential
        {"client_secret": "x", "pfx_path": "/x.pfx"},  # two
        {"certificate_path": "/k.pem"},  # no thumbprint
        {"client_secret": "x", "client_secret_env": "E"},
    ],
)
def test_exactly_one_credential(extra: dict) -> None:
    with pytest.raises(ConfigError, match=r"sources.0"):
        load_settings(None, sources=[{**BASE, **extra}])


def test_unknown_link_policy_refused() -> None:
    with pytest.raises(ConfigError, match="sharing_links"):
        load_settings(None, sources=[{**BASE, "client_secret": "x", "sharing_links": "anyone"}])


def test_secret_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SP_SECRET", "s3cret")
    src = load_settings(None, sources=[{**BASE, "client_secret_env": "SP_SECRET"}]).sources[0]
    assert isinstance(src, SharePointSourceConfig) and src.secret() == "s3cret"
