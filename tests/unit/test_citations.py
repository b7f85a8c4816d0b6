"""Citation parsing (control 3), the deterministic controls 1–4, and citation enrichment."""

from __future__ import annotations

import unicodedata

import pytest

from ancre.query.citations import looks_like_file, scan_citations
from ancre.query.context import Context, Extract, Source
from ancre.query.enrich import enrich_citations
from ancre.query.grounding import (
    CONTROL_FACT,
    CONTROL_INVENTED,
    CONTROL_NO_CHUNK,
    CONTROL_REFUSAL,
    CONTROL_UNCITED,
    check_deterministic,
    ground,
    is_refusal,
)
from ancre.query.llm import EXTRACTIVE_HEADER, ExtractiveAnswerer
from ancre.query.prompt import REFUSAL

ROCHAT = "03_Contrat_Maintenance_Etude_Rochat.docx"
BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
DEVIS = "Devis (v2) [final].pdf"
PV = "Procès-verbal Comité.docx"  # NFC here


def _src(filename: str, doc_id: str | None = None, location: str = "\\\\SRV\\Partage\\DIRECTION\\") -> Source:
    return Source(
        filename=filename,
        doc_id=doc_id or f"partage:{filename}",
        path=f"DIRECTION/{filename}",
        location=location,
        collection="documents",
        acl_digest="0" * 64,
        score=0.03,
    )


SOURCES = (
    _src(ROCHAT),
    _src(BAUMONT, location="\\\\SRV\\Partage\\CLIENTS\\"),
    _src(DEVIS),
    _src(PV),
    _src("contrat_01.md", doc_id="contrat_01"),
    _src(
        "Offre.docx",
        doc_id="sp:offre",
        location="https://axonix.sharepoint.example/sites/Direction/Documents partages/Offres/",
    ),
)


TEXTS = {
    ROCHAT: (
        "Le contrat de maintenance de l'étude Rochat couvre 20 postes Windows 11 Pro et un serveur Windows "
        "Server 2025. Le pare-feu OPNsense est inclus. Le forfait mensuel s'élève à CHF 3 840 HT, facturé à "
        "terme échu, payable à 30 jours."
    ),
    BAUMONT: "La vitesse est limitée à 30 km/h sur le site. Voir le menu Menu puis Sous-menu.",
    "contrat_01.md": (
        "Le contrat prend effet le 1er janvier 2026 pour une durée de vingt-quatre mois. Il est reconductible "
        "tacitement par périodes de douze mois, sauf résiliation moyennant un préavis de trois mois."
    ),
}
"""What the shown extracts say (control 5 reads the facts of the answers in them)."""


def _context(sources: tuple[Source, ...] = SOURCES) -> Context:
    extracts = tuple(
        Extract(s.filename, s.doc_id, 0, TEXTS.get(s.filename, f"Texte de {s.filename}."), s.location, s.path,
                s.collection, 0.03)
        for s in sources
    )
    return Context(extracts, sources, True)


