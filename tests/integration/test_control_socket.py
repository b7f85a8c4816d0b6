"""With ``ancre daemon`` running on the embedded store, the admin's CLI and the imported
query core work through the daemon's local control socket.

- each CLI command (``status``, ``search``, ``ask``, ``acl explain``, with and without ``--json``)
  prints exactly what it prints in-process once the daemon is stopped;
- ``ancre sync`` during a running pass queues one, says so, follows it and prints the sync table;
  ``reindex`` is refused with a clear message;
- ``QueryCore.open`` returns a remote core whose results equal the in-process ones, and every
  ``ask`` through the socket is audited with the Unix user who asked;
- a process that may not open the socket gets a clear permission error, and the daemon listens on
  no TCP port for control.

The embedder is a scripted Ollama server on 127.0.0.1 (deterministic vectors) whose answers can be
held, so that a pass is running for as long as the test needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.daemon_proc import DaemonProc, token, write_daemon_config
from support.httpserver import Request, ScriptedServer

from ancre.config import load_settings
from ancre.errors import ControlPermissionError

DIM = 16
GATE = "barrière"
"""A text holding this word is embedded only once the test releases the gate."""


def _vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(size=DIM).tolist()


class GatedEmbedder:
    """``POST /api/embed`` (Ollama): answers at once, except texts holding :data:`GATE`, which
    wait for :attr:`release` (:attr:`blocked` set first)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.blocked = threading.Event()

    def __call__(self, req: Request):  # type: ignore[no-untyped-def]
        texts = req.json["input"]
        if any(GATE in t for t in texts):
            self.blocked.set()
            self.release.wait(120)
        return 200, {"model": req.json["model"], "embeddings": [_vector(t) for t in texts]}


class Site:
    def __init__(self, base: Path, srv: ScriptedServer, gate: GatedEmbedder, sockdir: Path) -> None:
        self.base, self.srv, self.gate, self.sockdir = base, srv, gate, sockdir
        self.tree = base / "tree"
        self.socket = sockdir / "control.sock"
        self.config = write_daemon_config(
            base, daemon={"control_socket": str(self.socket), "metrics_port": None},
            embedder=f'kind = "ollama"\nurl = "{srv.url}"\nmodel = "fake"\ndim = {DIM}',
        )

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("ANCRE_CONFIG", "RUNTIME_DIRECTORY", "NOTIFY_SOCKET")}
        exe = Path(sys.executable).with_name("ancre")
        out = subprocess.run(
            [str(exe), *args, "--config", str(self.config)], check=False, capture_output=True, text=True, env=env, cwd=self.base,
            timeout=300,
        )
        if check:
            assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out

    def daemon(self) -> DaemonProc:
        d = DaemonProc(self.config).start()
        d.wait_for(self.socket.exists, "the control socket")
        return d


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[Site]:
    gate = GatedEmbedder()
    # the socket lives outside pytest's private tmp folders, so that another uid can reach it
    sockdir = Path(tempfile.mkdtemp(prefix="ancre-ctl-", dir="/tmp"))
    os.chmod(sockdir, 0o711)
    with ScriptedServer() as srv:
        srv.route("POST", "/api/embed", gate)
        s = Site(tmp_path, srv, gate, sockdir)
        (s.tree / "CLIENTS").mkdir(parents=True)
        for i in range(6):
            (s.tree / "CLIENTS" / f"contrat_{i}.txt").write_text(
                f"Contrat de maintenance {token(i)} : forfait mensuel de {100 + i} francs, astreinte le samedi.",
                encoding="utf-8",
            )
        try:
            yield s
        finally:
            gate.release.set()
            shutil.rmtree(sockdir, ignore_errors=True)


COMMANDS: list[tuple[str, ...]] = [
    ("status",),
    ("status", "--json"),
    ("search", f"contrat de maintenance {token(2)}", "--as", "alice"),
    ("search", f"contrat de maintenance {token(2)}", "--as", "alice", "--json", "--limit", "3"),
    ("search", "forfait mensuel", "--as", "inconnu"),
    ("ask", f"Quel est le forfait du contrat {token(3)} ?", "--as", "alice"),
    ("ask", f"Quel est le forfait du contrat {token(3)} ?", "--as", "alice", "--json"),
    ("acl", "explain", "CLIENTS/contrat_1.txt", "--as", "alice"),
    ("acl", "explain", "CLIENTS/contrat_1.txt", "--as", "inconnu"),
]


