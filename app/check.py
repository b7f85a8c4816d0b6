"""``ancre check``: the configuration reaches every part, one line per part with what to fix.

Each check contacts the real thing once, cheaply: each source lists its root and reads one ACL
(SMB: the share root's security descriptor, with the share permissions applied; folder: the first
file's ACL from the manifest or the configured principals), the directory binds and resolves a
user, the embedder embeds one query, the store opens (against that embedder) and counts, the
answering model and the judge are looked up on their servers (present or not, with the command
that fixes it) and answer one short message. ``ancre sync`` runs
:func:`check_directory` before its first pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ancre.acl.directory import AccountName, AccountNames
from ancre.acl.engine import acl_problem
from ancre.app.check_result import CheckResult, directory_configured
from ancre.config import Settings, SourceSettings
from ancre.connectors.base import Checkable, Closeable, LocalTree
from ancre.errors import (
    AncreError,
    ConfigError,
    DirectoryError,
    EmbedderMismatchError,
    SourceUnavailableError,
    StoreLockedError,
)
from ancre.models import identity_defect, visible_identity
from ancre.settings import FileDirectoryConfig

if TYPE_CHECKING:
    from ancre.app.runtime import Runtime

DEFAULT_USER_TRIES = 10
"""Without a user to resolve, the first accounts the directory lists are tried, up to this many,
until one resolves (built-in accounts may be disabled)."""


def _directory_fix(e: AncreError) -> str:
    msg = str(e)
    if "tls_server_name" in msg or "ca_file" in msg or "LDAPS/StartTLS" in msg:
        return "see the message: the setting is named there"
    if "refused" in msg:
        return "check directory.bind_dn and its password (directory.bind_password)"
    if "unreachable" in msg:
        return "check directory.url (host, port, ldaps:// or ldap://) and that the DC answers from this host"
    if "tokenGroups" in msg:
        return "give the bind account the right to read tokenGroups on user accounts"
    return "check the [directory] section"


def check_directory(rt: Runtime, user: str | None = None) -> CheckResult:
    """Bind to the directory and resolve ``user`` (else ``directory.check_user``, else the first
    account the directory lists that resolves). Fails on a directory error, an unknown or
    disabled ``user``, or a directory that knows no usable account. Never raises."""
    part = "directory"
    cfg = rt.settings.directory
    if not directory_configured(rt.settings):
        return CheckResult(
            part, False, "no directory configured",
            'set [directory] kind = "ldap" (with url, base_dn…) or kind = "file" with path',
        )
    where = str(cfg.path) if isinstance(cfg, FileDirectoryConfig) else cfg.ldap_urls[0]
    wanted = user or cfg.check_user
    try:
        d = rt.directory
        if wanted:
            principals = d.principals(wanted)
            if not principals:
                return CheckResult(
                    part, False, f"{where}: user {wanted!r} is unknown to the directory (or disabled)",
                    "give an existing, enabled account (sAMAccountName, UPN or DOMAIN\\user) with --as or directory.check_user",
                )
            return CheckResult(part, True, f"{where}: {wanted} resolves to {len(principals)} principals")
        names = d.users()
        for name in names[:DEFAULT_USER_TRIES]:
            principals = d.principals(name)
            if principals:
                return CheckResult(part, True, f"{where}: {len(names)} accounts; {name} resolves to {len(principals)} principals")
        return CheckResult(
            part, False, f"{where}: no account resolves ({len(names)} listed)",
            "check directory.base_dn (and the directory file's users), or name an account with --as / directory.check_user",
        )
    except (DirectoryError, ConfigError) as e:
        return CheckResult(part, False, str(e), _directory_fix(e))
    except AncreError as e:
        return CheckResult(part, False, f"{type(e).__name__}: {e}", "check the [directory] section")


def unusable_identities(names: Sequence[AccountName], user_map: Mapping[str, str]) -> list[str]:
    """The identities no request can ever be matched to (issue 40): each directory name (account,
    UPN, mail) and each ``api.user_map`` e-mail or account carrying whitespace at either end (or,
    for an e-mail, anywhere), a control, format or default-ignorable character
    (:func:`~ancre.models.identity_defect`) — described with the character made visible
    (``alice@axonix.ch<U+00A0>``: never the raw character)."""
    out: list[str] = []
    for n in names:
        defect = identity_defect(n.value, inner_space=n.attribute.lower() == "samaccountname")
        if defect is not None:
            out.append(f"{n.attribute} {visible_identity(n.value)!r} of {visible_identity(n.account)!r}: {defect}")
    for email, account in user_map.items():
        defect = identity_defect(email)
        if defect is not None:
            out.append(f"api.user_map e-mail {visible_identity(email)!r}: {defect}")
        defect = identity_defect(account, inner_space=True)
        if defect is not None:
            out.append(f"api.user_map account {visible_identity(account)!r}: {defect}")
    return out


def check_identities(rt: Runtime) -> CheckResult:
    """Warn about the directory's accounts (:class:`~ancre.acl.directory.AccountNames`) and
    ``api.user_map`` entries that carry whitespace or invisible characters: an identity is taken
    as it is, so they can never be matched (:func:`unusable_identities`). Never raises."""
    part = "identities"
    try:
        d = rt.directory if directory_configured(rt.settings) else None
        names: list[AccountName] = d.account_names() if isinstance(d, AccountNames) else []
    except AncreError as e:
        return CheckResult(part, False, f"the directory's accounts could not be listed: {e}", _directory_fix(e))
    found = unusable_identities(names, rt.settings.api.user_map)
    if not found:
        return CheckResult(part, True, f"{len(names)} directory name(s) and {len(rt.settings.api.user_map)} "
                                       "api.user_map entr(ies) usable as identities")
    shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
    return CheckResult(part, True, f"{len(found)} identit(ies) can never be matched: {shown}",
                       "remove the space or invisible character in the directory or in api.user_map (an identity is "
                       "taken exactly as written: docs/SECURITY.md, Identities)", warn=True)


def check_source(rt: Runtime, src: SourceSettings) -> CheckResult:
    """The connector's own check when it is :class:`~ancre.connectors.base.Checkable`, else list
    the source and read one ACL. Never raises."""
    part = f"source {src.id}"
    conn = None
    try:
        conn = rt.connector(src)
        if isinstance(conn, Checkable):
            res = conn.check()
            return CheckResult(part, res.ok, res.detail, res.fix or None)
        where = str(conn.root) if isinstance(conn, LocalTree) else src.id
        items = conn.list_items().items
        if not items:
            return CheckResult(part, True, f"{where}: listed, no indexable file")
        acl = conn.fetch_acl(items[0])
        issue = acl_problem(acl)
        if issue is not None:
            return CheckResult(
                part, False, f"{len(items)} files; the ACL of {items[0].path} can't be read: {issue}",
                "fix the source's acl_manifest entry or principals named in the message",
            )
        return CheckResult(part, True, f"{where}: {len(items)} files; {items[0].path} readable by {len(acl.allow)} principal(s)")
    except SourceUnavailableError as e:
        return CheckResult(
            part, False, str(e), f"check sources.{src.id} (root, server, share, credentials) and that it is reachable"
        )
    except AncreError as e:
        return CheckResult(part, False, str(e), f"check sources.{src.id}")
    except Exception as e:  # a check reports, it does not crash
        return CheckResult(part, False, f"{type(e).__name__}: {e}", f"check sources.{src.id}")
    finally:
        if isinstance(conn, Closeable):
            conn.close()


def check_embedder(rt: Runtime) -> CheckResult:
    """Embed one query with the configured embedder. Never raises."""
    cfg = rt.settings.embedder
    try:
        vec = rt.embedder.embed_query("vérification de la configuration")
        return CheckResult("embedder", True, f"{rt.embedder.name}: one embedding of {len(vec)} dimensions")
    except Exception as e:  # a check reports any failure of the embedder, never raises
        url = getattr(cfg, "url", None)
        where = f" at embedder.url = {url}" if url else ""
        return CheckResult(
            "embedder", False, f"{cfg.kind}{where}: {e}", "check embedder.url (the server answers from this host), "
                                                          "embedder.kind and embedder.model (is the model pulled?)"
        )


def check_store(rt: Runtime) -> CheckResult:
    """Open the store against the embedder and count its points. A store owned by another
    process (the daemon) is reported as reachable. Never raises."""
    from ancre.models import COLLECTIONS

    cfg = rt.settings.store
    try:
        counts = {c: rt.store.count(c) for c in COLLECTIONS}
        return CheckResult("store", True, f"{cfg.kind}: " + ", ".join(f"{n} points in {c}" for c, n in counts.items()))
    except StoreLockedError as e:
        # the running daemon (or ancre serve) owns it: that is how it should be while the service runs
        return CheckResult("store", True, f"{cfg.kind}: owned by the running ancre ({e.owner or 'another process'}); "
                                          "`ancre status` reads it through that process")
    except EmbedderMismatchError as e:
        return CheckResult("store", False, str(e), "run `ancre reindex` (or configure the embedder that built the index)")
    except Exception as e:  # a check reports any failure of the store, never raises
        fix = "check store.url (the server answers from this host) and store.api_key" if cfg.kind == "qdrant" else \
            "check data_dir (its file system, free space and owner) or run `ancre reindex`"
        return CheckResult("store", False, f"{cfg.kind}: {e}", fix)


def check_api(settings: Settings) -> CheckResult:
    """The API's secrets as ``ancre api`` / ``ancre serve`` will read them: the service key (its
    variable and length) and how users are identified — with a user JWT secret, its variable,
    its length in bytes and a SHA-256 fingerprint to compare with Open WebUI's
    ``FORWARD_USER_INFO_HEADER_JWT_SECRET`` (:func:`~ancre.api.identity.identity_mode`). No
    service key configured at all is reported, not failed (the API is not used). Never raises."""
    from ancre.api.identity import Secrets, identity_mode

    cfg = settings.api
    if cfg.api_key is None:
        return CheckResult(
            "api", True, "no service key configured (api.api_key): `ancre api` and `ancre serve` will not start"
        )
    try:
        secrets = Secrets.from_config(cfg)
    except ConfigError as e:
        return CheckResult("api", False, str(e), _SECRET_FIX)
    weak = [f"{key} ({ref.where(key)}): {why}" for key, ref, value in (
        ("api.api_key", cfg.api_key, secrets.api_key),
        ("api.user_jwt_secret", cfg.user_jwt_secret, secrets.user_jwt_secret),
        ("api.signing_secret", cfg.signing_secret, secrets.signing_secret),
    ) if ref is not None and value is not None and (why := secret_weakness(value)) is not None]
    if weak:
        return CheckResult("api", False, "; ".join(weak), f"make each one with `{MAKE_SECRET}` (32 random bytes, "
                                                          "64 hex characters) and put it where the key names")
    where = cfg.api_key.where("api.api_key")
    n = len(secrets.api_key)
    return CheckResult("api", True, f"service key from {where} ({n} character{'s' if n != 1 else ''}); "
                                    f"{identity_mode(cfg, secrets, fingerprint=True)}")


MIN_SECRET_BYTES = 32
"""A service key or secret is at least this many bytes (as text: 32 random bytes are 64 hex digits)."""
MIN_SECRET_GUESSES_LOG10 = 38.0
"""…and zxcvbn must estimate at least 10^38 guesses (≈ 2^128) to find it: a random value of 32
bytes written as hex or base64 is estimated at 10^42 and more; words, names, dates, repeats,
keyboard runs and sequences count for little, and 16 random bytes for 10^32 at most."""
MAKE_SECRET = "openssl rand -hex 32"
"""The command that makes a good one."""


def secret_weakness(secret: str) -> str | None:
    """Why ``secret`` (an API key, a JWT or signing secret) is too weak, else ``None``: shorter
    than :data:`MIN_SECRET_BYTES` bytes (UTF-8), or guessable — fewer than
    10^:data:`MIN_SECRET_GUESSES_LOG10` guesses as zxcvbn (Dropbox's estimator: dictionary
    words, names, dates, repeats, sequences, keyboard patterns; "zxcvbn: Low-Budget Password
    Strength Estimation", USENIX Security 2016) estimates it. The message never holds the secret."""
    from zxcvbn import zxcvbn

    n = len(secret.encode("utf-8"))
    if n < MIN_SECRET_BYTES:
        return f"{n} bytes: at least {MIN_SECRET_BYTES} bytes of random text are needed"
    guesses = float(zxcvbn(secret, max_length=256)["guesses_log10"])
    if guesses < MIN_SECRET_GUESSES_LOG10:
        return (f"{n} bytes but guessable (about 10^{guesses:.0f} guesses: words, repeats, sequences or too "
                f"little randomness; at least 10^{MIN_SECRET_GUESSES_LOG10:.0f} are needed)")
    return None


_SECRET_FIX = ("provide what the message names — the variable in the service's environment (/etc/ancre/ancre.env), "
               "the file (mode 0600), or the unit's LoadCredential= (systemd/ancre.service) — or fix [api]")
"""The fix of an API secret that can't be read, whichever form (env, file, credential) it has."""


def check_files(settings: Settings) -> list[CheckResult]:
    """Every file and folder key as this process will use it
    (:func:`~ancre.settings.locations.path_problems`): one failed line per key that can't play its
    role (a CA file, certificate or manifest missing or unreadable, a data folder that can't be
    written), else one line saying they all can. Never raises."""
    from ancre.settings.locations import path_problems

    problems = path_problems(settings)
    if not problems:
        return [CheckResult("files", True, "every file and folder the configuration names is usable")]
    return [CheckResult("files", False, p, "fix the path (or the file's owner and mode) of the key named") for p in problems]


def _ping(client: object) -> str:
    from ancre.query.llm import ChatClient
    from ancre.query.prompt import ChatMessage

    assert isinstance(client, ChatClient)
    res = client.chat([ChatMessage("user", "Réponds seulement : OK")], temperature=0.0)
    return res.content.strip()[:40]


def _window(client: object, settings_num_ctx: int) -> str:
    """What the model's server says of its context length, and the window ancre asks for."""
    from ancre.query.llm import ChatClient

    assert isinstance(client, ChatClient)
    info = client.info()
    length = f"context length {info.context_length} tokens" if info.context_length else "context length not said"
    return f"{length}; num_ctx {settings_num_ctx} or more" if client.sets_window else length


def check_model(role: str, client: object, num_ctx: int) -> list[CheckResult]:
    """``role``'s model (``llm``, ``judge``): present on its server (Ollama ``/api/tags``,
    ``/v1/models``; absent: the fix, ``ollama pull …``), its context length, one short chat; and,
    for an OpenAI-compatible kind, a warning when the server is an Ollama (its ``/api/version``
    answers), whose OpenAI endpoint can't set the window. Never raises."""
    from ancre.query.llm import ChatClient, OpenAIChat
    from ancre.query.model_status import model_status

    assert isinstance(client, ChatClient)
    out: list[CheckResult] = []
    status = model_status(role, client)
    where = f"{client.kind} {client.model} at {status.url}"
    if status.present is False:
        return [CheckResult(role, False, f"{where}: not on the server", status.fix)]
    if isinstance(client, OpenAIChat) and client.server_is_ollama():
        out.append(CheckResult(
            role, True, f"{where}: this server is an Ollama (/api/version answers): its OpenAI-compatible endpoint "
            "can't set the context window, so a long prompt is cut without an error", warn=True,
            fix=f'set {role}.kind = "ollama" and {role}.url to the server without /v1'))
    try:
        answer = _ping(client)
        out.append(CheckResult(role, True, f"{where}: answered {answer!r} ({_window(client, num_ctx)})"))
    except Exception as e:  # a check reports any failure of the model, never raises
        out.append(CheckResult(role, False, f"{where}: {e}", f"check {role}.url and {role}.model"))
    return out


def check_models(rt: Runtime) -> list[CheckResult]:
    """:func:`check_model` for the answering model and the judge, when configured (no line for
    ``llm.kind = "none"``: extractive mode; none for a disabled judge). Never raises."""
    from ancre.query.model_status import configured_clients

    cfg = rt.settings
    if cfg.llm.kind == "none":
        return []
    try:
        clients = configured_clients(cfg)
    except ConfigError as e:
        return [CheckResult("llm", False, str(e), "fix [llm] / [judge]")]
    out: list[CheckResult] = []
    try:
        for role, client in clients:
            out += check_model(role, client, cfg.llm.num_ctx if role == "llm" else cfg.judge.num_ctx)
    finally:
        for _, client in clients:
            client.close()
    return out


def run_checks(
    rt: Runtime, user: str | Sequence[str] | None = None, on_result: Callable[[CheckResult], None] | None = None
) -> list[CheckResult]:
    """Every check, in order: the file and folder keys, the API's secrets, directory (each of ``user``, ``--as``), each
    source, what the checked users and the sources' readers can read
    (:func:`~ancre.app.check_reach.check_reach`), embedder, store, answering model, judge.
    ``on_result`` is called as each result is known (for printing as they come)."""
    from ancre.app.check_reach import check_reach, checked_users

    users = [user] if isinstance(user, str) else list(user or ())
    results: list[CheckResult] = []

    def add(r: CheckResult) -> None:
        results.append(r)
        if on_result is not None:
            on_result(r)

    for r in check_files(rt.settings):
        add(r)
    add(check_api(rt.settings))
    directory = [check_directory(rt, u) for u in users] or [check_directory(rt)]
    for r in directory:
        add(r)
    if all(r.ok for r in directory) and (directory_configured(rt.settings) or rt.settings.api.user_map):
        add(check_identities(rt))  # a directory that failed is reported once, above
    if not rt.settings.sources:
        add(CheckResult("sources", False, "no source configured", "add a [[sources]] section"))
    for src in rt.settings.sources:
        add(check_source(rt, src))
    for r in check_reach(rt, checked_users(rt, users), rt.settings.sources, time.time()):
        add(r)
    emb = check_embedder(rt)
    add(emb)
    if emb.ok:
        add(check_store(rt))
    else:
        add(CheckResult(
            "store", False, "not opened: the embedder failed (the store is checked against it)", "fix the embedder first"
        ))
    for r in check_models(rt):
        add(r)
    return results


__all__ = [
    "MAKE_SECRET", "MIN_SECRET_BYTES", "MIN_SECRET_GUESSES_LOG10", "CheckResult", "check_api", "check_directory",
    "check_embedder", "check_files", "check_identities", "check_models", "check_source", "check_store",
    "directory_configured", "run_checks", "secret_weakness", "unusable_identities",
]
