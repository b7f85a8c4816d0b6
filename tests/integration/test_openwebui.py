"""Open WebUI as its users expect it, end to end: a real Open WebUI 0.12.4 (from
PyPI, in its own cached environment) started offline on 127.0.0.1 in front of a real
``ancre serve`` over the bundled Axonix corpus, set up and used through its own screens in
Debian's Chromium (installed as root by ``.ci/setup-test-deps.sh``).

The fixture is a newcomer's run of README.md "Open WebUI", step by step, nothing else known:

0. the bundled ``examples/axonix/ancre.toml`` (copied with its corpus) with ``user_jwt_secret``
   uncommented under ``[api]``, both secrets from ``openssl rand -hex 32``; ``ancre check`` then
   prints the ``api`` line (JWT secret, 64 bytes, its sha256 fingerprint — the same as the shell's
   ``sha256sum``), and ``ancre serve`` logs the identity at start-up;
1. Open WebUI's environment: ``ENABLE_FORWARD_USER_INFO_HEADERS=true`` and
   ``FORWARD_USER_INFO_HEADER_JWT_SECRET`` (plus the switches that keep it offline);
   the first account, created on « Get started », is the admin;
2. Settings → Admin · Connections → « + » on « Manage OpenAI API Connections »: URL, Bearer key,
   « Advanced » → Headers ``{"X-OpenWebUI-Task": "{{TASK}}"}``, Save; the default
   ``https://api.openai.com/v1`` connection's gear → Delete → « Confirm your action » Delete; Save
   (then Open WebUI's own config must hold exactly that one connection);
3. Settings → Admin · Models → ``ancre`` → Access → Public (until then a user sees no model);
   its Capabilities are switched off in ``test_capabilities_off_leave_ancre_its_own_documents``,
   *after* the attachment test — which shows what ancre does when an admin left them on;
4. Settings → Admin · Interface: the Task Model left on « Current Model ».

What the newcomer run found missing in README.md was added to it: how the admin account is made,
the confirmation when deleting the default connection, that File Context disappears with File
Upload, the release notes to close at first sign-in, that a user's Open WebUI e-mail must be his
UPN.

Users are then added (what Admin Panel → Users → Add User calls) and ask in Chromium: each
answer's native source chips (``source`` events), the inline ``[n]``, the source panel with the
passages and the UNC folder, the same after a reload and in the chat's stored messages; an
attachment; an account unknown to the directory; then, ancre restarted with a model (a scripted
Ollama on 127.0.0.1 answering as the model, the judge and the condense prompt), citations
numbered in chip order, « [2] » in the text that links nothing, a three-turn conversation whose
follow-ups are resolved from the earlier user turns, Stop (the model's stream cut and the
``interrompue`` outcome written at once), Regenerate → « Try Again » and « More Concise ». Every
step is checked against ancre's audit log (a streamed answer's ``start`` and ``outcome`` lines
read as one question). Screenshots go to the folder the test prints.

Skips only when not root or when PyPI cannot be reached to install Open WebUI the first time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import openwebui
from support.corpus import CORPUS
from support.httpserver import Request, ScriptedServer, ndjson
from support.scripted_ollama import ANSWER_MODEL, GROUNDED, JUDGE_MODEL, script

from ancre.api.staff import ATTACHMENTS_NOTE, EXTRACTIVE_REFUSAL_NOTE
from ancre.api.tasks import short_title
from ancre.query.conversation import CONDENSE_PROMPT, INSTRUCTION_TEXT, Instruction
from ancre.query.prompt import REFUSAL

pytestmark = pytest.mark.slow

PASSWORD = "Axonix-e2e-2026!"
USERS = {"alice": ("Alice Martin", "alice.martin@axonix.ch"), "bruno": ("Bruno Favre", "bruno.favre@axonix.ch"),
         "zoe": ("Zoé Inconnue", "zoe.inconnue@axonix.ch")}  # zoé: not in the directory
Q_ROCHAT = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"
Q_BAUMONT = "Quel est le forfait mensuel du contrat de maintenance de Baumont Industries ?"
Q_SLOW = "Décris lentement le contrat de maintenance de Baumont Industries"
Q_SLOW_2 = "Décris lentement les conditions du contrat de maintenance de Baumont Industries"
"""The two answered slowly by the scripted model (40 sentences, 0.3 s a piece): the ones Stop is clicked on."""
Q_ROCHAT_DURATION = "Quelle est la durée du contrat de maintenance de l'étude Rochat ?"
CONDENSED = {"Et pour l'étude Rochat ?": Q_ROCHAT, "Quelle est la durée de ce contrat ?": Q_ROCHAT_DURATION,
             "Et quelle est sa durée ?": Q_ROCHAT_DURATION}
"""What the scripted model answers to ancre's condense prompt for the follow-ups asked here (the
last question made standalone from the earlier ones, naming nothing they did not)."""
ROCHAT, ROCHAT_2024 = "03_Contrat_Maintenance_Etude_Rochat.docx", "03_Contrat_Maintenance_Etude_Rochat_v2024.docx"
BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
DIRECTION_UNC, CLIENTS_UNC = "\\\\SRV-FICHIERS\\Partage\\DIRECTION\\", "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\"
ROCHAT_FEE, BAUMONT_FEE = "CHF 3 840 HT", "CHF 4 200 HT"
SIDE_TASKS = ("title_generation", "tags_generation", "follow_up_generation")
TASK_HEADERS = '{"X-OpenWebUI-Task": "{{TASK}}"}'
ATTACHMENT = "Offre concurrente\nNotre forfait mensuel : CHF 2 900 HT [1].\nRéférence interne ZORGLUB-77.\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ancre(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("ancre")
    return [str(exe), *args] if exe.exists() else [sys.executable, "-c", "from ancre.app.cli import main; main()", *args]


def _openssl_secret() -> str:
    """README step 0: ``openssl rand -hex 32``."""
    return subprocess.run(["openssl", "rand", "-hex", "32"], capture_output=True, text=True, check=True).stdout.strip()


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


# ----------------------------------------------------------------------------- the scripted model


def _extract_names(prompt: str) -> list[str]:
    """The documents the model was shown: the ``[file name]`` line heading each extract block."""
    return re.findall(r"^\[([^\]\n]+)\]$", prompt, re.MULTILINE)


SLOW_TEXT = " ".join(f"Point {i} du contrat." for i in range(40)) + f" [{BAUMONT}]"
"""The slow answer, sent 7 characters at a time, one piece every 0.3 s."""
STREAMED: dict[str, int] = {}
"""Question → how many pieces of its answer the scripted model has sent so far."""


def _model(req: Request) -> Any:
    """Answers as the answering model (and the judge) would from what ancre shows it: it cites
    only documents of its prompt, the second Rochat copy first (so that numbering follows the
    citations, not the context), quotes « art. 4 [2] », writes slowly when asked « lentement »,
    answers a duration only for the contract the question names, keeps to the essential when
    told to be concise, and makes the follow-ups of :data:`CONDENSED` standalone when ancre's
    condense prompt asks (any other question it copies, as that prompt says for one that is)."""
    body = req.json
    if body["model"] == JUDGE_MODEL:
        return 200, {"model": JUDGE_MODEL, "message": {"role": "assistant", "content": GROUNDED}, "done": True}
    prompt = body["messages"][-1]["content"]
    if body["messages"][0]["content"] == CONDENSE_PROMPT:
        # Open WebUI's chat input types a typographic apostrophe (« l’étude »)
        last = prompt.rsplit("Dernière question : ", 1)[-1].split("\n", 1)[0].strip().replace("’", "'")
        return 200, {"model": ANSWER_MODEL, "done": True,
                     "message": {"role": "assistant", "content": CONDENSED.get(last, last)}}
    question = prompt.rsplit("Question : ", 1)[-1].split("\n", 1)[0]
    shown = _extract_names(prompt)
    delay = 0.0
    if INSTRUCTION_TEXT[Instruction.CONCISE] in prompt and "Baumont" in question and BAUMONT in shown:
        text = f"{BAUMONT_FEE} par mois [{BAUMONT}]."
    elif "lentement" in question and BAUMONT in shown:
        text, delay = SLOW_TEXT, 0.3
    elif "durée" in question.lower():  # a bare « sa durée » names no contract: an honest model refuses
        text = (f"Le contrat prend effet le 1er janvier 2026 pour une durée de vingt-quatre mois [{ROCHAT}]."
                if "Rochat" in question and ROCHAT in shown else REFUSAL)
    elif "Rochat" in question and ROCHAT in shown and ROCHAT_2024 in shown:
        text = (f"L'ancienne version du contrat a été remplacée [{ROCHAT_2024}]. Le forfait mensuel est de "
                f"{ROCHAT_FEE} [{ROCHAT}], selon l'art. 4 [2] des conditions ; la référence `[3]` reste du code.")
    elif "Rochat" in question and ROCHAT in shown:
        text = f"Le forfait mensuel est de {ROCHAT_FEE} [{ROCHAT}]."
    elif "Baumont" in question and BAUMONT in shown:
        text = f"Le forfait mensuel s'élève à {BAUMONT_FEE} [{BAUMONT}]."
    else:
        text = REFUSAL
    if not body.get("stream"):
        return 200, {"model": ANSWER_MODEL, "message": {"role": "assistant", "content": text}, "done": True}

    def frames() -> Iterator[dict[str, Any]]:
        for i in range(0, len(text), 7):
            time.sleep(delay)
            STREAMED[question] = i // 7 + 1
            yield {"model": ANSWER_MODEL, "message": {"role": "assistant", "content": text[i : i + 7]}, "done": False}
        yield {"model": ANSWER_MODEL, "message": {"role": "assistant", "content": ""}, "done": True}

    return ndjson(frames())


# ----------------------------------------------------------------------------- the stack


@dataclass
class Stack:
    owui: openwebui.OpenWebUI
    venv: Path
    config: Path
    env: dict[str, str]
    ancre_url: str
    ollama: ScriptedServer
    artifacts: Path
    log: Path
    models_before_public: list[str]
    ancre: subprocess.Popen[bytes] | None = None
    with_model: bool = False
    started: float = 0.0
    chats: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.config.parent / "ancre-data"

    def audit_lines(self) -> list[dict[str, Any]]:
        """Every line of ancre's audit log, in order."""
        return [json.loads(line) for f in sorted((self.data / "audit").glob("audit-*.jsonl"))
                for line in f.read_text("utf-8").splitlines() if line.strip()]

    def audit(self) -> list[dict[str, Any]]:
        """One record per question, in the order asked (README "Configuration", the audit log):
        an ``answer`` line as it is; a streamed answer's ``start`` line with its ``outcome`` (same
        ``id``) laid over it — ``time`` is then the outcome's, ``started`` the start's — and
        ``done`` false until that outcome is written."""
        questions: dict[str, dict[str, Any]] = {}
        for line in self.audit_lines():
            if line["kind"] == "outcome":
                question = questions[line["id"]]  # an outcome never comes without its start
                assert question["kind"] == "start" and not question["done"], (question, line)
                question.update({k: v for k, v in line.items() if k != "kind"}, done=True)
            else:
                assert line["kind"] in ("answer", "start") and line["id"] not in questions, line
                questions[line["id"]] = {**line, "started": line["time"], "done": line["kind"] == "answer"}
        return list(questions.values())

    def audit_text(self) -> str:
        return "".join(f.read_text("utf-8") for f in sorted((self.data / "audit").glob("audit-*.jsonl")))

    def tasks_answered(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for line in httpx.get(f"{self.ancre_url}/metrics").text.splitlines():
            if line.startswith("ancre_api_tasks_total{"):
                task = line.split('task="', 1)[1].split('"', 1)[0]
                out[task] = float(line.rsplit(" ", 1)[1])
        return out

    def serve(self, with_model: bool, *, wait: bool = True) -> None:
        """(Re)start ``ancre serve`` on the same index, extractive or with the scripted model
        (``llm``/``judge`` set through the environment, as README "Configuration" allows), and
        wait until it answers (first sync done, BM25 published, API up)."""
        if self.ancre is not None and self.with_model == with_model and self.ancre.poll() is None:
            return
        self.stop()
        env = dict(self.env)
        if with_model:
            env.update(ANCRE_LLM__KIND="ollama", ANCRE_LLM__URL=self.ollama.url, ANCRE_LLM__MODEL=ANSWER_MODEL,
                       ANCRE_JUDGE__MODEL=JUDGE_MODEL)
        self.started = time.time()
        with open(self.log, "ab") as out:
            self.ancre = subprocess.Popen(_ancre("serve", "--config", str(self.config)), stdout=out,
                                          stderr=subprocess.STDOUT, env=env, cwd=self.config.parent)
        self.with_model = with_model
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        assert self.ancre is not None
        status_file = self.data / "daemon-status.json"
        deadline = time.monotonic() + 900
        while True:
            try:
                status = json.loads(status_file.read_text("utf-8"))
                if (status_file.stat().st_mtime > self.started and status["passes"].get("startup") and status["idle"]
                        and httpx.get(f"{self.ancre_url}/health", timeout=5).status_code == 200):
                    return
            except (OSError, ValueError, KeyError, httpx.HTTPError):
                pass
            assert self.ancre.poll() is None, self.log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "ancre did not become ready\n" + self.log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)

    def stop(self) -> None:
        if self.ancre is not None and self.ancre.poll() is None:
            self.ancre.terminate()
            try:
                self.ancre.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.ancre.kill()
                self.ancre.wait()

    def browse(self, user: str, **spec: Any) -> dict[str, Any]:
        """One action in Open WebUI's screens as ``user`` (:mod:`support.owui_browser`)."""
        return openwebui.browser(self.venv, {"base": self.owui.url, "token": self.owui.tokens[user],
                                             "shots": str(self.artifacts), **spec})

    def chat(self, user: str, chat_id: str) -> dict[str, Any]:
        """The chat as Open WebUI stored it: ``{"messages": [...]}`` in order (user and assistant)."""
        chat = self.owui.ok("GET", f"/api/v1/chats/{chat_id}", self.owui.tokens[user])["chat"]
        history = chat["history"]["messages"]
        order, mid = [], chat["history"]["currentId"]
        while mid:
            order.append(history[mid])
            mid = history[mid].get("parentId")
        return {"messages": order[::-1], "title": chat.get("title")}


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if os.geteuid() != 0:
        pytest.skip("the Open WebUI end-to-end test runs as root (like `make test`): Debian's Chromium is "
                    "installed by .ci/setup-test-deps.sh")
    assert openwebui.CHROMIUM.exists(), "Debian's chromium is missing: run .ci/setup-test-deps.sh as root"
    t0 = time.monotonic()
    try:
        venv = openwebui.ensure_installed(lambda line: _report(request.config, f"\n{line}"))
    except openwebui.Unavailable as e:
        pytest.skip(str(e))
    tmp = tmp_path_factory.mktemp("openwebui")
    artifacts = Path(os.environ.get("ANCRE_TEST_ARTIFACTS") or openwebui.cache_root() / "artifacts") / "openwebui"
    artifacts.mkdir(parents=True, exist_ok=True)

    # step 0: the bundled config, user_jwt_secret uncommented, both secrets from openssl
    shutil.copytree(CORPUS, tmp / "axonix", ignore=shutil.ignore_patterns("ancre-data"))
    config = tmp / "axonix" / "ancre.toml"
    commented = '# user_jwt_secret = { env = "ANCRE_OWUI_JWT_SECRET" }'
    bundled = config.read_text("utf-8")
    assert commented in bundled, "README step 0 names a line the bundled config does not have"
    config.write_text(bundled.replace(commented, commented[2:]), "utf-8")
    key, jwt_secret = _openssl_secret(), _openssl_secret()
    ancre_port, owui_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "ANCRE_CONFIG", "WATCHDOG_USEC")}
    env.update(ANCRE_API_KEY=key, ANCRE_OWUI_JWT_SECRET=jwt_secret, ANCRE_API__PORT=str(ancre_port),
               ANCRE_DAEMON__LOG_FORMAT="text", ANCRE_DAEMON__STATUS_INTERVAL_S="0.5", OMP_WAIT_POLICY="passive")
    check = subprocess.run(_ancre("check", "--config", str(config)), check=False, capture_output=True, text=True, env=env,
                           cwd=config.parent, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    fingerprint = subprocess.run(["sh", "-c", 'printf %s "$S" | sha256sum | cut -c1-8'], env={"S": jwt_secret},
                                 capture_output=True, text=True, check=True).stdout.strip()
    api_line = next(line for line in check.stdout.splitlines() if line.startswith("ok   api "))
    assert (f"service key from $ANCRE_API_KEY (64 characters); user JWT secret from $ANCRE_OWUI_JWT_SECRET: "
            f"64 bytes, sha256 {fingerprint};") in api_line, api_line

    ollama = ScriptedServer().__enter__()
    script(ollama, "")  # Ollama's documented /api/tags, /api/show, /api/version (the health check reads them)
    ollama.route("POST", "/api/chat", _model)
    owui: openwebui.OpenWebUI | None = None
    stack: Stack | None = None
    try:
        # step 1: Open WebUI with the forwarded, signed identity (it starts while ancre syncs)
        stack = Stack(None, venv, config, env, f"http://127.0.0.1:{ancre_port}", ollama, artifacts,  # type: ignore[arg-type]
                      tmp / "ancre.log", [])
        stack.serve(with_model=False, wait=False)
        owui = openwebui.start(venv, openwebui.offline_env(tmp / "owui-data", owui_port, jwt_secret), tmp, owui_port)
        stack.owui = owui
        stack.wait_ready()
        assert "API identity: user JWT secret from $ANCRE_OWUI_JWT_SECRET: 64 bytes" in stack.log.read_text(errors="replace")

        # the first account, made on « Get started », is the admin
        owui.tokens["admin"] = openwebui.browser(venv, {"base": owui.url, "action": "signup", "shots": str(artifacts),
                                                        "full_name": "Admin Axonix", "email": "admin@axonix.ch",
                                                        "password": PASSWORD})["token"]
        assert owui.ok("GET", "/api/v1/auths/", owui.tokens["admin"])["role"] == "admin"
        # step 2: the connection, in the screens; the default OpenAI one removed
        done = stack.browse("admin", action="connect", url=f"{stack.ancre_url}/v1", key=key, headers=TASK_HEADERS)
        assert done == {"removed_default": True, "connections": [f"{stack.ancre_url}/v1"]}, done
        cfg = owui.ok("GET", "/openai/config", owui.tokens["admin"])
        assert cfg["OPENAI_API_BASE_URLS"] == [f"{stack.ancre_url}/v1"] and cfg["OPENAI_API_KEYS"] == [key]
        assert cfg["OPENAI_API_CONFIGS"]["0"]["headers"] == {"X-OpenWebUI-Task": "{{TASK}}"}
        # users (Admin Panel → Users → Add User); their e-mail is their UPN
        for user, (name, email) in USERS.items():
            added = owui.ok("POST", "/api/v1/auths/add", owui.tokens["admin"],
                            {"name": name, "email": email, "password": PASSWORD, "role": "user"})
            assert added["role"] == "user"
            owui.tokens[user] = owui.ok("POST", "/api/v1/auths/signin", json_body={"email": email, "password": PASSWORD})["token"]
        stack.models_before_public = [m["id"] for m in owui.ok("GET", "/api/models", owui.tokens["alice"])["data"]]
        # step 3: ancre public (its capabilities: test_capabilities_off_leave_ancre_its_own_documents)
        assert stack.browse("admin", action="model", name="model-access", off=[])["public"] is True
        # step 4: the Task Model left on « Current Model »
        interface = stack.browse("admin", action="task_model")["text"]
        assert "Local Task Model\nCurrent Model" in interface and "External Task Model\nCurrent Model" in interface
        _report(request.config, f"\nOpen WebUI set up as README.md says in {time.monotonic() - t0:.0f} s; "
                                f"screenshots: {artifacts}")
        yield stack
    finally:
        if owui is not None:
            owui.stop()
        if stack is not None:
            stack.stop()
        ollama.__exit__(None, None, None)
        _report(request.config, f"\nOpen WebUI end-to-end test: {time.monotonic() - t0:.0f} s in all")


def _records(stack: Stack, before: int, wait_for: int = 1, timeout: float = 30,
             question: str | None = None) -> list[dict[str, Any]]:
    """The questions audited since the ``before``-th (:meth:`Stack.audit`), once their record is
    complete, waiting for at least ``wait_for``; only those of ``question`` if given."""
    deadline = time.monotonic() + timeout
    while True:
        records = [r for r in stack.audit()[before:]
                   if r["done"] and (question is None or r["question"] == question)]
        if len(records) >= wait_for or time.monotonic() > deadline:
            return records
        time.sleep(0.3)


def _ask(stack: Stack, user: str, stream: bool, question: str = Q_ROCHAT) -> str:
    """One question through Open WebUI's chat endpoint, as an API client calls it (no saved chat);
    streamed: the text and the raw events."""
    body = {"model": "ancre", "stream": stream, "messages": [{"role": "user", "content": question}]}
    r = stack.owui.call("POST", "/api/chat/completions", stack.owui.tokens[user], body)
    assert r.status_code == 200, f"{r.status_code} {r.text[:500]}\n{stack.owui.tail()}"
    if not stream:
        return str(r.json()["choices"][0]["message"]["content"])
    assert r.headers["content-type"].startswith("text/event-stream")
    return r.text


def _streamed_text(raw: str) -> tuple[str, list[dict[str, Any]]]:
    events = [e[6:] for e in raw.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join((c.get("choices") or [{}])[0].get("delta", {}).get("content") or "" for c in chunks)
    return text, [c["event"] for c in chunks if "event" in c]


# ----------------------------------------------------------------------------- extractive answers


def test_ancre_is_hidden_from_users_until_made_public(stack: Stack) -> None:
    assert stack.models_before_public == []
    assert [m["id"] for m in stack.owui.ok("GET", "/api/models", stack.owui.tokens["bruno"])["data"]] == ["ancre"]


@pytest.mark.parametrize("stream", [False, True], ids=["non-streamed", "streamed"])
def test_each_user_gets_their_own_answer_through_open_webui(stack: Stack, stream: bool) -> None:
    """Through Open WebUI's API as a client calls it: non-streamed, the Markdown « Sources » block
    (no event channel); streamed, the ``[1]`` citations and the ``source`` events, passed on."""
    stack.serve(with_model=False)
    before = len(stack.audit())
    alice = _ask(stack, "alice", stream)
    if stream:
        alice, events = _streamed_text(alice)
        assert "[1]" in alice and f"[{ROCHAT}]" not in alice and "Sources :" not in alice, alice  # numbered
        assert [e["data"]["source"]["name"] for e in events] == [ROCHAT, ROCHAT_2024]
        assert events[0]["data"]["source"]["id"] == f"{DIRECTION_UNC}{ROCHAT}"
    else:
        assert ROCHAT in alice and f"**Sources :**\n- {ROCHAT} — `{DIRECTION_UNC}`" in alice
    assert ROCHAT_FEE in alice and "| Poste | Montant |" in alice and "> 4\\. Conditions financières" in alice, alice
    bruno = _ask(stack, "bruno", stream)
    if stream:
        bruno, events = _streamed_text(bruno)
        assert events == []
    assert bruno.strip() == f"{REFUSAL}\n\n{EXTRACTIVE_REFUSAL_NOTE}" or bruno.strip() == REFUSAL, bruno
    assert "Sources" not in bruno and ROCHAT_FEE not in bruno
    # the identity ancre audited is the one Open WebUI signed in its JWT; the plain header is refused
    records = stack.audit()[before:]
    plain = httpx.post(f"{stack.ancre_url}/v1/chat/completions", timeout=60,
                       json={"model": "ancre", "messages": [{"role": "user", "content": Q_ROCHAT}]},
                       headers={"Authorization": f"Bearer {stack.env['ANCRE_API_KEY']}",
                                "X-OpenWebUI-User-Email": USERS["alice"][1]})
    assert plain.status_code == 401 and plain.json()["error"]["code"] == "plain_identity_refused"
    assert plain.json()["error"]["message"].startswith("ancre n'a pas pu vérifier votre identité")  # in French
    assert [(r["user"], r["question"]) for r in records] == [
        ("alice.martin@axonix.ch", Q_ROCHAT), ("bruno.favre@axonix.ch", Q_ROCHAT)]


def test_one_question_leaves_one_question_record(stack: Stack) -> None:
    """Open WebUI's title, tags and follow-ups requests reach ancre (the Task Model is the current
    model, step 4), are answered as tasks, and leave no audit record: one question, one record."""
    stack.serve(with_model=False)
    before, tasks_before = len(stack.audit()), stack.tasks_answered()
    user_message = {"id": str(uuid.uuid4()), "parentId": None, "childrenIds": [], "role": "user",
                    "content": Q_ROCHAT, "timestamp": int(time.time())}
    body = {"model": "ancre", "stream": False, "messages": [{"role": "user", "content": Q_ROCHAT}],
            "parent_id": None, "id": str(uuid.uuid4()), "user_message": user_message,
            "background_tasks": dict.fromkeys(SIDE_TASKS, True)}
    r = stack.owui.call("POST", "/api/chat/completions", stack.owui.tokens["alice"], body)
    assert r.status_code == 200, f"{r.status_code} {r.text[:500]}\n{stack.owui.tail()}"
    deadline = time.monotonic() + 120
    while not all(stack.tasks_answered().get(t, 0) > tasks_before.get(t, 0) for t in SIDE_TASKS):
        assert time.monotonic() < deadline, f"side requests not seen: {stack.tasks_answered()}\n{stack.owui.tail()}"
        time.sleep(0.5)
    time.sleep(1)  # anything else Open WebUI would still send
    records = stack.audit()[before:]
    assert [(r["user"], r["question"]) for r in records] == [("alice.martin@axonix.ch", Q_ROCHAT)]
    chat_id = str(stack.owui.ok("GET", "/api/v1/chats/", stack.owui.tokens["alice"])[0]["id"])
    chat = stack.owui.ok("GET", f"/api/v1/chats/{chat_id}", stack.owui.tokens["alice"])
    assert chat["title"] == short_title(Q_ROCHAT)  # the title ancre gave, not Open WebUI's fallback
    assert "pas dans les documents" not in json.dumps(chat["chat"], ensure_ascii=False)  # no refused side request


def _check_chips(stack: Stack, user: str, res: dict[str, Any], names: list[str], folder: str, fee: str) -> None:
    """The answer as rendered, after a reload, as stored, and as audited."""
    for seen in (res["answer"], res["reloaded"]):
        assert seen["chips"] == (f"{len(names)} Sources" if len(names) > 1 else "1 Source"), seen
        assert list(dict.fromkeys(seen["inline"])) == names, seen["inline"]  # [n] → the n-th chip's file
    assert res["answer"]["sources"] == names  # the chip list, opened
    panel = res["panel"]["text"]
    assert panel.startswith(names[0]) and f"Dossier : {folder}" in panel and fee in panel, panel
    stored = stack.chat(user, res["chat_id"])["messages"]
    question, answer = stored[-2], stored[-1]
    assert [s["source"]["name"] for s in answer["sources"]] == names  # message.sources, kept
    assert all("type" not in s for s in answer["sources"])
    assert answer["sources"][0]["source"]["id"] == f"{folder}{names[0]}"
    record = stack.audit()[-1]
    assert record["done"] and record["user"] == USERS[user][1] and record["question"] == question["content"].strip()
    assert set(names) <= {s["filename"] for s in record["sources"]} and record["cited"] == names
    assert record["error"] is None


def test_native_source_chips_for_two_users_in_chromium(stack: Stack, pytestconfig: pytest.Config) -> None:
    """Alice and Bruno ask in Open WebUI's chat screen: each answer has its native chips, its
    inline citations link the chip of the file, the chip's panel shows the passages and the UNC
    folder; all of it again after a reload and in the stored chat; one audit record each. The
    extractive quotes render as the document reads (a table, « 4. Conditions » not a list)."""
    stack.serve(with_model=False)
    before = len(stack.audit())
    alice = stack.browse("alice", action="ask", name="alice", question=Q_ROCHAT, open_source=1)
    _check_chips(stack, "alice", alice, [ROCHAT, ROCHAT_2024], DIRECTION_UNC, ROCHAT_FEE)
    # one table per version quoted: the current fee's, and the replaced version's when its fee
    # passage is in the context (which of its passages is depends on close scores, so on the CPU)
    headers = [[c.casefold() for c in cells] for cells in alice["answer"]["table_headers"]]
    assert alice["answer"]["table"] and headers and all(h == ["poste", "montant"] for h in headers), headers
    assert alice["answer"]["ordered_lists"] == 0 and "4. Conditions financières" in alice["answer"]["text"]
    bruno = stack.browse("bruno", action="ask", name="bruno", question=Q_BAUMONT, open_source=1)
    _check_chips(stack, "bruno", bruno, [BAUMONT], CLIENTS_UNC, BAUMONT_FEE)
    refused = stack.browse("bruno", action="ask", name="bruno-refused", question=Q_ROCHAT)
    assert refused["answer"]["text"].startswith(REFUSAL) and refused["answer"]["chips"] is None
    assert ROCHAT_FEE not in refused["answer"]["text"] and not refused["answer"]["table"]
    records = _records(stack, before, 3)
    assert [r["user"] for r in records] == [USERS["alice"][1], USERS["bruno"][1], USERS["bruno"][1]]
    assert records[2]["cited"] == [] and ROCHAT not in json.dumps(records[2])
    _report(pytestconfig, f"\nOpen WebUI screenshots: {stack.artifacts}")
    assert (stack.artifacts / "alice-panel.png").stat().st_size > 10_000


def test_an_attachment_is_not_read_and_never_audited(stack: Stack, tmp_path: Path) -> None:
    """A file attached in the chat screen (File Upload still on): the user's own question is
    answered from ancre's documents, one sentence says the file is not read, ancre's citation
    links its own chip (after the one Open WebUI made for the file), and nothing of the file is
    in the audit log."""
    stack.serve(with_model=False)
    attachment = tmp_path / "offre-concurrent.txt"
    attachment.write_text(ATTACHMENT, "utf-8")
    before = len(stack.audit())
    res = stack.browse("alice", action="ask", name="attachment", question=Q_ROCHAT, file=str(attachment))
    text = res["answer"]["text"]
    assert text.startswith(ATTACHMENTS_NOTE) and ROCHAT_FEE in text and "2 900" not in text, text
    assert res["answer"]["inline"][0] == ROCHAT  # not linked to the attachment
    stored = stack.chat("alice", res["chat_id"])["messages"]
    assert next(s["source"]["name"] for s in stored[-1]["sources"]) == "offre-concurrent.txt"  # Open WebUI's chip first
    assert ROCHAT in [s["source"]["name"] for s in stored[-1]["sources"]]
    (record,) = _records(stack, before)
    assert record["question"] == stored[-2]["content"].strip()  # the user's own question, as he typed it
    audited = stack.audit_text()
    assert "ZORGLUB" not in audited and "2 900" not in audited and "offre-concurrent" not in audited


def test_an_unknown_account_is_told_so_and_whom_to_contact(stack: Stack) -> None:
    stack.serve(with_model=False)
    before = len(stack.audit())
    res = stack.browse("zoe", action="ask", name="unknown-account", question=Q_ROCHAT)
    assert res["answer"]["text"].startswith(f"Votre compte « {USERS['zoe'][1]} » n'est pas connu de l'annuaire"), res
    assert "Contactez votre service informatique" in res["answer"]["text"] and REFUSAL not in res["answer"]["text"]
    assert res["answer"]["chips"] is None
    (record,) = _records(stack, before)
    assert record["user"] == USERS["zoe"][1] and record["account"] is None
    assert record["controls"] == ["aucun_extrait", "utilisateur_inconnu"] and record["sources"] == []


def test_a_lookalike_account_with_a_trailing_nbsp_is_refused(stack: Stack) -> None:
    """Issue 40: with sign-ups enabled by the admin, Open WebUI's own sign-up (what its « Sign up »
    page posts) accepts the real user's address plus a trailing no-break space as a new, distinct
    account — that looks like alice's in the admin's list (the test env's DEFAULT_USER_ROLE is
    ``user``: no approval step). ancre refuses it (401 ``invalid_identity_chars``: identities are taken as they
    are, never stripped): its user reads, in French, that the account is unknown and why, nothing
    is audited as a question, the admin's log names the Open WebUI user id; alice is answered."""
    stack.serve(with_model=False)
    twin = USERS["alice"][1] + "\u00a0"
    # Open WebUI turns sign-ups off by itself once the admin exists; an admin turns them back on
    # (Admin Panel → Settings → General → « Enable New Sign Ups »: what this endpoint saves)
    admin = stack.owui.tokens["admin"]
    config = stack.owui.ok("GET", "/api/v1/auths/admin/config", admin)
    stack.owui.ok("POST", "/api/v1/auths/admin/config", admin, {**config, "ENABLE_SIGNUP": True})
    try:
        signed = stack.owui.ok("POST", "/api/v1/auths/signup",
                               json_body={"name": "Alice Martin", "email": twin, "password": PASSWORD})
    finally:
        stack.owui.ok("POST", "/api/v1/auths/admin/config", admin, {**config, "ENABLE_SIGNUP": False})
    alice = stack.owui.ok("GET", "/api/v1/auths/", stack.owui.tokens["alice"])
    assert signed["email"] == twin and signed["id"] != alice["id"], signed  # Open WebUI: a distinct account
    stack.owui.tokens["twin"] = signed["token"]
    before, log_before = len(stack.audit()), len(stack.log.read_text(errors="replace"))
    res = stack.browse("twin", action="ask", name="nbsp-twin", question=Q_ROCHAT)
    text = res["answer"]["text"]
    assert "Votre compte « alice.martin@axonix.ch[U+00A0] » n'est pas connu de l'annuaire" in text, res
    assert "espace ou un caractère invisible" in text and ROCHAT_FEE not in text and ROCHAT not in text
    time.sleep(1)
    assert len(stack.audit()) == before  # refused before any question: nothing of alice's was searched
    log = stack.log.read_text(errors="replace")[log_before:]
    assert f"(Open WebUI user id '{signed['id']}'): invalid_identity_chars" in log and "U+00A0" in log, log[-2000:]
    res = stack.browse("alice", action="ask", name="nbsp-real", question=Q_ROCHAT)
    assert ROCHAT_FEE in res["answer"]["text"], res


def test_capabilities_off_leave_ancre_its_own_documents(stack: Stack) -> None:
    """README step 3, the rest: File Upload (File Context goes with it) and Vision off."""
    done = stack.browse("admin", action="model", name="model-capabilities", off=["File Upload", "File Context", "Vision"])
    assert done["on"] == {"File Upload": False, "File Context": None, "Vision": False}, done
    model = stack.owui.ok("GET", "/api/v1/models/model?id=ancre", stack.owui.tokens["admin"])
    caps = model["meta"]["capabilities"]
    assert caps["file_upload"] is False and caps["vision"] is False and caps["citations"] is True


# ----------------------------------------------------------------------------- with a model


def test_written_answer_numbers_citations_in_chip_order(stack: Stack) -> None:
    """The model cites the 2024 copy first: it is [1] and the first chip; « [2] » quoted from the
    conditions links nothing (open-webui#11592), `[3]` stays code; the article it quotes is in no
    extract, so the answer is shown marked not grounded."""
    stack.serve(with_model=True)
    before = len(stack.audit())
    res = stack.browse("alice", action="ask", name="model-rochat", question=Q_ROCHAT, open_source=2)
    for seen in (res["answer"], res["reloaded"]):
        assert seen["inline"] == [ROCHAT_2024, ROCHAT] and seen["chips"] == "2 Sources", seen
        assert "selon l'art. 4 [2] des conditions" in seen["text"], seen["text"]  # as text, no line break
        assert "<code" in seen["html"] and "[3]" in seen["text"]
    assert res["panel"]["text"].startswith(ROCHAT) and ROCHAT_FEE in res["panel"]["text"]
    stored = stack.chat("alice", res["chat_id"])["messages"]
    assert [s["source"]["name"] for s in stored[-1]["sources"]] == [ROCHAT_2024, ROCHAT]
    assert "[1]" in stored[-1]["content"] and "[2\\]" in stored[-1]["content"]
    (record,) = _records(stack, before)
    # the contract has no « art. 4 » (nor a 2): control 5 finds the two figures in no cited extract
    assert record["cited"] == [ROCHAT_2024, ROCHAT] and record["ancree"] is False
    assert record["controls"] == ["fait_non_source"], record["controls"]


def test_a_three_turn_conversation(stack: Stack) -> None:
    """Three turns in one chat, the second and third follow-ups: each answered from the question
    made standalone out of the earlier *user* turns Open WebUI sends (« Question traitée »), with
    its chips; three audit records in order, each with the question as typed and as answered."""
    stack.serve(with_model=True)
    before = len(stack.audit())
    first = stack.browse("alice", action="ask", name="turn-1", question=Q_BAUMONT)
    chat_id = first["chat_id"]
    second = stack.browse("alice", action="ask", name="turn-2", chat_id=chat_id, question="Et pour l'étude Rochat ?")
    third = stack.browse("alice", action="ask", name="turn-3", chat_id=chat_id, question="Quelle est la durée de ce contrat ?")
    stack.chats["alice-3"] = chat_id
    assert first["answer"]["inline"] == [BAUMONT] and BAUMONT_FEE in first["answer"]["text"]
    assert "Question traitée" not in first["answer"]["text"]
    assert ROCHAT in second["answer"]["inline"] and ROCHAT_FEE in second["answer"]["text"], second["answer"]
    assert BAUMONT not in second["answer"]["inline"] and BAUMONT_FEE not in second["answer"]["text"]
    assert f"Question traitée : {Q_ROCHAT}" in second["answer"]["text"]
    for seen in (third["answer"], third["reloaded"]):
        assert "vingt-quatre mois" in seen["text"] and seen["inline"] == [ROCHAT], seen
        assert f"Question traitée : {Q_ROCHAT_DURATION}" in seen["text"]
    messages = stack.chat("alice", chat_id)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3
    assert [s["source"]["name"] for s in messages[1]["sources"]] == [BAUMONT]
    assert [s["source"]["name"] for s in messages[5]["sources"]] == [ROCHAT]
    records = _records(stack, before, 3)
    assert [r["user"] for r in records] == [USERS["alice"][1]] * 3
    assert [r["question"] for r in records] == [m["content"].strip() for m in messages[::2]]
    assert [r["resolved_question"] for r in records] == [None, Q_ROCHAT, Q_ROCHAT_DURATION]
    by_model = {"method": "modele", "instruction": None}  # the condense prompt, answered by the model
    assert [r["resolution"] for r in records] == [None, by_model, by_model]
    assert records[0]["cited"] == [BAUMONT] and ROCHAT in records[1]["cited"] and records[2]["cited"] == [ROCHAT]
    assert all(r["error"] is None for r in records)


def test_a_follow_up_is_understood(stack: Stack) -> None:
    """« Et quelle est sa durée ? » in the chat of the previous test: Rochat's, not Baumont's."""
    stack.serve(with_model=True)
    chat_id = stack.chats.get("alice-3")
    if chat_id is None:
        chat_id = stack.browse("alice", action="ask", name="turn-1b", question=Q_ROCHAT)["chat_id"]
    before = len(stack.audit())
    res = stack.browse("alice", action="ask", name="follow-up", chat_id=chat_id, question="Et quelle est sa durée ?")
    assert "vingt-quatre mois" in res["answer"]["text"] and res["answer"]["inline"] == [ROCHAT], res["answer"]
    assert "trente-six mois" not in res["answer"]["text"]
    (record,) = _records(stack, before)
    assert record["cited"] == [ROCHAT] and record["resolved_question"] == Q_ROCHAT_DURATION


def test_stop_ends_the_answer_in_open_webui(stack: Stack) -> None:
    """Stop while the model writes: Open WebUI keeps what had arrived and offers Regenerate."""
    stack.serve(with_model=True)
    res = stack.browse("alice", action="ask", name="stop", question=Q_SLOW, stop_after_chars=60)
    stack.chats["stopped"] = res["chat_id"]
    text = res["reloaded"]["text"]
    assert text.startswith("Point 0 du contrat.") and "Point 39" not in text, text


def test_stop_writes_the_audit_record_at_once(stack: Stack) -> None:
    """Stop in Open WebUI closes its connection to ancre: the model request is cancelled (no
    more of the answer is asked of it) and the question's outcome, ``interrompue``, is written
    within seconds, not when the model would have finished (40 pieces × 0.3 s)."""
    stack.serve(with_model=True)
    before = len(stack.audit())
    asked_before = len(stack.ollama.requests_to("/api/chat"))
    res = stack.browse("alice", action="ask", name="stop-audit", question=Q_SLOW_2, stop_after_chars=60)
    records = _records(stack, before, 1, question=Q_SLOW_2)
    assert records and records[0]["error"] == "interrompue", stack.audit()[before:]
    assert records[0]["user"] == USERS["alice"][1] and records[0]["verification"] == "non_effectuee"
    written = datetime.fromisoformat(records[0]["time"]).timestamp()
    assert written - res["stopped_at"] < 5, (written, res["stopped_at"])  # at once, not ~35 s later
    assert records[0]["timings_ms"]["generation"] < 20_000
    # the model's stream was closed: it sends no more pieces (it would for ~30 s more otherwise)
    sent = STREAMED[Q_SLOW_2]
    time.sleep(3)
    assert STREAMED[Q_SLOW_2] <= sent + 1 and sent < len(SLOW_TEXT) / 7 / 2, (sent, STREAMED[Q_SLOW_2])
    # and no judge call for an interrupted answer: the answering model was the last one asked
    asked = [r.json["model"] for r in stack.ollama.requests_to("/api/chat")[asked_before:]]
    assert asked == [ANSWER_MODEL], asked


def test_regenerate_try_again_asks_again(stack: Stack) -> None:
    stack.serve(with_model=True)
    first = stack.browse("alice", action="ask", name="regenerate-0", question=Q_BAUMONT)
    before = len(stack.audit())
    again = stack.browse("alice", action="ask", name="regenerate-1", chat_id=first["chat_id"], regenerate="Try Again")
    assert again["answer"]["inline"] == [BAUMONT] and BAUMONT_FEE in again["answer"]["text"]
    assert "Question traitée" not in again["answer"]["text"]  # the question itself, asked again
    (record,) = _records(stack, before)
    assert record["question"] == stack.chat("alice", first["chat_id"])["messages"][0]["content"].strip()
    assert record["resolved_question"] is None


def test_regenerate_more_concise_is_an_instruction(stack: Stack) -> None:
    """« More Concise » (Open WebUI sends its label as a new user turn): the previous question is
    answered again from the documents, the model told to be concise; the audit says so."""
    stack.serve(with_model=True)
    first = stack.browse("alice", action="ask", name="concise-0", question=Q_BAUMONT)
    before = len(stack.audit())
    res = stack.browse("alice", action="ask", name="concise-1", chat_id=first["chat_id"], regenerate="More Concise")
    text = res["answer"]["text"]
    assert not text.startswith(REFUSAL) and f"{BAUMONT_FEE} par mois" in text, res["answer"]
    assert res["answer"]["inline"] == [BAUMONT] and "(réponse plus concise)" in text
    (record,) = _records(stack, before)
    assert record["user"] == USERS["alice"][1] and record["resolved_question"] == Q_BAUMONT
    assert record["resolution"] == {"method": "regeneration", "instruction": "plus_concis"}
    assert record["cited"] == [BAUMONT]