def _audit_lines(base: Path) -> list[dict[str, object]]:
    return [json.loads(line) for p in sorted((base / "data" / "audit").glob("*.jsonl")) for line in p.read_text().splitlines()]


def test_cli_and_query_core_through_the_socket_give_what_they_give_in_process(site: Site) -> None:
    from ancre.query import QueryCore
    from ancre.query.remote import RemoteQueryCore

    site.cli("sync")  # in-process: nothing runs yet
    d = site.daemon()
    try:
        d.wait_idle()
        assert oct(site.socket.stat().st_mode & 0o777) == "0o660"
        through_socket = {cmd: site.cli(*cmd) for cmd in COMMANDS}
        settings = load_settings(site.config)
        with QueryCore.open(settings) as core:
            assert isinstance(core, RemoteQueryCore)
            remote_search = core.search(f"forfait mensuel {token(4)}", "alice", limit=5)
            remote_answer = core.ask(f"Quel est le forfait du contrat {token(4)} ?", "alice")
            assert core.principals("inconnu") == frozenset() and core.account("inconnu") is None
            assert core.account("alice") == "alice" and core.points()["documents"] > 0
        audited = _audit_lines(site.base)
        exposure_there = json.loads(site.cli("report", "exposure", "--json").stdout)
        refused = site.cli("reindex", "--yes", check=False)
    finally:
        d.stop()
    assert refused.returncode == 2 and "reindex refused" in refused.stderr and "stop the service" in refused.stderr

    # every ask through the socket is audited with the admin who asked and the user asked for
    assert len(audited) == 3, audited
    assert all(a["user"] == "unix:root" and a["account"] == "alice" and a["asked_for"] == "alice" for a in audited), audited

    for cmd in COMMANDS:
        here = site.cli(*cmd)
        there = through_socket[cmd]
        assert (there.stdout, there.stderr) == (here.stdout, here.stderr), cmd
    assert "inconnu' is unknown to the directory" in through_socket[COMMANDS[4]].stderr
    # the exposure report is computed by the owner of the index, the same as in-process
    exposure_here = json.loads(site.cli("report", "exposure", "--json").stdout)
    for rep in (exposure_here, exposure_there):
        del rep["generated_at"], rep["seconds"]
    assert exposure_there == exposure_here and exposure_here["chunks"] > 0
    assert "READABLE" in through_socket[COMMANDS[7]].stdout

    with QueryCore.open(load_settings(site.config)) as core:
        assert not isinstance(core, RemoteQueryCore)
        assert core.search(f"forfait mensuel {token(4)}", "alice", limit=5) == remote_search
        local_answer = core.ask(f"Quel est le forfait du contrat {token(4)} ?", "alice")
    assert remote_search.hits and remote_answer.sources
    assert (remote_answer.reponse, remote_answer.sources, remote_answer.ancree, remote_answer.controles) == (
        local_answer.reponse, local_answer.sources, local_answer.ancree, local_answer.controles,
    )


def test_sync_during_a_running_pass_is_queued_and_followed(site: Site) -> None:
    (site.tree / "CLIENTS" / "lent.txt").write_text(f"Avenant {GATE} au contrat, embedding retenu.", encoding="utf-8")
    d = site.daemon()
    try:
        site.gate.blocked.wait(60)
        st = d.wait_for(lambda: (d.status() or {}).get("current"), "the startup pass to run")
        assert st["trigger"] == "startup" and st["scope"] == "full"
        err_path = site.base / "sync.err"
        env = {k: v for k, v in os.environ.items() if k not in ("ANCRE_CONFIG", "RUNTIME_DIRECTORY")}
        with open(err_path, "w") as err, open(site.base / "sync.out", "w") as out:
            proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("ancre")), "sync", "--config", str(site.config)],
                stdout=out, stderr=err, env=env, cwd=site.base, text=True,
            )
        d.wait_for(lambda: "queued after it" in err_path.read_text(), "the CLI to report its queued pass", timeout=120)
        refused = site.cli("reindex", "--yes", check=False)
        assert refused.returncode == 2 and "reindex refused: a startup pass of t is running" in refused.stderr
        site.gate.release.set()
        assert proc.wait(120) == 0, err_path.read_text()
        status = d.wait_idle()
    finally:
        site.gate.release.set()
        d.stop()
    printed = (site.base / "sync.out").read_text()
    assert "sync" in printed and " t " in printed and "ok" in printed, printed
    assert "a startup pass of t is running" in err_path.read_text()
    assert status["passes"].get("control") == 1 and status["passes"].get("startup") == 1


