"""Secrets in the configuration: one :class:`SecretRef` type for every password, key and token.

A secret key (``api.api_key``, ``directory.bind_password``, ``sources.<id>.password`` …) takes, in
TOML::

    api_key = "s3cret"                                  # the value itself (keep the file 0600)
    api_key = { env = "ANCRE_API_KEY" }                  # an environment variable (EnvironmentFile=)
    api_key = { file = "/etc/ancre/api-key" }            # a file's content (trailing newline dropped)
    api_key = { credential = "api-key" }                 # a systemd credential: $CREDENTIALS_DIRECTORY/api-key
    api_key = { value = "s3cret" }                       # the value, spelled out

The ``credential`` form reads what systemd's ``LoadCredential=api-key:/etc/ancre/api-key`` (or
``SetCredentialEncrypted=``) hands the service (systemd.exec(5), "Credentials"). The older
``api_key_env = "VAR"`` spelling is still read, as ``{ env = "VAR" }``, with a deprecation
warning (:func:`legacy_env_keys`). ``ANCRE_API__API_KEY=…`` in the environment is the value itself
(never JSON-decoded: a numeric password stays a string), ``ANCRE_API__API_KEY__ENV=VAR`` names a
variable.

A reference is resolved only where the secret is used (:meth:`SecretRef.resolve`), so a command
that does not need it does not fail on it; a variable that is not set, a file that can't be read
is a :class:`~ancre.errors.ConfigError` naming the key (``api.api_key.env: environment variable
ANCRE_API_KEY is not set``). The value is never in a ``repr``, a log line or an error.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import NoDecode

from ancre.errors import ConfigError
from ancre.settings.locations import PathRole

log = logging.getLogger("ancre.config")

CREDENTIALS_DIRECTORY = "CREDENTIALS_DIRECTORY"
"""The environment variable systemd sets to the folder of the service's credentials."""


class SecretRef(BaseModel):
    """Where one secret is: exactly one of ``env`` (an environment variable's name), ``file`` (a
    file holding it), ``credential`` (a systemd credential's name) or ``value`` (the secret
    itself). A plain string (or a :class:`~pydantic.SecretStr`) is the value. Frozen; the value is
    masked in ``repr`` and ``str``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of an environment variable holding the secret (e.g. set by the unit's ``EnvironmentFile=``)."""
    file: Annotated[Path | None, PathRole.SECRET] = None
    """A file holding the secret (its trailing line break dropped); relative paths against the config file's folder."""
    credential: str | None = Field(None, pattern=r"^[A-Za-z0-9_.@-]+$")
    """Name of a systemd credential (``LoadCredential=<name>:<path>``): read from ``$CREDENTIALS_DIRECTORY/<name>``."""
    value: SecretStr | None = None
    """The secret itself (keep the file mode 0600)."""

    @model_validator(mode="before")
    @classmethod
    def _plain_value(cls, data: Any) -> Any:
        if isinstance(data, str | SecretStr):
            return {"value": data}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        given = [n for n in ("env", "file", "credential", "value") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of env, file, credential or value"
                             + (f" (got {', '.join(given)})" if given else ""))
        return self

    def __repr__(self) -> str:
        if self.value is not None:
            return "SecretRef(value='**********')"
        if self.file is not None:
            return f"SecretRef(file={str(self.file)!r})"
        return f"SecretRef(env={self.env!r})" if self.env is not None else f"SecretRef(credential={self.credential!r})"

    __str__ = __repr__

    def where(self, key: str) -> str:
        """Where the secret comes from, for messages: ``$VAR``, the file's path, ``credential
        <name>``, or ``key`` itself for a value in the file. Never the value."""
        if self.env is not None:
            return f"${self.env}"
        if self.file is not None:
            return str(self.file)
        return f"credential {self.credential}" if self.credential is not None else key

    def resolve(self, key: str) -> str:
        """The secret. ``key``: the dotted config key it is read from (``sources.smb1.password``),
        named in errors. Raises :class:`~ancre.errors.ConfigError` naming ``<key>.env`` /
        ``<key>.file`` / ``<key>.credential`` when the variable is not set or the file can't be
        read (its reason, never its content)."""
        if self.value is not None:
            return self.value.get_secret_value()
        if self.env is not None:
            secret = os.environ.get(self.env)
            if secret is None:
                raise ConfigError(f"{key}.env: environment variable {self.env} is not set")
            return secret
        if self.file is not None:
            return _read(self.file, f"{key}.file")
        folder = os.environ.get(CREDENTIALS_DIRECTORY)
        if not folder:
            raise ConfigError(f"{key}.credential: ${CREDENTIALS_DIRECTORY} is not set (is the service started "
                              f"with LoadCredential={self.credential}:…?)")
        return _read(Path(folder) / str(self.credential), f"{key}.credential")


