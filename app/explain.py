"""``ancre acl explain`` as lines of text: whether a user may read a path and the rule that
decided. Printed by the CLI in-process, or computed by the process that owns the index for the
control socket (:mod:`ancre.api.control`) — the same lines either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ancre.app.runtime import Runtime
from ancre.config import Settings


def explain_lines(rt: Runtime, path: str, user: str, source: str | None) -> list[str]:
    """The lines ``ancre acl explain PATH --as USER [--source SOURCE]`` prints (rich markup).

    On an SMB source the file's security descriptor is read from the server (and the share
    permissions, when configured, are applied on top); on a folder source it comes from the ACL
    manifest, or from the source's configured principals. Raises
    :class:`~ancre.errors.ConfigError` (no or unknown source, path outside the source),
    :class:`~ancre.errors.DirectoryError`, :class:`~ancre.errors.AclError`."""
    from ancre.acl.explain import canonical_path, explain
    from ancre.acl.manifest import AclManifest
    from ancre.errors import ConfigError

    settings = rt.settings
    if not settings.sources:
        raise ConfigError("sources: no source configured")
    if "://" in path:
        path = unquote(path)  # a SharePoint URL as a browser copies it (%20 for spaces)
    src = settings.source(source) if source else _source_of_path(settings, path)
    # the path sync gives that file: `..` resolved, never outside the source (else an error)
    rel = canonical_path(path, unc_root=src.unc_root, root=src.root if src.kind != "smb" else None)
    conn = rt.connector(src)
    lines: list[str] = []
    try:
        if src.kind != "smb" and conn.get_item(rel) is None:
            lines.append(
                f"[yellow]note: {rel} is not an indexable file of source {src.id} (absent, ignored or "
                "excluded); the rights below are those a file there would have.[/]"
            )
        if src.kind == "smb":
            lines.append(explain(rt.directory, conn.security_descriptor, user, rel).render())  # type: ignore[attr-defined]
            note = _share_verdict(conn, rt.directory, user, rel)
            if note:
                lines.append(note)
        elif src.acl_manifest is not None:
            manifest = AclManifest.load(Path(src.acl_manifest), rt.directory)
            lines.append(explain(rt.directory, manifest, user, rel).render())
        else:
            lines.append(_principals_verdict(rt, src, user, rel))
    finally:
        close = getattr(conn, "close", None)
        if close is not None:
            close()
    return lines


def _source_of_path(settings: Settings, path: str) -> Any:
    """The source whose ``unc_root`` (or, for an absolute local path, whose folder ``root``)
    starts ``path``, else the first configured source."""
    norm = path.replace("/", "\\").casefold()
    for s in settings.sources:
        if s.unc_root and norm.startswith(s.unc_root.replace("/", "\\").rstrip("\\").casefold() + "\\"):
            return s
    if path.startswith("/"):
        for s in settings.sources:
            if s.kind != "smb" and s.root is not None and Path(path).is_relative_to(s.root):
                return s
    return settings.sources[0]


def _principals_verdict(rt: Runtime, src: Any, user: str, rel: str) -> str:
    """Explanation for a folder source whose rights are its configured ``principals``."""
    from ancre.models import SourceItem

    acl = rt.connector(src).fetch_acl(SourceItem(src.id, rel, rel, 0, 0.0))
    principals = rt.directory.principals(user)
    lines = [f"user: {user}", f"path: {rel} (source {src.id})"]
    if acl.reason:
        lines += ["result: NOT READABLE", f"rule: {acl.reason}"]
    elif acl.readable_by(principals):
        via = sorted(rt.directory.name_of(p) or p for p in acl.allow & principals)
        lines += ["result: READABLE", f"rule: the source grants read to {', '.join(via)}, which {user} holds"]
    else:
        names = sorted(rt.directory.name_of(p) or p for p in acl.allow)
        lines += ["result: NOT READABLE", f"rule: the source grants read only to {', '.join(names) or 'nobody'}"]
    return "\n".join(lines)


def _share_verdict(conn: Any, directory: Any, user: str, path: str) -> str | None:
    """One line on the share permissions of an SMB source (``None`` when none are configured):
    the effective result is NTFS ∩ share."""
    from ancre.errors import AclError

    if not (conn.cfg.share_allow or conn.cfg.share_deny):
        return None
    principals = directory.principals(user)
    try:
        sd = conn.security_descriptor(path)
    except AclError:
        return None
    acl = conn.acl_of_descriptor(sd)
    shares = f"share_allow={list(conn.cfg.share_allow)} share_deny={list(conn.cfg.share_deny)}"
    if acl.readable_by(principals):
        return f"share permissions ({shares}): allow — effective result: READABLE"
    return f"share permissions ({shares}): refuse {user} — effective result (NTFS ∩ share): NOT READABLE"


__all__ = ["explain_lines"]
