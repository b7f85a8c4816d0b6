"""``SyncEngine.sync_paths`` (the daemon's per-event sync) on a real folder tree, e5-local and the
embedded store, in process."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.daemon_proc import token, write_daemon_config

from ancre.app.runtime import Runtime
from ancre.config import load_settings


def _tree(root: Path) -> None:
    files = {
        "a.txt": f"premier fichier {token(1)}",
        "projets/p1.txt": f"projet un {token(11)}",
        "projets/p2.txt": f"projet deux {token(12)}",
        "projets/sous/p3.txt": f"projet trois {token(13)}",
        "autres/o1.txt": f"autre {token(21)}",
        "autres/o2.txt": f"autre {token(22)}",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


@pytest.fixture()
def env(tmp_path: Path):
    _tree(tmp_path / "tree")
    rt = Runtime(load_settings(write_daemon_config(tmp_path)))
    conn = rt.connectors()[0]
    rep = rt.engine.run_pass(conn)
    assert rep.outcome == "ok" and rep.new == 6
    yield tmp_path / "tree", rt, conn
    rt.close()


def _indexed(rt: Runtime) -> set[str]:
    return {st.path for st in rt.state.all_items() if st.status == "indexed"}


def _store_paths(rt: Runtime) -> set[str]:
    return {p.payload.path for p in rt.store.scroll("documents")}


def test_file_change_delete_and_rename(env) -> None:
    root, rt, conn = env
    (root / "a.txt").write_text(f"premier fichier modifié {token(2)}", encoding="utf-8")
    rep = rt.engine.sync_paths(conn, ["a.txt", "a.txt", "nothing-here.txt"])
    assert rep.scope == "paths" and rep.changed == 1 and rep.embedded_chunks == 1
    everyone = frozenset({"sid:S-1-1-0"})
    assert rt.store.keyword_search("documents", token(2), everyone, 3), "the keyword side sees the change"  # type: ignore[attr-defined]
    (root / "autres" / "o1.txt").rename(root / "autres" / "o1-renamed.txt")
    (root / "autres" / "o2.txt").unlink()
    rep = rt.engine.sync_paths(conn, ["autres/o1.txt", "autres/o1-renamed.txt", "autres/o2.txt"])
    assert (rep.new, rep.deleted) == (1, 2)
    assert _indexed(rt) == _store_paths(rt) == {
        "a.txt", "projets/p1.txt", "projets/p2.txt", "projets/sous/p3.txt", "autres/o1-renamed.txt"
    }


def test_folder_moved_out_is_purged_and_moved_in_is_indexed(env, tmp_path: Path) -> None:
    root, rt, conn = env
    shutil.move(root / "projets", tmp_path / "outside-projets")
    rep = rt.engine.sync_paths(conn, ["projets"])
    assert rep.deleted == 3 and rep.outcome == "ok"
    assert not any(p.startswith("projets/") for p in _indexed(rt) | _store_paths(rt))
    # the same folder coming back under another name: its files are found by walking it
    shutil.move(tmp_path / "outside-projets", root / "revenus")
    rep = rt.engine.sync_paths(conn, ["revenus"])
    assert rep.new == 3
    assert {"revenus/p1.txt", "revenus/p2.txt", "revenus/sous/p3.txt"} <= _store_paths(rt)


def test_event_on_an_existing_folder_purges_nothing(env) -> None:
    root, rt, conn = env
    (root / "projets" / "p4.txt").write_text(f"nouveau {token(14)}", encoding="utf-8")
    rep = rt.engine.sync_paths(conn, ["projets"])
    assert (rep.new, rep.deleted, rep.unchanged) == (1, 0, 3)


def test_unreachable_root_purges_nothing(env, tmp_path: Path) -> None:
    root, rt, conn = env
    before = _store_paths(rt)
    shutil.move(root, tmp_path / "away")
    rep = rt.engine.sync_paths(conn, ["a.txt", "projets"])
    assert rep.outcome == "suspect" and rep.deleted == 0 and "missing" in (rep.reason or "")
    assert _store_paths(rt) == before and _indexed(rt) == before


def test_mass_deletion_guard_applies_to_events(env) -> None:
    root, rt, conn = env
    for d in ("projets", "autres"):
        shutil.rmtree(root / d)
    rep = rt.engine.sync_paths(conn, ["projets", "autres"])
    assert rep.outcome == "suspect" and rep.deleted == 0
    assert len(_store_paths(rt)) == 6


def test_paths_outside_the_source_are_ignored(env) -> None:
    _root, rt, conn = env
    rep = rt.engine.sync_paths(conn, ["../tree/a.txt", "", "/"])
    assert rep.listed == 0 and not rep.changed_index


def test_payloads_carry_the_files_modification_time(env) -> None:
    root, rt, conn = env
    assert {p.payload.path: p.payload.modified_at for p in rt.store.scroll("documents")} == pytest.approx({
        rel: (root / rel).stat().st_mtime for rel in _store_paths(rt)}, abs=1e-3)
    (root / "a.txt").write_text(f"premier fichier modifié {token(3)}", encoding="utf-8")
    os.utime(root / "a.txt", (1_767_225_600.0, 1_767_225_600.0))
    rt.engine.sync_paths(conn, ["a.txt"])
    assert {p.payload.modified_at for p in rt.store.scroll("documents") if p.payload.path == "a.txt"} == {1_767_225_600.0}
