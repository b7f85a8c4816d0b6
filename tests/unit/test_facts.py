"""Control 5, the fact control, as a table test over the real Axonix documents (their chunks as the
product's extraction and chunking make them, :mod:`support.axonix_context`):

- the seed's invented-figure answers (§8.2: a real citation over an invented amount, version or
  product — « CHF 3 000 HT » for CHF 3 840 HT, Windows Server 2019 for 2025, pfSense for OPNsense —
  and their kin: dates, durations, codes, names lent from another client) are each caught, and the
  invented span is the one reported;
- faithful answers written as a model writes them (paraphrase, inflection, numbers in words, units
  and formats written differently, Markdown lists and tables, citations at the end of paragraphs)
  are never flagged.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.axonix_context import context

from ancre.query.facts import FactKind, number_values, scan_facts, unsupported_facts, words_value
from ancre.query.grounding import CONTROL_FACT, check_deterministic

R = "03_Contrat_Maintenance_Etude_Rochat.docx"
R24 = "03_Contrat_Maintenance_Etude_Rochat_v2024.docx"
B = "21_Contrat_Maintenance_Baumont_Industries.docx"
S = "04_Reponse_AO_Migration_Azure_Sarrasin.docx"
P = "Politique_Securite_SI.pdf"
G = "Grille_Salariale_2026.docx"
D = "test-deny-explicite.docx"
L = "09-pipeline-llm.md"
Y = "11-correlations-yaml.md"

ROCHAT_CTX = (R, R24, B)
"""What alice's Rochat questions show: the current contract, the archived one, Baumont's."""

# ----------------------------------------------------------------------------- invented (seed §8.2)

INVENTED: list[tuple[tuple[str, ...], str, str, set[str]]] = [
    # (documents shown, question, answer, the invented spans that must be reported)
    (ROCHAT_CTX, "Quel est le forfait mensuel de l'étude Rochat ?",
     f"Forfait mensuel : CHF 3 000 HT [{R}]", {"CHF 3 000 HT"}),
    (ROCHAT_CTX, "Quel serveur couvre le contrat Rochat ?",
     f"Le périmètre couvre l'infogérance d'un serveur Windows Server 2019 [{R}].", {"2019"}),
    (ROCHAT_CTX, "Quel pare-feu protège l'étude Rochat ?",
     f"Le pare-feu pfSense de l'étude est inclus dans le périmètre [{R}].", {"pfSense"}),
    (ROCHAT_CTX, "Quelles sont les conditions du contrat Rochat ?",
     f"Le contrat couvre 20 postes et un pare-feu pfSense [{R}]. Le forfait mensuel s'élève à CHF 3 000 HT [{R}].",
     {"pfSense", "CHF 3 000 HT"}),
    # Baumont's conditions with Rochat's name (the seed's follow-up failure): the name is in no cited
    # extract, and the figure is bound to Rochat, whose contract says CHF 3 840 HT (issue 41)
    (ROCHAT_CTX, "Quelles sont les conditions du contrat de maintenance d'Axonix SA avec l'étude Rochat ?",
     f"Pour l'étude Rochat, le forfait mensuel s'élève à CHF 4 200 HT [{B}].", {"Rochat", "CHF 4 200 HT"}),
    ((B,), "Fais pareil pour l'étude Rochat",
     f"**Étude Rochat** : 35 postes Windows 11 Pro, un NAS Synology, forfait de CHF 4 200 HT [{B}].", {"Rochat"}),
    # the archived version's values cited as the current contract's
    (ROCHAT_CTX, "Quelle est la durée du contrat Rochat ?",
     f"Le contrat dure trente-six mois [{R}].", {"trente-six mois"}),
    (ROCHAT_CTX, "Quand le contrat Rochat prend-il effet ?",
     f"Le contrat prend effet le 1er janvier 2024 [{R}].", {"1er janvier 2024"}),
    (ROCHAT_CTX, "Quel est le forfait de l'étude Rochat ?",
     f"Le forfait mensuel est de CHF 3'100.– HT [{R}].", {"CHF 3'100.– HT"}),
    (ROCHAT_CTX, "Combien de postes couvre le contrat Rochat ?",
     f"Le contrat couvre 18 postes Windows 10 Pro [{R}].", {"18", "10"}),
    # dates, durations, percentages, counts in other forms
    ((B,), "Quand le contrat Baumont prend-il effet ?",
     f"Le contrat Baumont Industries prend effet le 01.03.2026 [{B}].", {"01.03.2026"}),
    ((B,), "Quelle est la disponibilité cible ?",
     f"La disponibilité cible du serveur est de 99,9 % [{B}].", {"99,9 %"}),
    ((B,), "Quel est le temps d'intervention garanti ?",
     f"Le temps d'intervention garanti est de 6 heures ouvrées [{B}].", {"6 heures"}),
    ((B,), "Quel est le préavis ?",
     f"La résiliation demande un préavis de six mois [{B}].", {"six mois"}),
    ((P,), "Combien de caractères pour un mot de passe ?",
     f"Le mot de passe compte au moins douze caractères [{P}].", {"douze"}),
    ((P,), "Dans quel délai les correctifs sont-ils appliqués ?",
     f"Les postes sont mis à jour sous 30 jours [{P}].", {"30 jours"}),
    # codes, identifiers, versions, IPs
    ((D,), "Quel est le code d'accès de la salle serveur ?",
     f"Le code d'accès temporaire est 4417-ZETA [{D}].", {"4417-ZETA"}),
    ((Y,), "Quelle règle exclut C:\\Axonix\\Agent ?",
     f"La règle WD-EXCL-024 exclut le dossier C:\\Axonix\\Agent [{Y}].", {"WD-EXCL-024"}),
    ((L,), "Quel modèle génère les réponses ?",
     f"La génération utilise qwen2.5:7b avec une température de 0.2 [{L}].", {"qwen2.5:7b"}),
    ((L,), "Sur quel serveur ?",
     f"Le pipeline tourne sur le serveur LABO-G7 à l'adresse 192.168.1.10 [{L}].", {"LABO-G7", "192.168.1.10"}),
    ((L,), "Quelle température ?", f"La génération utilise une température de 0.7 [{L}].", {"0.7"}),
    # products and names
    ((P,), "Quel VPN en télétravail ?", f"Le télétravail passe par le VPN OpenVPN [{P}].", {"OpenVPN"}),
    ((P,), "Quel chiffrement ?", f"Le chiffrement VeraCrypt est obligatoire sur les portables [{P}].", {"VeraCrypt"}),
    ((S,), "Dans quelle région ?", f"La migration vise la région Switzerland West [{S}].", {"West"}),
    ((S,), "Quelle application ?", f"L'application de comptabilité Sage est migrée [{S}].", {"Sage"}),
    ((B,), "Où est Axonix ?", f"Axonix SA est une société sise à Genève [{B}].", {"Genève"}),
    ((S,), "Combien de machines ?", f"La migration porte sur 14 machines virtuelles [{S}].", {"14"}),
    ((S,), "Quel est le chiffrage ?", f"Le chiffrage total s'élève à CHF 48 400 HT pour 28 jours-homme [{S}].", {"CHF 48 400 HT"}),
    ((G,), "Salaire d'un technicien ?", f"Un technicien gagne CHF 87 000 brut par an [{G}].", {"CHF 87 000"}),
    # an invented citation's sentence has no evidence at all
    ((R,), "Forfait Rochat ?",
     "Le forfait mensuel s'élève à CHF 3 000 HT [22_Contrat_Maintenance_Étude_Rochat.docx].", {"CHF 3 000 HT"}),
    # a computed figure is no figure of the documents
    (ROCHAT_CTX, "Compare les forfaits",
     f"Baumont paie CHF 4 200 HT [{B}] et l'étude Rochat CHF 3 840 HT [{R}], soit CHF 360 de plus pour Baumont.",
     {"CHF 360"}),
]


@pytest.mark.parametrize(("shown", "question", "answer", "invented"), INVENTED, ids=[a[:50] for _, _, a, _ in INVENTED])
def test_every_invented_value_is_caught(shown: tuple[str, ...], question: str, answer: str, invented: set[str]) -> None:
    ctx = context(*shown)
    found = unsupported_facts(answer, ctx, question)
    assert {f.text for f in found} == invented, found
    verdict = check_deterministic(answer, ctx, question)
    assert verdict.ancree is False and CONTROL_FACT in verdict.controls
    assert {f.text for f in verdict.facts} == invented


def test_the_seed_table_is_complete() -> None:
    assert len(INVENTED) >= 25
    kinds = {f.kind for shown, q, a, _ in INVENTED for f in unsupported_facts(a, context(*shown), q)}
    assert kinds >= {FactKind.AMOUNT, FactKind.NUMBER, FactKind.DURATION, FactKind.DATE, FactKind.CODE, FactKind.NAME}


# ----------------------------------------------------------------------------- faithful answers

FAITHFUL: list[tuple[tuple[str, ...], str, str]] = [
    # Rochat (current contract), as alice sees it
    (ROCHAT_CTX, "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?",
     f"Le forfait mensuel du contrat de maintenance de l'étude Rochat s'élève à CHF 3 840 HT [{R}]."),
    (ROCHAT_CTX, "Forfait Rochat ?", f"Forfait mensuel : CHF 3'840.– HT, facturé mensuellement à terme échu [{R}]."),
    (ROCHAT_CTX, "Forfait Rochat ?", f"L'étude Rochat paie 3840 francs hors taxes par mois, payables à 30 jours [{R}]."),
    (ROCHAT_CTX, "Quelle est la durée du contrat Rochat ?",
     f"Le contrat prend effet le 1er janvier 2026 pour une durée de 24 mois, soit deux ans [{R}]."),
    (ROCHAT_CTX, "Durée ?", f"Il court du 01.01.2026 pendant vingt-quatre mois [{R}]. Il se renouvelle tacitement par périodes de 12 mois [{R}]."),
    (ROCHAT_CTX, "Préavis ?", f"La résiliation est possible moyennant un préavis de 3 mois [{R}]."),
    (ROCHAT_CTX, "Périmètre Rochat ?",
     (f"Le périmètre comprend l'infogérance de vingt postes Windows 11 Pro et d'un serveur Windows Server 2025 ; "
      f"le pare-feu OPNsense de l'étude est inclus [{R}].")),
    (ROCHAT_CTX, "Délais Rochat ?",
     (f"Le temps d'intervention garanti est de huit heures ouvrées pour un incident bloquant et de trois jours ouvrés "
      f"pour une demande standard [{R}].")),
    (ROCHAT_CTX, "Horaires ?",
     (f"Les demandes sont ouvertes par courriel ou par téléphone du lundi au vendredi, de 8 h à 18 h [{R}]. "
      f"En dehors de ces heures, une astreinte facturée CHF 220 HT de l'heure est disponible [{R}].")),
    (ROCHAT_CTX, "Heure hors forfait ?", f"Chaque heure hors forfait est facturée CHF 160 HT [{R}]."),
    (ROCHAT_CTX, "Parties ?",
     f"Le contrat lie Axonix SA, société de services informatiques sise à Lausanne, et l'Étude Rochat & Associés [{R}]."),
    (ROCHAT_CTX, "Où est l'original ?", f"L'original signé est archivé sur le site SharePoint Direction d'Axonix SA [{R}]."),
    (ROCHAT_CTX, "Durée du contrat Rochat ?",
     (f"La version en vigueur prévoit 24 mois à partir du 1er janvier 2026 [{R}] ; l'ancienne version, remplacée, "
      f"prévoyait trente-six mois à partir du 1er janvier 2024 [{R24}].")),
    (ROCHAT_CTX, "Forfait Rochat ?",
     f"- Version en vigueur : CHF 3 840 HT par mois [{R}]\n- Version 2024 (remplacée) : CHF 3 100 HT par mois [{R24}]"),
    (ROCHAT_CTX, "Compare les deux contrats",
     (f"| Critère | Baumont Industries | Étude Rochat |\n| --- | --- | --- |\n"
      f"| Postes | 35 | 20 |\n| Forfait mensuel | CHF 4 200 HT | CHF 3 840 HT |\n| Durée | 36 mois | 24 mois |\n\n"
      f"Sources : [{B}], [{R}]")),
    (ROCHAT_CTX, "Compare les deux contrats",
     (f"**Baumont Industries** : 35 postes, forfait de CHF 4 200 HT, durée de trente-six mois dès le 1er mars 2025 [{B}].\n\n"
      f"**Étude Rochat** : 20 postes, forfait de CHF 3 840 HT, durée de vingt-quatre mois dès le 1er janvier 2026 [{R}].")),
    (ROCHAT_CTX, "Protection des données ?",
     f"Les parties s'engagent à respecter la nLPD ; le Prestataire tient un registre des accès [{R}]."),
    # Baumont
    ((B,), "Conditions Baumont ?",
     (f"Le contrat de maintenance avec Baumont Industries couvre l'infogérance de 35 postes Windows 11 Pro, d'un "
      f"serveur Windows Server 2022 et d'un NAS Synology [{B}]. Le forfait mensuel s'élève à CHF 4 200 HT [{B}].")),
    ((B,), "Réseau ?", f"Le réseau est couvert : firewall OPNsense, trois switches et Wi-Fi industriel [{B}]."),
    ((B,), "Disponibilité ?", f"La disponibilité cible du serveur est de 99.5 % [{B}]."),
    ((B,), "Délais Baumont ?",
     f"Incident bloquant : 4 h ouvrées ; demande standard : deux jours ouvrés [{B}]."),
    ((B,), "Durée Baumont ?",
     (f"Le contrat a pris effet en mars 2025 pour trois ans [{B}]. Il est reconductible tacitement par périodes d'un an, "
      f"sauf résiliation avec un préavis de trois mois [{B}].")),
    ((B,), "Résumé Baumont",
     (f"Voici les principales conditions :\n\n1. Forfait : CHF 4 200 HT par mois, payable à 30 jours.\n"
      f"2. Durée : 36 mois dès le 1er mars 2025.\n3. Préavis : trois mois.\n\n[{B}]")),
    ((B,), "Le contrat Baumont prévoit-il des pénalités ?",
     (f"Les extraits ne mentionnent aucune pénalité pour le contrat Baumont Industries [{B}]. Ils indiquent seulement un "
      f"temps d'intervention garanti de 4 heures ouvrées [{B}].")),
    ((B, P), "Quel est le montant mensuel du contrat de Dupont Logistique SA ?",
     (f"Aucun contrat de Dupont Logistique SA ne figure dans les extraits ; seul le contrat de Baumont Industries "
      f"indique un forfait de CHF 4 200 HT [{B}].")),
    # Sarrasin
    ((S,), "Chiffrage Sarrasin ?",
     f"Le chiffrage total de la migration s'élève à CHF 44 800 HT pour 28 jours-homme [{S}]."),
    ((S,), "Détail du chiffrage ?",
     (f"Audit et conception : 6 jours, CHF 9 600 HT ; migration des machines virtuelles : 18 jours, CHF 28 800 HT ; "
      f"tests et bascule : 4 jours, CHF 6 400 HT [{S}].")),
    ((S,), "Consommation Azure ?", f"La consommation Azure est estimée à CHF 2'350 HT par mois, en sus du chiffrage [{S}]."),
    ((S,), "Périmètre ?",
     (f"La migration porte sur douze machines virtuelles, dont deux contrôleurs de domaine, un serveur de fichiers de "
      f"3 To et l'application de comptabilité Abacus [{S}].")),
    ((S,), "Région ?",
     f"Sarrasin Fiduciaire SA migre vers Microsoft Azure, région Switzerland North, pour garder ses données en Suisse [{S}]."),
    ((S,), "Planning ?",
     f"La bascule est prévue sur un week-end, avec retour arrière possible jusqu'au lundi à 7h00 [{S}]."),
    # policy
    ((P,), "Mot de passe ?",
     (f"Le mot de passe doit compter au moins quatorze caractères et l'authentification multifacteur est exigée pour "
      f"tout accès distant [{P}].")),
    ((P,), "Correctifs ?", f"Les postes des clients sont mis à jour dans les 14 jours suivant la publication des correctifs [{P}]."),
    ((P,), "Sauvegardes ?",
     (f"Les sauvegardes suivent la règle 3-2-1 : 3 copies, 2 supports et une copie hors site [{P}]. La restauration est "
      f"testée chaque mois [{P}].")),
    ((P,), "Télétravail ?",
     (f"Le télétravail est autorisé depuis un poste géré par Axonix SA, au travers du VPN WireGuard ; un poste personnel "
      f"est interdit pour accéder aux données des clients [{P}].")),
    ((P,), "Incidents ?",
     (f"Un incident de sécurité est signalé au responsable sécurité dans l'heure, et une violation de données est "
      f"annoncée au PFPDT lorsque la nLPD l'exige [{P}].")),
    ((P,), "BitLocker ?", f"Oui : le chiffrement BitLocker est obligatoire sur tous les portables [{P}]."),
    ((P,), "Revue des accès ?", f"Les accès aux systèmes des clients sont nominatifs et revus chaque trimestre [{P}]."),
    # salaries, code, pipeline, rules
    ((G,), "Salaires ?",
     (f"Selon la grille salariale 2026, un technicien gagne CHF 78 000, un ingénieur système CHF 104 000 et un "
      f"directeur technique CHF 165 000 bruts par an [{G}].")),
    ((D,), "Code salle serveur ?", f"Le code d'accès temporaire de la salle serveur de Baumont Industries est 4471-ZETA [{D}]."),
    ((L,), "Modèles ?",
     f"La génération utilise qwen2.5:14b à une température de 0,2 ; le juge d'ancrage utilise qwen3:4b [{L}]."),
    ((L,), "Délais LABO-G9 ?",
     (f"Sur le serveur LABO-G9 sans GPU, une question prend de 3 à 5 minutes et le contrôle d'ancrage entre 2,4 et "
      f"huit secondes [{L}].")),
    ((L,), "Embeddings ?", f"Les embeddings sont calculés par nomic-embed-text au travers d'Ollama [{L}]."),
    ((Y,), "WD-EXCL-042 ?",
     (f"La règle WD-EXCL-042 exclut le dossier C:\\Axonix\\Agent des analyses de Windows Defender, car l'agent de "
      f"sauvegarde y écrit des fichiers temporaires chiffrés [{Y}].")),
    ((Y,), "Seuil de W-001 ?",
     f"La règle W-001 se déclenche au-delà de 3 événements en 2 minutes sur un même hôte (sévérité medium) [{Y}]."),
    # partial answers and stated absences
    (ROCHAT_CTX, "Quel est le forfait et la date de signature du contrat Rochat ?",
     f"Le forfait mensuel est de CHF 3 840 HT [{R}]. La date de signature ne figure pas dans les documents disponibles."),
    ((G, P), "Quel est le chiffre d'affaires 2025 d'Axonix ?",
     (f"Le chiffre d'affaires 2025 d'Axonix n'apparaît dans aucun des extraits ; la grille salariale 2026 ne donne que "
      f"des salaires, par exemple CHF 78 000 pour un technicien [{G}].")),
]


@pytest.mark.parametrize(("shown", "question", "answer"), FAITHFUL, ids=[a[:50] for _, _, a in FAITHFUL])
def test_faithful_answers_are_never_flagged(shown: tuple[str, ...], question: str, answer: str) -> None:
    ctx = context(*shown)
    assert unsupported_facts(answer, ctx, question) == ()
    assert CONTROL_FACT not in check_deterministic(answer, ctx, question).controls


def test_there_are_at_least_40_faithful_answers_over_every_document() -> None:
    assert len(FAITHFUL) >= 40
    assert {d for shown, _, _ in FAITHFUL for d in shown} >= {R, R24, B, S, P, G, D, L, Y}


def test_the_extracts_themselves_are_never_flagged() -> None:
    """Every chunk of every document, quoted with its citation, passes (verbatim is faithful)."""
    for name in (R, R24, B, S, P, G, D, L):
        ctx = context(name)
        for e in ctx.extracts:
            assert unsupported_facts(f"{e.text} [{name}]", ctx) == (), (name, e.chunk_index)


# ----------------------------------------------------------------------------- where facts must be found


def test_a_sentence_must_find_its_facts_in_the_document_it_cites() -> None:
    ctx = context(*ROCHAT_CTX)
    # 2019 is in the archived contract, shown, but the sentence cites the current one
    (f,) = unsupported_facts(f"Le serveur est un Windows Server 2019 [{R}].", ctx)
    assert f.text == "2019" and f.cited == (R,)
    assert unsupported_facts(f"Le serveur était un Windows Server 2019 [{R24}].", ctx) == ()
    # a citation opening the next sentence still belongs to the previous one
    assert unsupported_facts(f"Le forfait est de CHF 3 100 HT. [{R24}] Il est payable à 30 jours.", ctx) == ()


def test_uncited_sentence_is_read_against_the_citation_closing_its_paragraph_only() -> None:
    """Issue 41: an uncited sentence is no longer read against every extract shown. Its paragraph's
    closing citation sources it (a quoted passage cited once at its end), and nothing else: 18 is
    the archived contract's figure, shown but not cited."""
    ctx = context(*ROCHAT_CTX)
    answer = f"L'ancien contrat couvrait 18 postes. Le contrat actuel couvre 20 postes [{R}]."
    assert [f.text for f in unsupported_facts(answer, ctx)] == ["18"]
    answer = f"L'ancien contrat couvrait 18 postes [{R24}]. Le contrat actuel couvre 20 postes [{R}]."
    assert unsupported_facts(answer, ctx) == ()
    assert [f.text for f in unsupported_facts("Le contrat couvre 19 postes. Il coûte CHF 3 840 HT [" + R + "].", ctx)] == ["19"]


