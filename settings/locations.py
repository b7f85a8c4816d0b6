"""Where a key points: a file or folder (:class:`PathRole`) or a server (:class:`UrlKey`).

Every path-valued and URL-valued key of the settings models carries one of these markers in its
``Annotated`` metadata, so the keys are found from the models, never from a hand list
(:func:`path_keys`, :func:`url_keys`; ``tests/unit/test_config_locations.py`` fails on a path or
URL key without one):

- a URL key is checked when the configuration is loaded (scheme, host, port): ``directory.url:
  'ldaps//dc1' is not a URL: …`` names the key, for every command;
- a path key is checked by :func:`check_paths` before a command opens the parts that read it
  (``ancre check`` lists every problem; ``sync``, ``search``, ``serve``, ``daemon``… stop on the
  first with one line naming the key): a file ancre reads must exist and be readable, a folder it
  writes must be (or be creatable as) a writable folder.
"""

from __future__ import annotations

import errno
import os
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel, GetCoreSchemaHandler
from pydantic_core import core_schema

from ancre.errors import ConfigError, PathDeniedError


class PathRole(StrEnum):
    """What ancre does with the path a key holds."""

    READ = "read"
    """A file ancre reads (a CA bundle, a certificate, a manifest, a directory file): it must
    exist, be a file and be readable by the process."""
    SECRET = "secret"
    """A file holding a secret (``{ file = … }``): read only where the secret is used, so a
    command that does not need it does not fail on it; a missing or unreadable one is then a
    :class:`~ancre.errors.ConfigError` naming ``<key>.file`` (:mod:`ancre.settings.secrets`). Not
    checked here."""
    TREE = "tree"
    """A source's root: a missing one is an outage of the source (its pass purges nothing and
    says so), never a configuration error; not checked here."""
    WRITE_DIR = "write_dir"
    """A folder ancre creates when missing and writes in (``data_dir``, ``audit.dir``): it must be a
    writable folder, or be creatable (its nearest existing parent a writable folder)."""
    KEY_FILE = "key_file"
    """A key file ancre reads, or creates when missing (the audit's keys): an existing one must
    be a readable file; a missing one needs a writable folder to be created in."""
    SOCKET = "socket"
    """A Unix socket the process owning the index creates (``daemon.control_socket``): its folder
    must exist or be creatable."""
    PEER = "peer"
    """A path another program serves or writes and ancre only uses when the feature that needs it
    is on (the system log's socket and files of the ``syslog`` audit witness): it must exist;
    the feature's own error names the key when it is used."""


@dataclass(frozen=True)
class UrlKey:
    """A URL-valued key: ``schemes`` it may use. As ``Annotated`` metadata on a ``str``, ``str |
    None`` or ``tuple[str, ...]`` field, each value is checked when the configuration is
    validated (:meth:`problem`); the value is kept as written."""

    schemes: tuple[str, ...]

    def problem(self, url: str) -> str | None:
        """Why ``url`` is not a URL of one of :attr:`schemes` with a host (and a valid port),
        else ``None``."""
        wanted = " or ".join(f"{s}://" for s in self.schemes)
        if not url or url != url.strip() or any(c.isspace() for c in url):
            return f"{url!r} is not a URL ({wanted}host…): it is empty or holds a space"
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as e:
            return f"{url!r} is not a URL ({wanted}host…): {e}"
        if parts.scheme.lower() not in self.schemes:
            got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
            return f"{url!r} is not a URL ({wanted}host…): {got}"
        if not parts.hostname:
            return f"{url!r} is not a URL ({wanted}host…): no host"
        if port == 0:
            return f"{url!r} is not a URL ({wanted}host…): port 0"
        return None

    def _validate(self, value: Any) -> Any:
        for url in value if isinstance(value, tuple | list) else (value,):
            if isinstance(url, str) and (why := self.problem(url)) is not None:
                raise ValueError(why)
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._validate, handler(source))


HTTP = UrlKey(("http", "https"))
"""An HTTP(S) server's URL (models, Qdrant, Graph)."""
HTTPS = UrlKey(("https",))
"""An HTTPS-only URL (a SharePoint site, the Entra authority)."""
LDAP = UrlKey(("ldap", "ldaps"))
"""A domain controller's URL."""


def _marker(field: Any, kind: type) -> Any:
    return next((m for m in field.metadata if isinstance(m, kind)), None)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a value of ``annotation`` may hold (itself, a union's arms, a tuple's items)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arm in get_args(annotation) for m in _models_in(arm)] if get_origin(annotation) else []


