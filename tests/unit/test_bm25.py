"""French tokenizer and BM25 index: scoring, persistence, generations and crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ancre.errors import AncreError
from ancre.index.bm25 import Bm25Entry, Bm25Hit, Bm25Index, Bm25IndexError, Bm25Manager
from ancre.index.tokenize import STOP_WORDS, fold, tokenize
from ancre.models import Acl, Grant

REPO = Path(__file__).resolve().parents[2]
DOCUMENTATION = REPO / "examples" / "axonix" / "share" / "DOCUMENTATION"

FILLER = [
    "Le serveur de fichiers est sauvegardé chaque nuit sur le NAS du client.",
    "La migration vers Microsoft 365 est planifiée pour le deuxième trimestre.",
    "Les postes Windows 11 reçoivent les correctifs de sécurité chaque mois.",
    "Le pare-feu filtre les connexions entrantes vers le réseau interne.",
    "Une astreinte est assurée le week-end pour les incidents bloquants.",
]


def entry(i: int, text: str, filename: str = "note.docx", collection: str = "documents") -> Bm25Entry:
    return Bm25Entry(point_id=f"p{i}", collection=collection, text=text, filename=filename)


def filler_entries(n: int, start: int = 0) -> list[Bm25Entry]:
    return [entry(start + i, f"{FILLER[i % len(FILLER)]} Note {i}.") for i in range(n)]


# --- tokenizer ---------------------------------------------------------------------------------


def test_fold_accents_case_ligatures() -> None:
    assert fold("Étude Rochat") == "etude rochat"
    assert fold("CŒUR Ça Où") == "coeur ca ou"
    assert fold("plain ascii") == "plain ascii"


def test_accents_and_case_do_not_matter() -> None:
    assert tokenize("Étude Rochat") == tokenize("etude rochat") == tokenize("ETUDE ROCHAT")
    assert tokenize("sécurité") == tokenize("securite")


def test_stop_words_dropped_and_elisions_split() -> None:
    assert tokenize("le la les de du des et à où") == []
    assert tokenize("Que fait la ?") == tokenize("fait")
    for elided in ("l'étude", "l’étude", "d'étude", "qu'étude", "j'étude", "L’Étude"):
        assert tokenize(elided) == tokenize("étude"), elided
    assert {"l", "d", "qu", "j", "n", "s", "c", "m", "t"} <= STOP_WORDS


def test_code_kept_whole_and_split() -> None:
    toks = tokenize("la règle WD-EXCL-042 exclut")
    assert "wd-excl-042" in toks
    assert {"wd", "excl", "042"} <= set(toks)
    assert toks.index("wd-excl-042") < toks.index("wd")


def test_file_name_whole_stem_and_parts() -> None:
    toks = tokenize("21_Contrat_Maintenance_Baumont_Industries.docx")
    assert toks[0] == "21_contrat_maintenance_baumont_industries.docx"
    assert toks[1] == "21_contrat_maintenance_baumont_industries"
    assert {"21", "baumont", "docx"} <= set(toks)
    assert set(tokenize("Contrat maintenance Industries")) <= set(toks)


def test_numbers_kept_and_thousands_joined() -> None:
    assert {"35", "3840"} <= set(tokenize("35 postes pour 3840 francs"))
    assert "4200" in tokenize("CHF 4 200 HT")
    assert "4200" in tokenize("CHF 4\u202f200 HT")  # narrow no-break space
    assert "4200" in tokenize("CHF 4'200 HT")
    assert "44800" in tokenize("CHF 44 800 HT")
    assert "042" in tokenize("WD-EXCL-042")


def test_stemming_conflates_inflections() -> None:
    assert tokenize("règles") == tokenize("règle")
    assert tokenize("contrats") == tokenize("contrat")
    assert tokenize("mensuelle") == tokenize("mensuel")


def test_typographic_punctuation_and_non_latin_text() -> None:
    assert tokenize("«Étude»—Rochat “contrat”") == tokenize("etude rochat contrat")
    mixed = tokenize("日本語 Étude WD-EXCL-042 CHF 4 200")  # non-ASCII after folding
    assert tokenize("Étude WD-EXCL-042 CHF 4 200") == mixed[1:]
    assert mixed[0] == "日本語"


def test_tokenize_deterministic_and_total() -> None:
    text = "L'Étude Rochat — contrat 03_Contrat.docx, CHF 3 840 HT ; qwen2.5:14b; 日本語 Ωmega"
    assert tokenize(text) == tokenize(text)
    assert tokenize("") == []
    assert tokenize("!!! ... ---") == []


# --- index ---------------------------------------------------------------------------------------


def test_accented_text_matches_unaccented_query() -> None:
    idx = Bm25Index.build(
        [entry(0, "Contrat de maintenance — Étude Rochat & Associés"), *filler_entries(20, 1)]
    )
    hits = idx.search("etude rochat", 5)
    assert hits[0].point_id == "p0"
    assert all(h.point_id == "p0" for h in hits)  # nothing else shares a term


def test_code_found_among_many() -> None:
    docs = filler_entries(300)
    docs += [entry(1000 + i, f"La règle WD-EXCL-{i:03d} exclut un dossier.") for i in range(40) if i != 42]
    docs.append(entry(9999, "La règle WD-EXCL-042 exclut le dossier C:\\Axonix\\Agent."))
    hits = Bm25Index.build(docs).search("Que fait la règle WD-EXCL-042 ?", 10)
    assert hits[0].point_id == "p9999"
    assert hits[0].score > hits[1].score


def test_file_name_is_indexed() -> None:
    docs = [*filler_entries(30), entry(77, "Annexe sans mot-clé.", "21_Contrat_Maintenance_Baumont_Industries.docx")]
    hits = Bm25Index.build(docs).search("Baumont", 5)
    assert [h.point_id for h in hits] == ["p77"]


def test_term_in_half_or_all_documents_scores_positive() -> None:
    docs = [entry(i, "serveur " + ("sauvegarde" if i % 2 else "réseau")) for i in range(10)]
    idx = Bm25Index.build(docs)
    half = idx.search("sauvegarde", 10)
    assert len(half) == 5 and all(h.score > 0 for h in half)
    everywhere = idx.search("serveur", 10)
    assert len(everywhere) == 10 and all(h.score > 0 for h in everywhere)


def test_results_best_first_limited_and_carry_collection() -> None:
    docs = [entry(0, "pare-feu pare-feu pare-feu OPNsense", collection="documentation"), entry(1, "pare-feu OPNsense"), entry(2, "pare-feu"), *filler_entries(10, 3)]
    idx = Bm25Index.build(docs)
    hits = idx.search("pare-feu OPNsense", 2)
    assert [h.point_id for h in hits] == ["p0", "p1"]
    assert hits[0] == Bm25Hit("p0", "documentation", hits[0].score)
    assert hits[0].score > hits[1].score > 0
    assert idx.search("pare-feu", 0) == []


def test_empty_index_and_stop_word_queries() -> None:
    empty = Bm25Index.build([])
    assert len(empty) == 0
    assert empty.search("contrat", 10) == [] and empty.search("", 10) == []
    idx = Bm25Index.build(filler_entries(10))
    assert idx.search("le la les de", 10) == []
    assert idx.search("zzzinconnu", 10) == []
    assert idx.search("", 10) == []
    only_stop = Bm25Index.build([entry(0, "le la les"), entry(1, "de du")])
    assert only_stop.search("le", 5) == [] and only_stop.search("contrat", 5) == []


def test_duplicate_point_ids_rejected() -> None:
    with pytest.raises(ValueError):
        Bm25Index.build([entry(1, "a"), entry(1, "b")])


def test_save_load_roundtrip(tmp_path: Path) -> None:
    idx = Bm25Index.build(
        [*filler_entries(50), entry(500, "La règle WD-EXCL-042", collection="documentation")]
    )
    idx.save(tmp_path / "snap")
    back = Bm25Index.load(tmp_path / "snap")
    assert len(back) == len(idx)
    for q in ("WD-EXCL-042", "correctifs Windows", "astreinte week-end", "le"):
        assert back.search(q, 20) == idx.search(q, 20)
    top = back.search("WD-EXCL-042", 1)[0]
    assert (top.point_id, top.collection) == ("p500", "documentation")
    Bm25Index.build([]).save(tmp_path / "empty")
    assert Bm25Index.load(tmp_path / "empty").search("contrat", 5) == []


def test_load_rejects_missing_and_foreign_snapshots(tmp_path: Path) -> None:
    with pytest.raises(Bm25IndexError):
        Bm25Index.load(tmp_path / "nothing")
    Bm25Index.build(filler_entries(5)).save(tmp_path / "snap")
    meta_path = tmp_path / "snap" / "entries.json"
    meta = json.loads(meta_path.read_text())
    meta["tokenizer"] = "some-other-tokenizer"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(Bm25IndexError, match="tokenizer"):
        Bm25Index.load(tmp_path / "snap")
    assert issubclass(Bm25IndexError, AncreError)


def _doc_chunks(path: Path, size: int = 1000) -> list[str]:
    chunks, cur = [], ""
    for para in path.read_text(encoding="utf-8").split("\n\n"):
        if cur and len(cur) + len(para) > size:
            chunks.append(cur)
            cur = ""
        cur += para + "\n\n"
    return [*chunks, cur] if cur.strip() else chunks


def test_corpus_exact_code_question() -> None:
    entries = []
    for path in sorted(DOCUMENTATION.glob("*.md")):
        for i, text in enumerate(_doc_chunks(path)):
            entries.append(Bm25Entry(f"{path.name}#{i}", "documentation", text, path.name))
    assert len(entries) > 40
    hits = Bm25Index.build(entries).search("Que fait la règle WD-EXCL-042 ?", 30)
    assert hits[0].point_id.startswith("11-correlations-yaml.md#")
    top_text = next(e.text for e in entries if e.point_id == hits[0].point_id)
    assert "WD-EXCL-042" in top_text


# --- rights-aware candidates ----------------------------------------------------------

TECH, COM, STAG, BAD = "sid:S-1-5-21-9-1102", "sid:S-1-5-21-9-1104", "sid:S-1-5-21-9-1103", "sid:S-1-5-21-9-666"


def _narrow_index() -> Bm25Index:
    """60 technician notes repeat the code; one commercial note mentions it once; one note that
    allows technicians denies trainees; one note is readable by nobody."""
    notes = [
        Bm25Entry(f"t{i}", "documents", f"Relais RX-7731 remplacé. RX-7731 contrôlé, RX-7731 conforme. {i}",
                  "note.md", (TECH,))
        for i in range(60)
    ]
    offer = Bm25Entry(
        "c0", "documents",
        "Offre commerciale : passerelles industrielles, formation, support de trois ans, "
        "fourniture et mise en service. Référence du modèle retenu : RX-7731. Prix hors taxes.",
        "offre.md", (COM, TECH),
    )
    denied = Bm25Entry("d0", "documents", "RX-7731 RX-7731 salle serveur", "acces.md", (TECH,), (STAG,))
    nobody = Bm25Entry("n0", "documents", "RX-7731 RX-7731 RX-7731", "orphan.md", ())
    return Bm25Index.build([*notes, offer, denied, nobody])


def test_mask_scores_only_the_users_chunks() -> None:
    idx = _narrow_index()
    everyone = [h.point_id for h in idx.search("RX-7731", 30)]
    assert "c0" not in everyone, "over the whole snapshot the notes crowd the offer out"
    assert [h.point_id for h in idx.search("RX-7731", 30, frozenset({COM}))] == ["c0"]
    tech = [h.point_id for h in idx.search("RX-7731", 100, frozenset({TECH}))]
    assert len(tech) == 62 and "n0" not in tech and {"c0", "d0"} <= set(tech)
    trainee = [h.point_id for h in idx.search("RX-7731", 100, frozenset({TECH, STAG}))]
    assert "d0" not in trainee and len(trainee) == 61, "deny wins over allow"
    assert idx.search("RX-7731", 30, frozenset()) == [], "empty principal set: nothing, never no filter"
    assert idx.search("RX-7731", 30, frozenset({BAD})) == []


def test_mask_equals_an_index_of_only_the_users_chunks() -> None:
    """The masked ranking is the ranking the user's chunks get among themselves (same order; IDF
    stays the whole snapshot's, so only scores differ)."""
    idx = _narrow_index()
    for principals in (frozenset({COM}), frozenset({TECH}), frozenset({TECH, STAG})):
        mask = idx.readable_mask(principals)
        assert mask.dtype == bool and len(mask) == len(idx)
        masked = [h.point_id for h in idx.search("RX-7731 salle serveur", 100, principals)]
        assert set(masked) == {idx._point_ids[i] for i in mask.nonzero()[0]}


