"""``ancre check`` on the bundled corpus (folder sources, file directory, e5-local, embedded
store) with a scripted Ollama on 127.0.0.1 as answering model and judge: one line per part, exit
status 1 with the failing part's line and what to fix. ``ancre sync`` checks the directory first.
(The Samba/LDAP side is in ``test_check_and_directory_tls.py``.)"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.corpus import copy_corpus, write_config
from support.httpserver import ScriptedServer
from support.scripted_ollama import ANSWER_MODEL, JUDGE_MODEL, chats, script
from typer.testing import CliRunner

from ancre.app.cli import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def lines(output: str) -> dict[str, str]:
    """First word after ok/FAIL (the part, ``source`` for sources) → the line (last one wins)."""
    return {ln.split()[1]: ln for ln in output.splitlines() if ln.startswith(("ok ", "FAIL ", "warn "))}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ollama() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        script(srv, "OK")
        yield srv


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return copy_corpus(tmp_path / "c")


def llm(url: str) -> str:
    return f"[llm]\nkind = 'ollama'\nurl = '{url}'\nmodel = '{ANSWER_MODEL}'\n[judge]\nmodel = '{JUDGE_MODEL}'\n"


def test_check_passes_with_every_part_reached(root: Path, ollama: ScriptedServer) -> None:
    cfg = write_config(root, extra=llm(ollama.url))
    ollama.clear()
    res = run("check", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    got = lines(res.output)
    assert set(got) == {"config", "files", "api", "directory", "identities", "source", "reach", "embedder", "store", "llm",
                        "judge"}, res.output
    assert got["reach"].startswith("ok   reach            every source has readers; alice reads partage, sharepoint-direction")
    assert got["identities"].startswith("ok   identities       10 directory name(s)"), res.output
    assert all(ln.startswith("ok") for ln in got.values()) and "all checks passed" in res.output
    assert sum(ln.startswith("ok   source") for ln in res.output.splitlines()) == 2
    assert "384 dimensions" in got["embedder"] and "alice resolves to" in got["directory"]
    assert len(chats(ollama, ANSWER_MODEL)) == 1 and len(chats(ollama, JUDGE_MODEL)) == 1


def test_check_names_an_absent_model_and_the_command_that_fixes_it(root: Path) -> None:
    from support.model_servers import FakeOllama, Model

    with ScriptedServer() as srv:
        FakeOllama(srv, {ANSWER_MODEL: Model("OK")})  # the judge's model was never pulled
        url = srv.url
        res = run("check", "--config", str(write_config(root, extra=llm(url))))
        assert chats(srv, JUDGE_MODEL) == []  # looked up in /api/tags, not asked
    assert res.exit_code == 1, res.output
    got = lines(res.output)
    assert got["llm"].startswith(f"ok   llm              ollama {ANSWER_MODEL} at {url}: answered 'OK'")
    assert "context length 32768 tokens; num_ctx 8192 or more" in got["llm"]
    assert got["judge"] == (f"FAIL judge            ollama {JUDGE_MODEL} at {url}: not on the server — fix: run "
                            f"`ollama pull {JUDGE_MODEL}` on that server (or fix the model name) — or set judge.model")


def test_check_warns_when_the_openai_kind_points_at_an_ollama(root: Path) -> None:
    from support.model_servers import FakeOllama, Model

    with ScriptedServer() as srv:
        FakeOllama(srv, {ANSWER_MODEL: Model("OK")})
        extra = f"[llm]\nkind = 'openai'\nurl = '{srv.url}/v1'\nmodel = '{ANSWER_MODEL}'\n[judge]\nenabled = false\n"
        res = run("check", "--config", str(write_config(root, extra=extra)))
    assert res.exit_code == 0, res.output  # a warning, not a failure
    (warn,) = [ln for ln in res.output.splitlines() if ln.startswith("warn")]
    assert warn.startswith("warn llm") and "is an Ollama" in warn and "can't set the context window" in warn
    assert 'fix: set llm.kind = "ollama" and llm.url to the server without /v1' in warn
    assert lines(res.output)["llm"].startswith("ok   llm")


def test_check_without_a_model_has_no_model_lines(root: Path) -> None:
    res = run("check", "--as", "chloe", "--config", str(write_config(root)))
    assert res.exit_code == 0, res.output
    assert "llm" not in lines(res.output) and "chloe resolves to" in res.output


@pytest.mark.parametrize("case", ["llm-down", "unknown-user", "broken-manifest", "missing-root", "no-directory"])
def test_check_fails_with_the_part_and_the_fix(root: Path, ollama: ScriptedServer, case: str) -> None:
    extra, args = llm(ollama.url), []
    if case == "llm-down":
        extra = llm(f"http://127.0.0.1:{closed_port()}")
    elif case == "unknown-user":
        args = ["--as", "mallory"]
    elif case == "broken-manifest":
        (root / "acl.json").write_text("{not json", encoding="utf-8")
    elif case == "missing-root":
        (root / "sharepoint").rename(root / "elsewhere")
    cfg = write_config(root, extra=extra)
    if case == "no-directory":
        cfg.write_text(cfg.read_text(encoding="utf-8").replace('path = "directory.json"', ""), encoding="utf-8")
    res = run("check", *args, "--config", str(cfg))
    assert res.exit_code == 1, res.output
    failed = [ln for ln in res.output.splitlines() if ln.startswith("FAIL")]
    expected_part = {
        "llm-down": "FAIL llm", "unknown-user": "FAIL directory", "broken-manifest": "FAIL source partage",
        "missing-root": "FAIL source sharepoint-direction", "no-directory": "FAIL directory",
    }[case]
    assert failed and failed[0].startswith(expected_part), res.output
    assert "— fix:" in failed[0]
    if case == "llm-down":
        assert len(failed) == 2 and failed[1].startswith("FAIL judge")  # the judge defaults to llm.url
    if case == "broken-manifest":
        assert "not valid JSON" in failed[0]
    if case == "unknown-user":
        assert "'mallory' is unknown" in failed[0]


def test_check_warns_about_identities_that_can_never_match(root: Path) -> None:
    """Issue 40: a directory UPN with a trailing NBSP, an account name with a zero-width space and
    user_map entries with a stray space can never be matched (identities are taken as they are):
    `ancre check` names each, with the character made visible, and still passes."""
    data = json.loads((root / "directory.json").read_text(encoding="utf-8"))
    data["users"]["emma"]["upn"] = "emma.blanc@axonix.ch\u00a0"
    data["users"]["fr\u200bed"] = {"sid": data["users"]["emma"]["sid"][:-4] + "9999", "groups": []}
    (root / "directory.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    extra = '[api]\nuser_map = { "b.favre@axonix.com " = "bruno", "d.meier@axonix.com" = "david\\t" }\n'
    res = run("check", "--as", "alice", "--config", str(write_config(root, extra=extra)))
    assert res.exit_code == 0 and "all checks passed" in res.output, res.output
    warn = lines(res.output)["identities"]
    assert warn.startswith("warn identities       4 identit(ies) can never be matched: "), res.output
    for part in ("userPrincipalName 'emma.blanc@axonix.ch<U+00A0>' of 'emma': U+00A0 (NO-BREAK SPACE) at position 21",
                 "sAMAccountName 'fr<U+200B>ed' of 'fr<U+200B>ed': U+200B (ZERO WIDTH SPACE) at position 3",
                 "api.user_map e-mail 'b.favre@axonix.com<U+0020>': U+0020 (SPACE) at position 19",
                 "api.user_map account 'david<U+0009>': U+0009 (CHARACTER TABULATION) at position 6", "— fix: "):
        assert part in warn, warn
    assert "\u00a0" not in res.output and "\u200b" not in res.output and "\t" not in res.output


def _sources_only(cfg: Path, keep: str, principals: str | None = None) -> Path:
    """``cfg`` with only the source ``keep`` (``principals``: what it grants instead)."""
    head, _, rest = cfg.read_text(encoding="utf-8").partition("[[sources]]")
    blocks = ["[[sources]]" + b for b in ("[[sources]]" + rest).split("[[sources]]") if b.strip()]
    kept = "".join(b for b in blocks if f'id = "{keep}"' in b)
    if principals is not None:
        kept = kept.replace('principals = ["GG_Direction"]', f"principals = {principals}")
    cfg.write_text(head + kept, encoding="utf-8")
    return cfg


def test_check_warns_for_a_user_who_reads_nothing_and_a_source_nobody_reads(root: Path) -> None:
    """Issue 46: everything reachable and configured, yet bruno (not in GG_Direction) can read
    nothing of a GG_Direction-only source, and a source granting a SID no user holds has no
    reader at all: `ancre check` warns, naming them and what to check (it still passes)."""
    cfg = _sources_only(write_config(root), "sharepoint-direction")
    res = run("check", "--as", "alice", "--as", "bruno", "--config", str(cfg))
    assert res.exit_code == 0 and "all checks passed, 1 warning(s)" in res.output, res.output
    warns = [ln for ln in res.output.splitlines() if ln.startswith("warn reach")]
    assert len(warns) == 1 and "user bruno (" in warns[0] and "none of the files of sharepoint-direction" in warns[0]
    assert "check bruno's groups in the directory" in warns[0], warns

    cfg = _sources_only(write_config(root), "sharepoint-direction", principals='["sid:S-1-5-21-1-2-3-4242"]')
    res = run("check", "--as", "alice", "--config", str(cfg))
    warns = [ln for ln in res.output.splitlines() if ln.startswith("warn reach")]
    assert res.exit_code == 0 and len(warns) == 2, res.output
    assert "source sharepoint-direction: none of its 1 file(s) is readable by any of the directory's 5 user(s)" in warns[0]
    assert "user alice (" in warns[1]


def test_check_refuses_a_directory_file_with_an_unknown_key(root: Path) -> None:
    """Issue 46: a user's "member_of" for "groups" used to be ignored — the user read nothing and
    `ancre check --as` her said « all checks passed ». The file is refused, naming the key."""
    data = json.loads((root / "directory.json").read_text(encoding="utf-8"))
    data["users"]["bruno"]["member_of"] = data["users"]["bruno"].pop("groups")
    (root / "directory.json").write_text(json.dumps(data), encoding="utf-8")
    res = run("check", "--as", "bruno", "--config", str(write_config(root)))
    assert res.exit_code == 1 and "all checks passed" not in res.output, res.output
    assert "users.bruno.member_of: Extra inputs are not permitted" in lines(res.output)["directory"], res.output


API = '[api]\napi_key = { env = "T_ANCRE_KEY" }\n'


def test_check_states_the_api_secrets_and_the_jwt_secret_length(root: Path) -> None:
    """A wrong JWT secret is otherwise invisible until users fail: `ancre check` says whether one
    is configured, where from, its length, and a fingerprint the admin compares with Open WebUI's
    (``printf %s "$SECRET" | sha256sum | cut -c1-8``, run here by the shell itself)."""
    import subprocess

    secret = hashlib.sha256(b"jwt").hexdigest()  # 64 hex characters, as `openssl rand -hex 32` prints
    key = hashlib.sha256(b"key").hexdigest()
    jwt = API + 'user_jwt_secret = { env = "T_OWUI_JWT" }\n'
    res = runner.invoke(app, ["check", "--config", str(write_config(root, extra=jwt))],
                        env={"T_ANCRE_KEY": key, "T_OWUI_JWT": secret}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    fingerprint = subprocess.run(["sh", "-c", 'printf %s "$S" | sha256sum | cut -c1-8'], env={"S": secret},
                                 capture_output=True, text=True, check=True).stdout.strip()
    assert lines(res.output)["api"] == (
        f"ok   api              service key from $T_ANCRE_KEY (64 characters); user JWT secret from $T_OWUI_JWT: "
        f"64 bytes, sha256 {fingerprint}; the user is read from Open WebUI's signed X-OpenWebUI-User-Jwt only")

    res = runner.invoke(app, ["check", "--config", str(write_config(root, extra=jwt))], env={"T_ANCRE_KEY": key})
    assert res.exit_code == 1 and lines(res.output)["api"].startswith("FAIL api") and "T_OWUI_JWT" in res.output
    res = runner.invoke(app, ["check", "--config", str(write_config(root, extra=jwt))],
                        env={"T_ANCRE_KEY": key, "T_OWUI_JWT": "short"})
    assert res.exit_code == 1 and "at least 32 bytes" in lines(res.output)["api"]
    res = runner.invoke(app, ["check", "--config", str(write_config(root, extra=API))], env={"T_ANCRE_KEY": key})
    assert res.exit_code == 0 and "no user JWT secret (api.user_jwt_secret not set)" in lines(res.output)["api"]


@pytest.mark.parametrize(("key", "why"), [
    ("k", "api.api_key ($T_ANCRE_KEY): 1 bytes: at least 32 bytes of random text are needed"),
    ("k" * 40, "api.api_key ($T_ANCRE_KEY): 40 bytes but guessable"),
    ("change-me-to-32-random-bytes-or-more", "api.api_key ($T_ANCRE_KEY): 36 bytes but guessable"),
    (hashlib.sha256(b"16").hexdigest()[:32], "api.api_key ($T_ANCRE_KEY): 32 bytes but guessable"),  # 16 random bytes
])
def test_check_refuses_a_weak_service_key_with_the_command_that_makes_one(root: Path, key: str, why: str) -> None:
    res = runner.invoke(app, ["check", "--config", str(write_config(root, extra=API))], env={"T_ANCRE_KEY": key})
    line = lines(res.output)["api"]
    assert res.exit_code == 1 and line.startswith(f"FAIL api              {why}"), line
    assert "fix: make each one with `openssl rand -hex 32`" in line and (len(key) < 8 or key not in line)  # never shown
    res = run("check", "--config", str(write_config(root)))
    assert "no service key configured" in lines(res.output)["api"]


def test_sync_checks_the_directory_first(root: Path) -> None:
    cfg = write_config(root)
    (root / "directory.json").write_text("{}", encoding="utf-8")
    res = run("sync", "--config", str(cfg))
    assert res.exit_code == 2 and "directory" in res.stderr, res.output
    assert json.loads(run("status", "--json", "--config", str(cfg)).stdout)["passes"] == []
