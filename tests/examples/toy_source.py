"""A toy source kind, ``toy``: the example of docs/ARCHITECTURE.md "Adding a source".

The whole kind is this module plus one registry line (:data:`REGISTERED`, added to
``_BUILT_IN`` of :mod:`ancre.connectors.registry` in-tree, or through the ``ancre.sources`` entry point as
``tests/examples/test_toy_source.py`` does). It serves documents from a WebDAV-like HTTP store
(:class:`ToyStore`, on 127.0.0.1): ``GET /index.json`` → ``{"files": {path: {"size", "mtime",
"etag"}}}``, ``GET /files/<path>`` → the bytes, 503 while the store is down. The connector
implements :class:`~ancre.connectors.base.Connector` only — no ``watch()``, no change feed: the
daemon detects its changes with the snapshot-diff poller (:mod:`ancre.connectors.poller`).
Everyone listed in ``readers`` may read every document (no readers: nobody, fail closed).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

import httpx

from ancre.connectors.base import CollectionFromConfig, Listing, SourceContext, SourceKind
from ancre.connectors.registry import RegisteredKind
from ancre.errors import SourceUnavailableError
from ancre.models import Acl, SourceItem, nfc
from ancre.settings.sources import SourceSettings


class ToySourceConfig(SourceSettings):
    """A ``kind = "toy"`` source: the HTTP store at ``url``, readable by ``readers``."""

    kind: Literal["toy"]
    """``toy``: the example source of docs/ARCHITECTURE.md."""
    url: str
    """Base URL of the store (``http://127.0.0.1:<port>``)."""
    readers: tuple[str, ...] = ()
    """Principals (``sid:…``) allowed to read every document; empty = nobody."""


class ToyConnector(CollectionFromConfig[ToySourceConfig]):
    """The toy source's :class:`~ancre.connectors.base.Connector` (see the module doc)."""

    def __init__(self, cfg: ToySourceConfig) -> None:
        self.cfg = cfg
        self._http = httpx.Client(base_url=cfg.url, timeout=10.0)

    @property
    def source_id(self) -> str:
        return self.cfg.id

    @property
    def collection(self) -> str:
        return self.cfg.collection

    def _get(self, path: str) -> httpx.Response:
        try:
            r = self._http.get(path)
        except httpx.TransportError as e:
            raise SourceUnavailableError(f"toy store {self.cfg.url}: {e}") from e
        if r.status_code >= 500:
            raise SourceUnavailableError(f"toy store {self.cfg.url}: HTTP {r.status_code}")
        return r

    def _index(self) -> dict[str, SourceItem]:
        """The store's files by NFC path; each item's ``native_id`` is the path as the store
        spells it (a name written NFD stays NFD there: content is fetched by that spelling)."""
        files = self._get("/index.json").json()["files"]
        return {
            nfc(p): SourceItem(self.cfg.id, p, nfc(p), int(f["size"]), float(f["mtime"]), str(f["etag"]))
            for p, f in sorted(files.items())
        }

    def list_items(self) -> Listing:
        return Listing(tuple(self._index().values()))

    def get_item(self, path: str) -> SourceItem | None:
        return self._index().get(path)

    def fetch_content(self, item: SourceItem) -> bytes:
        r = self._get("/files/" + urllib.parse.quote(item.native_id))
        if r.status_code == 404:
            raise FileNotFoundError(item.path)
        r.raise_for_status()
        return r.content

    def _acl(self) -> Acl:
        return Acl(frozenset(self.cfg.readers)) if self.cfg.readers else Acl.nobody("no readers configured")

    def fetch_acl(self, item: SourceItem) -> Acl:
        return self._acl()

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        index = self._index()
        return {p: self._acl() for p in paths if p in index}

    def location(self, item: SourceItem) -> str:
        folder = item.path.rpartition("/")[0]
        return f"{self.cfg.url}/files/{folder}/" if folder else f"{self.cfg.url}/files/"

    def close(self) -> None:
        self._http.close()


def build(cfg: ToySourceConfig, ctx: SourceContext) -> ToyConnector:
    """The connector of one configured toy source."""
    return ToyConnector(cfg)


KIND = SourceKind("toy", ToySourceConfig, build)
"""The ``toy`` source kind (what :data:`REGISTERED` loads)."""

REGISTERED = RegisteredKind("toy", ToySourceConfig, "toy_source")
"""The one registry line of the kind."""


class ToyStore:
    """The HTTP store a toy source reads, on ``127.0.0.1:<port>``: ``files`` (path → bytes) is
    edited with :meth:`put` / :meth:`delete`; :attr:`down` makes every request answer 503."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, float]] = {}
        self.down = False
        self._mu = threading.Lock()
        store = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                body, status = store._answer(urllib.parse.unquote(self.path))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _answer(self, path: str) -> tuple[bytes, int]:
        with self._mu:
            if self.down:
                return b"down", 503
            if path == "/index.json":
                index = {
                    p: {"size": len(data), "mtime": mtime, "etag": hashlib.sha256(data).hexdigest()[:16]}
                    for p, (data, mtime) in self.files.items()
                }
                return json.dumps({"files": index}).encode(), 200
            if path.startswith("/files/") and path[7:] in self.files:
                return self.files[path[7:]][0], 200
            return b"not found", 404

    def put(self, path: str, data: bytes) -> None:
        with self._mu:
            self.files[path] = (data, time.time())

    def delete(self, path: str) -> None:
        with self._mu:
            del self.files[path]

    def start(self) -> ToyStore:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
