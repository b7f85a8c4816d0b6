"""Log lines of the daemon: one JSON object per line on stdout (journald keeps each as one entry),
with the stdlib :mod:`logging`. Fields: ``time`` (ISO 8601 UTC), ``level``, ``logger``, ``msg``,
``exc`` when an exception is logged, and every ``extra={...}`` field given to the log call
(e.g. the sync engine's ``report``). A log line often holds text from a document, a request or a
directory (a path, a user name): the JSON lines write its control characters and bidirectional
controls as ``\\u`` escapes (:func:`~ancre.models.json_visible`), the plain-text lines write them out
(:class:`VisibleFormatter`, :func:`~ancre.models.visible`), so a log read on a terminal can't be
driven by them, nor a message forge a line of its own."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ancre.models import json_visible, visible

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName",
    "color_message",  # uvicorn's copy of msg with ANSI colour codes: noise in a JSON line
}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line (see the module doc). Values that JSON can't hold are
    written with ``str()``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json_visible(json.dumps(out, ensure_ascii=False, default=str))


class VisibleFormatter(logging.Formatter):
    """A plain-text formatter whose message has its hidden characters written out (newlines
    included: one record, one line); a traceback after it stays as it is."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = visible(record.message)
        return super().formatMessage(record)


def apply_levels(levels: Mapping[str, str]) -> None:
    """Set each named logger's level (``""``: the root logger), e.g. from
    :meth:`~ancre.settings.daemon.LoggingConfig.levels`."""
    for name, level in levels.items():
        (logging.getLogger(name) if name else logging.getLogger()).setLevel(level)


def setup_logging(fmt: str = "json", level: str = "INFO", levels: Mapping[str, str] | None = None) -> None:
    """Route the root logger to stdout, as JSON lines (``fmt="json"``) or plain text; replaces
    existing root handlers. ``levels`` (logger name → level, ``""`` the root) comes from
    ``[logging]``; without it ancre logs at ``level`` and every library at WARNING (smbprotocol's
    per-request and apscheduler's per-run INFO lines included)."""
    from ancre.settings.daemon import LoggingConfig

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else VisibleFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    apply_levels(levels if levels is not None else LoggingConfig().levels(level))


__all__ = ["JsonFormatter", "VisibleFormatter", "apply_levels", "setup_logging"]
