"""Text from a request, a document or a directory can't drive the admin's terminal (issue 43,
point 2). A question carrying ESC/OSC/CSI/BEL sequences — a window title, a screen clear, an
OSC 8 hyperlink to an outside address, an 8-bit CSI, a right-to-left override — is asked through
the API (uvicorn on 127.0.0.1), a document of the share and a group of the directory carry the
same, and every admin command that can print them is run: ``audit who-saw`` / ``user`` /
``stats`` / ``verify``, ``acl explain``, ``search``, ``ask``, ``report exposure`` (table, CSV,
JSON, HTML), ``sync`` and ``status`` (a file that fails to extract), and the daemon's log lines.
No output holds one of those characters raw: the text outputs write them out (``\\x1b``,
``<U+202E>``), the JSON outputs as JSON escapes that decode back to the text as received."""

from __future__ import annotations

import io
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support.corpus import copy_corpus, write_config
from typer.testing import CliRunner

from ancre.api.app import create_app
from ancre.app.cli import app
from ancre.app.runtime import Runtime
from ancre.app.server import ApiServer
from ancre.config import load_settings
from ancre.daemon.logs import JsonFormatter, VisibleFormatter

runner = CliRunner()
KEY = "test-service-key-0123456789"
TITLE = "\x1b]0;pwned\x07"  # OSC 0: set the window title, ended by BEL
CLEAR = "\x1b[2J"  # CSI 2 J: clear the screen
LINK = "\x1b]8;;https://attacker.example/x\x1b\\clique ici\x1b]8;;\x1b\\"  # OSC 8 hyperlink, ST-terminated
CSI8 = "\x9b31m"  # the 8-bit CSI (C1)
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
HOSTILE = TITLE + CLEAR + LINK + CSI8 + RLO
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What must never reach the admin raw (the newline aside)."""
QUESTION = f"Quel est le forfait mensuel {HOSTILE}du contrat de maintenance de l'étude Rochat ?"
DOC = f"Remboursement {CLEAR}{RLO}fdp.txt.md"  # in COMMUN: Everyone reads it, and it holds an IBAN
BROKEN = f"Cassé {TITLE}.docx"  # not a Word file: extraction fails, sync and status list it
GROUP = f"GG_{TITLE}Compta{RLO}"


def run(*args: str) -> object:
    return runner.invoke(app, list(args), catch_exceptions=False)


@dataclass
class Env:
    root: Path
    cfg: Path

    def c(self, *args: str) -> list[str]:
        return [*args, "--config", str(self.cfg)]


def flat(out: str) -> str:
    """The output with its layout removed (rich folds long cells over several lines)."""
    return re.sub(r"[\s│┃┆║]", "", out)


def clean(out: str, what: str) -> None:
    found = RAW.findall(out)
    assert not found, f"{what}: raw {sorted({hex(ord(c)) for c in found})} in\n{out}"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    root = copy_corpus(tmp_path_factory.mktemp("escaping"))
    cfg = write_config(root)
    (root / "share" / "COMMUN" / DOC).write_text(
        "Note de frais\n\nIBAN CH93 0076 2011 6238 5295 7, versé le 28 février.\n", encoding="utf-8")
    (root / "share" / "COMMUN" / BROKEN).write_bytes(b"PK\x03\x04 this is no Word file")
    directory = json.loads((root / "directory.json").read_text(encoding="utf-8"))
    directory["groups"][GROUP] = {"sid": "S-1-5-21-1004336348-1177238915-682003330-1190", "member_of": []}
    directory["users"]["alice"]["groups"].append(GROUP)
    (root / "directory.json").write_text(json.dumps(directory), encoding="utf-8")
    acl = json.loads((root / "acl.json").read_text(encoding="utf-8"))
    acl["entries"][f"COMMUN/{DOC}"] = {"aces": [["ALLOW", GROUP, "READ", ""]]}
    (root / "acl.json").write_text(json.dumps(acl), encoding="utf-8")
    res = run("sync", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    clean(res.output, "sync")  # the broken file fails, and is listed
    assert "failed   COMMUN/Cassé \\x1b]0;pwned\\x07.docx  corrupt" in res.output
    settings = load_settings(cfg, api={"api_key": KEY})
    rt = Runtime(settings)
    server = ApiServer(create_app(rt.query_core, settings, not_ready=rt.index_not_ready)).start()
    try:
        r = httpx.post(f"http://127.0.0.1:{server.port}/query", json={"question": QUESTION}, timeout=120,
                       headers={"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": "alice.martin@axonix.ch"})
        assert r.status_code in (200, 422), r.text
    finally:
        server.stop()
        rt.close()
    return Env(root, cfg)


def test_the_question_was_audited_as_received(env: Env) -> None:
    lines = [json.loads(x) for f in (env.root / "data" / "audit").glob("audit-*.jsonl") for x in f.read_text().splitlines()]
    assert [x["question"] for x in lines] == [QUESTION]


def test_audit_commands(env: Env) -> None:
    table = run(*env.c("audit", "who-saw", "DIRECTION"))
    assert table.exit_code == 0, table.output
    clean(table.output, "audit who-saw")
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x1b]8;;https://attacker.example/x\\x1b\\clique" in flat(table.output)
    assert "\\x9b31m<U+202E>du" in flat(table.output)
    got = run(*env.c("audit", "who-saw", "DIRECTION", "--json"))
    clean(got.stdout, "audit who-saw --json")
    assert {s["question"] for s in json.loads(got.stdout)["sightings"]} == {QUESTION}
    user = run(*env.c("audit", "user", "alice"))
    clean(user.stdout, "audit user")
    assert [r["question"] for r in json.loads(user.stdout)["records"]] == [QUESTION]
    for args in (("audit", "stats"), ("audit", "stats", "--json"), ("audit", "verify"), ("audit", "verify", "--json")):
        res = run(*env.c(*args))
        assert res.exit_code == 0, res.output
        clean(res.output, " ".join(args))


def test_acl_explain_search_and_ask(env: Env) -> None:
    res = run(*env.c("acl", "explain", "--as", "alice", f"COMMUN/{DOC}"))
    assert res.exit_code == 0, res.output
    clean(res.output, "acl explain")
    assert "GG_\\x1b]0;pwned\\x07Compta<U+202E>" in res.output and "\\x1b[2J<U+202E>fdp.txt.md" in res.output
    res = run(*env.c("search", "IBAN note de frais versé le 28 février", "--as", "alice"))
    clean(res.output, "search")
    assert "\\x1b[2J<U+202E>fdp.txt.md" in flat(res.output)
    res = run(*env.c("search", QUESTION, "--as", "alice", "--json"))
    clean(res.stdout, "search --json")
    assert json.loads(res.stdout)["results"]
    res = run(*env.c("search", "IBAN note de frais versé le 28 février", "--as", "alice", "--json"))
    assert DOC in {r["filename"] for r in json.loads(res.stdout)["results"]}  # escaped, not lost
    for args in (("ask", QUESTION, "--as", "alice"), ("ask", "Sur quel IBAN la note de frais est-elle versée ?",
                                                       "--as", "alice"), ("ask", QUESTION, "--as", "alice", "--json")):
        res = run(*env.c(*args))
        assert res.exit_code == 0, res.output
        clean(res.output, " ".join(args[:1] + args[2:]))


def test_report_exposure(env: Env, tmp_path: Path) -> None:
    table = run(*env.c("report", "exposure"))
    assert table.exit_code == 0, table.output
    clean(table.output, "report exposure")
    assert "\\x1b[2J<U+202E>fdp.txt.md" in flat(table.output)
    csv = run(*env.c("report", "exposure", "--csv"))
    clean(csv.stdout, "report exposure --csv")
    assert "\\x1b[2J<U+202E>fdp.txt.md" in csv.stdout
    got = run(*env.c("report", "exposure", "--json"))
    clean(got.stdout, "report exposure --json")
    assert DOC in {d["filename"] for f in json.loads(got.stdout)["folders"] for d in f["documents"]}
    page = tmp_path / "r.html"
    assert run(*env.c("report", "exposure", "--html", str(page))).exit_code == 0
    clean(page.read_text(encoding="utf-8"), "report exposure --html")


def test_sync_and_status_list_the_broken_file(env: Env) -> None:
    res = run(*env.c("sync", "--force"))
    clean(res.output, "sync")
    assert "\\x1b]0;pwned\\x07.docx" in flat(res.output)
    res = run(*env.c("sync", "--json"))
    clean(res.output, "sync --json")
    for args in (("status",), ("status", "--json")):
        res = run(*env.c(*args))
        clean(res.output, " ".join(args))
        assert "pwned" in res.output


def test_log_lines() -> None:
    """The daemon's log lines: JSON (the default) and plain text."""
    record = logging.LogRecord("ancre.daemon", logging.WARNING, __file__, 1, "cannot extract %s", (f"COMMUN/{BROKEN}",),
                               None)
    line = JsonFormatter().format(record)
    clean(line, "JSON log line")
    assert json.loads(line)["msg"] == f"cannot extract COMMUN/{BROKEN}"
    text = VisibleFormatter("%(levelname)s %(message)s").format(record)
    clean(text, "plain log line")
    assert text == "WARNING cannot extract COMMUN/Cassé \\x1b]0;pwned\\x07.docx"
    forged = logging.LogRecord("x", logging.INFO, __file__, 1, "a\nWARNING forged line", None, None)
    assert "\n" not in VisibleFormatter("%(message)s").format(forged)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(VisibleFormatter())
    handler.emit(record)
    clean(stream.getvalue().rstrip("\n"), "handler")
