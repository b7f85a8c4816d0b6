"""The ``ancre`` command line (typer + rich).

``ancre sync``, ``ancre search``, ``ancre ask``, ``ancre acl explain``, ``ancre status``, ``ancre check``, ``ancre reindex``,
``ancre report exposure``, ``ancre audit who-saw | user | stats | verify`` (:mod:`ancre.app.cli_audit`),
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
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ancre.app.cli_audit import audit_app
from ancre.app.cli_common import ConfigOpt, JsonOpt, QuestionArg, R, UserOpt, console, err, plain, shown, table, write_json
from ancre.app.cli_common import errors as _errors
from ancre.app.cli_common import load as _settings
from ancre.app.cli_common import owner as _owner
from ancre.app.runtime import Runtime
from ancre.config import Settings
from ancre.index.store_factory import make_store
from ancre.models import COLLECTIONS, PassOutcome, PassScope
from ancre.settings import EdgeStoreConfig, LocalStoreConfig, QdrantStoreConfig
from ancre.settings.locations import check_paths

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ancre: permission-trimmed, grounded retrieval.")
acl_app = typer.Typer(no_args_is_help=True, help="Inspect who may read what.")
app.add_typer(acl_app, name="acl")
report_app = typer.Typer(no_args_is_help=True, help="What the index exposes to broad principals.")
app.add_typer(report_app, name="report")
app.add_typer(audit_app, name="audit")


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


def _runtime(settings: Settings) -> Runtime:
    """The parts of ``settings`` opened in this process, once every path key was checked
    (:func:`~ancre.settings.locations.check_paths`: a missing CA file, certificate or manifest,
    a data folder that can't be written, is one line naming the key, never a traceback)."""
    check_paths(settings)
    return Runtime(settings)


@app.command()
@_errors
def sync(
    config: ConfigOpt = None,
    source: Annotated[str | None, typer.Option(help="Only this source id.")] = None,
    force: Annotated[bool, typer.Option(help="Re-read every file's content hash.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the pass reports as JSON.")] = False,
) -> None:
    """Sync every source (or one) once: a full pass, then BM25 and the vector index.

    One full pass over every source (or the one named), then BM25 rebuilt if anything changed,
    then the embedded store's vector index built if enough points are not in it yet (in a
    separate process). The directory is checked first (bind, resolve a user): a broken one stops
    here (status 2). A pass that had no room on the data folder's file system ends disk_full."""
    from ancre.app.check import check_directory, directory_configured
    from ancre.errors import DirectoryError

    settings = _settings(config)
    owner = _owner(settings)
    if owner is not None:
        with owner:
            _sync_remote(owner, source, force, as_json)
        return
    with _runtime(settings) as rt:
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
                        prog.update(task, completed=done, total=total, description=shown(path[-60:]))

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
                                description=shown((cur["path"] or "listing…")[-60:]))
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
        write_json([json.loads(r.to_json()) for r in reports], indent=2)
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
        t.add_row(plain(r.source), *(cell(r) for _, cell in columns))
    if reports and sum(widths) + 3 * len(widths) + 1 > console.width:  # each column's padding and rule
        t = Table(title="sync", box=box.SIMPLE_HEAD)
        t.add_column("")
        for r in reports:
            t.add_column(plain(r.source), justify="right")
        for name, cell in columns:
            t.add_row(name, *(cell(r) for r in reports))
    console.print(t)
    for r in reports:
        if r.reason:
            console.print(f"[yellow]{shown(r.source)}: {shown(r.reason)}[/]", highlight=False)
        if r.acl_unreadable:
            console.print(
                f"[yellow]{shown(r.source)}: {r.acl_unreadable} document(s) readable by nobody: their ACL could not be "
                "read or understood (listed below and in `ancre status`)[/]", highlight=False,
            )
        for path, status, reason in r.problems:
            console.print(f"  {shown(status):8} {shown(path)}  [dim]{shown(reason)}[/]", highlight=False)


