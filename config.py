"""The one TOML configuration of ancre (pydantic-settings), with ``ANCRE_…`` environment overrides.

Environment variables override the file: ``ANCRE_EMBEDDER__KIND=ollama``,
``ANCRE_STORE__API_KEY=…`` (nested keys joined by ``__``). A bad key or value raises
:class:`~ancre.errors.ConfigError` naming the key, e.g. ``sources.0.root (source 'partage'): Field required``.
Relative paths in the file are resolved against the file's folder.
"""

from __future__ import annotations

import difflib
import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Tag, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ancre.connectors.registry import DEFAULT_KIND, REGISTRY
from ancre.errors import ConfigError
from ancre.models import COLLECTIONS
from ancre.settings import (
    DEFAULT_IGNORE,
    ApiConfig,
    AuditConfig,
    ChunkingConfig,
    ContextConfig,
    DaemonConfig,
    DirectoryConfig,
    E5LocalEmbedderConfig,
    EdgeStoreConfig,
    EmbedderConfig,
    ExtractionConfig,
    FileDirectoryConfig,
    JudgeConfig,
    LlmConfig,
    LoggingConfig,
    QueryConfig,
    ReportsConfig,
    SecretRef,
    SourceSettings,
    StoreConfig,
    SyncConfig,
    WatchMode,
    resolve_secret,
)
from ancre.settings.locations import PathRole
from ancre.settings.reference import render_reference, union_variants
from ancre.settings.sections import kind_discriminator

if TYPE_CHECKING:
    SourceConfig = SourceSettings
else:
    SourceConfig = Annotated[
        Union[tuple(Annotated[k.config, Tag(k.kind)] for k in REGISTRY.values())],  # noqa: UP007
        kind_discriminator("source", DEFAULT_KIND, REGISTRY),
    ]
"""One ``[[sources]]`` entry: the discriminated union (on ``kind``, default ``folder``) of the
config models of :data:`ancre.connectors.registry.REGISTRY`; statically a
:class:`~ancre.settings.sources.SourceSettings`."""


class Settings(BaseSettings):
    """The whole configuration. Load with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="ANCRE_", env_nested_delimiter="__", extra="forbid", frozen=True, use_attribute_docstrings=True
    )

    data_dir: Annotated[Path, PathRole.WRITE_DIR] = Path("./ancre-data")
    """ancre's own data (index, state DB, BM25 snapshots, audit); default ``<config folder>/ancre-data``.
    Never indexed, even through a link."""
    embedder: EmbedderConfig = E5LocalEmbedderConfig()
    """``[embedder]``: which model writes and queries the vectors."""
    store: StoreConfig = EdgeStoreConfig()
    """``[store]``: where the vectors and the keyword index live."""
    directory: DirectoryConfig = FileDirectoryConfig()
    """``[directory]``: who is in which group (file or Active Directory)."""
    extraction: ExtractionConfig = ExtractionConfig()
    """``[extraction]``: text extraction limits, timeouts and OCR."""
    chunking: ChunkingConfig = ChunkingConfig()
    """``[chunking]``: how documents are cut into chunks."""
    sync: SyncConfig = SyncConfig()
    """``[sync]``: mass-deletion guard and retries of a sync pass."""
    query: QueryConfig = QueryConfig()
    """``[query]``: hybrid retrieval and the live ACL check."""
    context: ContextConfig = ContextConfig()
    """``[context]``: what an answer's context holds."""
    llm: LlmConfig = LlmConfig()
    """``[llm]``: the answering model."""
    judge: JudgeConfig = JudgeConfig()
    """``[judge]``: the grounding judge."""
    audit: AuditConfig = AuditConfig()
    """``[audit]``: the nLPD audit log."""
    daemon: DaemonConfig = DaemonConfig()
    """``[daemon]``: event queue, schedules, control socket, observability."""
    logging: LoggingConfig = LoggingConfig()
    """``[logging]``: a log level per component."""
    api: ApiConfig = ApiConfig()
    """``[api]``: the RAG API and its callers' identity."""
    reports: ReportsConfig = ReportsConfig()
    """``[reports]``: what the exposure report counts as broad."""
    sources: tuple[SourceConfig, ...] = ()
    """``[[sources]]``: the document sources, one table each (``kind`` picks the connector)."""
    ignore: tuple[str, ...] = DEFAULT_IGNORE
    """File-name globs never indexed in any source (case-insensitive): Office and LibreOffice
    lock files, editor temp files, Windows shell metadata."""

    @field_validator("sources")
    @classmethod
    def _unique_ids(cls, v: tuple[SourceConfig, ...]) -> tuple[SourceConfig, ...]:
        ids = [s.id for s in v]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ValueError(f"duplicate source id(s): {', '.join(sorted(dup))}")
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # environment first (overrides), then values from the TOML file passed as init kwargs
        return (env_settings, init_settings)

    def source(self, source_id: str) -> SourceConfig:
        """The source with this id; raises :class:`ConfigError` if none."""
        for s in self.sources:
            if s.id == source_id:
                return s
        raise ConfigError(f"sources: no source with id {source_id!r}")

    def private_paths(self) -> tuple[Path, ...]:
        """ancre's own files (data directory, audit folder and key): never a document, even
        through a link."""
        paths = [Path(self.data_dir)]
        paths += [Path(p) for p in (self.audit.dir, self.audit.key_file, self.audit.chain_key_file) if p is not None]
        return tuple(paths)


