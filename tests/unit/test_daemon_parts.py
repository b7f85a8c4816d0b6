"""The daemon's small parts, without a store: the debounced queue, sd_notify over a real socket,
JSON log lines, watchdog event translation."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from ancre.connectors.base import ChangeEvent
from ancre.daemon.logs import JsonFormatter
from ancre.daemon.notify import SdNotifier, watchdog_interval
from ancre.daemon.queue import AclRefresh, ChangeQueue, FullPass, PathBatch
from ancre.daemon.sync import clean_rel_path
from ancre.daemon.watch import FolderWatcher


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _queue(clock: Clock, **kw: float) -> ChangeQueue:
    opts = {"debounce_s": 0.5, "max_delay_s": 5.0, "queue_max": 100, "batch_max": 10}
    opts.update(kw)
    return ChangeQueue(clock=clock, **opts)  # type: ignore[arg-type]


def test_editor_save_is_one_entry_after_the_debounce() -> None:
    clock = Clock()
    q = _queue(clock)
    # Word-like save: lock file, temp file, rename onto the document, two "modified"
    for ev in (
        ChangeEvent("s", "d/.~tmp123", "created"),
        ChangeEvent("s", "d/.~tmp123", "moved", "d/report.docx"),
        ChangeEvent("s", "d/report.docx", "modified"),
        ChangeEvent("s", "d/report.docx", "modified"),
    ):
        q.add_event(ev)
        clock.t += 0.1
    assert q.take(0) is None  # still inside the debounce window
    assert q.depth() == 2
    clock.t += 0.5
    task = q.take(0)
    assert isinstance(task, PathBatch)
    assert sorted(task.paths) == ["d/.~tmp123", "d/report.docx"]
    assert task.paths.count("d/report.docx") == 1
    assert q.depth() == 0 and q.pending() == 1
    q.done()
    assert q.pending() == 0


def test_a_path_that_keeps_changing_is_synced_after_max_delay() -> None:
    clock = Clock()
    q = _queue(clock, debounce_s=1.0, max_delay_s=3.0)
    for _ in range(40):  # an event every 0.1 s for 4 s: the debounce alone would never expire
        q.add_path("s", "busy.log")
        clock.t += 0.1
        if q.take(0) is not None:
            break
    assert clock.t - 1000.0 <= 3.2


def test_overflow_becomes_one_full_pass_and_drops_nothing_silently() -> None:
    clock = Clock()
    q = _queue(clock, queue_max=3)
    for i in range(3):
        q.add_path("s", f"f{i}")
    q.add_path("other", "x")
    q.add_path("s", "f0")  # already queued: de-duplicated, no overflow
    assert q.overflows == 0
    q.add_path("s", "f3")  # the 4th distinct path of "s"
    assert q.overflows == 1
    task = q.take(0)
    assert task == FullPass("s", "overflow")
    clock.t += 1
    rest = q.take(0)
    assert isinstance(rest, PathBatch) and rest.source == "other"


def test_full_pass_requests_merge_and_sighup_wins() -> None:
    q = _queue(Clock())
    q.request_full("s", "periodic")
    q.request_full("s", "acl_sweep")
    q.request_full("s", "sighup", force=True)
    q.request_full("s", "periodic")
    assert q.depth() == 1
    assert q.take(0) == FullPass("s", "sighup", True)
    assert q.take(0) is None


def test_rights_changes_take_their_own_lane() -> None:
    """An ``acl`` event never queues behind content work: it is an AclRefresh in the rights lane
    (taken by :meth:`take_acl`), merged per source; with a path the path is queued for content
    too. The content lane never hands it out."""
    clock = Clock()
    q = _queue(clock)
    q.request_full("s", "startup")
    q.add_event(ChangeEvent("s", "RH/a.docx", "acl"))
    q.add_event(ChangeEvent("s", "RH", "acl"))
    assert q.take_acl(0) == AclRefresh("s", "acl_event", ("RH/a.docx", "RH"))
    assert q.take_acl(0) is None
    q.add_event(ChangeEvent("s", "RH", "acl"))
    q.add_event(ChangeEvent("s", None, "acl"))  # the manifest: every document
    assert q.take_acl(0) == AclRefresh("s", "acl_manifest", None)
    assert q.pending() == 1 + 2 + 2  # the full pass, two paths, two rights tasks in flight
    q.done_acl()
    q.done_acl()
    assert q.take(0) == FullPass("s", "startup")
    clock.t += 1
    task = q.take(0)
    assert isinstance(task, PathBatch) and set(task.paths) == {"RH/a.docx", "RH"}


def test_rescan_and_move_out_of_tree() -> None:
    clock = Clock()
    q = _queue(clock)
    q.add_event(ChangeEvent("s", None, "rescan"))
    q.add_event(ChangeEvent("s", "projets", "moved", None))  # moved out of the tree
    assert q.take(0) == FullPass("s", "rescan")
    clock.t += 1
    task = q.take(0)
    assert isinstance(task, PathBatch) and task.paths == ("projets",)


def test_take_waits_for_the_debounce_and_close_wakes_it() -> None:
    q = ChangeQueue(debounce_s=0.2, max_delay_s=5, queue_max=10, batch_max=10)
    q.add_path("s", "a")
    t0 = time.monotonic()
    task = q.take(5)
    assert isinstance(task, PathBatch)
    assert time.monotonic() - t0 >= 0.15
    got: list[object] = []
    th = threading.Thread(target=lambda: got.append(q.take(30)))
    th.start()
    q.close()
    th.join(5)
    assert got == [None]


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("a/b.txt", "a/b.txt"), ("/a/b/", "a/b"), ("", None), ("../etc/passwd", None), ("a/../../x", None), ("a//b", None)],
)
def test_clean_rel_path(raw: str, clean: str | None) -> None:
    assert clean_rel_path(raw) == clean


@pytest.mark.parametrize("abstract", [True, False])
def test_sd_notify_reaches_the_socket(tmp_path: Path, abstract: bool) -> None:
    name = f"@ancre-unit-{os.getpid()}" if abstract else str(tmp_path / "notify.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind("\0" + name[1:] if abstract else name)
    srv.settimeout(2)
    try:
        n = SdNotifier(name)
        assert n.enabled
        assert n.ready("syncing\nstill")
        assert srv.recv(1024).decode() == "READY=1\nSTATUS=syncing still"
        assert n.watchdog()
        assert srv.recv(1024).decode() == "WATCHDOG=1"
    finally:
        srv.close()
    assert not SdNotifier(name).send(STATUS="x") or not abstract  # nobody listens any more
    assert not SdNotifier("").enabled


def test_watchdog_interval_is_half_of_watchdog_usec() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "20000000"}) == 10.0
    assert watchdog_interval({"WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval({}) is None


def test_json_log_line_carries_extra_fields() -> None:
    rec = logging.LogRecord("ancre.x", logging.WARNING, __file__, 1, "pass of %s", ("s",), None)
    rec.report = {"outcome": "suspect"}
    out = json.loads(JsonFormatter().format(rec))
    assert out["msg"] == "pass of s" and out["level"] == "WARNING" and out["report"] == {"outcome": "suspect"}


def test_json_log_line_drops_uvicorn_colour_copy() -> None:
    rec = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "Started server", (), None)
    rec.color_message = "\x1b[32mStarted\x1b[0m server"
    out = JsonFormatter().format(rec)
    assert "color_message" not in out and "\\u001b" not in out


def test_watcher_reports_changes_inside_the_root_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    events: list[ChangeEvent] = []
    w = FolderWatcher("s", root, mode="inotify", poll_interval_s=1, on_change=events.append, ignore=("~$*", "*.tmp"))
    w.start()
    try:
        assert w.effective_mode == "inotify"
        (root / "~$lock.docx").write_text("lock")
        (root / "sub" / "x.tmp").write_text("draft")
        os.replace(root / "sub" / "x.tmp", root / "sub" / "x.txt")
        (outside / "elsewhere.txt").write_text("not ours")
        os.replace(root / "sub", outside / "sub")  # a folder moved out of the tree
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e.path == "sub" for e in events):
            time.sleep(0.05)
    finally:
        w.stop()
    paths = {(e.kind, e.path, e.dest_path) for e in events}
    assert ("created", "sub/x.txt", None) in paths  # temp file renamed onto a real name
    # moved out of the tree: inotify sees it leave (watchdog says "deleted"), no destination inside
    assert ("deleted", "sub", None) in paths or ("moved", "sub", None) in paths
    assert not any("~$" in (e.path or "") or (e.path or "").endswith(".tmp") for e in events)
    assert not any("elsewhere" in (e.path or "") for e in events)


def test_polling_fallback_sees_changes(tmp_path: Path) -> None:
    events: list[ChangeEvent] = []
    w = FolderWatcher("s", tmp_path, mode="poll", poll_interval_s=0.2, on_change=events.append)
    w.start()
    try:
        assert w.effective_mode == "poll"
        (tmp_path / "polled.txt").write_text("x")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e.path == "polled.txt" for e in events):
            time.sleep(0.05)
    finally:
        w.stop()
    assert ChangeEvent("s", "polled.txt", "created") in events


def test_auto_mode_polls_network_file_systems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ancre.daemon import watch

    assert watch.fs_type(Path("/proc")) == "proc"
    w = FolderWatcher("s", tmp_path, mode="auto", poll_interval_s=1, on_change=lambda e: None)
    for fstype, expected in (("cifs", "poll"), ("nfs4", "poll"), ("ext4", "inotify"), (None, "inotify")):
        monkeypatch.setattr(watch, "fs_type", lambda p, t=fstype: t)
        assert w._choose() == expected


def test_acl_manifest_edit_triggers_an_acl_refresh(tmp_path: Path) -> None:
    """Editing a folder source's acl.json changes rights without touching any document: the
    watcher must ask at once for every ACL to be re-read (a path-less ``acl`` event, which the
    queue puts in the rights lane), not wait for the periodic sweep nor behind content work."""
    root = tmp_path / "share"
    root.mkdir()
    manifest = tmp_path / "acl.json"
    manifest.write_text('{"entries": {}}', encoding="utf-8")
    events: list[ChangeEvent] = []
    w = FolderWatcher("s", root, mode="poll", poll_interval_s=0.5, on_change=events.append, acl_manifest=manifest)
    w.start()
    try:
        time.sleep(1.5)
        assert ChangeEvent("s", None, "acl") not in events  # nothing changed yet
        manifest.write_text('{"entries": {"A": {"aces": []}}}', encoding="utf-8")
        deadline = time.monotonic() + 10
        while ChangeEvent("s", None, "acl") not in events and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ChangeEvent("s", None, "acl") in events
        assert ChangeEvent("s", None, "rescan") not in events
    finally:
        w.stop()