def test_uncited_paragraph_is_unsourced() -> None:
    ctx = context(*ROCHAT_CTX)
    answer = f"Le forfait est de CHF 3 840 HT [{R}].\n\nLe réseau comprend un NAS Synology."
    (f,) = unsupported_facts(answer, ctx)
    assert f.text == "NAS Synology" and f.reason == "non_cite"  # Baumont's, shown, not cited
    answer = f"Le forfait est de CHF 3 840 HT [{R}].\n\nIl couvre 20 postes."
    (f,) = unsupported_facts(answer, ctx)  # in the cited contract, but its own paragraph cites nothing
    assert f.text == "20" and f.reason == "non_cite"


def test_question_names_only_excused_in_a_negative_sentence() -> None:
    ctx = context(B)
    q = "Quel est le montant du contrat de Dupont Logistique SA ?"
    assert unsupported_facts(f"Le contrat de Dupont Logistique SA ne figure pas dans les extraits [{B}].", ctx, q) == ()
    found = unsupported_facts(f"Le contrat de Dupont Logistique SA coûte CHF 4 200 HT [{B}].", ctx, q)
    assert {f.text for f in found} == {"Dupont Logistique"}  # « SA » is in the extract


def test_empty_context_and_empty_answer() -> None:
    from ancre.query.context import Context

    assert unsupported_facts("CHF 3 000 HT", Context()) == ()
    assert unsupported_facts("   ", context(R)) == ()


