"""DFS links: the inside/outside decision of :func:`ancre.connectors.smb.dfs_target_inside`
(a referral target is followed only inside the source's own share on the same server)."""

from __future__ import annotations

import socket
from collections.abc import Iterable

import pytest

from ancre.connectors.smb import DfsTarget, dfs_target_inside

HOSTS = {
    "srv-fichiers": ("10.0.0.5",),
    "srv-fichiers.axonix.ch": ("10.0.0.5", "fd00::5"),
    "10.0.0.5": ("10.0.0.5",),
    "srv-archives": ("10.0.0.6",),
    "alias-v6": ("fd00::5",),
}


def resolve(host: str) -> Iterable[str]:
    """A resolver over :data:`HOSTS`; an unknown name fails as getaddrinfo does."""
    try:
        return HOSTS[host.lower()]
    except KeyError:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None


@pytest.mark.parametrize(
    ("target", "inside"),
    [
        # same share, same server: by name (case-insensitive) or by a common address
        ("\\srv-fichiers\\Partage\\DFS-CIBLE", True),
        ("\\SRV-FICHIERS\\partage", True),
        ("\\\\srv-fichiers.axonix.ch\\PARTAGE\\a\\b", True),
        ("\\10.0.0.5\\Partage\\x", True),
        ("\\alias-v6\\Partage", False),  # fd00::5 is not an address of srv-fichiers (10.0.0.5 only)
        # another share of the same server, another server, an unknown server: outside
        ("\\srv-fichiers\\netlogon", False),
        ("\\srv-fichiers\\Partage2\\x", False),
        ("\\srv-archives\\Partage\\x", False),
        ("\\inconnu\\Partage", False),
        ("\\srv-fichiers\\Partage\u200b", False),
    ],
)
def test_dfs_target_inside_only_for_the_same_share_on_the_same_server(target: str, inside: bool) -> None:
    assert dfs_target_inside("srv-fichiers", "Partage", DfsTarget.parse(target), resolve) is inside


def test_names_are_compared_without_unicode_case_folding() -> None:
    # "ſ".casefold() == "s" and the Kelvin sign lowercases to "k": lookalikes name other shares/servers
    assert "Archiveſ".casefold() == "archives" and "\u212aiosk".lower() == "kiosk"
    assert not dfs_target_inside("srv-fichiers", "Archives", DfsTarget.parse("\\srv-fichiers\\Archiveſ"), resolve)
    assert not dfs_target_inside("kiosk", "Partage", DfsTarget.parse("\\\u212aiosk\\Partage"), lambda h: ("10.0.0.9",) if h == "kiosk" else ())


def test_a_server_name_that_does_not_resolve_is_another_server() -> None:
    # the source's own name unresolvable: only an exact (ASCII case-insensitive) name match is inside
    assert dfs_target_inside("inconnu", "Partage", DfsTarget.parse("\\INCONNU\\partage\\x"), resolve)
    assert not dfs_target_inside("inconnu", "Partage", DfsTarget.parse("\\10.0.0.5\\Partage"), resolve)

    def broken(host: str) -> Iterable[str]:
        raise UnicodeError("label too long")

    assert not dfs_target_inside("srv-fichiers", "Partage", DfsTarget.parse("\\10.0.0.5\\Partage"), broken)


def test_an_ipv6_address_in_common_is_the_same_server() -> None:
    assert dfs_target_inside("alias-v6", "Partage", DfsTarget.parse("\\srv-fichiers.axonix.ch\\Partage"), resolve)


def test_the_default_resolver_sees_localhost_and_127_0_0_1_as_one_server() -> None:
    assert dfs_target_inside("127.0.0.1", "Partage", DfsTarget.parse("\\localhost\\Partage\\DFS-CIBLE"))
    assert not dfs_target_inside("127.0.0.1", "Partage", DfsTarget.parse("\\127.0.0.9\\Partage"))
    assert not dfs_target_inside("127.0.0.1", "Partage", DfsTarget.parse("\\no-such-host.invalid\\Partage"))


def test_referral_targets_are_parsed_from_their_network_address() -> None:
    t = DfsTarget.parse("\\localhost\\Partage\\DFS-CIBLE\\sous")
    assert (t.server, t.share, t.path, t.rel, t.unc) == (
        "localhost", "Partage", "DFS-CIBLE\\sous", "DFS-CIBLE/sous", "\\\\localhost\\Partage\\DFS-CIBLE\\sous"
    )
    assert DfsTarget.parse("\\\\127.0.0.9\\autre").unc == "\\\\127.0.0.9\\autre"
    for bad in ("", "\\", "\\serveur-seul"):
        with pytest.raises(ValueError):
            DfsTarget.parse(bad)
