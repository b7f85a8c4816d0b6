"""A fake Microsoft tenant for tests: Entra token endpoint, Graph v1.0 and SharePoint REST, over HTTPS on loopback.

Everything is served by uvicorn (FastAPI app, one catch-all route dispatching to the handlers below)
in a background thread, bound to ``127.0.0.1`` on an ephemeral port, with a throwaway CA from
``trustme``: clients verify the server with :attr:`FakeMicrosoft.ca_path`. Real client libraries
(msal, office365-rest-python-client, httpx) talk to it unpatched.

Response shapes follow Microsoft's documentation, page by page — the pages' own JSON examples are
in :mod:`support.ms_docs` (verbatim, with the commit of the docs repository they come from), and
each shape below names its page; where a page states a rule the fake follows it
(:data:`support.ms_docs.RULES`):

- token endpoint ``POST /{tenant}/oauth2/v2.0/token`` (client credentials: ``client_secret`` or a
  ``client_assertion`` JWT signed with the app certificate, header ``x5t`` = SHA-1 thumbprint) and
  the OIDC discovery document msal reads (``/{tenant}/v2.0/.well-known/openid-configuration``);
- Graph v1.0 (prefix ``/v1.0``): ``site``, ``drive``, ``driveItem`` (``file.hashes.quickXorHash``,
  ``folder``, ``package``, ``parentReference``, ``deleted``, ``eTag``/``cTag``), ``driveItem: delta``
  (``@odata.nextLink`` / ``@odata.deltaLink``, ``410 Gone`` with ``resync*`` codes and a
  ``Location`` header, ``Prefer: deltashowsharingchanges`` → ``@microsoft.graph.sharedChanged``),
  ``permission`` ("Permission resource type", "List sharing permissions on a driveItem"): the
  *effective* permissions of an item — its own when it has unique ones, else those it inherits from
  its nearest unique folder or from the library's (the site's) role assignments — **without**
  ``inheritedFrom`` ("OneDrive for Business and SharePoint document libraries do not return the
  inheritedFrom property"); identities as ``sharePointIdentitySet`` (``user``, ``group``,
  ``siteUser`` with its claims ``loginName``, ``siteGroup`` with its site-scoped id); links as
  ``sharingLink`` (``type``, ``scope`` = ``anonymous`` / ``organization`` / ``users`` /
  ``existingAccess``, or none as in the page's own people-link example); ``expirationDateTime``
  (``0001-01-01T00:00:00Z`` = none; an expired permission stays listed),
  ``extractSensitivityLabels``, JSON batching (``POST /$batch``, at most 20 requests),
  ``user``, ``group``, ``transitiveMemberOf``, ``transitiveMembers``, ``ownedObjects``
  ("List ownedObjects"), ``owners``; errors as
  ``{"error": {"code", "message", "innerError"}}``;
- SharePoint REST (prefix ``<site server-relative URL>/_api``; a site may refuse it, 403, as a
  ``/contentstorage/`` site does): ``web``, ``web/roleassignments``,
  ``web/lists(guid'…')/roleassignments`` (or ``lists/getbyid('…')``), ``$expand=Member,RoleDefinitionBindings``
  ("Set custom permissions on a list by using the REST interface"),
  ``web/lists(guid'…')/items?$select=FileRef,HasUniqueRoleAssignments``
  ("SecurableObject.HasUniqueRoleAssignments"), ``web/sitegroups/getbyid(n)/users``, ``contextinfo``; verbose (``{"d": {"results": …}}``) or
  ``nometadata`` (``{"value": …}``) JSON per the ``Accept`` header. Tokens obtained with a client
  secret are refused there (``401 Unsupported app only token.``), as SharePoint Online does.

Usage::

    with FakeMicrosoft.axonix() as ms:
        ms.graph_url                      # "https://127.0.0.1:<port>/v1.0"
        ms.authority                      # "https://127.0.0.1:<port>" (msal authority host)
        ms.tenant_id, ms.client_id, ms.client_secret, ms.certificate (AppCertificate: PEM, PFX, thumbprint)
        ms.ca_path                        # CA bundle to verify the server
        ms.throttle(r"/permissions$", times=1, retry_after=3)
        ms.fail(r"/drives/", 503, times=2)
        ms.gone_next_delta(drive_id, "resyncChangesApplyDifferences")
        ms.expire_tokens()                # every issued token now answers 401 InvalidAuthenticationToken
        ms.clear_faults()                 # drop what is still pending
        ms.requests                       # list[LoggedRequest]; ms.answers [(method, path, status)];
                                          # ms.token_requests; ms.max_in_flight

Sites have a server-relative URL of their own (``add_site("Projets", path="/teams/Projets")``:
two sites may share a name, a subsite is ``/sites/A/Projets``). Mutators change the tenant between
passes (``add_file``, ``modify_file``, ``delete_item``, ``set_permissions``, ``break_inheritance``,
``grant``, ``add_link``, ``set_label``, ``add_user``, ``add_group``, ``refuse_rest``...).
A mutation bumps the drive's change counter so that the next delta call with an older token reports
it; permission changes are reported only when the client asks with ``Prefer:
deltashowsharingchanges`` and the change was made with ``signal=True`` (Graph misses some).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import json
import re
import secrets
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, quote, unquote, urlsplit

import anyio
import anyio.to_thread
import jwt
import quickxorhash
import trustme
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from fastapi import FastAPI, Request
from fastapi.responses import Response

from support.ms_docs import copy_of

REPO = Path(__file__).resolve().parents[2]
AXONIX = REPO / "examples" / "axonix"

# SharePoint role definitions (name -> BasePermissions Low, High), as SharePoint Online returns them.
# ViewListItems is bit 0x1 of Low: every role that reads list items has it; Limited Access has not.
ROLE_DEFINITIONS: dict[str, tuple[int, int, int]] = {
    # name: (id, low, high)
    "Full Control": (1073741829, 4294967295, 2147483647),
    "Edit": (1073741830, 1011028719, 432),
    "Contribute": (1073741827, 1011030767, 432),
    "Read": (1073741826, 138612833, 176),
    "View Only": (1073741924, 138612801, 176),
    "Limited Access": (1073741825, 134287360, 48),
}

# Graph permission "roles" of a SharePoint permission level ("Permission resource type", "Roles
# property values": read, write, owner). Limited Access alone is not a listed permission.
GRAPH_ROLE: dict[str, str | None] = {
    "Full Control": "owner", "Edit": "write", "Contribute": "write", "Read": "read", "View Only": "read",
    "Limited Access": None,
}

NO_EXPIRY = "0001-01-01T00:00:00Z"
"""``expirationDateTime`` of a permission that never expires: "DateTime.MinValue indicates there is
no expiration set for this permission" ("Permission resource type")."""

# Login-name claims SharePoint uses for Entra principals.
EVERYONE_EXCEPT_EXTERNAL = "c:0-.f|rolemanager|spo-grid-all-users/{tenant}"


def user_claim(upn: str) -> str:
    """SharePoint login name of an Entra user (``i:0#.f|membership|<upn>``)."""
    return f"i:0#.f|membership|{upn.lower()}"


def security_group_claim(group_id: str) -> str:
    """SharePoint login name of an Entra security group."""
    return f"c:0t.c|tenant|{group_id}"


def m365_group_claim(group_id: str) -> str:
    """SharePoint login name of a Microsoft 365 group (its members)."""
    return f"c:0o.c|federateddirectoryclaimprovider|{group_id}"


def quick_xor_hash(data: bytes) -> str:
    """QuickXorHash of ``data``, base64-encoded, as Graph reports it in ``file.hashes.quickXorHash``
    (algorithm published in the OneDrive API docs; computed by the ``quickxorhash`` package)."""
    h = quickxorhash.quickxorhash()
    h.update(data)
    return base64.b64encode(h.digest()).decode()


# ----------------------------------------------------------------------------- tenant model


@dataclass
class FakeUser:
    """An Entra user (``userType`` Member or Guest)."""

    id: str
    upn: str
    display_name: str
    mail: str | None = None
    user_type: str = "Member"
    sam: str | None = None
    enabled: bool = True

    def resource(self) -> dict[str, Any]:
        return {
            "@odata.type": "#microsoft.graph.user",
            "id": self.id,
            "userPrincipalName": self.upn,
            "displayName": self.display_name,
            "mail": self.mail,
            "userType": self.user_type,
            "onPremisesSamAccountName": self.sam,
            "accountEnabled": self.enabled,
        }


@dataclass
class FakeGroup:
    """An Entra group: security (``securityEnabled``) or Microsoft 365 (``groupTypes: ["Unified"]``).
    ``members`` holds user or group ids (nesting allowed)."""

    id: str
    display_name: str
    members: list[str] = field(default_factory=list)
    unified: bool = False
    sam: str | None = None
    owners: list[str] = field(default_factory=list)
    """User ids owning the group (``GET /groups/{id}/owners``, ``/users/{id}/ownedObjects``)."""

    def resource(self) -> dict[str, Any]:
        return {
            "@odata.type": "#microsoft.graph.group",
            "id": self.id,
            "displayName": self.display_name,
            "securityEnabled": not self.unified,
            "mailEnabled": self.unified,
            "groupTypes": ["Unified"] if self.unified else [],
            "onPremisesSamAccountName": self.sam,
        }

    def claim(self) -> str:
        return m365_group_claim(self.id) if self.unified else security_group_claim(self.id)

    def owners_claim(self) -> str:
        """The claim of the group's *owners* (Microsoft 365 groups: ``…|<group id>_o``)."""
        return m365_group_claim(self.id) + "_o"


@dataclass
class SiteGroup:
    """A SharePoint site group; ``members`` are login names (user claims, group claims, everyone claims)."""

    id: int
    title: str
    members: list[str] = field(default_factory=list)


@dataclass
class FakeItem:
    """A driveItem. ``permissions`` is None while the item inherits, else its own entries (without
    ids; ``[]``: unique permissions, none granted). ``kind`` "bare": an entry delta lists without any
    ``file``/``folder``/``package`` facet."""

    id: str
    name: str
    parent_id: str | None
    kind: str = "file"  # file | folder | package | root
    content: bytes = b""
    permissions: list[dict[str, Any]] | None = None
    label_id: str | None = None
    label_error: int | None = None  # e.g. 423 for a double-key-encrypted file
    deleted: bool = False
    seq: int = 0  # drive change number of the last content/name/move/delete change
    perm_seq: int = 0  # drive change number of the last signalled sharing change
    version: int = 1
    modified: str = ""


