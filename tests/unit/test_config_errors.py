"""A bad key in the configuration is refused naming it, its table and, for a typo, the key that
was meant: every table of :class:`~ancre.config.Settings` and of each source kind, swept."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel

from ancre.config import Settings, load_settings
from ancre.connectors.registry import REGISTRY
from ancre.errors import ConfigError
from ancre.settings.reference import union_variants


def _error(**sections: Any) -> str:
    with pytest.raises(ConfigError) as e:
        load_settings(None, **sections)
    return str(e.value)


def _tables() -> list[tuple[str, str | None, type[BaseModel]]]:
    """(section, kind or None, model) for every ``[section]`` table of the settings."""
    out: list[tuple[str, str | None, type[BaseModel]]] = []
    for name, field in Settings.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.append((name, None, ann))
        out += [(name, kind, model) for kind, model in union_variants(ann).items()]
    return out


TABLES = _tables()
SOURCE = {"id": "partage", "root": "/srv/share"}
SUGGESTED = re.compile(r"\(did you mean '([a-z0-9_]+)'\?\)")


def test_the_sweep_sees_the_tables() -> None:
    names = {name for name, _, _ in TABLES}
    assert {"audit", "query", "api", "embedder", "store", "directory"} <= names


@pytest.mark.parametrize(("section", "kind", "model"), TABLES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_a_typo_of_each_key_of_a_section_suggests_a_key_of_that_section(
    section: str, kind: str | None, model: type[BaseModel]
) -> None:
    base = {"kind": kind} if kind is not None else {}
    for key in (k for k in model.model_fields if len(k) >= 6 and k != "kind"):
        typo = key[:2] + key[3:]
        if typo in model.model_fields:
            continue
        msg = _error(**{section: {**base, typo: 1}})
        assert f"{section}.{typo}: unknown key" in msg, msg
        m = SUGGESTED.search(msg)
        assert m is not None and m.group(1) in model.model_fields, msg
        assert "Extra inputs" not in msg


@pytest.mark.parametrize(("section", "kind", "model"), TABLES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_a_key_like_none_is_refused_without_a_guess(section: str, kind: str | None, model: type[BaseModel]) -> None:
    base = {"kind": kind} if kind is not None else {}
    msg = _error(**{section: {**base, "zzqxw": 1}})
    assert re.search(rf"{section}\.zzqxw: unknown key(?! \(did)", msg), msg


def test_a_misspelled_section_suggests_the_section() -> None:
    assert "embeder: unknown key (did you mean 'embedder'?)" in _error(embeder={"kind": "e5-local"})
    assert "audit.retension_days: unknown key (did you mean 'retention_days'?)" in _error(audit={"retension_days": 3})


@pytest.mark.parametrize("kind", list(REGISTRY))
def test_a_typo_in_a_source_names_the_source_by_its_id_and_suggests_the_key(kind: str) -> None:
    model = REGISTRY[kind].config
    key = next(k for k in model.model_fields if len(k) >= 8 and k not in ("kind", "id"))
    typo = key[:-1]
    msg = _error(sources=[{**SOURCE, "kind": kind, typo: 1}])
    assert f"sources.0.{typo} (source 'partage'): unknown key for kind '{kind}'" in msg, msg
    m = SUGGESTED.search(msg)
    assert m is not None and m.group(1) in model.model_fields, msg


def test_a_source_without_an_id_is_named_by_its_position() -> None:
    msg = _error(sources=[{"root": "/srv/share"}])
    assert "sources.0.id: Field required" in msg and "(source" not in msg