# ----------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(("written", "values"), [
    ("3 840", {3840}), ("3'840", {3840}), ("3’840", {3840}), ("3840", {3840}), ("3\u202f840", {3840}),
    ("99,5", {99.5}), ("99.5", {99.5}), ("0.2", {0.2}), ("3.840", {3.84, 3840}), ("2,350", {2.35, 2350}),
])
def test_number_values(written: str, values: set[float]) -> None:
    from decimal import Decimal

    assert number_values(written) == frozenset(Decimal(str(v)).normalize() for v in values)


@pytest.mark.parametrize(("words", "value"), [
    ("vingt-quatre", 24), ("trente-six", 36), ("douze", 12), ("quatorze", 14), ("soixante-dix", 70),
    ("quatre-vingt-dix", 90), ("quatre-vingts", 80), ("vingt et un", 21), ("trois cents", 300),
    ("deux mille", 2000), ("trois mille huit cent quarante", 3840), ("cent", 100), ("Trente-Six", 36),
])
def test_words_value(words: str, value: int) -> None:
    assert words_value(words) == value


_UNITS = ["", "un", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf", "dix", "onze", "douze", "treize",
          "quatorze", "quinze", "seize"]
_TENS = {2: "vingt", 3: "trente", 4: "quarante", 5: "cinquante", 6: "soixante"}


