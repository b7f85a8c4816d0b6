"""Directory: the corpus directory.json, nested groups, reloads, and the TTL cache."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ancre.acl.directory import CachedDirectory, Directory, FileDirectory, MembershipTracer
from ancre.errors import DirectoryError

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "axonix"
DOM = "S-1-5-21-1004336348-1177238915-682003330"
EVERYONE, AUTH = "sid:S-1-1-0", "sid:S-1-5-11"


def corpus_dict() -> dict[str, Any]:
    return json.loads((CORPUS / "directory.json").read_text(encoding="utf-8"))


class Writer:
    """Writes directory files with strictly increasing mtimes (no sleeping)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tick = 1_700_000_000

    def __call__(self, data: Any) -> Path:
        self.path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        self.tick += 10
        os.utime(self.path, (self.tick, self.tick))
        return self.path


@pytest.fixture()
def write(tmp_path: Path) -> Writer:
    return Writer(tmp_path / "directory.json")


@pytest.fixture()
def corpus() -> FileDirectory:
    return FileDirectory(CORPUS / "directory.json")


def test_is_a_directory(corpus: FileDirectory) -> None:
    assert isinstance(corpus, Directory) and isinstance(corpus, MembershipTracer)
    assert isinstance(CachedDirectory(corpus, 60), Directory)


def test_nested_groups_and_well_known(corpus: FileDirectory) -> None:
    assert corpus.principals("chloe") == {
        f"sid:{DOM}-1203",  # chloe
        f"sid:{DOM}-1102",  # GG_Techniciens
        f"sid:{DOM}-1103",  # GG_Stagiaires
        f"sid:{DOM}-1106",  # GG_Personnel, through both
        EVERYONE,
        AUTH,
        "sid:S-1-5-2",  # NETWORK: every SMB session's token holds it
    }
    assert f"sid:{DOM}-1106" in corpus.principals("emma")
    assert corpus.membership_path("chloe", f"{DOM}-1106") in {("GG_Techniciens", "GG_Personnel"), ("GG_Stagiaires", "GG_Personnel")}
    assert corpus.membership_path("chloe", f"sid:{DOM}-1103") == ("GG_Stagiaires",)
    assert corpus.membership_path("chloe", f"{DOM}-1203") == ()
    assert corpus.membership_path("chloe", f"{DOM}-1105") is None
    assert corpus.membership_path("nobody", f"{DOM}-1105") is None


def test_unknown_user_gets_the_empty_set(corpus: FileDirectory) -> None:
    assert corpus.principals("zoe") == frozenset()
    assert corpus.principals("") == frozenset()
    assert corpus.principals("GG_Direction") == frozenset()  # a group is not a user


@pytest.mark.parametrize("login", ["alice", "ALICE", "alice.martin@axonix.ch", "Alice.Martin@AXONIX.CH", "AXONIX\\alice", "axonix\\Alice"])
def test_user_lookup_forms(corpus: FileDirectory, login: str) -> None:
    assert f"sid:{DOM}-1201" in corpus.principals(login)
    assert f"sid:{DOM}-1101" in corpus.principals(login)


def test_sid_of_and_name_of(corpus: FileDirectory) -> None:
    assert corpus.sid_of("Authenticated Users") == "S-1-5-11"
    assert corpus.sid_of("NT AUTHORITY\\Authenticated Users") == "S-1-5-11"
    assert corpus.sid_of("everyone") == "S-1-1-0"
    assert corpus.sid_of("Administrators") == corpus.sid_of("BUILTIN\\Administrators") == "S-1-5-32-544"
    assert corpus.sid_of("GG_RH") == corpus.sid_of("axonix\\gg_rh") == f"{DOM}-1105"
    assert corpus.sid_of("alice") == corpus.sid_of("alice.martin@axonix.ch") == f"{DOM}-1201"
    assert corpus.sid_of("OTHERDOM\\GG_RH") is None
    assert corpus.sid_of("GG_Inconnu") is None
    assert corpus.name_of(f"{DOM}-1103") == corpus.name_of(f"sid:{DOM}-1103") == "AXONIX\\GG_Stagiaires"
    assert corpus.name_of("S-1-5-11") == "Authenticated Users"
    assert corpus.name_of("S-1-5-21-9-9-9-9") is None
    assert corpus.users() == ["alice", "bruno", "chloe", "david", "emma"]


def test_group_cycles_terminate(write: Writer) -> None:
    d = corpus_dict()
    d["groups"]["GG_Personnel"]["member_of"] = ["GG_Stagiaires"]  # Stagiaires → Personnel → Stagiaires
    fd = FileDirectory(write(d))
    assert fd.principals("chloe") >= {f"sid:{DOM}-1103", f"sid:{DOM}-1106"}
    assert f"sid:{DOM}-1103" in fd.principals("alice")  # through GG_Personnel now


