"""tighten_tree leaves the control socket reachable by the admin group (found by a new user:
`ancre check` or a refused `ancre api` made the running daemon's socket 0600)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from ancre.index.private import CONTROL_DIR, tighten_tree


def test_tighten_tree_keeps_the_control_socket_and_its_folder_but_closes_the_rest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run = data / CONTROL_DIR
    run.mkdir(parents=True)
    os.chmod(data, 0o755)
    os.chmod(run, 0o750)
    state = data / "state.sqlite3"
    state.write_bytes(b"x")
    os.chmod(state, 0o644)
    path = run / "control.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o660)
        other = data / "bm25"
        other.mkdir()
        os.chmod(other, 0o755)
        stray = other / "x.sock"  # a socket anywhere keeps its mode too
        s2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s2.bind(str(stray))
        os.chmod(stray, 0o660)
        tighten_tree(data)
        assert stat.S_IMODE(os.stat(data).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(other).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(run).st_mode) == 0o750
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o660
        assert stat.S_IMODE(os.lstat(stray).st_mode) == 0o660
        s2.close()
    finally:
        sock.close()
