"""Helpers over the bundled Axonix corpus for tests: copy it, build a config, and compute who may
read what from ``visibility.json`` *independently* of the ACL engine (the expected truth)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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


def readable_paths(user: str) -> set[tuple[str, str]]:
    """``{(source, relative path)}`` the user may read per ``visibility.json`` (expected truth)."""
    vis = json.loads((CORPUS / "visibility.json").read_text(encoding="utf-8"))
    rules = vis.get(user, [])
    out: set[tuple[str, str]] = set()
    share = CORPUS / "share"
    for rule in rules:
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
