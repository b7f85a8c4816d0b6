"""The configuration reference (``docs/CONFIGURATION.md``) rendered from the settings models.

Every key's type, default and description come from the pydantic models themselves: a field's
description is its attribute docstring (``use_attribute_docstrings``), its type and range from its
annotation and constraints (``ge``, ``le``, ``pattern``…), its default from the model. A secret is
a field typed :class:`~pydantic.SecretStr` or :data:`SecretText`, and the ``<key>_env`` field that
names an environment variable holding it. :func:`ancre.config.configuration_reference` feeds the
root :class:`~ancre.config.Settings` and the registered source kinds to :func:`render_reference`;
``python -m ancre.config reference -o docs/CONFIGURATION.md`` (``make reference``) writes the file.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Iterable, Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


class _SecretMarker:
    """Metadata marking a plain ``str`` field as a secret in the reference (never logged)."""

    def __repr__(self) -> str:
        return "SECRET"


SECRET = _SecretMarker()
"""The marker of :data:`SecretText`."""

SecretText = Annotated[str, SECRET]
"""A ``str`` setting that is a secret (an API key read as plain text by its client): marked
*secret* in the reference; the value is a plain ``str`` for the code that reads it."""

_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")


def _markdown(doc: str) -> str:
    text = _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", doc)
    return text.replace("``", "`")


def markdown_text(doc: str) -> str:
    """A docstring as one Markdown table-cell line: reST roles become code spans (``:class:`~a.b.C```
    → the last name ``C``; without ``~`` the whole target), double backticks single ones, line
    breaks spaces, ``|`` escaped."""
    text = " ".join(line.strip() for line in _markdown(doc).strip().splitlines())
    return text.replace("|", "\\|")


def _is_secret(annotation: Any) -> bool:
    if annotation is SecretStr:
        return True
    if get_origin(annotation) is Annotated:
        base, *meta = get_args(annotation)
        return any(m is SECRET for m in meta) or _is_secret(base)
    return any(_is_secret(a) for a in get_args(annotation))


def _literal(value: Any) -> str:
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, Path):
        return _literal(str(value))
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{value:.1f}"
    if isinstance(value, tuple | list | frozenset | set):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_literal(v)}" for k, v in value.items()) + "}"
    return str(value)


def type_text(annotation: Any) -> str:
    """A TOML-side name of a field's type: ``string``, ``integer``, ``float``, ``boolean``,
    ``path``, ``secret string``, ``list of string``, ``table of string → …``, a choice of literals
    (``"a" \\| "b"``), ``… or unset`` for an optional field."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return "secret string" if any(m is SECRET for m in args[1:]) else type_text(args[0])
    if origin is Literal:
        return " \\| ".join(f"`{_literal(a)}`" for a in args)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner = " or ".join(type_text(a) for a in rest)
        return f"{inner} or unset" if len(rest) < len(args) else inner
    if origin in (tuple, list, frozenset, set):
        items = [a for a in args if a is not Ellipsis]
        return "list of " + (type_text(items[0]) if items else "any")
    if origin is dict:
        return f"table of {type_text(args[0])} → {type_text(args[1])}"
    names = {str: "string", int: "integer", float: "float", bool: "boolean", Path: "path", SecretStr: "secret string"}
    if annotation in names:
        return names[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(field: FieldInfo) -> str:
    parts: list[str] = []
    for m in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"), ("min_length", "length ≥"),
                           ("max_length", "length ≤")):
            value = getattr(m, attr, None)
            if value is not None and isinstance(m, annotated_types.BaseMetadata):
                parts.append(f"{sign} {value}")
        pattern = getattr(m, "pattern", None)
        if pattern is not None:
            parts.append(f"matches `{pattern}`")
    return ", ".join(parts)


def default_text(field: FieldInfo) -> str:
    """The default as a TOML value (``"e5-local"``, ``30.0``, ``[]``), ``unset`` for ``None``,
    ``required`` for a field without default."""
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return ""
    return f"`{_literal(value)}`"


def _row(name: str, field: FieldInfo, secret_names: set[str]) -> str:
    annotation = field.annotation
    kind = type_text(annotation)
    bounds = _bounds(field)
    if bounds:
        kind += f" ({bounds})"
    description = markdown_text(field.description or "")
    if name in secret_names:
        description = "**Secret** (never logged). " + description
    elif name.endswith("_env") and name[: -len("_env")] in secret_names:
        description = "**Secret** (the variable's name). " + description
    return f"| `{name}` | {kind} | {default_text(field)} | {description} |"


