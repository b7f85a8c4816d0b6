"""Build the configured :class:`~ancre.acl.directory.Directory` from ``[directory]``."""

from __future__ import annotations

from ancre.acl.directory import CachedDirectory, Directory, FileDirectory
from ancre.errors import ConfigError
from ancre.settings import DirectoryConfig, FileDirectoryConfig


def make_directory(cfg: DirectoryConfig) -> Directory:
    """The directory of ``cfg``'s variant, wrapped in a :class:`~ancre.acl.directory.CachedDirectory`
    that keeps each user's principals ``cfg.cache_ttl_s`` seconds:

    - :class:`~ancre.settings.sections.FileDirectoryConfig`:
      :class:`~ancre.acl.directory.FileDirectory` on ``cfg.path`` (read lazily);
    - :class:`~ancre.settings.sections.LdapDirectoryConfig`:
      :class:`~ancre.acl.ldap_directory.LdapDirectory` (Active Directory over LDAP; no connection
      is opened here).

    Raises :class:`~ancre.errors.ConfigError` when the file directory has no ``path`` or the bind
    password's variable or file is missing.
    """
    if isinstance(cfg, FileDirectoryConfig):
        if cfg.path is None:
            raise ConfigError("directory.path is required when directory.kind = 'file'")
        inner: Directory = FileDirectory(cfg.path)
    else:
        from ancre.acl.ldap_directory import LdapDirectory

        inner = LdapDirectory.from_config(cfg)
    return CachedDirectory(inner, cfg.cache_ttl_s)


__all__ = ["make_directory"]