def test_acl_columns_survive_save_and_load(tmp_path: Path) -> None:
    idx = _narrow_index()
    idx.save(tmp_path / "snap")
    back = Bm25Index.load(tmp_path / "snap")
    for p in (frozenset({COM}), frozenset({TECH, STAG}), frozenset({BAD})):
        assert back.search("RX-7731", 30, p) == idx.search("RX-7731", 30, p)
        assert (back.readable_mask(p) == idx.readable_mask(p)).all()


def test_snapshot_without_acl_columns_is_not_loaded(tmp_path: Path) -> None:
    """A format-1 snapshot (no ACL columns) is refused, so the daemon rebuilds it."""
    _narrow_index().save(tmp_path / "snap")
    meta_path = tmp_path / "snap" / "entries.json"
    meta = json.loads(meta_path.read_text())
    meta["format"] = 1
    del meta["acls"], meta["acl_ids"]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(Bm25IndexError, match="format"):
        Bm25Index.load(tmp_path / "snap")


def test_mask_evaluates_grants_exactly_and_at_this_instant(tmp_path: Path) -> None:
    """An ACL with grants (an ordered DACL walk, an expiring link): the mask applies the
    allow/deny prefilter, then the grants, with the current time — also after save and load, and
    from a format-2 snapshot (no grants column) as before."""
    ordered = Acl.of([Grant(frozenset({COM})), Grant(frozenset({TECH}), frozenset({STAG}))])
    expiring = Acl.of([Grant(frozenset({COM}), expires=time.time() + 1.0)])

    def entry(pid: str, acl: Acl) -> Bm25Entry:
        return Bm25Entry(
            pid, "documents", "RX-7731 salle serveur", f"{pid}.md",
            tuple(sorted(acl.allow)), tuple(sorted(acl.deny)), acl.grants_payload(),
        )

    idx = Bm25Index.build([entry("o0", ordered), entry("x0", expiring)])
    idx.save(tmp_path / "snap")
    for index in (idx, Bm25Index.load(tmp_path / "snap")):
        assert {h.point_id for h in index.search("RX-7731", 10, frozenset({COM, STAG}))} == {"o0", "x0"}
        assert {h.point_id for h in index.search("RX-7731", 10, frozenset({TECH, STAG}))} == set()
        assert {h.point_id for h in index.search("RX-7731", 10, frozenset({TECH}))} == {"o0"}
    time.sleep(1.1)
    assert {h.point_id for h in idx.search("RX-7731", 10, frozenset({COM}))} == {"o0"}

    plain = _narrow_index()
    plain.save(tmp_path / "v2")
    meta_path = tmp_path / "v2" / "entries.json"
    meta = json.loads(meta_path.read_text())
    meta["format"] = 2
    meta["acls"] = [entry[:2] for entry in meta["acls"]]
    meta_path.write_text(json.dumps(meta))
    back = Bm25Index.load(tmp_path / "v2")
    for p in (frozenset({COM}), frozenset({TECH, STAG})):
        assert back.search("RX-7731", 30, p) == plain.search("RX-7731", 30, p)


