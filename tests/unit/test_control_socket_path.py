"""Where the control socket lives (README "Running under systemd"): the configured path, else
systemd's ``$RUNTIME_DIRECTORY``, else ``<data_dir>/run``; an admin's shell (no
``$RUNTIME_DIRECTORY``) also looks in ``/run/ancre``. ``daemon.control_port`` is still accepted,
and ignored."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ancre.settings.daemon import DaemonConfig, control_socket_candidates, control_socket_path


def test_configured_path_wins() -> None:
    cfg = DaemonConfig(control_socket=Path("/srv/ancre/ctl.sock"))
    env = {"RUNTIME_DIRECTORY": "/run/ancre"}
    assert control_socket_path(cfg, Path("/var/lib/ancre"), env) == Path("/srv/ancre/ctl.sock")
    assert control_socket_candidates(cfg, Path("/var/lib/ancre"), env) == (Path("/srv/ancre/ctl.sock"),)


def test_systemd_runtime_directory_then_data_dir() -> None:
    cfg = DaemonConfig()
    assert control_socket_path(cfg, Path("/d"), {"RUNTIME_DIRECTORY": "/run/ancre:/run/other"}) == Path("/run/ancre/control.sock")
    assert control_socket_path(cfg, Path("/d"), {}) == Path("/d/run/control.sock")
    assert control_socket_candidates(cfg, Path("/d"), {}) == (Path("/d/run/control.sock"), Path("/run/ancre/control.sock"))


def test_control_port_is_accepted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ancre.config"):
        cfg = DaemonConfig(control_port=8765)
    assert cfg.control_port == 8765
    assert "daemon.control_port is deprecated and ignored" in caplog.text
