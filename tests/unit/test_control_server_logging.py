"""Starting the control socket server keeps uvicorn's access log working for the rest of the
process (``ancre serve`` runs the API and the control socket in one process; uvicorn's
``access_log=False`` cut ``uvicorn.access`` off process-wide, and the API's access lines vanished)."""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI

from ancre.app.control import ControlServer
from ancre.app.server import RedactQueryString


def test_the_control_server_leaves_the_access_log_on(tmp_path: Path) -> None:
    access = logging.getLogger("uvicorn.access")
    access.propagate = True
    server = ControlServer(FastAPI(), tmp_path / "run" / "control.sock", "no-such-group-ancre").start()
    try:
        assert access.propagate is True and not access.disabled
        assert any(isinstance(f, RedactQueryString) for f in access.filters)
    finally:
        server.stop()
