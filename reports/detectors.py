"""Sensitive-data detectors for the exposure report (docs/REPORTS.md).

:func:`scan` reads one chunk of indexed text and returns :class:`Hit` s: what kind of sensitive
data it holds and a digest of each value (never the value: a report carries kinds and counts
only). Identifiers are checked the way their issuers define them, with python-stdnum:

- **AVS/AHV** (Swiss social insurance number, ``756.xxxx.xxxx.xx``): 13 digits starting with the
  country code 756, the last an EAN-13 check digit (``stdnum.ch.ssn``; Centrale de compensation,
  "Numéro AVS");
- **IBAN**: ISO 13616 — the country's length and structure from the IBAN registry and the ISO
  7064 MOD 97-10 checksum (``stdnum.iban``);
- **payment card**: 13–19 digits of a known issuer range (ISO/IEC 7812 IINs: Visa, Mastercard,
  American Express, Discover, Diners, JCB, UnionPay, Maestro) with the Luhn check digit
  (``stdnum.luhn``).

A number whose check digit fails is not reported: it is not one. Text read by OCR is the one
exception: a misread digit can break a real number's check, so a number of the right shape there
is a hit that is **undecided** (``decided=False``, with the reason), never a silent "nothing".

Vocabulary detectors (French first, with the German and English words Swiss firms use) count
mentions: **salary** (salaire, rémunération, fiche de paie, 13e salaire, Lohn, payroll…),
**health** (maladie, certificat médical, arrêt de travail, diagnostic, invalidité…),
**credential** (« mot de passe », « code d'accès », PIN, password… *followed by a value*: a
policy that says "the password has 14 characters" is not one; a label followed by a plain word,
``mot de passe : soleil``, is undecided), **marking** (« confidentiel », vertraulich, « diffusion
restreinte »…) and **label** (a sensitivity label above *internal*: ``Classification :
Confidentiel``, ``Sensitivity: Highly Confidential``, ``MSIP_Label_…``). A mention's digest is
that of its term and its line, so a heading or table header repeated at the top of every chunk
counts once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum

from stdnum import iban as std_iban
from stdnum import luhn
from stdnum.ch import ssn
from stdnum.exceptions import InvalidChecksum, ValidationError


class Kind(StrEnum):
    """What a detector finds."""

    AVS = "avs"
    IBAN = "iban"
    CARD = "card"
    SALARY = "salary"
    HEALTH = "health"
    CREDENTIAL = "credential"
    MARKING = "marking"
    LABEL = "label"


LABELS: dict[Kind, str] = {
    Kind.AVS: "numéro AVS",
    Kind.IBAN: "IBAN",
    Kind.CARD: "carte de paiement",
    Kind.SALARY: "salaires",
    Kind.HEALTH: "santé",
    Kind.CREDENTIAL: "mot de passe / code d'accès",
    Kind.MARKING: "mention « confidentiel »",
    Kind.LABEL: "étiquette de sensibilité",
}
"""The French name of each kind, as the report shows it."""


@dataclass(frozen=True)
class Hit:
    """One occurrence: its kind, a digest of the value (16 hex; for counting distinct values,
    never the value) and whether the detector could decide (``reason``: why not)."""

    kind: Kind
    key: str
    decided: bool = True
    reason: str | None = None


def _digest(kind: Kind, value: str) -> str:
    return hashlib.blake2b(f"{kind}:{value}".encode(), digest_size=8).hexdigest()


# ---------------------------------------------------------------------- identifiers

_AVS_RE = re.compile(r"(?<![\w.,-])(?<!\d )756[. ]?\d{4}[. ]?\d{4}[. ]?\d{2}(?![ .,-]?\d)")
_IBAN_RE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![a-z0-9])")
_CARD_RE = re.compile(r"(?<![\w.,-])(?<!\d )\d(?:[ -]?\d){12,18}(?![ .,-]?\d)")
_DIGITS4 = re.compile(r"\d{4}")


def _iin_ok(d: str) -> bool:
    """Whether 13–19 digits ``d`` fall in a card issuer's range and length (ISO/IEC 7812 IINs)."""
    n, p2, p3, p4, p6 = len(d), int(d[:2]), int(d[:3]), int(d[:4]), int(d[:6])
    if d[0] == "4":
        return n in (13, 16, 19)  # Visa
    if 51 <= p2 <= 55 or 222100 <= p6 <= 272099:
        return n == 16  # Mastercard
    if p2 in (34, 37):
        return n == 15  # American Express
    if p4 == 6011 or p2 == 65 or 644 <= p3 <= 649:
        return 16 <= n <= 19  # Discover
    if p2 == 62:
        return 16 <= n <= 19  # UnionPay
    if 3528 <= p4 <= 3589:
        return 16 <= n <= 19  # JCB
    if p2 == 36 or 300 <= p3 <= 305 or p2 in (38, 39):
        return 14 <= n <= 19  # Diners Club
    if p2 == 50 or 56 <= p2 <= 69:
        return 12 <= n <= 19  # Maestro
    return False


