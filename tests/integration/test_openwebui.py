"""Issue 15 end to end: a real Open WebUI (0.12, from PyPI, in its own cached environment)
started offline on 127.0.0.1 in front of a real ``ancre serve`` over the bundled Axonix corpus.

An admin and two users are created through Open WebUI's HTTP API; the ``ancre`` model is made
visible to users (Open WebUI hides a connection's models from non-admins until an admin grants
access); the users ask through Open WebUI's own chat endpoint, streamed and not. Open WebUI
forwards each user as a signed JWT (``FORWARD_USER_INFO_HEADER_JWT_SECRET``), which ancre verifies
(``api.user_jwt_secret_env``), and sends its side requests (title, tags, follow-ups) with the task
header ancre recognises. Debian's Chromium (installed as root by ``.ci/setup-test-deps.sh``)
renders each user's answer: the screenshots are kept in the folder the test prints, and the DOM
must hold the table and the Sources block.

Skips only when not root or when PyPI cannot be reached to install Open WebUI the first time.
The first run installs Open WebUI (minutes, printed); later runs reuse the cached environment.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import openwebui
from support.corpus import copy_corpus, write_config

from ancre.api.tasks import short_title
from ancre.query.prompt import REFUSAL

pytestmark = pytest.mark.slow

KEY = "e2e-service-key-0123456789"
JWT_SECRET = "e2e-openwebui-jwt-secret-0123456789abcdef"
PASSWORD = "Axonix-e2e-2026!"
USERS = {"alice": ("Alice Martin", "alice.martin@axonix.ch"), "bruno": ("Bruno Favre", "bruno.favre@axonix.ch")}
Q_ROCHAT = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"
ROCHAT_FEE = "CHF 3 840 HT"
SIDE_TASKS = ("title_generation", "tags_generation", "follow_up_generation")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ancre(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("ancre")
    return [str(exe), *args] if exe.exists() else [sys.executable, "-c", "from ancre.app.cli import main; main()", *args]


@dataclass
class Stack:
    owui: openwebui.OpenWebUI
    venv: Path
    ancre_url: str
    audit_dir: Path
    artifacts: Path
    models_before_public: list[str]
    chats: dict[str, str] = field(default_factory=dict)

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(line) for f in sorted(self.audit_dir.glob("audit-*.jsonl"))
                for line in f.read_text("utf-8").splitlines() if line.strip()]

    def tasks_answered(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for line in httpx.get(f"{self.ancre_url}/metrics").text.splitlines():
            if line.startswith("ancre_api_tasks_total{"):
                task = line.split('task="', 1)[1].split('"', 1)[0]
                out[task] = float(line.rsplit(" ", 1)[1])
        return out


def _report(config: pytest.Config, line: str) -> None:
    """Print ``line`` on the terminal now, past pytest's output capture."""
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    if reporter is None:
        return
    if capture is None:
        reporter.write_line(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if os.geteuid() != 0:
        pytest.skip("the Open WebUI end-to-end test runs as root (like `make test`): Debian's Chromium is "
                    "installed by .ci/setup-test-deps.sh")
    t0 = time.monotonic()
    try:
        venv = openwebui.ensure_installed(lambda line: _report(request.config, f"\n{line}"))
    except openwebui.Unavailable as e:
        pytest.skip(str(e))
    tmp = tmp_path_factory.mktemp("openwebui")
    corpus = copy_corpus(tmp / "corpus")
    ancre_port, owui_port = _free_port(), _free_port()
    config = write_config(corpus, extra=(
        f'[api]\nport = {ancre_port}\napi_key_env = "E2E_ANCRE_KEY"\nuser_jwt_secret_env = "E2E_OWUI_JWT"\n'
        '[daemon]\nlog_format = "text"\nstatus_interval_s = 0.5\n'))
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "ANCRE_CONFIG", "WATCHDOG_USEC")}
    env.update(E2E_ANCRE_KEY=KEY, E2E_OWUI_JWT=JWT_SECRET)
    ancre_log = tmp / "ancre.log"
    with open(ancre_log, "wb") as out:
        ancre = subprocess.Popen(_ancre("serve", "--config", str(config)), stdout=out, stderr=subprocess.STDOUT,
                                 env=env, cwd=corpus)
    ancre_url = f"http://127.0.0.1:{ancre_port}"
    owui: openwebui.OpenWebUI | None = None
    try:
        # Open WebUI starts while ancre syncs the corpus
        owui = openwebui.start(venv, openwebui.offline_env(tmp / "owui-data", owui_port, ancre_url, KEY, JWT_SECRET),
                               tmp, owui_port)
        status_file = corpus / "data" / "daemon-status.json"

        def ready() -> bool:  # first sync done, BM25 published, API up
            status = json.loads(status_file.read_text("utf-8"))
            return bool(status["passes"].get("startup") and status["idle"]
                        and httpx.get(f"{ancre_url}/health", timeout=5).status_code == 200)

        deadline = time.monotonic() + 900
        while True:
            try:
                if ready():
                    break
            except (OSError, ValueError, KeyError, httpx.HTTPError):
                pass
            assert ancre.poll() is None, ancre_log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "ancre did not become ready\n" + ancre_log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)

        # the admin does what README.md says, in that order, through Open WebUI's HTTP API
        admin = owui.ok("POST", "/api/v1/auths/signup",
                        json_body={"name": "Admin Axonix", "email": "admin@axonix.ch", "password": PASSWORD})
        assert admin["role"] == "admin"  # the first account
        for name, email in USERS.values():
            added = owui.ok("POST", "/api/v1/auths/add", admin["token"],
                            {"name": name, "email": email, "password": PASSWORD, "role": "user"})
            assert added["role"] == "user"
        for user, (_, email) in USERS.items():
            owui.tokens[user] = owui.ok("POST", "/api/v1/auths/signin", json_body={"email": email, "password": PASSWORD})["token"]
        before = [m["id"] for m in owui.ok("GET", "/api/models", owui.tokens["alice"])["data"]]
        owui.ok("POST", "/api/v1/models/model/access/update", admin["token"],
                {"id": "ancre", "name": "ancre", "access_grants": openwebui.PUBLIC_READ})
        artifacts = Path(os.environ.get("ANCRE_TEST_ARTIFACTS") or openwebui.cache_root() / "artifacts") / "openwebui"
        artifacts.mkdir(parents=True, exist_ok=True)
        yield Stack(owui, venv, ancre_url, corpus / "data" / "audit", artifacts, before)
    finally:
        if owui is not None:
            owui.stop()
        ancre.terminate()
        try:
            ancre.wait(timeout=20)
        except subprocess.TimeoutExpired:
            ancre.kill()
            ancre.wait()
        _report(request.config, f"\nOpen WebUI end-to-end test: {time.monotonic() - t0:.0f} s in all")


