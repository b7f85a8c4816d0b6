"""The audit's hash chain: every kind of tampering is found and named (file, line), the chain
survives daily rotation, retention (signed checkpoints) and concurrent writers, and a key makes
re-hashing a forged line impossible."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ancre.audit.chain import CHECKPOINTS, HEAD, Sealer, parse_line, seal
from ancre.audit.record import AuditLog, AuditRecord
from ancre.audit.verify import ChainReport, Tamper
from ancre.audit.verify import verify_chain as _verify_chain
from ancre.errors import AuditError
from ancre.query.grounding import Verdict

T0 = datetime(2026, 1, 15, 8, 30, tzinfo=UTC)
P = frozenset({"sid:S-1-1-0"})


def verify_chain(d: Path, key: bytes | None = None) -> ChainReport:
    """The chain alone (no witness: the log's witnesses are tests/unit/test_audit_witness.py's)."""
    return _verify_chain(d, key, started_without_witness=True)


def _rec(i: int, when: datetime) -> AuditRecord:
    return AuditRecord(f"user{i % 3}", P, f"question {i}", (), Verdict(True, ("refus",)), {}, when)


def _log(d: Path, days: tuple[int, ...] = (0,), per_day: int = 5, key: bytes | None = None, retention: int = 0) -> None:
    log = AuditLog(d, retention_days=retention, chain_key=key)
    i = 0
    for day in days:
        for k in range(per_day):
            log.append(_rec(i, T0 + timedelta(days=day, minutes=k)))
            i += 1
    log.close()


def _file(d: Path, day: int = 0) -> Path:
    return d / f"audit-{(T0 + timedelta(days=day)).date().isoformat()}.jsonl"


def _read(p: Path) -> list[bytes]:
    return p.read_bytes().splitlines()


def _write(p: Path, lines: list[bytes]) -> None:
    p.write_bytes(b"".join(line + b"\n" for line in lines))


def _rehash(line: bytes, sealer: Sealer, **changes: object) -> bytes:
    """What a forger who knows the format (and no key) writes: the record changed, sealed again
    on the same prev."""
    obj = json.loads(line)
    prev, prev_file = obj.pop("prev"), obj.pop("prev_file", None)
    seq, day = obj.pop("seq", None), obj.pop("day", None)
    obj.pop("hash")
    obj.update(changes)
    return seal(json.dumps(obj, ensure_ascii=False, separators=(",", ":")), prev, sealer, prev_file, seq=seq,
                day=date.fromisoformat(day) if day else None).encode()


def _kinds(d: Path, key: bytes | None = None) -> list[tuple[str, str | None, int | None]]:
    return [(p.kind.value, p.file, p.line) for p in verify_chain(d, key).problems]


def test_an_untouched_log_verifies_across_days(tmp_path: Path) -> None:
    _log(tmp_path, days=(0, 1, 3))
    rep = verify_chain(tmp_path)
    assert rep.ok and rep.records == 15 and len(rep.files) == 3 and rep.head is not None
    first = json.loads(_read(_file(tmp_path, 1))[0])
    last_before = json.loads(_read(_file(tmp_path, 0))[-1])
    # each file opens with the last hash of the one before, and names it
    assert first["prev"] == last_before["hash"] and first["prev_file"] == _file(tmp_path, 0).name
    assert json.loads(_read(_file(tmp_path, 0))[0])["prev"] == "genesis"


def test_a_changed_line_is_named(tmp_path: Path) -> None:
    _log(tmp_path)
    lines = _read(_file(tmp_path))
    lines[2] = lines[2].replace(b"question 2", b"question X")
    _write(_file(tmp_path), lines)
    assert _kinds(tmp_path) == [("changed", _file(tmp_path).name, 3)]


def test_a_changed_and_rehashed_line_breaks_the_next_link(tmp_path: Path) -> None:
    _log(tmp_path)
    lines = _read(_file(tmp_path))
    lines[2] = _rehash(lines[2], Sealer(), question="question X")
    _write(_file(tmp_path), lines)
    (p,) = verify_chain(tmp_path).problems
    assert (p.kind, p.line) == (Tamper.REMOVED, 4) and "line 3) was changed and its hash recomputed" in p.detail


def test_with_a_key_a_forger_cannot_rehash(tmp_path: Path) -> None:
    key = b"k" * 32
    _log(tmp_path, key=key)
    lines = _read(_file(tmp_path))
    assert json.loads(lines[0])["hash"].startswith("hmac-sha256:")
    lines[2] = _rehash(lines[2], Sealer(), question="question X")  # without the key: sha256 seal
    _write(_file(tmp_path), lines)
    kinds = _kinds(tmp_path, key)
    assert ("unkeyed", _file(tmp_path).name, 3) in kinds
    lines[2] = _rehash(lines[2], Sealer(b"guess" * 7), question="question X")  # a wrong key
    _write(_file(tmp_path), lines)
    assert ("changed", _file(tmp_path).name, 3) in _kinds(tmp_path, key)
    with pytest.raises(AuditError, match="keyed"):
        verify_chain(tmp_path)  # no key given for a keyed chain


def test_a_removed_line_is_named(tmp_path: Path) -> None:
    _log(tmp_path)
    lines = _read(_file(tmp_path))
    del lines[2]
    _write(_file(tmp_path), lines)
    (p,) = verify_chain(tmp_path, None).problems
    assert (p.kind, p.file, p.line) == (Tamper.REMOVED, _file(tmp_path).name, 3)


def test_removed_last_lines_are_found_by_the_head_anchor(tmp_path: Path) -> None:
    _log(tmp_path)
    _write(_file(tmp_path), _read(_file(tmp_path))[:-2])
    (p,) = verify_chain(tmp_path).problems
    assert p.kind is Tamper.REMOVED and p.file == _file(tmp_path).name and "end of" in p.detail


def test_a_removed_first_line_and_a_removed_file(tmp_path: Path) -> None:
    _log(tmp_path, days=(0, 1, 2))
    lines = _read(_file(tmp_path, 1))
    _write(_file(tmp_path, 1), lines[1:])
    assert _kinds(tmp_path) == [("removed", _file(tmp_path, 1).name, 1)]
    _write(_file(tmp_path, 1), lines)
    _file(tmp_path, 1).unlink()
    (p,) = verify_chain(tmp_path).problems
    assert (p.kind, p.file, p.line) == (Tamper.MISSING_FILE, _file(tmp_path, 2).name, 1)
    assert _file(tmp_path, 1).name in p.detail


def test_the_oldest_records_removed_without_checkpoint(tmp_path: Path) -> None:
    _log(tmp_path, days=(0, 1))
    _file(tmp_path, 0).unlink()
    (p,) = verify_chain(tmp_path).problems
    assert p.kind in (Tamper.REMOVED, Tamper.MISSING_FILE) and p.file == _file(tmp_path, 1).name


def test_an_inserted_line_is_named(tmp_path: Path) -> None:
    _log(tmp_path)
    lines = _read(_file(tmp_path))
    sealer = Sealer()
    prev = json.loads(lines[1])["hash"]
    forged = seal(json.dumps({"time": "2026-01-15T08:31:30.000+00:00", "user": "mallory", "question": "x"}), prev, sealer)
    _write(_file(tmp_path), [*lines[:2], forged.encode(), *lines[2:]])
    assert _kinds(tmp_path) == [("inserted", _file(tmp_path).name, 3)]
    # made-up prev, or a plain line without hash, or a copy of a line
    made_up = seal(json.dumps({"question": "y"}), "sha256:" + "1" * 64, sealer).encode()
    for extra in (made_up, b'{"question": "z"}', lines[0]):
        _write(_file(tmp_path), [*lines[:2], extra, *lines[2:]])
        assert _kinds(tmp_path) == [("inserted", _file(tmp_path).name, 3)], extra


def test_reordered_lines_are_named(tmp_path: Path) -> None:
    _log(tmp_path, per_day=6)
    lines = _read(_file(tmp_path))
    swapped = [*lines[:2], lines[3], lines[2], *lines[4:]]
    _write(_file(tmp_path), swapped)
    ((kind, _, line),) = _kinds(tmp_path)
    assert kind == "reordered" and line in (3, 4)
    moved = lines[:1] + lines[2:5] + [lines[1]] + lines[5:]  # line 2 moved three places down
    _write(_file(tmp_path), moved)
    assert _kinds(tmp_path) == [("reordered", _file(tmp_path).name, 5)]


def test_a_line_moved_to_another_days_file(tmp_path: Path) -> None:
    _log(tmp_path, days=(0, 1))
    a, b = _read(_file(tmp_path, 0)), _read(_file(tmp_path, 1))
    _write(_file(tmp_path, 0), a[:2] + a[3:])
    _write(_file(tmp_path, 1), [*b[:2], a[2], *b[2:]])
    # out of order, and sealed into the other day's file
    assert _kinds(tmp_path) == [("misplaced", _file(tmp_path, 1).name, 3), ("reordered", _file(tmp_path, 1).name, 3)]


def test_a_damaged_line(tmp_path: Path) -> None:
    _log(tmp_path)
    lines = _read(_file(tmp_path))
    lines[1] = lines[1][:40]
    _write(_file(tmp_path), lines)
    assert _kinds(tmp_path) == [("damaged", _file(tmp_path).name, 2)]


def test_retention_leaves_a_checkpoint_and_the_chain_verifies(tmp_path: Path) -> None:
    _log(tmp_path, days=(0, 1, 2, 3, 4))
    log = AuditLog(tmp_path, retention_days=2)
    removed = log.purge_expired(T0 + timedelta(days=4))
    assert [p.name for p in removed] == [_file(tmp_path, 0).name, _file(tmp_path, 1).name]
    cp = json.loads(_read(tmp_path / CHECKPOINTS)[-1])
    assert cp["deleted"] == [p.name for p in removed] and cp["records"] == 10 and cp["problems"] == 0
    rep = verify_chain(tmp_path)
    assert rep.ok and rep.checkpoints == 1 and rep.records == 15
    # a second purge chains a second checkpoint; writing on afterwards keeps it verifiable
    AuditLog(tmp_path, retention_days=1).purge_expired(T0 + timedelta(days=4))
    _log_more = AuditLog(tmp_path, retention_days=1)
    _log_more.append(_rec(99, T0 + timedelta(days=5)))  # new day: purges day 3 too
    _log_more.close()
    rep = verify_chain(tmp_path)
    assert rep.ok and rep.checkpoints == 3 and list(rep.files) == [_file(tmp_path, 4).name, _file(tmp_path, 5).name]
    # and a whole remaining day deleted by hand is still found
    _file(tmp_path, 4).unlink()
    assert [p.kind for p in verify_chain(tmp_path).problems] == [Tamper.MISSING_FILE]


def test_a_tampered_checkpoint_is_found(tmp_path: Path) -> None:
    _log(tmp_path, days=(0, 1, 2))
    AuditLog(tmp_path, retention_days=1).purge_expired(T0 + timedelta(days=2))
    cp = tmp_path / CHECKPOINTS
    cp.write_bytes(cp.read_bytes().replace(b'"records":5', b'"records":4'))
    kinds = [p.kind for p in verify_chain(tmp_path).problems]
    assert Tamper.CHECKPOINT in kinds


def test_retention_that_deleted_everything_still_verifies(tmp_path: Path) -> None:
    _log(tmp_path, days=(0,))
    AuditLog(tmp_path, retention_days=1).purge_expired(T0 + timedelta(days=10))
    rep = verify_chain(tmp_path)
    assert rep.ok and rep.records == 0 and rep.checkpoints == 1
    _log(tmp_path, days=(11,), per_day=2)
    assert verify_chain(tmp_path).ok


def test_concurrent_writers_keep_one_chain(tmp_path: Path) -> None:
    logs = [AuditLog(tmp_path), AuditLog(tmp_path)]

    def write(k: int) -> None:
        for i in range(25):
            logs[k % 2].append(_rec(i, T0 + timedelta(seconds=k)))

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for log in logs:
        log.close()
    rep = verify_chain(tmp_path)
    assert rep.ok and rep.records == 100


def test_lines_before_the_chain_are_counted_not_checked(tmp_path: Path) -> None:
    f = _file(tmp_path)
    f.write_text('{"time": "2026-01-15T07:00:00+00:00", "question": "old"}\n')
    _log(tmp_path)
    rep = verify_chain(tmp_path)
    assert rep.ok and rep.records == 6 and "before the chain" in rep.warnings[0]


def test_a_late_record_goes_to_the_newest_file(tmp_path: Path) -> None:
    log = AuditLog(tmp_path)
    log.append(_rec(0, T0 + timedelta(days=1)))
    log.append(_rec(1, T0))  # finished late: its day's file would sit behind the newer one
    log.close()
    assert not _file(tmp_path, 0).exists() and len(_read(_file(tmp_path, 1))) == 2
    assert verify_chain(tmp_path).ok


def test_every_line_kind_is_chained(tmp_path: Path) -> None:
    """The chain wraps the one function that appends a line: any record kind is sealed."""
    log = AuditLog(tmp_path)
    log._append_line(T0, json.dumps({"kind": "start", "id": "q1", "time": T0.isoformat()}))
    log.append(_rec(0, T0))
    log._append_line(T0, json.dumps({"kind": "outcome", "id": "q1", "time": T0.isoformat()}))
    log.close()
    lines = _read(_file(tmp_path))
    assert all(parse_line(line, Sealer()).intact for line in lines) and verify_chain(tmp_path).ok


def test_a_head_anchor_that_was_changed(tmp_path: Path) -> None:
    _log(tmp_path)
    head = json.loads((tmp_path / HEAD).read_text())
    head["hash"] = "sha256:" + "0" * 64
    (tmp_path / HEAD).write_text(json.dumps(head))
    assert [p.kind for p in verify_chain(tmp_path).problems] == [Tamper.CHANGED]


OPS = ("change", "rehash", "remove", "insert", "swap")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(OPS), n=st.integers(4, 12), at=st.integers(0, 100), data=st.data())
def test_any_single_tampering_is_found_where_it_was_done(tmp_path_factory, op: str, n: int, at: int, data) -> None:
    """Reference model: the line touched (1-based, after the change) and the kinds that name it."""
    d = tmp_path_factory.mktemp("chain")
    _log(d, per_day=n)
    f = _file(d)
    lines = _read(f)
    i = at % (n - 2)  # never the last line (the head anchor handles that)
    if op == "change":
        lines[i] = lines[i].replace(b'"question', b'"questioN', 1)
        expect = {("changed", i + 1)}
    elif op == "rehash":
        lines[i] = _rehash(lines[i], Sealer(), question="forged")
        expect = {("removed", i + 2)}
    elif op == "remove":
        del lines[i]
        expect = {("removed", i + 1)}
    elif op == "insert":
        prev = json.loads(lines[i])["hash"]
        lines.insert(i + 1, seal(json.dumps({"question": "forged"}), prev, Sealer()).encode())
        expect = {("inserted", i + 2)}
    else:
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
        expect = {("reordered", i + 1), ("reordered", i + 2)}
    _write(f, lines)
    got = [(k, line) for k, _, line in _kinds(d)]
    assert len(got) == 1 and got[0] in expect, (op, i, got)
