"""Every configuration error is one line that names the key (issue 45), for ``ancre check``,
``sync``, ``search``, ``serve`` and ``daemon``.

The keys are found from the settings models (:mod:`ancre.settings.locations`: every path key
carries a :class:`PathRole`, every URL key a :class:`UrlKey`), never from a hand list; each is
given, in a configuration where its table is live (a small base table per model variant:
:data:`BASES`, which must cover every variant that has such a key):

- a path it can't use (a file that does not exist, a folder under a regular file): ``check``
  fails with a line naming it, the other commands stop at once with ``error: <key>: …``
  (secrets given as ``{ file = … }`` are read where they are used: a command that does not use
  one runs, one that does names it);
- a URL that is not one (``check`` and every other command: ``error: invalid configuration:
  <key>: '…' is not a URL …``);
- a URL whose host does not answer (a closed port on 127.0.0.1): ``check`` fails with a line
  naming it, ``sync`` and ``search`` either work (the key is not used there) or say which key.

``serve`` and ``daemon`` are run in this process up to the point where they would open the index
(``Runtime`` is stubbed to stop there): everything they check before starting is exercised —
their paths and every secret they will use (the daemon leaves the API's to the API). A running
daemon that can't reach a server says so in one log line naming the key
(:func:`test_the_daemon_names_an_unreachable_server_in_one_line`).
"""

from __future__ import annotations

import copy
import logging
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import numpy as np
import pytest
import tomli_w
from pydantic import BaseModel
from support.corpus import CORPUS
from support.fake_microsoft import FakeMicrosoft
from support.httpserver import ScriptedServer
from typer.testing import CliRunner

from ancre.app.cli import app
from ancre.app.runtime import Runtime
from ancre.config import Settings
from ancre.connectors.registry import REGISTRY
from ancre.settings.locations import PathRole, UrlKey, model_keys

runner = CliRunner()
COMMANDS = ("check", "sync", "search", "serve", "daemon")


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


CLOSED = _closed_port()


def _embed(req: Any) -> tuple[int, dict[str, Any]]:
    vecs = []
    for text in req.json["input"]:
        v = np.frombuffer(text.encode("utf-8")[:8].ljust(8, b"\0"), dtype=np.uint8).astype(np.float32) + 1
        vecs.append((v / np.linalg.norm(v)).tolist())
    return 200, {"model": req.json["model"], "embeddings": vecs}


def _openai_embed(req: Any) -> tuple[int, dict[str, Any]]:
    _, body = _embed(type("R", (), {"json": {"input": req.json["input"], "model": "m"}})())
    return 200, {"data": [{"index": i, "embedding": e} for i, e in enumerate(body["embeddings"])]}


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        s.route("POST", "/api/embed", _embed)
        s.route("POST", "/v1/embeddings", _openai_embed)
        s.route("GET", "/api/version", (200, {"version": "0.12.0"}))
        s.route("POST", "/api/chat", (200, {"model": "m", "message": {"role": "assistant", "content": "OK"}, "done": True}))
        yield s


@pytest.fixture(scope="module")
def ms() -> Iterator[FakeMicrosoft]:
    with FakeMicrosoft.axonix() as fake:
        yield fake


def _sharepoint(ms: FakeMicrosoft | None) -> dict[str, Any]:
    if ms is None:
        return {}
    cert = ms.certificate
    return {"tenant_id": ms.tenant_id, "client_id": ms.client_id, "certificate_path": str(cert.key_pem_path),
            "certificate_thumbprint": cert.thumbprint, "authority": ms.authority, "graph_url": ms.graph_url,
            "ca_file": str(ms.ca_path), "sites": [ms.site_url("Direction")]}