@dataclass
class FakeDrive:
    """A document library: one drive, one list."""

    id: str
    name: str
    site_id: str
    list_id: str
    root_id: str
    items: dict[str, FakeItem] = field(default_factory=dict)
    seq: int = 0
    role_assignments: list[tuple[str, list[str]]] | None = None  # None: inherits the web's


@dataclass
class FakeSite:
    """A site (or subsite) web: ``path`` is its server-relative URL (``/sites/Projets``,
    ``/teams/Projets``, ``/sites/A/Projets``); ``role_assignments`` are (login name, role names)
    pairs; ``rest_refusal``: the status SharePoint REST answers on it (403 for a site the app may
    not read over REST), ``None`` when it answers."""

    id: str
    name: str
    display_name: str
    web_id: str
    path: str = ""
    rest_refusal: int | None = None
    drives: list[FakeDrive] = field(default_factory=list)
    groups: dict[int, SiteGroup] = field(default_factory=dict)
    role_assignments: list[tuple[str, list[str]]] = field(default_factory=list)
    site_users: dict[str, int] = field(default_factory=dict)  # login name -> principal id


@dataclass(frozen=True)
class AppCertificate:
    """The app registration's certificate: private key PEM, certificate PEM, PFX (with passphrase)
    and thumbprints (hex SHA-1, as the Entra portal shows it; and SHA-256)."""

    key_pem_path: Path
    cert_pem_path: Path
    pfx_path: Path
    pfx_passphrase: str
    thumbprint: str
    thumbprint_sha256: str


@dataclass(frozen=True)
class _Index:
    children: dict[str, int]
    sizes: dict[str, int]
    depth: dict[str, int]


