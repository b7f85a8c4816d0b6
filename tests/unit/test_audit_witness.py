"""The audit chain's witnesses (:mod:`ancre.audit.witness`): the state database's counter and the
system log — the latter against a real rsyslogd started by the test on a Unix socket, its marks
read back from the file rsyslog wrote — and what ``verify`` concludes from them: records cut from
the end, a log rolled back, a witness wiped or missing, records no witness saw; records moved to
another day's file are still read by the reports and flagged."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support import rsyslog

from ancre.audit.chain import HEAD, Sealer
from ancre.audit.reading import read_entries
from ancre.audit.record import AuditLog, AuditRecord
from ancre.audit.verify import verify_chain
from ancre.audit.witness import (
    FileMarks,
    Mark,
    StateWitness,
    SyslogWitness,
    Witness,
    export_state_witness,
    import_state_witness,
    parse_journal_json,
)
from ancre.errors import AuditError
from ancre.query.grounding import Verdict
from ancre.reports.audit_log import stats

T0 = datetime(2026, 1, 15, 8, 30, tzinfo=UTC)
P = frozenset({"sid:S-1-1-0"})


def _rec(i: int, when: datetime) -> AuditRecord:
    return AuditRecord(f"user{i % 3}", P, f"question {i}", (), Verdict(True, ("refus",)), {}, when)


def _state(tmp: Path, key: bytes | None = None) -> StateWitness:
    return StateWitness(tmp / "data" / "state.sqlite3", tmp / "audit", Sealer(key))


def _write(d: Path, witnesses: list[Witness], n: int = 5, days: tuple[int, ...] = (0,), key: bytes | None = None,
           start: int = 0) -> None:
    log = AuditLog(d, retention_days=0, chain_key=key, witnesses=witnesses)
    i = start
    for day in days:
        for k in range(n):
            log.append(_rec(i, T0 + timedelta(days=day, minutes=k)))
            i += 1
    log._close()  # the witnesses stay open: the test reads them next


def _file(d: Path, day: int = 0) -> Path:
    return d / f"audit-{(T0 + timedelta(days=day)).date().isoformat()}.jsonl"


def _kinds(rep) -> list[str]:
    return [p.kind.value for p in rep.problems]


# ----------------------------------------------------------------------------- state database


def test_the_state_witness_keeps_the_newest_mark_and_never_moves_back(tmp_path: Path) -> None:
    w = _state(tmp_path)
    _write(tmp_path / "audit", [w])
    (mark,) = w.read().marks
    last = json.loads(_file(tmp_path / "audit").read_bytes().splitlines()[-1])
    assert (mark.seq, mark.file, mark.hash) == (5, _file(tmp_path / "audit").name, last["hash"])
    w.witness(Mark(mark.directory, 3, mark.file, "sha256:" + "0" * 64, mark.time))  # an older position
    assert w.read().marks == (mark,)
    assert verify_chain(tmp_path / "audit", None, [w]).ok


def test_truncation_with_the_old_anchor_put_back_is_found_by_the_state_witness(tmp_path: Path) -> None:
    d = tmp_path / "audit"
    w = _state(tmp_path)
    _write(d, [w], n=3)
    old_anchor = (d / HEAD).read_bytes()
    kept = _file(d).read_bytes()
    _write(d, [w], n=4, start=3)
    _file(d).write_bytes(kept)
    (d / HEAD).write_bytes(old_anchor)
    rep = verify_chain(d, None, [w])
    assert _kinds(rep) == ["removed"] and "#4–#7" in rep.problems[0].detail and rep.problems[0].file == _file(d).name
    # the log goes on after the cut: the witness does not follow it back, the records differ
    _write(d, [w], n=1, start=10)
    rep = verify_chain(d, None, [w])
    assert set(_kinds(rep)) == {"removed"} and "#5–#7" in rep.problems[0].detail


def test_a_rolled_back_and_rewritten_log_is_found(tmp_path: Path) -> None:
    """No key: a forger rewrites the whole file with valid hashes and puts the anchor back in
    step — the chain alone can't tell; the witness's hash at that position differs."""
    d = tmp_path / "audit"
    w = _state(tmp_path)
    _write(d, [w], n=4)
    lines = _file(d).read_bytes().splitlines()
    _file(d).unlink()
    (d / HEAD).unlink()
    other = AuditLog(d, retention_days=0)
    for i in range(4):
        other.append(_rec(100 + i, T0 + timedelta(minutes=i)))
    other.close()
    assert len(_file(d).read_bytes().splitlines()) == len(lines)
    rep = verify_chain(d, None, [w])
    assert _kinds(rep) == ["rewritten"] and rep.problems[0].line == 4 and "rolled back" in rep.problems[0].detail


def test_a_wiped_or_absent_witness_fails_unless_the_log_was_started_without_one(tmp_path: Path) -> None:
    d = tmp_path / "audit"
    w = _state(tmp_path)
    _write(d, [w])
    with sqlite3.connect(tmp_path / "data" / "state.sqlite3") as db:
        db.execute("DELETE FROM audit_witness")
    rep = verify_chain(d, None, [w])
    assert _kinds(rep) == ["witness"] and "holds no mark" in rep.problems[0].detail
    rep = verify_chain(d, None, [w], started_without_witness=True)
    assert rep.ok and any("holds no mark" in x for x in rep.warnings)
    # no witness configured at all
    assert _kinds(verify_chain(d, None, [])) == ["witness"]
    assert verify_chain(d, None, [], started_without_witness=True).ok
    # a missing head anchor is a failure too
    (d / HEAD).unlink()
    assert sorted(_kinds(verify_chain(d, None, [], started_without_witness=False))) == ["anchor", "witness"]
    assert verify_chain(d, None, [], started_without_witness=True).ok


def test_records_no_witness_saw_are_named(tmp_path: Path) -> None:
    d = tmp_path / "audit"
    w = _state(tmp_path)
    _write(d, [w], n=3)
    _write(d, [], n=2, start=3)  # written by a process without the witness (or by hand, knowing the format)
    rep = verify_chain(d, None, [w])
    assert _kinds(rep) == ["unwitnessed"] and rep.problems[0].line == 4 and "2 record(s)" in rep.problems[0].detail


def test_a_witness_row_changed_by_hand_is_refused_with_a_key(tmp_path: Path) -> None:
    key = b"k" * 32
    d = tmp_path / "audit"
    w = _state(tmp_path, key)
    _write(d, [w], key=key)
    with sqlite3.connect(tmp_path / "data" / "state.sqlite3") as db:
        (row,) = db.execute("SELECT mark FROM audit_witness").fetchone()
        forged = {**json.loads(row), "seq": 3}
        db.execute("UPDATE audit_witness SET mark = ?, seq = 3", (json.dumps(forged),))
    got = w.read()
    assert got.marks == () and got.refused == 1
    rep = verify_chain(d, key, [w])
    assert _kinds(rep) == ["witness"] and any("do not match their seal" in x for x in rep.warnings)


def test_reindex_carries_the_state_witness_over(tmp_path: Path) -> None:
    w = _state(tmp_path)
    _write(tmp_path / "audit", [w])
    w.close()
    db = tmp_path / "data" / "state.sqlite3"
    rows = export_state_witness(db)
    for p in db.parent.iterdir():
        p.unlink()
    import_state_witness(db, rows)
    assert verify_chain(tmp_path / "audit", None, [_state(tmp_path)]).ok


def test_a_witness_that_cannot_take_the_mark_fails_the_write(tmp_path: Path) -> None:
    w = StateWitness(tmp_path / "no" / "state.sqlite3", tmp_path / "audit", Sealer())
    (tmp_path / "no").mkdir()
    (tmp_path / "no" / "state.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(AuditError, match="cannot keep the record's mark"):
        _write(tmp_path / "audit", [w], n=1)


# ----------------------------------------------------------------------------- system log (rsyslogd)


@pytest.fixture
def syslogd(tmp_path: Path):
    why = rsyslog.available()
    if why:
        pytest.skip(why)
    d = rsyslog.Rsyslog.start(tmp_path / "rsyslog")
    yield d
    d.stop()


def _syslog(tmp: Path, daemon: rsyslog.Rsyslog, key: bytes | None = None) -> SyslogWitness:
    return SyslogWitness(tmp / "audit", Sealer(key), daemon.socket, FileMarks([daemon.log]))


def test_marks_go_through_a_real_syslog_daemon_and_are_read_back(tmp_path: Path, syslogd: rsyslog.Rsyslog) -> None:
    d = tmp_path / "audit"
    w = _syslog(tmp_path, syslogd)
    _write(d, [w], n=4, days=(0, 1))
    syslogd.wait_for('"seq":8')
    text = syslogd.log.read_text()
    assert text.count("ancre-audit:") == 8 and '"file":"audit-2026-01-16.jsonl"' in text
    got = w.read()
    assert [m.seq for m in got.marks] == list(range(1, 9)) and got.refused == 0
    assert verify_chain(d, None, [w]).ok
    # the newest file deleted and the old anchor put back: the system log still has its marks
    anchor_before = (d / HEAD).read_bytes()
    _write(d, [w], n=2, days=(2,), start=8)
    syslogd.wait_for('"seq":10')
    _file(d, 2).unlink()
    (d / HEAD).write_bytes(anchor_before)
    rep = verify_chain(d, None, [w])
    assert _kinds(rep) == ["removed"] and "#9–#10" in rep.problems[0].detail
    assert rep.problems[0].file == _file(d, 2).name


def test_a_restarted_syslog_daemon_is_reconnected(tmp_path: Path, syslogd: rsyslog.Rsyslog) -> None:
    d = tmp_path / "audit"
    w = _syslog(tmp_path, syslogd)
    _write(d, [w], n=2)
    syslogd.wait_for('"seq":2')
    syslogd.stop()
    again = rsyslog.Rsyslog.start(syslogd.folder)  # a new socket at the same path
    try:
        _write(d, [w], n=2, start=2)
        again.wait_for('"seq":4')
        assert verify_chain(d, None, [w]).ok
        again.stop()
        again.socket.unlink(missing_ok=True)
        with pytest.raises(AuditError, match="cannot send the record's mark to the system log"):
            _write(d, [w], n=1, start=4)  # no syslog at all: the write fails (the answer is withheld)
    finally:
        again.stop()


def test_forged_marks_can_neither_hide_a_cut_nor_pass_without_the_key(tmp_path: Path, syslogd: rsyslog.Rsyslog) -> None:
    """Anyone on the machine can write to the system log: a mark sealed without the chain's key is
    refused; and even an accepted one can't hide the marks the writer sent."""
    key = b"s" * 32
    d = tmp_path / "audit"
    w = _syslog(tmp_path, syslogd, key)
    _write(d, [w], n=5, key=key)
    syslogd.wait_for('"seq":5')
    lines = _file(d).read_bytes().splitlines()
    _file(d).write_bytes(b"".join(line + b"\n" for line in lines[:3]))
    head = json.loads(lines[2])
    forger = _syslog(tmp_path, syslogd, key=None)  # knows the format, not the key
    forger.witness(Mark(str(d.resolve()), 3, _file(d).name, head["hash"], datetime.now(UTC).isoformat()))
    syslogd.wait_for('"seq":3,"file"', count=2)  # the writer's mark #3, and the forged one
    rep = verify_chain(d, key, [w])
    assert "removed" in _kinds(rep) and any("do not match their seal" in x for x in rep.warnings)


