"""The configuration reference (``docs/CONFIGURATION.md``) rendered from the settings models.

Every key's type, default and description come from the pydantic models themselves: a field's
description is its attribute docstring (``use_attribute_docstrings``), its type and range from its
annotation and constraints (``ge``, ``le``, ``pattern``…), its default from the model. A secret is
a field typed :class:`~ancre.settings.secrets.SecretRef` (or :class:`~pydantic.SecretStr`). A
section typed as a discriminated union on ``kind`` (``[store]``, ``[directory]``, ``[embedder]``)
gets the keys every kind shares, then one table per kind. :func:`ancre.config.configuration_reference` feeds the
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
from pydantic import BaseModel, SecretStr, Tag
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ancre.settings.secrets import SecretRef

SECRET_TYPE = "secret"
"""The type name of a :class:`~ancre.settings.secrets.SecretRef` key in the reference."""


def union_variants(annotation: Any) -> dict[str, type[BaseModel]]:
    """The variants of a discriminated union of models tagged with :class:`~pydantic.Tag`
    (``Annotated[Annotated[A, Tag("a")] | …, Discriminator(…)]``, or the bare union pydantic keeps
    as a field's annotation): tag → model, the default variant (the one whose ``kind`` has a
    default) first, then the union's order. Empty for any other annotation."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) not in (Union, types.UnionType):
        return {}
    out: dict[str, type[BaseModel]] = {}
    for arm in get_args(annotation):
        if get_origin(arm) is not Annotated:
            return {}
        model, *meta = get_args(arm)
        tags = [m.tag for m in meta if isinstance(m, Tag)]
        if not tags or not (isinstance(model, type) and issubclass(model, BaseModel)):
            return {}
        out[tags[0]] = model
    defaults = [t for t, m in out.items() if "kind" in m.model_fields and not m.model_fields["kind"].is_required()]
    return {t: out[t] for t in [*defaults[:1], *(t for t in out if t not in defaults[:1])]}

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
    if annotation is SecretStr or annotation is SecretRef:
        return True
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
    ``path``, ``secret`` (a :class:`~ancre.settings.secrets.SecretRef`), ``secret string``, ``list
    of string``, ``table of string → …``, a choice of literals (``"a" \\| "b"``), ``… or unset`` for
    an optional field."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return type_text(args[0])
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
    names = {str: "string", int: "integer", float: "float", bool: "boolean", Path: "path", SecretStr: "secret string",
             SecretRef: SECRET_TYPE}
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
        description = "**Secret** (never logged; see [Secrets](#secrets)). " + description
    return f"| `{name}` | {kind} | {default_text(field)} | {description} |"


def missing_descriptions(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted keys of ``model`` (and of the sub-models it holds) whose field has no description."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        if not (field.description or "").strip():
            out.append(prefix + name)
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel) and sub is not SecretRef:
            out += missing_descriptions(sub, f"{prefix}{name}.")
        for tag, variant in union_variants(sub).items():
            out += missing_descriptions(variant, f"{prefix}{name}.{tag}.")
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


def _shared_keys(variants: Mapping[str, type[BaseModel]]) -> list[str]:
    """The keys every variant has with the same type, default and description (``kind`` first)."""
    models = list(variants.values())

    def same(name: str) -> bool:
        fields = [m.model_fields.get(name) for m in models]
        return all(f is not None for f in fields) and len({
            (repr(f.annotation), default_text(f), f.description) for f in fields if f is not None
        }) == 1

    return ["kind", *(n for n in models[0].model_fields if n != "kind" and same(n))]


def _kind_row(variants: Mapping[str, type[BaseModel]]) -> str:
    tag, first = next(iter(variants.items()))
    field = first.model_fields["kind"]
    kinds = " \\| ".join(f"`{_literal(t)}`" for t in variants)
    default = f"`{_literal(tag)}`" if not field.is_required() else "required"
    return f"| `kind` | {kinds} | {default} | {markdown_text(field.description or '')} |"


