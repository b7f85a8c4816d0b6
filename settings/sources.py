"""Fields every source kind shares (``[[sources]]`` in ``ancre.toml``).

Each source kind has its own subclass of :class:`SourceSettings` with a ``kind: Literal["…"]``
field: :class:`FolderSourceConfig` and :class:`SmbSourceConfig` here,
``SharePointSourceConfig`` in :mod:`ancre.connectors.sharepoint.config` — modules that import no
client library, so that validating a config never imports smbprotocol or msal.
:mod:`ancre.connectors.registry` lists them and :class:`ancre.config.Settings` validates
``sources`` as the discriminated union of the registered models (docs/DEVELOPING.md "Adding a source",
docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ancre.settings.daemon import WatchMode
from ancre.settings.locations import PathRole
from ancre.settings.secrets import Secret, legacy_env

Collection = Literal["documents", "documentation"]
"""The two Qdrant collections a document may feed."""


class SourceSettings(BaseModel):
    """One source of documents: the keys common to every kind (frozen; an unknown key is an
    error). ``kind`` names the connector (:data:`ancre.connectors.registry.REGISTRY`); subclasses
    narrow it to their own literal and add their keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """The source's id (letters, digits, ``_ . -``; unique): the prefix of its documents' ids
    (``<id>:<path>``), named in logs, ``ancre status`` and audit records."""
    kind: str
    """The source kind, naming its connector (default ``folder``)."""
    collection: Collection = "documents"
    """The Qdrant collection the source's documents feed: ``documents`` or ``documentation``."""
    unc_root: str | None = None
    """UNC path of the root as users know it (``\\\\SRV-FICHIERS\\Partage``), used in citations."""
    include: tuple[str, ...] = ()
    """Glob patterns on the relative path; empty = everything."""
    exclude: tuple[str, ...] = ()
    """Glob patterns on the relative path left out (wins over ``include``)."""
    max_size_mb: float = Field(50.0, gt=0)
    """Files larger than this many mebibytes (2²⁰ bytes) are recorded ``skipped`` and not read."""
    collection_overrides: dict[str, Collection] = Field(default_factory=dict)
    """Top-level folder → collection, e.g. ``{DOCUMENTATION = "documentation"}``."""
    watch: WatchMode = "auto"
    """How the daemon watches this source (see :data:`ancre.settings.daemon.WatchMode`);
    a connector with a ``watch()`` capability (SMB CHANGE_NOTIFY) uses it unless ``off``."""
    poll_interval_s: float = Field(5.0, gt=0)
    """Seconds between two directory snapshots when the source is polled."""


class FolderSourceConfig(SourceSettings):
    """A ``kind = "folder"`` source (the default kind): a local or mounted directory tree."""

    kind: Literal["folder"] = "folder"
    """``folder`` (the default): a directory tree on local disk or a mounted share."""
    root: Annotated[Path, PathRole.TREE]
    """The tree's root directory (required; relative paths in ``ancre.toml`` are resolved against
    the file's folder)."""
    acl_manifest: Annotated[Path | None, PathRole.READ] = None
    """NT-style ACL manifest (corpus ``acl.json`` format) for trees mounted without ACLs."""
    principals: tuple[str, ...] = ()
    """Without a manifest: principals (``sid:…``, or a directory name like ``GG_Direction``)
    allowed to read everything in this source. With neither, nobody may read (fail closed)."""
    follow_symlinks: bool = False
    """Follow symbolic links whose target lies inside ``root`` (never outside it, never into
    ancre's data directory), each file with the rights of its target's own path. By default links
    are not followed: each is reported ``skipped: symlink``."""


class SmbSourceConfig(SourceSettings):
    """A ``kind = "smb"`` source: one SMB share (Windows or Samba), read with smbprotocol."""

    kind: Literal["smb"]
    """``smb``: one SMB share read with smbprotocol."""
    server: str
    """The file server's host name or address (``srv-fichiers.axonix.ch``); required."""
    port: int = Field(445, ge=1, le=65535)
    """The file server's SMB TCP port."""
    share: str
    """The share name (``Partage``); the source is the whole share. Required."""
    username: str | None = None
    """The service account, ``DOMAIN\\user`` or a UPN. It needs read access (data and
    READ_CONTROL) on the whole share. Unset with ``auth = "kerberos"``: the process's ticket cache."""
    password: Secret = None
    """The service account's password (best ``{ env = "ANCRE_SMB_PASSWORD" }`` or a systemd ``credential``)."""
    auth: Literal["ntlm", "kerberos", "negotiate"] = "ntlm"
    """Authentication protocol (``kerberos`` needs the ``gssapi`` Python package)."""
    share_allow: tuple[str, ...] = ()
    """Share-level permissions stated here instead of read from the server: principals (``sid:…``
    or directory names) the share grants full control to. With ``share_allow`` and
    ``share_deny`` both empty (the default), the share's own descriptor is read from the server
    (SRVSVC NetShareGetInfo level 502: the service account must be an administrator of the file
    server); ``["Everyone"]`` states Windows' and Samba's default share permission."""
    share_deny: tuple[str, ...] = ()
    """Principals the share denies (with ``share_allow``: the stated share permissions)."""
    read_local_groups: bool = True
    """Read the file server's local groups (BUILTIN\\Users, a member server's own groups, a DC's
    domain-local groups) and its domains over LSA and SAMR; ``false``: only ``local_groups``."""
    local_groups: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """The file server's local groups stated here (over what SAMR says for them): group (SID, or a
    BUILTIN name such as ``"BUILTIN\\Users"``) → members (SIDs, well-known or directory names).
    Where SAMR is not read or refused, a local group not listed here is undecided: a deny for it
    closes the document, an allow for it grants nobody."""
    server_sid: str | None = Field(None, pattern=r"^S-1-5-21-\d+-\d+-\d+$")
    """The domain SID of the file server's own accounts (a member server's machine SID), when it
    can't be read over LSA: its SIDs are then known to be local."""
    this_organization: bool | None = None
    """Whether the file server puts This Organization (S-1-5-15) in a session's token (Windows
    does for users of its forest, Samba does not); unset: undecided (a deny for it closes the
    document, an allow grants nobody)."""
    require_signing: bool = True
    """Require SMB signing of every message (refuse a server that won't sign)."""
    encrypt: bool = False
    """Require SMB3 encryption of the session."""
    dfs: bool = True
    """Follow DFS links whose referral points inside the same share (never another share or
    server: those are skipped whatever this says); ``false`` follows none (each listed as
    skipped)."""
    timeout_s: float = Field(30.0, gt=0)
    """Connection timeout in seconds."""

    _legacy_env = legacy_env("password")

    @model_validator(mode="after")
    def _server_and_share(self) -> SmbSourceConfig:
        if not self.server or not self.share:
            raise ValueError("server and share are required for an smb source")
        return self


__all__ = ["Collection", "FolderSourceConfig", "SmbSourceConfig", "SourceSettings"]
