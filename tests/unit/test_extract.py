"""Text extraction: hostile files, the real corpus, text clean-up, and the worker pool."""

from __future__ import annotations

import io
import re
import unicodedata
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.hostile import (
    Expect,
    encrypted_xlsx,
    make_hostile_files,
    make_office_files,
    pptx_bytes,
    rezip,
    simple_docx,
    status_for_reason,
    xlsx_bytes,
)

from ancre.config import load_settings
from ancre.errors import ExtractionError
from ancre.ingest.extract import extract_bytes
from ancre.ingest.limits import ExtractionLimits
from ancre.ingest.textclean import collapse_leaders, normalize_pdf_text
from ancre.ingest.worker import ExtractionPool
from ancre.models import Block, BlockKind

SHARE = Path(__file__).resolve().parents[2] / "examples" / "axonix" / "share"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Expect]]:
    folder = tmp_path_factory.mktemp("hostile")
    return folder, make_hostile_files(folder)


@pytest.fixture(scope="module")
def pool() -> Iterator[ExtractionPool]:
    with ExtractionPool(timeout_s=30) as p:
        yield p


def _outcome(run, data: bytes, name: str) -> tuple[str, str | None, str]:
    try:
        blocks = run(data, name)
    except ExtractionError as exc:
        return status_for_reason(exc.reason), exc.reason, exc.detail
    return "indexed", None, "\n".join(b.text for b in blocks)


def _mismatches(folder: Path, expect: dict[str, Expect], run) -> list[str]:
    problems = []
    for name, exp in expect.items():
        if exp.status == "ignored":
            continue  # the connector's job: lock files are never listed
        status, reason, text = _outcome(run, (folder / name).read_bytes(), name)
        if (status, reason) != (exp.status, exp.reason):
            problems.append(f"{name}: got {status}/{reason} ({text[:120]!r}), want {exp.status}/{exp.reason}")
            continue
        problems += [f"{name}: missing {m!r}" for m in exp.must_contain if m not in text]
        problems += [f"{name}: must not contain {m!r}" for m in exp.must_not_contain if m in text]
        problems += [
            f"{name}: {m!r} found {text.count(m)} times, want 1"
            for m in exp.count_once
            if text.count(m) != 1
        ]
    return problems


def test_hostile_files_direct(hostile: tuple[Path, dict[str, Expect]]) -> None:
    folder, expect = hostile
    assert _mismatches(folder, expect, extract_bytes) == []


def test_hostile_files_through_pool(
    hostile: tuple[Path, dict[str, Expect]], pool: ExtractionPool
) -> None:
    folder, expect = hostile
    assert _mismatches(folder, expect, pool.extract) == []


def test_hostile_set_covers_the_brief(hostile: tuple[Path, dict[str, Expect]]) -> None:
    folder, expect = hostile
    names = set(expect)
    assert "~$21_Contrat_Maintenance_Baumont_Industries.docx" in names
    assert expect["~$21_Contrat_Maintenance_Baumont_Industries.docx"].status == "ignored"
    assert "Devis (v2) [final].docx" in names
    nfd = [n for n in names if n.endswith(".md") and unicodedata.is_normalized("NFD", n)
           and not unicodedata.is_normalized("NFC", n)]
    assert nfd, "a file name in NFD form"
    assert {e.reason for e in expect.values()} >= {"corrupt", "encrypted", "empty", "unsupported"}
    for name in expect:
        assert (folder / name).is_file()


def test_tricky_docx_structure(hostile: tuple[Path, dict[str, Expect]]) -> None:
    folder, _ = hostile
    blocks = extract_bytes((folder / "piege.docx").read_bytes(), "piege.docx")
    rows = [b.text for b in blocks if b.kind is BlockKind.TABLE_ROW]
    # header table first, then the body table; merged cells once per row
    assert rows[0] == "Société | MARQUEURENTETE"
    assert "Poste | Détail | Montant" in rows
    assert "MARQUEURFUSION | MARQUEURVERTICAL" in rows
    assert "Ligne deux | Sous-détail" in rows  # the vMerge continuation adds nothing
    assert "Ligne trois | Imbriqué | MARQUEURIMBRIQUE" in rows
    texts = [b.text for b in blocks]
    # the text box comes right after the paragraph that anchors it
    anchor = texts.index("Ancre de la zone de texte.")
    assert texts[anchor + 1] == "Encadré MARQUEURTXBX"
    assert blocks[texts.index("Document piégé")] == Block(BlockKind.HEADING, "Document piégé", level=1)
    assert texts[-1] == "Pied de page MARQUEURPIED"