def test_well_known_group_membership(write: Writer) -> None:
    d = corpus_dict()
    d["users"]["alice"]["groups"].append("BUILTIN\\Administrators")
    assert "sid:S-1-5-32-544" in FileDirectory(write(d)).principals("alice")


def _broken(**changes: Any) -> dict[str, Any]:
    d = corpus_dict()
    for path, value in changes.items():
        node = d
        *head, last = path.split("__")
        for k in head:
            node = node[k]
        if value is KeyError:
            del node[last]
        else:
            node[last] = value
    return d


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("{not json", "directory.json"),
        ([1, 2], "(root)"),
        (_broken(netbios=KeyError), "netbios"),
        (_broken(users__alice__sid=KeyError), "users.alice.sid"),
        (_broken(users__alice__sid="S-1-5-21-x"), "users.alice.sid"),
        (_broken(users__alice__sid=1201), "users.alice.sid"),
        (_broken(groups__GG_RH__member_of="GG_Personnel"), "groups.GG_RH.member_of"),
        (_broken(users__alice__groups=["GG_Inexistant"]), "unknown group 'GG_Inexistant'"),
        (_broken(groups__GG_RH__member_of=["GG_Nope"]), "groups.GG_RH: unknown group"),
        (_broken(users__bruno__sid=f"{DOM}-1201"), "already used"),
        (_broken(users__bruno__upn="alice.martin@axonix.ch"), "users.bruno"),
        (_broken(well_known__Administrators="admins"), "well_known.Administrators"),
    ],
)
def test_malformed_file_raises_directory_error(write: Writer, data: Any, needle: str) -> None:
    fd = FileDirectory(write(data))
    for call in (lambda: fd.principals("alice"), lambda: fd.sid_of("GG_RH"), fd.users):
        with pytest.raises(DirectoryError) as e:
            call()
        assert needle in str(e.value)


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(DirectoryError, match="cannot read"):
        FileDirectory(tmp_path / "absent.json").principals("alice")


def test_reloads_when_the_file_changes(write: Writer) -> None:
    d = corpus_dict()
    fd = FileDirectory(write(d))
    assert f"sid:{DOM}-1103" in fd.principals("chloe")
    d["users"]["chloe"]["groups"] = ["GG_Techniciens"]  # chloe leaves GG_Stagiaires
    d["users"]["zoe"] = {"sid": f"{DOM}-1299", "upn": "zoe@axonix.ch", "groups": ["GG_RH"]}
    write(d)
    assert f"sid:{DOM}-1103" not in fd.principals("chloe")
    assert f"sid:{DOM}-1105" in fd.principals("zoe@axonix.ch")
    write("{ broken")  # a bad edit is an error, never the stale or an empty answer
    with pytest.raises(DirectoryError):
        fd.principals("chloe")
    write(d)
    assert fd.principals("chloe")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_cache_serves_within_ttl_and_refreshes_after(write: Writer) -> None:
    d = corpus_dict()
    clock = FakeClock()
    cached = CachedDirectory(FileDirectory(write(d)), ttl_s=60, clock=clock)
    before = cached.principals("chloe")
    assert f"sid:{DOM}-1103" in before
    d["users"]["chloe"]["groups"] = ["GG_Techniciens"]
    write(d)
    clock.now += 59
    assert cached.principals("chloe") == before  # cached
    clock.now += 1
    assert f"sid:{DOM}-1103" not in cached.principals("chloe")  # expired: re-read


def test_cache_is_negative_too_and_invalidate_clears(write: Writer) -> None:
    d = corpus_dict()
    clock = FakeClock()
    cached = CachedDirectory(FileDirectory(write(d)), ttl_s=60, clock=clock)
    assert cached.principals("zoe") == frozenset()
    d["users"]["zoe"] = {"sid": f"{DOM}-1299", "groups": []}
    write(d)
    assert cached.principals("zoe") == frozenset()  # negative answer cached
    cached.invalidate("zoe")
    assert f"sid:{DOM}-1299" in cached.principals("zoe")
    d["users"]["zoe"]["groups"] = ["GG_RH"]
    write(d)
    cached.invalidate()
    assert f"sid:{DOM}-1105" in cached.principals("zoe")


