"""The ``ancre`` CLI on the real corpus: sync, search --json, acl explain, status, config errors,
embedder mismatch and reindex (against a scripted Ollama-compatible server on 127.0.0.1)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from support.corpus import copy_corpus, write_config
from support.httpserver import ScriptedServer
from typer.testing import CliRunner

from ancre.app.cli import app

runner = CliRunner()  # click ≥ 8.2: .output mixes both streams, .stdout and .stderr stay apart
Q = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"


def run(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_corpus(tmp_path_factory.mktemp("cli"))
    cfg = write_config(root)
    res = run("sync", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    return cfg


def test_sync_summary_and_second_pass_embeds_nothing(cfg: Path) -> None:
    res = run("sync", "--config", str(cfg), "--json")
    assert res.exit_code == 0
    reports = json.loads(res.output)
    assert {r["source"] for r in reports} == {"partage", "sharepoint-direction"}
    assert all(r["embedded_chunks"] == 0 and r["outcome"] == "ok" for r in reports)
    assert sum(r["unchanged"] for r in reports) == 12


def test_search_json_trimmed_per_user(cfg: Path) -> None:
    out = {}
    for user in ("alice", "chloe"):
        res = run("search", Q, "--as", user, "--json", "--limit", "10", "--config", str(cfg))
        assert res.exit_code == 0, res.output
        data = json.loads(res.output)
        assert data["user"] == user
        for r in data["results"]:
            assert set(r) == {"filename", "path", "doc_id", "chunk_index", "score", "location", "found_by"}
        out[user] = {r["filename"] for r in data["results"]}
    assert "test-deny-explicite.docx" in out["alice"]
    assert "test-deny-explicite.docx" not in out["chloe"]


def test_search_for_unknown_user_says_so(cfg: Path) -> None:
    res = run("search", Q, "--as", "mallory", "--config", str(cfg))
    assert res.exit_code == 0
    assert "unknown to the directory" in res.output and "no readable result" in res.output
    res = run("search", Q, "--as", "mallory", "--json", "--config", str(cfg))
    assert json.loads(res.stdout) == {"user": "mallory", "results": [], "unverified": []}
    assert "unknown to the directory" in res.stderr


def test_empty_index_says_to_sync(tmp_path: Path) -> None:
    cfg = write_config(copy_corpus(tmp_path / "c"))
    res = run("search", Q, "--as", "alice", "--json", "--config", str(cfg))
    assert res.exit_code == 0 and json.loads(res.stdout)["results"] == []
    assert "run `ancre sync`" in res.stderr


def test_acl_explain_names_deny_ace_and_group(cfg: Path) -> None:
    res = run("acl", "explain", "--as", "chloe", "CLIENTS/test-deny-explicite.docx", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert "NOT READABLE" in res.output and "DENY" in res.output and "GG_Stagiaires" in res.output
    ok = run("acl", "explain", "--as", "bruno", "CLIENTS/test-deny-explicite.docx", "--config", str(cfg))
    assert "NOT READABLE" not in ok.output and "GG_Techniciens" in ok.output


def test_status_json(cfg: Path) -> None:
    res = run("status", "--json", "--config", str(cfg))
    data = json.loads(res.output)
    counts = {(c["source"], c["status"]): c["n"] for c in data["counts"]}
    assert counts == {("partage", "indexed"): 11, ("sharepoint-direction", "indexed"): 1}
    assert data["bm25_generation"] >= 1 and data["problems"] == []


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ("[embedder]\nkind = 'nope'\n", "embedder.kind"),
        ("[query]\ncandidatez = 3\n", "query.candidatez"),
        ("[[sources]]\nid = 'x y'\nroot = 'r'\n", "sources.1.id"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, extra: str, named: str) -> None:
    cfg = tmp_path / "ancre.toml"
    cfg.write_text(f"data_dir = 'd'\n[[sources]]\nid = 'ok'\nroot = 'r'\n{extra}", encoding="utf-8")
    res = runner.invoke(app, ["status", "--config", str(cfg)])
    assert res.exit_code == 2
    assert named in res.output


def _fake_ollama_embed(req) -> tuple[int, dict]:
    vecs = []
    for text in req.json["input"]:
        h = np.frombuffer(hashlib.sha256(text.encode()).digest(), dtype=np.uint8)[:16].astype(np.float32) + 1
        vecs.append((h / np.linalg.norm(h)).tolist())
    return 200, {"model": req.json["model"], "embeddings": vecs}


def test_embedder_mismatch_then_reindex(tmp_path: Path) -> None:
    root = copy_corpus(tmp_path / "c")
    cfg = write_config(root)
    assert run("sync", "--config", str(cfg), "--source", "sharepoint-direction").exit_code == 0
    with ScriptedServer() as srv:
        srv.route("POST", "/api/embed", _fake_ollama_embed)
        env = {"ANCRE_EMBEDDER__KIND": "ollama", "ANCRE_EMBEDDER__URL": srv.url}
        res = runner.invoke(app, ["search", "contrat", "--as", "alice", "--config", str(cfg)], env=env)
        assert res.exit_code == 2
        msg = " ".join(res.output.split())
        assert "e5-local:multilingual-e5-small" in msg and "ollama:nomic-embed-text" in msg
        assert "ancre reindex" in msg
        res = runner.invoke(app, ["reindex", "--yes", "--config", str(cfg)], env=env)
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["search", "contrat Baumont", "--as", "alice", "--json", "--config", str(cfg)], env=env)
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["results"]
        assert any(r.json and r.json["input"][0].startswith("search_query: ") for r in srv.requests_to("/api/embed"))


def test_acl_explain_accepts_unc_paths_and_flags_missing_files(cfg: Path) -> None:
    res = run("acl", "explain", "--as", "chloe", "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\test-deny-explicite.docx", "--config", str(cfg))
    assert "path: CLIENTS/test-deny-explicite.docx" in res.output and "NOT READABLE" in res.output
    res = run("acl", "explain", "--as", "alice", "CLIENTS/inexistant.docx", "--config", str(cfg))
    assert "not an indexable file" in " ".join(res.output.split())


def test_acl_explain_on_a_principals_source(cfg: Path) -> None:
    url = "https://axonix.sharepoint.example/sites/Direction/Documents partages/21_Contrat_Maintenance_Baumont_Industries.docx"
    res = run("acl", "explain", "--as", "alice", url, "--config", str(cfg))
    assert "source sharepoint-direction" in res.output and "result: READABLE" in res.output and "GG_Direction" in res.output
    res = run("acl", "explain", "--as", "bruno", url, "--config", str(cfg))
    assert "result: NOT READABLE" in res.output


def test_acl_explain_url_encoded_and_foreign_paths(cfg: Path) -> None:
    url = "https://axonix.sharepoint.example/sites/Direction/Documents%20partages/21_Contrat_Maintenance_Baumont_Industries.docx"
    res = run("acl", "explain", "--as", "alice", url, "--config", str(cfg))
    assert "source sharepoint-direction" in res.output and "result: READABLE" in res.output
    res = runner.invoke(app, ["acl", "explain", "--as", "alice", "\\\\SRV-FICHIERS\\Autre\\x.docx", "--config", str(cfg)])
    assert res.exit_code == 2 and "not under the unc_root" in " ".join(res.output.split())


def test_version() -> None:
    from ancre import __version__

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"ancre {__version__}"


@pytest.fixture(scope="module")
def unsynced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus and its config, not synced: ``acl explain`` reads rights, not the index."""
    return write_config(copy_corpus(tmp_path_factory.mktemp("cli-explain")))