@dataclass(frozen=True)
class LoggedRequest:
    """One request received (``path`` without the query; ``in_batch``: a ``$batch`` sub-request)."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    in_batch: bool = False


@dataclass
class _Rule:
    pattern: re.Pattern[str]
    status: int
    times: int
    retry_after: str | None
    code: str
    method: str | None


class _Answer:
    """An internal response: status, JSON (or bytes) body, headers."""

    def __init__(self, status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = dict(headers or {})

    def encode(self) -> tuple[bytes, dict[str, str]]:
        headers = dict(self.headers)
        if isinstance(self.body, (bytes, bytearray)):
            headers.setdefault("Content-Type", "application/octet-stream")
            return bytes(self.body), headers
        if self.body is None:
            return b"", headers
        headers.setdefault("Content-Type", "application/json")
        return json.dumps(self.body).encode(), headers


def _error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> _Answer:
    body = {
        "error": {
            "code": code,
            "message": message,
            "innerError": {"date": _now_iso(), "request-id": str(uuid.uuid4()), "client-request-id": str(uuid.uuid4())},
        }
    }
    return _Answer(status, body, headers)


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _guid() -> str:
    return str(uuid.uuid4())


# ----------------------------------------------------------------------------- the fake


class FakeMicrosoft:
    """An in-memory tenant served over HTTPS on 127.0.0.1 (see the module docstring)."""

    def __init__(self, *, tenant_domain: str = "axonix.ch", page_size: int = 200, token_lifetime_s: int = 3599) -> None:
        self.tenant_domain = tenant_domain
        self.tenant_id = _guid()
        self.client_id = _guid()
        self.client_secret = "fake-secret-" + secrets.token_hex(8)
        self.page_size = page_size
        self.token_lifetime_s = token_lifetime_s
        self.latency_s = 0.0
        self.users: dict[str, FakeUser] = {}
        self.groups: dict[str, FakeGroup] = {}
        self.sites: dict[str, FakeSite] = {}
        self.drives: dict[str, FakeDrive] = {}
        self.labels: dict[str, str] = {}  # sensitivity label id -> name
        self.requests: list[LoggedRequest] = []
        self.token_requests: list[dict[str, str]] = []
        self.answers: list[tuple[str, str, int]] = []  # (method, path, status) of every top-level answer
        self.max_in_flight = 0
        self._in_flight = 0
        self._tokens: dict[str, tuple[float, str]] = {}  # token -> (expires at, credential kind)
        self._rules: list[_Rule] = []
        self._gone: dict[str, list[str]] = {}
        self._extra_delta: dict[str, list[dict[str, Any]]] = {}
        self._index_cache: dict[str, tuple[int, _Index]] = {}
        self._delta_cache: dict[tuple[str, int | None, bool], tuple[int, int, list[tuple[FakeItem, bool]]]] = {}
        self._lock = threading.RLock()
        self._tmp = tempfile.TemporaryDirectory(prefix="fake-ms-")
        self._tmpdir = Path(self._tmp.name)
        self.certificate = self._make_app_certificate()
        self._ca = trustme.CA()
        self.ca_path = self._tmpdir / "ca.pem"
        self._ca.cert_pem.write_to_path(str(self.ca_path))
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``https://127.0.0.1:<port>`` (also the SharePoint host of every site)."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def authority(self) -> str:
        """The authority host for msal (msal appends the tenant)."""
        return self.base_url

    @property
    def graph_url(self) -> str:
        """Graph v1.0 root, ``https://127.0.0.1:<port>/v1.0``."""
        return self.base_url + "/v1.0"

    def start(self) -> FakeMicrosoft:
        """Bind 127.0.0.1 on an ephemeral port and serve from a daemon thread (returns when ready)."""
        cert = self._ca.issue_cert("127.0.0.1", "localhost")
        chain = self._tmpdir / "server.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(chain))
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            # log_config=None, no log_level, access log on: uvicorn would otherwise reconfigure the
            # process's "uvicorn.*" loggers (levels, handlers, propagation) for every later test
            self._app(), log_config=None, ssl_certfile=str(chain), lifespan="off", access_log=True,
            timeout_keep_alive=30,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("FakeMicrosoft did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving: later requests get connection refused (the CA and app certificate files stay
        until :meth:`close`)."""
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True  # don't wait for clients' idle keep-alive connections
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._server = None

    def close(self) -> None:
        """Stop serving and delete the temporary files (CA, certificates)."""
        self.stop()
        self._tmp.cleanup()

    def __enter__(self) -> Self:
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ seeding

    @classmethod
    def axonix(cls, **kwargs: Any) -> FakeMicrosoft:
        """The Axonix tenant, started: users/groups from examples/axonix/directory.json (plus a guest
        ``ext.partner_partner.ch#EXT#@axonix.ch``), site "Direction" (only GG_Direction reads; library
        "Documents" with files from examples/axonix/share) and site "Projets" ("Everyone except external
        users" reads through its own "Members" site group; a "Members" group exists on Direction too)."""
        ms = cls(**kwargs)
        directory = json.loads((AXONIX / "directory.json").read_text(encoding="utf-8"))
        for gname in directory["groups"]:
            ms.add_group(gname, sam=gname)
        for gname, g in directory["groups"].items():
            for parent in g.get("member_of", []):
                ms.group(parent).members.append(ms.group(gname).id)
        for sam, u in directory["users"].items():
            user = ms.add_user(u["upn"], sam=sam)
            for gname in u.get("groups", []):
                ms.group(gname).members.append(user.id)
        ms.add_user("ext.partner_partner.ch#EXT#@axonix.ch", display_name="External Partner", user_type="Guest",
                    mail="ext.partner@partner.ch")
        ms.labels = {_guid(): "Public", _guid(): "Confidentiel", _guid(): "Strictement confidentiel"}

        direction = ms.add_site("Direction")
        ms.add_site_group(direction, "Direction Owners", [], role="Full Control")
        ms.add_site_group(direction, "Members", [ms.group("GG_Direction").claim()], role="Read")
        docs = ms.add_drive(direction, "Documents")
        share = AXONIX / "share"
        contrats = ms.add_folder(docs, "Contrats")
        ms.add_file(docs, "03_Contrat_Maintenance_Etude_Rochat.docx",
                    (share / "DIRECTION" / "03_Contrat_Maintenance_Etude_Rochat.docx").read_bytes(), parent=contrats)
        ms.add_file(docs, "21_Contrat_Maintenance_Baumont_Industries.docx",
                    (share / "CLIENTS" / "21_Contrat_Maintenance_Baumont_Industries.docx").read_bytes(), parent=contrats)
        ms.add_file(docs, "Grille_Salariale_2026.docx", (share / "RH" / "Grille_Salariale_2026.docx").read_bytes())
        ms.add_file(docs, "09-pipeline-llm.md", (share / "DOCUMENTATION" / "09-pipeline-llm.md").read_bytes())

        projets = ms.add_site("Projets")
        ms.add_site_group(projets, "Projets Owners", [], role="Full Control")
        ms.add_site_group(projets, "Members", [EVERYONE_EXCEPT_EXTERNAL.format(tenant=ms.tenant_id)], role="Read")
        pdocs = ms.add_drive(projets, "Documents")
        ms.add_file(pdocs, "11-correlations-yaml.md", (share / "DOCUMENTATION" / "11-correlations-yaml.md").read_bytes())
        ms.add_file(pdocs, "04_Reponse_AO_Migration_Azure_Sarrasin.docx",
                    (share / "COMMERCIAL" / "04_Reponse_AO_Migration_Azure_Sarrasin.docx").read_bytes())
        return ms.start()

    # ------------------------------------------------------------------ lookup helpers

    def user(self, key: str) -> FakeUser:
        """A user by id, UPN or sAMAccountName (case-insensitive)."""
        with self._lock:
            k = key.lower()
            for u in self.users.values():
                if k in (u.id.lower(), u.upn.lower(), (u.sam or "").lower()):
                    return u
        raise KeyError(key)

    def group(self, key: str) -> FakeGroup:
        """A group by id or display name."""
        with self._lock:
            for g in self.groups.values():
                if key in (g.id, g.display_name):
                    return g
        raise KeyError(key)

    def site(self, key: str) -> FakeSite:
        """A site by id, server-relative URL (``/teams/Projets``) or name (the first of that name)."""
        with self._lock:
            for s in self.sites.values():
                if key in (s.id, s.path):
                    return s
            for s in self.sites.values():
                if key == s.name:
                    return s
        raise KeyError(key)

    def drive(self, site: str | FakeSite, name: str = "Documents") -> FakeDrive:
        """A site's drive by name."""
        s = site if isinstance(site, FakeSite) else self.site(site)
        for d in s.drives:
            if d.name == name:
                return d
        raise KeyError(name)

    def item(self, drive: str | FakeDrive, path: str) -> FakeItem:
        """A live item by its path under the drive root (``"Contrats/x.docx"``)."""
        d = drive if isinstance(drive, FakeDrive) else self.drives[drive]
        with self._lock:
            for it in d.items.values():
                if not it.deleted and it.kind != "root" and self._item_path(d, it) == path.strip("/"):
                    return it
        raise KeyError(path)

    def site_url(self, site: str | FakeSite) -> str:
        """``https://127.0.0.1:<port><server-relative URL>`` (``…/sites/<name>`` by default)."""
        s = site if isinstance(site, FakeSite) else self.site(site)
        return f"{self.base_url}{quote(s.path)}"

    # ------------------------------------------------------------------ mutators: directory

    def add_user(self, upn: str, *, display_name: str | None = None, user_type: str = "Member",
                 sam: str | None = None, mail: str | None = None) -> FakeUser:
        """Add an Entra user (``user_type`` "Member" or "Guest")."""
        with self._lock:
            u = FakeUser(_guid(), upn, display_name or upn.split("@", maxsplit=1)[0], mail or (upn if user_type == "Member" else None),
                         user_type, sam)
            self.users[u.id] = u
            return u

    def add_group(self, name: str, members: Iterable[str] = (), *, unified: bool = False, sam: str | None = None) -> FakeGroup:
        """Add an Entra group; ``members`` are user/group ids."""
        with self._lock:
            g = FakeGroup(_guid(), name, list(members), unified, sam)
            self.groups[g.id] = g
            return g

    def transitive_groups(self, principal_id: str) -> list[FakeGroup]:
        """Every group ``principal_id`` is a member of, directly or through nesting."""
        with self._lock:
            out: dict[str, FakeGroup] = {}
            frontier = [principal_id]
            while frontier:
                pid = frontier.pop()
                for g in self.groups.values():
                    if pid in g.members and g.id not in out:
                        out[g.id] = g
                        frontier.append(g.id)
            return list(out.values())

    def transitive_members(self, group_id: str) -> list[FakeUser | FakeGroup]:
        """Every user and group under ``group_id``."""
        with self._lock:
            out: dict[str, FakeUser | FakeGroup] = {}
            frontier = [group_id]
            while frontier:
                g = self.groups.get(frontier.pop())
                if g is None:
                    continue
                for m in g.members:
                    if m in out:
                        continue
                    if m in self.users:
                        out[m] = self.users[m]
                    elif m in self.groups:
                        out[m] = self.groups[m]
                        frontier.append(m)
            return list(out.values())

    # ------------------------------------------------------------------ mutators: sites and items

    def add_site(self, name: str, display_name: str | None = None, *, path: str | None = None) -> FakeSite:
        """Add a site at the server-relative URL ``path`` (default ``/sites/<name>``; ``/teams/<name>``,
        a subsite ``/sites/A/<name>``...). Its id is ``127.0.0.1,<site collection guid>,<web guid>``
        as Graph's ("site resource type": ``{hostname},{spsite.id},{spweb.id}``); a subsite shares
        its collection's guid."""
        with self._lock:
            where = (path or f"/sites/{name}").rstrip("/")
            parent = next((x for x in self.sites.values() if x.path and where.startswith(x.path + "/")), None)
            collection = parent.id.split(",")[1] if parent is not None else _guid()
            web_id = _guid()
            s = FakeSite(f"127.0.0.1,{collection},{web_id}", name, display_name or name, web_id, path=where)
            self.sites[s.id] = s
            return s

    def refuse_rest(self, site: FakeSite | str, status: int | None = 403) -> None:
        """Make SharePoint REST answer ``status`` (401/403) for every request on ``site`` (``None``:
        answer again) — as for a site the app may read through Graph only."""
        s = site if isinstance(site, FakeSite) else self.site(site)
        with self._lock:
            s.rest_refusal = status

    def add_site_group(self, site: FakeSite | str, title: str, members: Iterable[str], *, role: str | None = "Read") -> SiteGroup:
        """Add a site group (``members``: login names) and, if ``role``, a web role assignment to it."""
        s = site if isinstance(site, FakeSite) else self.site(site)
        with self._lock:
            gid = 3 + len(s.groups)
            g = SiteGroup(gid, title, list(members))
            s.groups[gid] = g
            if role:
                s.role_assignments.append((f"group:{gid}", [role]))
            return g

    def set_web_role(self, site: FakeSite | str, login_name: str, roles: Sequence[str]) -> None:
        """Add (or replace) a web role assignment for a login name (user/group claim, or ``group:<id>``)."""
        s = site if isinstance(site, FakeSite) else self.site(site)
        with self._lock:
            s.role_assignments = [(p, r) for p, r in s.role_assignments if p != login_name]
            if roles:
                s.role_assignments.append((login_name, list(roles)))

    def add_drive(self, site: FakeSite | str, name: str) -> FakeDrive:
        """Add a document library (drive + list) with its root folder."""
        s = site if isinstance(site, FakeSite) else self.site(site)
        with self._lock:
            did = "b!" + base64.urlsafe_b64encode(uuid.uuid4().bytes + uuid.uuid4().bytes).decode().rstrip("=")
            root = FakeItem(self._item_id(), "root", None, kind="root", modified=_now_iso())
            d = FakeDrive(did, name, s.id, _guid(), root.id)
            d.items[root.id] = root
            s.drives.append(d)
            self.drives[did] = d
            return d

    def add_folder(self, drive: FakeDrive | str, name: str, *, parent: FakeItem | None = None) -> FakeItem:
        """Add a folder (under the root unless ``parent``)."""
        return self._add(drive, name, parent, "folder", b"")

    def add_file(self, drive: FakeDrive | str, name: str, content: bytes, *, parent: FakeItem | None = None,
                 package: bool = False, bare: bool = False) -> FakeItem:
        """Add a file (``package=True``: a OneNote notebook package; ``bare=True``: an item delta
        lists with no ``file``/``folder``/``package`` facet at all)."""
        return self._add(drive, name, parent, "package" if package else "bare" if bare else "file", content)

    def modify_file(self, drive: FakeDrive | str, item: FakeItem | str, content: bytes) -> FakeItem:
        """Replace a file's content (new eTag/cTag/hash; reported by the next delta)."""
        d, it = self._resolve(drive, item)
        with self._lock:
            it.content = content
            it.version += 1
            it.modified = _now_iso()
            it.seq = self._bump(d)
            return it

    def rename(self, drive: FakeDrive | str, item: FakeItem | str, name: str, *, parent: FakeItem | None = None) -> FakeItem:
        """Rename and/or move an item."""
        d, it = self._resolve(drive, item)
        with self._lock:
            it.name = name
            if parent is not None:
                it.parent_id = parent.id
            it.version += 1
            it.seq = self._bump(d)
            return it

    def delete_item(self, drive: FakeDrive | str, item: FakeItem | str) -> None:
        """Delete an item and its descendants (the next delta reports them ``deleted``, without a name)."""
        d, it = self._resolve(drive, item)
        with self._lock:
            seq = self._bump(d)
            for x in [it, *self._descendants(d, it)]:
                x.deleted = True
                x.seq = seq

    def set_permissions(self, drive: FakeDrive | str, item: FakeItem | str, permissions: list[dict[str, Any]] | None,
                        *, signal: bool = True) -> None:
        """Give an item its own permission entries (``None``: inherit again). ``signal=False``: the
        change is invisible to delta (Graph misses some sharing changes); only a permission read sees it."""
        d, it = self._resolve(drive, item)
        with self._lock:
            it.permissions = None if permissions is None else [dict(p) for p in permissions]
            if signal:
                it.perm_seq = self._bump(d)

    def break_inheritance(self, drive: FakeDrive | str, item: FakeItem | str, *, copy: bool = False,
                          signal: bool = True) -> None:
        """Give an item unique permissions (SharePoint ``breakroleinheritance(copyRoleAssignments)``):
        a copy of what it inherited, or — ``copy=False`` — none at all (nobody reads it)."""
        d, it = self._resolve(drive, item)
        with self._lock:
            self.set_permissions(d, it, self._own_or_copied(d, it) if copy else [], signal=signal)

    def grant(self, drive: FakeDrive | str, item: FakeItem | str, *, user: str | None = None, group: str | None = None,
              site_group: SiteGroup | None = None, roles: Sequence[str] = ("read",), signal: bool = True,
              expires: str | None = None, owners_of: str | None = None) -> None:
        """Add a direct grant (Graph ``grantedToV2``) to an item, breaking inheritance (copying the
        inherited entries, as SharePoint does) if it inherited. ``expires``: its
        ``expirationDateTime`` (ISO 8601, e.g. a guest's access that ends); ``owners_of``: a
        Microsoft 365 group whose *owners* are granted (``group`` + the ``…_o`` claim)."""
        d, it = self._resolve(drive, item)
        with self._lock:
            perms = self._own_or_copied(d, it)
            if owners_of is not None:
                g = self.group(owners_of)
                identity = {"group": {"id": g.id, "displayName": f"{g.display_name} Owners"},
                            "siteUser": {"id": str(self._site_user_id(d, g.owners_claim())),
                                         "displayName": f"{g.display_name} Owners", "loginName": g.owners_claim()}}
            else:
                identity = self._identity(user=user, group=group, site_group=site_group, drive=d)
            entry: dict[str, Any] = {"roles": list(roles), "grantedToV2": identity}
            if expires is not None:
                entry["expirationDateTime"] = expires
            perms.append(entry)
            self.set_permissions(d, it, perms, signal=signal)

    def add_link(self, drive: FakeDrive | str, item: FakeItem | str, *, scope: str | None, link_type: str = "view",
                 recipients: Sequence[str] = (), signal: bool = True, expires: str | None = None) -> None:
        """Add a sharing link ("sharingLink resource type"): ``scope`` anonymous | organization |
        users ("specific people", whose ``recipients`` user ids/UPNs appear in
        ``grantedToIdentitiesV2``) | existingAccess, or ``None`` — a link without ``scope``, as
        the permission page's own "Specific people link" example. ``expires``: its
        ``expirationDateTime`` (ISO 8601); without it the link carries ``0001-01-01T00:00:00Z``
        ("DateTime.MinValue indicates there is no expiration"). Creating a link breaks the item's
        inheritance, as SharePoint does."""
        d, it = self._resolve(drive, item)
        with self._lock:
            perms = self._own_or_copied(d, it)
            link: dict[str, Any] = {"type": link_type, "webUrl": f"{self.base_url}/:w:/s/{secrets.token_hex(6)}",
                                    "preventsDownload": False}
            if scope is not None:
                link["scope"] = scope
            entry: dict[str, Any] = {
                "roles": ["write" if link_type == "edit" else "read"],
                "link": link,
                "shareId": "u!" + secrets.token_hex(12),
                "expirationDateTime": expires or NO_EXPIRY,
            }
            if recipients:
                entry["grantedToIdentitiesV2"] = [self._identity(user=r, drive=d) for r in recipients]
            perms.append(entry)
            self.set_permissions(d, it, perms, signal=signal)

    def add_permission(self, drive: FakeDrive | str, item: FakeItem | str, permission: Mapping[str, Any], *,
                       signal: bool = True) -> None:
        """Append a raw permission resource (e.g. one of the documentation's own examples,
        :mod:`support.ms_docs`) to an item's own permissions, breaking inheritance (copy) first."""
        d, it = self._resolve(drive, item)
        with self._lock:
            perms = self._own_or_copied(d, it)
            perms.append(json.loads(json.dumps(permission)))
            self.set_permissions(d, it, perms, signal=signal)

    def set_label(self, drive: FakeDrive | str, item: FakeItem | str, label: str | None, *, error: int | None = None) -> None:
        """Set a file's sensitivity label (id or name; ``None`` removes it); ``error`` (e.g. 423) makes
        ``extractSensitivityLabels`` fail for it. Bumps the file (a label change is a content change)."""
        d, it = self._resolve(drive, item)
        with self._lock:
            if label is not None and label not in self.labels:
                label = next(k for k, v in self.labels.items() if v == label)
            it.label_id = label
            it.label_error = error
            it.version += 1
            it.seq = self._bump(d)

    def set_list_roles(self, drive: FakeDrive | str, assignments: list[tuple[str, list[str]]] | None) -> None:
        """Give the library's list its own role assignments (None: inherit the web's)."""
        d = drive if isinstance(drive, FakeDrive) else self.drives[drive]
        with self._lock:
            d.role_assignments = None if assignments is None else list(assignments)

    # ------------------------------------------------------------------ faults

    def throttle(self, path_regex: str, times: int = 1, *, retry_after: int | str | None = 1, status: int = 429,
                 method: str | None = None) -> None:
        """The next ``times`` requests whose Graph-relative path (``/drives/...``, also inside ``$batch``)
        or REST path matches ``path_regex`` get ``status`` (429/503) with ``Retry-After`` (seconds, an
        HTTP-date string, or None for no header)."""
        with self._lock:
            self._rules.append(_Rule(re.compile(path_regex), status, times,
                                     None if retry_after is None else str(retry_after),
                                     "TooManyRequests" if status == 429 else "serviceNotAvailable", method))

    def fail(self, path_regex: str, status: int, times: int = 1, *, code: str | None = None, method: str | None = None) -> None:
        """The next ``times`` matching requests get ``status`` with a Graph error body (``code``)."""
        default = {401: "InvalidAuthenticationToken", 403: "accessDenied", 404: "itemNotFound",
                   500: "generalException", 503: "serviceNotAvailable"}.get(status, "error")
        with self._lock:
            self._rules.append(_Rule(re.compile(path_regex), status, times, None, code or default, method))

    def gone_next_delta(self, drive_id: str, code: str = "resyncRequired") -> None:
        """The next delta call on ``drive_id`` *with a token* gets ``410 Gone`` with ``code``."""
        with self._lock:
            self._gone.setdefault(drive_id, []).append(code)

    def clear_faults(self) -> None:
        """Drop every pending fault: throttles, failures, 410s and injected delta entries."""
        with self._lock:
            self._rules.clear()
            self._gone.clear()
            self._extra_delta.clear()

    def add_delta_entries(self, drive_id: str, entries: Sequence[dict[str, Any]]) -> None:
        """Raw entries appended to the next delta answer of ``drive_id`` (e.g. an item twice)."""
        with self._lock:
            self._extra_delta.setdefault(drive_id, []).extend(entries)

    def expire_tokens(self) -> None:
        """Revoke every access token issued so far (they now get 401 InvalidAuthenticationToken)."""
        with self._lock:
            self._tokens = {t: (0.0, kind) for t, (_, kind) in self._tokens.items()}

    def graph_requests(self, path_regex: str = "", *, include_batch: bool = True) -> list[LoggedRequest]:
        """Logged Graph requests whose path matches ``path_regex`` (sub-requests included unless told)."""
        rx = re.compile(path_regex)
        with self._lock:
            return [r for r in self.requests
                    if (r.in_batch or r.path.startswith("/v1.0")) and rx.search(r.path)
                    and (include_batch or not r.in_batch)]

    # ------------------------------------------------------------------ internals: model

    def _item_id(self) -> str:
        return "01" + base64.b32encode(uuid.uuid4().bytes).decode().rstrip("=")

    def _bump(self, d: FakeDrive) -> int:
        d.seq += 1
        return d.seq

    def _add(self, drive: FakeDrive | str, name: str, parent: FakeItem | None, kind: str, content: bytes) -> FakeItem:
        d = drive if isinstance(drive, FakeDrive) else self.drives[drive]
        with self._lock:
            it = FakeItem(self._item_id(), name, parent.id if parent else d.root_id, kind, content, modified=_now_iso())
            it.seq = self._bump(d)
            d.items[it.id] = it
            return it

    def _resolve(self, drive: FakeDrive | str, item: FakeItem | str) -> tuple[FakeDrive, FakeItem]:
        d = drive if isinstance(drive, FakeDrive) else self.drives[drive]
        it = item if isinstance(item, FakeItem) else (d.items.get(item) or self.item(d, item))
        return d, it

    def _descendants(self, d: FakeDrive, it: FakeItem) -> list[FakeItem]:
        out: list[FakeItem] = []
        frontier = [it.id]
        while frontier:
            pid = frontier.pop()
            for x in d.items.values():
                if x.parent_id == pid and not x.deleted:
                    out.append(x)
                    frontier.append(x.id)
        return out

    def _item_path(self, d: FakeDrive, it: FakeItem) -> str:
        parts: list[str] = []
        cur: FakeItem | None = it
        while cur is not None and cur.kind != "root":
            parts.append(cur.name)
            cur = d.items.get(cur.parent_id or "")
        return "/".join(reversed(parts))

    def _site_user_id(self, d: FakeDrive, login: str) -> int:
        site = self.sites[d.site_id]
        return site.site_users.setdefault(login, 100 + len(site.site_users))

    def _identity(self, *, user: str | None = None, group: str | None = None, site_group: SiteGroup | None = None,
                  drive: FakeDrive | None = None) -> dict[str, Any]:
        """A ``sharePointIdentitySet`` ("sharePointIdentitySet resource type"): ``user`` /
        ``group`` (Entra ``identity``) with the ``siteUser`` (``sharePointIdentity``: site-scoped
        id, claims ``loginName``) SharePoint knows them by; ``siteGroup`` for a SharePoint group."""
        if user is not None:
            u = self.user(user)
            out: dict[str, Any] = {"user": {"id": u.id, "displayName": u.display_name, "email": u.mail or u.upn}}
            if drive is not None:
                out["siteUser"] = {"id": str(self._site_user_id(drive, user_claim(u.upn))), "displayName": u.display_name,
                                   "loginName": user_claim(u.upn)}
            return out
        if group is not None:
            g = self.group(group)
            out = {"group": {"id": g.id, "displayName": g.display_name}}
            if drive is not None:
                out["siteUser"] = {"id": str(self._site_user_id(drive, g.claim())), "displayName": g.display_name,
                                   "loginName": g.claim()}
            return out
        if site_group is not None:
            return {"siteGroup": {"id": str(site_group.id), "displayName": site_group.title, "loginName": site_group.title}}
        raise ValueError("one of user, group, site_group")

    def _own_or_copied(self, d: FakeDrive, it: FakeItem) -> list[dict[str, Any]]:
        """What breaking ``it``'s inheritance keeps (``copyRoleAssignments = true``): its own
        entries, else a copy of its effective ones."""
        if it.permissions is not None:
            return [dict(p) for p in it.permissions]
        return [{k: v for k, v in p.items() if k != "id"} for p in self._permission_entries(d, it)]

    def _unique_ancestor(self, d: FakeDrive, it: FakeItem) -> FakeItem | None:
        cur = d.items.get(it.parent_id or "")
        while cur is not None and cur.kind != "root":
            if cur.permissions is not None:
                return cur
            cur = d.items.get(cur.parent_id or "")
        return None

    def _permission_entries(self, d: FakeDrive, it: FakeItem) -> list[dict[str, Any]]:
        """``GET …/permissions``: the item's *effective* permissions ("List sharing permissions on
        a driveItem": applied on the item itself or inherited from its ancestors) — its own
        entries when it has unique permissions (``[]``: none granted), else its nearest unique
        folder's, else the library's role assignments (the site's when the library inherits) as
        permission resources. Never ``inheritedFrom``: "SharePoint document libraries do not
        return the inheritedFrom property" ("Permission resource type", Remarks)."""
        scope = it if it.permissions is not None else self._unique_ancestor(d, it)
        if scope is not None:
            return [{"id": self._perm_id(scope, i, p), **p} for i, p in enumerate(scope.permissions or [])]
        site = self.sites[d.site_id]
        assignments = d.role_assignments if d.role_assignments is not None else site.role_assignments
        out: list[dict[str, Any]] = []
        for login, roles in assignments:
            entry = self._assignment_permission(d, site, login, roles)
            if entry is not None:
                out.append({"id": self._perm_id(d.items[d.root_id], len(out), entry), **entry})
        return out

    def _assignment_permission(self, d: FakeDrive, site: FakeSite, login: str, roles: Sequence[str]) -> dict[str, Any] | None:
        """A role assignment as Graph lists it among an item's permissions: ``roles`` from the
        permission levels (Full Control → ``owner``, Edit/Contribute → ``write``, Read/View Only →
        ``read``: the values of "Roles property values"; Limited Access alone is not listed) and
        the principal as a ``sharePointIdentitySet``."""
        graph_roles = sorted({GRAPH_ROLE[r] for r in roles if GRAPH_ROLE.get(r)})
        if not graph_roles:
            return None
        if login.startswith("group:"):
            g = site.groups[int(login.split(":", 1)[1])]
            identity: dict[str, Any] = {"siteGroup": {"id": str(g.id), "displayName": g.title, "loginName": g.title}}
        else:
            site_user = {"id": str(self._site_user_id(d, login)), "displayName": self._login_title(login), "loginName": login}
            identity = {"siteUser": site_user}
            if login.startswith("i:0#.f|membership|"):
                try:
                    u = self.user(login.rsplit("|", 1)[1])
                    identity["user"] = {"id": u.id, "displayName": u.display_name, "email": u.mail or u.upn}
                except KeyError:
                    pass
            elif login.startswith(("c:0t.c|tenant|", "c:0o.c|federateddirectoryclaimprovider|")):
                gid = login.rsplit("|", 1)[1]
                base = gid.removesuffix("_o")
                if base in self.groups:
                    identity["group"] = {"id": base, "displayName": self._login_title(login)}
        return {"roles": graph_roles, "grantedToV2": identity}

    def _login_title(self, login: str) -> str:
        if login.startswith("i:0#.f|membership|"):
            try:
                return self.user(login.rsplit("|", 1)[1]).display_name
            except KeyError:
                return login.rsplit("|", 1)[1]
        if "spo-grid-all-users" in login:
            return "Everyone except external users"
        if login == "c:0(.s|true":
            return "Everyone"
        gid = login.rsplit("|", 1)[1]
        base = gid.removesuffix("_o")
        if base in self.groups:
            return self.groups[base].display_name + (" Owners" if gid.endswith("_o") else "")
        return login

    @staticmethod
    def _perm_id(it: FakeItem, i: int, p: Mapping[str, Any]) -> str:
        return hashlib.sha1(f"{it.id}/{i}/{json.dumps(p, sort_keys=True)}".encode()).hexdigest()[:24]

    def _drive_item(self, d: FakeDrive, it: FakeItem, index: _Index | None = None, *, in_delta: bool = False) -> dict[str, Any]:
        """A ``driveItem`` ("driveItem resource type"): ``file`` (``hashes.quickXorHash``),
        ``folder`` (``childCount``), ``package`` (``{"type": "oneNote"}``, "Package resource type":
        no ``file`` or ``folder`` facet), ``root``, ``parentReference`` (``itemReference``),
        ``eTag``/``cTag``, ``webUrl``. In a delta answer ("driveItem: delta", Remarks):
        ``parentReference`` has no ``path``, ``cTag`` is omitted (OneDrive for Business, create and
        modify), and a deleted item is ``id`` + ``parentReference`` + ``deleted`` without ``name``."""
        site = self.sites[d.site_id]
        if it.deleted:
            return {"id": it.id, "parentReference": {"driveId": d.id, "driveType": "documentLibrary", "id": it.parent_id},
                    "deleted": {"state": "deleted"}}
        parent = d.items.get(it.parent_id or "")
        path = self._item_path(d, it)
        out: dict[str, Any] = {
            "id": it.id,
            "name": it.name,
            "eTag": f'"{{{it.id}}},{it.version}"',
            "createdDateTime": it.modified,
            "lastModifiedDateTime": it.modified,
            "webUrl": f"{self.site_url(site)}/{quote(d.name)}/{quote(path)}" if path else f"{self.site_url(site)}/{quote(d.name)}",
            "size": len(it.content) if it.kind in ("file", "package", "bare") else (index or self._index(d)).sizes.get(it.id, 0),
        }
        if it.kind not in ("folder", "root") and not in_delta:
            out["cTag"] = f'"c:{{{it.id}}},{it.version}"'
        if it.kind == "root":
            out["root"] = {}
            out["folder"] = {"childCount": (index or self._index(d)).children.get(it.id, 0)}
            out["parentReference"] = {"driveId": d.id, "driveType": "documentLibrary"}
            return out
        parent_path = self._item_path(d, parent) if parent else ""
        out["parentReference"] = {"driveId": d.id, "driveType": "documentLibrary", "id": it.parent_id, "siteId": site.id}
        if not in_delta:
            out["parentReference"]["path"] = f"/drives/{d.id}/root:" + (f"/{parent_path}" if parent_path else "")
        if it.kind == "folder":
            out["folder"] = {"childCount": (index or self._index(d)).children.get(it.id, 0)}
        elif it.kind == "package":
            out["package"] = copy_of("package-onenote")
        elif it.kind == "file":
            out["file"] = {"mimeType": _mime(it.name), "hashes": {"quickXorHash": quick_xor_hash(it.content)}}
        return out

    def _index(self, d: FakeDrive) -> _Index:
        """Child counts, folder sizes and depths of a drive, in one pass, cached until the drive
        changes (delta answers 10,000s of items page by page)."""
        cached = self._index_cache.get(d.id)
        if cached is not None and cached[0] == d.seq:
            return cached[1]
        idx = _Index({}, {}, {})
        live = [x for x in d.items.values() if not x.deleted]
        for x in live:
            if x.parent_id:
                idx.children[x.parent_id] = idx.children.get(x.parent_id, 0) + 1
        for x in d.items.values():
            depth, cur = 0, x
            while cur.parent_id and cur.parent_id in d.items:
                depth += 1
                cur = d.items[cur.parent_id]
                if x.kind in ("file", "package") and not x.deleted:
                    idx.sizes[cur.id] = idx.sizes.get(cur.id, 0) + len(x.content)
            idx.depth[x.id] = depth
        self._index_cache[d.id] = (d.seq, idx)
        return idx

    def _drive_resource(self, d: FakeDrive) -> dict[str, Any]:
        site = self.sites[d.site_id]
        return {"id": d.id, "name": d.name, "driveType": "documentLibrary",
                "webUrl": f"{self.site_url(site)}/{quote(d.name)}", "description": "",
                "createdDateTime": "2025-01-01T00:00:00Z", "lastModifiedDateTime": _now_iso()}

    def _site_resource(self, s: FakeSite) -> dict[str, Any]:
        return {"id": s.id, "name": s.name, "displayName": s.display_name, "webUrl": self.site_url(s),
                "siteCollection": {"hostname": "127.0.0.1"}, "createdDateTime": "2025-01-01T00:00:00Z",
                "lastModifiedDateTime": _now_iso()}

    # ------------------------------------------------------------------ internals: HTTP

    def _app(self) -> FastAPI:
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
        limiter = anyio.CapacityLimiter(64)

        async def endpoint(request: Request) -> Response:
            body = await request.body()
            # The raw (still percent-encoded) path: Graph ids and REST segments are matched on it.
            raw_path = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1").split("?", 1)[0]
            answer = await anyio.to_thread.run_sync(
                self._dispatch_http, request.method, raw_path, request.url.query, dict(request.headers), body,
                limiter=limiter,
            )
            content, headers = answer.encode()
            return Response(content=content, status_code=answer.status, headers=headers)

        app.add_api_route("/{full_path:path}", endpoint, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
        return app

    def _dispatch_http(self, method: str, raw_path: str, query: str, headers: dict[str, str], body: bytes) -> _Answer:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.latency_s:
                time.sleep(self.latency_s)
            answer = self._dispatch(method, unquote(raw_path), parse_qs(query, keep_blank_values=True), headers, body,
                                    in_batch=False)
        except Exception as exc:  # noqa: BLE001 - a bug in the fake: answer 500 with the reason, keep serving
            answer = _error(500, "fakeError", f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._in_flight -= 1
        with self._lock:
            self.answers.append((method, unquote(raw_path), answer.status))
        return answer

    def _dispatch(self, method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str], body: bytes,
                  *, in_batch: bool) -> _Answer:
        headers = {k.lower(): v for k, v in headers.items()}
        with self._lock:
            self.requests.append(LoggedRequest(method, path, dict(query), headers, in_batch))
        if not in_batch and re.fullmatch(r"/[^/]+/(v2\.0/)?\.well-known/openid-configuration", path):
            return self._oidc(path.split("/")[1])
        if not in_batch and re.fullmatch(r"/[^/]+/oauth2/v2\.0/token", path) and method == "POST":
            return self._token(path.split("/")[1], body)
        if not in_batch and path.startswith("/_download/"):
            return self._download(path)
        rel = path[len("/v1.0"):] if path.startswith("/v1.0/") else path
        fault = self._fault(method, rel)
        if fault is not None:
            return fault
        rest = re.match(r"(/.+?)/_api/(.*)$", path, re.IGNORECASE) if not in_batch else None
        if rest:
            denied = self._check_token(headers, rest=True)
            if denied is not None:
                return denied
            return self._rest(method, rest.group(1), rest.group(2), query, headers)
        if not in_batch and not path.startswith("/v1.0/"):
            return _error(404, "itemNotFound", f"no route for {method} {path}")
        denied = self._check_token(headers, rest=False) if not in_batch else None
        if denied is not None:
            return denied
        if rel == "/$batch" and method == "POST" and not in_batch:
            return self._batch(body, headers)
        return self._graph(method, rel, query, headers, body)

    def _fault(self, method: str, rel: str) -> _Answer | None:
        with self._lock:
            for rule in self._rules:
                if rule.times > 0 and rule.pattern.search(rel) and (rule.method in (None, method)):
                    rule.times -= 1
                    if rule.status in (429, 503):
                        hdrs = {"Retry-After": rule.retry_after} if rule.retry_after is not None else {}
                        msg = "Too many requests" if rule.status == 429 else "Service unavailable"
                        return _error(rule.status, rule.code, msg, hdrs)
                    return _error(rule.status, rule.code, f"injected {rule.status}")
        return None

    # --------------------------------------------------------------- auth

    def _oidc(self, tenant: str) -> _Answer:
        base = f"{self.base_url}/{tenant}"
        return _Answer(200, {
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
            "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
            "issuer": f"{self.base_url}/{self.tenant_id}/v2.0",
            "jwks_uri": f"{self.base_url}/{tenant}/discovery/v2.0/keys",
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "tenant_region_scope": "EU",
        })

    def _token(self, tenant: str, body: bytes) -> _Answer:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        record = {"tenant": tenant, "grant_type": form.get("grant_type", ""), "scope": form.get("scope", ""),
                  "client_id": form.get("client_id", ""), "credential": ""}
        if tenant not in (self.tenant_id, self.tenant_domain):
            return self._token_error(record, 400, "invalid_request", "AADSTS90002: Tenant not found.", 90002)
        if form.get("grant_type") != "client_credentials":
            return self._token_error(record, 400, "unsupported_grant_type", "AADSTS70003: unsupported grant type", 70003)
        assertion = form.get("client_assertion")
        if "client_secret" in form:
            record["credential"] = "secret"
            if form.get("client_id") != self.client_id or form["client_secret"] != self.client_secret:
                return self._token_error(record, 401, "invalid_client", "AADSTS7000215: Invalid client secret provided.", 7000215)
        elif assertion:
            record["credential"] = "certificate"
            problem = self._check_assertion(assertion, tenant)
            if problem:
                return self._token_error(record, 401, "invalid_client", problem, 700027)
        else:
            return self._token_error(record, 401, "invalid_client", "AADSTS7000218: client_assertion or client_secret required", 7000218)
        token = "fake-at-" + secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[token] = (time.time() + self.token_lifetime_s, record["credential"])
            self.token_requests.append(record)
        return _Answer(200, {"token_type": "Bearer", "expires_in": self.token_lifetime_s,
                             "ext_expires_in": self.token_lifetime_s, "access_token": token})

    def _token_error(self, record: dict[str, str], status: int, error: str, description: str, code: int) -> _Answer:
        with self._lock:
            self.token_requests.append({**record, "error": error})
        return _Answer(status, {"error": error, "error_description": description, "error_codes": [code],
                                "timestamp": _now_iso(), "trace_id": _guid(), "correlation_id": _guid()})

    def _check_assertion(self, assertion: str, tenant: str) -> str | None:
        header = jwt.get_unverified_header(assertion)
        cert = self.certificate
        x5t = str(header.get("x5t", "")).rstrip("=")
        x5t256 = str(header.get("x5t#S256", "")).rstrip("=")
        sha1 = base64.urlsafe_b64encode(bytes.fromhex(cert.thumbprint)).decode().rstrip("=")
        sha256 = base64.urlsafe_b64encode(bytes.fromhex(cert.thumbprint_sha256)).decode().rstrip("=")
        if x5t != sha1 and x5t256 != sha256:
            return "AADSTS700027: The certificate with identifier used to sign the client assertion is not registered on application."
        public_key = x509.load_pem_x509_certificate(cert.cert_pem_path.read_bytes()).public_key()
        try:
            claims = jwt.decode(assertion, public_key, algorithms=["RS256", "PS256"],
                                audience=f"{self.base_url}/{tenant}/oauth2/v2.0/token",
                                options={"require": ["exp", "aud", "iss", "sub"]})
        except jwt.PyJWTError as exc:
            return f"AADSTS700027: Client assertion failed signature validation ({exc})."
        if claims.get("iss") != self.client_id or claims.get("sub") != self.client_id:
            return "AADSTS700016: Application not found in the directory."
        return None

    def _check_token(self, headers: Mapping[str, str], *, rest: bool) -> _Answer | None:
        auth = headers.get("authorization", "")
        token = auth[7:] if auth.lower().startswith("bearer ") else ""
        with self._lock:
            entry = self._tokens.get(token)
        if entry is None:
            return _error(401, "InvalidAuthenticationToken", "Access token is empty or invalid.",
                          {"WWW-Authenticate": 'Bearer realm="", error="invalid_token"'})
        expires, kind = entry
        if time.time() >= expires:
            return _error(401, "InvalidAuthenticationToken", "Lifetime validation failed, the token is expired.",
                          {"WWW-Authenticate": 'Bearer realm="", error="invalid_token"'})
        if rest and kind == "secret":
            return _Answer(401, {"error_description": "Unsupported app only token."},
                           {"x-ms-diagnostics": '3001000;reason="There has been an error authenticating the request.";category="invalid_client"'})
        return None

    # --------------------------------------------------------------- graph

    def _graph(self, method: str, rel: str, query: Mapping[str, list[str]], headers: Mapping[str, str], body: bytes) -> _Answer:
        q1 = {k: v[0] for k, v in query.items()}
        routes: list[tuple[str, str, Any]] = [
            ("GET", r"/sites", self._g_sites),
            ("GET", r"/sites/(?P<host>[^/,]+?)(?::\d+)?:(?P<path>/.+?):?", self._g_site_by_path),
            ("GET", r"/sites/(?P<site>[^/:]+)", self._g_site),
            ("GET", r"/sites/(?P<site>[^/:]+)/drives", self._g_site_drives),
            ("GET", r"/drives/(?P<drive>[^/]+)", self._g_drive),
            ("GET", r"/drives/(?P<drive>[^/]+)/list", self._g_drive_list),
            ("GET", r"/drives/(?P<drive>[^/]+)/root", self._g_root),
            ("GET", r"/drives/(?P<drive>[^/]+)/root/delta(?:\(token='(?P<ftoken>[^']*)'\))?", self._g_delta),
            ("GET", r"/drives/(?P<drive>[^/]+)/items/(?P<item>[^/]+)", self._g_item),
            ("GET", r"/drives/(?P<drive>[^/]+)/items/(?P<item>[^/]+)/children", self._g_children),
            ("GET", r"/drives/(?P<drive>[^/]+)/items/(?P<item>[^/]+)/content", self._g_content),
            ("GET", r"/drives/(?P<drive>[^/]+)/items/(?P<item>[^/]+)/permissions", self._g_permissions),
            ("POST", r"/drives/(?P<drive>[^/]+)/items/(?P<item>[^/]+)/extractSensitivityLabels", self._g_labels),
            ("GET", r"/security/informationProtection/sensitivityLabels", self._g_label_catalog),
            ("GET", r"/users", self._g_users),
            ("GET", r"/users/(?P<user>[^/]+)", self._g_user),
            ("GET", r"/users/(?P<user>[^/]+)/(?:transitiveMemberOf|memberOf)", self._g_member_of),
            ("GET", r"/users/(?P<user>[^/]+)/ownedObjects", self._g_owned_objects),
            ("GET", r"/groups/(?P<group>[^/]+)/owners", self._g_owners),
            ("GET", r"/groups/(?P<group>[^/]+)", self._g_group),
            ("GET", r"/groups/(?P<group>[^/]+)/(?:transitiveMembers|members)", self._g_members),
        ]
        for m, rx, handler in routes:
            match = re.fullmatch(rx, rel)
            if match and m == method:
                with self._lock:
                    return handler(q1, headers, body, **match.groupdict())
        return _error(400 if method not in ("GET", "POST") else 404, "itemNotFound" if method == "GET" else "BadRequest",
                      f"Resource not found for the segment '{rel}'.")

    def _page(self, values: list[dict[str, Any]], q1: Mapping[str, str], next_base: str) -> _Answer:
        skip = int(q1.get("$skiptoken", "0") or 0)
        top = int(q1.get("$top", self.page_size))
        page = values[skip: skip + top]
        out: dict[str, Any] = {"value": page}
        if skip + top < len(values):
            sep = "&" if "?" in next_base else "?"
            out["@odata.nextLink"] = f"{self.graph_url}{next_base}{sep}$top={top}&$skiptoken={skip + top}"
        return _Answer(200, out)

    def _g_sites(self, q1, headers, body):
        sites = [self._site_resource(s) for s in self.sites.values()]
        search = q1.get("search")
        if search not in (None, "*", ""):
            sites = [s for s in sites if search.lower() in (s["name"] + s["displayName"]).lower()]
        base = "/sites" + (f"?search={quote(search)}" if search is not None else "")
        return self._page(sites, q1, base)

    def _g_site_by_path(self, q1, headers, body, host, path):
        # "Get a site resource by path": GET /sites/{hostname}:/{server-relative-path}
        for s in self.sites.values():
            if s.path.lower() == path.rstrip("/").lower():
                return _Answer(200, self._site_resource(s))
        return _error(404, "itemNotFound", "Requested site could not be found")

    def _g_site(self, q1, headers, body, site):
        s = self.sites.get(site)
        if s is None and site == "root":
            s = next(iter(self.sites.values()), None)
        return _Answer(200, self._site_resource(s)) if s else _error(404, "itemNotFound", "Requested site could not be found")

    def _g_site_drives(self, q1, headers, body, site):
        s = self.sites.get(site)
        if s is None:
            return _error(404, "itemNotFound", "Requested site could not be found")
        return self._page([self._drive_resource(d) for d in s.drives], q1, f"/sites/{site}/drives")

    def _drive_or_404(self, drive: str) -> FakeDrive | _Answer:
        d = self.drives.get(drive)
        return d if d is not None else _error(404, "itemNotFound", "The drive cannot be found")

    def _g_drive(self, q1, headers, body, drive):
        d = self._drive_or_404(drive)
        return d if isinstance(d, _Answer) else _Answer(200, self._drive_resource(d))

    def _g_drive_list(self, q1, headers, body, drive):
        d = self._drive_or_404(drive)
        if isinstance(d, _Answer):
            return d
        site = self.sites[d.site_id]
        return _Answer(200, {"id": d.list_id, "name": d.name, "displayName": d.name,
                             "webUrl": f"{self.site_url(site)}/{quote(d.name)}",
                             "list": {"template": "documentLibrary", "hidden": False},
                             "parentReference": {"siteId": site.id}})

    def _g_root(self, q1, headers, body, drive):
        d = self._drive_or_404(drive)
        return d if isinstance(d, _Answer) else _Answer(200, self._drive_item(d, d.items[d.root_id]))

    def _item_or_404(self, drive: str, item: str) -> tuple[FakeDrive, FakeItem] | _Answer:
        d = self.drives.get(drive)
        it = d.items.get(item) if d else None
        if d is None or it is None or it.deleted:
            return _error(404, "itemNotFound", "The resource could not be found.")
        return d, it

    def _g_item(self, q1, headers, body, drive, item):
        found = self._item_or_404(drive, item)
        return found if isinstance(found, _Answer) else _Answer(200, self._drive_item(*found))

    def _g_children(self, q1, headers, body, drive, item):
        found = self._item_or_404(drive, item)
        if isinstance(found, _Answer):
            return found
        d, it = found
        kids = [self._drive_item(d, x) for x in d.items.values() if x.parent_id == it.id and not x.deleted]
        return self._page(kids, q1, f"/drives/{drive}/items/{item}/children")

    def _g_content(self, q1, headers, body, drive, item):
        found = self._item_or_404(drive, item)
        if isinstance(found, _Answer):
            return found
        _d, it = found
        if it.kind != "file":
            return _error(404, "itemNotFound", "The item has no content stream.")
        # Graph answers 302 to a short-lived pre-authenticated download URL (no Authorization needed).
        return _Answer(302, None, {"Location": f"{self.base_url}/_download/{drive}/{item}?tempauth={secrets.token_hex(8)}"})

    def _download(self, path: str) -> _Answer:
        parts = path.split("/")
        with self._lock:
            d = self.drives.get(parts[2]) if len(parts) > 3 else None
            it = d.items.get(parts[3]) if d else None
            if it is None or it.deleted:
                return _Answer(404, b"not found")
            return _Answer(200, it.content)

    def _g_permissions(self, q1, headers, body, drive, item):
        found = self._item_or_404(drive, item)
        if isinstance(found, _Answer):
            return found
        return _Answer(200, {"value": self._permission_entries(*found)})

    def _g_labels(self, q1, headers, body, drive, item):
        found = self._item_or_404(drive, item)
        if isinstance(found, _Answer):
            return found
        _, it = found
        if it.label_error:
            return _error(it.label_error, "locked" if it.label_error == 423 else "notSupported",
                          "The file is encrypted with double key encryption." if it.label_error == 423 else "Cannot extract labels")
        labels = [] if it.label_id is None else [
            {"sensitivityLabelId": it.label_id, "assignmentMethod": "standard", "tenantId": self.tenant_id}]
        return _Answer(200, {"labels": labels})

    def _g_label_catalog(self, q1, headers, body):
        return _Answer(200, {"value": [{"id": k, "name": v, "description": "", "isActive": True}
                                       for k, v in self.labels.items()]})

    def _g_users(self, q1, headers, body):
        users = list(self.users.values())
        flt = q1.get("$filter", "")
        m = re.fullmatch(r"\s*(\w+)\s+eq\s+'([^']*)'\s*", flt) if flt else None
        if flt and not m:
            return _error(400, "Request_UnsupportedQuery", f"Unsupported filter: {flt}")
        if m:
            attr = {"onPremisesSamAccountName": "sam", "userPrincipalName": "upn", "mail": "mail", "id": "id"}.get(m.group(1))
            if attr is None:
                return _error(400, "Request_UnsupportedQuery", f"Unsupported filter property: {m.group(1)}")
            users = [u for u in users if (getattr(u, attr) or "").lower() == m.group(2).lower()]
        return self._page([u.resource() for u in users], q1, "/users" + (f"?$filter={quote(flt)}" if flt else ""))

    def _g_user(self, q1, headers, body, user):
        try:
            return _Answer(200, self.user(user).resource())
        except KeyError:
            return _error(404, "Request_ResourceNotFound", f"Resource '{user}' does not exist or one of its queried reference-property objects are not present.")

    def _g_member_of(self, q1, headers, body, user):
        try:
            u = self.user(user)
        except KeyError:
            return _error(404, "Request_ResourceNotFound", f"Resource '{user}' does not exist.")
        groups = sorted(self.transitive_groups(u.id), key=lambda g: g.display_name)
        return self._page([g.resource() for g in groups], q1, f"/users/{user}/transitiveMemberOf")

    def _g_owned_objects(self, q1, headers, body, user):
        """"List ownedObjects": the directory objects the user owns (here: groups), shaped like
        the page's example (``{"value": [{"id": …}]}``) plus their ``@odata.type``."""
        try:
            u = self.user(user)
        except KeyError:
            return _error(404, "Request_ResourceNotFound", f"Resource '{user}' does not exist.")
        owned = [{"@odata.type": "#microsoft.graph.group", "id": g.id} for g in self.groups.values() if u.id in g.owners]
        return self._page(owned, q1, f"/users/{user}/ownedObjects")

    def _g_owners(self, q1, headers, body, group):
        g = self.groups.get(group)
        if g is None:
            return _error(404, "Request_ResourceNotFound", f"Resource '{group}' does not exist.")
        return self._page([self.users[o].resource() for o in g.owners if o in self.users], q1, f"/groups/{group}/owners")

    def _g_group(self, q1, headers, body, group):
        g = self.groups.get(group)
        return _Answer(200, g.resource()) if g else _error(404, "Request_ResourceNotFound", f"Resource '{group}' does not exist.")

    def _g_members(self, q1, headers, body, group):
        if group not in self.groups:
            return _error(404, "Request_ResourceNotFound", f"Resource '{group}' does not exist.")
        return self._page([m.resource() for m in self.transitive_members(group)], q1, f"/groups/{group}/transitiveMembers")

    # --------------------------------------------------------------- delta

    def _g_delta(self, q1, headers, body, drive, ftoken=None):
        d = self._drive_or_404(drive)
        if isinstance(d, _Answer):
            return d
        token = ftoken if ftoken is not None else q1.get("token")
        prefer = ",".join(v for k, v in headers.items() if k == "prefer").lower()
        sharing = "deltashowsharingchanges" in prefer
        skip = int(q1.get("$skiptoken", "0") or 0)
        if token == "latest":
            return _Answer(200, {"value": [], "@odata.deltaLink": f"{self.graph_url}/drives/{drive}/root/delta?token={d.seq}"})
        if token is not None and skip == 0 and self._gone.get(drive):
            code = self._gone[drive].pop(0)
            return _error(410, code, "Resync required. Replace any local items with the server's version (including deletes) "
                          "if you're sure that the service was up to date with your local changes when you last sync'd.",
                          {"Location": f"{self.graph_url}/drives/{drive}/root/delta"})
        since = int(token) if token not in (None, "") else None
        if since is not None and since > d.seq:
            return _error(410, "resyncRequired", "The delta token is not valid for this drive.",
                          {"Location": f"{self.graph_url}/drives/{drive}/root/delta"})
        index = self._index(d)
        picked = self._delta_rows(d, since, sharing, index)
        extra = list(self._extra_delta.get(drive, []))
        rows: list[tuple[FakeItem, bool] | dict[str, Any]] = [*picked, *extra]
        top = int(q1.get("$top", self.page_size))
        page: list[dict[str, Any]] = []
        for row in rows[skip: skip + top]:
            if isinstance(row, dict):
                page.append(row)
                continue
            entry = self._drive_item(d, row[0], index, in_delta=True)
            if row[1]:
                entry["@microsoft.graph.sharedChanged"] = "True"
            page.append(entry)
        start = since if since is not None else ""
        out: dict[str, Any] = {"@odata.context": f"{self.graph_url}/$metadata#Collection(driveItem)", "value": page}
        if skip + top < len(rows):
            out["@odata.nextLink"] = f"{self.graph_url}/drives/{drive}/root/delta?token={start}&$skiptoken={skip + top}"
        else:
            out["@odata.deltaLink"] = f"{self.graph_url}/drives/{drive}/root/delta?token={d.seq}"
            self._extra_delta.pop(drive, None)  # served in this round
        return _Answer(200, out)

    def _delta_rows(self, d: FakeDrive, since: int | None, sharing: bool, index: _Index) -> list[tuple[FakeItem, bool]]:
        """(item, sharing changed) for every change since ``since`` (the whole live drive when None),
        parents first; cached while the drive doesn't change (the pages of one round)."""
        perm_mark = max((x.perm_seq for x in d.items.values()), default=0)
        key = (d.id, since, sharing)
        cached = self._delta_cache.get(key)
        if cached is not None and cached[0] == d.seq and cached[1] == perm_mark:
            return cached[2]
        picked: list[tuple[FakeItem, bool]] = []
        for it in d.items.values():
            if since is None:
                if not it.deleted:
                    picked.append((it, False))
                continue
            shared = sharing and it.perm_seq > since and not it.deleted
            if it.seq > since or shared:
                picked.append((it, shared))
        picked.sort(key=lambda p: (p[0].kind != "root", index.depth.get(p[0].id, 0), p[0].seq))
        self._delta_cache[key] = (d.seq, perm_mark, picked)
        return picked

    # --------------------------------------------------------------- $batch

    def _batch(self, body: bytes, headers: Mapping[str, str]) -> _Answer:
        try:
            payload = json.loads(body or b"{}")
            reqs = payload["requests"]
        except (ValueError, KeyError, TypeError):
            return _error(400, "BadRequest", "Invalid batch payload format.")
        if len(reqs) > 20:
            return _error(400, "BadRequest", "Number of batch requests exceeds the limit of 20.")
        responses = []
        for sub in reqs:
            url = sub.get("url", "")
            split = urlsplit(url if url.startswith("/") else "/" + url)
            sub_headers = {**{k.lower(): v for k, v in (sub.get("headers") or {}).items()}}
            sub_body = json.dumps(sub["body"]).encode() if sub.get("body") is not None else b""
            ans = self._dispatch(sub.get("method", "GET").upper(), unquote(split.path),
                                 parse_qs(split.query, keep_blank_values=True), sub_headers, sub_body, in_batch=True)
            resp: dict[str, Any] = {"id": sub.get("id"), "status": ans.status,
                                    "headers": {"Content-Type": "application/json", **ans.headers}}
            if isinstance(ans.body, (bytes, bytearray)):
                resp["body"] = base64.b64encode(bytes(ans.body)).decode()
                resp["headers"]["Content-Type"] = "application/octet-stream"
            elif ans.body is not None:
                resp["body"] = ans.body
            responses.append(resp)
        # "Individual responses might appear in a different order than the requests" (JSON batching)
        return _Answer(200, {"responses": responses[::-1]})

    # --------------------------------------------------------------- SharePoint REST

    def _rest(self, method: str, web_path: str, rest: str, query: Mapping[str, list[str]], headers: Mapping[str, str]) -> _Answer:
        with self._lock:
            site = next((s for s in self.sites.values() if s.path.lower() == web_path.rstrip("/").lower()), None)
            if site is None:
                return self._rest_error(404, "-2147024894, System.IO.FileNotFoundException", "File Not Found.")
            if site.rest_refusal is not None:
                return self._rest_error(site.rest_refusal, "-2147024891, System.UnauthorizedAccessException",
                                        "Access denied.")
            verbose = "odata=verbose" in headers.get("accept", "odata=verbose")
            low = rest.rstrip("/").lower()
            q1 = {k.lower(): v[0] for k, v in query.items()}
            expand = {e.strip().lower() for e in q1.get("$expand", "").split(",") if e.strip()}
            if low == "contextinfo" and method == "POST":
                info = {"FormDigestValue": "0x" + secrets.token_hex(32) + "," + _now_iso(), "FormDigestTimeoutSeconds": 1800,
                        "WebFullUrl": self.site_url(site), "SiteFullUrl": self.site_url(site), "LibraryVersion": "16.0.0.0"}
                return _Answer(200, {"d": {"GetContextWebInformation": info}} if verbose else info)
            if low == "web" and method == "GET":
                web = {"Id": site.web_id, "Title": site.display_name, "Url": self.site_url(site),
                       "ServerRelativeUrl": site.path}
                return self._rest_entity(web, "SP.Web", verbose)
            m = re.fullmatch(r"web/roleassignments", low)
            if m and method == "GET":
                return self._rest_collection(self._rest_assignments(site, site.role_assignments, expand), verbose)
            m = re.fullmatch(r"web/lists(?:\(guid'([0-9a-f-]+)'\)|/getbyid\('([0-9a-f-]+)'\))/roleassignments", low)
            if m and method == "GET":
                list_id = m.group(1) or m.group(2)
                drive = next((d for d in site.drives if d.list_id.lower() == list_id), None)
                if drive is None:
                    return self._rest_error(404, "-1, System.ArgumentException", "List does not exist.")
                assignments = drive.role_assignments if drive.role_assignments is not None else site.role_assignments
                return self._rest_collection(self._rest_assignments(site, assignments, expand), verbose)
            m = re.fullmatch(r"web/lists(?:\(guid'([0-9a-f-]+)'\)|/getbyid\('([0-9a-f-]+)'\))/items", low)
            if m and method == "GET":
                drive = next((d for d in site.drives if d.list_id.lower() == (m.group(1) or m.group(2))), None)
                if drive is None:
                    return self._rest_error(404, "-1, System.ArgumentException", "List does not exist.")
                return self._rest_list_items(site, drive, q1, rest, query, verbose)
            if low == "web/sitegroups" and method == "GET":
                return self._rest_collection([self._rest_group(g) for g in site.groups.values()], verbose)
            m = re.fullmatch(r"web/sitegroups/getbyid\((\d+)\)/users", low)
            if m and method == "GET":
                g = site.groups.get(int(m.group(1)))
                if g is None:
                    return self._rest_error(404, "-2146232832, Microsoft.SharePoint.SPException", "Group cannot be found.")
                return self._rest_collection([self._rest_user(site, login) for login in g.members], verbose)
            m = re.fullmatch(r"web/sitegroups/getbyid\((\d+)\)", low)
            if m and method == "GET":
                g = site.groups.get(int(m.group(1)))
                if g is None:
                    return self._rest_error(404, "-2146232832, Microsoft.SharePoint.SPException", "Group cannot be found.")
                return self._rest_entity(self._rest_group(g), "SP.Group", verbose)
            return self._rest_error(404, "-1, Microsoft.SharePoint.Client.InvalidClientQueryException",
                                    f"The expression \"{rest}\" is not valid.")

    def _rest_list_items(self, site: FakeSite, d: FakeDrive, q1: Mapping[str, str], rest: str,
                         query: Mapping[str, list[str]], verbose: bool) -> _Answer:
        """``GET …/lists(guid'…')/items?$select=Id,FileRef,HasUniqueRoleAssignments&$top=n``: the
        list items (files and folders) with their server-relative ``FileRef`` and
        ``HasUniqueRoleAssignments`` ("SecurableObject.HasUniqueRoleAssignments": whether the
        role assignments are uniquely defined for this object or inherited), paged server-side
        (``__next`` in verbose JSON, ``odata.nextLink`` otherwise, with ``$skiptoken``)."""
        live = [it for it in d.items.values() if not it.deleted and it.kind != "root"]
        top = int(q1.get("$top", "100") or 100)
        skip = int((q1.get("$skiptoken", "") or "Paged=TRUE&p_ID=0").rsplit("=", 1)[-1] or 0)
        rows = []
        for n, it in enumerate(live, start=1):
            if n <= skip:
                continue
            rows.append({"__type": "SP.Data.DocumentsItem", "Id": n,
                         "FileRef": f"{site.path}/{d.name}/{self._item_path(d, it)}",
                         "HasUniqueRoleAssignments": it.permissions is not None})
            if len(rows) == top:
                break
        last = skip + len(rows)
        next_url = None
        if last < len(live):
            params = {k: v[0] for k, v in query.items() if k.lower() != "$skiptoken"}
            params["$skiptoken"] = f"Paged=TRUE&p_ID={last}"
            next_url = f"{self.site_url(site)}/_api/{rest}?" + "&".join(f"{k}={quote(v)}" for k, v in params.items())
        if verbose:
            body: dict[str, Any] = {"results": [self._verbose(r) for r in rows]}
            if next_url:
                body["__next"] = next_url
            return _Answer(200, {"d": body})
        out: dict[str, Any] = {"value": [self._light(r) for r in rows]}
        if next_url:
            out["odata.nextLink"] = next_url
        return _Answer(200, out)

    def _rest_assignments(self, site: FakeSite, assignments: list[tuple[str, list[str]]], expand: set[str]) -> list[dict[str, Any]]:
        """``SP.RoleAssignment`` entries of a securable object's ``roleassignments`` ("Set custom
        permissions on a list by using the REST interface", :data:`support.ms_docs.ROLE_ASSIGNMENTS`;
        "SP.RoleAssignmentCollection object",
        https://learn.microsoft.com/previous-versions/office/sharepoint-visio/jj247079(v=office.15)):
        ``PrincipalId``, and with ``$expand=Member,RoleDefinitionBindings`` the member (``SP.Group``
        or ``SP.User``) and its role definitions."""
        out = []
        for login, roles in assignments:
            if login.startswith("group:"):
                member = self._rest_group(site.groups[int(login.split(":", 1)[1])])
            else:
                member = self._rest_user(site, login)
            entry: dict[str, Any] = {"PrincipalId": member["Id"]}
            if "member" in expand:
                entry["Member"] = member
            if "roledefinitionbindings" in expand:
                entry["RoleDefinitionBindings"] = [self._rest_role(r) for r in roles]
            out.append(entry)
        return out

    @staticmethod
    def _rest_group(g: SiteGroup) -> dict[str, Any]:
        """An ``SP.Group`` (``PrincipalType`` 8, SharePoint group; same pages as
        :meth:`_rest_assignments`)."""
        return {"__type": "SP.Group", "Id": g.id, "Title": g.title, "LoginName": g.title, "PrincipalType": 8,
                "IsHiddenInUI": False, "OwnerTitle": "System Account", "Description": None}

    def _rest_user(self, site: FakeSite, login: str) -> dict[str, Any]:
        """An ``SP.User`` (a user, or an Entra group / everyone claim: ``PrincipalType`` 4)."""
        pid = site.site_users.setdefault(login, 100 + len(site.site_users))
        title, email, ptype = self._login_title(login), "", 1
        if login.startswith("i:0#.f|membership|"):
            with contextlib.suppress(KeyError):
                email = self.user(login.rsplit("|", 1)[1]).mail or ""
        elif login.startswith("c:0"):
            ptype = 4
        return {"__type": "SP.User", "Id": pid, "Title": title, "LoginName": login, "Email": email,
                "PrincipalType": ptype, "IsSiteAdmin": False, "IsHiddenInUI": False}

    @staticmethod
    def _rest_role(name: str) -> dict[str, Any]:
        """An ``SP.RoleDefinition`` with its ``BasePermissions`` (``Low``/``High`` words of
        ``SPBasePermissions``: ``ViewListItems`` = 0x1) for one of SharePoint's default permission
        levels (:data:`ROLE_DEFINITIONS`)."""
        rid, low, high = ROLE_DEFINITIONS[name]
        return {"__type": "SP.RoleDefinition", "Id": rid, "Name": name, "Hidden": name == "Limited Access",
                "RoleTypeKind": 0, "Order": 0, "BasePermissions": {"Low": str(low), "High": str(high)}}

    def _rest_entity(self, entity: dict[str, Any], type_name: str, verbose: bool) -> _Answer:
        return _Answer(200, {"d": self._verbose(entity)} if verbose else self._light(entity))

    def _rest_collection(self, entities: list[dict[str, Any]], verbose: bool) -> _Answer:
        if verbose:
            return _Answer(200, {"d": {"results": [self._verbose(e) for e in entities]}})
        return _Answer(200, {"value": [self._light(e) for e in entities]})

    def _verbose(self, value: Any) -> Any:
        if isinstance(value, list):
            return {"results": [self._verbose(v) for v in value]}
        if isinstance(value, dict):
            out = {k: self._verbose(v) for k, v in value.items() if k != "__type"}
            if "__type" in value:
                out["__metadata"] = {"type": value["__type"]}
            if "BasePermissions" in value:
                out["BasePermissions"] = {"__metadata": {"type": "SP.BasePermissions"}, **value["BasePermissions"]}
            return out
        return value

    def _light(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._light(v) for v in value]
        if isinstance(value, dict):
            return {k: self._light(v) for k, v in value.items() if k != "__type"}
        return value

    @staticmethod
    def _rest_error(status: int, code: str, message: str) -> _Answer:
        return _Answer(status, {"error": {"code": code, "message": {"lang": "en-US", "value": message}}})

    # --------------------------------------------------------------- app certificate

    def _make_app_certificate(self) -> AppCertificate:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ancre-test-app")])
        now = dt.datetime.now(dt.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
                .not_valid_after(now + dt.timedelta(days=30)).sign(key, hashes.SHA256()))
        key_path = self._tmpdir / "app-key.pem"
        cert_path = self._tmpdir / "app-cert.pem"
        pfx_path = self._tmpdir / "app.pfx"
        passphrase = "pfx-" + secrets.token_hex(4)
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pfx_path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"ancre-test-app", key, cert, None, serialization.BestAvailableEncryption(passphrase.encode())))
        return AppCertificate(key_path, cert_path, pfx_path, passphrase,
                              cert.fingerprint(hashes.SHA1()).hex().upper(),  # x5t is SHA-1 by spec
                              cert.fingerprint(hashes.SHA256()).hex().upper())


def _mime(name: str) -> str:
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return {
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "pdf": "application/pdf",
        "md": "text/markdown",
        "txt": "text/plain",
    }.get(ext, "application/octet-stream")


@contextlib.contextmanager
def running(ms: FakeMicrosoft) -> Iterator[FakeMicrosoft]:
    """Context manager starting ``ms`` if needed and stopping it afterwards."""
    with ms:
        yield ms