def model_keys(model: type[BaseModel], kind: type, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every ``(dotted key, marker)`` of ``model`` and of the models its fields hold whose
    metadata has a marker of ``kind`` (:class:`PathRole` or :class:`UrlKey`). A nested model's
    keys are under its field's name; a union's variants are all walked."""
    for name, field in model.model_fields.items():
        marker = _marker(field, kind)
        if marker is not None:
            yield f"{prefix}{name}", marker
        for sub in _models_in(field.annotation):
            yield from model_keys(sub, kind, f"{prefix}{name}.")


def path_keys(model: type[BaseModel]) -> list[tuple[str, PathRole]]:
    """The path-valued keys of ``model`` (and its sub-models) with their role."""
    return list(model_keys(model, PathRole))


def url_keys(model: type[BaseModel]) -> list[tuple[str, UrlKey]]:
    """The URL-valued keys of ``model`` (and its sub-models) with their schemes."""
    return list(model_keys(model, UrlKey))


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def path_problem(path: Path, role: PathRole) -> str | None:
    """Why ``path`` can't play ``role`` for this process, else ``None`` (see :class:`PathRole`;
    ``SECRET`` and ``TREE`` are never a problem here). Follows symbolic links; never creates anything."""
    try:
        if role is PathRole.READ or (role is PathRole.KEY_FILE and os.path.lexists(path)):
            if not path.exists():
                return f"{path} does not exist"
            if not path.is_file():
                return f"{path} is not a file"
            with path.open("rb"):
                return None
        if role is PathRole.PEER:
            return None if path.exists() else f"{path} does not exist"
        if role is PathRole.WRITE_DIR and path.exists():
            if not path.is_dir():
                return f"{path} is not a folder"
            return None if os.access(path, os.W_OK | os.X_OK) else f"{path}: this user ({_user()}) may not write in it"
        if role in (PathRole.WRITE_DIR, PathRole.KEY_FILE, PathRole.SOCKET):
            parent = _nearest_existing(path.parent if role is not PathRole.WRITE_DIR else path)
            if not parent.is_dir():
                return f"{path} can't be created: {parent} is not a folder"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"{path} can't be created: this user ({_user()}) may not write in {parent}"
        return None
    except PermissionError:
        return f"{path}: permission denied (this user: {_user()})"
    except OSError as e:
        return f"{path}: {e.strerror or type(e).__name__}"


def _user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


def _values(model: BaseModel, prefix: str) -> Iterator[tuple[str, Any, PathRole]]:
    """``(key, path, role)`` of every path key set in the instance ``model`` and its sub-models;
    a model in a tuple (a source) is named ``<field>.<i>`` followed by ``(source '<id>')``."""
    for name, field in type(model).model_fields.items():
        value = getattr(model, name, None)
        role = _marker(field, PathRole)
        if role is not None and isinstance(value, tuple):
            for i, item in enumerate(value):  # a list of paths: each one named by its position
                yield f"{prefix}{name}.{i}", Path(item), role
        elif role is not None and value is not None:
            yield f"{prefix}{name}", Path(value), role
        if isinstance(value, BaseModel):
            yield from _values(value, f"{prefix}{name}.")
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    ident = getattr(item, "id", None)
                    for key, path, r in _values(item, f"{prefix}{name}.{i}."):
                        yield (f"{key} (source {ident!r})" if isinstance(ident, str) else key), path, r


def _problems(settings: BaseModel) -> list[tuple[str, Path, str]]:
    """``(key, path, why)`` of every path key of ``settings`` that can't play its role."""
    out = []
    for key, path, role in _values(settings, ""):
        why = path_problem(path, role)
        if why is not None:
            out.append((key, path, why))
    return out


def path_problems(settings: BaseModel) -> list[str]:
    """Every path key of ``settings`` that can't play its role, as ``key: why`` lines (empty when
    all can). Secrets given as ``{ file = … }`` are checked where they are read (:attr:`PathRole.SECRET`)."""
    return [f"{key}: {why}" for key, _path, why in _problems(settings)]


def _denied(path: Path) -> bool:
    """Whether ``path`` exists but this user may not use it (or a folder on the way to it)."""
    try:
        path.stat()
    except PermissionError:
        return True
    except OSError:
        return False
    return not os.access(path, os.R_OK | (os.W_OK | os.X_OK if path.is_dir() else 0))


def check_ca_file(ca_file: str | Path | None, key: str) -> None:
    """Raise :class:`~ancre.errors.ConfigError` naming ``key`` when ``ca_file`` (a PEM CA bundle;
    ``None``: the system's CAs) can't be loaded by OpenSSL: missing, unreadable, or holding no
    certificate (ldap3 would otherwise end in ``LDAPSSLConfigurationError``, unnamed)."""
    if ca_file is None:
        return
    try:
        ssl.create_default_context(cafile=ca_file)
    except FileNotFoundError:
        raise ConfigError(f"{key}: {ca_file} does not exist") from None
    except PermissionError:
        raise ConfigError(f"{key}: {ca_file}: permission denied") from None
    except IsADirectoryError:
        raise ConfigError(f"{key}: {ca_file} is a folder, not a PEM file") from None
    except (ssl.SSLError, OSError, ValueError) as e:
        raise ConfigError(f"{key}: {ca_file} is not a PEM CA bundle OpenSSL can load ({e})") from None


def check_paths(settings: BaseModel) -> None:
    """Raise :class:`~ancre.errors.ConfigError` with the first of :func:`path_problems`, naming
    its key (``directory.ca_file: /etc/ssl/axonix-ca.pem does not exist``) — a
    :class:`~ancre.errors.PathDeniedError` from a :class:`PermissionError` naming the path when
    this user may not use it."""
    problems = _problems(settings)
    if problems:
        key, path, why = problems[0]
        more = f" (and {len(problems) - 1} more: `ancre check` lists them)" if len(problems) > 1 else ""
        if _denied(path):
            raise PathDeniedError(key, why + more) from PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        raise ConfigError(f"{key}: {why}{more}")


__all__ = [
    "HTTP", "HTTPS", "LDAP", "PathRole", "UrlKey", "check_ca_file", "check_paths", "model_keys", "path_keys", "path_problem",
    "path_problems", "url_keys",
]
