"""What every ``ancre`` command shares: the consoles (stdout, stderr), the ``--config`` option,
loading the settings, finding the running ancre that owns the index, turning an
:class:`~ancre.errors.AncreError` into one clear line and exit status 2, and how text from a
request, a document or a directory is printed: through :func:`ancre.models.visible` — in a rich
markup string (:func:`shown`), as a table cell or a line (:func:`plain`) — and JSON through
:func:`ancre.models.json_visible` (:func:`write_json`), so it can't drive the admin's terminal."""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ancre.config import Settings, config_path, load_settings
from ancre.errors import AncreError, PathDeniedError
from ancre.models import json_visible, visible

console = Console(width=None if sys.stdout.isatty() else 140)
"""Standard output."""
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
"""Standard error: warnings and errors."""

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML config file (default: $ANCRE_CONFIG or ./ancre.toml)."),
]
UserOpt = Annotated[
    str, typer.Option("--as", help="The user whose rights, read now, decide (sAMAccountName, UPN or DOMAIN\\user).")
]
QuestionArg = Annotated[str, typer.Argument(help="The question, in French or any language.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
P = ParamSpec("P")
R = TypeVar("R")


def table(title: str | Text, columns: Sequence[str], rows: Iterable[Sequence[str | Text]]) -> Table:
    """A rich table titled ``title`` with ``columns`` and ``rows`` (cells already made safe to
    show: :func:`plain`, :func:`shown`)."""
    t = Table(title=title)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*r)
    return t


def shown(text: object) -> str:
    """``text`` for a rich markup string: its hidden characters written out
    (:func:`~ancre.models.visible`), its brackets escaped (it can't open a style or a link)."""
    return escape(visible(str(text)))


def plain(text: object, style: str = "", *, newlines: bool = False) -> Text:
    """``text`` as a rich :class:`~rich.text.Text` (no markup read), its hidden characters written
    out (:func:`~ancre.models.visible`; ``newlines``: kept): a table cell, a title, a line."""
    return Text(visible(str(text), newlines=newlines), style=style)


def write_json(value: object, **dumps: Any) -> None:
    """Print ``value`` as one JSON document on stdout (``json.dumps(value, ensure_ascii=False,
    **dumps)``; a ``str`` is taken as JSON text already), hidden characters as ``\\u`` escapes
    (:func:`~ancre.models.json_visible`)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, **dumps)
    sys.stdout.write(json_visible(text) + "\n")


def load(config: Path | None) -> Settings:
    """Load the config and apply its ``[logging]`` levels (libraries; ancre's only when set)."""
    from ancre.daemon.logs import apply_levels

    settings = load_settings(config_path(config))
    apply_levels(settings.logging.levels("WARNING", cli=True))
    return settings


def owner(settings: Settings) -> Any:
    """A :class:`~ancre.query.remote.ControlClient` of the running ancre that owns the embedded
    index (it answers on its control socket), else ``None`` (open the index in-process). Raises
    :class:`~ancre.errors.ControlPermissionError` when its socket is closed to this user."""
    if settings.store.kind != "edge":
        return None
    from ancre.query.remote import ControlClient

    return ControlClient.find(settings)


def _who(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def denied(e: PermissionError) -> str:
    """One line for a permission this user lacks: the path that stops it — the first folder on
    the way it may not enter, else the file or folder itself —, the permission needed there (enter
    ``x``, list and enter ``r-x``, read ``r``, write ``w``), who owns it with which mode, who runs
    the command, and how to run it instead."""
    target = Path(e.filename) if e.filename else None
    if target is None:
        return f"permission denied ({e.strerror or e}): run the command as the service's user or root"
    target = target.absolute()
    where, need = target, "write (w)"
    for folder in [*reversed(target.parents)][1:]:
        if not os.access(folder, os.X_OK):
            where, need = folder, "enter (x)"
            break
    else:
        if not os.path.lexists(target):
            where = target.parent  # it was to be created there
        elif not os.access(target, os.R_OK | (os.X_OK if target.is_dir() else 0)):
            need = "list and enter (r-x)" if target.is_dir() else "read (r)"
    try:
        st = where.stat()
        owner, how = _who(st.st_uid), f"{stat.filemode(st.st_mode)} {_who(st.st_uid)}:{_group(st.st_gid)}"
    except OSError:
        owner, how = "its owner", "unknown mode"
    me = _who(os.geteuid())
    return (f"{where}: permission denied — this command must {need} it ({how}; you are {me}): run it as {owner} "
            f"(sudo -u {owner} ancre …) or root, or, while ancre runs, as a member of its admin group")


def errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command: an :class:`~ancre.errors.AncreError` is printed as one line on stderr
    (``error: …``) and exits with status 2; so is a permission this user lacks
    (:class:`PermissionError`, alone or as the cause of an ``AncreError``: :func:`denied`)."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (AncreError, PermissionError) as e:
            cause = e if isinstance(e, PermissionError) else e.__cause__
            line = denied(cause) if isinstance(cause, PermissionError) else str(e)
            if isinstance(e, PathDeniedError) and isinstance(cause, PermissionError):
                line = f"{e.key}: {line}"  # the key that names the path, then what is needed there
            err.print(f"[bold red]error:[/] {shown(line)}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


__all__ = ["ConfigOpt", "console", "denied", "err", "errors", "load", "owner", "plain", "shown", "write_json"]