def test_sommaire_pdf_pages(hostile: tuple[Path, dict[str, Expect]]) -> None:
    folder, _ = hostile
    blocks = extract_bytes((folder / "sommaire.pdf").read_bytes(), "sommaire.pdf")
    assert [b.page for b in blocks if b.kind is BlockKind.PAGE_BREAK] == [2]
    assert {b.page for b in blocks if "MARQUEURPAGE2" in b.text} == {2}
    assert {b.page for b in blocks if "MARQUEURPDF" in b.text} == {1}
    assert "1. Introduction 2" in [b.text for b in blocks]  # TOC entries stay separate lines


def test_unsupported_and_empty() -> None:
    with pytest.raises(ExtractionError) as err:
        extract_bytes(b"data", "dessin.vsdx")
    assert err.value.reason == "unsupported"
    with pytest.raises(ExtractionError) as err:
        extract_bytes(b"", "x.pdf")
    assert err.value.reason == "empty"
    with pytest.raises(ExtractionError) as err:
        extract_bytes(b"%PDF-1.4\ngarbage", "x.pdf")
    assert err.value.reason == "corrupt" and err.value.detail


def test_markdown_structure() -> None:
    md = (
        "# Titre\n\nIntro *simple*.\n\n## Sous-titre\n\n- un\n- deux\n\n"
        "```yaml\nid: W-001\n\n# pas un titre\n```\n\n| A | B |\n|---|---|\n| 1 | 2 |\n\nFin\n=====\n"
    )
    blocks = extract_bytes(md.encode(), "doc.markdown")
    assert blocks[0] == Block(BlockKind.HEADING, "Titre", level=1)
    assert Block(BlockKind.HEADING, "Sous-titre", level=2) in blocks
    assert Block(BlockKind.PARAGRAPH, "- un\n- deux") in blocks
    assert Block(BlockKind.PARAGRAPH, "```yaml\nid: W-001\n\n# pas un titre\n```") in blocks
    assert [b.text for b in blocks if b.kind is BlockKind.TABLE_ROW] == ["A | B", "1 | 2"]
    assert blocks[-1] == Block(BlockKind.HEADING, "Fin", level=1)
    assert not any(b.kind is BlockKind.HEADING and "pas un titre" in b.text for b in blocks)


def test_txt_paragraphs_split_on_blank_lines() -> None:
    blocks = extract_bytes(b"un\ndeux\n\n\ntrois\r\n\r\nquatre", "notes.TXT")
    assert [b.text for b in blocks] == ["un\ndeux", "trois", "quatre"]
    assert {b.kind for b in blocks} == {BlockKind.PARAGRAPH}


# ----------------------------------------------------------------------------- the real corpus


def _corpus_text(relative: str) -> tuple[tuple[Block, ...], str]:
    path = SHARE / relative
    blocks = extract_bytes(path.read_bytes(), path.name)
    return blocks, "\n".join(b.text for b in blocks)


def test_corpus_pdf_has_no_leaders() -> None:
    blocks, text = _corpus_text("DOCUMENTATION/Politique_Securite_SI.pdf")
    assert "14 caractères" in text
    assert "...." not in text and "…" not in text and ". . ." not in text
    assert "1. Objet de la politique 2" in text  # TOC entry kept, its leader gone
    assert {b.page for b in blocks} == {1, 2}


@pytest.mark.parametrize(
    ("relative", "facts"),
    [
        ("CLIENTS/21_Contrat_Maintenance_Baumont_Industries.docx",
         ("35 postes", "CHF 4 200 HT", "4 heures ouvrées", "Forfait mensuel | CHF 4 200 HT",
          "Axonix SA — Confidentiel", "Contrat 21 — Baumont Industries")),
        ("DIRECTION/03_Contrat_Maintenance_Etude_Rochat.docx",
         ("20 postes", "CHF 3 840 HT", "Astreinte (par heure) | CHF 220 HT")),
        ("ARCHIVES/03_Contrat_Maintenance_Etude_Rochat_v2024.docx",
         ("18 postes", "CHF 3 100 HT", "pfSense")),
        ("COMMERCIAL/04_Reponse_AO_Migration_Azure_Sarrasin.docx",
         ("12 machines virtuelles", "Total | 28 | CHF 44 800 HT", "CHF 2 350 HT")),
        ("RH/Grille_Salariale_2026.docx", ("Directeur technique | CHF 165 000",)),
        ("CLIENTS/test-deny-explicite.docx", ("4471-ZETA",)),
        ("DOCUMENTATION/09-pipeline-llm.md", ("qwen2.5:14b", "nomic-embed-text")),
        ("DOCUMENTATION/11-correlations-yaml.md", ("id: W-001", "Règle W-001")),
    ],
)
def test_corpus_facts(relative: str, facts: tuple[str, ...]) -> None:
    _, text = _corpus_text(relative)
    for fact in facts:
        assert fact in text