def test_journalctl_json_is_read() -> None:
    """``journalctl --output=json``: one object per entry, ``MESSAGE`` a string, or an array of
    byte values when it is not UTF-8 (journalctl(1), "json"; systemd.journal-fields(7) for
    ``_UID``, ``SYSLOG_IDENTIFIER``)."""
    mark = Mark("/var/lib/ancre/audit", 7, "audit-2026-01-15.jsonl", "sha256:" + "a" * 64, "2026-01-15T08:30:00.000+00:00")
    text = json.dumps(mark.sealed(Sealer()), separators=(",", ":"))
    out = b"\n".join([
        json.dumps({"__CURSOR": "s=1;i=1", "SYSLOG_IDENTIFIER": "ancre-audit", "_UID": "998", "MESSAGE": text}).encode(),
        json.dumps({"SYSLOG_IDENTIFIER": "ancre-audit", "MESSAGE": list(text.encode())}).encode(),
        json.dumps({"SYSLOG_IDENTIFIER": "ancre-audit", "MESSAGE": "not a mark"}).encode(),
        b"garbage",
    ])
    got = [Mark.parse(obj, Sealer()) for obj in parse_journal_json(out)]
    assert got == [mark, mark]


# ----------------------------------------------------------------------------- reports


def test_records_moved_to_another_days_file_are_still_read_and_flagged(tmp_path: Path) -> None:
    """Merging three days into the newest file used to make ``--since`` skip the moved records."""
    d = tmp_path / "audit"
    _write(d, [], n=5, days=(0, 1, 2))
    merged = b"".join(_file(d, k).read_bytes() for k in (0, 1, 2))
    for k in (0, 1):
        _file(d, k).unlink()
    _file(d, 2).write_bytes(merged)
    since = T0 + timedelta(days=-1)
    got = read_entries(d, since, None)
    assert len(got) == 15 and sum(e.misplaced for e in got) == 10
    st = stats(got, since)
    assert st.total.questions == 15 and st.notes and "not in their day's file" in st.notes[0]
    # renamed: an old day's file given a later date
    _write(tmp_path / "b", [], n=5, days=(0, 1))
    _file(tmp_path / "b", 0).rename(_file(tmp_path / "b", 5))
    got = read_entries(tmp_path / "b", T0 + timedelta(days=1), None)
    assert len(got) == 5 and not any(e.misplaced for e in got)  # the period holds day 1 only: found where it is
    got = read_entries(tmp_path / "b", T0 - timedelta(days=1), T0 + timedelta(hours=1))
    assert len(got) == 5 and all(e.misplaced for e in got)


def test_retention_keeps_the_witness_in_step(tmp_path: Path) -> None:
    """Retention deletes whole days with a checkpoint holding the last position: the witness's
    newest mark is still the log's, even once every day is gone; a cut after that is still found."""
    d = tmp_path / "audit"
    w = _state(tmp_path)
    _write(d, [w], n=3, days=(0, 1, 2))
    AuditLog(d, retention_days=1).purge_expired(T0 + timedelta(days=2))
    assert verify_chain(d, None, [w]).ok
    AuditLog(d, retention_days=1).purge_expired(T0 + timedelta(days=9))
    rep = verify_chain(d, None, [w])
    assert rep.ok and rep.records == 0 and rep.witnesses[0].last_seq == 9
    _write(d, [w], n=2, days=(10,), start=9)  # the log goes on from the checkpoint: #10, #11
    assert [m.seq for m in w.read().marks] == [11] and verify_chain(d, None, [w]).ok
    _file(d, 10).write_bytes(_file(d, 10).read_bytes().splitlines(keepends=True)[0])
    assert set(_kinds(verify_chain(d, None, [w]))) == {"removed"}  # by the head anchor and by the witness
