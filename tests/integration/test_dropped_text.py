"""End to end: a share holding a footnote, an endnote, a filled-in form, a French scan,
an .odt, an .rtf and a Word 97 .doc — ``ancre sync`` indexes each, ``ancre search`` finds each
sentence in its document, the scan's chunks are marked OCR'd; with ``[extraction] ocr = false``
the scan is ``skipped: no_text_layer`` and ``ancre status`` counts it by reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.office_builders import (
    docx_with_notes,
    form_pdf,
    odt_document,
    rtf_document,
    scanned_pdf,
    word97_document,
)
from typer.testing import CliRunner

from ancre.app.cli import app
from ancre.app.runtime import Runtime
from ancre.config import load_settings

runner = CliRunner()

SCAN = "La franchise annuelle est fixée à 2500 francs par sinistre."


def _share(root: Path, *, with_doc: bool) -> None:
    folder = root / "share" / "Dossier"
    folder.mkdir(parents=True)
    (folder / "contrat.docx").write_bytes(docx_with_notes([
        ("La responsabilité du prestataire est limitée.", ["Plafond de responsabilité : CHF 250 000 par sinistre, GARANTIEPLAFOND."], []),
        ("Le contrat est conclu pour trois ans.", [], ["Renouvellement tacite sauf résiliation RESILIATIONTACITE."]),
    ]))
    (folder / "demande.pdf").write_bytes(form_pdf(
        ["Demande d'intervention", "Nom du demandeur :"], [("nom", "Jeanne DEMANDEURFORM", "Nom du demandeur")]
    ))
    (folder / "scan.pdf").write_bytes(scanned_pdf([["Conditions particulières", SCAN]], dpi=300))
    (folder / "procedure.odt").write_bytes(odt_document(
        "Procédure de sauvegarde", "Les sauvegardes sont chiffrées.", "Clé au coffre CLEODTCOFFRE.", [["a", "b"]]
    ))
    (folder / "memo.rtf").write_bytes(rtf_document(["Mémo", "Le délai de préavis MEMORTFPREAVIS est de trois mois."]))
    if with_doc:
        (folder / "ancien.doc").write_bytes(word97_document(["Forfait mensuel ANCIENDOCFORFAIT de CHF 3 840 HT."]))


def _config(root: Path, extra: str = "") -> Path:
    cfg = root / "ancre.toml"
    cfg.write_text(
        'data_dir = "data"\n[directory]\nkind = "file"\npath = "directory.json"\n' + extra +
        '[[sources]]\nid = "partage"\nroot = "share"\nprincipals = ["sid:S-1-1-0"]\n'
        "unc_root = '\\\\SRV\\Partage'\n",
        encoding="utf-8",
    )
    (root / "directory.json").write_text(
        '{"domain_sid": "S-1-5-21-9", "netbios": "H", "groups": {}, '
        '"users": {"zoe": {"sid": "S-1-5-21-9-1001", "groups": []}}}',
        encoding="utf-8",
    )
    return cfg


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def _found(cfg: Path, question: str) -> list[str]:
    res = _run("search", question, "--as", "zoe", "--json", "--limit", "3", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    return [r["filename"] for r in json.loads(res.stdout)["results"]]


@pytest.mark.skipif(
    shutil.which("tesseract") is None or shutil.which("antiword") is None,
    reason="tesseract / antiword not installed (make test installs them when root)",
)
def test_every_dropped_text_is_searchable(tmp_path: Path) -> None:
    _share(tmp_path, with_doc=True)
    cfg = _config(tmp_path)
    res = _run("sync", "--config", str(cfg), "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)[0]
    assert report["failed"] == 0 and report["skipped"] == 0, report["problems"]
    assert report["new"] == 6

    assert _found(cfg, "GARANTIEPLAFOND plafond de responsabilité")[0] == "contrat.docx"
    assert _found(cfg, "RESILIATIONTACITE renouvellement")[0] == "contrat.docx"
    assert _found(cfg, "DEMANDEURFORM demandeur")[0] == "demande.pdf"
    assert _found(cfg, "Quelle est la franchise annuelle par sinistre ?")[0] == "scan.pdf"
    assert _found(cfg, "CLEODTCOFFRE")[0] == "procedure.odt"
    assert _found(cfg, "MEMORTFPREAVIS préavis")[0] == "memo.rtf"
    assert _found(cfg, "ANCIENDOCFORFAIT forfait")[0] == "ancien.doc"

    with Runtime(load_settings(cfg)) as rt:
        points = list(rt.store.scroll("documents"))
    by_file: dict[str, list[bool]] = {}
    for p in points:
        by_file.setdefault(p.payload.filename, []).append(p.payload.ocr)
    assert by_file["scan.pdf"] and all(by_file["scan.pdf"])
    assert not any(flag for name, flags in by_file.items() if name != "scan.pdf" for flag in flags)
    # the note is cited with its document: the chunk holding the cap is contrat.docx's
    assert any("GARANTIEPLAFOND" in p.payload.text and "limitée" in p.payload.text for p in points)


def test_scan_without_ocr_is_skipped_no_text_layer_and_counted(tmp_path: Path) -> None:
    _share(tmp_path, with_doc=False)
    folder = tmp_path / "share" / "Dossier"
    (folder / "scan2.pdf").write_bytes(scanned_pdf([[SCAN], [SCAN]], dpi=100))
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    cfg = _config(tmp_path, "[extraction]\nocr = false\n")
    res = _run("sync", "--config", str(cfg), "--json")
    assert res.exit_code == 0, res.output

    res = _run("status", "--json", "--config", str(cfg))
    data = json.loads(res.stdout)
    problems = {p["path"].rsplit("/", 1)[-1]: (p["status"], p["reason"]) for p in data["problems"]}
    assert problems["scan.pdf"][0] == "skipped"
    assert problems["scan.pdf"][1].startswith("no_text_layer: 1 of 1 pages")
    assert problems["scan2.pdf"][1].startswith("no_text_layer: 2 of 2 pages")
    skipped = {(s["source"], s["reason"]): s["n"] for s in data["skipped"]}
    assert skipped == {("partage", "no_text_layer"): 2, ("partage", "unsupported: extension '.png'"): 1}

    text = _run("status", "--config", str(cfg)).output
    assert "skipped, by reason" in text and "no_text_layer" in text
    # the rest of the share is indexed all the same
    assert _found(cfg, "DEMANDEURFORM demandeur")[0] == "demande.pdf"