def _bases(srv: str, ms: FakeMicrosoft | None = None) -> dict[str, dict[str, Any]]:
    """Per model variant (class name): the tables that make it live in the base configuration
    (the SharePoint source on the fake tenant ``ms``)."""
    dead = f"127.0.0.1:{CLOSED}"
    return {
        "Settings": {},
        "OllamaEmbedderConfig": {"embedder": {"kind": "ollama", "url": srv, "model": "m"}},
        "OpenAIEmbedderConfig": {"embedder": {"kind": "openai", "url": f"{srv}/v1", "model": "m"}},
        "QdrantStoreConfig": {"store": {"kind": "qdrant", "url": f"http://{dead}"}},
        "LocalStoreConfig": {"store": {"kind": "local"}},
        "FileDirectoryConfig": {},
        "LdapDirectoryConfig": {"directory": {"kind": "ldap", "url": f"ldap://{dead}", "base_dn": "DC=axonix,DC=ch",
                                              "timeout_s": 2}},
        "LlmConfig": {"llm": {"kind": "openai", "url": srv, "model": "m"}},
        "JudgeConfig": {"llm": {"kind": "ollama", "url": srv, "model": "m"}, "judge": {"enabled": True, "url": srv}},
        "AuditConfig": {}, "DaemonConfig": {}, "ApiConfig": {"api": {"api_key": "f3b1c9e27d8a4c6b9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b"}},
        "FolderSourceConfig": {},
        "SmbSourceConfig": {"sources": [{"id": "s", "kind": "smb", "server": "127.0.0.1", "port": CLOSED, "share": "x",
                                         "username": "u", "password": "p", "timeout_s": 2}]},
        "SharePointSourceConfig": {"sources": [{"id": "sp", "kind": "sharepoint", "timeout_s": 2, "max_retries": 0,
                                                **_sharepoint(ms)}]},
    }


def _variants(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arm in get_args(annotation) for m in _variants(arm)] if get_origin(annotation) else []


def keys_of(kind: type) -> list[tuple[str, str, Any]]:
    """``(variant class name, dotted key, marker)`` of every key of ``kind`` (a path role or a URL
    rule) in :class:`Settings`, each top-level table's variants and each source kind."""
    out = []
    for name, field in Settings.model_fields.items():
        if name == "sources":
            continue
        marker = next((x for x in field.metadata if isinstance(x, kind)), None)
        if marker is not None:
            out.append(("Settings", name, marker))
        for variant in _variants(field.annotation):
            out += [(variant.__name__, f"{name}.{k}", m) for k, m in model_keys(variant, kind)]
    for entry in REGISTRY.values():
        out += [(entry.config.__name__, f"sources.0.{k}", m) for k, m in model_keys(entry.config, kind)]
    return out


PATH_KEYS = keys_of(PathRole)
URL_KEYS = keys_of(UrlKey)


def test_the_sweep_covers_every_variant_and_finds_the_known_keys() -> None:
    variants = {v for v, _, _ in PATH_KEYS + URL_KEYS}
    assert variants <= set(_bases("http://x")), variants - set(_bases("http://x"))
    keys = {k for _, k, _ in PATH_KEYS}
    assert {"data_dir", "directory.ca_file", "directory.path", "sources.0.acl_manifest", "sources.0.certificate_path",
            "audit.chain_key_file", "api.api_key.file", "sources.0.password.file"} <= keys
    assert {"directory.url", "directory.urls", "embedder.url", "llm.url", "judge.url", "store.url",
            "sources.0.graph_url", "sources.0.sites"} <= {k for _, k, _ in URL_KEYS}


def test_every_path_field_has_a_role() -> None:
    """A new ``Path`` key without a :class:`PathRole` would escape the sweep and the checks."""
    missing = []
    for model in _all_models():
        for name, f in model.model_fields.items():
            if Path in (f.annotation, *get_args(f.annotation)) and not any(isinstance(x, PathRole) for x in f.metadata):
                missing.append(f"{model.__name__}.{name}")
    assert not missing


def test_every_url_looking_field_has_a_url_rule() -> None:
    missing = []
    for model in _all_models():
        for name, f in model.model_fields.items():
            if re.search(r"(^|_)(url|urls|authority|sites)$", name) and not any(isinstance(x, UrlKey) for x in f.metadata):
                missing.append(f"{model.__name__}.{name}")
    assert not missing


def _all_models() -> set[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    stack: list[type[BaseModel]] = [Settings, *(e.config for e in REGISTRY.values())]
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        stack += [v for f in m.model_fields.values() for v in _variants(f.annotation)]
    return seen


# --- configurations --------------------------------------------------------------------------------


@pytest.fixture()
def base(tmp_path: Path, srv: ScriptedServer) -> dict[str, Any]:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "note.txt").write_text("note de service sur les congés", encoding="utf-8")
    return {
        "data_dir": str(tmp_path / "data"),
        "embedder": {"kind": "ollama", "url": srv.url, "model": "m"},
        "directory": {"kind": "file", "path": str(CORPUS / "directory.json")},
        "sources": [{"id": "t", "root": str(tree), "principals": ["Everyone"]}],
    }