def _avs(text: str, ocr: bool) -> list[Hit]:
    out = []
    for m in _AVS_RE.finditer(text):
        number = ssn.compact(m.group())
        if ssn.is_valid(number):
            out.append(Hit(Kind.AVS, _digest(Kind.AVS, number)))
        elif ocr:
            out.append(Hit(Kind.AVS, _digest(Kind.AVS, number), False, "texte lu par OCR : chiffre de contrôle faux"))
    return out


def _iban(text: str, ocr: bool, spans: list[tuple[int, int]]) -> list[Hit]:
    out = []
    for m in _IBAN_RE.finditer(text):
        spans.append(m.span())
        chars = m.group().replace(" ", "")
        # the match may run into the next word: the longest prefix that is a valid IBAN
        found = None
        for k in range(min(len(chars), 34), 14, -1):
            if std_iban.is_valid(chars[:k]):
                found = chars[:k]
                break
        if found is not None:
            out.append(Hit(Kind.IBAN, _digest(Kind.IBAN, found)))
            continue
        if ocr:
            try:
                std_iban.validate(chars)
            except InvalidChecksum:
                out.append(Hit(Kind.IBAN, _digest(Kind.IBAN, chars), False, "texte lu par OCR : clé de contrôle fausse"))
            except ValidationError:
                pass
    return out


def _card(text: str, ocr: bool) -> list[Hit]:
    out = []
    for m in _CARD_RE.finditer(text):
        raw = m.group()
        digits = re.sub(r"[ -]", "", raw)
        if not 13 <= len(digits) <= 19 or len(set(digits)) == 1 or not _iin_ok(digits):
            continue
        if luhn.is_valid(digits):
            out.append(Hit(Kind.CARD, _digest(Kind.CARD, digits)))
        elif ocr and re.fullmatch(r"\d{4}([ -]\d{4}){3}", raw):
            out.append(Hit(Kind.CARD, _digest(Kind.CARD, digits), False, "texte lu par OCR : chiffre de Luhn faux"))
    return out


# ---------------------------------------------------------------------- vocabulary

_ACCENTS = {"e": "[eéèêë]", "a": "[aàâä]", "i": "[iîï]", "o": "[oôö]", "u": "[uùûü]", "c": "[cç]"}


def _words(*terms: str) -> re.Pattern[str]:
    """One case-insensitive pattern of whole ``terms`` (regex syntax), accents optional."""

    def fold(term: str) -> str:
        return "".join(_ACCENTS.get(ch, ch) if ch in "eaiouc" else ch for ch in term)

    return re.compile(r"(?<!\w)(?:" + "|".join(fold(t) for t in terms) + r")(?!\w)", re.IGNORECASE)