def _union_section(name: str, description: str, variants: Mapping[str, type[BaseModel]]) -> list[str]:
    """``## [name]`` for a ``kind`` union: the keys every kind shares, then each kind's own."""
    shared = _shared_keys(variants)
    first = next(iter(variants.values()))
    out = [f"## [{name}]", "", markdown_text(description), "",
           "Each kind reads only its own keys: a key of another kind is an error naming it.", "",
           f"### [{name}] keys of every kind", ""]
    out += [*_table(first, shared[1:])[:2], _kind_row(variants), *_table(first, shared[1:])[2:], ""]
    for tag, model in variants.items():
        declared = inspect.get_annotations(model)  # the variant's own keys first, then its base's
        own = sorted((n for n in model.model_fields if n not in shared), key=lambda n: n not in declared)
        out += [f"### [{name}] kind = \"{tag}\"", "", *_doc(model)]
        out += [*_table(model, own), ""] if own else []
    return out


def _intro(env_prefix: str, sections: list[str], sources_key: str) -> list[str]:
    return [
        "# Configuration reference",
        "",
        ("<!-- Generated from the settings models by `make reference` "
         "(`python -m ancre.config reference -o docs/CONFIGURATION.md`); do not edit by hand. -->"),
        "",
        ("ancre reads one TOML file (`ancre.toml`; `--config`, else `$ANCRE_CONFIG`, else `./ancre.toml`). "
         "An unknown key or a bad value is an error naming the key. Relative paths are resolved against "
         "the file's folder. Every key can be overridden from the environment: "
         f"`{env_prefix}<SECTION>__<KEY>` (e.g. `{env_prefix}STORE__API_KEY`, `{env_prefix}EMBEDDER__KIND`)."),
        "",
        "Sections: " + ", ".join(f"[`[{n}]`](#{n})" for n in sections)
        + f", [`[[{sources_key}]]`](#{sources_key}); [Secrets](#secrets).",
        "",
        "## Secrets",
        "",
        ("A key of type *secret* (a password, a key, a token) takes the value itself or says where it is: "
         '`x = "…"` or `x = { value = "…" }` (keep the file mode 0600); `x = { env = "VAR" }`, an environment '
         'variable (the unit\'s `EnvironmentFile=`); `x = { file = "/etc/ancre/x" }`, a file\'s content without '
         'its trailing line break; `x = { credential = "x" }`, a systemd credential '
         "(`LoadCredential=x:/etc/ancre/x`: read from `$CREDENTIALS_DIRECTORY/x`). "
         f"`{env_prefix}<SECTION>__<KEY>` is the value itself, `{env_prefix}<SECTION>__<KEY>__ENV` names a variable. "
         "A secret is read only where it is used; a variable that is not set or a file that can't be read is "
         "an error naming the key (`api.api_key.env: environment variable ANCRE_API_KEY is not set`). The value "
         'is never logged. The older `x_env = "VAR"` is still read as `x = { env = "VAR" }` (deprecated).'),
        "",
    ]


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
    (``[extraction]``, …) or ``kind`` union (``[store]``: the keys every kind shares, then one
    table per kind, see :func:`union_variants`), and ``[[<sources_key>]]`` — the keys of
    ``common`` then, per entry of ``kinds`` (kind → config model, a subclass of ``common``), that
    kind's own keys. Deterministic (models' field order); Markdown, one table per section."""
    fields = root.model_fields

    def is_section(f: FieldInfo) -> bool:
        ann = f.annotation
        return bool(union_variants(ann)) or (isinstance(ann, type) and issubclass(ann, BaseModel))

    sections = [n for n, f in fields.items() if is_section(f)]
    top = [n for n in fields if n not in sections and n != sources_key]
    out = [*_intro(env_prefix, sections, sources_key), "## Top-level keys", "", *_table(root, top), ""]
    for name in sections:
        model = fields[name].annotation
        variants = union_variants(model)
        if variants:
            out += _union_section(name, fields[name].description or "", variants)
            continue
        assert isinstance(model, type) and issubclass(model, BaseModel)
        out += [f"## [{name}]", "", *_doc(model), *_table(model, list(model.model_fields)), ""]
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
    "SECRET_TYPE",
    "default_text",
    "markdown_text",
    "missing_descriptions",
    "render_reference",
    "type_text",
    "union_variants",
]
