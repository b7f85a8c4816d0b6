"""The systemd pair without systemd (issue 45, point 3): ``ancre daemon`` owns the index and
``ancre api --via-daemon`` — the unit ``systemd/ancre-api.service`` runs — answers Open WebUI's
questions through the daemon's control socket, in a process of its own that never opens the
index.

Checked with both as real subprocesses over the bundled corpus (scripted Ollama on 127.0.0.1
for the embeddings, the answering model and the judge):

- a streamed chat completion arrives in pieces as the model writes them, grounded, with its
  sources, and the audit line — written by the daemon — names the e-mail the API received and
  the account it resolved to, as ``ancre serve`` does;
- Stop (the client leaves mid-answer) stops the model in the daemon and is audited
  ``interrompue`` at once;
- without a daemon, ``ancre api --via-daemon`` stops at once with one line saying so; while the
  daemon is away the API answers 503, and answers again once it is back;
- another Unix user's ``asked_by`` is not taken (the socket's rule is unit-tested in
  tests/unit/test_control_api.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from support.corpus import copy_corpus, write_config
from support.daemon_proc import DaemonProc
from support.httpserver import Request, ScriptedServer, ndjson
from support.scripted_ollama import ANSWER_MODEL, GROUNDED, script

KEY = hashlib.sha256(b"ancre-api-via-daemon").hexdigest()
BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
QUESTION = "Quel est le forfait mensuel du contrat de maintenance de Baumont Industries ?"
ANSWER = f"Le forfait mensuel s'élève à CHF 4 200 HT [{BAUMONT}]."
UPN = "alice.martin@axonix.ch"


def _embed(req: Request) -> tuple[int, dict[str, Any]]:
    vecs = []
    for text in req.json["input"]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(64).astype(np.float32)
        vecs.append((v / np.linalg.norm(v)).tolist())
    return 200, {"model": req.json["model"], "embeddings": vecs}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Pair:
    """The daemon and the API over one configuration."""

    def __init__(self, root: Path, model: ScriptedServer) -> None:
        extra = (f'[llm]\nkind = "ollama"\nurl = "{model.url}"\n[judge]\ntimeout_s = 5\n'
                 '[api]\napi_key = { env = "T_API_KEY" }\n'
                 '[daemon]\nmetrics_port = 0\nstatus_interval_s = 0.5\n')
        self.cfg = write_config(root, extra=extra)
        text = self.cfg.read_text(encoding="utf-8").replace(
            '[embedder]\nkind = "e5-local"', f'[embedder]\nkind = "ollama"\nurl = "{model.url}"\nmodel = "m"')
        self.cfg.write_text(text, encoding="utf-8")
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("NOTIFY_SOCKET", "ANCRE_CONFIG", "RUNTIME_DIRECTORY", "WATCHDOG_USEC")}
        self.env.update(T_API_KEY=KEY, ANCRE_API__PORT=str(self.port), ANCRE_DAEMON__LOG_FORMAT="text")
        self.daemon = DaemonProc(self.cfg, env=self.env)
        self.api: subprocess.Popen[bytes] | None = None

    def start_api(self) -> subprocess.Popen[bytes]:
        exe = Path(sys.executable).with_name("ancre")
        log = open(self.cfg.parent / "api.log", "ab")  # noqa: SIM115 - the subprocess keeps it
        self.api = subprocess.Popen([str(exe), "api", "--via-daemon", "--config", str(self.cfg)], stdout=log,
                                    stderr=subprocess.STDOUT, env=self.env, cwd=self.cfg.parent)
        return self.api

    def wait_api(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.api is not None and self.api.poll() is None, self.api_log()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/health", timeout=5).status_code in (200, 503):
                    return
            time.sleep(0.2)
        raise AssertionError(f"the API did not start\n{self.api_log()}")

    def api_log(self) -> str:
        p = self.cfg.parent / "api.log"
        return p.read_text(errors="replace")[-4000:] if p.exists() else ""

    def audit(self) -> list[dict[str, Any]]:
        folder = self.cfg.parent / "data" / "audit"
        return [json.loads(x) for f in sorted(folder.glob("audit-*.jsonl")) for x in f.read_text("utf-8").splitlines()]

    def close(self) -> None:
        if self.api is not None and self.api.poll() is None:
            self.api.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.api.wait(15)
            if self.api.poll() is None:
                self.api.kill()
        self.daemon.kill()


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        srv.route("POST", "/api/embed", _embed)
        script(srv, ANSWER, GROUNDED)
        yield srv


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, model: ScriptedServer) -> Iterator[Pair]:
    p = Pair(copy_corpus(tmp_path_factory.mktemp("pair")), model)
    try:
        p.daemon.start()
        p.daemon.wait_idle(timeout=300)
        p.start_api()
        p.wait_api()
        yield p
    finally:
        p.close()


def headers(upn: str = UPN) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": upn}


def body(stream: bool) -> dict[str, Any]:
    return {"model": "ancre", "stream": stream, "messages": [{"role": "user", "content": QUESTION}]}


def test_a_streamed_answer_comes_in_pieces_through_the_daemon_and_is_audited_with_the_email(
    pair: Pair, model: ScriptedServer
) -> None:
    script(model, ANSWER, GROUNDED)
    before = len(pair.audit())
    pieces = []
    with httpx.stream("POST", f"{pair.url}/v1/chat/completions", json=body(True), headers=headers(), timeout=120) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: {"):
                event = json.loads(line[6:])
                pieces += [c["delta"].get("content") or "" for c in event.get("choices", [])]
    text = "".join(pieces)
    assert "CHF 4 200 HT" in text and len([p for p in pieces if p]) > 3, pieces  # streamed, not one block
    records = pair.audit()[before:]
    start = next(x for x in records if x["kind"] == "start")
    assert start["user"] == UPN and start["account"] == "alice", start
    assert not any(str(x.get("user", "")).startswith("unix:") for x in records)
    api = pair.api
    assert api is not None and api.poll() is None
    assert not (pair.cfg.parent / "data" / "qdrant" / "LOCK").read_text().startswith(str(api.pid))  # the daemon owns it


class SlowModel:
    """One piece every 0.1 s for a minute; ``closed`` once its client went away mid-stream."""

    def __init__(self) -> None:
        import threading

        self.closed = threading.Event()
        self.done = False

    def frames(self) -> Iterator[dict[str, Any]]:
        try:
            for i in range(600):
                yield {"model": ANSWER_MODEL, "message": {"role": "assistant", "content": f"mot{i} "}, "done": False}
                time.sleep(0.1)
            yield {"model": ANSWER_MODEL, "message": {"content": ""}, "done": True}
            self.done = True
        finally:
            if not self.done:
                self.closed.set()

    def __call__(self, req: Request) -> Any:
        return ndjson(self.frames())


def test_stop_in_open_webui_stops_the_model_in_the_daemon_and_is_audited(pair: Pair, model: ScriptedServer) -> None:
    slow = SlowModel()
    script(model, slow, GROUNDED)
    before = len(pair.audit())
    with httpx.stream("POST", f"{pair.url}/v1/chat/completions", json=body(True), headers=headers(), timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and "mot" in line:
                break  # Stop
    assert slow.closed.wait(20), "the model kept generating in the daemon for a client that had left"
    deadline = time.monotonic() + 20
    outcome = None
    while time.monotonic() < deadline and outcome is None:
        outcome = next((x for x in pair.audit()[before:] if x["kind"] == "outcome"), None)
        time.sleep(0.1)
    assert outcome is not None and outcome["error"] == "interrompue", outcome
    script(model, ANSWER, GROUNDED)


def test_the_api_answers_503_while_the_daemon_is_away_and_again_once_it_is_back(pair: Pair) -> None:
    rc, _ = pair.daemon.stop(timeout=30)
    assert rc == 0
    r = httpx.post(f"{pair.url}/v1/chat/completions", json=body(False), headers=headers(), timeout=60)
    assert r.status_code == 503 and r.json()["error"]["code"] == "service_unavailable", r.text
    assert pair.api is not None and pair.api.poll() is None  # the API waits, it does not die
    health = httpx.get(f"{pair.url}/health", timeout=30)
    assert health.status_code == 503
    away = {k: c for k, c in health.json()["checks"].items() if c["status"] == "error"}
    assert away and all(c["detail"].startswith("the daemon does not answer on its control socket") for c in away.values()), away
    pair.daemon = DaemonProc(pair.cfg, env=pair.env).start()
    pair.daemon.wait_idle(timeout=300)
    r = httpx.post(f"{pair.url}/v1/chat/completions", json=body(False), headers=headers(), timeout=120)
    assert r.status_code == 200 and "CHF 4 200 HT" in r.text, r.text


def test_without_a_daemon_the_api_via_daemon_stops_with_one_line(tmp_path: Path, model: ScriptedServer) -> None:
    p = Pair(copy_corpus(tmp_path / "c"), model)
    exe = Path(sys.executable).with_name("ancre")
    res = subprocess.run([str(exe), "api", "--via-daemon", "--config", str(p.cfg)], env=p.env, capture_output=True,
                         text=True, timeout=60, check=False)
    out = " ".join(res.stderr.split())
    assert res.returncode == 2 and out.startswith("error: no ancre daemon answers on its control socket"), out
    assert "systemctl start ancre" in out and "Traceback" not in out
