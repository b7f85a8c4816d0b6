"""``ancre acl explain`` as lines of text: whether a user may read a path, the ACE or rule that
decided, and the principal (and its provider) that decided. Printed by the CLI in-process, or
computed by the process that owns the index for the control socket (:mod:`ancre.api.control`) —
the same lines either way.

The source's connector states the rights through the optional capability
:class:`~ancre.connectors.base.AclExplainable` (an SMB source reads the file's security
descriptor from the server and applies the share permissions; a folder source uses its ACL
manifest or its configured principals; a SharePoint source its item permissions); no switch on
the source kind here.

Asked by a user about himself who is not an admin (``private=True``, the control socket's
non-admin callers), the explanation is given only for a file he may read: for any other path —
a file that exists but that he may not read, or no indexable file at all — the answer is one and
the same line (:data:`NOT_SHOWN`), so that it tells nobody whether a file he may not read
exists."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ancre.acl.explain import PathOutsideSourceError, explain_trace
from ancre.app.runtime import Runtime
from ancre.connectors.base import AclExplainable
from ancre.errors import ConfigError

NOT_SHOWN = "{path}: no file that {user} may read (absent, not indexable, or not readable by {user})"
"""The one answer to a non-admin about any path he may not read (``str.format`` fields)."""


class InvalidPathError(PathOutsideSourceError):
    """A path given to ``acl explain`` that names no file: a NUL character, or text that is not
    valid Unicode (a lone surrogate that is not an undecodable byte of a file name)."""


def check_path(path: str) -> str:
    """``path`` when it may name a file; raises :class:`InvalidPathError` (NUL, or a lone
    surrogate outside U+DC80–U+DCFF, the range Python gives the undecodable bytes of a name)."""
    if "\x00" in path:
        raise InvalidPathError(f"{path!r}: a path has no NUL character (U+0000)")
    for i, ch in enumerate(path):
        if "\ud800" <= ch <= "\udfff" and not "\udc80" <= ch <= "\udcff":
            raise InvalidPathError(f"path: lone surrogate U+{ord(ch):04X} at character {i} is not valid Unicode text")
    return path


def explain_lines(rt: Runtime, path: str, user: str, source: str | None, *, private: bool = False) -> list[str]:
    """The lines ``ancre acl explain PATH --as USER [--source SOURCE]`` prints: plain text, one
    line each (the CLI writes out their hidden characters, :func:`ancre.models.visible`).
    ``private``: the caller is ``user`` and no admin (see the module doc).

    ``rt`` stays open (the control socket passes the owner's runtime); the connectors built here
    are closed before returning. Raises :class:`InvalidPathError` (a NUL, a lone surrogate),
    :class:`~ancre.errors.ConfigError` (no or unknown source, a source that can't explain its
    rights), :class:`~ancre.acl.explain.PathOutsideSourceError` (a path outside the source),
    :class:`~ancre.errors.DirectoryError`, :class:`~ancre.errors.SourceUnavailableError`."""
    settings = rt.settings
    if not settings.sources:
        raise ConfigError("sources: no source configured")
    check_path(path)
    if "://" in path:
        path = unquote(path)  # a SharePoint URL as a browser copies it (%20 for spaces)
    src = settings.source(source) if source else _source_of_path(rt, path)
    with rt.scoped_connector(src) as conn:
        if not isinstance(conn, AclExplainable):
            raise ConfigError(f"sources.{src.id}: a {src.kind!r} source cannot explain its rights")
        # the path sync gives that file: `..` resolved, never outside the source (else an error)
        rel = conn.explain_path(path)
        trace = conn.explain_acl(rel)
        explanation = explain_trace(trace, user, directory=rt.directory, resolver=rt.principals)
        if private and not (trace.indexable and explanation.readable):
            return [NOT_SHOWN.format(path=rel, user=user)]
        lines: list[str] = []
        if trace.indexable is False:
            lines.append(
                f"note: {rel} is not an indexable file of source {src.id} (absent, ignored or "
                "excluded); the rights below are those a file there would have."
            )
        lines.extend(explanation.render_lines())
        return lines


def _source_of_path(rt: Runtime, path: str) -> Any:
    """The source whose ``unc_root`` starts ``path``, else — for an absolute local path — the first
    whose connector takes it as one of its own paths (a folder source's root), else the first
    configured source."""
    sources = rt.settings.sources
    norm = path.replace("/", "\\").casefold()
    for s in sources:
        if s.unc_root and norm.startswith(s.unc_root.replace("/", "\\").rstrip("\\").casefold() + "\\"):
            return s
    if path.startswith("/"):
        for s in sources:
            with rt.scoped_connector(s) as conn:  # no I/O: only its path rules are asked
                try:
                    if not isinstance(conn, AclExplainable):
                        continue
                    conn.explain_path(path)
                except PathOutsideSourceError:
                    continue
            return s
    return sources[0]


__all__ = ["NOT_SHOWN", "InvalidPathError", "check_path", "explain_lines"]
