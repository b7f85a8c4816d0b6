"""A small directory (users, nested groups) and an NT-style ACL manifest written as files, for
tests that build folder sources with rights: ``tests/integration/test_symlinks.py`` and the
link property test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DOMAIN = "S-1-5-21-7-8-9"
GROUPS = {"G_RH": f"{DOMAIN}-1101", "G_TOUS": f"{DOMAIN}-1102"}
USERS = {"rh": f"{DOMAIN}-1201", "staff": f"{DOMAIN}-1202"}
MEMBERSHIP = {"rh": ["G_RH", "G_TOUS"], "staff": ["G_TOUS"]}


def write_directory(dest: Path) -> Path:
    """``dest/directory.json``: users ``rh`` (G_RH, G_TOUS) and ``staff`` (G_TOUS)."""
    d = {
        "domain_sid": DOMAIN,
        "netbios": "T",
        "groups": {g: {"sid": s, "member_of": []} for g, s in GROUPS.items()},
        "users": {u: {"sid": s, "upn": f"{u}@t.test", "groups": MEMBERSHIP[u]} for u, s in USERS.items()},
        "well_known": {"Everyone": "S-1-1-0", "Authenticated Users": "S-1-5-11", "Administrators": "S-1-5-32-544"},
    }
    p = dest / "directory.json"
    p.write_text(json.dumps(d), encoding="utf-8")
    return p


def write_acl(dest: Path, entries: dict[str, Any]) -> Path:
    """``dest/acl.json``: a protected root (Administrators only) plus ``entries``."""
    p = dest / "acl.json"
    allx = {"": {"protected": True, "aces": [["ALLOW", "Administrators", "FULL", "OI|CI"]]}, **entries}
    p.write_text(json.dumps({"share": "S", "entries": allx}), encoding="utf-8")
    return p


def write_config(dest: Path, *, root: str = "share", extra_source: str = "", extra: str = "") -> Path:
    """``dest/ancre.toml``: one folder source ``s`` at ``dest/root`` with ``acl.json``, e5-local,
    the embedded store under ``dest/data``."""
    cfg = dest / "ancre.toml"
    cfg.write_text(
        'data_dir = "data"\n[directory]\nkind = "file"\npath = "directory.json"\ncache_ttl_s = 0\n'
        f'[sync]\nmass_delete_min_items = 1000\n{extra}\n'
        f'[[sources]]\nid = "s"\nroot = "{root}"\nacl_manifest = "acl.json"\n{extra_source}\n',
        encoding="utf-8",
    )
    return cfg