def test_term_stats_count_only_readable_chunks() -> None:
    idx = _narrow_index()
    n, df = idx.term_stats(["rx-7731", "offre", "absent"], frozenset({COM}))
    assert n == 1 and df == {"rx-7731": 1, "offre": 1, "absent": 0}
    n, df = idx.term_stats(["rx-7731", "offre"], frozenset({TECH}))
    assert n == 62 and df == {"rx-7731": 62, "offre": 1}
    assert idx.term_stats(["rx-7731"], frozenset()) == (0, {"rx-7731": 0})


# --- manager ---------------------------------------------------------------------------------------


def test_manager_before_publish_is_empty(tmp_path: Path) -> None:
    m = Bm25Manager(tmp_path / "bm25")
    assert m.current_generation() == 0
    assert m.get().search("contrat", 5) == []


def test_manager_generations_and_reload_in_other_instance(tmp_path: Path) -> None:
    writer = Bm25Manager(tmp_path / "bm25")
    reader = Bm25Manager(tmp_path / "bm25")  # as a query process would
    assert writer.publish(Bm25Index.build([entry(1, "contrat Rochat")])) == 1
    assert reader.get().search("Rochat", 5)[0].point_id == "p1"
    first = reader.get()
    assert reader.get() is first  # no reload while the generation stays

    assert writer.publish(Bm25Index.build([entry(2, "contrat Baumont")])) == 2
    assert reader.current_generation() == 2
    assert [h.point_id for h in reader.get().search("Baumont Rochat", 5)] == ["p2"]

    assert writer.publish(Bm25Index.build([entry(3, "contrat Sarrasin")])) == 3
    gens = sorted(p.name for p in (tmp_path / "bm25").iterdir() if p.name.startswith("gen-"))
    assert gens == ["gen-2", "gen-3"]  # current and previous kept
    assert reader.get().search("Sarrasin", 5)[0].point_id == "p3"


