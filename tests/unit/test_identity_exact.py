"""Identities are taken as they are, or refused (issue 40): an e-mail carrying whitespace or an
invisible character is never stripped into a real account.

Open WebUI 0.12 lets an account ``"alice.martin@axonix.ch\\u00a0"`` exist next to alice's (its
signup's address check is an unanchored ``[^@]+@[^@]+\\.[^@]+``); ancre must answer it 401, never
with alice's documents. The characters tried are computed from the standard library's Unicode
database, not from ancre's list: every code point whose category is ``Cc`` or ``Cf`` or that
``str.isspace()`` calls whitespace (a superset of Unicode's ``White_Space`` property).
"""

from __future__ import annotations

import logging
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import jwt
import pytest
from starlette.testclient import TestClient

from ancre.acl.directory import FileDirectory
from ancre.acl.providers import directory_resolver
from ancre.api.app import create_app
from ancre.api.identity import AuthError, check_identity_text
from ancre.config import load_settings
from ancre.models import WHITE_SPACE, identity_defect, visible_identity
from ancre.query.answer import Answer

ROOT = Path(__file__).resolve().parents[2]
DIRECTORY = ROOT / "examples" / "axonix" / "directory.json"
KEY = "unit-key"
JWT_SECRET = "j" * 40
ACCOUNTS = {"alice": "alice.martin@axonix.ch", "bruno": "bruno.favre@axonix.ch", "chloe": "chloe.rey@axonix.ch",
            "david": "david.meier@axonix.ch", "emma": "emma.blanc@axonix.ch"}

REFERENCE = tuple(
    chr(cp) for cp in range(sys.maxunicode + 1)
    if unicodedata.category(chr(cp)) in ("Cc", "Cf") or chr(cp).isspace()
)
"""Every code point with category Cc or Cf, or whitespace by the standard library's definition."""


def placements(c: str, address: str) -> dict[str, str]:
    """``c`` before, after and inside ``address`` (in the local part, around the ``@``, in the domain)."""
    local, _, domain = address.partition("@")
    return {"before": c + address, "after": address + c, "in-local": local[:3] + c + local[3:] + "@" + domain,
            "before-at": local + c + "@" + domain, "in-domain": local + "@" + domain[:4] + c + domain[4:]}


def test_the_reference_set_is_what_identity_defect_refuses() -> None:
    """ancre's own White_Space table agrees with the standard library: every member is whitespace
    or a control character there, and every stdlib whitespace character is refused."""
    assert len(REFERENCE) > 200  # Cc (65) + Cf (>150) + the spaces
    for c in WHITE_SPACE:
        assert c.isspace() and (unicodedata.category(c) in ("Cc", "Zs", "Zl", "Zp")), visible_identity(c)
    for c in REFERENCE:
        assert identity_defect(c) is not None and identity_defect("a" + c + "b") is not None
        assert identity_defect("a" + c + "b", inner_space=True) is not None or c == " "
        assert identity_defect(f"a{c}") is not None and identity_defect(f"{c}a") is not None
    assert identity_defect("alice.martin@axonix.ch") is None
    assert identity_defect("john smith", inner_space=True) is None  # a sAMAccountName may hold a space inside
    assert identity_defect(" john", inner_space=True) == "U+0020 (SPACE) at position 1"


class Recorder:
    """The query service, recording who it was asked for and the principals that user would hold
    (the real resolver over the Axonix directory file)."""

    def __init__(self) -> None:
        self.resolver = directory_resolver(FileDirectory(DIRECTORY))
        self.asked: list[tuple[str, frozenset[str]]] = []

    def points(self) -> dict[str, int]:
        return {"documents": 1}

    def probe_directory(self) -> None:
        return None

    def ask(self, question: str, user: str, **_: Any) -> Answer:
        self.asked.append((user, self.resolver.principals(user)))
        return Answer(reponse="ok", raw="ok", sources=(), ancree=True, controles=(), invented=(),
                      verification="non_requise", extractive=True)

    def stream(self, question: str, user: str, **kw: Any) -> Any:
        yield self.ask(question, user, **kw)


def _client(svc: Recorder, **api: Any) -> TestClient:
    settings = load_settings(None, api={"api_key": KEY, **api})
    return TestClient(create_app(svc, settings), raise_server_exceptions=False)


def _jwt(email: str, sub: str = "owui-user-1") -> str:
    """What Open WebUI 0.12 signs (``_mint_forward_user_jwt``): HS256, iss open-webui, 5 minutes."""
    now = int(time.time())
    claims = {"sub": sub, "email": email, "name": "X", "role": "user", "iss": "open-webui", "iat": now, "exp": now + 300}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


def _post(c: TestClient, path: str, headers: list[tuple[bytes, bytes]]) -> Any:
    body = ({"model": "ancre", "messages": [{"role": "user", "content": "Quel est le forfait ?"}]}
            if path.startswith("/v1") else {"question": "Quel est le forfait ?"})
    return c.post(path, json=body, headers=headers)


