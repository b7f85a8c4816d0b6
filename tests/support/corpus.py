"""Helpers over the bundled Axonix corpus for tests: copy it, build a config, and compute who may
read what from ``visibility.json`` *independently* of the ACL engine (the expected truth)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "examples" / "axonix"
USERS = ("alice", "bruno", "chloe", "david", "emma")


def copy_corpus(dest: Path) -> Path:
    """Copy the corpus (share, sharepoint, acl.json, directory.json) into ``dest``; returns it."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("share", "sharepoint"):
        shutil.copytree(CORPUS / name, dest / name)
    for name in ("acl.json", "directory.json", "visibility.json", "questions.json"):
        shutil.copy2(CORPUS / name, dest / name)
    return dest


def write_config(dest: Path, *, extra: str = "") -> Path:
    """An ``ancre.toml`` in ``dest`` like the bundled one (two folder sources), e5-local, edge store."""
    cfg = dest / "ancre.toml"
    cfg.write_text(
        f'''data_dir = "data"
[embedder]
kind = "e5-local"
[store]
kind = "edge"
[directory]
kind = "file"
path = "directory.json"
cache_ttl_s = 0
[sync]
mass_delete_min_items = 4
[[sources]]
id = "partage"
root = "share"
unc_root = '\\\\SRV-FICHIERS\\Partage'
acl_manifest = "acl.json"
collection_overrides = {{ DOCUMENTATION = "documentation" }}
[[sources]]
id = "sharepoint-direction"
root = "sharepoint/Direction/Documents partages"
unc_root = "https://axonix.sharepoint.example/sites/Direction/Documents partages"
principals = ["GG_Direction"]
{extra}''',
        encoding="utf-8",
    )
    return cfg


VISIBILITY_NOBODY = "nothing"
"""The rule of a user who reads nothing (``"unknown identity": ["nothing"]``)."""
UNKNOWN_IDENTITY = "unknown identity"
"""visibility.json's key for an identity the directory does not know."""


def load_visibility(path: Path | None = None) -> dict[str, tuple[str, ...]]:
    """``{user: rules}`` of ``visibility.json`` (the expected truth of who reads what), checked:
    every key is a user of the corpus directory (or :data:`UNKNOWN_IDENTITY`), every rule a
    top-level folder of ``share/`` (``"CLIENTS"``, ``"CLIENTS (except x.docx)"`` with ``x.docx`` in
    it), ``"sharepoint:<site>"`` of ``sharepoint/``, or :data:`VISIBILITY_NOBODY`. Raises
    ``ValueError`` naming the first unknown user, folder, file or site (a misspelt key would make
    the oracle expect nothing)."""
    path = path or CORPUS / "visibility.json"
    base = path.parent
    raw = TypeAdapter(dict[str, list[str]]).validate_json(path.read_bytes())
    users = set(json.loads((base / "directory.json").read_text(encoding="utf-8"))["users"])
    for user, rules in raw.items():
        if user not in users and user != UNKNOWN_IDENTITY:
            raise ValueError(f"{path}: {user!r}: not a user of directory.json")
        for rule in rules:
            problem = _rule_problem(base, rule)
            if problem:
                raise ValueError(f"{path}: {user}: {rule!r}: {problem}")
    return {u: tuple(r) for u, r in raw.items()}


def _rule_problem(base: Path, rule: str) -> str | None:
    """Why a visibility rule names nothing of the corpus at ``base``, ``None`` when it names something."""
    if rule == VISIBILITY_NOBODY:
        return None
    if rule.startswith("sharepoint:"):
        return None if (base / "sharepoint" / rule.split(":", 1)[1]).is_dir() else "no such site under sharepoint/"
    folder, _, exc = rule.partition(" (except ")
    if not (base / "share" / folder).is_dir():
        return "no such folder under share/"
    if exc and not any(p.name == exc.rstrip(")") for p in (base / "share" / folder).rglob("*")):
        return f"no file {exc.rstrip(')')!r} in it"
    return None


class QuestionCase(BaseModel):
    """One question of ``questions.json``: who asks (``as``), what (``q``), the document that must
    answer (``expect_source``) with the ``facts`` the answer must hold, or ``expect_refusal`` and
    ``why``. An unknown key is refused, named."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    q: str
    as_: str = Field(alias="as")
    expect_source: str | None = None
    facts: tuple[str, ...] = ()
    expect_refusal: bool = False
    why: str | None = None


def load_question_set(path: Path | None = None) -> list[dict[str, Any]]:
    """The questions of ``questions.json``, each checked as a :class:`QuestionCase` (an unknown
    key raises ``pydantic.ValidationError`` naming it), as the dicts the file holds."""
    path = path or CORPUS / "questions.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    for q in raw:
        QuestionCase.model_validate(q)
    return list(raw)


def readable_paths(user: str) -> set[tuple[str, str]]:
    """``{(source, relative path)}`` the user may read per ``visibility.json`` (expected truth)."""
    rules = load_visibility().get(user, ())
    out: set[tuple[str, str]] = set()
    share = CORPUS / "share"
    for rule in rules:
        if rule == VISIBILITY_NOBODY:
            continue
        if rule.startswith("sharepoint:"):
            site = rule.split(":", 1)[1]
            lib = CORPUS / "sharepoint" / site / "Documents partages"
            out |= {("sharepoint-direction", p.relative_to(lib).as_posix()) for p in lib.rglob("*") if p.is_file()}
            continue
        folder, _, exc = rule.partition(" (except ")
        excluded = exc.rstrip(")") if exc else None
        for p in (share / folder).rglob("*"):
            if p.is_file() and p.name != excluded:
                out.add(("partage", p.relative_to(share).as_posix()))
    return out