def test_interrupted_publish_leaves_previous_generation(tmp_path: Path) -> None:
    root = tmp_path / "bm25"
    writer = Bm25Manager(root)
    writer.publish(Bm25Index.build([entry(1, "contrat Rochat")]))
    # a publish killed half-way: a generation folder written in part, CURRENT not swapped
    partial = root / "gen-2"
    partial.mkdir()
    (partial / "params.index.json").write_text('{"k1": 1.2')
    (root / ".tmp-gen-3").mkdir()
    (root / "CURRENT.tmp").write_text("3")

    reader = Bm25Manager(root)
    assert reader.current_generation() == 1
    assert reader.get().search("Rochat", 5)[0].point_id == "p1"

    gen = Bm25Manager(root).publish(Bm25Index.build([entry(2, "contrat Baumont")]))
    assert gen == 4
    assert not partial.exists() and not (root / ".tmp-gen-3").exists()
    assert reader.get().search("Baumont", 5)[0].point_id == "p2"


def test_corrupt_current_generation_keeps_last_good(tmp_path: Path) -> None:
    root = tmp_path / "bm25"
    Bm25Manager(root).publish(Bm25Index.build([entry(1, "contrat Rochat")]))
    reader = Bm25Manager(root)
    assert reader.get().search("Rochat", 5)
    (root / "gen-2").mkdir()
    (root / "gen-2" / "entries.json").write_text("{not json")
    (root / "CURRENT").write_text("2\n")
    assert reader.get().search("Rochat", 5)[0].point_id == "p1"
    assert Bm25Manager(root).get().search("Rochat", 5) == []  # nothing good ever loaded
    (root / "CURRENT").write_text("garbage")
    assert reader.get().search("Rochat", 5)[0].point_id == "p1"