def missing_descriptions(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted keys of ``model`` (and of the sub-models it holds) whose field has no description."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        if not (field.description or "").strip():
            out.append(prefix + name)
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out += missing_descriptions(sub, f"{prefix}{name}.")
    return out


def _table(model: type[BaseModel], names: Iterable[str]) -> list[str]:
    fields = model.model_fields
    secret_names = {n for n, f in fields.items() if _is_secret(f.annotation)}
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    rows += [_row(n, fields[n], secret_names) for n in names]
    return rows


def _doc(model: type[BaseModel]) -> list[str]:
    doc = inspect.cleandoc(model.__doc__ or "")
    return [_markdown(doc), ""] if doc else []


def render_reference(
    root: type[BaseModel],
    sources_key: str,
    common: type[BaseModel],
    kinds: Mapping[str, type[BaseModel]],
    *,
    env_prefix: str = "ANCRE_",
    default_kind: str | None = None,
) -> str:
    """``docs/CONFIGURATION.md``: the top-level keys of ``root``, one section per sub-model field
    (``[embedder]``, ``[store]``, …; split per kind when the model has a ``kind_keys`` class
    attribute, kind → the keys only that kind reads) and ``[[<sources_key>]]`` — the keys of ``common`` then, per
    entry of ``kinds`` (kind → config model, a subclass of ``common``), that kind's own keys.
    Deterministic (models' field order); the text is Markdown, one table per section."""
    fields = root.model_fields
    sections = [n for n, f in fields.items() if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)]
    top = [n for n in fields if n not in sections and n != sources_key]
    out = [
        "# Configuration reference",
        "",
        ("<!-- Generated from the settings models by `make reference` "
         "(`python -m ancre.config reference -o docs/CONFIGURATION.md`); do not edit by hand. -->"),
        "",
        ("ancre reads one TOML file (`ancre.toml`; `--config`, else `$ANCRE_CONFIG`, else `./ancre.toml`). "
         "An unknown key or a bad value is an error naming the key. Relative paths are resolved against "
         "the file's folder. Every key can be overridden from the environment: "
         f"`{env_prefix}<SECTION>__<KEY>` (e.g. `{env_prefix}STORE__API_KEY`, `{env_prefix}EMBEDDER__KIND`). "
         "Secrets are best given through the environment: a secret `x` has an `x_env` key naming the variable "
         "that holds it, or its `" + env_prefix + "…` variable."),
        "",
        "Sections: " + ", ".join(f"[`[{n}]`](#{n})" for n in sections) + f", [`[[{sources_key}]]`](#{sources_key}).",
        "",
        "## Top-level keys",
        "",
        *_table(root, top),
        "",
    ]
    for name in sections:
        model = fields[name].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        out += [f"## [{name}]", "", *_doc(model)]
        per_kind: Mapping[str, tuple[str, ...]] = getattr(model, "kind_keys", {})
        kind_only = {key for keys in per_kind.values() for key in keys}
        if per_kind:
            out += [f"### [{name}] keys of every kind", ""]
        out += [*_table(model, [n for n in model.model_fields if n not in kind_only]), ""]
        for kind, keys in per_kind.items():
            out += [f"### [{name}] kind = \"{kind}\"", "", *_table(model, keys), ""]
    out += [f"## [[{sources_key}]]", "", markdown_text(fields[sources_key].description or ""), ""]
    if default_kind is not None:
        out += [f"`kind` defaults to `\"{default_kind}\"`. Known kinds: "
                + ", ".join(f"`{k}`" for k in kinds) + ".", ""]
    out += ["### Keys of every kind", "", *_table(common, [n for n in common.model_fields if n != "kind"]), ""]
    for kind, model in kinds.items():
        own = [n for n in model.model_fields if n not in common.model_fields or n == "kind"]
        out += [f"### kind = \"{kind}\"", "", *_doc(model), *_table(model, own), ""]
    return "\n".join(out).rstrip("\n") + "\n"


__all__ = [
    "SECRET",
    "SecretText",
    "default_text",
    "markdown_text",
    "missing_descriptions",
    "render_reference",
    "type_text",
]
