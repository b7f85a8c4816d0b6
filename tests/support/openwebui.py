"""A real Open WebUI for the end-to-end test: installed once in its own cached virtual
environment, started offline on 127.0.0.1, driven through its HTTP API.

The environment lives in ``~/.cache/ancre-tests/openwebui-<key>`` (``ANCRE_TEST_CACHE`` moves
the parent), keyed by the pinned requirements, and is reused by later runs (a ``.complete``
marker is written only after a whole install; an interrupted one is started again). torch is
installed first, pinned: Open WebUI pulls it through sentence-transformers, and pip would
otherwise pick a multi-GB CUDA build (this machine's pip finds a CPU build on local disk).
Playwright (its Python driver only: the browser is Debian's Chromium) drives Open WebUI's screens
(:mod:`support.owui_browser`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

OPENWEBUI = "open-webui>=0.12.0,<0.13"
"""The versions whose forwarded JWT, task header, source events and model access the test relies
on; the screens the test drives are 0.12.4's (what this range installed; the string is also the
cache key of the environment, so changing it reinstalls)."""
REQUIREMENTS = ("torch==2.13.0", OPENWEBUI, "playwright>=1.50,<2")
"""Installed in this order (torch first: see the module doc)."""
CHROMIUM = Path("/usr/bin/chromium")
BROWSER_SCRIPT = Path(__file__).with_name("owui_browser.py")
PUBLIC_READ = [{"principal_type": "user", "principal_id": "*", "permission": "read"}]
"""Open WebUI's access grant that makes a model visible to every user."""


class Unavailable(Exception):
    """Open WebUI cannot be installed here (no network to PyPI): the test skips with this reason."""


def cache_root() -> Path:
    return Path(os.environ.get("ANCRE_TEST_CACHE") or Path.home() / ".cache" / "ancre-tests")


def venv_dir() -> Path:
    key = hashlib.sha256("\n".join(REQUIREMENTS).encode()).hexdigest()[:10]
    return cache_root() / f"openwebui-{key}"


def _pip(venv: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args], check=False, capture_output=True, text=True,
                          timeout=timeout)


def ensure_installed(log: Callable[[str], None]) -> Path:
    """The cached environment, installed if needed (minutes; the time is reported through
    ``log``). Raises :class:`Unavailable` when PyPI cannot be reached, ``RuntimeError`` when the
    install itself fails."""
    venv = venv_dir()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one install at a time across test processes
        if (venv / ".complete").exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        probe = _pip(venv, "index", "versions", "open-webui", timeout=120)
        if probe.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise Unavailable(f"Open WebUI cannot be installed: PyPI is not reachable ({probe.stderr.strip()[-300:]})")
        for req in REQUIREMENTS:
            r = _pip(venv, "install", "-q", req, timeout=3600)
            if r.returncode != 0:
                raise RuntimeError(f"pip install {req} failed:\n{r.stderr[-3000:]}")
        (venv / ".complete").write_text(json.dumps({"requirements": REQUIREMENTS, "seconds": time.monotonic() - t0}))
        log(f"Open WebUI installed in {venv} in {time.monotonic() - t0:.0f} s")
        return venv


def offline_env(data_dir: Path, port: int, jwt_secret: str) -> dict[str, str]:
    """Open WebUI's environment: offline (nothing downloaded: no embedding, reranking or speech
    model, no update check, no telemetry, no Ollama), and README.md "Open WebUI" step 1 — the
    user forwarded as a JWT signed with ``jwt_secret``. No connection: the admin adds ancre's in
    the screens (step 2), next to the default OpenAI one he then removes."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    return {
        **keep,
        "DATA_DIR": str(data_dir),
        "PORT": str(port),
        "WEBUI_SECRET_KEY": "ancre-e2e-session-secret",
        "OFFLINE_MODE": "true",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAG_EMBEDDING_ENGINE": "openai",
        "BYPASS_EMBEDDING_AND_RETRIEVAL": "true",
        "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "false",
        "RAG_RERANKING_MODEL_AUTO_UPDATE": "false",
        "WHISPER_MODEL_AUTO_UPDATE": "false",
        "ENABLE_OLLAMA_API": "false",
        # README step 1
        "ENABLE_FORWARD_USER_INFO_HEADERS": "true",
        "FORWARD_USER_INFO_HEADER_JWT_SECRET": jwt_secret,
        "ENABLE_SIGNUP": "true",
        "DEFAULT_USER_ROLE": "user",
        "ENABLE_WEB_SEARCH": "false",
        "ENABLE_CODE_INTERPRETER": "false",
        "ENABLE_IMAGE_GENERATION": "false",
        "ENABLE_VERSION_UPDATE_CHECK": "false",
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
        "ANONYMIZED_TELEMETRY": "false",
    }


@dataclass
class OpenWebUI:
    """A running Open WebUI at ``url`` (its process, its log) and the tokens of its users."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def call(self, method: str, path: str, token: str | None = None, json_body: Any = None,
             timeout: float = 120) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, f"{self.url}{path}", json=json_body, headers=headers, timeout=timeout)

    def ok(self, method: str, path: str, token: str | None = None, json_body: Any = None) -> Any:
        r = self.call(method, path, token, json_body)
        assert r.status_code == 200, f"{method} {path}: {r.status_code} {r.text[:500]}\n{self.tail()}"
        return r.json()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session, started by us
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start(venv: Path, env: Mapping[str, str], workdir: Path, port: int, timeout: float = 300) -> OpenWebUI:
    """``open-webui serve`` on 127.0.0.1:``port``, waited for until ``/health`` answers."""
    log = workdir / "open-webui.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=dict(env), cwd=workdir,
                                start_new_session=True)
    owui = OpenWebUI(f"http://127.0.0.1:{port}", proc, log)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{owui.url}/health", timeout=5).status_code == 200:
                return owui
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            owui.stop()
            raise AssertionError(f"Open WebUI did not start (exit {proc.poll()}):\n{owui.tail()}")
        time.sleep(0.5)


def browser(venv: Path, spec: dict[str, Any], timeout: float = 420) -> dict[str, Any]:
    """Run one action of :mod:`support.owui_browser` (Open WebUI's screens in headless Chromium)
    with ``spec``; returns its result. Raises ``AssertionError`` with the script's error output."""
    r = subprocess.run([str(venv / "bin" / "python"), str(BROWSER_SCRIPT), json.dumps(spec)],
                       check=False, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"browser {spec.get('action')} failed:\n{r.stderr[-4000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