_PUBLISHER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ancre.index.bm25 import Bm25Entry, Bm25Index, Bm25Manager

    m = Bm25Manager(Path(sys.argv[1]))
    texts = ["contrat de maintenance Rochat forfait mensuel %d" % i for i in range(3000)]
    n = 0
    while True:
        n += 1
        m.publish(Bm25Index.build(
            [Bm25Entry("p%d" % i, "documents", t + " round%d" % n, "f.docx") for i, t in enumerate(texts)]
        ))
    """
)


def test_kill_9_during_publishes_leaves_a_usable_generation(tmp_path: Path) -> None:
    root = tmp_path / "bm25"
    proc = subprocess.Popen([sys.executable, "-c", _PUBLISHER, str(root)])
    try:
        reader = Bm25Manager(root)
        deadline = time.monotonic() + 120
        while reader.current_generation() < 3:
            assert proc.poll() is None, "publisher died"
            assert time.monotonic() < deadline, "publisher made no progress"
            time.sleep(0.02)
        time.sleep(0.05)  # land somewhere inside a later publish
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    after = Bm25Manager(root)
    gen = after.current_generation()
    assert gen >= 3
    hits = after.get().search(f"round{gen}", 5)
    assert len(hits) == 5 and all(h.score > 0 for h in hits)
    new = after.publish(Bm25Index.build([entry(1, "contrat Baumont")]))
    assert new > gen
    names = {p.name for p in root.iterdir()} - {"CURRENT", "CURRENT.tmp"}
    assert names == {f"gen-{gen}", f"gen-{new}"}


def test_is_current_tracks_loadable_generation(tmp_path) -> None:
    mgr = Bm25Manager(tmp_path / "bm25")
    assert not mgr.is_current()
    entry = Bm25Entry("00000000-0000-0000-0000-000000000001", "documents", "texte", "a.md")
    gen = mgr.publish(Bm25Index.build([entry]))
    assert mgr.is_current()
    assert Bm25Manager(tmp_path / "bm25").is_current()
    # a snapshot written by another tokenizer version can't be loaded: not current
    meta = tmp_path / "bm25" / f"gen-{gen}" / "entries.json"
    data = json.loads(meta.read_text(encoding="utf-8"))
    data["tokenizer"] = "another-tokenizer"
    meta.write_text(json.dumps(data), encoding="utf-8")
    assert not Bm25Manager(tmp_path / "bm25").is_current()