SALARIES = "RH/Grille_Salariale_2026.docx"


@pytest.mark.parametrize("path", [f"CLIENTS/../{SALARIES}", f"CLIENTS\\..\\{SALARIES.replace('/', chr(92))}",
                                  f"\\\\SRV-FICHIERS\\Partage\\CLIENTS\\..\\{SALARIES.replace('/', chr(92))}"])
def test_acl_explain_answers_for_the_canonical_path(unsynced: Path, path: str) -> None:
    """Bruno reads CLIENTS, not RH; CLIENTS/../RH/x is RH/x, answered as RH/x is."""
    canonical = run("acl", "explain", "--as", "bruno", SALARIES, "--config", str(unsynced))
    res = run("acl", "explain", "--as", "bruno", path, "--config", str(unsynced))
    assert res.exit_code == 0 and canonical.exit_code == 0, res.output
    assert f"path: {SALARIES}" in res.output and "result: NOT READABLE" in res.output
    assert res.stdout == canonical.stdout
    assert "not an indexable file" not in res.output  # the file exists: the canonical path finds it


def test_acl_explain_refuses_paths_outside_the_source(unsynced: Path) -> None:
    root = unsynced.parent / "share"
    for path in ("../../etc/passwd", "CLIENTS/../../ancre.toml", "/etc/passwd", f"{root}/../acl.json",
                 "\\\\SRV-FICHIERS\\Partage\\..\\Autre\\x.docx", "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\..\\..\\x.docx",
                 "C:\\Windows\\win.ini"):
        res = runner.invoke(app, ["acl", "explain", "--as", "alice", path, "--config", str(unsynced)])
        assert res.exit_code == 2, (path, res.output)
        assert "error:" in res.stderr and ("outside" in res.stderr or "not under" in res.stderr), (path, res.stderr)
        assert "READABLE" not in res.stdout, path
    # an absolute path inside the folder source's root is its relative path
    res = run("acl", "explain", "--as", "bruno", f"{root}/{SALARIES}", "--config", str(unsynced))
    assert res.exit_code == 0 and f"path: {SALARIES}" in res.output and "result: NOT READABLE" in res.output
