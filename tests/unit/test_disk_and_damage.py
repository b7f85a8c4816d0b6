"""The free-space guard and the damage checks at open, without a small file system (the tmpfs
tests are tests/integration/test_disk_full.py, as root): a margin above the free space stands
for a full disk, a truncated or overwritten file for what a crash left.

- the embedded store refuses a write, an index build and an open it has no room for with
  :class:`DiskFullError` before touching anything (its content and its folder unchanged);
- an engine error quoting ENOSPC is a :class:`DiskFullError`;
- a shard the engine can't load, or one that fails the probe after a stop that was not clean, is
  a :class:`StoreDamagedError` naming the segment and ``ancre reindex``;
- the state database: a page overwritten is found at open (``quick_check``), a file that is not a
  database too, both named with the way back; SQLite's "database or disk is full" is a
  :class:`DiskFullError`; ``ancre status`` and ``ancre sync`` print one line, never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.corpus import CORPUS
from typer.testing import CliRunner

from ancre.app.cli import app
from ancre.errors import DiskFullError, StateDamagedError, StoreDamagedError, StoreError
from ancre.index import edge_store
from ancre.index.disk_space import SpaceGuard, free_bytes, sparse_bytes
from ancre.index.edge_health import OPEN_MARKER, disk_errors
from ancre.index.edge_store import EdgeStore
from ancre.index.state import StateDB
from ancre.index.store import PointWrite
from ancre.models import ChunkPayload, point_id

DIM = 8
EMBEDDER = "test:v1"
EVERYONE = frozenset({"sid:S-1-1-0"})


def _points(doc: str, n: int) -> list[PointWrite]:
    out = []
    for i in range(n):
        seed = zlib.crc32(f"{doc}:{i}".encode())
        v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        payload = ChunkPayload(source="s", doc_id=doc, path=f"{doc}.txt", filename=f"{doc}.txt", location="",
                               chunk_index=i, text=f"contrat de maintenance {doc} {i}", acl_allow=tuple(EVERYONE),
                               acl_deny=(), content_hash="h", indexed_at=1.0)
        out.append(PointWrite(point_id(doc, i), v / np.linalg.norm(v), payload))
    return out


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[EdgeStore]:
    s = EdgeStore(tmp_path / "data", min_free_bytes=0)
    s.open(EMBEDDER, DIM)
    try:
        yield s
    finally:
        s.close()


def _full(store: EdgeStore) -> None:
    """Make ``store``'s file system look full: a margin above what is free."""
    store.space = SpaceGuard(store.root, free_bytes(store.root) + 2**30)


def test_a_write_without_room_is_refused_before_anything_is_written(store: EdgeStore) -> None:
    store.upsert("documents", _points("a", 3))
    before = sorted(p.id for p in store.scroll("documents"))
    _full(store)
    with pytest.raises(DiskFullError) as e:
        store.upsert("documents", _points("b", 3))
    assert str(e.value).startswith(f"disk full: the file system of {store.root} has ")
    assert "writing to documents need" in str(e.value) and e.value.needed > e.value.free
    with pytest.raises(DiskFullError):
        store.delete_doc("documents", "a")
    store.space = SpaceGuard(store.root, 0)
    assert sorted(p.id for p in store.scroll("documents")) == before  # nothing written, nothing deleted


def test_an_index_build_without_room_for_its_copy_is_not_started(store: EdgeStore) -> None:
    store.upsert("documents", _points("a", 20))
    _full(store)
    with pytest.raises(DiskFullError, match="the index build of documents need"):
        store.maintain(force=True)
    assert not [p.name for p in store.root.iterdir() if "@" in p.name]  # no copy begun


def test_opening_needs_room_for_the_holes_the_load_fills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = EdgeStore(tmp_path / "data", min_free_bytes=0)
    s.open(EMBEDDER, DIM)
    s.upsert("documents", _points("a", 5))
    s.close()
    assert sparse_bytes(s.root) > 0  # the engine's files are sparse: a load may fill them
    monkeypatch.setattr(edge_store, "open_bytes", lambda root: free_bytes(root) + 2**30)
    again = EdgeStore(tmp_path / "data", min_free_bytes=0)
    with pytest.raises(DiskFullError, match="opening the index need"):
        again.open(EMBEDDER, DIM)
    monkeypatch.undo()  # nothing held: with room again, another owner opens the store
    third = EdgeStore(tmp_path / "data", min_free_bytes=0)
    third.open(EMBEDDER, DIM)
    assert third.count("documents") == 5
    third.close()


def test_an_engine_error_quoting_enospc_is_disk_full(tmp_path: Path) -> None:
    guard = SpaceGuard(tmp_path, 0)
    with pytest.raises(DiskFullError, match=r"flush failed for want of space|flush need"), \
            disk_errors(guard, "embedded Qdrant", "flush"):
        raise RuntimeError("Service runtime error: Failed to save structure on disk with error: "
                           "No space left on device (os error 28)")
    with pytest.raises(StoreError, match="boom") as e, disk_errors(guard, "embedded Qdrant", "flush"):
        raise RuntimeError("boom")
    assert not isinstance(e.value, DiskFullError)


