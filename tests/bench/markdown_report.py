"""The tables a bench renders, written into docs/BENCHMARKS.md (``make bench``).

Each bench module renders its results with rich (``render(rows)``: :class:`rich.table.Table`
objects and lines of text, some with plain ``print``). :func:`capture` records what one render
shows, in order, as Markdown (a table per rich table, a paragraph per line) while it is printed as
usual; :func:`section` wraps it with the bench's name, its summary lines and the machine it ran
on; :func:`write` puts the section into the file between the bench's own markers inside the
*Latest* block, replacing that bench's previous section and keeping the others, so that
``--only eval`` updates the eval section alone.

Not a bench (its name does not start with ``bench_``): :mod:`run` imports it.
"""

from __future__ import annotations

import io
import os
import platform
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LATEST_BEGIN = "<!-- bench:latest -->"
LATEST_END = "<!-- /bench:latest -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"


def _plain(value: Any) -> str:
    from rich.text import Text

    if isinstance(value, Text):
        return value.plain
    return Text.from_markup(str(value)).plain if isinstance(value, str) else str(value)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table_markdown(table: Any) -> str:
    """A rich :class:`~rich.table.Table` as a Markdown table (its title as a bold line above it);
    markup removed, ``|`` escaped, line breaks in a cell joined with spaces."""
    columns = list(table.columns)
    header = [_cell(_plain(c.header)) or " " for c in columns]
    cells = [[_cell(_plain(x)) for x in c.cells] for c in columns]
    rows = list(zip(*cells, strict=True)) if cells else []
    out = [f"**{_cell(_plain(table.title))}**", ""] if table.title else []
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    out.extend("| " + " | ".join(r) + " |" for r in rows)
    return "\n".join(out)


class _Tee(io.TextIOBase):
    """Writes through to ``out`` and keeps what was written while ``recording``."""

    def __init__(self, out: Any) -> None:
        self.out, self.recording, self.text = out, True, io.StringIO()

    def write(self, s: str) -> int:
        if self.recording:
            self.text.write(s)
        return self.out.write(s)  # type: ignore[no-any-return]

    def flush(self) -> None:
        self.out.flush()


@contextmanager
def capture() -> Iterator[list[str]]:
    """Record what a bench's ``render`` shows as Markdown blocks (appended to the yielded list),
    printing it as usual: rich tables and texts given to ``Console.print``, and lines written to
    ``sys.stdout`` by plain ``print``."""
    from rich.console import Console
    from rich.table import Table

    shown: list[str] = []
    tee = _Tee(sys.stdout)
    original = Console.print

    def flush_plain() -> None:
        text = tee.text.getvalue().strip()
        if text:
            shown.extend(f"`{line.strip()}`" if "|" in line else line.strip() for line in text.splitlines() if line.strip())
        tee.text = io.StringIO()

    def spy(self: Console, *objects: Any, **kwargs: Any) -> None:
        flush_plain()
        for obj in objects:
            if isinstance(obj, Table):
                shown.append(table_markdown(obj))
            elif isinstance(obj, str) or type(obj).__name__ == "Text":
                shown.append(_plain(obj).strip())
        tee.recording = False
        try:
            original(self, *objects, **kwargs)
        finally:
            tee.recording = True

    Console.print = spy  # type: ignore[method-assign]
    sys.stdout = tee  # type: ignore[assignment]
    try:
        yield shown
    finally:
        Console.print = original  # type: ignore[method-assign]
        sys.stdout = tee.out
        flush_plain()


def machine() -> str:
    """The CPU model and core count (``/proc/cpuinfo``; the platform's processor elsewhere)."""
    model = platform.processor() or platform.machine()
    try:
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
        model = found.group(1).strip() if found else model
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def section(name: str, blocks: list[str], summary: list[tuple[str, str, str]], *, argv: list[str],
            seconds: float, load: tuple[tuple[float, ...], tuple[float, ...]], status: str) -> str:
    """The Markdown section of one bench's run: a heading, when and where it ran, what it
    rendered, its summary lines (measure, value, target)."""
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    before, after = (" ".join(f"{x:.2f}" for x in lo) for lo in load)
    lines = [f"### {name}", "",
             f"{when}; `tests/bench/run.py {' '.join(argv)}`".rstrip() + f"; {machine()}; load average {before} at the "
             f"start, {after} at the end; {seconds:.0f} s; {status}.", ""]
    for block in blocks:
        lines += [block, ""]
    if summary:
        lines += ["| measure | value | target |", "|---|---|---|"]
        lines += [f"| {_cell(m)} | {_cell(v)} | {_cell(t)} |" for m, v, t in summary]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write(sections: dict[str, str], order: list[str], path: Path = DOC) -> None:
    """Put each bench's section into ``path`` between ``<!-- bench:NAME -->`` markers inside the
    Latest block, replacing that bench's previous one and keeping the others, benches in
    ``order`` (then by name); a file that does not exist yet is created with the Latest block
    alone. Raises ``ValueError`` when an existing file has no Latest block."""
    text = path.read_text(encoding="utf-8") if path.exists() else f"{LATEST_BEGIN}\n{LATEST_END}\n"
    if LATEST_BEGIN not in text or LATEST_END not in text:
        raise ValueError(f"{path}: no {LATEST_BEGIN} … {LATEST_END} block to write the tables into")
    head, rest = text.split(LATEST_BEGIN, 1)
    body, tail = rest.split(LATEST_END, 1)
    kept = dict(re.findall(r"<!-- bench:(\w+) -->\n(.*?)<!-- /bench:\1 -->\n", body, re.DOTALL))
    kept.update(sections)
    names = [n for n in order if n in kept] + sorted(n for n in kept if n not in order)
    inner = "".join(f"<!-- bench:{n} -->\n{kept[n].rstrip()}\n<!-- /bench:{n} -->\n" for n in names)
    path.write_text(f"{head}{LATEST_BEGIN}\n{inner}{LATEST_END}{tail}", encoding="utf-8")


__all__ = ["DOC", "LATEST_BEGIN", "LATEST_END", "capture", "machine", "section", "table_markdown", "write"]