def _french(n: int) -> str:
    """A small reference spelling of 1–99 (without the 70–99 forms' irregularities beyond 69)."""
    if n <= 16:
        return _UNITS[n]
    if n < 20:
        return "dix-" + _UNITS[n - 10]
    tens, unit = divmod(n, 10)
    if unit == 0:
        return _TENS[tens]
    if unit == 1:
        return f"{_TENS[tens]} et un"
    return f"{_TENS[tens]}-{_UNITS[unit]}"


@given(st.integers(min_value=1, max_value=69))
def test_numbers_in_words_match_their_digits(n: int) -> None:
    """A number written in words is the same fact as in digits, both ways."""
    from ancre.query.context import Context, Extract, Source

    def ctx(text: str) -> Context:
        return Context((Extract("a.docx", "a", 0, text, "", "a.docx", "documents"),),
                       (Source("a.docx", "a", "a.docx", "", "documents", "", 0.0),), True)

    assert unsupported_facts(f"Il y a {_french(n)} machines [a.docx].", ctx(f"Il y a {n} machines.")) == ()
    assert unsupported_facts(f"Il y a {n} machines [a.docx].", ctx(f"Il y a {_french(n)} machines.")) == ()
    other = n + 1 if n < 69 else n - 1
    assert unsupported_facts(f"Il y a {other} machines [a.docx].", ctx(f"Il y a {_french(n)} machines.")) != ()


