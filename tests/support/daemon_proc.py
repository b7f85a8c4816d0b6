"""Run ``ancre daemon`` as a subprocess on a temporary folder source and look inside it through
its status file and its local control socket (the embedded store has one owner, so nothing else
may open it while the daemon runs). Shared by ``tests/integration/test_daemon.py`` and
``tests/bench/bench_daemon.py``."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.corpus import CORPUS

USER = "alice"
EVERYONE = "sid:S-1-1-0"
_LETTERS = "bcdfghjklmnpqrstvwxz"


def token(i: int, prefix: str = "vorx") -> str:
    """A made-up word that appears in one file only: ``token(12)`` → ``"vorxbbcd"``."""
    return prefix + "".join(_LETTERS[int(c)] for c in f"{i:04d}")


def write_daemon_config(
    dest: Path, *, root: str = "tree", daemon: dict[str, Any] | None = None, source: str = "",
    embedder: str = 'kind = "e5-local"',
) -> Path:
    """An ``ancre.toml`` in ``dest``: one folder source ``t`` at ``dest/root`` readable by Everyone,
    e5-local, edge store, the corpus directory, and a ``[daemon]`` section (metrics port picked
    freely, short debounce; the control socket at ``<data_dir>/run/control.sock``) updated with
    ``daemon`` (a ``None`` value removes the key); ``embedder``: the ``[embedder]`` section's body."""
    shutil.copy2(CORPUS / "directory.json", dest / "directory.json")
    opts: dict[str, Any] = {"metrics_port": 0, "debounce_s": 0.5, "status_interval_s": 1.0}
    opts.update(daemon or {})
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in opts.items() if v is not None)
    cfg = dest / "ancre.toml"
    cfg.write_text(
        f'''data_dir = "data"
[embedder]
{embedder}
[store]
kind = "edge"
[directory]
kind = "file"
path = "directory.json"
cache_ttl_s = 0
[daemon]
{lines}
[[sources]]
id = "t"
root = "{root}"
principals = ["{EVERYONE}"]
{source}
''',
        encoding="utf-8",
    )
    return cfg