def test_cache_does_not_cache_errors(write: Writer) -> None:
    d = corpus_dict()
    clock = FakeClock()
    cached = CachedDirectory(FileDirectory(write(d)), ttl_s=60, clock=clock)
    assert cached.principals("alice")
    write("{ broken")
    assert cached.principals("alice")  # still fresh in the cache
    with pytest.raises(DirectoryError):
        cached.principals("david")  # not cached: the error propagates
    write(d)
    assert f"sid:{DOM}-1204" in cached.principals("david")  # the error was not remembered
    write("{ broken")
    clock.now += 60
    with pytest.raises(DirectoryError):
        cached.principals("alice")  # expired entry + broken directory: error, not an empty set


def test_cache_ttl_zero_always_asks(write: Writer) -> None:
    d = corpus_dict()
    cached = CachedDirectory(FileDirectory(write(d)), ttl_s=0, clock=FakeClock())
    assert cached.principals("zoe") == frozenset()
    d["users"]["zoe"] = {"sid": f"{DOM}-1299"}
    write(d)
    assert cached.principals("zoe")
    with pytest.raises(ValueError):
        CachedDirectory(cached, ttl_s=-1)


def test_cache_delegates_lookups(corpus: FileDirectory) -> None:
    cached = CachedDirectory(corpus, 60)
    assert cached.sid_of("GG_RH") == f"{DOM}-1105"
    assert cached.name_of(f"{DOM}-1105") == "AXONIX\\GG_RH"
    assert cached.users() == corpus.users()
    assert cached.membership_path("chloe", f"{DOM}-1103") == ("GG_Stagiaires",)


# ----------------------------------------------------------------------------- lookalike identities


def _with_jess(write: Writer) -> FileDirectory:
    data = corpus_dict()
    data["users"]["jess"] = {"sid": f"{DOM}-1299", "upn": "jess.rossi@axonix.ch", "groups": ["GG_Direction"]}
    data["users"]["zoe"] = {"sid": f"{DOM}-1298", "upn": "zo\u00e9@axonix.ch", "groups": []}
    return FileDirectory(write(data))


@pytest.mark.parametrize("lookalike", [
    "je\u00df.rossi@axonix.ch",  # ß: str.casefold() makes it "ss"
    "je\u017fs.rossi@axonix.ch",  # ſ (long s): casefold() makes it "s"
    "je\u017f\u017f.rossi@axonix.ch",
    "JE\u1e9e.ROSSI@AXONIX.CH",  # ẞ (capital sharp s)
    "jess.ro\u017f\u017fi@axonix.ch",
])
def test_lookalike_identities_never_match(write: Writer, lookalike: str) -> None:
    """Names are matched exactly after NFC and ASCII-only lowercasing, never by Unicode
    case folding — Open WebUI treats jeß.rossi@ and jess.rossi@ as two accounts."""
    d = _with_jess(write)
    assert d.account_of("jess.rossi@axonix.ch") == "jess" and d.principals("jess.rossi@axonix.ch")
    assert lookalike.casefold() == "jess.rossi@axonix.ch"  # what the old matching did
    assert d.principals(lookalike) == frozenset()
    assert d.account_of(lookalike) is None
    assert CachedDirectory(d, 60).account_of(lookalike) is None


def test_names_match_after_nfc_and_ascii_lowercasing(write: Writer) -> None:
    d = _with_jess(write)
    assert d.account_of("Jess.Rossi@AXONIX.CH") == "jess"
    # taken as it is: surrounding whitespace is never stripped into the account (issue 40)
    assert d.account_of("  jess  ") is None and d.principals("jess\u00a0") == frozenset()
    assert d.account_of("zoe\u0301@axonix.ch") == "zoe"  # NFD as macOS writes it: the same text
    assert d.account_of("ZO\u00c9@axonix.ch") is None  # non-ASCII letters are not case-folded
    assert d.account_of("AXONIX\\JESS") == "jess" and d.account_of("AXONIX\\jess.rossi@axonix.ch") is None
    assert d.sid_of("gg_direction") == f"{DOM}-1101" and d.sid_of("GG_Dire\u017ftion") is None


def test_a_name_with_at_is_a_upn_and_matches_upns_only(write: Writer) -> None:
    data = corpus_dict()
    data["users"]["alice"]["upn"] = "a.martin@axonix.ch"
    d = FileDirectory(write(data))
    assert d.account_of("a.martin@axonix.ch") == "alice"
    assert d.account_of("alice") == "alice"
    assert d.account_of("alice@axonix.ch") is None  # sam + a domain is not a UPN of this directory
    data["users"]["x@y"] = {"sid": f"{DOM}-1297"}
    with pytest.raises(DirectoryError, match=r"users\.x@y: an account name cannot contain '@'"):
        FileDirectory(write(data)).principals("alice")
