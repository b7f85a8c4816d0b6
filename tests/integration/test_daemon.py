"""``ancre daemon`` as a subprocess on a temporary folder source (e5-local, embedded store).

The embedded store has one owner, so while the daemon runs the tests look inside it through its
status file and its local control socket (``/v1/status``, ``/v1/search``); once it is
stopped they open the index in process and compare it with the folder.
A file is *searchable* when the keyword side of the search finds it (so the BM25 generation with
the change is published); *gone* when no search result names it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from support.corpus import CORPUS, REPO
from support.daemon_proc import DaemonProc, NotifyListener, folder_truth, index_truth, token, write_daemon_config

from ancre.config import DEFAULT_IGNORE

CORPUS_FILES = ("DOCUMENTATION/Politique_Securite_SI.pdf", "CLIENTS/21_Contrat_Maintenance_Baumont_Industries.docx")


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def _make_tree(root: Path, n_docs: int = 4) -> None:
    files = {f"docs/d{i}.txt": f"document {i} du dossier {token(i)}" for i in range(1, n_docs + 1)}
    files.update({f"projets/p{i}.txt": f"projet {i} {token(10 + i)}" for i in range(1, 4)})
    files["projets/sous/p4.txt"] = f"projet quatre {token(14)}"
    _write(root, files)
    for rel in CORPUS_FILES:
        (root / "corpus").mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / "share" / rel, root / "corpus" / Path(rel).name)


def _assert_converged(cfg: Path, root: Path) -> None:
    """The stopped daemon's index is exactly the folder: every indexable file with its current
    bytes, nothing else (no ghost), every state row indexed, BM25 covering exactly the store."""
    hashes, counts, bm25_len, rows = index_truth(cfg)
    truth = folder_truth(root, DEFAULT_IGNORE)
    assert hashes == truth, {"lost": sorted(set(truth) - set(hashes)), "ghosts": sorted(set(hashes) - set(truth))}
    assert {r.path: r.status for r in rows} == dict.fromkeys(truth, "indexed")
    assert {r.path: r.chunk_count for r in rows} == counts
    assert bm25_len == sum(counts.values())


def _timed(d: DaemonProc, delays: dict[str, float], name: str, pred, root: Path) -> dict:  # type: ignore[no-untyped-def]
    """Wait for ``pred`` (what a user sees: searchable, or no longer found), timed; then until the
    daemon applied the change: its state DB and its store hold exactly the folder's files (the
    search alone proves nothing for a removal: the live rights check hides a file gone from the
    folder before the daemon even hears of it). Returns the daemon status of that moment."""
    t0 = time.monotonic()
    d.wait_for(pred, name, timeout=30)
    delays[name] = time.monotonic() - t0
    return d.wait_applied(set(folder_truth(root, DEFAULT_IGNORE)), name)


def test_events_signals_notify_and_restart(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    _make_tree(root)
    cfg = write_daemon_config(tmp_path)
    listener = NotifyListener()
    d = DaemonProc(cfg, env={"NOTIFY_SOCKET": listener.name, "WATCHDOG_USEC": "1000000"}).start()
    delays: dict[str, float] = {}
    try:
        st = d.wait_idle(timeout=120)
        first = st["sources"]["t"]["last_full"]
        assert (first["trigger"], first["outcome"], first["new"]) == ("startup", "ok", 10)
        assert st["sources"]["t"]["watch"] == "inotify"

        (root / "docs" / "new.txt").write_text(f"un nouveau fichier {token(5)}", encoding="utf-8")
        _timed(d, delays, "create", lambda: "docs/new.txt" in d.bm25_paths(token(5)), root)

        (root / "docs" / "d1.txt").write_text(f"contenu remplacé {token(6)}", encoding="utf-8")
        st = _timed(d, delays, "modify", lambda: "docs/d1.txt" in d.bm25_paths(token(6))
                    and "docs/d1.txt" not in d.bm25_paths(token(1)), root)

        # an editor's save: lock file, temp file renamed onto the document, a second "modified"
        embedded = st["embedded_chunks_total"]
        lock = root / "docs" / "~$d2.txt"
        lock.write_text("verrou de l'éditeur", encoding="utf-8")
        tmp = root / "docs" / "d2.txt.tmp"
        tmp.write_text(f"version enregistrée {token(7)}", encoding="utf-8")
        os.replace(tmp, root / "docs" / "d2.txt")
        os.utime(root / "docs" / "d2.txt")
        lock.unlink()
        st = _timed(d, delays, "editor save", lambda: "docs/d2.txt" in d.bm25_paths(token(7)), root)
        assert st["embedded_chunks_total"] - embedded == 1, "one re-index of the destination"

        (root / "docs" / "lock-only").mkdir()
        (root / "docs" / "lock-only" / "~$brouillon.docx").write_text(f"verrou {token(8)}", encoding="utf-8")
        os.rename(root / "docs" / "d3.txt", root / "docs" / "d3-renamed.txt")
        _timed(d, delays, "rename", lambda: d.bm25_paths(token(3)) == {"docs/d3-renamed.txt"}
               and "docs/d3.txt" not in d.all_paths(token(3)), root)

        (root / "docs" / "d4.txt").unlink()
        _timed(d, delays, "delete", lambda: "docs/d4.txt" not in d.all_paths(token(4)), root)

        shutil.move(root / "projets", tmp_path / "outside-projets")
        st = _timed(d, delays, "folder moved out", lambda: not any(
            p.startswith("projets/") for i in range(11, 15) for p in d.all_paths(token(i))
        ), root)
        assert st["documents"]["t"] == {"indexed": 6}  # 4 docs + new + 2 corpus files - 1 deleted
        assert d.wait_idle()["documents"]["t"] == {"indexed": 6}, "the status file says so too"
        assert not any("~$" in p for p in d.all_paths(token(8)))

        # SIGHUP: a forced full pass now, visible in the status and the metrics; nothing re-embedded
        d.signal(signal.SIGHUP)
        st = d.wait_for(lambda: (s := d.status()) and s["passes"].get("sighup") == 1 and s["idle"] and s, "SIGHUP pass")
        hup = st["sources"]["t"]["last_full"]
        assert (hup["trigger"], hup["outcome"], hup["embedded_chunks"], hup["unchanged"]) == ("sighup", "ok", 0, 6)
        metrics = d.metrics()
        assert 'ancre_passes_total{outcome="ok",scope="full",source="t",trigger="sighup"} 1.0' in metrics
        assert 'ancre_documents{source="t",status="indexed"} 6.0' in metrics
        n_delays = float(re.search(r"^ancre_event_to_searchable_seconds_count (\S+)$", metrics, re.MULTILINE).group(1))  # type: ignore[union-attr]
        assert n_delays >= 6

        fields = listener.fields()
        assert "READY=1" in fields and "WATCHDOG=1" in fields
        assert any(f.startswith("STATUS=running; last sync") and "queue" in f for f in fields)
        rc, _ = d.stop(timeout=10)  # raises TimeoutExpired (after killing it) past 10 s
        assert rc == 0, d.log_text()[-3000:]
        assert "STOPPING=1" in listener.fields()

        # a restart embeds nothing that did not change
        d = DaemonProc(cfg).start()
        st = d.wait_idle(timeout=120)
        again = st["sources"]["t"]["last_full"]
        assert (again["trigger"], again["embedded_chunks"], again["new"], again["changed"], again["deleted"]) == (
            "startup", 0, 0, 0, 0
        )
        assert again["unchanged"] == 6
        rc, _ = d.stop(timeout=10)
        assert rc == 0
    finally:
        d.kill()
        listener.close()
    _assert_converged(cfg, root)
    print("\nevent-to-searchable delays (s):", {k: round(v, 2) for k, v in delays.items()},
          "median", round(statistics.median(delays.values()), 2))


def _crash(cfg: Path, spec: str) -> None:
    d = DaemonProc(cfg, env={"ANCRE_TEST_CRASH_AT": spec}).start()
    try:
        rc = d.wait_exit(180)
    finally:
        d.kill()
    assert rc == -signal.SIGKILL, f"{spec}: exit {rc}\n{d.log_text()[-3000:]}"


def _state_rows(tmp_path: Path) -> dict[str, str]:
    with sqlite3.connect(tmp_path / "data" / "state.sqlite3") as db:
        return dict(db.execute("SELECT path, status FROM items").fetchall())


def test_kill_9_during_a_sync_then_restart_converges(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    _make_tree(root, n_docs=12)
    cfg = write_daemon_config(tmp_path)

    _crash(cfg, "extract:6")  # during the initial sync, a file handed to the extractor
    assert "indexed" not in _state_rows(tmp_path).values()

    (root / "docs" / "d1.txt").write_text(f"modifié pendant l'arrêt {token(40)}", encoding="utf-8")
    (root / "docs" / "d2.txt").unlink()
    (root / "docs" / "d13.txt").write_text(f"ajouté pendant l'arrêt {token(41)}", encoding="utf-8")
    _crash(cfg, "after_upsert:1")  # points written, state rows still 'pending'
    assert "pending" in _state_rows(tmp_path).values()

    _crash(cfg, "bm25_publish:1")  # the BM25 rebuild (pending from the crashes) dies before publishing

    d = DaemonProc(cfg).start()
    d.wait_idle(timeout=120)
    assert d.stop(timeout=10)[0] == 0
    shutil.rmtree(root / "projets")  # 4 of 15 vanish: under the mass-deletion guard
    _crash(cfg, "purge:2")  # a vanished document's points deleted, its state row not yet
    assert sum(p.startswith("projets/") for p in _state_rows(tmp_path)) == 3  # one purged, one half-purged

    d = DaemonProc(cfg).start()
    try:
        st = d.wait_idle(timeout=120)
        assert st["sources"]["t"]["last_full"]["outcome"] == "ok"
        assert d.bm25_paths(token(41)) == {"docs/d13.txt"}
        assert d.bm25_paths(token(40)) == {"docs/d1.txt"}
        assert "docs/d2.txt" not in d.all_paths(token(2))
        assert d.stop(timeout=10)[0] == 0
    finally:
        d.kill()
    _assert_converged(cfg, root)


def test_root_removed_nothing_purged_then_recovers(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    _make_tree(root)
    cfg = write_daemon_config(tmp_path)
    d = DaemonProc(cfg).start()
    try:
        d.wait_idle(timeout=120)
        shutil.move(root, tmp_path / "away")  # an unmounted or removed share looks like this
        st = d.wait_for(lambda: (s := d.status()) and s["sources"]["t"]["watch"] == "down"
                        and s["sources"]["t"].get("last_full", {}).get("outcome") == "suspect" and s["idle"] and s,
                        "a suspect pass while the root is missing")
        assert "missing" in st["sources"]["t"]["last_full"]["reason"]
        assert st["documents"]["t"] == {"indexed": 10}, "nothing purged"
        # still indexed, but the live rights check cannot reach the root: left out, fail closed
        assert "docs/d1.txt" not in d.all_paths(token(1))
        assert 'ancre_passes_total{outcome="suspect",scope="full",source="t",trigger="rescan"}' in d.metrics()

        (tmp_path / "away" / "docs" / "d1.txt").write_text(f"changé pendant l'absence {token(50)}", encoding="utf-8")
        (tmp_path / "away" / "docs" / "arrivé.txt").write_text(f"arrivé pendant l'absence {token(51)}", encoding="utf-8")
        (tmp_path / "away" / "docs" / "d4.txt").unlink()
        shutil.move(tmp_path / "away", root)
        d.wait_for(lambda: "docs/arrivé.txt" in d.bm25_paths(token(51)) and "docs/d1.txt" in d.bm25_paths(token(50)),
                   "recovery when the root returns")
        st = d.wait_idle()
        assert st["sources"]["t"]["watch"] == "inotify" and st["sources"]["t"]["last_full"]["outcome"] == "ok"
        assert "docs/d4.txt" not in d.all_paths(token(4))
        assert d.stop(timeout=10)[0] == 0
    finally:
        d.kill()
    _assert_converged(cfg, root)


def test_thousand_files_dropped_at_once_are_each_indexed_once(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    _write(root, {"seed.txt": f"graine {token(9999)}"})
    cfg = write_daemon_config(tmp_path)
    d = DaemonProc(cfg).start()
    try:
        base = d.wait_idle(timeout=120)["embedded_chunks_total"]
        drop = root / "depot"
        drop.mkdir()
        for i in range(1000):
            (drop / f"f{i:04d}.txt").write_text(f"fichier déposé {i} {token(i, 'depx')}", encoding="utf-8")
        st = d.wait_for(
            lambda: (s := d.status()) and s["documents"]["t"].get("indexed") == 1001 and s["idle"] and not s["bm25_dirty"] and s,
            "1000 files indexed", timeout=240, every=0.5,
        )
        assert st["embedded_chunks_total"] - base == 1000, "each file embedded exactly once"
        assert st["documents"]["t"] == {"indexed": 1001}
        assert d.bm25_paths(token(777, "depx")) == {"depot/f0777.txt"}
        assert d.stop(timeout=10)[0] == 0
    finally:
        d.kill()
    hashes, counts, bm25_len, _ = index_truth(cfg)
    assert len(hashes) == 1001 and set(counts.values()) == {1} and bm25_len == 1001


SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
UNITS = REPO / "systemd"
UNIT = UNITS / "ancre.service"
UNIT_LINES = {
    "ancre.service": ("Type=notify", "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure",
                      "KillMode=mixed", "User=ancre", "ProtectSystem=strict", "ReadWritePaths=/var/lib/ancre",
                      "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service",
                      "EnvironmentFile=-/etc/ancre/ancre.env", "ExecStart=/opt/ancre/bin/ancre daemon --config"),
    "ancre-api.service": ("Requires=ancre.service", "After=ancre.service", "User=ancre", "ProtectSystem=strict",
                          "ExecStart=/opt/ancre/bin/ancre api --via-daemon --config /etc/ancre/ancre.toml",
                          "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service", "PrivateUsers=yes",
                          "EnvironmentFile=-/etc/ancre/ancre.env", "Restart=on-failure"),
}


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze not installed (Debian package `systemd`; "
                    ".ci/setup-test-deps.sh installs it as root): the unit's verify/security checks need it")
@pytest.mark.parametrize("name", sorted(UNIT_LINES))
def test_unit_verifies_and_meets_the_exposure_target(tmp_path: Path, name: str) -> None:
    """Both units of the systemd pair (the daemon, and the API answering through it) verify in a
    root holding both, meet the exposure target, and need no hand edit: the commands, paths and
    user are those the install steps of docs/DEPLOY.md create (its ``Documentation=`` included)."""
    assert SYSTEMD_ANALYZE is not None
    unit = UNITS / name
    sec = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=true", str(unit)], check=False, capture_output=True, text=True)
    m = re.search(rf"Overall exposure level for {re.escape(name)}: (\d+(?:\.\d+)?)", sec.stdout + sec.stderr)
    assert m, sec.stdout + sec.stderr
    assert float(m.group(1)) <= 2.0, sec.stdout

    # verify in a private root: the commands the unit runs must exist there (stubs), and the
    # system's units (targets it depends on) are copied in, with both of ours
    fake = tmp_path / "root"
    for cmd in ("opt/ancre/bin/ancre", "bin/kill"):
        exe = fake / cmd
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    units = next((p for p in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system")) if p.is_dir()), None)
    if units is None:
        pytest.skip("no system unit directory to verify against")
    shutil.copytree(units, fake / "usr" / "lib" / "systemd" / "system", symlinks=True)
    target = fake / "etc" / "systemd" / "system" / name
    target.parent.mkdir(parents=True)
    for other in UNIT_LINES:
        shutil.copy2(UNITS / other, target.parent / other)
    ver = subprocess.run([SYSTEMD_ANALYZE, "verify", f"--root={fake}", str(target)], check=False, capture_output=True, text=True)
    assert ver.returncode == 0 and not ver.stderr.strip(), ver.stderr

    text = unit.read_text(encoding="utf-8")
    for line in UNIT_LINES[name]:
        assert line in text, line
    docs = re.findall(r"file://(\S+)", (re.search(r"^Documentation=(.+)$", text, re.MULTILINE) or [""])[0])
    assert docs, "Documentation= must point at files the install steps create"
    deploy = (REPO / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    copy = re.search(r"^sudo install -d -m 0755 (\S+) && sudo cp -r (.+) \1/", deploy, re.MULTILINE)
    assert copy, "the install steps of docs/DEPLOY.md do not copy the documentation"
    for doc in docs:
        rel = Path(doc).relative_to(copy.group(1))
        assert rel.parts[0] in copy.group(2).split() and (REPO / rel).is_file(), f"the install steps do not put {doc} there"
    assert f"systemd/{name}" in deploy, f"the install steps of docs/DEPLOY.md do not install {name}"
