"""The admin's reports on the real Axonix corpus.

- ``ancre report exposure`` finds exactly the planted exposures — an AVS number and an IBAN in
  ``COMMUN`` (Everyone reads it), a salary table in ``INTRANET`` (all staff, through
  GG_Personnel) — with who reads them and the ACE that opened them, nothing in the restricted
  folders and nothing in the broadly readable documentation; as a table, JSON, CSV and HTML.
- ``ancre audit who-saw / user / stats`` on an audit written by real questions through the API
  (uvicorn on 127.0.0.1) and the CLI, including a document whose rights changed after it was shown
  and one since deleted, and a pseudonymised log read with its key.
- ``ancre audit verify`` on that audit, then on a tampered copy.
"""

from __future__ import annotations

import json
import shutil
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

runner = CliRunner()
KEY = "test-service-key-0123456789"
AVS_DOC = "COMMUN/Remboursement_Frais_Fevrier_2026.docx"
SALARY_DOC = "INTRANET/Remunerations_Equipe_Commerciale_2026.xlsx"
ROCHAT = "DIRECTION/03_Contrat_Maintenance_Etude_Rochat.docx"
UNC = "\\\\SRV-FICHIERS\\Partage\\"
Q_ROCHAT = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"
Q_PAY = "Quelle est la rémunération mensuelle brute de Sophie Keller ?"
Q_IBAN = "Sur quel IBAN le remboursement des frais de février est-il versé ?"


def run(*args: str) -> object:
    return runner.invoke(app, list(args), catch_exceptions=False)


