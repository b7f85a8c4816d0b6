"""The user identity signed by Open WebUI (``X-OpenWebUI-User-Jwt``): tokens forged every usual
way are refused (401), a valid one answers as its user, plain identity headers are refused.

The valid token is minted exactly as Open WebUI 0.12 does (``open_webui.utils.headers.
_mint_forward_user_jwt``): HS256, ``sub``/``email``/``name``/``role``/``iss``/``iat``/``exp``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.testclient import TestClient

from ancre.api.app import create_app
from ancre.api.identity import AuthError, Secrets, authenticate, check_user_jwt
from ancre.config import load_settings
from ancre.errors import ConfigError
from ancre.query.answer import Answer
from ancre.query.prompt import REFUSAL
from ancre.settings.api import ApiConfig

KEY = "unit-key"
SECRET = "owui-jwt-secret-0123456789-abcdefghij"
EMAIL = "alice.martin@axonix.ch"
HEADER = "X-OpenWebUI-User-Jwt"


def claims(**changes: Any) -> dict[str, Any]:
    """Open WebUI's payload for alice, now; ``changes`` set claims (``None`` removes one)."""
    now = int(time.time())
    payload = {"sub": "u-1", "email": EMAIL, "name": "Alice Martin", "role": "user", "iss": "open-webui",
               "iat": now, "exp": now + 300}
    for k, v in changes.items():
        if v is None:
            payload.pop(k, None)
        else:
            payload[k] = v
    return payload


def mint(secret: str = SECRET, algorithm: str = "HS256", **changes: Any) -> str:
    key = secret * 2 if algorithm in ("HS384", "HS512") else secret  # long enough: no warning
    return jwt.encode(claims(**changes), key, algorithm=algorithm)


def b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def cfg(**api: Any) -> ApiConfig:
    return ApiConfig(api_key=KEY, user_jwt_secret=SECRET, **api)


def secrets() -> Secrets:
    return Secrets(KEY, None, SECRET)


def headers(token: str | None = None, **extra: str) -> Headers:
    raw = {"authorization": f"Bearer {KEY}", **({HEADER.lower(): token} if token is not None else {}), **extra}
    return Headers(raw=[(k.lower().encode(), v.encode("utf-8")) for k, v in raw.items()])


def code(token: str | None, **extra: str) -> str:
    with pytest.raises(AuthError) as exc:
        authenticate(headers(token, **extra), cfg(), secrets())
    return exc.value.code


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


# ----------------------------------------------------------------------------- valid


def test_a_valid_token_is_its_user() -> None:
    ident = authenticate(headers(mint()), cfg(), secrets())
    assert (ident.email, ident.user, ident.user_id, ident.name, ident.role) == (
        EMAIL, EMAIL, "u-1", "Alice Martin", "user")
    assert ident.header == EMAIL  # what the audit log records as the identity received


def test_the_email_claim_is_mapped_like_the_email_header() -> None:
    """NFC (nothing stripped), then api.user_map / identity exactly as X-OpenWebUI-User-Email is."""
    nfd = "Ale\u0301xia.Martin@axonix.ch"
    for api in ({"identity": "sam"}, {"user_map": {"Aléxia.Martin@axonix.ch": "alexia"}}, {}):
        by_jwt = authenticate(headers(mint(email=nfd)), cfg(**api), secrets())
        plain_cfg = ApiConfig(api_key=KEY, **api)
        plain = Headers(raw=[(b"authorization", f"Bearer {KEY}".encode()),
                             (b"x-openwebui-user-email", nfd.encode())])
        by_header = authenticate(plain, plain_cfg, Secrets(KEY, None))
        assert (by_jwt.email, by_jwt.user) == (by_header.email, by_header.user)
    assert by_jwt.email == "Aléxia.Martin@axonix.ch"


def test_clock_skew_within_leeway_passes() -> None:
    now = int(time.time())
    authenticate(headers(mint(iat=now - 320, exp=now - 20)), cfg(), secrets())  # leeway 30 s
    authenticate(headers(mint(iat=now + 20, exp=now + 320)), cfg(), secrets())


