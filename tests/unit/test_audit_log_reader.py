"""The audit log read back (:mod:`ancre.audit.reading`, :mod:`ancre.reports.audit_log`): lines of other kinds linked by an id
(a question's start and its outcome written apart) read as one record, chain members left out,
targets by UNC path, folder, URL or id, periods, and pseudonyms named back with the key."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ancre.audit.reading import BadPeriodError, Pseudonyms, parse_when, read_entries
from ancre.audit.record import AuditLog
from ancre.reports.audit_log import Target, stats, user_records, who_saw

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ROOTS = {"partage": "\\\\SRV\\Partage", "sp": "https://t.sharepoint.example/sites/D/Docs"}


def src(folder: str, name: str, root: str = "\\\\SRV\\Partage\\") -> dict[str, str]:
    sep = "/" if root.startswith("http") else "\\"
    return {"filename": name, "doc_id": f"partage:{folder}/{name}", "location": f"{root}{folder}{sep}", "acl": "a1"}


def write(d: Path, lines: list[dict]) -> None:
    log = AuditLog(d)
    for i, obj in enumerate(lines):
        log._append_line(T0 + timedelta(minutes=i), json.dumps({"time": (T0 + timedelta(minutes=i)).isoformat(), **obj}))
    log.close()


def test_lines_linked_by_an_id_are_one_record(tmp_path: Path) -> None:
    write(tmp_path, [
        {"kind": "start", "id": "q1", "user": "alice", "account": "alice", "question": "Salaire ?",
         "sources": [src("RH", "Grille.docx")]},
        {"user": "bruno", "account": "bruno", "question": "Forfait ?", "sources": [src("CLIENTS", "c.docx")],
         "controls": ["refus"], "ancree": True},
        {"kind": "outcome", "id": "q1", "ancree": False, "controls": ["sans_citation"], "error": None},
        {"kind": "maintenance", "note": "rotated"},
    ])
    entries = read_entries(tmp_path)
    assert len(entries) == 3
    q1 = next(e for e in entries if e.data.get("id") == "q1")
    assert q1.data["ancree"] is False and q1.data["question"] == "Salaire ?" and q1.line == 1
    assert q1.time == T0 and not ({"hash", "prev"} & set(q1.data))  # asked at the start; no chain members
    st = stats(entries)
    assert (st.total.questions, st.total.refusals, st.total.ungrounded, st.total.users) == (2, 1, 1, 2)
    assert st.controls == {"refus": 1, "sans_citation": 1} and st.other_records == {"maintenance": 1}
    seen = who_saw(entries, Target.of("RH", ROOTS), "RH", Pseudonyms(None))
    assert [(s.account, s.outcome) for s in seen.sightings] == [("alice", "réponse")]


@pytest.mark.parametrize("given,hit", [
    ("\\\\SRV\\Partage\\RH\\Grille.docx", True), ("\\\\srv\\partage\\rh\\", True), ("//SRV/Partage/RH", True),
    ("RH/Grille.docx", True), ("RH", True), ("partage:RH/Grille.docx", True),
    ("\\\\SRV\\Partage\\RH\\Grille", False), ("R", False), ("\\\\SRV\\Partage\\RHX", False),
])
def test_targets(given: str, hit: bool) -> None:
    assert Target.of(given, ROOTS).matches(src("RH", "Grille.docx")) is hit


def test_a_sharepoint_url_target() -> None:
    s = src("Contrats", "Baumont.docx", "https://t.sharepoint.example/sites/D/Docs/")
    assert Target.of("https://t.sharepoint.example/sites/D/Docs/Contrats", ROOTS).matches(s)
    assert Target.of("Contrats/Baumont.docx", ROOTS).matches(s)


def test_periods() -> None:
    now = datetime(2026, 3, 10, 12, tzinfo=UTC)
    assert parse_when("7d", now=now) == now - timedelta(days=7)
    assert parse_when("2026-03-02") == datetime(2026, 3, 2, tzinfo=UTC)
    assert parse_when("2026-03-02", end_of_day=True).date().isoformat() == "2026-03-02"
    assert parse_when("2026-03-02T10:00+01:00") == datetime(2026, 3, 2, 9, tzinfo=UTC)
    with pytest.raises(BadPeriodError, match="hier"):
        parse_when("hier")


def test_pseudonymised_records_are_found_and_named_with_the_key(tmp_path: Path) -> None:
    key = b"k" * 32
    p = Pseudonyms(key)
    write(tmp_path, [{"user": p.of("Alice@x.ch"), "account": p.of("alice"), "question": "q", "sources": []},
                     {"user": "unix:root", "account": p.of("bruno"), "asked_for": p.of("alice"), "question": "r",
                      "sources": []}])
    got = user_records(read_entries(tmp_path), {p.of("alice")}, p)
    assert [r["question"] for r in got] == ["q", "r"]  # asked by her, and on her behalf
    assert Pseudonyms(b"other").of("alice") != p.of("alice")
    assert p.reveal(p.of("alice")) == p.of("alice")  # no directory: stays a hash
