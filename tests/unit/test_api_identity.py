"""The API's authentication: service key, Open WebUI identity headers, HMAC signature."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote

import pytest
from pydantic import ValidationError
from starlette.datastructures import Headers

from ancre.api.identity import AuthError, Secrets, authenticate, check_api_key, check_signature, directory_user, signature
from ancre.config import load_settings
from ancre.errors import ConfigError
from ancre.settings.api import ApiConfig

KEY = "k-0123456789"
SECRET = "s3cret"
EMAIL = "bruno.favre@axonix.ch"
NOW = 1_800_000_000


def headers(**extra: str) -> Headers:
    """Headers as an ASGI server hands them over: values decoded from bytes as Latin-1."""
    raw = {"authorization": f"Bearer {KEY}", "x-openwebui-user-email": EMAIL, **extra}
    return Headers(raw=[(k.lower().encode(), v.encode("utf-8")) for k, v in raw.items()])


def code_of(fn: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(AuthError) as exc:
        fn(*args, **kwargs)  # type: ignore[operator]
    return exc.value.code


def test_api_key() -> None:
    check_api_key(f"Bearer {KEY}", KEY)
    check_api_key(f"bearer   {KEY} ", KEY)
    assert code_of(check_api_key, None, KEY) == "invalid_api_key"
    assert code_of(check_api_key, f"Bearer {KEY}x", KEY) == "invalid_api_key"
    assert code_of(check_api_key, f"Basic {KEY}", KEY) == "invalid_api_key"
    assert code_of(check_api_key, "Bearer", KEY) == "invalid_api_key"
    assert code_of(check_api_key, "Bearer clé€", "clé€") == "invalid_api_key"  # not header bytes: refused, no crash


BODY = b'{"question": "Quel est le forfait de Baumont ?"}'
REQ = {"method": "POST", "path": "/query", "body": BODY}


def test_signature_format_is_pinned() -> None:
    """The exact string to sign of README "Identity signature"."""
    body_hash = hashlib.sha256(BODY).hexdigest()
    msg = f"{EMAIL}\n{NOW}\nPOST\n/query\n{body_hash}"
    expected = hmac.new(SECRET.encode(), msg.encode(), hashlib.sha256).hexdigest()
    assert signature(SECRET, EMAIL, NOW, "POST", "/query", BODY) == f"t={NOW},v1={expected}"
    assert signature(SECRET, EMAIL, NOW, "post", "/query", BODY) == f"t={NOW},v1={expected}"
    empty = hmac.new(SECRET.encode(), f"{EMAIL}\n{NOW}\nGET\n/v1/models\n{hashlib.sha256(b'').hexdigest()}".encode(),
                     hashlib.sha256).hexdigest()
    assert signature(SECRET, EMAIL, NOW, "GET", "/v1/models") == f"t={NOW},v1={empty}"


def test_signature_checks() -> None:
    good = signature(SECRET, EMAIL, NOW, **REQ)
    check_signature(good, EMAIL, SECRET, 300, now=NOW + 299, **REQ)
    check_signature(good, EMAIL, SECRET, 300, now=NOW - 299, **REQ)
    check_signature(good.upper().replace("T=", "t=").replace("V1=", "v1="), EMAIL, SECRET, 300, now=NOW, **REQ)
    assert code_of(check_signature, None, EMAIL, SECRET, 300, now=NOW, **REQ) == "missing_signature"
    assert code_of(check_signature, good, "alice.martin@axonix.ch", SECRET, 300, now=NOW, **REQ) == "invalid_signature"
    assert code_of(check_signature, good, EMAIL, "other", 300, now=NOW, **REQ) == "invalid_signature"
    assert code_of(check_signature, good, EMAIL, SECRET, 300, now=NOW + 301, **REQ) == "stale_signature"
    assert code_of(check_signature, good, EMAIL, SECRET, 300, now=NOW - 301, **REQ) == "stale_signature"  # dated in the future
    for bad in ("deadbeef", f"t={NOW}", "v1=abc", f"t=-{NOW},v1=abc", f"t={NOW},t={NOW},v1=abc", "t=１２,v1=abc"):
        assert code_of(check_signature, bad, EMAIL, SECRET, 300, now=NOW, **REQ) == "invalid_signature", bad


def test_a_captured_signature_is_good_for_its_own_request_only() -> None:
    """The signature binds the method, the path and the body, not only e-mail and time."""
    good = signature(SECRET, EMAIL, NOW, **REQ)
    other_question = {**REQ, "body": b'{"question": "Quel est le salaire de la directrice ?"}'}
    assert code_of(check_signature, good, EMAIL, SECRET, 300, now=NOW, **other_question) == "invalid_signature"
    assert code_of(check_signature, good, EMAIL, SECRET, 300, now=NOW, **{**REQ, "path": "/v1/chat/completions"}) == "invalid_signature"
    assert code_of(check_signature, good, EMAIL, SECRET, 300, now=NOW, **{**REQ, "method": "PUT"}) == "invalid_signature"
    check_signature(good, EMAIL, SECRET, 300, now=NOW, **REQ)


def test_authenticate_reads_open_webui_headers() -> None:
    cfg = ApiConfig()
    secrets = Secrets(KEY, None)
    ident = authenticate(
        headers(**{"x-openwebui-user-name": quote("Brüno Favre", safe=" "), "x-openwebui-user-id": "u1",
                   "x-openwebui-user-role": "user"}),
        cfg, secrets,
    )
    assert (ident.email, ident.user, ident.name, ident.user_id, ident.role) == (EMAIL, EMAIL, "Brüno Favre", "u1", "user")
    # a UTF-8 e-mail survives the Latin-1 decoding of header bytes
    assert authenticate(headers(**{"x-openwebui-user-email": "zoé@axonix.ch"}), cfg, secrets).email == "zoé@axonix.ch"
    assert code_of(authenticate, Headers(raw=[(b"authorization", f"Bearer {KEY}".encode())]), cfg, secrets) == "missing_identity"
    assert code_of(authenticate, headers(**{"x-openwebui-user-email": "a\tb@x"}), cfg, secrets) == "invalid_identity_chars"
    assert code_of(authenticate, headers(**{"x-openwebui-user-email": "a" * 400}), cfg, secrets) == "invalid_identity"
    assert code_of(authenticate, headers(authorization="Bearer nope"), cfg, secrets) == "invalid_api_key"


def test_authenticate_with_a_signing_secret() -> None:
    cfg = ApiConfig()
    secrets = Secrets(KEY, SECRET)
    ok = headers(**{"x-ancre-signature": signature(SECRET, EMAIL, NOW, **REQ)})
    assert authenticate(ok, cfg, secrets, now=NOW, **REQ).user == EMAIL
    assert code_of(authenticate, ok, cfg, secrets, now=NOW, **{**REQ, "body": b"{}"}) == "invalid_signature"
    assert code_of(authenticate, headers(), cfg, secrets, now=NOW, **REQ) == "missing_signature"
    other = headers(**{"x-ancre-signature": signature(SECRET, "alice.martin@axonix.ch", NOW, **REQ)})
    assert code_of(authenticate, other, cfg, secrets, now=NOW, **REQ) == "invalid_signature"
    custom = ApiConfig(signature_header="X-Proxy-Sig")
    assert authenticate(headers(**{"x-proxy-sig": signature(SECRET, EMAIL, NOW, **REQ)}), custom, secrets, now=NOW, **REQ).user == EMAIL


def test_configurable_header_names() -> None:
    cfg = ApiConfig(user_email_header="X-User-Mail")
    h = Headers(raw=[(b"authorization", f"Bearer {KEY}".encode()), (b"x-user-mail", EMAIL.encode())])
    assert authenticate(h, cfg, Secrets(KEY, None)).email == EMAIL
    assert code_of(authenticate, headers(), cfg, Secrets(KEY, None)) == "missing_identity"


def test_directory_user_mapping() -> None:
    assert directory_user(EMAIL, ApiConfig()) == EMAIL  # upn: the directory matches the UPN
    assert directory_user(EMAIL, ApiConfig(identity="sam")) == "bruno.favre"
    mapped = ApiConfig(identity="sam", user_map={"B.Favre@Axonix.com": "bruno"})
    assert directory_user("b.favre@axonix.com", mapped) == "bruno"
    assert directory_user(EMAIL, mapped) == "bruno.favre"


def test_secrets_from_config(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"api.api_key is required"):
        Secrets.from_config(ApiConfig())
    monkeypatch.delenv("ANCRE_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANCRE_TEST_KEY"):
        Secrets.from_config(ApiConfig(api_key_env="ANCRE_TEST_KEY"))
    monkeypatch.setenv("ANCRE_TEST_KEY", KEY)
    monkeypatch.setenv("ANCRE_TEST_SECRET", SECRET)
    assert Secrets.from_config(ApiConfig(api_key_env="ANCRE_TEST_KEY", signing_secret_env="ANCRE_TEST_SECRET")) == Secrets(KEY, SECRET)
    assert KEY not in repr(ApiConfig(api_key=KEY))  # never shown


def test_api_config_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="not both"):
        ApiConfig(api_key=KEY, api_key_env="X")
    with pytest.raises(ValidationError, match="distinct"):
        ApiConfig(user_id_header="X-OpenWebUI-User-Email")
    with pytest.raises(ValidationError):
        ApiConfig(user_email_header="bad header")
    monkeypatch.setenv("ANCRE_API__API_KEY", KEY)
    monkeypatch.setenv("ANCRE_API__PORT", "9001")
    s = load_settings(None)
    assert s.api.port == 9001 and s.api.api_key is not None and s.api.api_key.resolve("api.api_key") == KEY
    with pytest.raises(ConfigError, match=r"api.identity"):
        load_settings(None, api={"identity": "guess"})


def test_identity_upn_accepts_upns_only() -> None:
    """With identity = "upn" the e-mail must be a UPN; an account name or DOMAIN\\sam in
    the e-mail header is refused (the directory would match it against account names)."""
    cfg, secrets = ApiConfig(identity="upn"), Secrets(KEY, None)
    for not_upn in ("bruno", "AXONIX\\bruno", "bruno@", "@axonix.ch", "AXONIX\\bruno@axonix.ch"):
        assert code_of(authenticate, headers(**{"x-openwebui-user-email": not_upn}), cfg, secrets) == "invalid_identity", not_upn
        assert code_of(directory_user, not_upn, cfg) == "invalid_identity", not_upn
    sam = ApiConfig(identity="sam")
    assert directory_user("bruno@axonix.ch", sam) == "bruno"
    assert code_of(directory_user, "AXONIX\\bruno@axonix.ch", sam) == "invalid_identity"


def test_user_map_matches_exactly_after_ascii_lowercasing() -> None:
    """``ß`` is not ``ss`` (Unicode case folding would merge them)."""
    mapped = ApiConfig(user_map={"Jess.Rossi@Axonix.com": "jess"})
    assert directory_user("JESS.ROSSI@axonix.com", mapped) == "jess"
    assert directory_user("je\u00df.rossi@axonix.com", mapped) == "je\u00df.rossi@axonix.com"  # not mapped
    assert directory_user("je\u017fs.rossi@axonix.com", mapped) == "je\u017fs.rossi@axonix.com"


def test_the_identity_keeps_the_header_as_received() -> None:
    ident = authenticate(headers(**{"x-openwebui-user-email": "Zoe\u0301.Blanc@axonix.ch"}), ApiConfig(), Secrets(KEY, None))
    assert ident.header == "Zoe\u0301.Blanc@axonix.ch" and ident.email == "Zoé.Blanc@axonix.ch"
    # surrounding spaces are not stripped into the account: refused (issue 40)
    spaced = headers(**{"x-openwebui-user-email": " Zoe\u0301.Blanc@axonix.ch "})
    assert code_of(authenticate, spaced, ApiConfig(), Secrets(KEY, None)) == "invalid_identity_chars"