_SALARY = _words(
    r"salaires?", r"salaria(?:l|le|les|ux)", r"remunerations?", r"(?:bulletins?|fiches?) de (?:paie|paye|salaire)",
    r"decomptes? de salaire", r"(?:13e|13ème|treizieme) (?:salaire|mois)", r"brut annuel", r"net annuel",
    r"lohn", r"lohne", r"gehalt", r"gehalter", r"lohnabrechnung", r"salary", r"salaries", r"payroll",
)
_HEALTH = _words(
    r"maladies?", r"malades?", r"arrets? (?:de travail|maladie)", r"certificats? medica(?:l|ux)",
    r"medecins?", r"medica(?:l|le|ux|les)", r"diagnostics?", r"hospitalisee?s?", r"hospitalisations?",
    r"invalidite", r"handicap(?:s|ee?s?)?", r"therapies?", r"psychiatr\w*", r"grossesses?",
    r"krankheit(?:en)?", r"krank", r"arztzeugnis(?:se)?", r"sick leave", r"medical", r"diagnosis",
)
_MARKING = _words(
    r"confidentiel(?:le)?s?", r"strictement confidentiel(?:le)?s?", r"diffusion restreinte", r"ne pas diffuser",
    r"vertraulich(?:e|er|es)?", r"streng vertraulich", r"confidential", r"strictly confidential",
)
_LABEL = re.compile(
    r"(?:classification|sensibilit[eé]|sensitivity|[eé]tiquette(?: de (?:confidentialit[eé]|sensibilit[eé]))?|"
    r"niveau de confidentialit[eé]|vertraulichkeit(?:sstufe)?|klassifizierung|label)\s*:\s*"
    r"(?P<level>(?:hautement |strictement |highly |streng )?(?:confidentiel(?:le)?|confidential|vertraulich|secret|"
    r"restreint|restricted|c3|c4))(?!\w)|MSIP_Label_[0-9a-f-]{36}_(?:Name|Enabled)",
    re.IGNORECASE,
)
_CREDENTIAL = re.compile(
    r"(?<!\w)(?P<term>mots? de passe|mdp|codes? d'acc[eè]s|codes? d’acc[eè]s|codes? pin|pin|nip|passwor[dt]s?|"
    r"kennw[oö]rt(?:er)?|passphrase|zugangscode)(?!\w)"
    r"(?P<gap>[^.\n:=]{0,60}?)\s*(?P<sep>:|=|\best\b|\bis\b|\bist\b|\blautet\b)\s*(?P<value>[^\s,;]{1,64})",
    re.IGNORECASE,
)
_SECRETISH = re.compile(r"[\d!@#$%^&*_+=/\\?§|~-]|[a-zà-ÿ][A-Z]")


def _line_of(text: str, start: int, end: int) -> str:
    a = text.rfind("\n", 0, start) + 1
    b = text.find("\n", end)
    return text[a : b if b >= 0 else len(text)].strip().lower()


def _mentions(kind: Kind, pattern: re.Pattern[str], text: str) -> list[Hit]:
    return [
        Hit(kind, _digest(kind, m.group().lower() + "\x00" + _line_of(text, m.start(), m.end())))
        for m in pattern.finditer(text)
    ]


def _credentials(text: str) -> list[Hit]:
    out = []
    for m in _CREDENTIAL.finditer(text):
        value = m.group("value").strip("\"'«»“”‘’()[]").rstrip(".")
        sep = m.group("sep")
        if len(value) < 3:
            continue
        key = _digest(Kind.CREDENTIAL, value)
        if _SECRETISH.search(value):
            out.append(Hit(Kind.CREDENTIAL, key))
        elif sep in (":", "="):
            out.append(Hit(Kind.CREDENTIAL, key, False, "un mot seul après l'intitulé : mot de passe ou simple note ?"))
    return out


def scan(text: str, *, ocr: bool = False) -> list[Hit]:
    """Every hit in ``text`` (one chunk's indexed text, any length in characters); ``ocr``: the
    text was (partly) read by OCR (numbers failing their check are then undecided, see the
    module doc). Never raises on any text."""
    hits: list[Hit] = []
    if _DIGITS4.search(text):
        if re.search(r"[A-Z]{2}\d{2}", text):
            spans: list[tuple[int, int]] = []
            hits += _iban(text, ocr, spans)
            for a, b in spans:  # an IBAN's digits are neither an AVS number nor a card
                text = text[:a] + " " * (b - a) + text[b:]
        hits += _avs(text, ocr)
        hits += _card(text, ocr)
    hits += _mentions(Kind.SALARY, _SALARY, text)
    hits += _mentions(Kind.HEALTH, _HEALTH, text)
    hits += _mentions(Kind.MARKING, _MARKING, text)
    hits += _mentions(Kind.LABEL, _LABEL, text)
    hits += _credentials(text)
    return hits


__all__ = ["LABELS", "Hit", "Kind", "scan"]
