"""Secrets in the configuration: one ``SecretRef`` type (value, env, file, systemd credential),
resolved where used with errors naming the key, never shown, and the old ``x_env`` keys still read."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from ancre.config import load_settings
from ancre.errors import ConfigError
from ancre.settings import ApiConfig, SecretRef, resolve_secret

VALUE = "s3cret-VALUE-42"


def _write(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "ancre.toml"
    config.write_text(text, encoding="utf-8")
    return config


def test_a_plain_string_is_the_value() -> None:
    assert SecretRef.model_validate(VALUE).resolve("api.api_key") == VALUE
    assert SecretRef.model_validate({"value": VALUE}).resolve("api.api_key") == VALUE
    assert SecretRef.model_validate(SecretStr(VALUE)).resolve("api.api_key") == VALUE
    assert resolve_secret(None, "api.api_key") is None


def test_env_is_read_when_resolved_and_a_missing_one_names_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = SecretRef(env="T_SECRET_VAR")
    monkeypatch.delenv("T_SECRET_VAR", raising=False)
    with pytest.raises(ConfigError) as e:
        ref.resolve("sources.smb1.password")
    assert str(e.value) == "sources.smb1.password.env: environment variable T_SECRET_VAR is not set"
    monkeypatch.setenv("T_SECRET_VAR", VALUE)
    assert ref.resolve("sources.smb1.password") == VALUE
    assert ref.where("sources.smb1.password") == "$T_SECRET_VAR"


def test_file_drops_one_trailing_line_break_and_a_missing_file_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "api-key"
    path.write_text(VALUE + "\n", encoding="utf-8")
    assert SecretRef(file=path).resolve("api.api_key") == VALUE
    path.write_text(VALUE + "\r\n", encoding="utf-8")
    assert SecretRef(file=path).resolve("api.api_key") == VALUE
    path.write_text(f" {VALUE}  ", encoding="utf-8")
    assert SecretRef(file=path).resolve("api.api_key") == f" {VALUE}  "  # only the line break goes
    with pytest.raises(ConfigError, match=r"^api\.api_key\.file: .*nope does not exist$"):
        SecretRef(file=tmp_path / "nope").resolve("api.api_key")
    with pytest.raises(ConfigError, match=r"^api\.api_key\.file: cannot read"):
        SecretRef(file=tmp_path).resolve("api.api_key")  # a folder


def test_systemd_credential_is_read_from_credentials_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ldap").write_text(VALUE, encoding="utf-8")
    ref = SecretRef(credential="ldap")
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    with pytest.raises(ConfigError, match=r"^directory\.bind_password\.credential: \$CREDENTIALS_DIRECTORY is not set"):
        ref.resolve("directory.bind_password")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert ref.resolve("directory.bind_password") == VALUE
    with pytest.raises(ConfigError, match=r"^directory\.bind_password\.credential: .*other does not exist"):
        SecretRef(credential="other").resolve("directory.bind_password")


@pytest.mark.parametrize("given", [{}, {"env": "A", "value": "x"}, {"file": "/x", "credential": "c"}])
def test_exactly_one_place(given: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match="exactly one of env, file, credential or value"):
        SecretRef.model_validate(given)


def test_the_value_is_never_shown(tmp_path: Path) -> None:
    api = ApiConfig(api_key=VALUE, signing_secret={"value": VALUE})  # type: ignore[arg-type]
    settings = load_settings(None, api={"api_key": VALUE}, directory={"kind": "ldap", "url": "ldaps://dc",
                             "base_dn": "DC=x", "bind_password": VALUE})
    for text in (repr(api), str(api), repr(settings), str(settings), api.model_dump_json(), repr(api.api_key),
                 str(api.api_key), settings.model_dump_json()):
        assert VALUE not in text
    assert repr(SecretRef(env="X")) == "SecretRef(env='X')"
    assert repr(SecretRef(value=VALUE)) == "SecretRef(value='**********')"  # type: ignore[arg-type]


def test_toml_forms_and_relative_file_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "jwt").write_text("j" * 40 + "\n", encoding="utf-8")
    monkeypatch.setenv("T_ANCRE_KEY", VALUE)
    config = _write(tmp_path, '[api]\napi_key = { env = "T_ANCRE_KEY" }\nuser_jwt_secret = { file = "secrets/jwt" }\n'
                              '[llm]\nkind = "openai"\nurl = "http://127.0.0.1:9"\nmodel = "m"\napi_key = "plain"\n')
    s = load_settings(config)
    assert s.api.api_key == SecretRef(env="T_ANCRE_KEY")
    assert s.api.user_jwt_secret == SecretRef(file=tmp_path / "secrets" / "jwt")  # against the config's folder
    assert resolve_secret(s.api.user_jwt_secret, "api.user_jwt_secret") == "j" * 40
    assert resolve_secret(s.llm.api_key, "llm.api_key") == "plain"


def test_a_bad_secret_table_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"api\.api_key\.envv: unknown key \(did you mean 'env'\?\)"):
        load_settings(_write(tmp_path, '[api]\napi_key = { envv = "X" }\n'))
    with pytest.raises(ConfigError, match=r"api\.api_key: .*exactly one of"):
        load_settings(_write(tmp_path, '[api]\napi_key = { env = "X", value = "y" }\n'))


def test_environment_overrides_are_the_value_never_json(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("123456", "null", "true", '{"env": "X"}', "[1]"):
        monkeypatch.setenv("ANCRE_API__API_KEY", value)
        assert resolve_secret(load_settings(None).api.api_key, "api.api_key") == value
    monkeypatch.delenv("ANCRE_API__API_KEY")
    monkeypatch.setenv("ANCRE_STORE__KIND", "qdrant")
    monkeypatch.setenv("ANCRE_STORE__URL", "http://127.0.0.1:6333")
    monkeypatch.setenv("ANCRE_STORE__API_KEY__ENV", "T_QDRANT_KEY")
    assert load_settings(None).store.api_key == SecretRef(env="T_QDRANT_KEY")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("table", "section", "key"),
    [
        ('[api]\napi_key_env = "T_OLD"\n', "api", "api_key"),
        ('[api]\nsigning_secret_env = "T_OLD"\n', "api", "signing_secret"),
        ('[api]\nuser_jwt_secret_env = "T_OLD"\n', "api", "user_jwt_secret"),
        ('[directory]\nkind = "ldap"\nurl = "ldaps://dc"\nbase_dn = "DC=x"\nbind_password_env = "T_OLD"\n',
         "directory", "bind_password"),
    ],
)
def test_the_old_env_keys_still_load_with_a_deprecation_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, table: str, section: str, key: str
) -> None:
    with caplog.at_level(logging.WARNING, "ancre.config"):
        s = load_settings(_write(tmp_path, table))
    assert getattr(getattr(s, section), key) == SecretRef(env="T_OLD")
    assert f'{key}_env = "T_OLD" is deprecated: write {key} = {{ env = "T_OLD" }}' in caplog.text


def test_the_old_env_keys_of_sources_still_load(tmp_path: Path) -> None:
    config = _write(tmp_path, (
        '[[sources]]\nid = "smb1"\nkind = "smb"\nserver = "srv"\nshare = "P"\npassword_env = "T_SMB"\n'
        '[[sources]]\nid = "sp"\nkind = "sharepoint"\ntenant_id = "t"\nclient_id = "c"\nclient_secret_env = "T_SP"\n'
        '[[sources]]\nid = "sp2"\nkind = "sharepoint"\ntenant_id = "t"\nclient_id = "c"\npfx_path = "a.pfx"\n'
        'pfx_passphrase_env = "T_PFX"\n'
    ))
    smb, sp, sp2 = load_settings(config).sources
    assert smb.password == SecretRef(env="T_SMB")  # type: ignore[attr-defined]
    assert sp.client_secret == SecretRef(env="T_SP")  # type: ignore[attr-defined]
    assert sp2.pfx_passphrase == SecretRef(env="T_PFX")  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"sources\.sp\.client_secret\.env: environment variable T_SP is not set"):
        sp.secret()  # type: ignore[attr-defined]


def test_old_and_new_spelling_together_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"api: .*set api_key or api_key_env, not both"):
        load_settings(_write(tmp_path, '[api]\napi_key = "x"\napi_key_env = "Y"\n'))