def test_corpus_docx_headings_and_rows() -> None:
    blocks, _ = _corpus_text("CLIENTS/21_Contrat_Maintenance_Baumont_Industries.docx")
    headings = [(b.level, b.text) for b in blocks if b.kind is BlockKind.HEADING]
    assert headings[0] == (1, "Contrat de maintenance — Baumont Industries")
    assert (2, "4. Conditions financières") in headings
    rows = [b.text for b in blocks if b.kind is BlockKind.TABLE_ROW]
    assert rows == [
        "Poste | Montant",
        "Forfait mensuel | CHF 4 200 HT",
        "Heure hors forfait | CHF 160 HT",
        "Astreinte (par heure) | CHF 220 HT",
    ]
    # document order: the table sits under "4. Conditions financières"
    kinds = [b.text for b in blocks]
    assert kinds.index("4. Conditions financières") < kinds.index("Poste | Montant") < kinds.index("5. Durée")


# ---------------------------------------------------------------------------------- text clean


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("1. Objet ........ 2", "1. Objet 2"),
        ("2. Accès …………… 3", "2. Accès 3"),
        ("3. Annexes . . . . . . 4", "3. Annexes 4"),
        ("Nom : ________ fin", "Nom : fin"),
        ("Chapitre····12", "Chapitre 12"),
        ("etc.… suite", "etc suite"),
        ("Attendez... voilà", "Attendez... voilà"),
        ("A · B", "A · B"),
        ("v1.2.3 et a_b", "v1.2.3 et a_b"),
    ],
)
def test_collapse_leaders(raw: str, clean: str) -> None:
    assert collapse_leaders(raw) == clean


def test_normalize_pdf_text() -> None:
    raw = (
        "Le système d'infor-\nmation de Jean-\nPierre et de Jean-Pierre\x00, règle 3-\n2-1,\n"
        "chif\u00adfre-  \n  ment ﬁnal\u00a0!\n\n\n\nSommaire ........ 4\t\tfin   "
    )
    assert normalize_pdf_text(raw) == (
        "Le système d'information de Jean-Pierre et de Jean-Pierre, règle 3-2-1,\n"
        "chiffrement final !\n\nSommaire 4 fin"
    )


# ------------------------------------------------------------------------------- the worker pool


def test_pool_reuses_worker() -> None:
    with ExtractionPool(timeout_s=30) as pool:
        first = pool.extract(b"# Un\n\ntexte", "a.md")
        pid = pool.worker_pid
        second = pool.extract(b"autre texte", "b.txt")
        assert pool.worker_pid == pid and pid is not None
    assert first[0] == Block(BlockKind.HEADING, "Un", level=1)
    assert second == (Block(BlockKind.PARAGRAPH, "autre texte"),)
    assert pool.worker_pid is None
    with pytest.raises(RuntimeError):
        pool.extract(b"x", "a.txt")


def test_pool_timeout_kills_and_recovers() -> None:
    with ExtractionPool(timeout_s=1, target="support.hostile:misbehave_on_marker") as pool:
        assert pool.extract(b"avant", "a.txt")[0].text == "avant"
        pid = pool.worker_pid
        with pytest.raises(ExtractionError) as err:
            pool.extract(b"boucle", "fichier.hang")
        assert err.value.reason == "timeout"
        assert err.value.detail == "after 1 s"
        assert pool.worker_pid is None  # killed, not left running
        assert pool.extract(b"apres", "b.txt")[0].text == "apres"
        assert pool.worker_pid not in (None, pid)


def test_pool_start_up_is_not_charged_to_the_file() -> None:
    """A worker whose start takes 2 s (slow import) still extracts its first file within a 1 s
    per-file limit: the clock starts when the worker is ready."""
    with ExtractionPool(timeout_s=1, target="support.slow_start:echo") as pool:
        assert pool.extract(b"premier", "a.txt")[0].text == "premier"