def config_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The config file to read: ``path``, else ``$ANCRE_CONFIG``, else ``./ancre.toml`` (the CLI's
    and the query core's rule)."""
    if path is not None:
        return Path(path)
    env = os.environ.get("ANCRE_CONFIG")
    return Path(env) if env else Path("ancre.toml")


def _section_model(name: str, table: dict[str, Any]) -> type[BaseModel] | None:
    """The model that reads the top-level table ``name``: a section's model, or for a ``kind``
    union (``[store]``, ``[directory]``…) the variant its ``kind`` picks; ``None`` when unknown
    (validation reports it)."""
    field = Settings.model_fields.get(name)
    if field is None:
        return None
    variants = union_variants(field.annotation)
    if variants:
        return variants.get(str(table.get("kind", next(iter(variants)))))
    ann = field.annotation
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def _is_path(annotation: Any) -> bool:
    return annotation is Path or Path in get_args(annotation)


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretRef or SecretRef in get_args(annotation)


_PATH_SECTIONS = frozenset({"directory", "store", "audit"})
"""The sections whose path keys are resolved against the config file's folder (with ``data_dir``
and the sources' path keys; a secret's ``file`` is, in any table)."""


def _fix_table(
    table: dict[str, Any], model: type[BaseModel] | None, fix: Callable[[Any], Any], *, paths: bool = True
) -> dict[str, Any]:
    """``table`` with the values of ``model``'s path fields (with ``paths``) and the ``file`` of its
    secrets given as tables passed through ``fix``."""
    if model is None:
        return table
    out = dict(table)
    for name, field in model.model_fields.items():
        if name not in out:
            continue
        if paths and _is_path(field.annotation):
            out[name] = fix(out[name])
        elif _is_secret(field.annotation) and isinstance(out[name], dict) and "file" in out[name]:
            out[name] = {**out[name], "file": fix(out[name]["file"])}
    return out


def _resolve_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    def fix(p: Any) -> Any:
        if isinstance(p, str) and p and not os.path.isabs(os.path.expanduser(p)):
            return str((base / p).resolve())
        if isinstance(p, str):
            return os.path.expanduser(p)
        return p

    out = dict(raw)
    if "data_dir" in out:
        out["data_dir"] = fix(out["data_dir"])
    for name, table in raw.items():
        if name != "sources" and isinstance(table, dict):
            out[name] = _fix_table(table, _section_model(name, table), fix, paths=name in _PATH_SECTIONS)
    if isinstance(out.get("sources"), list):
        out["sources"] = [
            _fix_table(src, _source_model(src), fix) if isinstance(src, dict) else src for src in out["sources"]
        ]
    return out


def _source_model(source: dict[str, Any]) -> type[BaseModel] | None:
    kind = REGISTRY.get(str(source.get("kind", DEFAULT_KIND)))
    return kind.config if kind is not None else None


def _kind_variants(loc: list[Any]) -> tuple[int, dict[str, type[BaseModel]]] | None:
    """Where a ``kind`` union's tag sits in an error's ``loc`` and that union's variants (tag →
    model): ``sources.<i>.<tag>`` or ``<section>.<tag>``; ``None`` elsewhere."""
    if len(loc) >= 2 and loc[0] == "sources":
        return 2, {k: e.config for k, e in REGISTRY.items()}
    field = Settings.model_fields.get(str(loc[0])) if loc else None
    variants = union_variants(field.annotation) if field is not None else {}
    return (1, variants) if variants else None


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The models a value of ``annotation`` may be: itself, or the arms of a union (``None``
    left out)."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for arm in get_args(annotation) for m in _models(arm)]
    return []


def _keys_at(loc: list[Any], raw: dict[str, Any]) -> set[str]:
    """The keys the table at ``loc`` (an error's ``loc`` without its last element, the kind tag
    removed) may hold, the section or source's model picked from ``raw`` as
    :func:`_section_model` / :func:`_source_model` pick it; empty where that can't tell."""
    sources = raw.get("sources")
    models: list[type[BaseModel]] = []
    if not loc:
        models = [Settings]
    elif loc[0] == "sources" and len(loc) >= 2 and isinstance(sources, list) and isinstance(loc[1], int):
        entry = sources[loc[1]] if 0 <= loc[1] < len(sources) else None
        model = _source_model(entry) if isinstance(entry, dict) else None
        models, loc = ([model] if model is not None else []), loc[2:]
    elif loc[0] != "sources":
        table = raw.get(str(loc[0]))
        model = _section_model(str(loc[0]), table if isinstance(table, dict) else {})
        models, loc = ([model] if model is not None else []), loc[1:]
    for step in loc:
        models = [m for model in models if (f := model.model_fields.get(str(step))) for m in _models(f.annotation)]
    return {name for model in models for name in model.model_fields}


def _unknown_key(key: str, known: set[str], prefix: str = "unknown key") -> str:
    """``prefix``, with the closest key of ``known`` when one is close (a typo)."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
    return f"{prefix} (did you mean {close[0]!r}?)" if close else prefix


def _foreign_key(key: str, kind: str, variants: dict[str, type[BaseModel]]) -> str:
    """The message for ``key``, a key the variant ``kind`` does not read."""
    owners = [k for k, model in variants.items() if key in model.model_fields]
    if owners:
        return f"not a key of kind {kind!r} (only of {', '.join(repr(o) for o in owners)})"
    return _unknown_key(key, set(variants[kind].model_fields), f"unknown key for kind {kind!r}")


def _where(loc: list[Any], raw: dict[str, Any]) -> str:
    """``loc`` as a dotted key; a source's is followed by its ``id``: ``sources.0.root (source 'partage')``."""
    where = ".".join(str(x) for x in loc) or "(root)"
    sources = raw.get("sources")
    if len(loc) >= 2 and loc[0] == "sources" and isinstance(loc[1], int) and isinstance(sources, list):
        entry = sources[loc[1]] if 0 <= loc[1] < len(sources) else None
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            where += f" (source {entry['id']!r})"
    return where


def _format_error(err: Any, raw: dict[str, Any]) -> str:
    loc = list(err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")  # a validator's own sentence
    where = _kind_variants(loc)
    if where is not None:
        at, variants = where
        if len(loc) > at and loc[at] in variants:
            kind = str(loc.pop(at))  # the union's tag: ``store.qdrant.url`` is reported ``store.url``
            if err["type"] == "extra_forbidden" and len(loc) == at + 1:
                msg = _foreign_key(str(loc[at]), kind, variants)
        elif err["type"].endswith("_kind") and len(loc) == at and not isinstance(err["input"], dict):
            msg = f"expected a table, got {err['input']!r}"
        elif err["type"].endswith("_kind") and len(loc) == at:
            loc.append("kind")
            msg = f"unknown {err['type'].removesuffix('_kind')} kind {err['input'].get('kind')!r} (known: {', '.join(variants)})"
    if err["type"] == "extra_forbidden" and msg == err["msg"] and loc:
        msg = _unknown_key(str(loc[-1]), _keys_at(loc[:-1], raw))
    return f"{_where(loc, raw)}: {msg}"


def _format_validation(e: ValidationError, raw: dict[str, Any]) -> str:
    """Every error of ``e`` as ``key: message``, ``raw`` being the input that was validated."""
    return "; ".join(_format_error(err, raw) for err in e.errors())


def configuration_reference() -> str:
    """``docs/CONFIGURATION.md``: every key of :class:`Settings` and of each registered source
    kind's config model, with type, default and description
    (:func:`ancre.settings.reference.render_reference`)."""
    return render_reference(
        Settings, "sources", SourceSettings, {kind: entry.config for kind, entry in REGISTRY.items()},
        env_prefix=Settings.model_config.get("env_prefix", ""), default_kind=DEFAULT_KIND,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m ancre.config reference [-o FILE]``: print (or write) the configuration reference."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ancre.config", description="ancre configuration tools")
    sub = parser.add_subparsers(dest="command", required=True)
    ref = sub.add_parser("reference", help="the configuration reference (Markdown), from the settings models")
    ref.add_argument("-o", "--output", type=Path, help="write it to this file instead of standard output")
    args = parser.parse_args(argv)
    text = configuration_reference()
    if args.output is None:
        print(text, end="")
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0


def load_settings(path: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Read the TOML file at ``path`` (or only the environment and defaults when ``None``).

    Relative paths in the file are resolved against its folder; ``data_dir`` defaults to
    ``<config folder>/ancre-data``. Raises :class:`ConfigError` naming the key on a missing file,
    a TOML syntax error, an unknown key or a bad value.
    """
    import tomllib

    raw: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        try:
            raw = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {p}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{p}: TOML syntax error: {e}") from None
        raw.setdefault("data_dir", "ancre-data")
        raw = _resolve_paths(raw, p.resolve().parent)
    raw.update(overrides)
    try:
        return Settings(**raw)
    except ValidationError as e:
        raise ConfigError(f"invalid configuration: {_format_validation(e, raw)}") from None


__all__ = [
    "COLLECTIONS",
    "DEFAULT_IGNORE",
    "ChunkingConfig",
    "DirectoryConfig",
    "EmbedderConfig",
    "ExtractionConfig",
    "QueryConfig",
    "Settings",
    "SourceConfig",
    "SourceSettings",
    "StoreConfig",
    "SyncConfig",
    "WatchMode",
    "config_path",
    "configuration_reference",
    "load_settings",
    "resolve_secret",
]


if __name__ == "__main__":
    raise SystemExit(main())