def _ask(stack: Stack, user: str, stream: bool) -> str:
    """One question through Open WebUI's chat endpoint, as an API client calls it (no saved chat)."""
    body = {"model": "ancre", "stream": stream, "messages": [{"role": "user", "content": Q_ROCHAT}]}
    r = stack.owui.call("POST", "/api/chat/completions", stack.owui.tokens[user], body)
    assert r.status_code == 200, f"{r.status_code} {r.text[:500]}\n{stack.owui.tail()}"
    if not stream:
        return str(r.json()["choices"][0]["message"]["content"])
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [e[6:] for e in r.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return "".join((json.loads(e)["choices"] or [{}])[0].get("delta", {}).get("content") or ""
                   for e in events[:-1] if '"choices"' in e)


def _chat(stack: Stack, user: str) -> str:
    """One question in a new saved chat, as Open WebUI's web page sends it (with the title, tags
    and follow-ups it then generates); returns the chat id."""
    user_message = {"id": str(uuid.uuid4()), "parentId": None, "childrenIds": [], "role": "user",
                    "content": Q_ROCHAT, "timestamp": int(time.time())}
    body = {"model": "ancre", "stream": False, "messages": [{"role": "user", "content": Q_ROCHAT}],
            "parent_id": None, "id": str(uuid.uuid4()), "user_message": user_message,
            "background_tasks": {t: True for t in SIDE_TASKS}}
    r = stack.owui.call("POST", "/api/chat/completions", stack.owui.tokens[user], body)
    assert r.status_code == 200, f"{r.status_code} {r.text[:500]}\n{stack.owui.tail()}"
    chats = stack.owui.ok("GET", "/api/v1/chats/", stack.owui.tokens[user])
    chat_id = str(chats[0]["id"])
    stack.chats[user] = chat_id
    return chat_id


def test_ancre_is_hidden_from_users_until_made_public(stack: Stack) -> None:
    assert stack.models_before_public == []
    assert [m["id"] for m in stack.owui.ok("GET", "/api/models", stack.owui.tokens["bruno"])["data"]] == ["ancre"]


@pytest.mark.parametrize("stream", [False, True], ids=["non-streamed", "streamed"])
def test_each_user_gets_their_own_answer_through_open_webui(stack: Stack, stream: bool) -> None:
    before = len(stack.audit())
    alice = _ask(stack, "alice", stream)
    assert ROCHAT_FEE in alice and "03_Contrat_Maintenance_Etude_Rochat.docx" in alice, alice
    assert "| Poste | Montant |" in alice and "> 4\\. Conditions financières" in alice, alice
    assert "**Sources :**\n- 03_Contrat_Maintenance_Etude_Rochat.docx — `\\\\SRV-FICHIERS\\Partage\\DIRECTION\\`" in alice
    bruno = _ask(stack, "bruno", stream)
    assert bruno.strip() == REFUSAL and "Sources" not in bruno and ROCHAT_FEE not in bruno
    # the identity ancre audited is the one Open WebUI signed in its JWT; the plain header is refused
    records = stack.audit()[before:]
    plain = httpx.post(f"{stack.ancre_url}/v1/chat/completions", timeout=60,
                       json={"model": "ancre", "messages": [{"role": "user", "content": Q_ROCHAT}]},
                       headers={"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": USERS["alice"][1]})
    assert plain.status_code == 401 and plain.json()["error"]["code"] == "plain_identity_refused"
    assert [(r["user"], r["question"]) for r in records] == [
        ("alice.martin@axonix.ch", Q_ROCHAT), ("bruno.favre@axonix.ch", Q_ROCHAT)]


def test_one_question_leaves_one_question_record(stack: Stack) -> None:
    """Open WebUI's title, tags and follow-ups requests reach ancre, are answered as tasks, and
    leave no audit record: one question, one record."""
    before, tasks_before = len(stack.audit()), stack.tasks_answered()
    chat_id = _chat(stack, "alice")
    deadline = time.monotonic() + 120
    while not all(stack.tasks_answered().get(t, 0) > tasks_before.get(t, 0) for t in SIDE_TASKS):
        assert time.monotonic() < deadline, f"side requests not seen: {stack.tasks_answered()}\n{stack.owui.tail()}"
        time.sleep(0.5)
    time.sleep(1)  # anything else Open WebUI would still send
    records = stack.audit()[before:]
    assert [(r["user"], r["question"]) for r in records] == [("alice.martin@axonix.ch", Q_ROCHAT)]
    chat = stack.owui.ok("GET", f"/api/v1/chats/{chat_id}", stack.owui.tokens["alice"])
    assert chat["title"] == short_title(Q_ROCHAT)  # the title ancre gave, not Open WebUI's fallback
    assert "pas dans les documents" not in json.dumps(chat["chat"], ensure_ascii=False)  # no refused side request
    _chat(stack, "bruno")
    assert len(stack.audit()) == before + 2


def test_the_answer_renders_in_the_browser(stack: Stack, pytestconfig: pytest.Config) -> None:
    """Debian's Chromium opens each user's chat in Open WebUI: screenshots kept as artefacts;
    alice's answer shows the table and the Sources list, bruno's the refusal."""
    assert openwebui.CHROMIUM.exists(), "Debian's chromium is missing: run .ci/setup-test-deps.sh as root"
    for user in USERS:
        if user not in stack.chats:
            _chat(stack, user)
    alice = openwebui.browse(stack.venv, stack.owui.url, stack.owui.tokens["alice"], stack.chats["alice"],
                             stack.artifacts / "alice.png", "Sources")
    bruno = openwebui.browse(stack.venv, stack.owui.url, stack.owui.tokens["bruno"], stack.chats["bruno"],
                             stack.artifacts / "bruno.png", REFUSAL)
    _report(pytestconfig, f"\nOpen WebUI screenshots: {stack.artifacts}")
    assert alice["table"] and [c.casefold() for c in alice["header_cells"]] == ["poste", "montant"]
    assert alice["sources"] and alice["source_items"][0].startswith("03_Contrat_Maintenance_Etude_Rochat.docx")
    assert alice["ordered_lists"] == 0 and "4. Conditions financières" in alice["text"]
    assert REFUSAL in bruno["text"] and not bruno["table"] and not bruno["sources"]
    assert (stack.artifacts / "alice.png").stat().st_size > 10_000
