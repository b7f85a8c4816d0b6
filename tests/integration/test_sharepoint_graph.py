"""GraphClient, msal TokenProvider and SharePointRest against the loopback FakeMicrosoft tenant.

Real clients (msal, httpx, office365-rest-python-client) talk HTTPS to tests/support/fake_microsoft.py;
waits are recorded through the injectable ``sleep`` instead of being timed.
"""

from __future__ import annotations

import email.utils
import threading
from datetime import UTC, datetime, timedelta

import pytest
from support.fake_microsoft import FakeMicrosoft, user_claim

from ancre.connectors.sharepoint.auth import (
    CertificateCredential,
    Credential,
    PfxCredential,
    SecretCredential,
    TokenError,
    TokenProvider,
)
from ancre.connectors.sharepoint.graph import (
    BatchRequest,
    GraphClient,
    GraphError,
    GraphSettings,
    ResyncRequired,
    parse_retry_after,
    settings_from_source,
)
from ancre.connectors.sharepoint.rest import RestError, SharePointRest, rest_client
from ancre.errors import ConfigError, SourceUnavailableError


class Sleeps(list[float]):
    """An injectable ``sleep`` that records the waits asked for instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def ms():
    with FakeMicrosoft.axonix() as fake:
        yield fake


def cert(ms: FakeMicrosoft) -> CertificateCredential:
    return CertificateCredential(ms.certificate.key_pem_path, ms.certificate.thumbprint)


def settings(ms: FakeMicrosoft, credential: Credential | None = None, **kw) -> GraphSettings:
    return GraphSettings(
        tenant_id=ms.tenant_id, client_id=ms.client_id, credential=credential or cert(ms),
        authority=ms.authority, graph_url=ms.graph_url, verify=str(ms.ca_path), **kw,
    )


def client(ms: FakeMicrosoft, sleeps: Sleeps | None = None, *, credential: Credential | None = None,
           rng=lambda: 0.5, **kw) -> GraphClient:
    s = settings(ms, credential, **kw)
    # A fresh token provider per client: token counts are per test, not per process.
    tokens = TokenProvider(tenant_id=s.tenant_id, client_id=s.client_id, credential=s.credential,
                           authority=s.authority, verify=s.verify)
    return GraphClient(s, tokens=tokens, sleep=sleeps if sleeps is not None else Sleeps(), rng=rng)


# ---------------------------------------------------------------------------------------- tokens


@pytest.mark.parametrize("kind", ["pem", "pfx", "secret"])
def test_token_from_msal_is_cached_across_calls(ms: FakeMicrosoft, kind: str) -> None:
    credential: Credential = {
        "pem": cert(ms),
        "pfx": PfxCredential(ms.certificate.pfx_path, ms.certificate.pfx_passphrase),
        "secret": SecretCredential(ms.client_secret),
    }[kind]
    g = client(ms, credential=credential)
    for _ in range(5):
        assert g.get("/users/alice.martin@axonix.ch")["onPremisesSamAccountName"] == "alice"
    drive = ms.drive("Direction")
    assert len(g.delta(drive.id, None).items) == 6
    # msal asked the token endpoint once, with the credential of this kind, for Graph's .default scope.
    assert len(ms.token_requests) == 1
    assert ms.token_requests[0]["credential"] == ("secret" if kind == "secret" else "certificate")
    assert ms.token_requests[0]["scope"] == f"{ms.base_url}/.default"
    assert g.requests_made == 6


def test_wrong_secret_is_a_token_error_not_an_empty_answer(ms: FakeMicrosoft) -> None:
    g = client(ms, credential=SecretCredential("not-the-secret"))
    with pytest.raises(TokenError) as err:
        g.get("/users/alice.martin@axonix.ch")
    assert err.value.code == "invalid_client"
    assert "AADSTS7000215" in err.value.message
    assert isinstance(err.value, SourceUnavailableError)  # a pass meeting it purges nothing
    assert g.requests_made == 0


def test_pfx_with_wrong_passphrase_is_a_config_error(ms: FakeMicrosoft) -> None:
    g = client(ms, credential=PfxCredential(ms.certificate.pfx_path, "wrong"))
    with pytest.raises(ConfigError, match="pfx_path"):
        g.get("/users/alice.martin@axonix.ch")


def test_token_revoked_mid_pass_is_renewed_without_failing_the_pass(ms: FakeMicrosoft) -> None:
    ms.page_size = 2
    g = client(ms)
    seen = []
    for n, user in enumerate(g.pages("/users")):
        seen.append(user["userPrincipalName"])
        if n == 1:
            ms.expire_tokens()  # the token now answers 401 InvalidAuthenticationToken
    assert len(seen) == len(ms.users)
    assert [a for a in ms.answers if a[2] == 401] != []  # the old token was refused once...
    assert len(ms.token_requests) == 2  # ...and exactly one new token was fetched


def test_token_close_to_expiry_is_renewed_before_it_is_refused() -> None:
    # Tokens living 200 s: msal never reuses one with less than 5 minutes left, so every call gets a
    # fresh token and the server never has to refuse an expired one.
    with FakeMicrosoft.axonix(token_lifetime_s=200) as ms:
        g = client(ms)
        for _ in range(3):
            g.get("/users/bruno.favre@axonix.ch")
        assert len(ms.token_requests) == 3
        assert not [a for a in ms.answers if a[2] == 401]


def test_a_401_that_persists_after_a_fresh_token_is_a_graph_error(ms: FakeMicrosoft) -> None:
    ms.fail(r"^/sites/", 401, times=5)
    g = client(ms)
    with pytest.raises(GraphError) as err:
        g.get(f"/sites/{ms.site('Direction').id}")
    assert err.value.status == 401
    assert err.value.code == "InvalidAuthenticationToken"
    assert len(ms.token_requests) == 2  # one refresh, not a loop


def test_403_is_a_graph_error_with_its_status_and_code(ms: FakeMicrosoft) -> None:
    ms.fail(r"/drives$", 403)
    g = client(ms)
    with pytest.raises(GraphError) as err:
        list(g.pages(f"/sites/{ms.site('Direction').id}/drives"))
    assert (err.value.status, err.value.code) == (403, "accessDenied")
    assert not isinstance(err.value, SourceUnavailableError)


# ---------------------------------------------------------------------------------------- retries


def test_429_waits_the_retry_after_seconds(ms: FakeMicrosoft) -> None:
    ms.throttle(r"^/users/", times=2, retry_after=7)
    sleeps = Sleeps()
    g = client(ms, sleeps)
    assert g.get("/users/chloe.rey@axonix.ch")["onPremisesSamAccountName"] == "chloe"
    assert sleeps == [7.0, 7.0]
    assert g.requests_made == 3


def test_429_waits_until_the_retry_after_http_date(ms: FakeMicrosoft) -> None:
    when = datetime.now(UTC) + timedelta(seconds=40)
    ms.throttle(r"^/users/", times=1, retry_after=email.utils.format_datetime(when, usegmt=True))
    sleeps = Sleeps()
    g = client(ms, sleeps)
    g.get("/users/chloe.rey@axonix.ch")
    assert len(sleeps) == 1
    assert 30 < sleeps[0] <= 40  # the date, not a default backoff (1 s)


def test_503_without_retry_after_backs_off_exponentially_then_succeeds(ms: FakeMicrosoft) -> None:
    ms.throttle(r"^/users/", times=3, retry_after=None, status=503)
    sleeps = Sleeps()
    g = client(ms, sleeps, backoff_base_s=2.0, backoff_max_s=5.0, rng=lambda: 0.5)
    assert g.get("/users/david.meier@axonix.ch")["onPremisesSamAccountName"] == "david"
    # equal jitter with rng 0.5: 3/4 of min(cap, base * 2**n): 2 -> 1.5, 4 -> 3.0, 8 capped at 5 -> 3.75
    assert sleeps == [1.5, 3.0, 3.75]


def test_backoff_jitter_stays_between_half_and_all_of_the_cap(ms: FakeMicrosoft) -> None:
    for r in (0.0, 0.999):
        ms.throttle(r"^/users/", times=2, retry_after=None, status=503)
        sleeps = Sleeps()
        client(ms, sleeps, backoff_base_s=1.0, rng=lambda r=r: r).get("/users/emma.blanc@axonix.ch")
        assert 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0


def test_throttled_beyond_max_retries_is_source_unavailable(ms: FakeMicrosoft) -> None:
    ms.throttle(r"^/users/", times=10, retry_after=1)
    sleeps = Sleeps()
    g = client(ms, sleeps, max_retries=2)
    with pytest.raises(SourceUnavailableError, match="429"):
        g.get("/users/emma.blanc@axonix.ch")
    assert sleeps == [1.0, 1.0]


def test_connection_refused_is_source_unavailable(ms: FakeMicrosoft) -> None:
    sleeps = Sleeps()
    g = client(ms, sleeps, max_retries=2)
    g.get("/users/emma.blanc@axonix.ch")  # token cached while the tenant is up
    ms.stop()
    with pytest.raises(SourceUnavailableError, match="unreachable"):
        g.get("/users/emma.blanc@axonix.ch")
    assert len(sleeps) == 2


def test_retry_after_parsing() -> None:
    now = datetime(2026, 12, 1, 4, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120", now=now) == 120.0
    assert parse_retry_after("Tue, 01 Dec 2026 04:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Tue, 01 Dec 2026 03:59:00 GMT", now=now) == 0.0  # in the past: now
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None


# ---------------------------------------------------------------------------------------- $batch


def test_batch_retries_only_the_throttled_sub_request(ms: FakeMicrosoft) -> None:
    drive = ms.drive("Direction")
    files = [ms.item(drive, p) for p in ("Contrats/03_Contrat_Maintenance_Etude_Rochat.docx",
                                         "Grille_Salariale_2026.docx", "09-pipeline-llm.md")]
    victim = files[1]
    ms.grant(drive, victim, user="bruno")
    ms.throttle(rf"/items/{victim.id}/permissions$", times=1, retry_after=4)
    sleeps = Sleeps()
    g = client(ms, sleeps)
    answers = g.batch([BatchRequest(id=f.id, method="GET", url=f"/drives/{drive.id}/items/{f.id}/permissions")
                       for f in files])
    assert sleeps == [4.0]
    assert {k: v.status for k, v in answers.items()} == {f.id: 200 for f in files}
    granted = [p["grantedToV2"].get("user", {}).get("id") for p in answers[victim.id].body["value"]]
    assert ms.user("bruno").id in granted
    batches = [r for r in ms.requests if r.path == "/v1.0/$batch"]
    assert len(batches) == 2
    sub = [r.path for r in ms.requests if r.in_batch]
    assert sub.count(f"/drives/{drive.id}/items/{victim.id}/permissions") == 2  # re-sent alone
    assert sub.count(f"/drives/{drive.id}/items/{files[0].id}/permissions") == 1
    assert sub.count(f"/drives/{drive.id}/items/{files[2].id}/permissions") == 1


def test_batch_splits_into_calls_of_twenty(ms: FakeMicrosoft) -> None:
    g = client(ms)
    reqs = [BatchRequest(id=str(n), method="GET", url="/users/alice.martin@axonix.ch") for n in range(45)]
    answers = g.batch(reqs)
    assert len(answers) == 45 and all(a.status == 200 for a in answers.values())
    assert g.requests_made == 3


def test_batch_sub_request_errors_are_returned_not_raised(ms: FakeMicrosoft) -> None:
    drive = ms.drive("Direction")
    f = ms.item(drive, "Grille_Salariale_2026.docx")
    ms.set_label(drive, f, None, error=423)
    g = client(ms)
    answers = g.batch([
        BatchRequest(id="1", method="POST", url=f"/drives/{drive.id}/items/{f.id}/extractSensitivityLabels", body={}),
        BatchRequest(id="2", method="GET", url=f"/drives/{drive.id}/items/nope/permissions"),
    ])
    assert answers["1"].status == 423 and answers["2"].status == 404


# ---------------------------------------------------------------------------------------- paging, delta


def test_pages_follow_next_links(ms: FakeMicrosoft) -> None:
    ms.page_size = 2
    g = client(ms)
    upns = [u["userPrincipalName"] for u in g.pages("/users")]
    assert sorted(upns) == sorted(u.upn for u in ms.users.values())
    assert len(ms.graph_requests(r"^/v1\.0/users$")) == -(-len(ms.users) // 2)


def test_delta_follows_pages_and_returns_the_delta_link(ms: FakeMicrosoft) -> None:
    ms.page_size = 2
    drive = ms.drive("Direction")
    g = client(ms)
    first = g.delta(drive.id, None)
    assert sorted(i["name"] for i in first.items) == sorted(
        ["root", "Contrats", "03_Contrat_Maintenance_Etude_Rochat.docx",
         "21_Contrat_Maintenance_Baumont_Industries.docx", "Grille_Salariale_2026.docx", "09-pipeline-llm.md"])
    assert len(ms.graph_requests(r"/root/delta$")) == 3
    assert "/root/delta?token=" in first.delta_link

    ms.modify_file(drive, "09-pipeline-llm.md", b"# new\n")
    ms.delete_item(drive, "Grille_Salariale_2026.docx")
    second = g.delta(drive.id, first.delta_link, prefer=("deltashowsharingchanges", "hierarchicalsharing"))
    assert [i.get("name") for i in second.items] == ["09-pipeline-llm.md", None]
    assert second.items[1]["deleted"] == {"state": "deleted"}
    assert ms.requests[-1].headers["prefer"] == "deltashowsharingchanges, hierarchicalsharing"


def test_delta_410_raises_resync_required(ms: FakeMicrosoft) -> None:
    drive = ms.drive("Projets")
    g = client(ms)
    link = g.delta(drive.id, None).delta_link
    ms.gone_next_delta(drive.id, "resyncChangesApplyDifferences")
    with pytest.raises(ResyncRequired) as err:
        g.delta(drive.id, link)
    assert err.value.status == 410
    assert err.value.code == "resyncChangesApplyDifferences"
    assert err.value.location == f"{ms.graph_url}/drives/{drive.id}/root/delta"
    assert len(g.delta(drive.id, None).items) == 3  # a full enumeration works again


def test_next_links_outside_graph_are_refused(ms: FakeMicrosoft) -> None:
    g = client(ms)
    with pytest.raises(GraphError, match="refusing to send the Graph token"):
        g.get("https://attacker.example/v1.0/users")


def test_download_follows_the_redirect_without_the_token(ms: FakeMicrosoft) -> None:
    drive = ms.drive("Direction")
    f = ms.item(drive, "09-pipeline-llm.md")
    g = client(ms)
    assert g.download(drive.id, f.id) == f.content
    fetch = [r for r in ms.requests if r.path.startswith("/_download/")]
    assert len(fetch) == 1 and "authorization" not in fetch[0].headers


def test_in_flight_requests_are_bounded(ms: FakeMicrosoft) -> None:
    g = client(ms, max_in_flight=3)
    g.get("/users/alice.martin@axonix.ch")  # token first
    ms.max_in_flight = 0
    ms.latency_s = 0.05
    errors: list[BaseException] = []

    def work() -> None:
        try:
            g.get("/users/bruno.favre@axonix.ch")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert 2 <= ms.max_in_flight <= 3


# ---------------------------------------------------------------------------------------- REST


def rest(ms: FakeMicrosoft, site: str, sleeps: Sleeps | None = None, **kw) -> SharePointRest:
    s = settings(ms, **kw)
    tokens = TokenProvider(tenant_id=s.tenant_id, client_id=s.client_id, credential=s.credential,
                           authority=s.authority, verify=s.verify)
    return SharePointRest(s, ms.site_url(site), tokens=tokens, sleep=sleeps if sleeps is not None else Sleeps())


def test_rest_role_assignments_of_web_and_library(ms: FakeMicrosoft) -> None:
    site = ms.site("Direction")
    drive = ms.drive(site)
    r = rest(ms, "Direction")
    web = {ra.title: ra for ra in r.role_assignments()}
    assert set(web) == {"Direction Owners", "Members"}
    members = web["Members"]
    assert (members.principal_id, members.principal_type) == (4, 8)
    assert [(d.name, d.base_permissions_low & 1) for d in members.roles] == [("Read", 1)]
    # The library inherits: it answers the web's assignments.
    assert r.role_assignments(drive.list_id) == list(web.values())
    # Unique library roles: a user with Limited Access only, an Entra group with Contribute.
    ms.set_list_roles(drive, [(user_claim("bruno.favre@axonix.ch"), ["Limited Access"]),
                              (ms.group("GG_RH").claim(), ["Contribute"])])
    lib = r.role_assignments(drive.list_id)
    assert [(ra.principal_type, ra.login_name) for ra in lib] == [
        (1, "i:0#.f|membership|bruno.favre@axonix.ch"), (4, f"c:0t.c|tenant|{ms.group('GG_RH').id}")]
    limited = lib[0].roles[0]
    assert limited.name == "Limited Access" and limited.base_permissions_low & 1 == 0
    assert lib[1].roles[0].base_permissions_low & 1 == 1
    assert lib[0].title == "bruno.favre"


def test_rest_site_groups_and_members(ms: FakeMicrosoft) -> None:
    r = rest(ms, "Projets")
    groups = {g.title: g for g in r.site_groups()}
    assert groups["Members"].id == 4 and groups["Members"].principal_type == 8
    (everyone,) = r.group_members(4)
    assert everyone.login_name == f"c:0-.f|rolemanager|spo-grid-all-users/{ms.tenant_id}"
    assert everyone.principal_type == 4
    (gg,) = rest(ms, "Direction").group_members(4)
    assert gg.login_name == ms.group("GG_Direction").claim() and gg.title == "GG_Direction"


def test_rest_refuses_a_client_secret(ms: FakeMicrosoft) -> None:
    with pytest.raises(ConfigError, match="client secret"):
        SharePointRest(settings(ms, SecretCredential(ms.client_secret)), ms.site_url("Direction"))


def test_rest_honours_retry_after_and_renews_a_revoked_token(ms: FakeMicrosoft) -> None:
    sleeps = Sleeps()
    r = rest(ms, "Direction", sleeps)
    r.role_assignments()
    ms.expire_tokens()
    ms.throttle(r"(?i)/_api/web/roleassignments$", times=1, retry_after=6)
    assert len(r.role_assignments()) == 2
    assert sleeps == [6.0]
    assert len(ms.token_requests) == 2


def test_rest_errors(ms: FakeMicrosoft) -> None:
    r = rest(ms, "Direction", max_retries=1)
    ms.fail(r"(?i)/_api/web/roleassignments$", 403, times=1)
    with pytest.raises(RestError) as err:
        r.role_assignments()
    assert err.value.status == 403
    ms.throttle(r"(?i)/_api/web/roleassignments$", times=5, retry_after=None, status=503)
    with pytest.raises(SourceUnavailableError, match="503"):
        r.role_assignments()
    # (Unreachable SharePoint is not exercised here: the library retries its form-digest request
    # itself, with real waits of up to minutes; see connectors/sharepoint/rest.py.)


# ---------------------------------------------------------------------------------------- settings


def test_settings_from_a_source_config(ms: FakeMicrosoft, monkeypatch: pytest.MonkeyPatch) -> None:
    from ancre.connectors.sharepoint.config import SharePointSourceConfig

    common = {"id": "sp", "tenant_id": ms.tenant_id, "client_id": ms.client_id, "authority": ms.authority,
                  "graph_url": ms.graph_url, "ca_file": ms.ca_path, "max_in_flight": 2}
    pem = settings_from_source(SharePointSourceConfig(
        **common, certificate_path=ms.certificate.key_pem_path, certificate_thumbprint=ms.certificate.thumbprint))
    assert pem.credential == cert(ms) and pem.verify == str(ms.ca_path) and pem.max_in_flight == 2
    monkeypatch.setenv("SP_PFX_PASS", ms.certificate.pfx_passphrase)
    pfx = settings_from_source(SharePointSourceConfig(**common, pfx_path=ms.certificate.pfx_path,
                                                      pfx_passphrase_env="SP_PFX_PASS"))
    assert pfx.credential == PfxCredential(ms.certificate.pfx_path, ms.certificate.pfx_passphrase)
    assert GraphClient(pfx, sleep=Sleeps()).get("/users/alice.martin@axonix.ch")["id"] == ms.user("alice").id
    monkeypatch.delenv("SP_SECRET", raising=False)
    with pytest.raises(ConfigError, match="SP_SECRET"):
        settings_from_source(SharePointSourceConfig(**common, client_secret_env="SP_SECRET"))


def test_rest_client_is_reused_per_site(ms: FakeMicrosoft) -> None:
    s = settings(ms)
    first = rest_client(s, ms.site_url("Direction"))
    assert rest_client(s, ms.site_url("Direction") + "/") is first
    assert rest_client(s, ms.site_url("Projets")) is not first
    first.role_assignments()
    first.role_assignments(ms.drive("Direction").list_id)
    first.group_members(4)
    # One form digest for the three reads (the context is kept).
    assert len([r for r in ms.requests if r.path.lower().endswith("/_api/contextinfo")]) == 1


# ---------------------------------------------------------------------------------------- the fake's sharing semantics


def test_fake_reports_a_folder_sharing_change_only_on_the_folder_and_only_when_asked(ms: FakeMicrosoft) -> None:
    drive = ms.drive("Direction")
    g = client(ms)
    link = g.delta(drive.id, None).delta_link
    folder = ms.item(drive, "Contrats")
    ms.grant(drive, folder, user="bruno")
    assert g.delta(drive.id, link).items == []  # without Prefer: no sharing change reported
    shared = g.delta(drive.id, link, prefer=("deltashowsharingchanges", "hierarchicalsharing")).items
    assert [(i["name"], i["@microsoft.graph.sharedChanged"]) for i in shared] == [("Contrats", "True")]
    # Its files inherit: they list the folder's permissions as their own effective ones, without
    # inheritedFrom ("SharePoint document libraries do not return the inheritedFrom property").
    child = ms.item(drive, "Contrats/03_Contrat_Maintenance_Etude_Rochat.docx")
    perms = g.get(f"/drives/{drive.id}/items/{child.id}/permissions")["value"]
    assert perms == g.get(f"/drives/{drive.id}/items/{folder.id}/permissions")["value"]
    assert not any("inheritedFrom" in p for p in perms)
    assert ms.user("bruno").id in [p["grantedToV2"].get("user", {}).get("id") for p in perms]
    # A change made with no signal is invisible to delta, visible to a permission read.
    link2 = g.delta(drive.id, link, prefer=("deltashowsharingchanges",)).delta_link
    ms.set_permissions(drive, folder, [], signal=False)
    assert g.delta(drive.id, link2, prefer=("deltashowsharingchanges",)).items == []
    assert g.get(f"/drives/{drive.id}/items/{child.id}/permissions")["value"] == []


def test_certificate_pem_may_hold_the_certificate_too_and_thumbprint_any_case(ms: FakeMicrosoft) -> None:
    combo = ms.certificate.key_pem_path.parent / "combo.pem"
    combo.write_bytes(ms.certificate.cert_pem_path.read_bytes() + ms.certificate.key_pem_path.read_bytes())
    thumb = ":".join(ms.certificate.thumbprint[i:i + 2] for i in range(0, 40, 2)).lower()
    g = client(ms, credential=CertificateCredential(combo, thumb))
    assert g.get("/users/alice")["userPrincipalName"] == "alice.martin@axonix.ch"
    assert [t["credential"] for t in ms.token_requests] == ["certificate"]


def test_fake_clear_faults_drops_pending_ones(ms: FakeMicrosoft) -> None:
    drive = ms.drive("Projets")
    ms.fail(r"^/users/", 503, times=5)
    ms.gone_next_delta(drive.id)
    ms.clear_faults()
    g = client(ms, max_retries=0)
    link = g.delta(drive.id, None).delta_link
    assert g.delta(drive.id, link).items == []
    assert g.get("/users/alice")["userPrincipalName"] == "alice.martin@axonix.ch"