# ----------------------------------------------------------------------------- forged


def test_wrong_secret_expired_and_future_tokens_are_refused() -> None:
    now = int(time.time())
    assert code(mint(secret="another-secret-of-at-least-32-bytes!!")) == "invalid_user_jwt"
    assert code(mint(iat=now - 400, exp=now - 31)) == "expired_user_jwt"
    assert code(mint(iat=now + 60, exp=now + 360)) == "invalid_user_jwt"  # issued in the future


def test_alg_none_and_swapped_algorithms_are_refused() -> None:
    none_token = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims())}."
    assert code(none_token) == "invalid_user_jwt"
    assert code(f"{b64({'alg': 'NONE', 'typ': 'JWT'})}.{b64(claims())}.") == "invalid_user_jwt"
    assert code(mint(algorithm="HS512")) == "invalid_user_jwt"
    assert code(mint(algorithm="HS384")) == "invalid_user_jwt"
    key = rsa_key()
    assert code(jwt.encode(claims(), key, algorithm="RS256")) == "invalid_user_jwt"


def test_rs_hs_confusion_is_refused() -> None:
    """An HS256 token keyed with a public key: refused even when that PEM is the configured
    secret (PyJWT will not use an asymmetric key as an HMAC secret)."""
    pem = rsa_key().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    header = b64({"alg": "HS256", "typ": "JWT"})
    body = b64(claims())
    sig = base64.urlsafe_b64encode(hmac.new(pem.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest())
    token = f"{header}.{body}.{sig.rstrip(b'=').decode()}"
    c = ApiConfig(api_key=KEY, user_jwt_secret=pem)
    with pytest.raises(AuthError) as exc:
        authenticate(headers(token), c, Secrets(KEY, None, pem.strip()))
    assert exc.value.code == "invalid_user_jwt"


@pytest.mark.parametrize("missing", ["email", "exp", "iat", "iss"])
def test_missing_claims_are_refused(missing: str) -> None:
    assert code(mint(**{missing: None})) == "invalid_user_jwt"


def test_wrong_or_odd_claims_are_refused() -> None:
    assert code(mint(iss="someone-else")) == "invalid_user_jwt"
    assert code(mint(email=["alice.martin@axonix.ch"])) == "invalid_user_jwt"
    assert code(mint(email="")) == "missing_identity"
    assert code(mint(email="  ")) == "invalid_identity_chars"
    assert code(mint(email="alice\u0000@axonix.ch")) == "invalid_identity_chars"
    assert code(mint(exp="tomorrow")) == "invalid_user_jwt"


def test_a_long_lived_jwt_is_refused() -> None:
    """A token minted with a 10-year ``exp`` (taken from a log, a proxy, a browser) was an identity
    for 10 years; Open WebUI mints 5-minute ones: anything living longer is refused."""
    now = int(time.time())
    assert code(mint(iat=now, exp=now + 10 * 365 * 86400)) == "invalid_user_jwt"
    assert code(mint(iat=now - 3000, exp=now + 600)) == "invalid_user_jwt"  # an hour's token, not expired yet
    with pytest.raises(AuthError, match=r"api.user_jwt_max_lifetime_s"):
        authenticate(headers(mint(exp=now + 3600)), cfg(), secrets())
    ok = authenticate(headers(mint(iat=now, exp=now + 300)), cfg(), secrets())  # Open WebUI's own
    assert ok.header == EMAIL
    long_ok = authenticate(headers(mint(exp=now + 3600)), cfg(user_jwt_max_lifetime_s=3600), secrets())
    assert long_ok.header == EMAIL


def test_tampered_payload_is_refused() -> None:
    header, _, sig = mint().split(".")
    forged = f"{header}.{b64(claims(email='patrick.direction@axonix.ch'))}.{sig}"
    assert code(forged) == "invalid_user_jwt"
    assert code(mint()[:-2] + "xx") == "invalid_user_jwt"
    assert code("not.a.jwt") == "invalid_user_jwt"
    assert code("é" * 10) == "invalid_user_jwt"


def test_plain_identity_headers_are_refused_when_a_jwt_secret_is_set() -> None:
    assert code(None) == "missing_user_jwt"
    assert code(None, **{"x-openwebui-user-email": EMAIL}) == "plain_identity_refused"
    assert code(mint(), **{"x-openwebui-user-email": "patrick.direction@axonix.ch"}) == "plain_identity_refused"
    assert code(mint(), **{"x-openwebui-user-role": "admin"}) == "plain_identity_refused"
    with pytest.raises(AuthError) as exc:  # the service key still comes first
        authenticate(Headers({HEADER: mint()}), cfg(), secrets())
    assert exc.value.code == "invalid_api_key"


def test_check_user_jwt_returns_the_claims() -> None:
    assert check_user_jwt(mint(), SECRET, 30)["email"] == EMAIL


# ----------------------------------------------------------------------------- configuration


def test_secret_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OWUI_JWT", f" {SECRET} ")
    assert Secrets.from_config(ApiConfig(api_key=KEY, user_jwt_secret_env="OWUI_JWT")).user_jwt_secret == SECRET
    with pytest.raises(ConfigError, match=r"api\.user_jwt_secret\.env: environment variable NOT_SET_ANYWHERE is not set"):
        Secrets.from_config(ApiConfig(api_key=KEY, user_jwt_secret_env="NOT_SET_ANYWHERE"))
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        Secrets.from_config(ApiConfig(api_key=KEY, user_jwt_secret="short"))
    with pytest.raises(ValidationError, match="not both"):
        ApiConfig(api_key=KEY, user_jwt_secret=SECRET, user_jwt_secret_env="OWUI_JWT")
    with pytest.raises(ValidationError, match="set one of them"):
        ApiConfig(api_key=KEY, user_jwt_secret=SECRET, signing_secret="s")
    with pytest.raises(ValidationError, match="distinct"):
        ApiConfig(api_key=KEY, user_jwt_header="X-OpenWebUI-User-Email")


# ----------------------------------------------------------------------------- over HTTP


class _Service:
    """Refuses every question, recording who asked."""

    def __init__(self) -> None:
        self.store, self.directory, self.asked = None, None, []  # type: ignore[var-annotated]

    def ask(self, question: str, user: str, *, asked_by: str | None = None) -> Answer:
        self.asked.append(user)
        return Answer(REFUSAL, REFUSAL, (), True, ("refus",), (), "non_requise", True)

    def stream(self, question: str, user: str, *, asked_by: str | None = None) -> Iterator[str | Answer]:
        yield REFUSAL
        yield self.ask(question, user, asked_by=asked_by)


def test_over_http_forged_tokens_get_401_and_a_valid_one_answers_as_its_user() -> None:
    svc = _Service()
    settings = load_settings(None, api={"api_key": KEY, "user_jwt_secret": SECRET})
    body = {"model": "ancre", "messages": [{"role": "user", "content": "Quel est le forfait ?"}]}
    now = int(time.time())
    forged = [mint(secret="another-secret-of-at-least-32-bytes!!"), mint(iat=now - 400, exp=now - 60),
              f"{b64({'alg': 'none'})}.{b64(claims())}.", mint(algorithm="HS512")]
    with TestClient(create_app(svc, settings), raise_server_exceptions=False) as c:
        for token in forged:
            r = c.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}", HEADER: token})
            assert r.status_code == 401, r.text
            assert r.json()["error"]["code"] in ("invalid_user_jwt", "expired_user_jwt")
        r = c.post("/v1/chat/completions", json=body,
                   headers={"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": EMAIL})
        assert r.status_code == 401 and r.json()["error"]["code"] == "plain_identity_refused"
        assert svc.asked == []
        r = c.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}", HEADER: mint()})
        assert r.status_code == 200, r.text
        r = c.post("/query", json={"question": "q"}, headers={"Authorization": f"Bearer {KEY}", HEADER: mint()})
        assert r.status_code == 200, r.text
    assert svc.asked == [EMAIL, EMAIL]
