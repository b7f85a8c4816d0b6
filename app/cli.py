"""The ``ancre`` command line (typer + rich).

``ancre sync``, ``ancre search``, ``ancre ask``, ``ancre acl explain``, ``ancre status``, ``ancre check``, ``ancre reindex``,
``ancre report exposure``, ``ancre audit who-saw | user | stats | verify``,
``ancre daemon``, ``ancre api`` (the RAG API) and ``ancre serve`` (daemon and API in one process).
The config file is ``--config``, else ``$ANCRE_CONFIG``, else ``./ancre.toml``. Every
:class:`~ancre.errors.AncreError` is printed as one clear line and exits with status 2.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ancre.app.runtime import Runtime
from ancre.config import Settings, config_path, load_settings
from ancre.errors import AncreError
from ancre.index.store_factory import make_store
from ancre.models import COLLECTIONS, PassOutcome, PassScope
from ancre.settings import LocalStoreConfig, QdrantStoreConfig

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ancre: permission-trimmed, grounded retrieval.")
acl_app = typer.Typer(no_args_is_help=True, help="Inspect who may read what.")
app.add_typer(acl_app, name="acl")
report_app = typer.Typer(no_args_is_help=True, help="What the index exposes to broad principals.")
app.add_typer(report_app, name="report")
audit_app = typer.Typer(no_args_is_help=True, help="Read and check the audit log: who saw what.")
app.add_typer(audit_app, name="audit")

console = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML config file (default: $ANCRE_CONFIG or ./ancre.toml)."),
]
P = ParamSpec("P")
R = TypeVar("R")


def _version(value: bool) -> None:
    if value:
        from ancre import __version__

        console.print(f"ancre {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """ancre: permission-trimmed, grounded retrieval."""


def _settings(config: Path | None) -> Settings:
    """Load the config and apply its ``[logging]`` levels (libraries; ancre's only when set)."""
    from ancre.daemon.logs import apply_levels

    settings = load_settings(config_path(config))
    apply_levels(settings.logging.levels("WARNING", cli=True))
    return settings


def _owner(settings: Settings) -> Any:
    """A :class:`~ancre.query.remote.ControlClient` of the running ancre that owns the embedded
    index (it answers on its control socket), else ``None`` (open the index in-process). Raises
    :class:`~ancre.errors.ControlPermissionError` when its socket is closed to this user."""
    if settings.store.kind != "edge":
        return None
    from ancre.query.remote import ControlClient

    return ControlClient.find(settings)


def _errors(fn: Callable[P, R]) -> Callable[P, R]:
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except AncreError as e:
            err.print(f"[bold red]error:[/] {e}", highlight=False)
            raise typer.Exit(2) from None

    return wrapper


@app.command()
@_errors
def sync(
    config: ConfigOpt = None,
    source: Annotated[str | None, typer.Option(help="Only this source id.")] = None,
    force: Annotated[bool, typer.Option(help="Re-read every file's content hash.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the pass reports as JSON.")] = False,
) -> None:
    """Run one full pass over every source (or one), then rebuild BM25 if anything changed, then
    build the embedded store's vector index if enough points are not in it yet (in a separate
    process). The directory is checked first (bind, resolve a user): a broken one stops here
    (status 2)."""
    from ancre.app.check import check_directory, directory_configured
    from ancre.errors import DirectoryError

    settings = _settings(config)
    owner = _owner(settings)
    if owner is not None:
        with owner:
            _sync_remote(owner, source, force, as_json)
        return
    with Runtime(settings) as rt:
        if directory_configured(settings):
            res = check_directory(rt)
            if not res.ok:
                raise DirectoryError(f"{res.detail} — fix: {res.fix}" if res.fix else res.detail)
        reports = []
        srcs = [settings.source(source)] if source else list(settings.sources)
        for src in srcs:
            conn = rt.connector(src)
            if as_json or not console.is_terminal:
                rep = rt.engine.run_pass(conn)
            else:
                with Progress(
                    TextColumn(f"[bold]{src.id}[/]"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True,
                ) as prog:
                    task = prog.add_task("listing…", total=None)

                    def on_item(path: str, done: int, total: int, task: TaskID = task) -> None:
                        prog.update(task, completed=done, total=total, description=path[-60:])

                    rep = rt.engine.run_pass(conn, progress=on_item)
            reports.append(rep)
        if rt.store_needs_build():
            if not as_json:
                err.print("building the vector index (a separate process; searches go on)…", highlight=False)
            rt.engine.maintain_index()
    _finish_sync(reports, as_json)  # after the runtime is closed (exit 1 unless every pass was ok)


class CtrlC:
    """Whether Ctrl-C (SIGINT) was pressed, set by :func:`_ctrl_c_as_flag`'s handler.

    The handler only assigns :attr:`pressed`: a handler that takes a lock deadlocks when the
    signal lands while the main thread itself holds that lock. ``threading.Event.set`` takes the
    event's condition lock, which the main thread holds for a few bytecodes of every
    ``Event.wait`` (the handler runs on the main thread, between two bytecodes); that is how
    ``ancre sync`` once ignored a Ctrl-C for good."""

    def __init__(self) -> None:
        self.pressed = False

    def is_set(self) -> bool:
        """Whether Ctrl-C was pressed."""
        return self.pressed

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` (in slices of at most 0.05 s), less once Ctrl-C is pressed;
        whether it was. Takes no lock."""
        end = time.monotonic() + seconds
        while not self.pressed and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
        return self.pressed


@contextmanager
def _ctrl_c_as_flag() -> Iterator[CtrlC]:
    """While the block runs, Ctrl-C (SIGINT) sets the returned flag instead of raising
    ``KeyboardInterrupt`` wherever the main thread happens to be: an interrupt raised inside an
    HTTP call to the control socket can leave httpcore's connection pool lock held, and closing
    the client then waits on it for ever. A second Ctrl-C raises as usual. Main thread only."""
    stop = CtrlC()

    def on_sigint(signum: int, frame: object) -> None:
        if stop.pressed:
            raise KeyboardInterrupt
        stop.pressed = True

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _sync_remote(owner: Any, source: str | None, force: bool, as_json: bool) -> None:
    """``ancre sync`` when a running ancre owns the index: ask it for a pass (queued behind the
    running one, if any), follow its progress, print the same reports. Ctrl-C stops following,
    not the pass (exit status 130), checked between two requests to the running ancre."""
    with _ctrl_c_as_flag() as stop:
        _follow_remote(owner, source, force, as_json, stop)


def _follow_remote(owner: Any, source: str | None, force: bool, as_json: bool, stop: CtrlC) -> None:
    """:func:`_sync_remote`'s work; ``stop`` set: stop following (exit 130)."""
    from ancre.daemon.sync import PassReport

    ticket = owner.post("/v1/sync", {"source": source, "force": force})
    running = ticket["running"]
    if running is not None:
        err.print(
            f"a {running['trigger']} pass of {running['source']} is running in the ancre that owns the index; "
            f"a pass of {', '.join(ticket['sources'])} is queued after it", highlight=False,
        )
    else:
        err.print(f"pass of {', '.join(ticket['sources'])} requested from the ancre that owns the index", highlight=False)
    show = not as_json and console.is_terminal
    try:
        with Progress(
            TextColumn("[bold]{task.fields[source]}[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True, disable=not show,
        ) as prog:
            task = prog.add_task("queued…", total=None, source=",".join(ticket["sources"]))
            while not stop.is_set():
                got = owner.get("/v1/sync/reports", since=ticket["requested_at"])
                if all(s in got for s in ticket["sources"]):
                    break
                cur = (owner.get("/v1/status")["daemon"] or {}).get("current")
                if cur is not None and cur["scope"] == PassScope.FULL and cur["source"] in ticket["sources"]:
                    prog.update(task, completed=cur["done"], total=cur["total"], source=cur["source"],
                                description=(cur["path"] or "listing…")[-60:])
                stop.wait(0.5)
            if stop.is_set():
                raise KeyboardInterrupt
            reports = [PassReport(**{**got[s], "problems": [tuple(p) for p in got[s]["problems"]]}) for s in ticket["sources"]]
            # as in-process: done once the keyword index includes the changes too
            prog.update(task, description="BM25…")
            while any(r.changed_index for r in reports) and (owner.get("/v1/status")["daemon"] or {}).get("bm25_dirty"):
                if stop.wait(0.5):
                    raise KeyboardInterrupt
    except KeyboardInterrupt:
        err.print("stopped following; the pass goes on in the running ancre (`ancre status` shows it)")
        raise typer.Exit(130) from None
    _finish_sync(reports, as_json)


def _finish_sync(reports: list[Any], as_json: bool) -> None:
    """Print the pass reports (table or ``--json``); exit 1 unless every pass was ``ok``."""
    if as_json:
        console.print_json(json.dumps([json.loads(r.to_json()) for r in reports]))
    else:
        _print_reports(reports)
    if any(r.outcome != PassOutcome.OK for r in reports):
        raise typer.Exit(1)


def _count_cell(get: Callable[[Any], int], red: bool, report: Any) -> str:
    """A count of ``report`` as a table cell, in red when ``red`` and not zero."""
    n = get(report)
    return f"[red]{n}[/]" if red and n else str(n)


def _print_reports(reports: list[Any]) -> None:
    """The pass reports as one table: source, outcome, files listed, chunks embedded and seconds
    always; each other count (new, changed, acl only, deleted, unchanged, failed, skipped, acl
    unreadable, chunks reused) only when a pass has one. A table too wide for the terminal is
    printed turned (a row per measure, a column per source) rather than cut; ``--json`` has all."""
    counts: list[tuple[str, Callable[[Any], int]]] = [
        ("new", lambda r: r.new), ("changed", lambda r: r.changed), ("acl only", lambda r: r.acl_only),
        ("deleted", lambda r: r.deleted), ("unchanged", lambda r: r.unchanged), ("failed", lambda r: r.failed),
        ("skipped", lambda r: r.skipped), ("acl unreadable", lambda r: r.acl_unreadable),
        ("chunks embedded", lambda r: r.embedded_chunks), ("chunks reused", lambda r: r.reused_chunks),
    ]
    always = {"chunks embedded"}
    columns: list[tuple[str, Callable[[Any], str]]] = [
        ("outcome", lambda r: r.outcome if r.outcome == PassOutcome.OK else f"[red]{r.outcome}[/]"),
        ("listed", lambda r: str(r.listed)),
    ]
    for name, get in counts:
        if name in always or any(get(r) for r in reports):
            columns.append((name, functools.partial(_count_cell, get, name in ("failed", "acl unreadable"))))
    columns.append(("seconds", lambda r: f"{r.duration_s:.1f}"))
    t = Table(title="sync", box=box.SIMPLE_HEAD)
    t.add_column("source", no_wrap=True)
    for name, _ in columns:
        t.add_column(name, justify="left" if name == "outcome" else "right", min_width=max(len(w) for w in name.split()))
    widths = [max([len("source"), *(len(r.source) for r in reports)])] + [
        max([*(len(w) for w in name.split()), *(Text.from_markup(cell(r)).cell_len for r in reports)])
        for name, cell in columns
    ]
    for r in reports:
        t.add_row(r.source, *(cell(r) for _, cell in columns))
    if reports and sum(widths) + 3 * len(widths) + 1 > console.width:  # each column's padding and rule
        t = Table(title="sync", box=box.SIMPLE_HEAD)
        t.add_column("")
        for r in reports:
            t.add_column(r.source, justify="right")
        for name, cell in columns:
            t.add_row(name, *(cell(r) for r in reports))
    console.print(t)
    for r in reports:
        if r.reason:
            console.print(f"[yellow]{r.source}: {r.reason}[/]")
        if r.acl_unreadable:
            console.print(
                f"[yellow]{r.source}: {r.acl_unreadable} document(s) readable by nobody: their ACL could not be "
                "read or understood (listed below and in `ancre status`)[/]", highlight=False,
            )
        for path, status, reason in r.problems:
            console.print(f"  {status:8} {path}  [dim]{reason}[/]", highlight=False)


def _warn_setup(user: str, principals: frozenset[str], empty_index: bool) -> None:
    """Say on stderr when an empty answer is due to the setup, not to the documents: a user the
    directory does not know, or an index that was never synced."""
    if not principals:
        err.print(f"[yellow]warning: {user!r} is unknown to the directory — nothing is readable for this identity.[/]")
    if empty_index:
        err.print("[yellow]warning: the index is empty — run `ancre sync` first.[/]")


def _remote_setup(owner: Any, user: str) -> None:
    """:func:`_warn_setup` with what the owner of the index says."""
    principals = frozenset(owner.get("/v1/principals", user=user)["principals"])
    _warn_setup(user, principals, owner.get("/v1/ready")["store_points"] == 0)


def _empty(rt: Runtime) -> bool:
    return not any(rt.store.count(c) for c in COLLECTIONS)


@app.command()
@_errors
def search(
    question: Annotated[str, typer.Argument(help="The question, in any language.")],
    user: Annotated[str, typer.Option("--as", help="Search as this user (sAMAccountName, UPN or DOMAIN\\user).")],
    config: ConfigOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 10,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Hybrid search (vector + BM25, RRF) trimmed to what USER may read now."""
    settings = _settings(config)
    owner = _owner(settings)
    if owner is not None:
        from ancre.query.remote import RemoteQueryCore

        with RemoteQueryCore(owner) as core:
            _remote_setup(owner, user)
            found = core.search(question, user, limit=limit)
    else:
        with Runtime(settings) as rt:
            _warn_setup(user, rt.query_core.principals(user), _empty(rt))
            found = rt.query_core.search(question, user, limit=limit)
    rows, unverified = list(found.hits), list(found.unverified)
    _print_search(question, user, rows, unverified, as_json)


def _print_search(question: str, user: str, rows: list[Any], unverified: list[Any], as_json: bool) -> None:
    """``ancre search`` output; ``rows``: results with ``filename``, ``path``, ``doc_id``,
    ``chunk_index``, ``score``, ``location``, ``found_by``; ``unverified``: ``source``,
    ``documents``, ``reason``."""
    if as_json:
        out = {
            "user": user,
            "results": [
                {
                    "filename": r.filename, "path": r.path, "doc_id": r.doc_id, "chunk_index": r.chunk_index,
                    "score": round(r.score, 6), "location": r.location, "found_by": list(r.found_by),
                }
                for r in rows
            ],
            "unverified": [
                {"source": u.source, "documents": u.documents, "reason": u.reason} for u in unverified
            ],
        }
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        return
    for u in unverified:
        err.print(
            f"[yellow]warning: {u.documents} result document(s) of source {u.source!r} left out: their rights "
            f"could not be checked live ({escape(u.reason)})[/]", highlight=False,
        )
    t = Table(title=f"{question!r} as {user}")
    for col in ("#", "file", "folder", "chunk", "score", "found by"):
        t.add_column(col)
    for i, r in enumerate(rows, 1):
        t.add_row(str(i), r.filename, r.location, str(r.chunk_index), f"{r.score:.4f}", "+".join(r.found_by))
    console.print(t)
    if not rows:
        console.print("[dim]no readable result[/]")


@app.command()
@_errors
def ask(
    question: Annotated[str, typer.Argument(help="The question, in French or any language.")],
    user: Annotated[str, typer.Option("--as", help="Ask as this user (sAMAccountName, UPN or DOMAIN\\user).")],
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as one JSON object.")] = False,
) -> None:
    """Answer from what USER may read now: the answer, its sources with their folder, whether it
    is grounded (ancree), the controls that fired and the judge's verification. Without a model
    configured (llm.kind = "none") the answer quotes the extracts (extractive mode). Through the
    control socket of a running ancre, the audit line names the Unix user who asked."""
    settings = _settings(config)
    owner = _owner(settings)
    if owner is not None:
        from ancre.query.remote import RemoteQueryCore

        with RemoteQueryCore(owner) as core:
            _remote_setup(owner, user)
            ans = core.ask(question, user)
    else:
        with Runtime(settings) as rt:
            _warn_setup(user, rt.query_core.principals(user), _empty(rt))
            ans = rt.query_core.ask(question, user)
    _print_answer(ans, as_json)


def _print_answer(ans: Any, as_json: bool) -> None:
    """``ancre ask`` output for an :class:`~ancre.query.answer.Answer`."""
    if as_json:
        out = {
            "reponse": ans.reponse,
            "sources": [{"filename": s.filename, "location": s.location, "path": s.path} for s in ans.sources],
            "ancree": ans.ancree,
            "controles": list(ans.controles),
            "verification": ans.verification,
            "extractive": ans.extractive,
            "documents_ecartes": [
                {"source": u.source, "documents": u.documents, "raison": u.outcome} for u in ans.unverified
            ],
        }
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        return
    console.print(ans.reponse, markup=False, highlight=False, soft_wrap=True)
    console.print()
    if ans.listing is not None and not ans.extractive:  # the extractive text has it
        from ancre.query.listing import list_note

        console.print(list_note(ans.listing), markup=False, highlight=False)
    if ans.unverified:
        from ancre.query.answer import unverified_note

        console.print(f"[yellow]{escape(unverified_note(ans.unverified))}[/]", highlight=False)
    if ans.sources:
        t = Table(title="sources")
        for col in ("file", "folder"):
            t.add_column(col)
        for src in ans.sources:
            t.add_row(src.filename, src.location)
        console.print(t)
    verdict = {True: "[green]oui[/]", False: "[red]non[/]", None: "[yellow]non établi[/]"}[ans.ancree]
    console.print(f"ancrée : {verdict}   vérification : {ans.verification}"
                  + ("   (réponse extractive)" if ans.extractive else ""))
    if ans.controles:
        console.print(f"contrôles : {', '.join(ans.controles)}", markup=False, highlight=False)
    if ans.invented:
        console.print(f"citations inventées : {', '.join(ans.invented)}", markup=False, highlight=False)
    if ans.unsourced:
        console.print(f"affirmations non sourcées : {'; '.join(ans.unsourced)}", markup=False, highlight=False)


@acl_app.command("explain")
@_errors
def acl_explain(
    path: Annotated[str, typer.Argument(help="Path relative to the source root (CLIENTS/x.docx), or the full UNC path.")],
    user: Annotated[str, typer.Option("--as", help="The user.")],
    config: ConfigOpt = None,
    source: Annotated[
        str | None, typer.Option(help="Source id (default: the source whose unc_root starts PATH, else the first one).")
    ] = None,
) -> None:
    """Whether USER may read PATH, the ACE or rule that decided, with group names, and the
    principal (and its provider) that decided.

    On an SMB source the file's security descriptor is read from the server (and the share
    permissions, when configured, are applied on top); on a folder source it comes from the ACL
    manifest, or from the source's configured principals."""
    settings = _settings(config)
    owner = _owner(settings)
    if owner is not None:
        with owner:
            lines = owner.post("/v1/acl/explain", {"path": path, "user": user, "source": source})["lines"]
    else:
        from ancre.app.explain import explain_lines

        with Runtime(settings) as rt:
            lines = explain_lines(rt, path, user, source)
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)  # no mid-sentence breaks in a pipe


@report_app.command("exposure")
@_errors
def report_exposure(
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole report as JSON.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print one CSV line per exposed document with findings.")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write the report as one self-contained HTML page to this file.")
    ] = None,
    source: Annotated[list[str] | None, typer.Option("--source", help="Only this source id (repeatable).")] = None,
    explain: Annotated[bool, typer.Option(
        "--explain/--no-explain",
        help="Name the ACE or permission that opened each exposed document (reads its rights at the source).",
    )] = True,
    all_documents: Annotated[bool, typer.Option("--all", help="List exposed documents where nothing was found too.")] = False,
) -> None:
    """Documents readable by a broad principal (Everyone, Authenticated Users, Domain Users,
    BUILTIN\\Users, Entra everyone-internal, [reports] broad_principals, or more than
    [reports] broad_share of the users) and the sensitive data their indexed text holds: AVS
    numbers, IBANs, card numbers (check digits verified), salary and health vocabulary,
    passwords and access codes, « confidentiel » markings and sensitivity labels — kinds and
    counts, never the values. From the index alone."""
    from ancre.reports.exposure import ExposureReport
    from ancre.reports.render import to_csv, to_html

    settings = _settings(config)
    owner = _owner(settings)
    if owner is not None:
        with owner:
            report = ExposureReport.model_validate(
                owner.post("/v1/report/exposure", {"sources": source or None, "explain": explain})
            )
    else:
        from ancre.app.reports import exposure

        with Runtime(settings) as rt:
            report = exposure(rt, source, explain=explain)
    if html is not None:
        html.write_text(to_html(report), encoding="utf-8")
        err.print(f"HTML report written to {escape(str(html))}", highlight=False)
    if as_json:
        sys.stdout.write(report.model_dump_json() + "\n")
    elif as_csv:
        sys.stdout.write(to_csv(report, all_documents=all_documents))
    elif html is None or console.is_terminal:
        _print_exposure(report, all_documents)


def _print_exposure(report: Any, all_documents: bool) -> None:
    """``ancre report exposure`` as tables: one per folder with an exposed document."""
    from ancre.reports.render import findings_text, readers_text

    for folder in report.folders:
        shown = [d for d in folder.documents if all_documents or d.sensitive or d.undecided]
        clean = len(folder.documents) - sum(1 for d in folder.documents if d.sensitive or d.undecided)
        if not shown:
            names = sorted({d.reach.name for d in folder.documents})
            console.print(Text(f"{folder.location}: {len(folder.documents)} document(s) readable by "
                               f"{', '.join(names)}, nothing sensitive found", style="dim"), highlight=False)
            continue
        t = Table(title=Text(f"{folder.location} (source {folder.source})"), title_justify="left")
        for col in ("document", "readable by", "users", "opened by", "found"):
            t.add_column(col, overflow="fold")
        for d in shown:
            style = "bold red" if d.sensitive else "yellow" if d.undecided else "dim"
            share = f" (> {report.broad_share:.0%} of users)" if d.reach.basis.value == "share" else ""
            share += f" until {d.reach.until}" if d.reach.until else ""
            t.add_row(Text(d.filename), Text(d.reach.name + share), readers_text(d.reach),
                      Text(d.reach.opened_by or d.reach.why_not or ""), Text(findings_text(d), style=style))
        console.print(t)
        if clean and not all_documents:
            console.print(f"[dim]  and {clean} more document(s) there readable as widely, nothing sensitive found[/]")
        for d in shown:
            for f in d.findings:
                for r in f.reasons:
                    console.print(f"[yellow]  {escape(d.filename)}: {escape(f.label)} undecided — {escape(r)}[/]",
                                  highlight=False)
    for n in report.notes:
        console.print(f"[yellow]{escape(n)}[/]", highlight=False)
    restricted = sum(r.documents for r in report.restricted) + sum(f.restricted for f in report.folders)
    console.print(
        f"{report.exposed} document(s) readable by a broad principal, {report.sensitive} with sensitive data, "
        f"{report.undecided} undecided; {restricted} document(s) in restricted folders not scanned "
        f"({report.chunks} chunks read in {report.seconds:.1f} s)", highlight=False,
    )


PeriodOpt = Annotated[str | None, typer.Option(help="From this date (2026-01-15), date-time (UTC) or duration back (7d, 12h).")]
UntilOpt = Annotated[str | None, typer.Option(help="Until this date (included), date-time or duration back.")]
KeyFileOpt = Annotated[Path | None, typer.Option("--key-file", help="Key file (default: the configured one).")]


def _period(since: str | None, until: str | None) -> tuple[Any, Any]:
    from ancre.reports.audit_log import parse_when

    return (parse_when(since) if since else None, parse_when(until, end_of_day=True) if until else None)


@audit_app.command("who-saw")
@_errors
def audit_who_saw(
    path: Annotated[str, typer.Argument(
        help="A document or folder: UNC path or URL, a path relative to a source root (RH/Grille.docx, RH), or a document id.",
    )],
    config: ConfigOpt = None,
    since: PeriodOpt = None,
    until: UntilOpt = None,
    source: Annotated[str | None, typer.Option(help="PATH is relative to this source's root (default: any source).")] = None,
    key_file: KeyFileOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Who was shown extracts of this document (or of any document in this folder) between these
    dates, from the audit log: each user, when, which question, which document, the outcome —
    also for documents since deleted or re-permissioned (their rights now are said), and, with
    the pseudonymisation key, with pseudonymised logs."""
    from ancre.app.reports import check_audit_folder, entries, now_state, pseudonyms, target_of
    from ancre.reports.audit_log import json_default, who_saw

    settings = _settings(config)
    check_audit_folder(settings)
    start, end = _period(since, until)
    with Runtime(settings) as rt:
        names = pseudonyms(rt, key_file)
        result = who_saw(entries(settings, start, end), target_of(settings, path, source), path, names,
                         now_state=now_state(rt), since=start, until=end)
    if as_json:
        sys.stdout.write(json.dumps(result, default=json_default, ensure_ascii=False) + "\n")
        return
    t = Table(title=f"who saw {path}", title_justify="left")
    for col in ("when (UTC)", "user", "question", "document", "outcome", "rights now"):
        t.add_column(col, overflow="fold")
    now_words = {"unchanged": "unchanged", "changed": "[yellow]changed since[/]", "deleted": "[yellow]deleted since[/]",
                 None: "?"}
    for r in result.sightings:
        who = r.account or r.user or "?"
        if r.asked_for or (r.user and r.user.startswith("unix:")):
            who = f"{who} ({r.user})" if r.user != who else who
        t.add_row((r.time or "?")[:19].replace("T", " "), escape(who), escape(r.question),
                  escape(r.filename) + (" [dim](cited)[/]" if r.cited else ""), r.outcome, now_words.get(r.now, "?"))
    console.print(t)
    for n in result.notes:
        console.print(f"[yellow]{escape(n)}[/]", highlight=False)
    console.print(f"{len(result.sightings)} time(s), {len(result.people)} person(s): {escape(', '.join(result.people))}",
                  highlight=False)


@audit_app.command("user")
@_errors
def audit_user(
    user: Annotated[str, typer.Argument(help="The person: sAMAccountName, UPN or DOMAIN\\user.")],
    config: ConfigOpt = None,
    since: PeriodOpt = None,
    until: UntilOpt = None,
    key_file: KeyFileOpt = None,
) -> None:
    """Everything the audit log holds about one person (the nLPD right of access), as JSON: the
    questions they asked and those asked on their behalf, with their sources and outcomes."""
    from ancre.app.reports import check_audit_folder, entries, pseudonyms
    from ancre.reports.audit_log import subject_forms, user_records

    settings = _settings(config)
    check_audit_folder(settings)
    start, end = _period(since, until)
    with Runtime(settings) as rt:
        names = pseudonyms(rt, key_file)
        account, forms = subject_forms(user, rt.directory, names)
        records = user_records(entries(settings, start, end), forms, names)
    out = {"subject": user, "account": account, "since": start.isoformat() if start else None,
           "until": end.isoformat() if end else None, "pseudonymised": names.key is not None,
           "count": len(records), "records": records}
    sys.stdout.write(json.dumps(out, ensure_ascii=False, indent=2) + "\n")


@audit_app.command("stats")
@_errors
def audit_stats(
    config: ConfigOpt = None, since: PeriodOpt = None, until: UntilOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Questions per day, refusals, ungrounded answers, errors, and the controls that fired."""
    from ancre.app.reports import check_audit_folder, entries
    from ancre.reports.audit_log import json_default, stats

    settings = _settings(config)
    check_audit_folder(settings)
    start, end = _period(since, until)
    st = stats(entries(settings, start, end), start, end)
    if as_json:
        sys.stdout.write(json.dumps(st, default=json_default, ensure_ascii=False) + "\n")
        return
    t = Table(title="audit", title_justify="left")
    for col in ("day", "questions", "refusals", "ungrounded", "not established", "errors", "users"):
        t.add_column(col, justify="right" if col != "day" else "left")
    for d in (*st.days, st.total):
        t.add_row(d.day, str(d.questions), str(d.refusals), str(d.ungrounded), str(d.not_established), str(d.errors),
                  str(d.users), style="bold" if d.day == "total" else None)
    console.print(t)
    if st.controls:
        console.print("controls fired: " + ", ".join(f"{k} {v}" for k, v in st.controls.items()), highlight=False)
    if st.verification:
        console.print("verification: " + ", ".join(f"{k} {v}" for k, v in st.verification.items()), highlight=False)
    if st.other_records:
        console.print("other records: " + ", ".join(f"{k} {v}" for k, v in st.other_records.items()), highlight=False)


@audit_app.command("verify")
@_errors
def audit_verify(
    config: ConfigOpt = None, key_file: KeyFileOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Check the audit's hash chain: every changed, removed, inserted or reordered line is named
    (file and line), across daily files and retention checkpoints. Exit status 1 if any."""
    from dataclasses import asdict

    from ancre.app.reports import chain_key_of, check_audit_folder
    from ancre.query.audit_chain import verify_chain

    settings = _settings(config)
    rep = verify_chain(check_audit_folder(settings), chain_key_of(settings, key_file))
    if as_json:
        sys.stdout.write(json.dumps({**asdict(rep), "ok": rep.ok}, ensure_ascii=False) + "\n")
    else:
        keyed = "HMAC-SHA256 (keyed)" if rep.keyed else "SHA-256 (no key)"
        console.print(f"{len(rep.files)} file(s), {rep.records} record(s), {rep.checkpoints} retention checkpoint(s), "
                      f"chain {keyed}", highlight=False)
        for w in rep.warnings:
            console.print(f"[yellow]warning: {escape(w)}[/]", highlight=False)
        for p in rep.problems:
            when = f" [dim]({p.time})[/]" if p.time else ""
            console.print(f"[bold red]{p.kind.value:12}[/] {escape(p.detail)}{when}", highlight=False, soft_wrap=True)
        console.print("[green]chain intact[/]" if rep.ok else f"[bold red]{len(rep.problems)} problem(s)[/]")
    if not rep.ok:
        raise typer.Exit(1)


@app.command()
@_errors
def status(config: ConfigOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Counts per source and status, last passes, failures and documents whose ACL can't be read."""
    from ancre.daemon.progress import index_status

    settings = _settings(config)
    owner = _owner(settings)
    if owner is not None:
        with owner:
            data = owner.get("/v1/status")["index"]
    else:
        with Runtime(settings) as rt:
            data = index_status(rt.state, rt.bm25.current_generation())
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
        return
    _print_status(data)


def _print_status(d: dict[str, Any]) -> None:
    """The tables and lines of ``ancre status`` from its JSON form (:func:`~ancre.daemon.progress.index_status`)."""
    t = Table(title="documents")
    for c in ("source", "status", "documents"):
        t.add_column(c)
    for c in d["counts"]:
        t.add_row(c["source"], c["status"], str(c["n"]))
    console.print(t)
    if d["skipped"]:
        ts = Table(title="skipped, by reason")
        for c in ("source", "reason", "documents"):
            ts.add_column(c)
        for k in d["skipped"]:
            ts.add_row(k["source"], k["reason"], str(k["n"]))
        console.print(ts)
    console.print(f"chunks indexed: {sum(d['chunks'].values())}   BM25 generation: {d['bm25_generation']}")
    last: dict[str, dict[str, Any]] = {}
    for p in d["passes"]:
        last.setdefault(p["source"], p)
    for s, p in last.items():
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(p["finished_at"] or p["started_at"]))
        console.print(f"last pass of {s}: {when} — {p['outcome'] or 'running/interrupted'}")
    for s, n in sorted(d["acl_unreadable"].items()):
        console.print(f"[yellow]{s}: {n} document(s) readable by nobody: ACL unreadable or undecidable[/]", highlight=False)
    for p in d["problems"]:
        console.print(f"  {p['problem']:8} {p['source']}:{p['path']}  [dim]{p['reason']}[/]", highlight=False)


@app.command()
@_errors
def check(
    config: ConfigOpt = None,
    user: Annotated[
        str | None,
        typer.Option("--as", help="Resolve this user in the directory (default: directory.check_user, else the first account)."),
    ] = None,
) -> None:
    """Check the configuration end to end: the directory (bind, resolve a user), each source (list
    its root, read one ACL), the embedder (one embedding), the store, and the answering model and
    judge when configured (one short call each). One line per check, with what to fix; exit
    status 1 if any fails."""
    from ancre.app.check import CheckResult, run_checks

    settings = _settings(config)
    from rich.markup import escape

    console.print(
        f"[green]ok  [/] {'config':<16} valid (data_dir {escape(str(settings.data_dir))})", highlight=False, soft_wrap=True
    )

    def show(r: CheckResult) -> None:
        style = "green" if r.ok else "bold red"
        console.print(f"[{style}]{'ok  ' if r.ok else 'FAIL'}[/] {escape(r.line()[5:])}", highlight=False, soft_wrap=True)

    with Runtime(settings) as rt:
        results = run_checks(rt, user, on_result=show)
    failed = [r for r in results if not r.ok]
    if failed:
        console.print(f"[bold red]{len(failed)} check(s) failed[/]")
        raise typer.Exit(1)
    console.print("[green]all checks passed[/]")


@app.command()
@_errors
def reindex(
    config: ConfigOpt = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
) -> None:
    """Drop the whole index (vectors, state, BM25) and rebuild it with the configured embedder."""

    settings = _settings(config)
    data = Path(settings.data_dir)
    cfg = settings.store
    where = cfg.url if isinstance(cfg, QdrantStoreConfig) else cfg.path if isinstance(cfg, LocalStoreConfig) else data
    if not yes:
        typer.confirm(f"Delete the index ({where}) and rebuild it with {settings.embedder.kind}?", abort=True)
    owner = _owner(settings)
    if owner is not None:
        with owner:
            owner.post("/v1/reindex")  # refused by the owner: ControlBusyError says why
    store = make_store(settings.store, data)
    try:
        store.drop_all()
    finally:
        store.close()
    for sub in ("bm25", "state.sqlite3", "state.sqlite3-wal", "state.sqlite3-shm"):
        p = data / sub
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    sync(config=config, source=None, force=False, as_json=False)


@app.command()
@_errors
def daemon(config: ConfigOpt = None) -> None:
    """Run the sync daemon: initial sync, then file-system events, periodic reconciliation and
    ACL sweeps until SIGTERM; SIGHUP = full resync now (systemd: Type=notify)."""
    from ancre.app.daemon import run_daemon

    raise typer.Exit(run_daemon(_settings(config)))


HostOpt = Annotated[str | None, typer.Option(help="Listening address (default: api.host, 127.0.0.1).")]
PortOpt = Annotated[int | None, typer.Option(min=0, max=65535, help="Listening port (default: api.port).")]


def _listen_error(e: OSError, settings: Settings, host: str | None, port: int | None) -> typer.Exit:
    where = f"{host or settings.api.host}:{settings.api.port if port is None else port}"
    err.print(f"[bold red]error:[/] cannot listen on {where}: {e.strerror or e}", highlight=False)
    return typer.Exit(2)


@app.command()
@_errors
def api(config: ConfigOpt = None, host: HostOpt = None, port: PortOpt = None) -> None:
    """Run the RAG API alone: OpenAI-compatible /v1 for Open WebUI, /query, /health, /metrics.
    With the embedded store, no other process (daemon) may run on the same index: use
    `ancre serve` to run both in one process, or a Qdrant server to run them apart."""
    from ancre.app.server import run_api

    settings = _settings(config)
    try:
        code = run_api(settings, host, port)
    except OSError as e:
        raise _listen_error(e, settings, host, port) from None
    raise typer.Exit(code)


@app.command()
@_errors
def serve(config: ConfigOpt = None, host: HostOpt = None, port: PortOpt = None) -> None:
    """Run the sync daemon and the RAG API in one process sharing one index (the embedded store
    has one owner). SIGTERM stops both; SIGHUP = full resync now."""
    from ancre.app.server import run_serve

    settings = _settings(config)
    try:
        code = run_serve(settings, host, port)
    except OSError as e:
        raise _listen_error(e, settings, host, port) from None
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    logging.basicConfig(level=os.environ.get("ANCRE_LOG_LEVEL", "WARNING"))
    app()