class NotifyListener:
    """A fake systemd notification socket (abstract namespace) collecting datagrams."""

    def __init__(self) -> None:
        self.name = f"@ancre-test-{os.getpid()}-{time.monotonic_ns()}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.sock.settimeout(0.2)
        self.messages: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue
            except OSError:
                return

    def fields(self) -> list[str]:
        """Every ``KEY=VALUE`` line received so far."""
        return [line for m in list(self.messages) for line in m.split("\n")]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class DaemonProc:
    """``ancre daemon --config <config>`` in a subprocess; logs go to ``<data>/../daemon-<n>.log``."""

    def __init__(self, config: Path, *, env: dict[str, str] | None = None) -> None:
        self.config = config
        self.base = config.parent
        self.status_file = self.base / "data" / "daemon-status.json"
        self.env = dict(os.environ)
        for inherited in (
            "ANCRE_TEST_CRASH_AT", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "ANCRE_CONFIG", "RUNTIME_DIRECTORY",
        ):
            self.env.pop(inherited, None)
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    # ---------------------------------------------------------------------------- process
    def start(self) -> DaemonProc:
        n = len(list(self.base.glob("daemon-*.log")))
        self.log_path = self.base / f"daemon-{n}.log"
        exe = Path(sys.executable).with_name("ancre")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from ancre.app.cli import main; main()"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*cmd, "daemon", "--config", str(self.config)], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                cwd=self.base,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float) -> int:
        """Wait for the process to end; its return code (``-9`` after SIGKILL)."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 10.0) -> tuple[int, float]:
        """SIGTERM, then wait at most ``timeout`` s; ``(returncode, seconds)``. Raises
        ``subprocess.TimeoutExpired`` (after killing it) when it did not exit in time."""
        assert self.proc is not None
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        return rc, time.monotonic() - t0

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    # ----------------------------------------------------------------------------- looking in
    def status(self) -> dict[str, Any] | None:
        """This process's last status (``None`` before it wrote one)."""
        try:
            st = json.loads(self.status_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return st if st.get("pid") == self.pid else None

    def wait_for(self, pred: Callable[[], Any], what: str, timeout: float = 30.0, every: float = 0.05) -> Any:
        """Poll ``pred`` until it returns something truthy (returned); ``AssertionError`` naming
        ``what`` (with the log tail) after ``timeout`` s or if the daemon died."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = pred()
            except (OSError, ValueError):
                value = None
            if value:
                return value
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited ({self.proc.returncode}) waiting for {what}\n{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{self.log_text()[-4000:]}")
            time.sleep(every)

    def wait_idle(self, timeout: float = 60.0, startup: bool = True) -> dict[str, Any]:
        """Wait until the startup pass is done (``startup``), nothing is queued or running and
        the BM25 index is clean; returns the status."""

        def ok() -> dict[str, Any] | None:
            st = self.status()
            if not st or st["state"] != "running" or not st["idle"] or st["bm25_dirty"]:
                return None
            if startup and not st["passes"].get("startup"):
                return None
            return st

        return self.wait_for(ok, "the daemon to be idle", timeout)

    def control(self) -> Any:
        """A :class:`~ancre.query.remote.ControlClient` on the daemon's control socket (``OSError``
        before it is served)."""
        from ancre.query.remote import ControlClient

        st = self.status()
        if not st or not st.get("control_socket"):
            raise OSError("no control socket yet")
        return ControlClient(Path(st["control_socket"]), timeout_s=30)

    def _get(self, path: str) -> Any:
        with self.control() as c:
            return c.get(path)

    def search(self, q: str, user: str = USER, limit: int = 50) -> list[dict[str, Any]]:
        """Hits of the control socket's ``/v1/search`` (``path``, ``found_by``, ...)."""
        with self.control() as c:
            return list(c.post("/v1/search", {"question": q, "user": user, "limit": limit})["hits"])

    def bm25_paths(self, q: str) -> set[str]:
        """Paths that the keyword side of the search finds for ``q`` (i.e. searchable)."""
        return {r["path"] for r in self.search(q) if "bm25" in r["found_by"]}

    def all_paths(self, q: str) -> set[str]:
        return {r["path"] for r in self.search(q)}

    def state_rows(self) -> dict[str, tuple[str, int]]:
        """``{path: (status, chunk_count)}`` of the state DB, read now (read-only; WAL lets a
        reader in while the daemon writes)."""
        uri = f"file:{self.base / 'data' / 'state.sqlite3'}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as db:
            return {p: (s, n) for p, s, n in db.execute("SELECT path, status, chunk_count FROM items")}

    def store_documents(self) -> tuple[set[str], int]:
        """``(paths, chunks)`` the daemon's store holds now, read whole by the owner (the exposure
        report scans every chunk; the test sources grant Everyone, so every document is listed)."""
        with self.control() as c:
            rep = c.post("/v1/report/exposure", {"explain": False})
        return {d["path"] for f in rep["folders"] for d in f["documents"]}, int(rep["chunks"])

    def wait_applied(self, expected: set[str], what: str, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the daemon has applied what happened to its tree: idle (asked now through the
        control socket, never the status file, which may predate the event), the state DB's rows
        exactly ``expected``, all indexed, and the store holding exactly those documents with as
        many chunks as the state DB says. Returns the daemon status of that moment."""

        def agreed() -> dict[str, Any] | None:
            with self.control() as c:
                st = c.get("/v1/status")["daemon"]
            if not st or not st["idle"] or st["bm25_dirty"]:
                return None
            rows = self.state_rows()
            if set(rows) != expected or any(status != "indexed" for status, _ in rows.values()):
                return None
            paths, chunks = self.store_documents()
            return st if paths == expected and chunks == sum(n for _, n in rows.values()) else None

        return self.wait_for(agreed, f"state DB and store to agree after {what}", timeout)

    def metrics(self) -> str:
        st = self.status()
        assert st and st.get("metrics_port")
        with urllib.request.urlopen(f"http://127.0.0.1:{st['metrics_port']}/metrics", timeout=10) as r:
            return r.read().decode()


def folder_truth(root: Path, ignore: tuple[str, ...]) -> dict[str, str]:
    """``{relative path: sha256}`` of the files under ``root`` that ancre should index."""
    from ancre.connectors.folder import is_ignored

    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not is_ignored(p.name, ignore):
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def index_truth(config: Path) -> tuple[dict[str, str], dict[str, int], int, list[Any]]:
    """Open the (stopped) daemon's index in-process: ``({path: content_hash} from the store's
    points, {path: number of points}, number of chunks the keyword side answers for — the store's text index when it is ready, else
    the current BM25 snapshot —, state rows)``."""
    from ancre.app.runtime import Runtime
    from ancre.config import load_settings
    from ancre.index.store import KeywordStore
    from ancre.models import COLLECTIONS

    settings = load_settings(config)
    with Runtime(settings) as rt:
        hashes: dict[str, str] = {}
        counts: dict[str, int] = {}
        for coll in COLLECTIONS:
            for p in rt.store.scroll(coll):
                hashes[p.payload.path] = p.payload.content_hash
                counts[p.payload.path] = counts.get(p.payload.path, 0) + 1
        store = rt.store
        # BM25 in the store's own text index: every point it holds is searchable by keywords
        keywords_in_store = isinstance(store, KeywordStore) and store.keywords_ready
        bm25_len = sum(counts.values()) if keywords_in_store else len(rt.bm25.get())
        rows = rt.state.all_items()
    return hashes, counts, bm25_len, rows