def _built(tmp_path: Path) -> Path:
    """A closed store whose documents live in a built (indexed) segment; returns that segment."""
    s = EdgeStore(tmp_path / "data", min_free_bytes=0)
    s.open(EMBEDDER, DIM)
    for k in range(10):
        s.upsert("documents", _points(f"d{k}", 200))
    s.optimize()
    s.close()
    segs = [p for p in (s.root / "documents@1" / "segments").iterdir() if (p / "vector_index").exists()]
    assert segs
    return segs[0]


def _half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def test_a_shard_the_engine_cannot_load_names_the_segment_and_reindex(tmp_path: Path) -> None:
    seg = _built(tmp_path)
    _half(seg / "id_tracker.mappings")
    s = EdgeStore(tmp_path / "data", min_free_bytes=0)
    with pytest.raises(StoreDamagedError) as e:
        s.open(EMBEDDER, DIM)
    msg = str(e.value)
    assert f"segment {seg.name} of documents@1 can't be read" in msg and "ancre reindex" in msg, msg
    s2 = EdgeStore(tmp_path / "data", min_free_bytes=0)
    with pytest.raises(StoreDamagedError):  # the lock was released: the same error again, not "owned"
        s2.open(EMBEDDER, DIM)


def test_after_a_stop_that_was_not_clean_the_store_is_probed_at_open(tmp_path: Path) -> None:
    seg = _built(tmp_path)
    root = tmp_path / "data" / "qdrant"
    damaged = next(seg.glob("payload_index/*acl_allo-map/values_to_points.bin"))
    _half(damaged)  # only a filtered search reads it
    s = EdgeStore(tmp_path / "data", min_free_bytes=0)
    s.open(EMBEDDER, DIM)  # a clean stop before: no probe, the damage shows at the first search
    with pytest.raises(StoreError):
        s.search("documents", np.ones(DIM, dtype=np.float32), EVERYONE, 5)
    s.close()
    (root / OPEN_MARKER).write_text("12345\n")  # as a process killed with the store open leaves it
    s = EdgeStore(tmp_path / "data", min_free_bytes=0)
    with pytest.raises(StoreDamagedError) as e:
        s.open(EMBEDDER, DIM)
    msg = str(e.value)
    assert "the shard documents@1 (segments " in msg and seg.name in msg and "ancre reindex" in msg, msg


def test_a_clean_close_leaves_no_marker_and_a_crash_probe_of_a_sound_store_passes(tmp_path: Path) -> None:
    s = EdgeStore(tmp_path / "data", min_free_bytes=0)
    s.open(EMBEDDER, DIM)
    s.upsert("documents", _points("a", 5))
    assert (s.root / OPEN_MARKER).exists()
    s.close()
    assert not (s.root / OPEN_MARKER).exists()
    (s.root / OPEN_MARKER).write_text("1\n")
    s.open(EMBEDDER, DIM)  # probed, sound
    assert s.count("documents") == 5
    s.close()


# --- the state database ------------------------------------------------------------------------


def _state(path: Path, rows: int = 400) -> None:
    db = StateDB(path)
    for i in range(rows):
        db.set_meta(f"k{i}", "x" * 200)
    db.close()


def test_a_page_overwritten_is_found_at_open_and_named(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    _state(path)
    with open(path, "r+b") as f:
        f.seek(4096 * 5)
        f.write(os.urandom(4096))
    with pytest.raises(StateDamagedError) as e:
        StateDB(path)
    msg = str(e.value)
    assert msg.startswith(f"the state database {path} is damaged (") and "ancre reindex" in msg, msg


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    path.write_bytes(os.urandom(8192))
    with pytest.raises(StateDamagedError, match=r"is damaged .*file is not a database"):
        StateDB(path)


def test_sqlite_full_is_disk_full(tmp_path: Path) -> None:
    db = StateDB(tmp_path / "state.sqlite3")
    pages = db._db.execute("PRAGMA page_count").fetchone()[0]
    db._db.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite's own "full disk"
    with pytest.raises(DiskFullError, match="the state database's writes failed for want of space"):
        for i in range(1000):
            db.set_meta(f"k{i}", "x" * 2000)
    db.close()


def test_status_and_sync_on_a_damaged_state_database_print_one_line(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a.txt").write_text("bonjour", encoding="utf-8")
    cfg = tmp_path / "ancre.toml"
    cfg.write_text('data_dir = "data"\n[directory]\npath = "directory.json"\n[[sources]]\nid = "t"\nroot = "tree"\n'
                   'principals = ["sid:S-1-1-0"]\n', encoding="utf-8")
    (tmp_path / "directory.json").write_bytes((CORPUS / "directory.json").read_bytes())
    path = tmp_path / "data" / "state.sqlite3"
    _state(path)
    with open(path, "r+b") as f:
        f.seek(4096 * 3)
        f.write(b"\xff" * 4096)
    runner = CliRunner()
    for args in (["status"], ["sync"]):
        res = runner.invoke(app, [*args, "--config", str(cfg)], catch_exceptions=False)
        out = " ".join(res.output.split())
        assert res.exit_code == 2 and out.startswith(f"error: the state database {path} is damaged"), out
        assert "ancre reindex" in out and "Traceback" not in out
    assert sqlite3.connect(path).execute("PRAGMA quick_check").fetchone()[0] != "ok"  # left as it was
