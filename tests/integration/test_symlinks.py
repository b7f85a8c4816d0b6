"""A symbolic link in a folder source is never a way around a right.

A real folder tree with an NT-style manifest (an open folder PUBLIC, a restricted folder RH),
links to a restricted file, to a restricted folder, outside the root, into ancre's data
directory, back to an ancestor (a loop) and to nothing; synced with e5-local and the embedded
store, searched as users with the rights filter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.rights_tree import GROUPS, write_acl, write_config, write_directory
from typer.testing import CliRunner

from ancre.app.cli import app
from ancre.app.runtime import Runtime
from ancre.config import load_settings

SALARY = "grille salariale confidentielle zorblax"
OUTSIDE = "secret hors du partage quimbrel"


def _tree(tmp: Path) -> Path:
    share = tmp / "share"
    (share / "PUBLIC").mkdir(parents=True)
    (share / "RH").mkdir()
    (share / "PUBLIC" / "info.txt").write_text("note publique sur la cafétéria", encoding="utf-8")
    (share / "RH" / "grille.txt").write_text(SALARY, encoding="utf-8")
    (tmp / "outside").mkdir()
    (tmp / "outside" / "secret.txt").write_text(OUTSIDE, encoding="utf-8")
    (tmp / "data").mkdir()
    (tmp / "data" / "notes.txt").write_text("fichier interne d'ancre vexdrum", encoding="utf-8")
    pub = share / "PUBLIC"
    os.symlink("../RH/grille.txt", pub / "salaire.txt")
    os.symlink("../RH", pub / "rh")
    os.symlink(str(tmp / "outside" / "secret.txt"), pub / "passwd.txt")
    os.symlink(str(tmp / "outside"), pub / "dehors")
    os.symlink(str(tmp / "data"), pub / "audit")
    os.symlink("..", pub / "boucle")
    os.symlink("nulle-part.txt", pub / "casse.txt")
    write_directory(tmp)
    write_acl(tmp, {"PUBLIC": {"aces": [["ALLOW", "G_TOUS", "READ", "OI|CI"]]}, "RH": {"aces": [["ALLOW", "G_RH", "READ", "OI|CI"]]}})
    return share


def _runtime(tmp: Path, follow: bool) -> Runtime:
    return Runtime(load_settings(write_config(tmp, extra_source=f"follow_symlinks = {str(follow).lower()}")))


def _rows(rt: Runtime) -> dict[str, tuple[str, str | None]]:
    return {r.path: (r.status, r.reason) for r in rt.state.all_items()}


def _readable(rt: Runtime, user: str, query: str) -> dict[str, str]:
    res = rt.retriever.retrieve(query, rt.directory.principals(user), limit=50).results
    return {r.path: r.text for r in res}


LINKS = ("PUBLIC/salaire.txt", "PUBLIC/rh", "PUBLIC/passwd.txt", "PUBLIC/dehors", "PUBLIC/audit", "PUBLIC/boucle", "PUBLIC/casse.txt")


def test_links_are_skipped_by_default_with_a_status(tmp_path: Path) -> None:
    _tree(tmp_path)
    with _runtime(tmp_path, follow=False) as rt:
        rep = rt.engine.run_pass(rt.connectors()[0])
        assert rep.outcome == "ok", rep
        rows = _rows(rt)
        assert {p: rows[p] for p in LINKS} == dict.fromkeys(LINKS, ("skipped", "symlink"))
        assert {p for p, (s, _) in rows.items() if s == "indexed"} == {"PUBLIC/info.txt", "RH/grille.txt"}
        assert sorted(p for p, *_ in rep.problems) == sorted(LINKS)
        # staff (open folder only) never gets the salary, nor anything from outside the root
        for q in (SALARY, OUTSIDE, "vexdrum"):
            got = _readable(rt, "staff", q)
            assert "zorblax" not in " ".join(got.values()) and "quimbrel" not in " ".join(got.values()), got
            assert "vexdrum" not in " ".join(got.values())
        assert set(_readable(rt, "rh", SALARY)) >= {"RH/grille.txt"}
        assert not any(p.startswith("PUBLIC/") and "zorblax" in t for p, t in _readable(rt, "rh", SALARY).items())

        # an event on a new link (the watcher's per-path sync) does not bring it in either
        os.symlink("../RH/grille.txt", tmp_path / "share" / "PUBLIC" / "copie.txt")
        rep = rt.engine.sync_paths(rt.connectors()[0], ["PUBLIC/copie.txt", "PUBLIC/rh", "PUBLIC"])
        assert rep.new == 0 and rep.skipped >= 1, rep
        assert _rows(rt)["PUBLIC/copie.txt"] == ("skipped", "symlink")
        assert "PUBLIC/rh/grille.txt" not in _rows(rt)

    out = CliRunner().invoke(app, ["status", "--json", "--config", str(tmp_path / "ancre.toml")])
    assert out.exit_code == 0, out.output
    problems = {p["path"]: (p["status"], p["reason"]) for p in json.loads(out.stdout)["problems"]}
    assert problems["PUBLIC/salaire.txt"] == ("skipped", "symlink")


def test_followed_links_stay_inside_the_root_with_the_targets_rights(tmp_path: Path) -> None:
    _tree(tmp_path)
    with _runtime(tmp_path, follow=True) as rt:
        rep = rt.engine.run_pass(rt.connectors()[0])
        assert rep.outcome == "ok", rep
        rows = _rows(rt)
        assert rows["PUBLIC/salaire.txt"] == ("indexed", None)
        assert rows["PUBLIC/rh/grille.txt"] == ("indexed", None)
        assert rows["PUBLIC/passwd.txt"] == ("skipped", "symlink: target outside the source root")
        assert rows["PUBLIC/dehors"] == ("skipped", "symlink: target outside the source root")
        assert rows["PUBLIC/audit"] == ("skipped", "symlink: target outside the source root")  # data dir outside too
        assert rows["PUBLIC/boucle"] == ("skipped", "symlink: loop")
        assert rows["PUBLIC/casse.txt"][0] == "skipped"
        # each followed file carries the rights of its target's canonical path (RH), not the link's
        rh_sid, tous_sid = f"sid:{GROUPS['G_RH']}", f"sid:{GROUPS['G_TOUS']}"
        for p in rt.store.scroll("documents"):
            if p.payload.path in ("PUBLIC/salaire.txt", "PUBLIC/rh/grille.txt"):
                assert rh_sid in p.payload.acl_allow and tous_sid not in p.payload.acl_allow, p.payload
        assert not any("zorblax" in t for t in _readable(rt, "staff", SALARY).values())
        assert {"RH/grille.txt", "PUBLIC/salaire.txt", "PUBLIC/rh/grille.txt"} <= set(_readable(rt, "rh", SALARY))


def test_followed_links_never_enter_the_data_directory(tmp_path: Path) -> None:
    """ancre's data directory inside the source root (a careless config) is never listed, and
    a link into it is skipped."""
    share = _tree(tmp_path)
    cfg = write_config(tmp_path, extra_source="follow_symlinks = true")
    text = cfg.read_text(encoding="utf-8").replace('data_dir = "data"', 'data_dir = "share/PUBLIC/.ancre"')
    cfg.write_text(text, encoding="utf-8")
    (share / "PUBLIC" / ".ancre").mkdir()
    (share / "PUBLIC" / ".ancre" / "journal.txt").write_text("journal interne vexdrum", encoding="utf-8")
    os.symlink(".ancre", share / "PUBLIC" / "interne")
    with Runtime(load_settings(cfg)) as rt:
        rep = rt.engine.run_pass(rt.connectors()[0])
        assert rep.outcome == "ok", rep
        rows = _rows(rt)
        assert rows["PUBLIC/interne"] == ("skipped", "symlink: target in ancre's data directory")
        assert not any(p.startswith("PUBLIC/.ancre") for p in rows)


@pytest.mark.parametrize("follow", [False, True])
def test_a_file_replaced_by_a_link_after_listing_is_not_read(tmp_path: Path, follow: bool) -> None:
    """Between the listing and the read, a listed file becomes a link to a file outside the
    root: its bytes are not read through it."""
    share = _tree(tmp_path)
    with _runtime(tmp_path, follow=follow) as rt:
        conn = rt.connectors()[0]
        item = next(i for i in conn.list_items() if i.path == "PUBLIC/info.txt")
        (share / "PUBLIC" / "info.txt").unlink()
        os.symlink(str(tmp_path / "outside" / "secret.txt"), share / "PUBLIC" / "info.txt")
        with pytest.raises(OSError):
            conn.fetch_content(item)
