"""``make bench`` writes what each bench rendered into docs/BENCHMARKS.md (tests/bench/markdown_report.py):
rich tables become Markdown tables, plain lines paragraphs, and a run of one bench replaces that
bench's section only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import markdown_report

DOC = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"


def _render() -> None:
    t = Table(title="[bold]Retrieval[/bold] p50")
    t.add_column("chunks")
    t.add_column("p50 | p95")
    t.add_row("10,000", "[green]5.8[/green] / 7.4 ms")
    t.add_row("100,000", "38.4 /\n50.5 ms")
    Console(width=60).print(t)
    Console().print("bm25s over [i]50[/i] queries")
    print("first | 519 | 2")


def test_capture_renders_tables_and_lines_as_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    with markdown_report.capture() as shown:
        _render()
    assert "Retrieval" in capsys.readouterr().out  # still printed as usual
    assert shown == [
        "**Retrieval p50**\n\n| chunks | p50 \\| p95 |\n|---|---|\n| 10,000 | 5.8 / 7.4 ms |\n| 100,000 | 38.4 / 50.5 ms |",
        "bm25s over 50 queries",
        "`first | 519 | 2`",
    ]


def test_a_bench_run_replaces_its_own_section_only(tmp_path: Path) -> None:
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(f"# Benchmarks\n\nkept by hand\n\n{markdown_report.LATEST_BEGIN}\n{markdown_report.LATEST_END}\n", "utf-8")
    first = {n: markdown_report.section(n, [f"| {n} |"], [("m", "1", "t")], argv=["--only", n], seconds=1,
                                        load=((1.0, 1.0, 1.0), (2.0, 2.0, 2.0)), status="ok") for n in ("ocr", "bm25")}
    markdown_report.write(first, ["bm25", "retrieval", "ocr"], doc)
    text = doc.read_text("utf-8")
    assert text.startswith("# Benchmarks\n\nkept by hand\n")
    assert text.index("### bm25") < text.index("### ocr")  # in run order, whatever order they ran in
    again = markdown_report.section("ocr", ["| ocr again |"], [], argv=["--only", "ocr"], seconds=2,
                                    load=((1.0,), (1.0,)), status="FAILED")
    markdown_report.write({"ocr": again}, ["bm25", "ocr"], doc)
    text = doc.read_text("utf-8")
    assert "| ocr again |" in text and "| ocr |" not in text and "| bm25 |" in text
    assert text.count("<!-- bench:ocr -->") == 1 and "FAILED" in text


def test_the_documentation_has_the_block_make_bench_writes_into() -> None:
    text = DOC.read_text("utf-8")
    assert text.count(markdown_report.LATEST_BEGIN) == 1 and text.count(markdown_report.LATEST_END) == 1
    with pytest.raises(ValueError, match="no <!-- bench:latest -->"):
        markdown_report.write({}, [], Path(__file__))