def test_pool_crash_and_errors_recover() -> None:
    with ExtractionPool(timeout_s=30, target="support.hostile:misbehave_on_marker") as pool:
        with pytest.raises(ExtractionError) as err:
            pool.extract(b"x", "segfault.crash")
        assert err.value.reason == "crashed"
        assert "13" in err.value.detail  # the exit code is reported
        assert pool.extract(b"ok", "a.txt")[0].text == "ok"

        with pytest.raises(ExtractionError) as err:
            pool.extract(b"x", "gros.oom")
        assert (err.value.reason, err.value.detail) == ("crashed", "MemoryError")
        assert pool.extract(b"ok", "a.txt")[0].text == "ok"

        pid = pool.worker_pid
        with pytest.raises(ExtractionError) as err:
            pool.extract(b"x", "x.bug")
        assert err.value.reason == "crashed" and "bogus extractor" in err.value.detail
        assert pool.worker_pid == pid  # a Python exception does not cost the worker

        with pytest.raises(ExtractionError) as err:  # extractor errors pass through unchanged
            pool.extract(b"", "vide.txt")
        assert err.value.reason == "empty"
        assert pool.worker_pid == pid


def test_pool_bad_target_is_a_crash_not_a_hang() -> None:
    with ExtractionPool(timeout_s=30, target="support.hostile:no_such_function") as pool:
        with pytest.raises(ExtractionError) as err:
            pool.extract(b"x", "a.txt")
        assert err.value.reason == "crashed"


def test_pool_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        ExtractionPool(timeout_s=0)
    with pytest.raises(ValueError):
        ExtractionPool(target="no_colon")


# ------------------------------------------------- Office packages, limits


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Expect]]:
    folder = tmp_path_factory.mktemp("office")
    return folder, make_office_files(folder)


def test_office_files_direct(office: tuple[Path, dict[str, Expect]]) -> None:
    folder, expect = office
    assert _mismatches(folder, expect, extract_bytes) == []


def test_office_files_through_pool_with_configured_limits(office: tuple[Path, dict[str, Expect]]) -> None:
    folder, expect = office
    limits = ExtractionLimits.from_config(load_settings().extraction)
    with ExtractionPool(timeout_s=30, limits=limits) as pool:
        assert _mismatches(folder, expect, pool.extract) == []


def test_office_set_covers_the_brief(office: tuple[Path, dict[str, Expect]]) -> None:
    _, expect = office
    suffixes = {Path(n).suffix for n in expect}
    assert {".docm", ".dotx", ".dotm", ".docx", ".xlsx", ".xlsm", ".pptx"} <= suffixes
    hostile = {n: (e.status, e.reason) for n, e in expect.items() if e.status != "indexed"}
    assert hostile == {
        "gonfle.docx": ("skipped", "too_large"),
        "feuille_enorme.xlsx": ("skipped", "too_large"),
        "formules.xlsx": ("skipped", "empty"),
        "chiffre.xlsx": ("skipped", "encrypted"),
        "images.pptx": ("skipped", "empty"),
    }


def test_expanding_docx_is_refused_from_the_zip_directory(office: tuple[Path, dict[str, Expect]]) -> None:
    folder, _ = office
    data = (folder / "gonfle.docx").read_bytes()
    assert len(data) < 5 * 1024 * 1024
    with pytest.raises(ExtractionError) as err:
        extract_bytes(data, "gonfle.docx")
    assert err.value.reason == "too_large"
    assert "word/document.xml" in err.value.detail and "extraction.max_part_mb (64)" in err.value.detail
    # with a higher part limit, the expansion ratio stops it; then the package total
    with pytest.raises(ExtractionError) as err:
        extract_bytes(data, "gonfle.docx", limits=ExtractionLimits(max_part_bytes=1 << 30, max_expansion_ratio=100))
    assert err.value.reason == "too_large" and "extraction.max_expansion_ratio (100)" in err.value.detail
    with pytest.raises(ExtractionError) as err:
        extract_bytes(data, "gonfle.docx", limits=ExtractionLimits(max_part_bytes=1 << 30, max_expansion_ratio=10_000))
    assert err.value.reason == "too_large" and "extraction.max_package_mb (256)" in err.value.detail


def test_strict_docx_needs_the_namespace_mapping(office: tuple[Path, dict[str, Expect]]) -> None:
    import docx

    folder, _ = office
    data = (folder / "strict.docx").read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert b"http://purl.oclc.org/ooxml/wordprocessingml/main" in zf.read("word/document.xml")
        assert b"schemas.openxmlformats.org/wordprocessingml" not in zf.read("word/document.xml")
    with pytest.raises(Exception):  # noqa: B017 - python-docx alone does not know Strict Open XML; its error type is its own
        docx.Document(io.BytesIO(data))
    blocks = extract_bytes(data, "strict.docx")
    assert blocks[0] == Block(BlockKind.HEADING, "Contrat Strict", level=1)
    assert Block(BlockKind.TABLE_ROW, "Forfait MARQUEURSTRICTTABLE | CHF 990") in blocks


