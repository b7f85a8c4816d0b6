"""Documents whose ACL can't be read are problems: counted in the pass report and ``ancre sync``,
listed with their reason in ``ancre status`` (text and ``--json``) — on the folder source with a
broken ACL-manifest entry (the Samba side is in ``test_check_and_directory_tls.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.corpus import copy_corpus, write_config
from typer.testing import CliRunner

from ancre.acl.engine import SecurityDescriptor, acl_problem, read_acl
from ancre.app.cli import app
from ancre.models import Acl

runner = CliRunner()
DENY_FILE = "CLIENTS/test-deny-explicite.docx"


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def break_entry(root: Path, key: str) -> None:
    """Give the manifest entry ``key`` an ACE with a right that does not exist."""
    path = root / "acl.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["entries"][key] = {"aces": [["ALLOW", "GG_Direction", "READZ", ""]]}
    path.write_text(json.dumps(manifest), encoding="utf-8")


def test_acl_problem_tells_unreadable_from_deliberately_closed() -> None:
    assert acl_problem(Acl(frozenset({"sid:S-1-1-0"}))) is None
    assert acl_problem(read_acl(SecurityDescriptor(dacl=()))) is None  # an empty DACL says "nobody"
    assert acl_problem(read_acl(None, unreadable_reason="gone")) == "unreadable security descriptor: gone"
    assert acl_problem(Acl.nobody("acl_unreadable: DACL: ACL revision 9")) == "acl_unreadable: DACL: ACL revision 9"


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    root = copy_corpus(tmp_path / "c")
    return root, write_config(root)


def test_broken_manifest_entry_is_counted_by_sync_and_listed_by_status(corpus: tuple[Path, Path]) -> None:
    root, cfg = corpus
    break_entry(root, DENY_FILE)  # before the first pass: the document is new
    res = run("sync", "--json", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    rep = {r["source"]: r for r in json.loads(res.stdout)}["partage"]
    assert rep["outcome"] == "ok" and rep["acl_unreadable"] == 1 and rep["new"] == 11
    ((path, _kind, reason),) = [p for p in rep["problems"] if p[1] == "acl_unreadable"]
    assert path == DENY_FILE and "READZ" in reason and DENY_FILE in reason

    # text output of a second pass (document unchanged): the count and the document again
    res = run("sync", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "1 document(s) readable by nobody" in res.output and DENY_FILE in res.output and "READZ" in res.output

    res = run("status", "--json", "--config", str(cfg))
    data = json.loads(res.stdout)
    assert data["acl_unreadable"] == {"partage": 1}
    (problem,) = data["problems"]
    assert problem["source"] == "partage" and problem["path"] == DENY_FILE and problem["status"] == "indexed"
    assert problem["problem"] == "acl_unreadable" and "READZ" in problem["reason"]
    res = run("status", "--config", str(cfg))
    assert "partage: 1 document(s) readable by nobody" in res.output
    assert f"acl_unreadable partage:{DENY_FILE}" in " ".join(res.output.split()) and "READZ" in res.output

    # fixed: the next pass clears it
    (root / "acl.json").write_text((Path(__file__).parents[2] / "examples/axonix/acl.json").read_text(encoding="utf-8"))
    res = run("sync", "--json", "--config", str(cfg))
    rep = {r["source"]: r for r in json.loads(res.stdout)}["partage"]
    assert rep["acl_unreadable"] == 0 and rep["acl_only"] == 1
    data = json.loads(run("status", "--json", "--config", str(cfg)).stdout)
    assert data["problems"] == [] and data["acl_unreadable"] == {}


def test_an_entry_broken_after_indexing_is_reported_too(corpus: tuple[Path, Path]) -> None:
    """ACL-only change of an indexed folder: every document under it becomes a problem; a later
    change of reason with the same (empty) rights still updates the reason shown."""
    root, cfg = corpus
    assert run("sync", "--config", str(cfg)).exit_code == 0
    break_entry(root, "RH")
    rep = {r["source"]: r for r in json.loads(run("sync", "--json", "--config", str(cfg)).stdout)}["partage"]
    rh = {p for p, kind, _ in rep["problems"] if kind == "acl_unreadable"}
    assert rh and all(p.startswith("RH/") for p in rh) and rep["acl_unreadable"] == len(rh) == rep["acl_only"]
    manifest = json.loads((root / "acl.json").read_text(encoding="utf-8"))
    manifest["entries"]["RH"] = {"aces": [["ALLOW", "GG_Direction", "READ", "XX"]]}
    (root / "acl.json").write_text(json.dumps(manifest), encoding="utf-8")
    rep = {r["source"]: r for r in json.loads(run("sync", "--json", "--config", str(cfg)).stdout)}["partage"]
    assert rep["acl_only"] == 0 and rep["acl_unreadable"] == len(rh)
    reasons = {p["reason"] for p in json.loads(run("status", "--json", "--config", str(cfg)).stdout)["problems"]}
    assert reasons and all("'XX'" in r for r in reasons)
