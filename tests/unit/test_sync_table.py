"""``ancre sync``'s table: every count a pass has is printed whole, whatever the terminal's width
(the columns no pass needs are left out; a table still too wide is turned, a row per measure)."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from ancre.app import cli
from ancre.daemon.sync.report import PassReport
from ancre.models import PassOutcome

QUIET = [
    PassReport(source="partage", outcome=PassOutcome.OK, listed=11, new=11, embedded_chunks=218, reused_chunks=3,
               duration_s=19.8),
    PassReport(source="sharepoint-direction", outcome=PassOutcome.OK, listed=1, new=1, reused_chunks=8, duration_s=0.1),
]
BUSY = [
    PassReport(source="partage", outcome=PassOutcome.PARTIAL, listed=41, new=12, changed=23, acl_only=34, deleted=45,
               unchanged=56, failed=67, skipped=78, acl_unreadable=89, embedded_chunks=910, reused_chunks=1011,
               duration_s=19.8),
    PassReport(source="sharepoint-direction", outcome=PassOutcome.OK, listed=1, new=1, reused_chunks=8, duration_s=0.1),
]


def _printed(monkeypatch: pytest.MonkeyPatch, reports: list[PassReport], width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    monkeypatch.setattr(cli, "console", console)
    cli._print_reports(reports)
    return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 100, 140, 200])
def test_every_count_of_a_busy_pass_is_printed_whole(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    out = _printed(monkeypatch, BUSY, width)
    assert "…" not in out
    assert all(len(line) <= width for line in out.splitlines())
    numbers = set(re.findall(r"\d+(?:\.\d+)?", out))
    assert {"41", "12", "23", "34", "45", "56", "67", "78", "89", "910", "1011", "19.8"} <= numbers
    assert "partial" in out and "sharepoint-direction" in out


@pytest.mark.parametrize("width", [80, 140])
def test_a_quiet_pass_leaves_out_the_counts_nobody_has(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    out = _printed(monkeypatch, QUIET, width)
    assert "…" not in out and "sharepoint-direction" in out
    for absent in ("changed", "deleted", "failed", "skipped", "unreadable"):
        assert absent not in out
    head = next(line for line in out.splitlines() if "source" in line)
    assert head.split()[:4] == ["source", "outcome", "listed", "new"]  # one row per source, not turned
    assert "218" in out and "19.8" in out


def test_no_pass_prints_the_empty_table(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _printed(monkeypatch, [], 80)
    assert out.split()[:5] == ["sync", "source", "outcome", "listed", "chunks"]
