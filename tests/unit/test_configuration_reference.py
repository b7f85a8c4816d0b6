"""docs/CONFIGURATION.md is generated from the settings models: every key has a description, the
committed file is the one the models give, every key an example config uses is in it, and secrets
are marked."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from ancre.config import Settings, configuration_reference, load_settings
from ancre.connectors.registry import REGISTRY
from ancre.settings.reference import default_text, missing_descriptions, type_text, union_variants
from ancre.settings.secrets import SecretRef
from ancre.settings.sources import SourceSettings

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "CONFIGURATION.md"
EXAMPLES = sorted((ROOT / "examples").rglob("*.toml"))


KIND_SECTIONS = ("embedder", "store", "directory")


def _models() -> dict[str, type[BaseModel]]:
    """Table name → model: the root, each section (``store.edge``, … for a ``kind`` union), each
    source kind."""
    out: dict[str, type[BaseModel]] = {"(root)": Settings}
    for name, field in Settings.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            out[name] = field.annotation
        out |= {f"{name}.{tag}": model for tag, model in union_variants(field.annotation).items()}
    out |= {f"sources.{kind}": entry.config for kind, entry in REGISTRY.items()}
    return out


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of its level or above."""
    start = text.index(heading + "\n")
    level = heading.split(" ", 1)[0]
    ends = [i for i in (text.find("\n## ", start + 1), text.find("\n### ", start + 1) if level == "###" else -1) if i != -1]
    return text[start : min(ends) if ends else len(text)]


def _row(section: str, key: str) -> str:
    for line in section.splitlines():
        if line.startswith(f"| `{key}` |"):
            return line
    raise AssertionError(f"no row for {key!r} in\n{section[:200]}")


def test_every_field_has_a_description() -> None:
    missing = [f"{table}: {key}" for table, model in _models().items() for key in missing_descriptions(model)]
    assert missing == [], "settings fields without a description (add a docstring under the field):\n" + "\n".join(missing)


def test_the_committed_reference_is_up_to_date() -> None:
    assert REFERENCE.is_file(), "docs/CONFIGURATION.md is missing: run `make reference`"
    assert REFERENCE.read_text(encoding="utf-8") == configuration_reference(), (
        "docs/CONFIGURATION.md is stale: run `make reference` (python -m ancre.config reference -o docs/CONFIGURATION.md)"
    )


@pytest.mark.slow  # two interpreters importing the whole configuration: make test runs it, make check does not
def test_the_command_writes_the_same_text(tmp_path: Path) -> None:
    out = tmp_path / "CONFIGURATION.md"
    subprocess.run([sys.executable, "-m", "ancre.config", "reference", "-o", str(out)], check=True, cwd=tmp_path, timeout=120)
    assert out.read_text(encoding="utf-8") == configuration_reference()
    printed = subprocess.run([sys.executable, "-m", "ancre.config", "reference"], check=True, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120).stdout
    assert printed == configuration_reference()


def test_every_key_of_every_model_has_a_row_in_its_section() -> None:
    text = configuration_reference()
    common = set(SourceSettings.model_fields) - {"kind"}
    for table, model in _models().items():
        if table == "(root)":
            heading, keys = "## Top-level keys", [k for k in model.model_fields if k in ("data_dir", "ignore")]
        elif table.startswith("sources."):
            kind = table.split(".", 1)[1]
            heading, keys = f'### kind = "{kind}"', [k for k in model.model_fields if k not in common]
        elif "." in table:
            section, kind = table.split(".")
            every = _section(text, f"### [{section}] keys of every kind")
            heading = f'### [{section}] kind = "{kind}"'
            keys = [k for k in model.model_fields if f"| `{k}` |" not in every]
        else:
            heading, keys = f"## [{table}]", list(model.model_fields)
        section = _section(text, heading)
        for key in keys:
            description = model.model_fields[key].description or ""
            assert description.split()[0].replace("``", "`") in _row(section, key), (table, key)
    shared = _section(text, "### Keys of every kind")
    for key in common:
        _row(shared, key)