def _warn_setup(user: str, principals: frozenset[str], empty_index: bool) -> None:
    """Say on stderr when an empty answer is due to the setup, not to the documents: a user the
    directory does not know, or an index that was never synced."""
    if not principals:
        err.print(f"[yellow]warning: {shown(repr(user))} is unknown to the directory — nothing is readable for this "
                  "identity.[/]", highlight=False)
    if empty_index:
        err.print("[yellow]warning: the index is empty — run `ancre sync` first.[/]")


def _remote_setup(owner: Any, user: str) -> None:
    """:func:`_warn_setup` with what the owner of the index says."""
    principals = frozenset(owner.get("/v1/principals", user=user)["principals"])
    _warn_setup(user, principals, owner.get("/v1/ready")["store_points"] == 0)


def _empty(rt: Runtime) -> bool:
    return not any(rt.store.count(c) for c in COLLECTIONS)


def _as_user(settings: Settings, user: str, query: Callable[[Any], R]) -> R:
    """``query(core)`` on the query core that owns the index — the running ancre's, through its
    control socket, else one opened in this process —, after saying on stderr when an empty
    answer is due to the setup (an unknown user, an index never synced)."""
    owner = _owner(settings)
    if owner is not None:
        from ancre.query.remote import RemoteQueryCore

        with RemoteQueryCore(owner) as core:
            _remote_setup(owner, user)
            return query(core)
    with _runtime(settings) as rt:
        _warn_setup(user, rt.query_core.principals(user), _empty(rt))
        return query(rt.query_core)


