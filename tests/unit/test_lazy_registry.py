"""The source registry is lazy: reading the configuration (``import ancre.config``, validating
``[[sources]]`` of every kind) imports no client library of a connector; building a source imports
its connector module, whose ``KIND`` matches its registry line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ancre.connectors.base import SourceKind
from ancre.connectors.registry import REGISTRY, RegisteredKind, source_kind
from ancre.errors import ConfigError
from ancre.settings.sources import FolderSourceConfig

CLIENT_LIBRARIES = ("smbprotocol", "smbclient", "spnego", "impacket", "msal", "office365")
CONNECTOR_MODULES = ("ancre.connectors.smb", "ancre.connectors.smb.connector", "ancre.connectors.smb.rpc",
                     "ancre.connectors.smb.wire", "ancre.connectors.sharepoint.connector",
                     "ancre.connectors.sharepoint.graph", "ancre.connectors.sharepoint.auth",
                     "ancre.connectors.sharepoint.rest")

_PROBE = """
import json, sys
{body}
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(body: str, tmp_path: Path) -> set[str]:
    """The modules a fresh interpreter has imported after running ``body``."""
    out = subprocess.run([sys.executable, "-c", _PROBE.format(body=body)], cwd=tmp_path, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return set(json.loads(out.splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in CLIENT_LIBRARIES or m in CONNECTOR_MODULES)


def test_importing_the_config_imports_no_client_library(tmp_path: Path) -> None:
    assert _heavy(_modules_after("import ancre.config", tmp_path)) == []


def test_loading_a_config_with_every_kind_imports_no_client_library(tmp_path: Path) -> None:
    cfg = tmp_path / "ancre.toml"
    cfg.write_text(
        "[[sources]]\nid = 'f'\nroot = 'tree'\n"
        "[[sources]]\nid = 's'\nkind = 'smb'\nserver = 'srv'\nshare = 'P'\npassword_env = 'X'\n"
        "[[sources]]\nid = 'sp'\nkind = 'sharepoint'\ntenant_id = 't'\nclient_id = 'c'\nclient_secret_env = 'Y'\n",
        encoding="utf-8",
    )
    body = f"from ancre.config import load_settings\ns = load_settings({str(cfg)!r})\nassert len(s.sources) == 3"
    assert _heavy(_modules_after(body, tmp_path)) == []


def test_building_a_kind_imports_its_connector(tmp_path: Path) -> None:
    modules = _modules_after("from ancre.connectors.registry import source_kind\nsource_kind('smb')", tmp_path)
    assert "ancre.connectors.smb" in modules and "smbprotocol" in modules
    assert not any(m.split(".")[0] == "msal" for m in modules)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_each_line_matches_its_module(name: str) -> None:
    entry = REGISTRY[name]
    kind = source_kind(name)
    assert isinstance(kind, SourceKind) and kind.kind == entry.kind == name and kind.config is entry.config
    assert entry.config.__module__.startswith(("ancre.settings", "ancre.connectors.sharepoint.config"))
    assert source_kind(name) is kind


def test_a_line_out_of_step_with_its_module_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"ancre.connectors.folder.KIND is not SourceKind\('toy'"):
        RegisteredKind("toy", FolderSourceConfig, "ancre.connectors.folder").load()
    with pytest.raises(ConfigError, match="can't be imported"):
        RegisteredKind("toy", FolderSourceConfig, "ancre.connectors.no_such_module").load()