def _keys(table: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k, v in table.items():
        tables = ("collection_overrides", "user_map", "loggers", "local_groups")  # keys whose value is a table
        secret = isinstance(v, dict) and set(v) <= set(SecretRef.model_fields)  # a secret given as a table
        if isinstance(v, dict) and prefix.count(".") < 1 and k not in tables and not secret:
            out += _keys(v, f"{prefix}{k}.")
        else:
            out.append(prefix + k)
    return out


def _assert_documented(raw: dict[str, Any]) -> None:
    text = configuration_reference()
    for key in _keys({k: v for k, v in raw.items() if k != "sources"}):
        section, _, name = key.rpartition(".")
        if section in KIND_SECTIONS:
            kind = raw[section].get("kind", next(iter(union_variants(Settings.model_fields[section].annotation))))
            every = _section(text, f"### [{section}] keys of every kind")
            _row(every if f"| `{name}` |" in every else _section(text, f'### [{section}] kind = "{kind}"'), name)
            continue
        heading = f"## [{section}]" if section else "## Top-level keys"
        _row(_section(text, heading), name)
    for src in raw.get("sources", []):
        kind = src.get("kind", "folder")
        for name in src:
            if name in SourceSettings.model_fields and name != "kind":
                _row(_section(text, "### Keys of every kind"), name)
            else:
                _row(_section(text, f'### kind = "{kind}"'), name)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_key_an_example_uses_is_documented(example: Path) -> None:
    load_settings(example)  # the example still loads
    _assert_documented(tomllib.loads(example.read_text(encoding="utf-8")))


DOC_TOML = [(f"{doc.relative_to(ROOT)}-{i}", block)
            for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] if doc.name != "CONFIGURATION.md"
            for i, block in enumerate(re.findall(r"```toml\n(.*?)```", doc.read_text(encoding="utf-8"), re.DOTALL))]


@pytest.mark.parametrize("block", [b for _, b in DOC_TOML], ids=[name for name, _ in DOC_TOML])
def test_every_key_a_doc_example_uses_is_valid_and_documented(block: str) -> None:
    """Every TOML block of the README and docs/ (tests/unit/test_docs.py also loads each the way
    ``ancre`` does): its keys validate and are in the reference."""
    raw = tomllib.loads(block)
    Settings(**raw)  # the example still validates
    _assert_documented(raw)


@pytest.mark.parametrize("section", KIND_SECTIONS)
def test_each_kind_of_a_union_section_has_its_own_table(section: str) -> None:
    """``[store]``, ``[directory]``, ``[embedder]``: a table of the keys every kind shares (``kind``
    first, with every kind and the default), then one per kind with its own keys only."""
    text = configuration_reference()
    variants = union_variants(Settings.model_fields[section].annotation)
    assert variants, section
    shared = _section(text, f"### [{section}] keys of every kind")
    assert all(f"`{_quoted(kind)}`" in _row(shared, "kind") for kind in variants)
    for kind, model in variants.items():
        own = _section(text, f'### [{section}] kind = "{kind}"')
        for key in model.model_fields:
            assert f"| `{key}` |" in shared or f"| `{key}` |" in own, (section, kind, key)
        for other_model in variants.values():
            for key in set(other_model.model_fields) - set(model.model_fields):
                assert f"| `{key}` |" not in own and f"| `{key}` |" not in shared, (section, kind, key)


def _quoted(kind: str) -> str:
    return f'"{kind}"'


def test_secrets_are_marked() -> None:
    text = configuration_reference()
    marked = [line for line in text.splitlines() if "**Secret**" in line]
    expected = {"api.api_key", "api.signing_secret", "api.user_jwt_secret", "directory.bind_password",
                "embedder.api_key", "store.api_key", "llm.api_key", "sources.smb.password",
                "sources.sharepoint.client_secret", "sources.sharepoint.pfx_passphrase"}
    for dotted in expected:
        *_, key = dotted.split(".")
        assert any(line.startswith(f"| `{key}` | secret or unset |") for line in marked), dotted
    assert not any("_env` |" in line for line in text.splitlines()), "no `x_env` key is documented any more"
    for model in _models().values():
        for key, field in model.model_fields.items():
            if field.annotation is not None and "SecretRef" in str(field.annotation):
                assert any(line.startswith(f"| `{key}` |") for line in marked), key
    assert not any(line.startswith("| `model` |") for line in marked)
    assert "## Secrets" in text and '{ env = "VAR" }' in text and "LoadCredential=" in text


def test_types_and_defaults_are_toml_spelled() -> None:
    assert type_text(str | None) == "string or unset"
    assert type_text(tuple[str, ...]) == "list of string"
    assert type_text(SecretStr | None) == "secret string or unset"
    assert type_text(SecretRef | None) == "secret or unset"
    emb = union_variants(Settings.model_fields["embedder"].annotation)["e5-local"]
    assert default_text(emb.model_fields["kind"]) == '`"e5-local"`'
    assert default_text(emb.model_fields["model"]) == "unset"
    assert default_text(REGISTRY["folder"].config.model_fields["root"]) == "required"
    qdrant = _section(configuration_reference(), '### [store] kind = "qdrant"')
    assert "`30.0`" in _row(qdrant, "timeout_s") and "(> 0)" in _row(qdrant, "timeout_s")
    assert "required" in _row(qdrant, "url")
    kind = _row(_section(configuration_reference(), "### [store] keys of every kind"), "kind")
    assert '`"edge"` \\| `"qdrant"` \\| `"local"` | `"edge"`' in kind


def test_the_docs_link_the_reference() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Documentation") :]
    section = section[: section.index("\n## ", 5)]
    assert "(docs/CONFIGURATION.md)" in section
    assert "(CONFIGURATION.md)" in (ROOT / "docs" / "CONFIGURING.md").read_text(encoding="utf-8")
