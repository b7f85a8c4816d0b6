"""``ancre audit who-saw | user | stats | verify``: the audit log read back and checked (docs/REPORTS.md
"Who saw what", docs/SECURITY.md "A tamper-evident audit"), registered on the ``ancre`` command line by
:mod:`ancre.app.cli`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ancre.app.cli_common import ConfigOpt, JsonOpt, console, plain, shown, write_json
from ancre.app.cli_common import errors as _errors
from ancre.app.cli_common import load as _settings
from ancre.app.runtime import Runtime

audit_app = typer.Typer(no_args_is_help=True, help="Read and check the audit log: who saw what.")

PeriodOpt = Annotated[str | None, typer.Option(help="From this date (2026-01-15), date-time (UTC) or duration back (7d, 12h).")]
UntilOpt = Annotated[str | None, typer.Option(help="Until this date (included), date-time or duration back.")]
KeyFileOpt = Annotated[Path | None, typer.Option("--key-file", help="Key file (default: the configured one).")]


def _period(since: str | None, until: str | None) -> tuple[Any, Any]:
    from ancre.audit.reading import parse_when

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
    as_json: JsonOpt = False,
) -> None:
    """Say who was shown extracts of a document (or folder), when, and for which question.

    From the audit log, between the dates given: each user, when, which question, which document,
    the outcome — also for documents since deleted or re-permissioned (their rights now are
    said), and, with the pseudonymisation key, with pseudonymised logs."""
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
        write_json(result, default=json_default)
        return
    t = Table(title=plain(f"who saw {path}"), title_justify="left")
    for col in ("when (UTC)", "user", "question", "document", "outcome", "rights now"):
        t.add_column(col, overflow="fold")
    now_words = {"unchanged": "unchanged", "changed": "[yellow]changed since[/]", "deleted": "[yellow]deleted since[/]",
                 None: "?"}
    for r in result.sightings:
        who = r.account or r.user or "?"
        if r.asked_for or (r.user and r.user.startswith("unix:")):
            who = f"{who} ({r.user})" if r.user != who else who
        t.add_row(shown((r.time or "?")[:19].replace("T", " ")), shown(who), shown(r.question),
                  shown(r.filename) + (" [dim](cited)[/]" if r.cited else ""), r.outcome, now_words.get(r.now, "?"))
    console.print(t)
    for n in result.notes:
        console.print(f"[yellow]{shown(n)}[/]", highlight=False)
    console.print(f"{len(result.sightings)} time(s), {len(result.people)} person(s): {shown(', '.join(result.people))}",
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
    """Print everything the audit log holds about one person, as JSON (nLPD right of access).

    The questions they asked and those asked on their behalf, with their sources and outcomes."""
    from ancre.app.reports import check_audit_folder, entries, pseudonyms
    from ancre.audit.reading import misplaced_note
    from ancre.reports.audit_log import subject_forms, user_records

    settings = _settings(config)
    check_audit_folder(settings)
    start, end = _period(since, until)
    with Runtime(settings) as rt:
        names = pseudonyms(rt, key_file)
        account, forms = subject_forms(user, rt.directory, names)
        found = entries(settings, start, end)
        records = user_records(found, forms, names)
    note = misplaced_note(found)
    out = {"subject": user, "account": account, "since": start.isoformat() if start else None,
           "until": end.isoformat() if end else None, "pseudonymised": names.key is not None,
           "count": len(records), "records": records, "notes": [note] if note else []}
    write_json(out, indent=2)


@audit_app.command("stats")
@_errors
def audit_stats(
    config: ConfigOpt = None, since: PeriodOpt = None, until: UntilOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Questions per day, refusals, ungrounded answers, errors, and the controls that fired."""
    from ancre.app.reports import check_audit_folder, entries
    from ancre.reports.audit_log import json_default, stats

    settings = _settings(config)
    check_audit_folder(settings)
    start, end = _period(since, until)
    st = stats(entries(settings, start, end), start, end)
    if as_json:
        write_json(st, default=json_default)
        return
    t = Table(title="audit", title_justify="left")
    for col in ("day", "questions", "refusals", "ungrounded", "not established", "errors", "users"):
        t.add_column(col, justify="right" if col != "day" else "left")
    for d in (*st.days, st.total):
        t.add_row(plain(d.day), str(d.questions), str(d.refusals), str(d.ungrounded), str(d.not_established), str(d.errors),
                  str(d.users), style="bold" if d.day == "total" else None)
    console.print(t)
    if st.controls:
        console.print(plain("controls fired: " + ", ".join(f"{k} {v}" for k, v in st.controls.items())), highlight=False)
    if st.verification:
        console.print(plain("verification: " + ", ".join(f"{k} {v}" for k, v in st.verification.items())), highlight=False)
    if st.other_records:
        console.print(plain("other records: " + ", ".join(f"{k} {v}" for k, v in st.other_records.items())),
                      highlight=False)
    for n in st.notes:
        console.print(f"[yellow]warning: {shown(n)}[/]", highlight=False)


@audit_app.command("verify")
@_errors
def audit_verify(
    config: ConfigOpt = None, key_file: KeyFileOpt = None,
    started_without_witness: Annotated[bool, typer.Option(
        "--started-without-witness",
        help="This log was started without a head anchor or without its witnesses (an older ancre, or a witness "
             "added since): their absence is a warning, not a failure. Never to silence a witness that was there.",
    )] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the audit's hash chain against its witnesses; name every line that is wrong.

    Every changed, removed, inserted, reordered or misplaced line is named (file and line),
    across daily files and retention checkpoints (audit.witnesses), and records cut from the end
    are found from what the witnesses saw. A missing head anchor or witness is a failure. Exit
    status 1 if anything is wrong."""
    from dataclasses import asdict

    from ancre.app.reports import audit_folder, chain_key_of
    from ancre.audit.record import witnesses
    from ancre.audit.verify import verify_chain

    settings = _settings(config)
    key = chain_key_of(settings, key_file)
    seen = witnesses(settings.audit, settings.data_dir, key)
    try:
        rep = verify_chain(audit_folder(settings), key, seen, started_without_witness=started_without_witness)
    finally:
        for w in seen:
            w.close()
    if as_json:
        write_json({**asdict(rep), "ok": rep.ok})
    else:
        _print_verify(rep)
    if not rep.ok:
        raise typer.Exit(1)


def _print_verify(rep: Any) -> None:
    """``ancre audit verify``'s report (:class:`~ancre.audit.verify.ChainReport`) as lines."""
    keyed = "HMAC-SHA256 (keyed)" if rep.keyed else "SHA-256 (no key)"
    console.print(f"{len(rep.files)} file(s), {rep.records} record(s), {rep.checkpoints} retention checkpoint(s), "
                  f"chain {keyed}", highlight=False)
    for w in rep.witnesses:
        if w.error is not None:
            continue  # a problem below
        last = f", the newest #{w.last_seq} ({shown(w.last_file or '')}, {shown(w.last_time)})" if w.marks else ""
        console.print(f"witness {w.name}: {w.marks} mark(s) of this log{last}", highlight=False)
    for w in rep.warnings:
        console.print(f"[yellow]warning: {shown(w)}[/]", highlight=False)
    for p in rep.problems:
        when = f" [dim]({shown(p.time)})[/]" if p.time else ""
        console.print(f"[bold red]{p.kind.value:12}[/] {shown(p.detail)}{when}", highlight=False, soft_wrap=True)
    console.print("[green]chain intact[/]" if rep.ok else f"[bold red]{len(rep.problems)} problem(s)[/]")


__all__ = ["audit_app"]
