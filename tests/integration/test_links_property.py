"""Property: for random trees with symbolic links (to files, to folders, outside the
root, into ancre's data directory, to an ancestor, to themselves, to nothing), with links skipped
or followed, the set of (user, document) pairs readable through ancre equals the set readable
through the target files' own ACLs (the manifest's rights of each real file inside the root) —
never more. Checked after a full pass and again after the per-path sync a watcher would run on
every link and folder.

Real folder tree, e5-local and the embedded store; ``ANCRE_LINK_EXAMPLES`` sets the number of
examples (default 25)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.rights_tree import USERS, write_acl, write_config, write_directory

from ancre.acl.directory import FileDirectory
from ancre.acl.manifest import AclManifest
from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.connectors.folder import FolderConnector
from ancre.models import COLLECTIONS

EXAMPLES = int(os.environ.get("ANCRE_LINK_EXAMPLES", "25"))
FOLDERS = ("A", "B", "A/SUB")
NAMES = ("un.txt", "deux.md", "trois.txt")
PRINCIPALS = ("G_RH", "G_TOUS", "rh", "staff", "Everyone")
LINK_KINDS = ("file", "dir", "outside_file", "outside_dir", "ancestor", "root", "self", "dangling", "data")

ace = st.tuples(st.sampled_from(("ALLOW", "DENY")), st.sampled_from(PRINCIPALS), st.just("READ"), st.sampled_from(("OI|CI", "")))
tree = st.fixed_dictionaries({
    "files": st.fixed_dictionaries({f: st.lists(st.sampled_from(NAMES), unique=True, max_size=3) for f in FOLDERS}),
    "acl": st.fixed_dictionaries({f: st.tuples(st.lists(ace, max_size=3), st.booleans()) for f in FOLDERS}),
    "links": st.lists(
        st.tuples(st.sampled_from(("", *FOLDERS)), st.sampled_from(("l1", "l2.txt", "l3.md")), st.sampled_from(LINK_KINDS), st.integers(0, 20), st.booleans()),
        max_size=5, unique_by=lambda t: (t[0], t[1]),
    ),
    "follow": st.booleans(),
})


class World:
    """One Runtime (store, e5, state) reused by every example; each example rebuilds the tree."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="ancre-links-"))
        self.share = self.tmp / "share"
        self.outside = self.tmp / "outside"
        write_directory(self.tmp)
        write_acl(self.tmp, {})
        self.rt = Runtime(load_settings(write_config(self.tmp)))
        self.clock = 1_700_000_000.0
        self.counter = 0
        self.query = None

    def tick(self, p: Path) -> None:
        self.clock += 10
        os.utime(p, (self.clock, self.clock))

    def marker(self) -> str:
        self.counter += 1
        return f"mq{self.counter}x"


_world: World | None = None


def _get_world() -> World:
    global _world  # noqa: PLW0603 - one world per test session, built on first use
    if _world is None:
        _world = World()
    return _world


def _build(w: World, t: dict) -> tuple[dict[str, str], list[str]]:
    """Write the tree; returns the real files (relative path → marker) and the link paths."""
    for d in (w.share, w.outside):
        shutil.rmtree(d, ignore_errors=True)
    for f in FOLDERS:
        (w.share / f).mkdir(parents=True, exist_ok=True)
    w.outside.mkdir()
    (w.outside / "dehors.txt").write_text(f"dossier {w.marker()}", encoding="utf-8")
    real: dict[str, str] = {}
    for folder, names in t["files"].items():
        for n in names:
            m = w.marker()
            p = w.share / folder / n
            p.write_text(f"dossier {m}", encoding="utf-8")
            w.tick(p)
            real[f"{folder}/{n}"] = m
    entries = {}
    for folder, (aces, protected) in t["acl"].items():
        entry: dict = {"aces": [list(a) for a in aces]}
        if protected:
            entry["protected"] = True
        entries[folder] = entry
    entries[""] = {"protected": True, "aces": [["ALLOW", "Everyone", "READ", "OI|CI"]]}  # the root: open
    acl = write_acl(w.tmp, {k: v for k, v in entries.items() if k})
    text = acl.read_text(encoding="utf-8").replace('"Administrators", "FULL"', '"Everyone", "READ"')
    acl.write_text(text, encoding="utf-8")
    w.tick(acl)
    links: list[str] = []
    files = sorted(real)
    for folder, name, kind, k, relative in t["links"]:
        where = w.share / folder / name if folder else w.share / name
        if where.exists() or where.is_symlink():
            continue
        target: Path | str
        if kind == "file":
            if not files:
                continue
            target = w.share / files[k % len(files)]
        elif kind == "dir":
            target = w.share / FOLDERS[k % len(FOLDERS)]
        elif kind == "outside_file":
            target = w.outside / "dehors.txt"
        elif kind == "outside_dir":
            target = w.outside
        elif kind == "ancestor":
            target = where.parent.parent if folder else w.share
        elif kind == "root":
            target = w.share
        elif kind == "self":
            target = where
        elif kind == "dangling":
            target = w.share / "absent.txt"
        else:
            target = w.rt.data_dir
        if relative and kind != "self":
            target = os.path.relpath(target, where.parent)
        os.symlink(target, where)
        links.append(f"{folder}/{name}" if folder else name)
    return real, links


def _through_ancre(w: World) -> set[tuple[str, str]]:
    if w.query is None:
        w.query = w.rt.embedder.embed_query("dossier")
    pairs = set()
    for user in USERS:
        principals = w.rt.directory.principals(user)
        for coll in COLLECTIONS:
            for p in w.rt.store.search(coll, w.query, principals, limit=10_000):
                marker = next(tok for tok in p.payload.text.split() if tok.startswith("mq"))
                pairs.add((user, marker))
    return pairs


def _oracle(w: World, real: dict[str, str]) -> set[tuple[str, str]]:
    directory = FileDirectory(w.tmp / "directory.json")
    manifest = AclManifest.load(w.tmp / "acl.json", directory)
    return {
        (user, marker)
        for user in USERS
        for path, marker in real.items()
        if manifest.acl_for(path, is_dir=False).readable_by(directory.principals(user))
    }


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(t=tree)
def test_links_never_widen_what_a_user_may_read(t: dict) -> None:
    w = _get_world()
    real, links = _build(w, t)
    src = w.rt.settings.sources[0].model_copy(update={"follow_symlinks": t["follow"]})
    conn = FolderConnector(src, directory=w.rt.directory, ignore=w.rt.settings.ignore, private_dirs=w.rt.private_paths())
    rep = w.rt.engine.run_pass(conn, rebuild_bm25=False)
    assert rep.outcome == "ok" and rep.failed == 0, rep
    expected = _oracle(w, real)
    assert _through_ancre(w) == expected
    rows = {r.path: r for r in w.rt.state.all_items()}
    for link in links:
        if not t["follow"]:
            assert rows[link].status == "skipped" and rows[link].reason == "symlink", rows.get(link)
    # what a watcher's per-path sync would do on every link and folder brings nothing more in
    rep = w.rt.engine.sync_paths(conn, [*links, *FOLDERS], rebuild_bm25=False)
    assert rep.outcome == "ok", rep
    assert _through_ancre(w) == expected


def teardown_module() -> None:
    global _world  # noqa: PLW0603 - one world per test session, built on first use
    if _world is not None:
        _world.rt.close()
        shutil.rmtree(_world.tmp, ignore_errors=True)
        _world = None
