"""A full disk is an event, not a crash (issue 45, README "Running under systemd", *A full disk*).

The data folder is a small tmpfs mounted by the test (root only: skipped, saying so, otherwise),
filled mid-pass by the index itself: the embedded engine writes through memory maps, and without
the free-space guard the first write into a full tmpfs is a bus error (``ancre sync`` died with
exit status 135 before the guard). Checked, with real subprocesses (a bus error would kill the
test process otherwise):

- ``ancre sync`` stops cleanly: exit status 1, outcome ``disk_full`` naming the folder and the
  space needed; ``ancre status`` says ``disk_full``; a new ``ancre search`` process, which would
  have to load the index (its files are mapped for writing), is refused with one line; once the
  tmpfs is grown, ``ancre sync`` completes and every file is found;
- ``ancre daemon`` waits: ``disk.state = disk_full`` in ``daemon-status.json``, ``ancre_disk_full 1``
  in its metrics, one log line naming the folder and the space needed, the control socket keeps
  answering searches; once the tmpfs is grown it resumes by itself (a ``disk_space`` pass) and
  indexes everything — the process never dies.

The embedder is a scripted Ollama on 127.0.0.1 (deterministic 384-dimension vectors), so that the
index fills the file system in seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.daemon_proc import DaemonProc, token, write_daemon_config
from support.httpserver import ScriptedServer

N_FILES = 700
SMALL, LARGE = "44m", "400m"
DIM = 384


def _embed(req: Any) -> tuple[int, dict[str, Any]]:
    vecs = []
    for text in req.json["input"]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        vecs.append((v / np.linalg.norm(v)).tolist())
    return 200, {"model": req.json["model"], "embeddings": vecs}


@pytest.fixture(scope="module")
def ollama() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        srv.route("POST", "/api/embed", _embed)
        yield srv


def _mount(where: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the data folder needs root (run the suite as root: `make test` in CI)")
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip()}): the disk-full tests need one")


def _grow(where: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True, capture_output=True)


@pytest.fixture()
def tree(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path`` with the source ``tree/`` (:data:`N_FILES` seeded files of ~6 chunks) and
    ``data/`` a :data:`SMALL` tmpfs (unmounted at the end)."""
    rng = random.Random(45)
    words = ["contrat", "maintenance", "serveur", "salaire", "facture", "client", "projet", "réseau", "sauvegarde",
             "licence", "pare-feu", "annexe", "échéance", "tarif", "support", "incident", "migration", "audit"]
    root = tmp_path / "tree"
    root.mkdir()
    for i in range(N_FILES):
        paras = [" ".join(rng.choice(words) for _ in range(150)) for _ in range(6)]
        (root / f"doc{i:04d}.txt").write_text(f"{token(i)}\n\n" + "\n\n".join(paras), encoding="utf-8")
    data = tmp_path / "data"
    _mount(data, SMALL)
    try:
        yield tmp_path
    finally:
        subprocess.run(["umount", "-l", str(data)], check=False, capture_output=True)


def _config(base: Path, ollama: ScriptedServer) -> Path:
    cfg = write_daemon_config(
        base, embedder=f'kind = "ollama"\nurl = "{ollama.url}"\nmodel = "nomic-embed-text"',
        daemon={"status_interval_s": 0.5},
    )
    text = cfg.read_text(encoding="utf-8").replace('[store]\nkind = "edge"', '[store]\nkind = "edge"\nmin_free_mb = 4')
    cfg.write_text(text, encoding="utf-8")
    return cfg


def _ancre(*args: str, cfg: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("ancre")
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "ANCRE_CONFIG", "RUNTIME_DIRECTORY")}
    return subprocess.run([str(exe), *args, "--config", str(cfg)], capture_output=True, text=True, env=env,
                          cwd=cfg.parent, timeout=600, check=False)


