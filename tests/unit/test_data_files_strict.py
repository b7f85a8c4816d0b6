"""Every data file ancre reads refuses an unknown key, naming it (issue 46): the directory file, an
ACL manifest, and the test oracles that say who reads what and what an answer must hold
(visibility.json, eval.json, questions.json). A misspelt key used to be ignored: a user whose
``"member_of"`` stood for ``"groups"`` read nothing, and ``ancre check --as`` her said « all checks
passed »."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError
from support.corpus import CORPUS, load_question_set, load_visibility
from support.evaluation import load_questions

from ancre.acl.directory import FileDirectory
from ancre.acl.manifest import AclManifest
from ancre.errors import AclError, DirectoryError


def _directory(tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    raw = json.loads((CORPUS / "directory.json").read_text(encoding="utf-8"))
    edit(raw)
    p = tmp_path / "directory.json"
    p.write_text(json.dumps(raw), encoding="utf-8")
    return p


def test_the_bundled_files_load() -> None:
    FileDirectory(CORPUS / "directory.json").principals("alice")
    AclManifest.load(CORPUS / "acl.json", FileDirectory(CORPUS / "directory.json"))
    assert set(load_visibility()) >= {"alice", "unknown identity"}
    assert load_questions() and load_question_set()


def test_a_users_member_of_for_groups_is_refused_by_name(tmp_path: Path) -> None:
    def misspell(raw: dict) -> None:  # type: ignore[type-arg]
        raw["users"]["bruno"]["member_of"] = raw["users"]["bruno"].pop("groups")

    d = FileDirectory(_directory(tmp_path, misspell))
    with pytest.raises(DirectoryError, match=r"users\.bruno\.member_of: Extra inputs are not permitted"):
        d.principals("bruno")


@pytest.mark.parametrize(("where", "key"), [((), "domain"), (("groups", "GG_RH"), "members"), (("well_known",), None)])
def test_any_unknown_directory_key_is_named(tmp_path: Path, where: tuple[str, ...], key: str | None) -> None:
    def add(raw: dict) -> None:  # type: ignore[type-arg]
        node = raw
        for k in where:
            node = node[k]
        node[key or "Everyone"] = "x" if key else 12  # well_known: a SID must be a string
    d = FileDirectory(_directory(tmp_path, add))
    with pytest.raises(DirectoryError, match=r"\.".join((*where, key or "Everyone"))):
        d.principals("alice")


def test_the_note_key_is_free_text(tmp_path: Path) -> None:
    d = FileDirectory(_directory(tmp_path, lambda raw: raw.update(note="revu le 5 décembre")))
    assert d.principals("alice")


def test_an_unknown_manifest_key_is_refused_by_name(tmp_path: Path) -> None:
    raw = json.loads((CORPUS / "acl.json").read_text(encoding="utf-8"))
    raw["sharepoint"] = {"Direction": {"members": ["GG_Direction"]}}
    p = tmp_path / "acl.json"
    p.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(AclError, match=r"sharepoint: Extra inputs are not permitted"):
        AclManifest.load(p, FileDirectory(CORPUS / "directory.json"))


def _corpus_copy(tmp_path: Path) -> Path:
    for name in ("directory.json", "visibility.json"):
        shutil.copy2(CORPUS / name, tmp_path / name)
    for name in ("share", "sharepoint"):
        (tmp_path / name).symlink_to(CORPUS / name)
    return tmp_path


@pytest.mark.parametrize(("user", "rule", "named"), [
    ("bruno ", ["CLIENTS"], "not a user of directory.json"),
    ("bruno", ["CLIENT"], "no such folder under share/"),
    ("chloe", ["CLIENTS (except test-deny.docx)"], "no file 'test-deny.docx' in it"),
    ("alice", ["sharepoint:Directoin"], "no such site"),
])
def test_visibility_refuses_what_the_corpus_does_not_hold(tmp_path: Path, user: str, rule: list[str], named: str) -> None:
    base = _corpus_copy(tmp_path)
    vis = json.loads((base / "visibility.json").read_text(encoding="utf-8"))
    vis[user] = rule
    (base / "visibility.json").write_text(json.dumps(vis), encoding="utf-8")
    with pytest.raises(ValueError, match=named):
        load_visibility(base / "visibility.json")


def test_an_eval_set_refuses_an_unknown_key(tmp_path: Path) -> None:
    raw = json.loads((CORPUS / "eval.json").read_text(encoding="utf-8"))
    raw[0]["expected"] = raw[0].pop("expect")
    p = tmp_path / "eval.json"
    p.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ValidationError, match=r"0\.expected"):
        load_questions(p)


def test_a_question_set_refuses_an_unknown_key(tmp_path: Path) -> None:
    raw = json.loads((CORPUS / "questions.json").read_text(encoding="utf-8"))
    raw[1]["expect_sources"] = raw[1].pop("expect_source", None)
    p = tmp_path / "questions.json"
    p.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ValidationError, match="expect_sources"):
        load_question_set(p)
