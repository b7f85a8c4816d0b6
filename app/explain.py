"""``ancre acl explain`` as lines of text: whether a user may read a path, the ACE or rule that
decided, and the principal (and its provider) that decided. Printed by the CLI in-process, or
computed by the process that owns the index for the control socket (:mod:`ancre.api.control`) —
the same lines either way.

The source's connector states the rights through the optional capability
:class:`~ancre.connectors.base.AclExplainable` (an SMB source reads the file's security
descriptor from the server and applies the share permissions; a folder source uses its ACL
manifest or its configured principals; a SharePoint source its item permissions); no switch on
the source kind here."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ancre.acl.explain import PathOutsideSourceError, explain_trace
from ancre.app.runtime import Runtime
from ancre.connectors.base import AclExplainable, Closeable, Connector
from ancre.connectors.registry import make_connector
from ancre.errors import ConfigError


def explain_lines(rt: Runtime, path: str, user: str, source: str | None) -> list[str]:
    """The lines ``ancre acl explain PATH --as USER [--source SOURCE]`` prints (rich markup).

    ``rt`` stays open (the control socket passes the owner's runtime); the connectors built here
    are closed before returning. Raises
    :class:`~ancre.errors.ConfigError` (no or unknown source, a source that can't explain its
    rights), :class:`~ancre.acl.explain.PathOutsideSourceError` (a path outside the source),
    :class:`~ancre.errors.DirectoryError`, :class:`~ancre.errors.SourceUnavailableError`."""
    settings = rt.settings
    if not settings.sources:
        raise ConfigError("sources: no source configured")
    if "://" in path:
        path = unquote(path)  # a SharePoint URL as a browser copies it (%20 for spaces)
    src = settings.source(source) if source else _source_of_path(rt, path)
    conn = make_connector(src, rt.source_context())
    try:
        if not isinstance(conn, AclExplainable):
            raise ConfigError(f"sources.{src.id}: a {src.kind!r} source cannot explain its rights")
        # the path sync gives that file: `..` resolved, never outside the source (else an error)
        rel = conn.explain_path(path)
        trace = conn.explain_acl(rel)
        lines: list[str] = []
        if trace.indexable is False:
            lines.append(
                f"[yellow]note: {rel} is not an indexable file of source {src.id} (absent, ignored or "
                "excluded); the rights below are those a file there would have.[/]"
            )
        lines.append(explain_trace(trace, user, directory=rt.directory, resolver=rt.principals).render())
        return lines
    finally:
        _close(conn)


def _close(conn: Connector) -> None:
    if isinstance(conn, Closeable):
        conn.close()


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
            conn = make_connector(s, rt.source_context())  # no I/O: only its path rules are asked
            try:
                if not isinstance(conn, AclExplainable):
                    continue
                conn.explain_path(path)
            except PathOutsideSourceError:
                continue
            finally:
                _close(conn)
            return s
    return sources[0]


__all__ = ["explain_lines"]