_FIXUPS: dict[str, tuple[str, ...]] = {
    "sources.0.pfx_path": ("certificate_path", "certificate_thumbprint"),
    "sources.0.client_secret.file": ("certificate_path", "certificate_thumbprint"),
}
"""Keys removed from the source when this key is set (a SharePoint source has exactly one credential)."""


def _with(raw: dict[str, Any], variant: str, key: str, value: Any, srv: str, tmp: Path,
          ms: FakeMicrosoft) -> dict[str, Any]:
    """``raw`` with ``variant``'s base tables and ``key`` set to ``value`` (a secret's ``file``
    as ``{ file = … }``; the SharePoint credential keys swapped as the model requires)."""
    out = copy.deepcopy(raw)
    for table, body in _bases(srv, ms)[variant].items():
        replace = table == "sources" or "kind" in body  # another variant: its own table
        out[table] = copy.deepcopy(body) if replace else {**out.get(table, {}), **body}
    parts = key.split(".")
    node: Any = out
    for p in parts[:-1]:
        if isinstance(node, list):
            node = node[int(p)]
            continue
        if not isinstance(node.get(p), dict | list):
            node[p] = {}  # a secret given as its value becomes { file = … }
        node = node[p]
    node[parts[-1]] = value
    for k in _FIXUPS.get(key, ()):
        out["sources"][0].pop(k, None)
    if key == "sources.0.pfx_passphrase.file":
        pfx = tmp / "app.pfx"
        pfx.write_bytes(b"not really a pfx")
        out["sources"][0].update(pfx_path=str(pfx))
        for k in ("certificate_path", "certificate_thumbprint"):
            out["sources"][0].pop(k, None)
    return out


def _write(tmp: Path, raw: dict[str, Any]) -> Path:
    cfg = tmp / "ancre.toml"
    cfg.write_text(tomli_w.dumps(raw), encoding="utf-8")
    return cfg


class Reached(Exception):
    """``serve`` / ``daemon`` got as far as opening the index: nothing before stopped them."""


@pytest.fixture()
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run one command in this process; ``serve`` and ``daemon`` stop where they would open the
    index (:class:`Reached`). Restores the root logger the daemon's logging set-up replaces."""

    def stop(self: Runtime, settings: Any) -> None:
        raise Reached

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level

    def run(command: str, cfg: Path) -> tuple[int | None, str]:
        args = {"search": ["search", "congés", "--as", "alice"]}.get(command, [command])
        with monkeypatch.context() as m:
            if command in ("serve", "daemon"):
                m.setattr(Runtime, "__init__", stop)
            try:
                res = runner.invoke(app, [*args, "--config", str(cfg)], catch_exceptions=False)
            except Reached:
                return None, ""
            finally:
                root.handlers[:], root.level = handlers, level
        return res.exit_code, " ".join(res.output.split())

    yield run


def _names(out: str, key: str) -> bool:
    """Whether ``out`` names ``key`` (a source's key as ``sources.0.x`` or ``sources.<id>.x``)."""
    m = re.match(r"sources\.0\.(.+)", key)
    pattern = rf"sources\.(0|\w+)\.{re.escape(m.group(1))}" if m else re.escape(key)
    return re.search(rf"(^|[\s'(]){pattern}\b", out) is not None


def _bad_path(role: PathRole, tmp: Path) -> str:
    if role in (PathRole.READ, PathRole.SECRET, PathRole.TREE, PathRole.PEER):
        return str(tmp / "missing" / "x.pem")
    blocker = tmp / "a-file"
    blocker.write_text("x", encoding="utf-8")
    return str(blocker / "sub")  # can't be created: its parent is a regular file


