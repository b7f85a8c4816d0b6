"""Ancre's files under ``data_dir`` are private (folders 0700, files 0600) whatever the
umask it was started with — the store, the state DB, BM25 snapshots, the daemon's status file,
the audit log and the locks — and an existing data directory left readable is tightened."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.daemon_proc import USER, token, write_daemon_config

from ancre.app.daemon import make_daemon
from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.daemon.service import STATUS_FILE


@pytest.fixture()
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o000)
    try:
        yield
    finally:
        os.umask(old)


def _open_entries(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames]:
            p = Path(dirpath) / name if name != "." else Path(dirpath)
            st = os.lstat(p)
            if not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
                out.append(f"{p.relative_to(root)} {oct(stat.S_IMODE(st.st_mode))}")
    return out


def test_data_dir_is_private_whatever_the_umask(tmp_path: Path, permissive_umask: None) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a.txt").write_text(f"contrat de maintenance {token(1)}", encoding="utf-8")
    cfg = write_daemon_config(tmp_path)
    # a data directory left world-readable by an earlier run
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    (data / "ancien.json").write_text("{}", encoding="utf-8")
    os.chmod(data / "ancien.json", 0o644)
    settings = load_settings(cfg)
    rt = Runtime(settings)
    try:
        rep = rt.engine.run_pass(rt.connectors()[0])
        assert rep.outcome == "ok" and rep.new == 1
        answer = rt.answer_service.ask(f"contrat de maintenance {token(1)}", USER)
        assert answer.sources
        d = make_daemon(rt)
        d.start()
        d.stop()
    finally:
        rt.close()
    names = {p.name for p in data.rglob("*")}
    assert {STATUS_FILE, "state.sqlite3", "bm25", "audit"} <= names, names
    assert any(p.suffix == ".jsonl" for p in (data / "audit").iterdir())
    assert _open_entries(data) == []