def cli_json(*args: str) -> object:
    res = run(*args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@dataclass
class Corpus:
    root: Path
    cfg: Path

    def c(self, *args: str) -> list[str]:
        return [*args, "--config", str(self.cfg)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = copy_corpus(tmp_path_factory.mktemp("reports"))
    cfg = write_config(root)
    res = run("sync", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    return Corpus(root, cfg)


# ----------------------------------------------------------------------------- exposure


def test_exposure_finds_exactly_the_planted_exposures(corpus: Corpus) -> None:
    rep = cli_json(*corpus.c("report", "exposure", "--json"))
    exposed = {d["path"]: d for f in rep["folders"] for d in f["documents"]}
    sensitive = {p: {x["kind"]: x["count"] for x in d["findings"]} for p, d in exposed.items() if d["findings"]}
    assert sensitive == {AVS_DOC: {"avs": 1, "iban": 1}, SALARY_DOC: {"salary": 3}}
    # the documentation is readable by Authenticated Users: exposed, scanned, nothing found
    assert set(exposed) - set(sensitive) == {
        "DOCUMENTATION/09-pipeline-llm.md", "DOCUMENTATION/11-correlations-yaml.md", "DOCUMENTATION/Politique_Securite_SI.pdf",
    }
    avs, pay = exposed[AVS_DOC]["reach"], exposed[SALARY_DOC]["reach"]
    assert (avs["name"], avs["basis"], avs["readers"], avs["users"]) == ("Everyone", "principal", 5, 5)
    assert avs["opened_by"] == "allowed by ALLOW ACE inherited from COMMUN for Everyone (S-1-1-0)"
    assert (pay["name"], pay["basis"], pay["readers"], pay["users"]) == ("AXONIX\\GG_Personnel", "share", 5, 5)
    assert pay["opened_by"].startswith("allowed by ALLOW ACE inherited from INTRANET for AXONIX\\GG_Personnel")
    # the correctly restricted folders are not reported: not scanned, listed as restricted
    restricted = {r["location"] for r in rep["restricted"]}
    assert {UNC + f + "\\" for f in ("RH", "DIRECTION", "CLIENTS", "COMMERCIAL", "ARCHIVES")} <= restricted
    assert rep["exposed"] == 5 and rep["sensitive"] == 2 and rep["undecided"] == 0 and rep["users"] == 5
    assert "756.9217" not in json.dumps(rep) and "CH93" not in json.dumps(rep)  # never a value


def test_exposure_table_csv_and_html(corpus: Corpus, tmp_path: Path) -> None:
    res = run(*corpus.c("report", "exposure"))
    assert res.exit_code == 0, res.output
    assert "Remboursement_Frais_Fevrier_2026" in res.stdout and "numéro AVS ×1, IBAN ×1" in res.stdout
    assert "2 with sensitive data" in res.stdout and "nothing sensitive found" in res.stdout
    res = run(*corpus.c("report", "exposure", "--csv"))
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("source,folder,path,filename,broad_principal") and len(lines) == 3
    assert {line.split(",")[2] for line in lines[1:]} == {AVS_DOC, SALARY_DOC}
    page = tmp_path / "exposition.html"
    res = run(*corpus.c("report", "exposure", "--html", str(page)))
    assert res.exit_code == 0, res.output
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "Remunerations_Equipe_Commerciale_2026.xlsx" in text
    assert "<script" not in text and "src=" not in text and "href=" not in text  # self-contained
    assert "756.9217" not in text and "CH93" not in text


def test_exposure_without_asking_the_sources(corpus: Corpus) -> None:
    rep = cli_json(*corpus.c("report", "exposure", "--json", "--no-explain", "--source", "partage"))
    doc = next(d for f in rep["folders"] for d in f["documents"] if d["path"] == AVS_DOC)
    assert doc["reach"]["opened_by"] is None and "granted to Everyone" in doc["reach"]["why_not"]


# ----------------------------------------------------------------------------- who saw what


@pytest.fixture(scope="module")
def audited(corpus: Corpus) -> Corpus:
    """Questions through the API (alice, bruno) and the CLI (david, chloe); then INTRANET is
    restricted to GG_RH and the COMMUN form deleted, and the index synced again."""
    settings = load_settings(corpus.cfg, api={"api_key": KEY})
    rt = Runtime(settings)
    server = ApiServer(create_app(rt.query_core, settings, not_ready=rt.index_not_ready)).start()
    try:
        for user, q in (("alice.martin@axonix.ch", Q_ROCHAT), ("bruno.favre@axonix.ch", Q_PAY),
                        ("bruno.favre@axonix.ch", Q_ROCHAT)):
            r = httpx.post(f"http://127.0.0.1:{server.port}/query", json={"question": q}, timeout=120,
                           headers={"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": user})
            assert r.status_code in (200, 422), r.text
    finally:
        server.stop()
        rt.close()
    for user, q in (("david", Q_PAY), ("chloe", Q_IBAN)):
        res = run(*corpus.c("ask", q, "--as", user, "--json"))
        assert res.exit_code == 0, res.output
    acl = json.loads((corpus.root / "acl.json").read_text(encoding="utf-8"))
    acl["entries"]["INTRANET"] = {"protected": True, "aces": [["ALLOW", "GG_RH", "READ", "OI|CI"]]}
    (corpus.root / "acl.json").write_text(json.dumps(acl), encoding="utf-8")
    (corpus.root / "share" / AVS_DOC).unlink()
    res = run(*corpus.c("sync"))
    assert res.exit_code == 0, res.output
    return corpus


def logged(corpus: Corpus, folder: str, filename: str | None = None) -> set[tuple[str, str]]:
    """(account, question) of every audit line whose sources hold the file (or any file of the
    folder), read straight from the daily files."""
    out = set()
    for f in sorted((corpus.root / "data" / "audit").glob("audit-*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if any(s["location"] == UNC + folder + "\\" and filename in (None, s["filename"]) for s in rec["sources"]):
                out.add((rec["account"], rec["question"]))
    return out


def test_who_saw_a_document_whose_rights_changed_since(audited: Corpus) -> None:
    got = cli_json(*audited.c("audit", "who-saw", SALARY_DOC, "--json"))
    rows = got["sightings"]
    expected = logged(audited, "INTRANET", Path(SALARY_DOC).name)
    assert {("bruno", Q_PAY), ("david", Q_PAY)} <= expected  # its extracts went before the model for both
    assert {(r["account"], r["question"]) for r in rows} == expected
    assert {"bruno.favre@axonix.ch", "david"} <= {r["user"] for r in rows}  # as given: the API's header, --as
    assert all(r["now"] == "changed" and r["filename"] == Path(SALARY_DOC).name for r in rows)
    assert {"bruno", "david"} <= set(got["people"])
    # and the report of today no longer finds it exposed
    rep = cli_json(*audited.c("report", "exposure", "--json"))
    assert SALARY_DOC not in {d["path"] for f in rep["folders"] for d in f["documents"]}
    table = run(*audited.c("audit", "who-saw", SALARY_DOC))
    assert "changed since" in table.stdout and f"{len(rows)} time(s), {len(got['people'])} person(s)" in table.stdout


def test_who_saw_a_deleted_document_by_its_folder(audited: Corpus) -> None:
    got = cli_json(*audited.c("audit", "who-saw", UNC + "COMMUN\\", "--json"))
    rows = got["sightings"]
    assert {(r["account"], r["question"]) for r in rows} == logged(audited, "COMMUN") and ("chloe", Q_IBAN) in logged(
        audited, "COMMUN")
    assert all(r["now"] == "deleted" and r["location"] == UNC + "COMMUN\\" for r in rows)


def test_who_saw_a_folder_by_relative_path_and_the_period(audited: Corpus) -> None:
    got = cli_json(*audited.c("audit", "who-saw", "DIRECTION", "--json"))
    assert {r["account"] for r in got["sightings"]} == {"alice"}  # bruno asked too, but may not read it
    assert {(r["account"], r["question"]) for r in got["sightings"]} == logged(audited, "DIRECTION")
    assert all(r["now"] == "unchanged" for r in got["sightings"])
    assert cli_json(*audited.c("audit", "who-saw", "DIRECTION", "--json", "--since", "2100-01-01"))["sightings"] == []
    assert cli_json(*audited.c("audit", "who-saw", "DIRECTION", "--json", "--until", "2000-01-01"))["sightings"] == []
    assert cli_json(*audited.c("audit", "who-saw", "DIRECTION", "--json", "--since", "1d"))["sightings"]


def test_audit_user_is_everything_about_one_person(audited: Corpus) -> None:
    got = cli_json(*audited.c("audit", "user", "bruno", "--since", "2000-01-01"))
    assert got["account"] == "bruno" and got["count"] == 2
    assert {r["question"] for r in got["records"]} == {Q_PAY, Q_ROCHAT}
    assert all(r["account"] == "bruno" and "hash" not in r and "prev" not in r for r in got["records"])
    assert cli_json(*audited.c("audit", "user", "bruno.favre@axonix.ch"))["count"] == 2  # by UPN too


def test_audit_stats(audited: Corpus) -> None:
    st = cli_json(*audited.c("audit", "stats", "--json"))
    assert st["total"]["questions"] == 5 and st["total"]["users"] == 4
    assert st["total"]["refusals"] >= 1  # bruno may not read the Rochat contract
    assert sum(d["questions"] for d in st["days"]) == 5
    assert "questions" in run(*audited.c("audit", "stats")).stdout


def test_verify_the_audit_then_a_tampered_copy(audited: Corpus, tmp_path: Path) -> None:
    res = run(*audited.c("audit", "verify"))
    assert res.exit_code == 0 and "chain intact" in res.stdout, res.output
    settings = load_settings(audited.cfg)
    copy = tmp_path / "audit"
    shutil.copytree(Path(settings.data_dir) / "audit", copy)
    (f,) = sorted(copy.glob("audit-*.jsonl"))
    lines = f.read_bytes().splitlines()
    lines[1] = lines[1].replace(b'"question":"', b'"question":"(modifi\xc3\xa9) ', 1)
    f.write_bytes(b"".join(line + b"\n" for line in lines))
    cfg = audited.cfg.with_name("tampered.toml")
    cfg.write_text(audited.cfg.read_text(encoding="utf-8") + f'\n[audit]\ndir = "{copy}"\n', encoding="utf-8")
    res = run("audit", "verify", "--config", str(cfg))
    assert res.exit_code == 1 and f"{f.name} line 2" in res.stdout and "changed" in res.stdout, res.output
    got = json.loads(run("audit", "verify", "--json", "--config", str(cfg)).stdout)
    # and the copy was never witnessed (the state witness knows the original folder only)
    assert [(p["kind"], p["line"]) for p in got["problems"]] == [("witness", None), ("changed", 2)]
    got = json.loads(run("audit", "verify", "--json", "--started-without-witness", "--config", str(cfg)).stdout)
    assert [(p["kind"], p["line"]) for p in got["problems"]] == [("changed", 2)]


def test_pseudonymised_log_read_with_its_key(audited: Corpus, tmp_path: Path) -> None:
    cfg = audited.cfg.with_name("pseudo.toml")
    cfg.write_text(audited.cfg.read_text(encoding="utf-8") + '\n[audit]\ndir = "audit-p"\npseudonymize = true\n',
                   encoding="utf-8")
    res = run("ask", Q_ROCHAT, "--as", "alice", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    raw = next((audited.root / "audit-p").glob("audit-*.jsonl")).read_text(encoding="utf-8")
    assert '"alice"' not in raw and "hmac-sha256:" in raw
    got = cli_json("audit", "who-saw", ROCHAT, "--json", "--config", str(cfg))
    assert [r["account"] for r in got["sightings"]] == ["alice"]  # named back with the key
    assert cli_json("audit", "user", "alice", "--config", str(cfg))["count"] == 1
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(b"w" * 32)
    got = cli_json("audit", "who-saw", ROCHAT, "--json", "--config", str(cfg), "--key-file", str(wrong))
    assert got["sightings"][0]["account"].startswith("hmac-sha256:") and got["notes"]