def _names(answer: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    scan = scan_citations(answer, SOURCES)
    return scan.cited, scan.invented


# ----------------------------------------------------------------------------- scanning


def test_exact_name_is_a_valid_citation_with_its_span() -> None:
    answer = f"Le forfait mensuel est de CHF 3 840 HT [{ROCHAT}]."
    scan = scan_citations(answer, SOURCES)
    assert scan.cited == (ROCHAT,) and scan.invented == ()
    (c,) = scan.citations
    assert scan.text[c.start : c.end] == ROCHAT and c.doc_id == f"partage:{ROCHAT}"


def test_lab_hallucination_22_prefix_is_invented() -> None:
    cited, invented = _names(
        "Le forfait mensuel de l'étude Rochat est de CHF 3 000 [22_Contrat_Maintenance_Étude_Rochat.docx]."
    )
    assert cited == ()
    assert invented == ("22_Contrat_Maintenance_Étude_Rochat.docx",)


def test_name_with_parentheses_and_brackets() -> None:
    cited, invented = _names(f"Montant total CHF 12 000 [{DEVIS}].")
    assert cited == (DEVIS,) and invented == ()


def test_unknown_name_with_brackets_is_one_invented_citation() -> None:
    cited, invented = _names("Voir [Devis (v3) [brouillon].pdf].")
    assert cited == () and invented == ("Devis (v3) [brouillon].pdf",)


@pytest.mark.parametrize(
    "text",
    [
        "La vitesse maximale est de 30 [km/h].",
        "Ouvrez [Menu]-[Sous-menu] puis validez.",
        "Voir la note [1] et l'annexe [A].",
        "Période [2024-2025], statut [OK], [voir ci-dessous].",
        "Un [lien](https://example.org/page) Markdown.",
        "Une case à cocher [ ] et [x].",
    ],
)
def test_ordinary_brackets_are_not_citations(text: str) -> None:
    assert scan_citations(text, SOURCES).citations == ()


def test_menu_brackets_next_to_a_real_citation() -> None:
    cited, invented = _names(f"Ouvrez [Menu]-[Sous-menu] comme indiqué [{BAUMONT}].")
    assert cited == (BAUMONT,) and invented == ()


def test_name_without_extension_is_valid() -> None:
    cited, invented = _names("Le forfait est de CHF 3 840 HT [03_Contrat_Maintenance_Etude_Rochat].")
    assert cited == (ROCHAT,) and invented == ()


def test_prefixed_name_without_extension_that_was_not_shown_is_invented() -> None:
    cited, invented = _names("Le forfait est de CHF 3 000 [22_Contrat_Maintenance_Etude_Rochat].")
    assert cited == () and invented == ("22_Contrat_Maintenance_Etude_Rochat",)


def test_yevi_doc_id_chunk_form() -> None:
    scan = scan_citations("Le préavis est de trois mois [contrat_01#0].", SOURCES)
    (c,) = scan.citations
    assert c.valid and c.filename == "contrat_01.md" and c.chunk_index == 0 and c.name == "contrat_01#0"


def test_yevi_form_of_unknown_document_is_invented() -> None:
    assert _names("Montant [contrat_99#3].") == ((), ("contrat_99#3",))


def test_full_doc_id_with_chunk_suffix() -> None:
    cited, invented = _names(f"Délai de 8 heures [partage:{ROCHAT}#2].")
    assert cited == (ROCHAT,) and invented == ()


def test_nfd_answer_matches_nfc_file_name() -> None:
    answer = unicodedata.normalize("NFD", f"Le comité a validé [{PV}].")
    assert answer != unicodedata.normalize("NFC", answer)
    cited, invented = _names(answer)
    assert cited == (PV,) and invented == ()


def test_nfc_answer_matches_nfd_file_name() -> None:
    nfd = unicodedata.normalize("NFD", PV)
    scan = scan_citations(f"Le comité a validé [{PV}].", (_src(nfd),))
    assert scan.cited == (PV,) and scan.invented == ()


def test_doubled_brackets() -> None:
    cited, invented = _names(f"Forfait CHF 3 840 HT [[{ROCHAT}]] ; fictif [[22_Autre_Contrat.docx]].")
    assert cited == (ROCHAT,) and invented == ("22_Autre_Contrat.docx",)


def test_case_insensitive_match() -> None:
    assert _names(f"Forfait [{ROCHAT.lower()}].") == ((ROCHAT,), ())


def test_several_names_in_one_bracket() -> None:
    cited, invented = _names(f"Les deux contrats incluent OPNsense [{ROCHAT}, {BAUMONT}].")
    assert cited == (ROCHAT, BAUMONT) and invented == ()
    cited, invented = _names(f"Mélange [{ROCHAT}; 22_Inconnu.docx].")
    assert cited == (ROCHAT,) and invented == ("22_Inconnu.docx",)


def test_page_reference_after_the_name() -> None:
    assert _names(f"Forfait [{ROCHAT}, p. 2].") == ((ROCHAT,), ())
    assert _names("Forfait [22_Inconnu.docx, p. 2].") == ((), ("22_Inconnu.docx",))


def test_folder_path_before_the_name() -> None:
    assert _names(f"Forfait [DIRECTION/{ROCHAT}].") == ((ROCHAT,), ())


def test_unknown_name_with_comma_is_reported_whole() -> None:
    assert _names("Voir [Rapport, version finale.docx].") == ((), ("Rapport, version finale.docx",))


def test_known_name_as_only_source_cannot_validate_another() -> None:
    # a shown "Rochat" contract does not validate the archived version that was not shown
    assert _names("Voir [03_Contrat_Maintenance_Etude_Rochat_v2024.docx].") == (
        (),
        ("03_Contrat_Maintenance_Etude_Rochat_v2024.docx",),
    )


def test_looks_like_file() -> None:
    assert looks_like_file("a b.PDF") and looks_like_file("x#12") and looks_like_file("22_Contrat_X")
    assert not looks_like_file("km/h") and not looks_like_file("Menu") and not looks_like_file("2024-2025")
    assert not looks_like_file("Étape #2") and not looks_like_file("v1.2")


# ----------------------------------------------------------------------------- controls 1-4

CASE1 = (
    "Le contrat de maintenance avec l'étude Rochat couvre 20 postes Windows 11 Pro et un serveur "
    f"Windows Server 2025 [{ROCHAT}]. Le pare-feu OPNsense est inclus [{ROCHAT}]. Le forfait mensuel "
    f"s'élève à CHF 3 840 HT [{ROCHAT}]."
)
CASE2 = (
    "Le contrat de maintenance avec l'étude Rochat couvre 20 postes et un pare-feu pfSense "
    "[22_Contrat_Maintenance_Étude_Rochat.docx]. Le forfait mensuel s'élève à CHF 3 000 HT "
    "[22_Contrat_Maintenance_Étude_Rochat.docx]. Le temps d'intervention est de 8 heures."
)


def test_control1_no_chunk() -> None:
    v = check_deterministic(REFUSAL, Context())
    assert v.controls == (CONTROL_NO_CHUNK,) and v.ancree is True and v.verification == "non_requise"
    v = check_deterministic(f"Le forfait est de CHF 3 840 HT [{ROCHAT}].", Context())
    assert v.ancree is False


def test_control2_exact_refusal_passes() -> None:
    assert is_refusal(REFUSAL)
    v = check_deterministic(REFUSAL, _context())
    assert v.ancree is True and v.controls == (CONTROL_REFUSAL,) and v.verification == "non_requise"


def test_control2_long_text_with_the_marker_is_not_a_refusal() -> None:
    long = "Cette information ne figure pas dans les documents disponibles. " + "Cependant, " * 30
    assert not is_refusal(long)
    v = check_deterministic(long, _context())
    assert CONTROL_UNCITED in v.controls and v.ancree is False


def test_short_partial_answer_with_the_marker_is_still_checked() -> None:
    answer = "Le forfait est de CHF 3 000 [22_X.docx]. La durée ne figure pas dans les documents disponibles."
    assert is_refusal(answer)  # by length and marker ...
    v = check_deterministic(answer, _context())  # ... but it cites, so it is an answer
    assert v.controls == (CONTROL_INVENTED, CONTROL_FACT) and v.ancree is False
    assert [f.text for f in v.facts] == ["CHF 3 000"]
    partial = f"Le forfait est de CHF 3 840 HT [{ROCHAT}]. La durée ne figure pas dans les documents disponibles."
    v = check_deterministic(partial, _context())
    assert v.controls == () and v.verification == "non_effectuee" and v.cited == (ROCHAT,)


def test_control3_invented_citation_fires() -> None:
    v = check_deterministic(CASE2, _context())
    assert v.ancree is False
    assert CONTROL_INVENTED in v.controls
    assert v.invented == ("22_Contrat_Maintenance_Étude_Rochat.docx",)
    assert v.verification == "non_requise"


def test_control3_invented_next_to_a_valid_one_still_fires() -> None:
    v = check_deterministic(f"Forfait CHF 3 840 HT [{ROCHAT}] et CHF 3 000 [22_Autre.docx].", _context())
    assert v.controls == (CONTROL_INVENTED, CONTROL_FACT) and v.cited == (ROCHAT,) and v.ancree is False


def test_control4_long_answer_without_citation() -> None:
    answer = (
        "Le contrat de maintenance couvre vingt postes de travail, un serveur et le pare-feu de "
        "l'étude. Le forfait mensuel s'élève à trois mille huit cent quarante francs hors taxes, "
        "facturé à terme échu et payable à trente jours."
    )
    assert len(answer) > 200
    v = check_deterministic(answer, _context())
    assert v.controls == (CONTROL_UNCITED,) and v.ancree is False


def test_short_uncited_answer_waits_for_the_judge_unless_it_states_a_fact() -> None:
    v = check_deterministic("Le contrat est reconductible tacitement.", _context())
    assert v.controls == () and v.ancree is None and v.verification == "non_effectuee"
    # issue 41: an uncited sentence with a figure is unsourced, short or not
    v = check_deterministic("Le forfait est de CHF 3 840 HT.", _context())
    assert v.controls == (CONTROL_FACT,) and v.ancree is False
    assert [(f.text, f.reason) for f in v.facts] == [("CHF 3 840 HT", "non_cite")]


def test_case1_passes_deterministic_controls_but_is_not_grounded_without_judge() -> None:
    v = ground("Forfait Rochat ?", CASE1, _context(), judge=None)
    assert v.controls == () and v.cited == (ROCHAT,)
    assert v.ancree is None and v.verification == "non_effectuee"  # never "grounded" by default


def test_km_h_answer_with_citation_is_not_invented() -> None:
    answer = f"La limite est de 30 [km/h] sur le site ; voir le menu [Menu]-[Sous-menu] [{BAUMONT}]."
    v = check_deterministic(answer, _context())
    assert v.controls == () and v.invented == () and v.cited == (BAUMONT,)


def test_yevi_answer_is_grounded_by_controls() -> None:
    answer = (
        "Le contrat prend effet le 1er janvier 2026 pour une durée de vingt-quatre mois et il est "
        "reconductible tacitement par périodes de douze mois, sauf résiliation moyennant un préavis "
        "de trois mois [contrat_01#0]."
    )
    assert len(answer) > 200
    v = check_deterministic(answer, _context())
    assert v.controls == () and v.cited == ("contrat_01.md",)


def test_extractive_answer_is_grounded_and_cited() -> None:
    ctx = _context()
    answer = ExtractiveAnswerer(max_quotes=2).answer(ctx)
    assert answer.startswith(EXTRACTIVE_HEADER)
    v = ground("?", answer, ctx, extractive=True)
    assert v.ancree is True and v.verification == "non_requise" and len(v.cited) == 2
    assert ExtractiveAnswerer().answer(Context()) == REFUSAL


# ----------------------------------------------------------------------------- enrichment


def test_enrichment_adds_the_unc_folder_in_a_code_span() -> None:
    out = enrich_citations(f"Forfait CHF 3 840 HT [{ROCHAT}] ; Baumont [{BAUMONT}].", SOURCES)
    assert f"[{ROCHAT} : `\\\\SRV\\Partage\\DIRECTION\\`]" in out
    assert f"[{BAUMONT} : `\\\\SRV\\Partage\\CLIENTS\\`]" in out


def test_enrichment_gives_sharepoint_sources_their_folder_url() -> None:
    out = enrich_citations("Offre [Offre.docx].", SOURCES)
    assert out == (
        "Offre [Offre.docx : <https://axonix.sharepoint.example/sites/Direction/"
        "Documents%20partages/Offres/>]."
    )


def test_enrichment_leaves_other_brackets_and_invented_citations() -> None:
    text = f"30 [km/h], [Menu]-[Sous-menu], fictif [22_X.docx], vrai [[{DEVIS}]] et [contrat_01#0]."
    out = enrich_citations(text, SOURCES)
    assert "30 [km/h], [Menu]-[Sous-menu], fictif [22_X.docx]" in out
    assert f"[[{DEVIS} : `\\\\SRV\\Partage\\DIRECTION\\`]]" in out
    assert "[contrat_01#0 : `\\\\SRV\\Partage\\DIRECTION\\`]" in out


def test_checks_see_raw_citations_not_enriched_ones() -> None:
    ctx = _context()
    raw = f"Le forfait mensuel est de CHF 3 840 HT [{ROCHAT}]."
    assert check_deterministic(raw, ctx).cited == (ROCHAT,)
    enriched = enrich_citations(raw, ctx.sources)
    assert enriched != raw and scan_citations(enriched, ctx.sources).invented == ()