def _read(path: Path, key: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{key}: {path} does not exist") from None
    except OSError as e:
        raise ConfigError(f"{key}: cannot read {path}: {e.strerror or type(e).__name__}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{key}: {path} is not UTF-8 text") from None
    return text.removesuffix("\n").removesuffix("\r")


Secret = Annotated[SecretRef | None, NoDecode]
"""The type of an optional secret setting: a :class:`SecretRef`, unset by default. ``NoDecode``:
an ``ANCRE_…`` environment override is the secret's value, never parsed as JSON."""


def resolve_secret(ref: SecretRef | None, key: str) -> str | None:
    """``ref`` resolved (:meth:`SecretRef.resolve`, naming ``key`` in errors), ``None`` when unset.
    Raises :class:`~ancre.errors.ConfigError`."""
    return ref.resolve(key) if ref is not None else None


def _refs(model: Any, key: str) -> Iterable[tuple[str, SecretRef]]:
    """``(key, ref)`` of every secret set in ``model`` (a settings model) and its sub-models; a
    source's keys are named by its ``id`` (``sources.partage.password``), as they are read."""
    if isinstance(model, SecretRef):
        yield key, model
    elif isinstance(model, BaseModel):
        for name in type(model).model_fields:
            yield from _refs(getattr(model, name), f"{key}.{name}" if key else name)
    elif isinstance(model, tuple):
        for i, item in enumerate(model):
            yield from _refs(item, f"{key}.{getattr(item, 'id', i)}")


def check_secrets(settings: BaseModel, *, sections: Iterable[str] | None = None, skip: Iterable[str] = ()) -> None:
    """Resolve every secret ``settings`` names — in the top-level ``sections`` only (``None``:
    all), less those in ``skip`` — so that a long-running process stops at its start, in one
    line naming the key, rather than at its first use (``ancre daemon``: everything but
    ``api``; ``ancre serve``: everything). Raises :class:`~ancre.errors.ConfigError`."""
    wanted = set(sections) if sections is not None else None
    skipped = set(skip)
    for key, ref in _refs(settings, ""):
        top = key.split(".", 1)[0]
        if (wanted is None or top in wanted) and top not in skipped:
            ref.resolve(key)


def legacy_env_keys(data: Any, names: Iterable[str]) -> Any:
    """A model's raw input with each old ``<name>_env = "VAR"`` key turned into ``<name> = { env =
    "VAR" }`` (a deprecation warning each; an empty ``_env`` is dropped). Raises ``ValueError``
    when both ``<name>`` and ``<name>_env`` are set. For a ``mode="before"`` model validator."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for name in names:
        old = f"{name}_env"
        if old not in out:
            continue
        env = out.pop(old)
        if not env:
            continue
        if out.get(name) is not None:
            raise ValueError(f"set {name} or {old}, not both")
        log.warning('config: %s = "%s" is deprecated: write %s = { env = "%s" }', old, env, name, env)
        out[name] = {"env": env}
    return out


def legacy_env(*names: str) -> Any:
    """The ``mode="before"`` model validator of a model whose secrets ``names`` had an old
    ``<name>_env`` key (:func:`legacy_env_keys`); assign it in the class body:
    ``_legacy_env = legacy_env("password")``."""

    def convert(data: object) -> object:
        return legacy_env_keys(data, names)

    return model_validator(mode="before")(convert)


__all__ = ["CREDENTIALS_DIRECTORY", "Secret", "SecretRef", "check_secrets", "legacy_env", "legacy_env_keys", "resolve_secret"]