def test_workbook_blocks_keep_rows_and_header(office: tuple[Path, dict[str, Expect]]) -> None:
    from ancre.ingest.chunking import chunk_blocks

    folder, _ = office
    blocks = extract_bytes((folder / "budget.xlsx").read_bytes(), "budget.xlsx")
    assert blocks[0] == Block(BlockKind.HEADING, "Budget 2026", level=1)
    assert blocks[1] == Block(BlockKind.TABLE_ROW, "Poste | Montant | Total")
    assert Block(BlockKind.HEADING, "Fournisseurs", level=1) in blocks
    assert not any(b.text == "Vide" for b in blocks)  # an empty sheet gives nothing
    chunks = chunk_blocks("d", blocks, target_chars=300)
    budget = [c for c in chunks if c.heading_path == ("Budget 2026",)]
    assert len(budget) > 3
    for c in budget[1:]:  # every chunk of the sheet repeats its name and header row
        assert c.text.startswith("Budget 2026\nPoste | Montant | Total\n")
    rows = [line for c in budget[1:] for line in c.text.split("\n")[2:]]
    assert all(re.fullmatch(r"Ligne \d+ \| \d+", r) for r in rows)  # whole rows, no formula text


def test_presentation_blocks_per_slide(office: tuple[Path, dict[str, Expect]]) -> None:
    folder, _ = office
    blocks = extract_bytes((folder / "presentation.pptx").read_bytes(), "presentation.pptx")
    assert blocks[0] == Block(BlockKind.HEADING, "Migration Azure MARQUEURTITRE", level=1, page=1)
    assert [b.page for b in blocks if b.kind is BlockKind.PAGE_BREAK] == [2]
    by_text = {b.text: b for b in blocks}
    assert by_text["Notes de l'orateur MARQUEURNOTES"].page == 1
    assert by_text["Pilote MARQUEURTABLEAU | CHF 12 000"].kind is BlockKind.TABLE_ROW
    assert by_text["Budget"] == Block(BlockKind.HEADING, "Budget", level=1, page=2)


def test_limits_on_pages_and_characters(hostile: tuple[Path, dict[str, Expect]]) -> None:
    folder, _ = hostile
    pdf = (folder / "sommaire.pdf").read_bytes()
    with pytest.raises(ExtractionError) as err:
        extract_bytes(pdf, "sommaire.pdf", limits=ExtractionLimits(max_pages=1))
    assert (err.value.reason, err.value.detail) == ("too_large", "2 pages > extraction.max_pages (1)")
    deck = pptx_bytes([{"title": f"Diapo {i}"} for i in range(3)])
    with pytest.raises(ExtractionError) as err:
        extract_bytes(deck, "d.pptx", limits=ExtractionLimits(max_pages=2))
    assert err.value.detail == "3 slides > extraction.max_pages (2)"
    word = simple_docx("Titre", ["x"])
    word = rezip(word, add={"docProps/app.xml": b"<Properties><Pages>301</Pages></Properties>"}) if b"docProps/app.xml" not in word else word
    with zipfile.ZipFile(io.BytesIO(word)) as zf:
        app = zf.read("docProps/app.xml")
    word = rezip(word, {"docProps/app.xml": re.sub(rb"<Pages>\d+</Pages>", b"<Pages>301</Pages>", app)})
    assert extract_bytes(word, "w.docx", limits=ExtractionLimits(max_pages=301))
    with pytest.raises(ExtractionError) as err:
        extract_bytes(word, "w.docx", limits=ExtractionLimits(max_pages=300))
    assert err.value.detail == "301 pages > extraction.max_pages (300)"
    big = xlsx_bytes({"S": [[f"cellule {i} " * 5] for i in range(2000)]})
    with pytest.raises(ExtractionError) as err:
        extract_bytes(big, "big.xlsx", limits=ExtractionLimits(max_chars=10_000))
    assert (err.value.reason, err.value.detail) == ("too_large", "text longer than extraction.max_chars (10000 characters)")
    with pytest.raises(ExtractionError) as err:
        extract_bytes(("mot " * 5000).encode(), "long.txt", limits=ExtractionLimits(max_chars=10_000))
    assert err.value.reason == "too_large"


def test_legacy_ole_file_is_corrupt_not_encrypted() -> None:
    import olefile  # noqa: F401  (the detection library)

    encrypted = encrypted_xlsx()
    assert encrypted.startswith(b"\xd0\xcf\x11\xe0")
    with pytest.raises(ExtractionError) as err:
        extract_bytes(encrypted, "x.docx")
    assert err.value.reason == "encrypted"
    fake_ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600
    with pytest.raises(ExtractionError) as err:
        extract_bytes(fake_ole, "ancien.xlsx")
    assert err.value.reason == "corrupt"
