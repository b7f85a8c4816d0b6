"""The SharePoint drive snapshot store (:mod:`ancre.connectors.sharepoint.snapshot`): a table of
its own in a file of its own, readable by a second connection (the query side's) while the
daemon's writes, thread-safe; and no connector module reaches the engine's state DB."""

from __future__ import annotations

import ast
import sqlite3
import threading
from pathlib import Path

import ancre.connectors
from ancre.connectors.sharepoint.snapshot import Drive, DriveSnapshotStore, Entry


def _drive(n: int) -> Drive:
    d = Drive("site", "https://h/sites/A", "sites/A", "drv", "Documents", "https://h/sites/A/Documents", root="r")
    d.items = {"r": Entry("", None, "root"), **{f"i{k}": Entry(f"f{k}.md", "r", "file", size=k) for k in range(n)}}
    d.delta_link = f"https://graph/drives/drv/root/delta?token={n}"
    return d


def test_snapshot_round_trips_and_lives_in_its_own_table(tmp_path: Path) -> None:
    store = DriveSnapshotStore(tmp_path / "sharepoint.sqlite3")
    d = _drive(3)
    d.items["i1"].perms = [{"id": "p", "roles": ["read"]}]
    d.items["i2"].labels = "423 locked"
    store.save("sp", d.drive_id, d.dumps())
    back = Drive.loads("drv", store.load("sp", "drv") or "")
    assert back == d and back.path("i1") == "sites/A/Documents/f1.md"
    assert store.drive_ids("sp") == ["drv"] and store.drive_ids("other") == [] and store.load("other", "drv") is None
    store.close()
    store.close()  # idempotent
    db = sqlite3.connect(tmp_path / "sharepoint.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    cols = [r[1] for r in db.execute("PRAGMA table_info(sharepoint_drive_snapshots)")]
    assert cols == ["source", "drive_id", "snapshot_json", "updated_at"]


def test_a_second_connection_reads_while_the_writer_writes(tmp_path: Path) -> None:
    writer = DriveSnapshotStore(tmp_path / "sharepoint.sqlite3")
    reader = DriveSnapshotStore(tmp_path / "sharepoint.sqlite3")
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(t: int) -> None:
        try:
            for n in range(60):
                writer.save("sp", f"drv{t}", _drive(n).dumps())
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    seen = 0
    while any(t.is_alive() for t in threads) or not seen:
        for drive_id in reader.drive_ids("sp"):
            raw = reader.load("sp", drive_id)
            assert raw is not None and Drive.loads(drive_id, raw).items["r"].kind == "root"  # never a torn row
            seen += 1
    for t in threads:
        t.join()
    stop.set()
    assert not errors, errors
    assert reader.drive_ids("sp") == ["drv0", "drv1", "drv2"]
    assert len(Drive.loads("drv0", reader.load("sp", "drv0") or "").items) == 60  # the last write
    writer.close()
    reader.close()


def test_no_connector_module_imports_the_state_db() -> None:
    root = Path(ancre.connectors.__file__).parent
    offenders = []
    for py in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n == "StateDB" or n.startswith("ancre.index.state") for n in names):
                offenders.append(str(py.relative_to(root)))
    assert offenders == []