def test_ctrl_c_stops_following_not_the_pass(site: Site) -> None:
    (site.tree / "CLIENTS" / "lent.txt").write_text(f"Avenant {GATE} au contrat, embedding retenu.", encoding="utf-8")
    d = site.daemon()
    try:
        site.gate.blocked.wait(60)
        env = {k: v for k, v in os.environ.items() if k not in ("ANCRE_CONFIG", "RUNTIME_DIRECTORY")}
        err_path = site.base / "sync.err"
        with open(err_path, "w") as err:
            proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("ancre")), "sync", "--config", str(site.config)],
                stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=site.base,
            )
        d.wait_for(lambda: "queued after it" in err_path.read_text(), "the CLI to follow its queued pass", timeout=120)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
        assert "stopped following; the pass goes on" in err_path.read_text()
        site.gate.release.set()
        st = d.wait_for(lambda: (s := d.status()) and s["passes"].get("control") == 1 and s["idle"] and s,
                        "the requested pass to run anyway", timeout=120)
    finally:
        site.gate.release.set()
        d.stop()
    assert st["sources"]["t"]["last_full"]["trigger"] == "control" and st["sources"]["t"]["last_full"]["outcome"] == "ok"


def _listening_tcp_inodes(pid: int) -> set[str]:
    """Inodes of the TCP sockets in LISTEN state (``0A``, proc(5)) that process ``pid`` holds."""
    held = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            held.add(target[8:-1])
    listening = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A":
                listening.add(cols[9])
    return held & listening


def _as_nobody(settings: object) -> str:
    """In a forked child running as ``nobody``: what opening the query core raises."""
    import concurrent.futures.thread  # noqa: F401 - imported before the child loses access to the files

    from ancre.query.remote import ControlClient

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, try, report, exit without cleanup
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            ControlClient.find(settings)  # type: ignore[arg-type]
            msg = "no error"
        except ControlPermissionError as e:
            msg = f"ControlPermissionError: {e}"
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            msg = f"{type(e).__name__}: {e}"
        try:
            os.write(w, msg.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        msg = f.read()
    os.waitpid(pid, 0)
    return msg


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another uid")
def test_no_access_to_the_socket_is_a_clear_permission_error_and_nothing_listens_on_tcp(site: Site) -> None:
    d = site.daemon()
    try:
        d.wait_idle()
        assert _listening_tcp_inodes(d.pid) == set()  # no metrics port here: nothing on TCP at all
        msg = _as_nobody(load_settings(site.config))
    finally:
        d.stop()
    assert msg.startswith("ControlPermissionError: permission denied on the control socket"), msg
    assert "admin group" in msg


def test_a_socket_of_another_instance_is_never_used(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two instances on one host: the client of the second (its own data_dir, no socket named) finds
    systemd's socket — here the first instance's — and passes it over: its answers would rest on
    the other index and its audit would record the question. The first instance's own clients still
    use it, found at the same fallback place; a socket named in the configuration that serves
    another data folder is a clear error."""
    import ancre.settings.daemon as daemon_settings
    from ancre.errors import ControlError
    from ancre.query.remote import ControlClient

    monkeypatch.setattr(daemon_settings, "SYSTEMD_RUNTIME_DIR", site.sockdir)  # the first one's socket is there
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    d = site.daemon()
    try:
        d.wait_idle()
        other = load_settings(site.config, data_dir=str(site.base / "other-data"), daemon={"control_socket": None})
        assert ControlClient.find(other) is None
        same = load_settings(site.config, daemon={"control_socket": None})
        client = ControlClient.find(same)
        assert client is not None and client.path == site.socket
        assert client.owner() == os.path.realpath(site.base / "data")
        client.close()
        named = load_settings(site.config, data_dir=str(site.base / "other-data"))
        with pytest.raises(ControlError, match=r"daemon\.control_socket: .* is served by the ancre whose data_dir is .*/data, not "):
            ControlClient.find(named)
    finally:
        d.stop()
