"""``ancre check``'s reach lines (issue 46): whether the checked users can read anything, and
whether each source has a reader at all — a configuration that passes every other check can still
leave a user (a misspelt group, a group granted nowhere) or a whole source (rights that name
nobody the directory knows) with nothing to answer from, and ancre, failing closed, would then
answer « not in the documents » forever without saying why.

Per source, the files are listed and their ACLs read the way a sync reads them
(:meth:`~ancre.connectors.base.Connector.fetch_acl`), at most :data:`REACH_MAX_FILES` of them and
no more once every checked user and some user of the directory have a readable file there; each
ACL is evaluated with the principals the resolver gives every directory user, exactly as the
rights filter does (:meth:`~ancre.models.Acl.readable_by`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ancre.app.check_result import CheckResult, directory_configured
from ancre.connectors.base import Closeable, Connector
from ancre.errors import AncreError, DirectoryError
from ancre.models import Acl
from ancre.settings import SourceSettings

if TYPE_CHECKING:
    from ancre.app.runtime import Runtime

REACH_MAX_FILES = 2000
"""Files of one source whose ACL ``ancre check`` reads at most (it stops earlier once everyone it
looks for has a readable file there)."""


@dataclass
class _Reach:
    """What was found: per checked user, the sources where a file is readable; per source, the
    files whose ACL was read and whether some directory user reads one."""

    users: dict[str, frozenset[str]]
    readers: list[frozenset[str]]
    user_reads: dict[str, set[str]] = field(default_factory=dict)
    source_files: dict[str, int] = field(default_factory=dict)
    source_read: set[str] = field(default_factory=set)

    def done(self, source: str) -> bool:
        """Whether reading more of ``source`` can change nothing: it has a reader, and every
        checked user reads some file already."""
        return source in self.source_read and all(self.user_reads.get(u) for u in self.users)

    def record(self, source: str, acl: Acl, now: float) -> None:
        for user, token in self.users.items():
            if acl.readable_by(token, now):
                self.user_reads.setdefault(user, set()).add(source)
        if source not in self.source_read and any(acl.readable_by(t, now) for t in self.readers):
            self.source_read.add(source)


def checked_users(rt: Runtime, wanted: Sequence[str]) -> list[str]:
    """The users ``ancre check`` checks: ``wanted`` (``--as``), else ``directory.check_user``, else
    the first account of the directory that resolves (``[]`` when none does or the directory
    can't be read: the directory's own check line says why)."""
    if wanted:
        return list(wanted)
    if rt.settings.directory.check_user:
        return [rt.settings.directory.check_user]
    try:
        names = rt.directory.users()
        return next(([n] for n in names[:10] if rt.principals.principals(n)), [])
    except AncreError:
        return []


def _readers(rt: Runtime) -> list[frozenset[str]]:
    """The principals of every user of the directory (a user whose principals can't be resolved
    counts as reading nothing). Raises ``DirectoryError`` when the users can't be listed."""
    out = []
    for name in rt.directory.users():
        try:
            out.append(rt.principals.principals(name))
        except DirectoryError:
            continue
    return out


def _read_source(conn: Connector, reach: _Reach, now: float) -> None:
    """The ACLs of ``conn``'s files into ``reach`` (see the module doc). Raises as ``list_items``
    and ``fetch_acl`` do."""
    sid = conn.source_id
    files = [it for it in conn.list_items().items if it.skip is None][:REACH_MAX_FILES]
    reach.source_files[sid] = len(files)
    for item in files:
        reach.record(sid, conn.fetch_acl(item), now)
        if reach.done(sid):
            return


def check_reach(rt: Runtime, users: Sequence[str], sources: Sequence[SourceSettings], now: float) -> list[CheckResult]:
    """A ``warn`` line per checked user who can read no file of any source, and per source none of
    whose files any user of the directory can read; else one ``ok`` line. A source that can't be
    listed is skipped (its own check says why); without a directory, nothing is said. Never
    raises."""
    part = "reach"
    if not directory_configured(rt.settings):
        return []
    try:
        reach = _Reach({u: rt.principals.principals(u) for u in users}, _readers(rt))
    except AncreError as e:
        return [CheckResult(part, True, f"not checked: the directory's users could not be resolved ({e})", warn=True)]
    for src in sources:
        conn = None
        try:
            conn = rt.connector(src)
            _read_source(conn, reach, now)
        except Exception:  # the source's own check line says what failed
            reach.source_files.pop(src.id, None)
        finally:
            if isinstance(conn, Closeable):
                conn.close()
    return _results(reach)


def _results(reach: _Reach) -> list[CheckResult]:
    part = "reach"
    listed = {s: n for s, n in reach.source_files.items() if n}
    out = [
        CheckResult(part, True, f"source {s}: none of its {n} file(s){' read' if n == REACH_MAX_FILES else ''} is "
                                f"readable by any of the directory's {len(reach.readers)} user(s)",
                    "check the source's rights (its ACL manifest, principals or share permissions) and the groups "
                    "they name in the directory", warn=True)
        for s, n in sorted(listed.items()) if s not in reach.source_read
    ]
    for user, token in reach.users.items():
        if listed and not reach.user_reads.get(user):
            out.append(CheckResult(
                part, True, f"user {user} ({len(token)} principal(s)) can read none of the files of "
                            f"{', '.join(sorted(listed))}",
                f"check {user}'s groups in the directory (a directory file: the user's \"groups\") and the "
                "sources' rights", warn=True))
    if not out:
        seen = "; ".join(f"{u} reads {', '.join(sorted(reach.user_reads.get(u, ())))}" for u in reach.users)
        out.append(CheckResult(part, True, f"every source has readers{'; ' + seen if seen else ''}"))
    return out


__all__ = ["REACH_MAX_FILES", "check_reach", "checked_users"]
