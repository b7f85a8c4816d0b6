"""``examples/production/ancre.toml`` is a production configuration to start from (issue 45):
it loads as it is, holds every part a deployment has — SMB with LDAPS, SharePoint, Ollama for
the answers and the judge, the API with Open WebUI's signed user JWT, a keyed audit chain — and
no secret: each is read from the environment, a file or a systemd credential, the three forms
all shown. (``ancre check`` on it with every server faked: tests/integration/test_production_example.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ancre.config import load_settings
from ancre.settings import SecretRef

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "production" / "ancre.toml"


def _secrets(model: Any, prefix: str = "") -> list[tuple[str, SecretRef]]:
    out: list[tuple[str, SecretRef]] = []
    if isinstance(model, SecretRef):
        return [(prefix.rstrip("."), model)]
    if isinstance(model, BaseModel):
        for name in type(model).model_fields:
            out += _secrets(getattr(model, name), f"{prefix}{name}.")
    elif isinstance(model, tuple):
        for i, item in enumerate(model):
            out += _secrets(item, f"{prefix}{i}.")
    return out


def test_the_production_example_loads_and_has_every_part() -> None:
    s = load_settings(EXAMPLE)
    assert str(s.data_dir) == "/var/lib/ancre"
    assert s.directory.kind == "ldap" and all(u.startswith("ldaps://") for u in s.directory.ldap_urls)
    assert s.directory.ca_file is not None
    assert [src.kind for src in s.sources] == ["smb", "sharepoint"]
    assert s.llm.kind == "ollama" and s.judge.enabled
    assert s.api.api_key is not None and s.api.user_jwt_secret is not None and s.api.identity == "upn"
    assert s.audit.chain_key_file is not None and s.store.kind == "edge"


def test_no_secret_is_written_in_it_and_every_form_is_shown() -> None:
    found = _secrets(load_settings(EXAMPLE))
    assert {k for k, _ in found} == {"directory.bind_password", "sources.0.password", "sources.1.pfx_passphrase",
                                     "api.api_key", "api.user_jwt_secret"}
    assert all(ref.value is None for _, ref in found), [k for k, ref in found if ref.value is not None]
    forms = {("env" if ref.env else "file" if ref.file else "credential") for _, ref in found}
    assert forms == {"env", "file", "credential"}