def test_sync_stops_cleanly_on_a_full_disk_and_completes_once_there_is_room(tree: Path, ollama: ScriptedServer) -> None:
    cfg = _config(tree, ollama)
    res = _ancre("sync", "--json", cfg=cfg)
    assert res.returncode == 1, (res.returncode, res.stderr[-3000:])  # not 135: no bus error
    (rep,) = json.loads(res.stdout)
    assert rep["outcome"] == "disk_full", rep
    folder = str(tree / "data" / "qdrant")
    assert rep["reason"].startswith(f"disk full: the file system of {folder} has "), rep["reason"]
    assert " MiB free, writing to documents need " in rep["reason"] and "[store] min_free_mb" in rep["reason"]
    assert 0 < rep["new"] < N_FILES, rep

    st = _ancre("status", "--json", cfg=cfg)
    assert st.returncode == 0, st.stderr
    passes = json.loads(st.stdout)["passes"]
    assert passes[0]["outcome"] == "disk_full", passes
    shown = _ancre("status", cfg=cfg)
    assert "disk_full" in shown.stdout, shown.stdout

    # a new process must load the index, which maps its sparse files for writing: refused, one line
    found = _ancre("search", token(0), "--as", "alice", "--json", cfg=cfg)
    assert found.returncode == 2, (found.returncode, found.stderr[-2000:])
    msg = " ".join(found.stderr.split())
    assert msg.startswith(f"error: disk full: the file system of {folder} has ") and "opening the index need" in msg, msg

    _grow(tree / "data", LARGE)
    res = _ancre("sync", "--json", cfg=cfg)
    assert res.returncode == 0, res.stderr[-3000:]
    (rep,) = json.loads(res.stdout)
    assert rep["outcome"] == "ok" and rep["new"] + rep["changed"] + rep["unchanged"] == N_FILES, rep
    last = N_FILES - 1
    found = _ancre("search", token(last), "--as", "alice", "--json", cfg=cfg)
    assert f"doc{last:04d}.txt" in {r["filename"] for r in json.loads(found.stdout)["results"]}


def test_the_daemon_waits_for_space_keeps_answering_and_resumes_by_itself(tree: Path, ollama: ScriptedServer) -> None:
    cfg = _config(tree, ollama)
    d = DaemonProc(cfg).start()
    try:
        st = d.wait_for(lambda: (s := d.status()) and s["disk"]["state"] == "disk_full" and s, "disk_full", timeout=300)
        folder = str(tree / "data" / "qdrant")
        assert st["disk"]["folder"] == folder and st["disk"]["needed_bytes"] > st["disk"]["free_bytes"], st["disk"]
        assert st["disk"]["sources"] == ["t"]
        assert "ancre_disk_full 1.0" in d.metrics()
        logged = [json.loads(ln) for ln in d.log_text().splitlines() if ln.startswith("{")]
        warned = [r for r in logged if r["level"] in ("WARNING", "ERROR", "CRITICAL")]
        lines = [r["msg"] for r in warned if f"disk full: the file system of {folder} has" in r["msg"]]
        assert len(lines) == 1 and " MiB free, writing to documents need " in lines[0], lines  # one line
        assert not [r for r in warned if "Traceback" in json.dumps(r) or r["level"] == "ERROR"], warned
        assert "doc0000.txt" in {r["path"] for r in d.search(token(0))}  # questions still answered

        _grow(tree / "data", LARGE)
        st = d.wait_for(lambda: (s := d.status()) and s["disk"]["state"] == "ok" and s["idle"]
                        and s["documents"]["t"].get("indexed") == N_FILES and s, "resumed and indexed", timeout=300)
        assert st["passes"].get("disk_space"), st["passes"]
        assert "ancre_disk_full 0.0" in d.metrics()
        last = N_FILES - 1
        assert f"doc{last:04d}.txt" in {r["path"] for r in d.search(token(last))}
        assert "resumes with a full pass of t" in d.log_text()
        rc, _ = d.stop(timeout=30)
        assert rc == 0
    finally:
        with contextlib.suppress(Exception):
            d.kill()
