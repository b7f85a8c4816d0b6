"""Principal providers: P(user) is the union of what every provider says; a provider
that fails makes the whole resolution fail (closed); an identity nobody knows gets the empty set,
which reads nothing. ``acl explain`` names the principal that decided and its provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.providers import DownProvider, OddProvider, StaticProvider

from ancre.acl.directory import FileDirectory
from ancre.acl.explain import AclTrace, ShareLayer, explain_trace, trace_manifest
from ancre.acl.manifest import AclManifest
from ancre.acl.providers import DirectoryProvider, PrincipalProvider, PrincipalProviderError, PrincipalResolver
from ancre.acl.share import configured_share_descriptor
from ancre.errors import ConfigError, DirectoryError
from ancre.models import EVERYONE, Acl

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "axonix"
DOM = "S-1-5-21-1004336348-1177238915-682003330"
GG_RH = f"sid:{DOM}-1105"
GG_DIRECTION = f"sid:{DOM}-1101"
SALARIES = "RH/Grille_Salariale_2026.docx"


@pytest.fixture(scope="module")
def directory() -> FileDirectory:
    return FileDirectory(CORPUS / "directory.json")


def test_the_directory_provider_gives_the_directory_principals(directory: FileDirectory) -> None:
    provider = DirectoryProvider(directory)
    assert isinstance(provider, PrincipalProvider) and provider.name == "directory"
    for user in directory.users():
        assert provider.principals(user) == directory.principals(user)
        assert PrincipalResolver([provider]).principals(user) == directory.principals(user)
    assert provider.principals("mallory") == frozenset()


def test_the_principals_are_the_union_of_the_providers(directory: FileDirectory) -> None:
    entra = StaticProvider(
        "entra",
        {"bruno": frozenset({"aad:7f3e-group-projets", GG_RH}), "zoe": frozenset({"aad:zoe-object-id"})},
    )
    resolver = PrincipalResolver([DirectoryProvider(directory), entra])
    assert resolver.names == ("directory", "entra")
    bruno = resolver.principals("bruno")
    assert bruno == directory.principals("bruno") | {"aad:7f3e-group-projets", GG_RH}
    origins = resolver.origins("bruno")
    assert set(origins) == bruno
    assert origins["aad:7f3e-group-projets"] == "entra" and origins[GG_RH] == "entra"
    assert all(origins[p] == "directory" for p in directory.principals("bruno"))
    # a user only the second provider knows still gets its principals
    assert resolver.principals("zoe") == frozenset({"aad:zoe-object-id"})
    # a principal both give is the first provider's
    both = PrincipalResolver([DirectoryProvider(directory), StaticProvider("again", {"bruno": frozenset({EVERYONE})})])
    assert both.origins("bruno")[EVERYONE] == "directory"


@pytest.mark.parametrize("down_first", [False, True])
def test_one_failing_provider_fails_the_whole_resolution(directory: FileDirectory, down_first: bool) -> None:
    providers: list[PrincipalProvider] = [DirectoryProvider(directory), DownProvider()]
    resolver = PrincipalResolver(providers[::-1] if down_first else providers)
    for ask in (resolver.principals, resolver.origins):
        with pytest.raises(DirectoryError, match="unreachable"):
            ask("alice")  # the directory knows alice: still no partial set


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (RuntimeError("token expired"), "RuntimeError: token expired"),
        (["sid:S-1-1-0"], "not a set"),
        (None, "not a set"),
        (frozenset({f"{DOM}-1105"}), "not a prefixed principal"),
        (frozenset({"sid:"}), "not a prefixed principal"),
        (frozenset({3}), "not a prefixed principal"),
    ],
)
def test_a_misbehaving_provider_fails_closed(directory: FileDirectory, answer: object, said: str) -> None:
    resolver = PrincipalResolver([DirectoryProvider(directory), OddProvider(answer)])
    with pytest.raises(PrincipalProviderError, match=said) as caught:
        resolver.principals("alice")
    assert isinstance(caught.value, DirectoryError) and "'odd'" in str(caught.value)


def test_an_identity_nobody_knows_gets_the_empty_set(directory: FileDirectory) -> None:
    resolver = PrincipalResolver([DirectoryProvider(directory), StaticProvider("entra")])
    nobody = resolver.principals("mallory")
    assert nobody == frozenset() and isinstance(nobody, frozenset)
    assert resolver.origins("mallory") == {}
    assert not Acl(frozenset({EVERYONE})).readable_by(nobody)  # never "no filter"


def test_resolver_configuration_errors(directory: FileDirectory) -> None:
    with pytest.raises(ConfigError, match="at least one"):
        PrincipalResolver([])
    with pytest.raises(ConfigError, match="'directory'"):
        PrincipalResolver([DirectoryProvider(directory), StaticProvider("directory")])


# ---------------------------------------------------------------- acl explain names the provider
def test_explain_names_the_principal_and_the_provider_that_decided(directory: FileDirectory) -> None:
    manifest = AclManifest.load(CORPUS / "acl.json", directory)
    trace = trace_manifest(manifest, SALARIES, source="partage")
    alone = explain_trace(trace, "bruno", directory=directory)
    assert not alone.readable and alone.decided_by is None
    assert "inheritance is disabled at RH" in alone.summary

    # a second provider gives bruno GG_RH: the RH ACE now allows him, and says where it came from
    extra = StaticProvider("entra", {"bruno": frozenset({GG_RH})})
    resolver = PrincipalResolver([DirectoryProvider(directory), extra])
    ex = explain_trace(trace, "bruno", directory=directory, resolver=resolver)
    assert ex.readable and ex.decided_by == GG_RH and ex.provider == "entra"
    assert ex.origin == "RH" and ex.source == "partage"
    text = ex.render()
    assert f"decided by: principal {GG_RH} (AXONIX\\GG_RH), from provider 'entra'" in text
    assert "path: RH/Grille_Salariale_2026.docx (source partage)" in text
    assert f"{GG_RH}  AXONIX\\GG_RH  [entra]" in text  # several providers: each principal's is shown

    chloe = explain_trace(trace_manifest(manifest, "CLIENTS/test-deny-explicite.docx"), "chloe", directory=directory)
    assert not chloe.readable and chloe.decided_by == f"sid:{DOM}-1103" and chloe.provider == "directory"
    assert "from provider 'directory'" in chloe.render() and "[directory]" not in chloe.render()


def test_explain_of_granted_principals_names_the_provider(directory: FileDirectory) -> None:
    trace = AclTrace("sharepoint-direction", "a.docx", grants=Acl(frozenset({"aad:group-direction"})))
    entra = StaticProvider("entra", {"alice": frozenset({"aad:group-direction"})})
    resolver = PrincipalResolver([DirectoryProvider(directory), entra])
    ex = explain_trace(trace, "alice", directory=directory, resolver=resolver)
    assert ex.readable and ex.decided_by == "aad:group-direction" and ex.provider == "entra"
    assert "the source grants read to aad:group-direction, which alice holds" in ex.render()
    bruno = explain_trace(trace, "bruno", directory=directory, resolver=resolver)
    assert not bruno.readable and bruno.decided_by is None
    assert "grants read only to aad:group-direction" in bruno.rule


def test_explain_fails_closed_when_a_provider_fails(directory: FileDirectory) -> None:
    manifest = AclManifest.load(CORPUS / "acl.json", directory)
    resolver = PrincipalResolver([DirectoryProvider(directory), DownProvider()])
    with pytest.raises(DirectoryError):
        explain_trace(trace_manifest(manifest, "CLIENTS/x.docx"), "bruno", directory=directory, resolver=resolver)


def test_explain_gives_the_effective_result_with_share_permissions(directory: FileDirectory) -> None:
    """The headline is the effective result (file ∩ share), and the layer that refused is named."""
    manifest = AclManifest.load(CORPUS / "acl.json", directory)
    ntfs = trace_manifest(manifest, "CLIENTS/x.docx", source="smb")
    only_direction = ShareLayer(
        "share permissions configured (share_allow=['GG_Direction'] share_deny=[])",
        configured_share_descriptor(frozenset({GG_DIRECTION}), frozenset()),
    )
    trace = AclTrace(ntfs.source, ntfs.path, descriptor=ntfs.descriptor, origins=ntfs.origins, share=only_direction)
    bruno = explain_trace(trace, "bruno", directory=directory)
    assert not bruno.readable  # NTFS allows GG_Techniciens, the share does not
    text = bruno.render()
    assert "result: NOT READABLE" in text
    assert bruno.files is not None and bruno.files.startswith("file permissions (NTFS): READABLE")
    assert bruno.share is not None and bruno.share.endswith("effective result (file ∩ share): NOT READABLE")
    assert bruno.summary == "the share permissions: not readable: no ACE grants read to any of bruno's principals"
    alice = explain_trace(trace, "alice", directory=directory)
    assert alice.readable and alice.share is not None and alice.share.endswith("effective result (file ∩ share): READABLE")
    david = explain_trace(trace, "david", directory=directory)
    assert not david.readable and david.files is not None and "NOT READABLE" in david.files
    assert "denied" in david.summary or "no ACE" in david.summary  # the file's own refusal is the headline
