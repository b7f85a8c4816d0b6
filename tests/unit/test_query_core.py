"""``QueryCore.open`` refuses a bad configuration with a ConfigError naming it, before opening
anything (the query core as a library)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ancre.errors import ConfigError
from ancre.query import QueryCore


def test_open_a_missing_config_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        QueryCore.open(tmp_path / "absent.toml")


def test_open_without_a_path_reads_ancre_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "ancre.toml"
    cfg.write_text('data_dir = "data"\n[store]\nkind = "nope"\n', encoding="utf-8")
    monkeypatch.setenv("ANCRE_CONFIG", str(cfg))
    with pytest.raises(ConfigError, match=r"store.kind"):
        QueryCore.open()
    assert not (tmp_path / "data").exists()