@pytest.mark.parametrize(("variant", "key", "role"), PATH_KEYS, ids=[f"{k}[{v}]" for v, k, _ in PATH_KEYS])
def test_a_path_key_that_cannot_be_used_is_one_line_naming_it(
    variant: str, key: str, role: PathRole, base: dict[str, Any], srv: ScriptedServer, tmp_path: Path, invoke: Any,
    ms: FakeMicrosoft,
) -> None:
    bad = _bad_path(role, tmp_path)
    cfg = _write(tmp_path, _with(base, variant, key, [bad] if key.endswith("_files") else bad, srv.url, tmp_path, ms))
    for command in COMMANDS:
        code, out = invoke(command, cfg)
        if role is PathRole.TREE:  # an outage of the source, never a configuration error
            if command == "check":
                assert code == 1 and "FAIL source t" in out and "missing" in out, out
            continue
        if command == "check":
            assert code in (1, 2) and _names(out, key), (command, out)
            assert "Traceback" not in out
        elif role is PathRole.SECRET and command in ("serve", "daemon"):  # every secret read at start…
            if command == "daemon" and key.startswith("api."):  # …but the API's, which the daemon never reads
                assert code is None, out
            else:
                assert code == 2 and out.startswith("error: ") and _names(out, key), (command, out)
        elif role in (PathRole.SECRET, PathRole.PEER):  # used only by what needs it, which names it
            assert code in (0, 1, 2), (command, out)
            assert code == 0 or _names(out, key), (command, out)
        else:
            assert code == 2 and out.startswith("error: ") and _names(out, key), (command, out)


@pytest.mark.parametrize(("variant", "key", "rule"), URL_KEYS, ids=[f"{k}[{v}]" for v, k, _ in URL_KEYS])
def test_a_url_key_that_is_not_a_url_is_one_line_naming_it(
    variant: str, key: str, rule: UrlKey, base: dict[str, Any], srv: ScriptedServer, tmp_path: Path, invoke: Any,
    ms: FakeMicrosoft,
) -> None:
    bad = "ldaps//dc1.axonix.ch" if "ldap" in rule.schemes else "htps://srv"
    cfg = _write(tmp_path, _with(base, variant, key, [bad] if key.endswith(("urls", "sites")) else bad, srv.url, tmp_path, ms))
    for command in COMMANDS:
        code, out = invoke(command, cfg)
        assert code == 2 and out.startswith("error: invalid configuration: "), (command, out)
        assert _names(out, key) and "is not a URL" in out, (command, out)


@pytest.mark.parametrize(("variant", "key", "rule"), URL_KEYS, ids=[f"{k}[{v}]" for v, k, _ in URL_KEYS])
def test_a_url_key_whose_host_does_not_answer_is_named(
    variant: str, key: str, rule: UrlKey, base: dict[str, Any], srv: ScriptedServer, tmp_path: Path, invoke: Any,
    ms: FakeMicrosoft,
) -> None:
    scheme = rule.schemes[-1]
    dead = f"{scheme}://127.0.0.1:{CLOSED}" + ("/sites/x" if key.endswith("sites") else "")
    cfg = _write(tmp_path, _with(base, variant, key, [dead] if key.endswith(("urls", "sites")) else dead, srv.url, tmp_path, ms))
    code, out = invoke("check", cfg)
    assert code == 1 and "FAIL" in out and _names(out, key), out
    for command in ("sync", "search"):
        code, out = invoke(command, cfg)
        assert "Traceback" not in out
        assert code == 0 or _names(out, key), (command, out)


def test_the_daemon_names_an_unreachable_server_in_one_line(tmp_path: Path) -> None:
    """``ancre daemon`` with its embedding server down: when the model's dimension must be asked
    of it, the daemon can't open the index and stops at once with one line naming the key
    (systemd starts it again); when ``embedder.dim`` is set, it runs on, and each pass that fails
    says which key to check in one log line — never a traceback."""
    from support.daemon_proc import DaemonProc, write_daemon_config

    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a.txt").write_text("note de service", encoding="utf-8")
    body = f'kind = "ollama"\nurl = "http://127.0.0.1:{CLOSED}"\nretries = 0'
    cfg = write_daemon_config(tmp_path, embedder=body, daemon={"log_format": "text"})
    d = DaemonProc(cfg).start()
    assert d.wait_exit(60) == 2
    text = " ".join(d.log_text().split())
    assert text.startswith("error: ") and "(embedder.url)" in text and "Traceback" not in text, text

    cfg = write_daemon_config(tmp_path, embedder=body + "\ndim = 64", daemon={"log_format": "text"})
    d = DaemonProc(cfg).start()
    try:
        d.wait_for(lambda: "sync task of t failed" in d.log_text(), "the failed pass's line", timeout=120)
        line = next(ln for ln in d.log_text().splitlines() if "sync task of t failed" in ln)
        assert "(embedder.url)" in line and f"127.0.0.1:{CLOSED}" in line, line
        assert "Traceback" not in d.log_text()
        assert d.stop(timeout=30)[0] == 0
    finally:
        d.kill()
