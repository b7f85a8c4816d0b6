"""The exposure report's detectors: identifiers with valid and invalid check digits (never a false
positive on a wrong one), checked against published examples and against reference models of the
check-digit rules written here from their standards (EAN-13, ISO 7064 MOD 97-10, Luhn); the
vocabulary detectors; and "can't decide" said rather than guessed."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ancre.reports.detectors import Kind, scan


def kinds(text: str, *, ocr: bool = False) -> list[tuple[str, bool]]:
    return sorted((h.kind.value, h.decided) for h in scan(text, ocr=ocr))


# ---------------------------------------------------------------------- reference models


def ean13_check(first12: str) -> int:
    """GS1 General Specifications 7.9.1: weights 1, 3 from the left over 12 digits."""
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(first12))
    return (10 - total % 10) % 10


def iban_ok(iban: str) -> bool:
    """ISO 13616 / ISO 7064 MOD 97-10: the first four characters moved to the end, letters as
    10..35, the number mod 97 is 1."""
    s = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in s)) % 97 == 1


def luhn_ok(digits: str) -> bool:
    """ISO/IEC 7812-1 annex B: double every second digit from the right."""
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def avs_text(digits13: str, sep: str = ".") -> str:
    d = digits13
    return f"N° AVS {d[:3]}{sep}{d[3:7]}{sep}{d[7:11]}{sep}{d[11:]} du collaborateur"


# ---------------------------------------------------------------------- AVS


@pytest.mark.parametrize("number", ["756.9217.0769.85", "756.1234.5678.97", "7569217076985", "756 9217 0769 85"])
def test_published_avs_numbers_are_found(number: str) -> None:
    # 756.9217.0769.85: python-stdnum's documented example; 756.1234.5678.97: the AVS/AI
    # information centre's sample card
    assert kinds(f"Numéro AVS : {number}.") == [("avs", True)]


@pytest.mark.parametrize("number", ["756.9217.0769.84", "756.1234.5678.90", "757.1234.5678.97", "756.1234.5678.9"])
def test_wrong_avs_numbers_are_not_reported(number: str) -> None:
    assert kinds(f"Numéro AVS : {number}") == []


@given(st.text(string.digits, min_size=9, max_size=9), st.sampled_from([".", " ", ""]))
def test_avs_found_iff_its_ean13_check_digit_is_right(body: str, sep: str) -> None:
    first12 = "756" + body
    right = ean13_check(first12)
    assert kinds(avs_text(first12 + str(right), sep)) == [("avs", True)]
    for wrong in set(range(10)) - {right}:
        assert scan(avs_text(first12 + str(wrong), sep)) == []  # no false positive, ever


def test_an_avs_number_read_by_ocr_with_a_wrong_check_digit_is_undecided() -> None:
    (hit,) = scan("AVS 756.9217.0769.84", ocr=True)
    assert hit.kind is Kind.AVS and not hit.decided and "OCR" in (hit.reason or "")
    assert kinds("AVS 756.9217.0769.85", ocr=True) == [("avs", True)]


# ---------------------------------------------------------------------- IBAN


@pytest.mark.parametrize("iban", [
    # examples of the SWIFT IBAN registry
    "CH93 0076 2011 6238 5295 7", "DE89 3704 0044 0532 0130 00", "GB29 NWBK 6016 1331 9268 19",
    "FR14 2004 1010 0505 0001 3M02 606", "LI21 0881 0000 2324 013A A", "CH9300762011623852957",
])
def test_published_ibans_are_found(iban: str) -> None:
    assert kinds(f"Versement sur l'IBAN {iban} (BIC UBSWCHZH80A), merci.") == [("iban", True)]


@pytest.mark.parametrize("iban", [
    "CH94 0076 2011 6238 5295 7",  # check digits off by one
    "CH93 0076 2011 6238 5295 8",  # last digit changed
    "CH93 0076 2011 6238 5295",  # too short for CH
    "XX93 0076 2011 6238 5295 7",  # no such country
])
def test_wrong_ibans_are_not_reported(iban: str) -> None:
    assert kinds(f"IBAN : {iban}") == []


@given(st.text(string.digits, min_size=17, max_size=17), st.integers(0, 16), st.integers(1, 9))
def test_swiss_iban_found_iff_mod97_holds(bban: str, pos: int, delta: int) -> None:
    check = 98 - int("".join(str(int(c, 36)) for c in bban + "CH00")) % 97
    iban = f"CH{check:02d}{bban}"
    assert iban_ok(iban)
    grouped = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    assert kinds(f"IBAN {grouped}") == [("iban", True)]
    changed = bban[:pos] + str((int(bban[pos]) + delta) % 10) + bban[pos + 1 :]
    wrong = f"CH{check:02d}{changed}"
    assert not iban_ok(wrong)  # MOD 97-10 catches every single-digit error
    assert scan(f"IBAN {wrong}") == []


# ---------------------------------------------------------------------- cards


@pytest.mark.parametrize("card", ["4111 1111 1111 1111", "5555 5555 5555 4444", "3782 822463 10005", "6011111111111117"])
def test_network_test_card_numbers_are_found(card: str) -> None:
    assert kinds(f"Carte : {card}") == [("card", True)]


@given(st.sampled_from(["4", "51", "55", "2221", "37"]), st.data())
def test_card_found_iff_luhn_holds(prefix: str, data) -> None:
    length = 15 if prefix == "37" else 16
    body = prefix + data.draw(st.text(string.digits, min_size=length - len(prefix) - 1, max_size=length - len(prefix) - 1))
    for d in string.digits:
        number = body + d
        found = kinds(f"paiement {number} reçu")
        assert found == ([("card", True)] if luhn_ok(number) and len(set(number)) > 1 else []), number


def test_numbers_that_are_not_cards() -> None:
    # Luhn-valid but no issuer range, a phone number, dates and amounts
    assert kinds("réf. 1234567812345670, tél. +41 21 555 12 34, le 03.02.2026, CHF 4 200 HT") == []


# ---------------------------------------------------------------------- vocabulary and markings


def test_salary_and_health_vocabulary() -> None:
    assert kinds("Grille salariale 2026\nFonction | Salaire annuel brut") == [("salary", True), ("salary", True)]
    assert kinds("Rémunération mensuelle brute, 13e mois, Lohnabrechnung") == [("salary", True)] * 3
    assert kinds("Arrêt maladie du 3 au 5 mars ; certificat médical reçu") == [("health", True)] * 2
    assert kinds("Le contrat prend effet le 1er mars pour trente-six mois.") == []


def test_a_password_policy_is_not_a_password() -> None:
    policy = ("Le mot de passe compte au moins 14 caractères et l'authentification multifacteur est exigée pour "
              "tout accès distant aux clients.")
    assert kinds(policy) == []
    assert kinds("Le code d'accès temporaire de la salle serveur de Baumont Industries est 4471-ZETA.") == [("credential", True)]
    assert kinds("Wi-Fi invités — mot de passe : Axonix2026!") == [("credential", True)]
    assert kinds("password = hunter2") == [("credential", True)]


def test_a_label_followed_by_a_plain_word_is_undecided() -> None:
    (hit,) = scan("Mot de passe : soleil")
    assert hit.kind is Kind.CREDENTIAL and not hit.decided and hit.reason


def test_markings_and_sensitivity_labels() -> None:
    assert kinds("Axonix SA — Confidentiel") == [("marking", True)]
    assert kinds("Classification : Strictement confidentiel") == [("label", True), ("marking", True)]
    assert kinds("Sensitivity: Highly Confidential") == [("label", True), ("marking", True)]
    assert kinds("Classification : Interne") == []  # internal: not above what all staff may read
    assert kinds("MSIP_Label_3f9a1c2e-5b7d-4e8f-9a0b-1c2d3e4f5a6b_Name=Confidential") == [("label", True), ("marking", True)]


def test_a_repeated_header_line_counts_once_and_values_never_leave() -> None:
    header = "Collaborateur | Fonction | Salaire mensuel"
    a, b = scan(header + "\nA | x | 1"), scan(header + "\nB | y | 2")
    assert {h.key for h in a} == {h.key for h in b}
    hits = scan("IBAN CH93 0076 2011 6238 5295 7")
    assert all("0076" not in h.key and "CH93" not in h.key for h in hits)
