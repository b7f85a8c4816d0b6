"""``[logging]``: a level per component, library chatter (smbprotocol's per-request INFO lines) at
WARNING by default, applied by the daemon/API logging setup and by the CLI."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ancre.config import load_settings
from ancre.daemon.logs import setup_logging
from ancre.errors import ConfigError

NAMES = ("", "ancre", "smbprotocol", "smbclient", "spnego", "uvicorn", "apscheduler", "httpx", "ancre.sync")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers = list(root.handlers)
    levels = {n: logging.getLogger(n).level for n in NAMES}
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    for n, lvl in levels.items():
        logging.getLogger(n).setLevel(lvl)


def settings(tmp_path: Path, logging_section: str = ""):
    cfg = tmp_path / "ancre.toml"
    cfg.write_text(f"data_dir = 'd'\n{logging_section}", encoding="utf-8")
    return load_settings(cfg)


def emit_all() -> None:
    logging.getLogger("smbprotocol.connection").info("Sending SMB2 CREATE request")
    logging.getLogger("smbclient._pool").info("Creating new SMB session")
    logging.getLogger("ancre.sync").info("pass done")
    logging.getLogger("uvicorn.access").info("GET /health 200")
    logging.getLogger("apscheduler.executors.default").info("Running job")
    logging.getLogger("httpx").info("HTTP Request: POST http://127.0.0.1/api/chat")
    logging.getLogger("smbprotocol.connection").warning("connection lost")


def lines(capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    return [(d["logger"], d["msg"]) for d in map(json.loads, capsys.readouterr().out.splitlines())]


def test_by_default_library_info_lines_are_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = settings(tmp_path)
    setup_logging(s.daemon.log_format, s.daemon.log_level, s.logging.levels(s.daemon.log_level))
    emit_all()
    out = lines(capsys)
    assert ("smbprotocol.connection", "connection lost") in out  # warnings still show
    assert not [x for x in out if x[0].startswith(("smbprotocol", "smbclient", "apscheduler", "httpx"))
                and x[1] != "connection lost"]
    assert ("ancre.sync", "pass done") in out and ("uvicorn.access", "GET /health 200") in out


def test_configured_levels_apply_per_component(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = settings(
        tmp_path,
        "[logging]\nsmbprotocol = 'INFO'\nancre = 'WARNING'\nuvicorn = 'WARNING'\n"
        "loggers = { httpx = 'INFO', 'ancre.sync' = 'INFO' }\n",
    )
    setup_logging(s.daemon.log_format, s.daemon.log_level, s.logging.levels(s.daemon.log_level))
    emit_all()
    out = lines(capsys)
    assert ("smbprotocol.connection", "Sending SMB2 CREATE request") in out
    assert ("smbclient._pool", "Creating new SMB session") in out
    assert ("httpx", "HTTP Request: POST http://127.0.0.1/api/chat") in out
    assert ("ancre.sync", "pass done") in out  # loggers wins over ancre = WARNING for ancre.sync
    assert not [x for x in out if x[0].startswith(("uvicorn", "apscheduler"))]
    logging.getLogger("ancre.query").info("not shown")
    assert lines(capsys) == []


def test_daemon_log_level_is_ancre_level_unless_logging_ancre_is_set(tmp_path: Path) -> None:
    s = settings(tmp_path, "[daemon]\nlog_level = 'DEBUG'\n")
    assert s.logging.levels(s.daemon.log_level)["ancre"] == "DEBUG"
    s = settings(tmp_path, "[daemon]\nlog_level = 'DEBUG'\n[logging]\nancre = 'ERROR'\n")
    assert s.logging.levels(s.daemon.log_level)["ancre"] == "ERROR"
    cli = s.logging.levels("WARNING", cli=True)
    assert "" not in cli and cli["ancre"] == "ERROR" and cli["smbprotocol"] == "WARNING"
    assert "ancre" not in settings(tmp_path).logging.levels("WARNING", cli=True)


@pytest.mark.parametrize(
    ("section", "named"),
    [("[logging]\nsmbprotocol = 'LOUD'\n", "logging.smbprotocol"), ("[logging]\nsmb = 'INFO'\n", "logging.smb"),
     ("[logging]\nloggers = { httpx = 'chatty' }\n", "logging.loggers.httpx")],
)
def test_bad_logging_value_names_the_key(tmp_path: Path, section: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        settings(tmp_path, section)


def test_the_cli_applies_library_levels(tmp_path: Path) -> None:
    from ancre.app.cli import app

    (tmp_path / "ancre.toml").write_text("data_dir = 'd'\n[logging]\nsmbprotocol = 'DEBUG'\n", encoding="utf-8")
    CliRunner().invoke(app, ["status", "--json", "--config", str(tmp_path / "ancre.toml")])
    assert logging.getLogger("smbprotocol").level == logging.DEBUG
    assert logging.getLogger("smbclient").level == logging.DEBUG
