"""``auth = "kerberos"`` on an SMB source without the ``kerberos`` extra is one line naming the
key, the missing packages and what to install (issue 45) — was: a pass ``suspect`` and ``ancre
check`` blaming the server (``ImportError: GSSAPIProxy requires the Python gssapi library``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from ancre.config import load_settings
from ancre.connectors.smb import connector as smb_connector
from ancre.errors import ConfigError


def _source(tmp_path: Path, auth: str) -> Any:
    return load_settings(None, data_dir=str(tmp_path), sources=[
        {"id": "partage", "kind": "smb", "server": "127.0.0.1", "share": "Partage", "auth": auth},
    ]).sources[0]


def test_kerberos_without_the_extra_names_the_key_and_the_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("gssapi", "krb5") else real(name, *a))

    class Ctx:
        ignore: tuple[str, ...] = ()

        def directory(self) -> Any:
            raise ConfigError("no directory")

    with pytest.raises(ConfigError) as e:
        smb_connector.build(_source(tmp_path, "kerberos"), Ctx())  # type: ignore[arg-type]
    msg = str(e.value)
    assert msg.startswith('sources.partage.auth = "kerberos" needs the `kerberos` extra (gssapi, krb5 not installed)')
    assert "libkrb5-dev gcc python3-dev" in msg and "pip install 'ancre[kerberos]'" in msg
    assert smb_connector.build(_source(tmp_path, "ntlm"), Ctx()) is not None  # NTLM needs nothing more
