"""docs/CONFIGURATION.md is generated from the settings models: every key has a description, the
committed file is the one the models give, every key an example config uses is in it, and secrets
are marked."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel, SecretStr

from ancre.config import Settings, configuration_reference, load_settings
from ancre.connectors.registry import REGISTRY
from ancre.settings.reference import default_text, missing_descriptions, type_text
from ancre.settings.sources import SourceSettings

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "CONFIGURATION.md"
EXAMPLES = sorted((ROOT / "examples").rglob("*.toml"))


def _models() -> dict[str, type[BaseModel]]:
    """Table name → model: the root, each section, each source kind."""
    out: dict[str, type[BaseModel]] = {"(root)": Settings}
    for name, field in Settings.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            out[name] = field.annotation
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
        if isinstance(v, dict) and prefix.count(".") < 1 and k not in tables:
            out += _keys(v, f"{prefix}{k}.")
        else:
            out.append(prefix + k)
    return out


def _assert_documented(raw: dict[str, Any]) -> None:
    text = configuration_reference()
    for key in _keys({k: v for k, v in raw.items() if k != "sources"}):
        section, _, name = key.rpartition(".")
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


README_TOML = re.findall(r"```toml\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.parametrize("block", README_TOML, ids=[f"readme-{i}" for i in range(len(README_TOML))])
def test_every_key_a_readme_example_uses_is_valid_and_documented(block: str) -> None:
    raw = tomllib.loads(block)
    Settings(**raw)  # the README's example still validates
    _assert_documented(raw)


@pytest.mark.parametrize("section", ["store", "directory"])
def test_keys_only_one_kind_reads_are_listed_under_that_kind(section: str) -> None:
    text = configuration_reference()
    model = _models()[section]
    per_kind: dict[str, tuple[str, ...]] = model.kind_keys  # type: ignore[attr-defined]
    assert set(per_kind) == set(get_args(model.model_fields["kind"].annotation))
    for kind, keys in per_kind.items():
        sub = _section(text, f'### [{section}] kind = "{kind}"')
        for key in keys:
            _row(sub, key)
    shared = _section(text, f"### [{section}] keys of every kind")
    _row(shared, "kind")
    assert not any(f"| `{key}` |" in shared for keys in per_kind.values() for key in keys)


def test_secrets_are_marked() -> None:
    text = configuration_reference()
    marked = [line for line in text.splitlines() if "**Secret**" in line]
    expected = {"api.api_key", "api.signing_secret", "api.user_jwt_secret", "directory.bind_password",
                "embedder.api_key", "store.api_key", "llm.api_key", "sources.smb.password",
                "sources.sharepoint.client_secret", "sources.sharepoint.pfx_passphrase"}
    for dotted in expected:
        *_, key = dotted.split(".")
        assert any(line.startswith(f"| `{key}` |") for line in marked), dotted
        if any(line.startswith(f"| `{key}_env` |") for line in text.splitlines()):
            assert any(line.startswith(f"| `{key}_env` |") for line in marked), f"{dotted}_env"
    for model in _models().values():
        for key, field in model.model_fields.items():
            if field.annotation is not None and "SecretStr" in str(field.annotation):
                assert any(line.startswith(f"| `{key}` |") for line in marked), key
    assert not any(line.startswith("| `model` |") for line in marked)


def test_types_and_defaults_are_toml_spelled() -> None:
    assert type_text(str | None) == "string or unset"
    assert type_text(tuple[str, ...]) == "list of string"
    assert type_text(SecretStr | None) == "secret string or unset"
    emb = Settings.model_fields["embedder"].annotation
    assert isinstance(emb, type) and issubclass(emb, BaseModel)
    assert default_text(emb.model_fields["kind"]) == '`"e5-local"`'
    assert default_text(emb.model_fields["model"]) == "unset"
    assert default_text(REGISTRY["folder"].config.model_fields["root"]) == "required"
    assert "`30.0`" in _row(_section(configuration_reference(), "## [store]"), "timeout_s")
    assert "(> 0)" in _row(_section(configuration_reference(), "## [store]"), "timeout_s")


def test_readme_links_the_reference() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Configuration") :]
    section = section[: section.index("\n## ", 5)]
    assert "docs/CONFIGURATION.md" in section