def test_every_invisible_character_anywhere_in_the_jwt_email_is_refused() -> None:
    """Signed JWT (the mode the README recommends): each reference character at five places in a
    real account's address → 401 ``invalid_identity_chars``; the service is never asked, so no
    account's principals are used. The clean address is answered (the test can fail)."""
    svc = Recorder()
    with _client(svc, user_jwt_secret=JWT_SECRET) as c:
        for i, ch in enumerate(REFERENCE):
            address = list(ACCOUNTS.values())[i % len(ACCOUNTS)]
            for where, email in placements(ch, address).items():
                h = [(b"authorization", f"Bearer {KEY}".encode()), (b"x-openwebui-user-jwt", _jwt(email).encode())]
                path = "/query" if i % 2 else "/v1/chat/completions"
                r = _post(c, path, h)
                assert r.status_code == 401, (visible_identity(email), where, r.status_code)
                assert r.json()["error"]["code"] == "invalid_identity_chars", visible_identity(email)
        assert svc.asked == []
        ok = _post(c, "/query", [(b"authorization", f"Bearer {KEY}".encode()),
                                 (b"x-openwebui-user-jwt", _jwt(ACCOUNTS["alice"]).encode())])
    assert ok.status_code == 200 and svc.asked[0][0] == ACCOUNTS["alice"] and svc.asked[0][1]


def test_every_invisible_character_anywhere_in_the_email_header_is_refused() -> None:
    """The plain ``X-OpenWebUI-User-Email`` header, its UTF-8 bytes as the ASGI server passes them
    (what reaches ancre; HTTP's own parser drops spaces and tabs at the ends before that, RFC 9110
    §5.5 — README "Open WebUI"): 401 every time, the service never asked."""
    svc = Recorder()
    with _client(svc) as c:
        for i, ch in enumerate(REFERENCE):
            address = list(ACCOUNTS.values())[i % len(ACCOUNTS)]
            for where, email in placements(ch, address).items():
                h = [(b"authorization", f"Bearer {KEY}".encode()), (b"x-openwebui-user-email", email.encode()),
                     (b"x-openwebui-user-id", b"owui-user-2")]
                r = _post(c, "/v1/chat/completions" if i % 2 else "/query", h)
                assert r.status_code == 401, (visible_identity(email), where)
                assert r.json()["error"]["code"] == "invalid_identity_chars"
        assert svc.asked == []


def test_the_directory_never_strips_a_name_into_an_account() -> None:
    """Below the API (CLI ``--as``, the control socket, a library caller): P(name) is empty for
    every reference character around or inside a UPN or a sAMAccountName."""
    resolver = directory_resolver(FileDirectory(DIRECTORY))
    for sam, upn in ACCOUNTS.items():
        assert resolver.principals(sam) and resolver.principals(upn)
    for i, ch in enumerate(REFERENCE):
        sam, upn = list(ACCOUNTS.items())[i % len(ACCOUNTS)]
        names = [*placements(ch, upn).values(), ch + sam, sam + ch, sam[:2] + ch + sam[2:]]
        for name in names:
            if ch == " " and name == sam[:2] + " " + sam[2:]:
                continue  # an inner space is a different (unknown) name, not a stripped one
            assert resolver.principals(name) == frozenset(), visible_identity(name)
            assert resolver.origins(name) == {}


def test_the_refusal_is_french_for_staff_names_the_character_and_logs_the_user_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Staff read that their account is unknown and why; the admin gets one warning naming the
    Open WebUI user id and the character; /query keeps the English detail."""
    svc = Recorder()
    nbsp = ACCOUNTS["alice"] + "\u00a0"
    h = [(b"authorization", f"Bearer {KEY}".encode()), (b"x-openwebui-user-jwt", _jwt(nbsp, "0b9c-alice-twin").encode())]
    with caplog.at_level(logging.INFO, logger="ancre.api"), _client(svc, user_jwt_secret=JWT_SECRET) as c:
        chat = _post(c, "/v1/chat/completions", h)
        query = _post(c, "/query", h)
    msg = chat.json()["error"]["message"]
    assert chat.status_code == 401 and msg.startswith("Votre compte « alice.martin@axonix.ch[U+00A0] » n'est pas "
                                                      "connu de l'annuaire de l'entreprise")
    assert "espace ou un caractère invisible" in msg and "\u00a0" not in msg
    detail = query.json()["error"]["message"]
    assert "U+00A0 (NO-BREAK SPACE) at position 23" in detail and "the user JWT's email claim" in detail
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("'0b9c-alice-twin'" in w and "U+00A0" in w for w in warnings)
    assert all("\u00a0" not in r.getMessage() for r in caplog.records)


def test_user_map_entries_are_taken_as_written() -> None:
    """A user_map e-mail with a stray NBSP is its own key (never the clean address's), and an
    entry mapping to an account name with one is refused, not stripped."""
    svc = Recorder()
    api = {"user_map": {"b.favre@axonix.com\u00a0": "bruno", "a.martin@axonix.com": "alice\u200b"}}
    h = [(b"authorization", f"Bearer {KEY}".encode())]
    with _client(svc, **api) as c:
        stray = _post(c, "/query", [*h, (b"x-openwebui-user-email", b"b.favre@axonix.com")])
        mapped = _post(c, "/query", [*h, (b"x-openwebui-user-email", b"a.martin@axonix.com")])
    assert stray.status_code == 200 and svc.asked == [("b.favre@axonix.com", frozenset())]  # not bruno
    assert mapped.status_code == 401 and mapped.json()["error"]["code"] == "invalid_identity_chars"
    assert "api.user_map" in mapped.json()["error"]["message"]


def test_check_identity_text_messages() -> None:
    with pytest.raises(AuthError) as e:
        check_identity_text("\talice@x.ch", "the X header", user_id="u7")
    assert e.value.code == "invalid_identity_chars" and e.value.user_id == "u7"
    assert "U+0009 (CHARACTER TABULATION) at position 1" in str(e.value) and "\t" not in str(e.value)
    assert check_identity_text("Ale\u0301xia@x.ch", "x") == "Aléxia@x.ch"  # NFC, nothing else