@app.command()
@_errors
def search(
    question: QuestionArg,
    user: UserOpt,
    config: ConfigOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Hybrid search (vector + BM25, RRF) trimmed to what USER may read now."""
    found = _as_user(_settings(config), user, lambda core: core.search(question, user, limit=limit))
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
        write_json(out)
        return
    for u in unverified:
        err.print(
            f"[yellow]warning: {u.documents} result document(s) of source {shown(repr(u.source))} left out: their "
            f"rights could not be checked live ({shown(u.reason)})[/]", highlight=False,
        )
    t = table(plain(f"{question!r} as {user}"), ("#", "file", "folder", "chunk", "score", "found by"), (
        (str(i), plain(r.filename), plain(r.location), str(r.chunk_index), f"{r.score:.4f}", plain("+".join(r.found_by)))
        for i, r in enumerate(rows, 1)
    ))
    console.print(t)
    if not rows:
        console.print("[dim]no readable result[/]")


@app.command()
@_errors
def ask(
    question: QuestionArg,
    user: UserOpt,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer QUESTION from what USER may read now, with its sources and verdict.

    The answer, its sources with their folder, whether it is grounded (ancree), the controls that
    fired and the judge's verification. Without a model configured (llm.kind = "none") the answer
    quotes the extracts (extractive mode). Through the control socket of a running ancre, the
    audit line names the Unix user who asked."""
    _print_answer(_as_user(_settings(config), user, lambda core: core.ask(question, user)), as_json)


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
        write_json(out)
        return
    console.print(plain(ans.reponse, newlines=True), highlight=False, soft_wrap=True)
    console.print()
    if ans.listing is not None and not ans.extractive:  # the extractive text has it
        from ancre.query.listing import list_note

        console.print(list_note(ans.listing), markup=False, highlight=False)
    if ans.unverified:
        from ancre.query.answer import unverified_note

        console.print(f"[yellow]{shown(unverified_note(ans.unverified))}[/]", highlight=False)
    if ans.sources:
        console.print(table("sources", ("file", "folder"), ((plain(s.filename), plain(s.location)) for s in ans.sources)))
    verdict = {True: "[green]oui[/]", False: "[red]non[/]", None: "[yellow]non établi[/]"}[ans.ancree]
    console.print(f"ancrée : {verdict}   vérification : {ans.verification}"
                  + ("   (réponse extractive)" if ans.extractive else ""))
    if ans.controles:
        console.print(plain(f"contrôles : {', '.join(ans.controles)}"), highlight=False)
    if ans.invented:
        console.print(plain(f"citations inventées : {', '.join(ans.invented)}"), highlight=False)
    if ans.unsourced:
        console.print(plain(f"affirmations non sourcées : {'; '.join(ans.unsourced)}"), highlight=False)


@acl_app.command("explain")
@_errors
def acl_explain(
    path: Annotated[str, typer.Argument(help="Path relative to the source root (CLIENTS/x.docx), or the full UNC path.")],
    user: UserOpt,
    config: ConfigOpt = None,
    source: Annotated[
        str | None, typer.Option(help="Source id (default: the source whose unc_root starts PATH, else the first one).")
    ] = None,
) -> None:
    """Say whether USER may read PATH, and which ACE or rule decided.

    The ACE or rule that decided, with group names, and the principal (and its provider) that
    decided.

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

        with _runtime(settings) as rt:
            lines = explain_lines(rt, path, user, source)
    for line in lines:
        console.print(plain(line), highlight=False, soft_wrap=True)  # no mid-sentence breaks in a pipe


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
    """List the documents a broad principal reads and the sensitive data they hold.

    Documents readable by a broad principal (Everyone, Authenticated Users, Domain Users,
    BUILTIN\\Users, Entra everyone-internal, reports.broad_principals, or more than
    reports.broad_share of the users) and the sensitive data their indexed text holds: AVS
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

        with _runtime(settings) as rt:
            report = exposure(rt, source, explain=explain)
    if html is not None:
        html.write_text(to_html(report), encoding="utf-8")
        err.print(f"HTML report written to {shown(html)}", highlight=False)
    if as_json:
        write_json(report.model_dump_json())
    elif as_csv:
        sys.stdout.write(to_csv(report, all_documents=all_documents))  # its cells through visible()
    elif html is None or console.is_terminal:
        _print_exposure(report, all_documents)


def _print_exposure(report: Any, all_documents: bool) -> None:
    """``ancre report exposure`` as tables: one per folder with an exposed document."""
    from ancre.reports.render import findings_text, readers_text

    for folder in report.folders:
        listed = [d for d in folder.documents if all_documents or d.sensitive or d.undecided]
        clean = len(folder.documents) - sum(1 for d in folder.documents if d.sensitive or d.undecided)
        if not listed:
            names = sorted({d.reach.name for d in folder.documents})
            console.print(plain(f"{folder.location}: {len(folder.documents)} document(s) readable by "
                                f"{', '.join(names)}, nothing sensitive found", style="dim"), highlight=False)
            continue
        t = Table(title=plain(f"{folder.location} (source {folder.source})"), title_justify="left")
        for col in ("document", "readable by", "users", "opened by", "found"):
            t.add_column(col, overflow="fold")
        for d in listed:
            style = "bold red" if d.sensitive else "yellow" if d.undecided else "dim"
            share = f" (> {report.broad_share:.0%} of users)" if d.reach.basis.value == "share" else ""
            share += f" until {d.reach.until}" if d.reach.until else ""
            t.add_row(plain(d.filename), plain(d.reach.name + share), plain(readers_text(d.reach)),
                      plain(d.reach.opened_by or d.reach.why_not or ""), plain(findings_text(d), style=style))
        console.print(t)
        if clean and not all_documents:
            console.print(f"[dim]  and {clean} more document(s) there readable as widely, nothing sensitive found[/]")
        for d in listed:
            for f in d.findings:
                for r in f.reasons:
                    console.print(f"[yellow]  {shown(d.filename)}: {shown(f.label)} undecided — {shown(r)}[/]",
                                  highlight=False)
    for n in report.notes:
        console.print(f"[yellow]{shown(n)}[/]", highlight=False)
    restricted = sum(r.documents for r in report.restricted) + sum(f.restricted for f in report.folders)
    console.print(
        f"{report.exposed} document(s) readable by a broad principal, {report.sensitive} with sensitive data, "
        f"{report.undecided} undecided; {restricted} document(s) in restricted folders not scanned "
        f"({report.chunks} chunks read in {report.seconds:.1f} s)", highlight=False,
    )


@app.command()
@_errors
def status(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Counts per source and status, last passes, failures and documents whose ACL can't be read."""
    from ancre.daemon.progress import index_status

    settings = _settings(config)
    owner = _owner(settings)
    if owner is not None:
        with owner:
            got = owner.get("/v1/status")
        data = {**got["index"], "disk": (got["daemon"] or {}).get("disk") or {"state": "ok"}}
    else:
        with Runtime(settings) as rt:  # the state and BM25 only: no path key checked, status stays available
            data = {**index_status(rt.state, rt.bm25.current_generation()), "disk": _disk_state(settings)}
    if as_json:
        write_json(data)
        return
    _print_status(data)


def _disk_state(settings: Settings) -> dict[str, Any]:
    """``disk`` of ``ancre status`` without a running daemon: ``disk_full`` when the embedded
    store's file system is below its margin (``[store] min_free_mb``), else ``ok``."""
    from ancre.index.disk_space import SpaceGuard

    cfg = settings.store
    if not isinstance(cfg, EdgeStoreConfig):
        return {"state": "ok"}
    short = SpaceGuard(Path(settings.data_dir) / "qdrant", int(cfg.min_free_mb * 2**20)).shortage(0, "a pass")
    if short is None:
        return {"state": "ok"}
    return {"state": "disk_full", "folder": str(short.folder), "free_bytes": short.free, "needed_bytes": short.needed,
            "message": str(short)}


def _print_status(d: dict[str, Any]) -> None:
    """The tables and lines of ``ancre status`` from its JSON form (:func:`~ancre.daemon.progress.index_status`,
    plus ``disk``)."""
    console.print(table("documents", ("source", "status", "documents"),
                        ((plain(c["source"]), plain(c["status"]), str(c["n"])) for c in d["counts"])))
    if d["skipped"]:
        console.print(table("skipped, by reason", ("source", "reason", "documents"),
                            ((plain(k["source"]), plain(k["reason"]), str(k["n"])) for k in d["skipped"])))
    console.print(f"chunks indexed: {sum(d['chunks'].values())}   BM25 generation: {d['bm25_generation']}")
    last: dict[str, dict[str, Any]] = {}
    for p in d["passes"]:
        last.setdefault(p["source"], p)
    for s, p in last.items():
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(p["finished_at"] or p["started_at"]))
        console.print(f"last pass of {shown(s)}: {when} — {shown(p['outcome'] or 'running/interrupted')}", highlight=False)
    for s, n in sorted(d["acl_unreadable"].items()):
        console.print(f"[yellow]{shown(s)}: {n} document(s) readable by nobody: ACL unreadable or undecidable[/]",
                      highlight=False)
    for p in d["problems"]:
        console.print(f"  {shown(p['problem']):8} {shown(p['source'])}:{shown(p['path'])}  [dim]{shown(p['reason'])}[/]",
                      highlight=False)
    disk = d.get("disk") or {}
    if disk.get("state") == "disk_full":
        console.print(f"[bold red]disk_full[/] {shown(str(disk.get('message', '')))}", highlight=False, soft_wrap=True)


@app.command()
@_errors
def check(
    config: ConfigOpt = None,
    user: Annotated[
        list[str] | None,
        typer.Option("--as", help="Resolve this user in the directory and check what they can read; repeatable "
                                  "(default: directory.check_user, else the first account)."),
    ] = None,
) -> None:
    """Check the configuration end to end, one line per part with what to fix.

    The files and folders the configuration names, the API's secrets (at least 32 random bytes:
    openssl rand -hex 32), the directory (bind, resolve each user), each source (list its root,
    read one ACL), what each checked user and each source's readers can read, the embedder (one
    embedding), the store, and the answering model and judge when configured (one short call
    each). A warning for what works but should be fixed; exit status 1 if any fails."""
    from ancre.app.check import CheckResult, run_checks

    settings = _settings(config)
    console.print(
        f"[green]ok  [/] {'config':<16} valid (data_dir {shown(settings.data_dir)})", highlight=False, soft_wrap=True
    )

    def show(r: CheckResult) -> None:
        style = "bold red" if not r.ok else "yellow" if r.warn else "green"
        console.print(f"[{style}]{r.status:<4}[/] {shown(r.line()[5:])}", highlight=False, soft_wrap=True, emoji=False)

    with Runtime(settings) as rt:
        results = run_checks(rt, user, on_result=show)
    failed = [r for r in results if not r.ok]
    if failed:
        console.print(f"[bold red]{len(failed)} check(s) failed[/]")
        raise typer.Exit(1)
    warned = sum(r.warn for r in results)
    console.print(f"[yellow]all checks passed, {warned} warning(s)[/]" if warned else "[green]all checks passed[/]")


@app.command()
@_errors
def reindex(
    config: ConfigOpt = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
) -> None:
    """Drop the whole index (vectors, state, BM25) and rebuild it with the configured embedder.

    The audit's witness kept in the state database is carried over."""
    from ancre.audit.witness import export_state_witness, import_state_witness

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
    witnessed = export_state_witness(data / "state.sqlite3")  # the audit's witness outlives the index
    for sub in ("bm25", "state.sqlite3", "state.sqlite3-wal", "state.sqlite3-shm"):
        p = data / sub
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    import_state_witness(data / "state.sqlite3", witnessed)
    sync(config=config, source=None, force=False, as_json=False)


@app.command()
@_errors
def daemon(config: ConfigOpt = None) -> None:
    """Run the sync daemon, which owns the index (systemd: ancre.service).

    An initial sync, then file-system events, change feeds, periodic reconciliation and ACL
    sweeps until SIGTERM; SIGHUP = full resync now (systemd: Type=notify). It serves the control
    socket the other commands and `ancre api --via-daemon` go through."""
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
def api(
    config: ConfigOpt = None, host: HostOpt = None, port: PortOpt = None,
    via_daemon: Annotated[bool, typer.Option(
        "--via-daemon", help="Answer through the running daemon's control socket; never open the index here "
                             "(the API unit, systemd/ancre-api.service). Fails at once when no daemon answers.",
    )] = False,
) -> None:
    """Run the RAG API: OpenAI-compatible /v1 for Open WebUI, /query, /health, /metrics.

    With --via-daemon it answers through the running daemon (`ancre daemon`, ancre.service), in a
    process of its own that never opens the index: the systemd pair. Without it, it opens the
    index itself: with the embedded store no daemon may run then (use `ancre serve` to run both
    in one process), with a Qdrant server the daemon may run apart."""
    from ancre.app.server import run_api, run_api_via_daemon

    settings = _settings(config)
    try:
        code = run_api_via_daemon(settings, host, port) if via_daemon else run_api(settings, host, port)
    except OSError as e:
        raise _listen_error(e, settings, host, port) from None
    raise typer.Exit(code)


@app.command()
@_errors
def serve(config: ConfigOpt = None, host: HostOpt = None, port: PortOpt = None) -> None:
    """Run the sync daemon and the RAG API in one process sharing one index.

    The embedded store has one owner: this process. SIGTERM stops both; SIGHUP = full resync
    now. The systemd pair (ancre.service and ancre-api.service) is the alternative."""
    from ancre.app.server import run_serve

    settings = _settings(config)
    try:
        code = run_serve(settings, host, port)
    except OSError as e:
        raise _listen_error(e, settings, host, port) from None
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    from ancre.daemon.logs import VisibleFormatter

    handler = logging.StreamHandler()  # stderr, as logging.basicConfig; messages through visible()
    handler.setFormatter(VisibleFormatter(logging.BASIC_FORMAT))
    logging.basicConfig(level=os.environ.get("ANCRE_LOG_LEVEL", "WARNING"), handlers=[handler])
    app()
