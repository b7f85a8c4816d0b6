"""Build the configured :class:`~ancre.acl.directory.Directory` from ``[directory]``."""

from __future__ import annotations

from ancre.acl.directory import CachedDirectory, Directory, FileDirectory
from ancre.errors import ConfigError
from ancre.settings import DirectoryConfig


def make_directory(cfg: DirectoryConfig) -> Directory:
    """The directory ``cfg.kind`` names, wrapped in a :class:`~ancre.acl.directory.CachedDirectory`
    that keeps each user's principals ``cfg.cache_ttl_s`` seconds:

    - ``file``: :class:`~ancre.acl.directory.FileDirectory` on ``cfg.path`` (read lazily);
    - ``ldap``: :class:`~ancre.acl.ldap_directory.LdapDirectory` (Active Directory over LDAP; no
      connection is opened here).

    Raises :class:`~ancre.errors.ConfigError` when ``kind = "file"`` has no ``path`` or the kind is
    not available.
    """
    if cfg.kind == "file":
        if cfg.path is None:
            raise ConfigError("directory.path is required when directory.kind = 'file'")
        inner: Directory = FileDirectory(cfg.path)
    elif cfg.kind == "ldap":
        from ancre.acl.ldap_directory import LdapDirectory

        inner = LdapDirectory.from_config(cfg)
    else:
        raise ConfigError(f"directory.kind = {cfg.kind!r} is not available in this build")
    return CachedDirectory(inner, cfg.cache_ttl_s)


__all__ = ["make_directory"]