@pytest.mark.parametrize("form", ["1er janvier 2026", "01.01.2026", "1.1.2026", "01/01/2026", "2026-01-01", "1.1.26"])
def test_french_date_forms_are_one_date(form: str) -> None:
    ctx = context(R)
    assert unsupported_facts(f"Le contrat prend effet le {form} [{R}].", ctx) == ()
    wrong = form.replace("2026", "2025").replace(".26", ".25")
    assert [f.kind for f in unsupported_facts(f"Le contrat prend effet le {wrong} [{R}].", ctx)] == [FactKind.DATE]


def test_durations_in_other_units() -> None:
    ctx = context(R)
    for ok in ("deux ans", "2 ans", "24 mois", "vingt-quatre mois"):
        assert unsupported_facts(f"Le contrat dure {ok} [{R}].", ctx) == (), ok
    assert unsupported_facts(f"Le contrat dure trois ans [{R}].", ctx) != ()  # 36 months: the archived version


def test_scan_finds_each_kind() -> None:
    kinds = {f.text: f.kind for f in scan_facts(
        "Le forfait de CHF 3 840 HT court dès le 1er janvier 2026, de 8h00 à 18h00, pour 24 mois ; "
        "règle WD-EXCL-042, modèle qwen2.5:14b, pare-feu OPNsense chez l'Étude Rochat, 99,5 %.")}
    assert kinds == {
        "CHF 3 840 HT": FactKind.AMOUNT, "1er janvier 2026": FactKind.DATE, "8h00": FactKind.TIME,
        "18h00": FactKind.TIME, "24 mois": FactKind.DURATION, "WD-EXCL-042": FactKind.CODE,
        "qwen2.5:14b": FactKind.CODE, "OPNsense": FactKind.NAME, "Étude Rochat": FactKind.NAME,
        "99,5 %": FactKind.NUMBER,
    }


def test_a_number_longer_than_the_decimal_context_is_a_fact_not_a_crash() -> None:
    """schemathesis sent a 40-digit number in a question: control 5 raised decimal's
    InvalidOperation (quantize beyond the context's 28 digits) and the API answered 500."""
    huge = "1" + "0" * 40
    ctx = context("03_Contrat_Maintenance_Etude_Rochat.docx")
    found = unsupported_facts(f"Le forfait est de CHF {huge} HT [03_Contrat_Maintenance_Etude_Rochat.docx].", ctx,
                              f"Le forfait vaut-il {huge} ?")
    assert any(huge in f.text.replace(" ", "").replace("'", "") for f in found), found
