"""The walkthrough of docs/ARCHITECTURE.md "Adding a source", run: the toy source kind
(toy_source.py: one module) registered by one line — the ``ancre.sources`` entry point of a
plugin distribution, as a package installed next to ancre would declare it — and the real
``ancre daemon`` on it. The toy connector pushes nothing and has no change feed, the periodic
reconciliation is an hour away: a document added, changed or deleted in the store reaches the
index (the control socket's search and ``ancre search``) within seconds only through the
snapshot-diff poller."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.corpus import CORPUS
from support.daemon_proc import EVERYONE, USER, DaemonProc, token
from toy_source import ToyStore

EXAMPLES = Path(__file__).resolve().parent


def plugin_site(dest: Path) -> Path:
    """A site directory holding the toy kind's distribution metadata: its one registry line,
    the ``ancre.sources`` entry point ``toy = toy_source:REGISTERED``."""
    dist = dest / "ancre_toy_source-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ancre-toy-source\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[ancre.sources]\ntoy = toy_source:REGISTERED\n", encoding="utf-8")
    return dest


def toy_config(dest: Path, url: str) -> Path:
    shutil.copy2(CORPUS / "directory.json", dest / "directory.json")
    cfg = dest / "ancre.toml"
    cfg.write_text(
        f'''data_dir = "data"
[embedder]
kind = "e5-local"
[store]
kind = "edge"
[directory]
kind = "file"
path = "directory.json"
[daemon]
metrics_port = 0
debounce_s = 0.2
status_interval_s = 1.0
reconcile_interval_s = 3600
acl_sweep_interval_s = 0
[[sources]]
id = "toy"
kind = "toy"
url = "{url}"
readers = ["{EVERYONE}"]
poll_interval_s = 0.5
''',
        encoding="utf-8",
    )
    return cfg


@pytest.fixture
def store() -> Iterator[ToyStore]:
    s = ToyStore().start()
    try:
        yield s
    finally:
        s.stop()


def _env(tmp_path: Path) -> dict[str, str]:
    site = plugin_site(tmp_path / "site")
    path = os.pathsep.join([str(site), str(EXAMPLES), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {"PYTHONPATH": path, "OMP_WAIT_POLICY": "passive"}


def cli_search(cfg: Path, env: dict[str, str], q: str) -> set[str]:
    """The paths ``ancre search --json`` finds for ``q`` (through the daemon's control socket)."""
    exe = Path(sys.executable).with_name("ancre")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from ancre.app.cli import main; main()"]
    out = subprocess.run(
        [*cmd, "search", q, "--as", USER, "--json", "--config", str(cfg), "--limit", "50"],
        env={**os.environ, **env}, cwd=cfg.parent, capture_output=True, text=True, timeout=120, check=True,
    )
    return {r["path"] for r in json.loads(out.stdout.strip().splitlines()[-1])["results"]}


def test_a_toy_source_gets_change_detection_from_the_poller(tmp_path: Path, store: ToyStore) -> None:
    store.put("notes/a.txt", f"premier document {token(1)}".encode())
    store.put("b.txt", f"deuxième document {token(2)}".encode())
    cfg = toy_config(tmp_path, store.url)
    env = _env(tmp_path)
    d = DaemonProc(cfg, env=env).start()
    try:
        st = d.wait_idle(timeout=180)
        first = st["sources"]["toy"]
        assert (first["last_full"]["trigger"], first["last_full"]["new"]) == ("startup", 2)
        assert first["watch"] == "poll", "no push, no feed, no local tree: the snapshot-diff poller"
        assert d.bm25_paths(token(1)) == {"notes/a.txt"}

        store.put("notes/c.txt", f"un ajout {token(3)}".encode())
        d.wait_for(lambda: d.bm25_paths(token(3)) == {"notes/c.txt"}, "an added document", timeout=60)
        store.put("b.txt", f"deuxième document réécrit {token(4)}".encode())
        d.wait_for(lambda: d.bm25_paths(token(4)) == {"b.txt"} and not d.bm25_paths(token(2)), "a change", timeout=60)
        store.delete("notes/a.txt")
        d.wait_for(lambda: "notes/a.txt" not in d.all_paths(token(1)), "a deletion", timeout=60)

        # an outage of the store is no deletion storm: the poller keeps its cursor and waits
        store.down = True
        d.wait_for(lambda: d.status()["sources"]["toy"]["watch"] == "down", "the feed to see the outage", timeout=30)
        store.down = False
        d.wait_for(lambda: d.status()["sources"]["toy"]["watch"] == "poll", "the feed back", timeout=30)
        assert d.bm25_paths(token(3)) == {"notes/c.txt"}

        st = d.wait_idle()
        passes = dict(st["passes"])
        assert passes.pop("event", 0) >= 3 and passes == {"startup": 1}, "no full pass after the startup one: events only"
        assert st["documents"]["toy"] == {"indexed": 2}
        assert "notes/c.txt" in cli_search(cfg, env, token(3))
        assert "notes/a.txt" not in cli_search(cfg, env, token(1))
    finally:
        d.stop(timeout=60)
        d.kill()

    # the cursor is the engine's, in the state DB: a restart diffs against it (a deletion made
    # while the daemon was down is found without the startup pass)
    store.delete("b.txt")
    d2 = DaemonProc(cfg, env=env)
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("[daemon]\n", "[daemon]\ninitial_sync = false\n"), encoding="utf-8")
    d2.start()
    try:
        d2.wait_for(lambda: (s := d2.status()) and s["state"] == "running" and s["idle"] and "b.txt" not in d2.all_paths(token(4)),
                    "the deletion made while down", timeout=180)
        assert set(d2.status()["passes"]) == {"event"}, "found by the poller, not by a pass"
    finally:
        d2.stop(timeout=60)
        d2.kill()


def test_the_entry_point_is_the_one_registry_line(tmp_path: Path) -> None:
    """Outside ancre, the kind's line is its ``ancre.sources`` entry point: the configuration then
    validates ``kind = "toy"`` with the toy model (a bad key named), the registry builds its
    connector; an entry point that is no ``RegisteredKind``, or that names a built-in kind, is
    left out."""
    env = _env(tmp_path)
    site = Path(env["PYTHONPATH"].split(os.pathsep)[0])
    bad = site / "ancre_bad_plugin-1.0.dist-info"
    bad.mkdir()
    (bad / "METADATA").write_text("Metadata-Version: 2.1\nName: ancre-bad-plugin\nVersion: 1.0\n", encoding="utf-8")
    (bad / "entry_points.txt").write_text("[ancre.sources]\nbad = toy_source:KIND\nfolder = toy_source:REGISTERED\n",
                                          encoding="utf-8")
    script = """
from ancre.config import Settings
from ancre.connectors.registry import REGISTRY, make_connector
from ancre.errors import ConfigError
assert list(REGISTRY) == ["folder", "smb", "sharepoint", "toy"], list(REGISTRY)
s = Settings(sources=[{"id": "t", "kind": "toy", "url": "http://127.0.0.1:9"}])
print(type(s.sources[0]).__name__)
from ancre.connectors.base import SourceContext
conn = make_connector(s.sources[0], SourceContext(directory=None, ignore=(), private_paths=(), data_dir="."))
print(type(conn).__name__)
try:
    Settings(sources=[{"id": "t", "kind": "toy"}])
except Exception as e:
    print("url" in str(e))
"""
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ToySourceConfig", "ToyConnector", "True"]
    assert "'bad'" in out.stderr and "'folder'" in out.stderr, out.stderr
