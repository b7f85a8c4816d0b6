"""A revocation never waits behind embedding.

The daemon runs in process (as under ``ancre serve``) on a folder source with an ACL manifest;
its embedder is an Ollama-compatible server on 127.0.0.1 that holds every request for a
"backlog" text until the test lets it go — a content backlog that cannot drain by itself. A
manifest edit revoking a group's right must take effect while the backlog is still waiting;
once the backlog is let go, what it writes carries the new rights too."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import numpy as np
from support.httpserver import Request, ScriptedServer
from support.rights_tree import write_acl, write_config, write_directory

from ancre.app.daemon import make_daemon
from ancre.app.runtime import Runtime
from ancre.config import load_settings

DIM = 16
OPEN = {"OUVERT": {"aces": [["ALLOW", "G_TOUS", "READ", "OI|CI"]]}, "RH": {"aces": [["ALLOW", "G_RH", "READ", "OI|CI"]]}}
REVOKED = {"OUVERT": {"aces": [["ALLOW", "G_RH", "READ", "OI|CI"]]}, "RH": {"aces": [["ALLOW", "G_RH", "READ", "OI|CI"]]}}
BACKLOG = 40


def _vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(size=DIM).tolist()


class GatedEmbedder:
    """``POST /api/embed``: answers at once, except a request holding a backlog text, which
    waits for :attr:`release` (set :attr:`blocked` first)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.blocked = threading.Event()

    def __call__(self, req: Request):  # type: ignore[no-untyped-def]
        texts = req.json["input"]
        if any("arriéré" in t for t in texts):
            self.blocked.set()
            self.release.wait(120)
        return 200, {"model": req.json["model"], "embeddings": [_vector(t) for t in texts]}


def _wait(pred, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_revocation_goes_ahead_of_an_embedding_backlog(tmp_path: Path) -> None:
    share = tmp_path / "share"
    for d in ("OUVERT", "RH", "ARRIERE"):
        (share / d).mkdir(parents=True)
    (share / "OUVERT" / "cible.txt").write_text("plan de restructuration zorblax", encoding="utf-8")
    (share / "OUVERT" / "modifie.txt").write_text("budget provisoire quimbrel", encoding="utf-8")
    write_directory(tmp_path)
    write_acl(tmp_path, {**OPEN, "ARRIERE": {"aces": [["ALLOW", "G_TOUS", "READ", "OI|CI"]]}})
    gate = GatedEmbedder()
    with ScriptedServer() as srv:
        srv.route("POST", "/api/embed", gate)
        cfg = write_config(
            tmp_path,
            extra=f'[embedder]\nkind = "ollama"\nurl = "{srv.url}"\ndim = {DIM}\n'
            '[daemon]\ndebounce_s = 0.2\nreconcile_interval_s = 0\nacl_sweep_interval_s = 0\n',
        )
        rt = Runtime(load_settings(cfg))
        try:
            rep = rt.engine.run_pass(rt.connectors()[0])
            assert rep.outcome == "ok" and rep.new == 2, rep

            def readable(user: str) -> set[str]:
                res = rt.retriever.retrieve("plan de restructuration budget", rt.directory.principals(user), limit=50)
                return {r.path for r in res.results}

            assert {"OUVERT/cible.txt", "OUVERT/modifie.txt"} <= readable("staff")

            # a content backlog that can't drain, and a changed file stuck in it
            for i in range(BACKLOG):
                (share / "ARRIERE" / f"a{i:03d}.txt").write_text(f"document en arriéré numéro {i}", encoding="utf-8")
            (share / "OUVERT" / "modifie.txt").write_text("budget définitif quimbrel, arriéré", encoding="utf-8")
            daemon = make_daemon(rt)
            daemon.start()
            try:
                _wait(gate.blocked.is_set, "the worker to be held embedding the backlog")

                write_acl(tmp_path, {**REVOKED, "ARRIERE": {"aces": [["ALLOW", "G_TOUS", "READ", "OI|CI"]]}})
                _wait(lambda: not ({"OUVERT/cible.txt", "OUVERT/modifie.txt"} & readable("staff")), "the revocation")
                # ... while the backlog has not been embedded: the revocation went first
                assert not gate.release.is_set()
                rows = {r.path: r.status for r in rt.state.all_items()}
                assert sum(1 for p, s in rows.items() if p.startswith("ARRIERE/") and s == "indexed") < BACKLOG
                assert "OUVERT/cible.txt" in readable("rh")

                gate.release.set()
                _wait(lambda: daemon.status()["idle"], "the backlog to drain", timeout=120)
                rows = {r.path: r.status for r in rt.state.all_items()}
                assert all(rows.get(f"ARRIERE/a{i:03d}.txt") == "indexed" for i in range(BACKLOG)), rows
                # what the backlog wrote after the revocation carries the new rights
                assert not ({"OUVERT/cible.txt", "OUVERT/modifie.txt"} & readable("staff"))
                texts = {p.payload.path: p.payload.text for p in rt.store.scroll("documents")}
                assert "définitif" in texts["OUVERT/modifie.txt"]
                assert "OUVERT/modifie.txt" in readable("rh")
                assert daemon.status()["passes"].get("acl_manifest", 0) >= 1
            finally:
                gate.release.set()
                daemon.stop()
        finally:
            rt.close()
