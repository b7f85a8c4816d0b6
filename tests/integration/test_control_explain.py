"""``acl explain`` through the control API (:mod:`ancre.api.control`) over a real runtime on the
Axonix corpus (folder source, ACL manifest, file directory): bad paths get a 4xx with the CLI's
own message, and a non-admin explaining as himself cannot tell whether a file he may not read
exists. The caller's Unix identity is put in the ASGI state as the control server does from
``SO_PEERCRED``; the directory knows a user named like the Unix account ``nobody``."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.corpus import copy_corpus, write_config

from ancre.api.control import PeerCred, create_control_app
from ancre.app.control import control_parts
from ancre.app.explain import explain_lines
from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.errors import AncreError

NOBODY = pwd.getpwnam("nobody")
RESTRICTED = "DIRECTION/03_Contrat_Maintenance_Etude_Rochat.docx"  # GG_Direction only
ABSENT = "DIRECTION/Budget_2027_confidentiel.docx"
READABLE = "CLIENTS/21_Contrat_Maintenance_Baumont_Industries.docx"  # GG_Techniciens may read it


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    root = copy_corpus(tmp_path_factory.mktemp("explain"))
    directory = json.loads((root / "directory.json").read_text(encoding="utf-8"))
    directory["users"]["nobody"] = {"sid": directory["domain_sid"] + "-1299", "upn": "nobody@axonix.ch",
                                    "groups": ["GG_Techniciens"]}
    (root / "directory.json").write_text(json.dumps(directory), encoding="utf-8")
    with Runtime(load_settings(write_config(root))) as runtime:
        yield runtime


def client(rt: Runtime, peer: PeerCred) -> TestClient:
    app = create_control_app(control_parts(rt, None))

    async def with_peer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope["state"] = {**scope.get("state", {}), "peer": peer}
        await app(scope, receive, send)

    return TestClient(with_peer, raise_server_exceptions=False)  # type: ignore[arg-type]


def cli_message(rt: Runtime, path: str, user: str) -> str:
    """What ``ancre acl explain`` in-process says of ``path`` (after ``error:``)."""
    with pytest.raises(AncreError) as e:
        explain_lines(rt, path, user, None)
    return str(e.value)


@pytest.mark.parametrize("path", ["../../etc/passwd", "CLIENTS/../../x.docx", "CLIENTS/a\x00b.docx",
                                  "CLIENTS/\ud800.docx", "/etc/shadow"],
                         ids=["dotdot", "climbs", "nul", "surrogate", "absolute"])
def test_bad_paths_are_4xx_with_the_cli_message(rt: Runtime, path: str) -> None:
    r = client(rt, PeerCred(1, 0, 0)).post(
        "/v1/acl/explain", content=json.dumps({"path": path, "user": "alice"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert r.json()["error"] == cli_message(rt, path, "alice")


@pytest.mark.skipif(os.getuid() == NOBODY.pw_uid, reason="runs as nobody")
def test_a_non_admin_cannot_tell_whether_a_file_he_may_not_read_exists(rt: Runtime) -> None:
    as_nobody = client(rt, PeerCred(1, NOBODY.pw_uid, NOBODY.pw_gid))

    def lines(path: str) -> list[str]:
        r = as_nobody.post("/v1/acl/explain", json={"path": path, "user": "nobody"})
        assert r.status_code == 200, r.text
        return r.json()["lines"]

    restricted, absent = lines(RESTRICTED), lines(ABSENT)
    assert [x.replace(RESTRICTED, "<path>") for x in restricted] == [x.replace(ABSENT, "<path>") for x in absent]
    assert not any("GG_Direction" in x or "NOT READABLE" in x for x in restricted)
    readable = "\n".join(lines(READABLE))
    assert "result: READABLE" in readable and "GG_Techniciens" in readable
    # an admin (here root) still gets the whole explanation of any path, for anyone
    r = client(rt, PeerCred(1, 0, 0)).post("/v1/acl/explain", json={"path": RESTRICTED, "user": "nobody"})
    assert "NOT READABLE" in "\n".join(r.json()["lines"])
