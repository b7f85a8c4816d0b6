"""Control 5, the fact control (docs/ARCHITECTURE.md "Data flow of a question" step 6): every fact an
answer states must be found, normalised, in an extract its claim cites, of the subject it speaks
of, next to the same field. Deterministic, no model call.

Controls 3 and 4 check that an answer *cites* shown documents; they pass « Forfait mensuel :
CHF 3 000 HT [03_Contrat_Maintenance_Etude_Rochat.docx] » for a contract that says CHF 3 840 HT.
This control reads the facts themselves. :func:`unsupported_facts` is a pure function of the answer
text, the extracts shown and the question.

**Which facts** (:class:`FactKind`), found in the raw answer (citations blanked out, Markdown
markers ignored):

- *amounts and numbers*: ``CHF 3 840 HT``, ``3'840.–``, ``3840``, ``99,5 %``, ``0.2``, counts
  (``35 postes``) and numbers in words (``vingt-quatre``, ``trois``; « un »/« une » are articles
  and never checked); a number written with a ``.``/``,`` before three digits is read both ways
  (``3.840`` = 3.84 or 3840). Numbers that count the answer's own material (« les deux contrats »,
  « 3 documents ») and list markers (``1.`` opening a line) are not facts of the documents;
- *durations*: a number with a unit of time also matches the same length in another unit
  (« 2 ans » = « vingt-quatre mois », « 4 h » = « 4 heures »);
- *dates* in their French forms: ``1er janvier 2026``, ``01.01.2026``, ``1.1.2026``,
  ``01/01/2026``, ``2026-01-01``, « le 1er janvier », « janvier 2026 » — compared as dates, so any
  form matches any other; *times of day*: ``8h00``, ``8 h``, ``08:00``;
- *codes and identifiers*: a compound with a digit or an inner capital (``S-012``,
  ``4471-ZETA``, ``WD-EXCL-042``, ``qwen2.5:14b``, ``LABO-G9``, ``192.168.1.10``,
  ``C:\\Axonix\\Agent``, a file name) — compared without case, accents or joiners
  (``Wi-Fi`` = ``WiFi``);
- *proper and product names*: a capitalised word that does not open a sentence, line, list item,
  table cell or a clause after ``:`` (``Rochat``, ``Windows Server``, ``Switzerland North``), a
  word with an inner capital (``OPNsense``, ``pfSense``, ``WireGuard``) or an acronym
  (``PFPDT``); a capitalised word in an opening position only when the context or the question
  writes it as a name (``Rochat`` opening « Rochat : … » is still checked). A name matches the
  same word in the evidence, or the same French stem (:func:`ancre.index.tokenize.tokenize`), so
  inflection never counts as a difference.

**Claims, not sentences** (issue 41). The answer is cut into paragraphs (blank lines) and
sentences (a line, cut again after ``.``/``!``/``?`` followed by a capital, not after « Fr. »,
« M. », « art. »…), and each sentence into claims at its runs of citations: a fact belongs to the
run of citations that follows it (after the last run: to that one), and must be supported as the
answer states it:

- *in an extract its claim cites*: its own citations (one opening the next sentence counts); a
  sentence that cites nothing takes the citation that closes its paragraph (a quoted passage, a
  list closed by « … [x] »), a citation-only line or paragraph after it (« Sources : [a], [b] »
  after a table) or an introducing line before it (« Selon [x] : »), and else is **unsourced**
  (:attr:`FactReason.UNCITED`) — never checked against every extract shown. A citation of no
  shown document gives no evidence at all;
- *of the document whose subject the claim speaks of* (figures, dates, codes; a name is itself
  what is spoken of): the nearest name of a subject before it in its claim, else after it there,
  else before it in the sentence or its paragraph; in a table, its column's heading; else the
  subject the question asks about (:mod:`ancre.query.subjects`: exactly « Garage Dubois », not
  « Garage Dubuis » nor « Dubois Transports SA »; a client that does not exist but is a near miss
  of one binds to no document at all). Another client's fee under this client's name, or two
  fees swapped in a sentence citing both contracts, is :attr:`FactReason.OTHER_SUBJECT`;
- *next to the same field*: when the words before the figure in its claim hold a whole field
  label of the document (a table row's first cell, the words before a figure in its sentence) that
  names a figure of the same class, and match it better than any label the figure itself has there
  — « Le forfait mensuel est de CHF 160 HT » where CHF 160 HT is the « Heure hors forfait » —, it is
  :attr:`FactReason.OTHER_FIELD`;
- *not only in a replaced version* when the sentence says it is the one in force (« en vigueur »,
  « actuel ») and does not say it is the older one: :attr:`FactReason.SUPERSEDED`.

Section and list numbers opening a line of an extract (« 2. », « 5. Accès aux locaux ») are no
figures, and a percentage matches only a percentage: « indexé de 2 % par an » and « 5 postes »
never find support in a section's numbering. Currency forms (``Fr. 1.040``, ``CHF 1040/mois``,
``1'040.–``) are amounts, never names or codes.

**Stated as missing**: in a negative sentence (« ne … pas », « aucun », « ni », « sans »), facts
that the question itself names are not claims (« Le contrat de Dupont Logistique SA ne figure pas
dans les documents »); elsewhere the question is no evidence — « Pour l'étude Rochat, le forfait
est de CHF 4 200 HT [21_Contrat_Maintenance_Baumont_Industries.docx] » is reported for « Rochat »
and for the fee, bound to Rochat.

What the control cannot see: a figure of the right document and field stated about another
thing; the judge is there for that. The table tests ``tests/unit/test_facts.py`` (the seed's
invented-figure cases, faithful answers written from the Axonix documents) and
``tests/unit/test_template_facts.py`` (a generated share written from templates: lookalike
clients, archived versions, every kind of wrong answer the issue names) hold it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum

from ancre.index.tokenize import STOP_WORDS, fold, tokenize
from ancre.models import nfc
from ancre.query.citations import CitationScan, scan_citations
from ancre.query.context import Context
from ancre.query.relevance import FILLER_TERMS
from ancre.query.subjects import (
    DOCUMENT_WORDS,
    DocSubject,
    Level,
    Name,
    asked_entities,
    discriminates,
    doc_levels,
    lookalike,
    mentions,
)


class FactKind(StrEnum):
    """What kind of fact a span is (the names appear in the API and the audit)."""

    AMOUNT = "montant"
    NUMBER = "nombre"
    DURATION = "duree"
    DATE = "date"
    TIME = "heure"
    CODE = "code"
    NAME = "nom"


@dataclass(frozen=True)
class Fact:
    """A fact found in a text: ``text`` as written, its ``kind``, its span (``start``/``end`` in
    the NFC text) and its normalised ``keys`` (``n:3840``, ``d:2026-01-01``, ``c:wdexcl042``,
    ``w:rochat``…): it is supported when one of them is among the evidence's keys (a name: when
    every word of it is)."""

    text: str
    kind: FactKind
    start: int
    end: int
    keys: tuple[frozenset[str], ...]
    """One key set per word of a name (each must match); one set for any other fact."""
    words: tuple[str, ...] = ()
    """A name's words as written, one per key set (``()`` for other facts)."""


class FactReason(StrEnum):
    """Why a fact is not supported as the answer states it (the values appear in the API)."""

    ABSENT = "absent"
    """In no extract of the documents its claim cites (of its subject)."""
    UNCITED = "non_cite"
    """Its sentence cites nothing: unsourced, wherever the figure may be."""
    OTHER_SUBJECT = "autre_sujet"
    """In a cited extract, but of another subject than the one the claim speaks of (another
    client's fee under this client's name)."""
    OTHER_FIELD = "autre_champ"
    """In the right document, but as another field's value (the hourly rate given as the monthly
    fee)."""
    SUPERSEDED = "version_remplacee"
    """Only in a replaced version, stated as the one in force."""


@dataclass(frozen=True)
class UnsupportedFact:
    """A fact of the answer not supported as it states it: ``text`` as written (``CHF 3 000 HT``,
    ``pfSense``), its ``kind``, the ``sentence`` that states it, the documents its claim cites
    (``cited``; ``()``: none) and why (``reason``)."""

    text: str
    kind: FactKind
    sentence: str
    cited: tuple[str, ...] = ()
    reason: FactReason = FactReason.ABSENT


# ----------------------------------------------------------------------------- lexicon

_MONTHS = {
    "janvier": 1, "fevrier": 2, "mars": 3, "avril": 4, "mai": 5, "juin": 6, "juillet": 7,
    "aout": 8, "septembre": 9, "octobre": 10, "novembre": 11, "decembre": 12,
}  # fmt: skip
_MONTH_RE = r"(?:janvier|f[ée]vrier|mars|avril|mai|juin|juillet|ao[ûu]t|septembre|octobre|novembre|d[ée]cembre)"

_NUMBER_WORDS = {
    "zero": 0, "un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "six": 6, "sept": 7,
    "huit": 8, "neuf": 9, "dix": 10, "onze": 11, "douze": 12, "treize": 13, "quatorze": 14,
    "quinze": 15, "seize": 16, "vingt": 20, "vingts": 20, "trente": 30, "quarante": 40,
    "cinquante": 50, "soixante": 60, "cent": 100, "cents": 100, "mille": 1000,
    "million": 1_000_000, "millions": 1_000_000,
}  # fmt: skip
_NUMBER_WORD_RE = (
    r"(?:z[ée]ro|une?|deux|trois|quatre|cinq|six|sept|huit|neuf|dix|onze|douze|treize|quatorze|"
    r"quinze|seize|vingts?|trente|quarante|cinquante|soixante|cents?|mille|millions?)"
)
_WORDS_RUN = re.compile(
    rf"(?<![^\W\d_]){_NUMBER_WORD_RE}(?:(?:-|\s+)(?:et(?:-|\s+)(?=(?:un|une|onze)(?![^\W\d_])))?{_NUMBER_WORD_RE})*(?![^\W\d_])",
    re.IGNORECASE,
)

_UNITS = {
    # unit word (folded) -> (dimension, factor to the base unit)
    "an": ("m", 12), "ans": ("m", 12), "annee": ("m", 12), "annees": ("m", 12),
    "mois": ("m", 1), "trimestre": ("m", 3), "trimestres": ("m", 3), "semestre": ("m", 6),
    "semestres": ("m", 6), "semaine": ("d", 7), "semaines": ("d", 7), "jour": ("d", 1),
    "jours": ("d", 1), "heure": ("s", 3600), "heures": ("s", 3600), "h": ("s", 3600),
    "minute": ("s", 60), "minutes": ("s", 60), "min": ("s", 60), "seconde": ("s", 1),
    "secondes": ("s", 1), "s": ("s", 1),
}  # fmt: skip
_META_NOUNS = frozenset(
    fold(w)
    for w in [
        "document", "documents", "contrat", "contrats", "version", "versions", "extrait", "extraits", "fichier",
        "fichiers", "source", "sources", "point", "points", "élément", "éléments", "passage", "passages", "partie",
        "parties", "cas", "option", "options", "question", "questions", "réponse", "réponses", "citation",
        "citations", "offre", "offres", "client", "clients",
    ]
)
"""Nouns a small count in an answer may refer to without being a fact of the documents (« les
deux contrats », « 3 documents »)."""
_META_MAX = 10

_CURRENCY_BEFORE = re.compile(r"(?:CHF|[Ff]r\.|[Ff]rs\.?|SFr\.|EUR|USD|€|\$)\s*$")
_CURRENCY_AFTER = re.compile(r"^\s*(?:CHF|francs?|EUR|euros?|€|USD|\$)(?![^\W\d_])", re.IGNORECASE)
_TAX_AFTER = re.compile(r"^\s*(?:HT|TTC|hors\s+taxes?)(?![^\W\d_])", re.IGNORECASE)
_PERCENT_AFTER = re.compile(r"^\s*(?:%|pour\s?cent)", re.IGNORECASE)
_DASH_SUFFIX = re.compile(r"^[.,][-–—]")

ACRONYMS_ALLOWED = frozenset({"chf", "eur", "usd", "ht", "tva", "nb", "ok", "ps"})
"""Upper-case words that are units or abbreviations, not names of anything in the documents."""

_STARTERS = frozenset(
    fold(w)
    for w in [
        "voici", "voilà", "selon", "concernant", "également", "toutefois", "cependant", "ensuite", "enfin", "ainsi",
        "aussi", "attention", "note", "remarque", "oui", "non", "aucun", "aucune", "chaque", "tous", "toutes",
        "tout", "plusieurs", "seul", "seule", "seuls", "d'après", "quant", "en", "résumé", "synthèse", "comparaison",
        "total", "durée", "montant", "forfait", "prix",
    ]
)

# ----------------------------------------------------------------------------- patterns

_SPACE = "[ \u00a0\u202f]"
_DATE_WORDS = re.compile(
    rf"(?<![\d\w])(\d{{1,2}}|premier)(?:er|re|e)?{_SPACE}+({_MONTH_RE})(?:{_SPACE}+(\d{{4}}))?(?!\d)",
    re.IGNORECASE,
)
_MONTH_YEAR = re.compile(rf"(?<![^\W\d_])({_MONTH_RE}){_SPACE}+(\d{{4}})(?!\d)", re.IGNORECASE)
_DATE_NUM = re.compile(r"(?<![\w.,/-])(\d{1,2})([./])(\d{1,2})\2(\d{4}|\d{2})(?![\w.,/-]*\d)")
_DATE_ISO = re.compile(r"(?<![\w.-])(\d{4})-(\d{2})-(\d{2})(?![\w-])")
_TIME = re.compile(r"(?<![\w.,:])(\d{1,2})(?:\s?h\s?(\d{2})?|:(\d{2}))(?![^\W_]|:\d)")
_COMPOUND = re.compile(r"[^\W_]+(?:(?:[-_./\\:@]{1,3})[^\W_]+)+|[^\W_]+")
_NUMBER = re.compile(
    rf"(?<![\w.,'’])(?:\d{{1,3}}(?:(?:{_SPACE}|['’])\d{{3}})+|\d+)(?:[.,]\d+)?(?![^\W_])"
)
_ORDINAL = re.compile(r"^(\d+)(?:er|re|e|ème|eme|nd|nde)$", re.IGNORECASE)
_GLUED_UNIT = re.compile(r"^(\d+(?:[.,]\d+)?)(to|go|mo|ko|tb|gb|mb|km|m|cm|mm|kg|g|h|min|s|ms|j|%)$", re.IGNORECASE)
_NAME_WORD = re.compile(r"[^\W\d_][^\W_]*")
_LIST_MARKER = re.compile(r"^(\s*(?:[-*+•]|\d{1,3}[.)])\s+)")
_NEGATION = re.compile(
    r"(?<![^\W_])(?:pas|aucun|aucune|aucuns|aucunes|ni|jamais|sans|nullement|rien)(?![^\W_])"
    r"|ne figure|n'appara[iî]t|ne mentionne|n'indique|ne pr[ée]cise",
    re.IGNORECASE,
)
_SENTENCE_SPLIT = re.compile(
    r"(?<=[.!?…])(?<![^\W\d_]Fr\.)(?<!\bFr\.)(?<!\bfr\.)(?<!\bM\.)(?<!\benv\.)(?<!\bart\.)(?<!\bch\.)"
    r"(?<!\bal\.)(?<!\bno\.)(?<!\bp\.)(?<!\bex\.)[ \t]+(?=[\[«\"*_(]*[A-ZÀ-ÖØ-Þ0-9])"
)
"""Where a line is cut into sentences: after ``.``/``!``/``?`` and a space before a capital or a
digit — not after an abbreviation (« Fr. 1.040 », « M. Dubois », « art. 5 »)."""
_OPENER_CHARS = set(":;(«\"“|—–-/*#>[•+")


# ----------------------------------------------------------------------------- normalising


def _dec(text: str) -> Decimal | None:
    try:
        return Decimal(text).normalize()
    except InvalidOperation:
        return None


def _key(value: Decimal | float) -> str:
    """The key a number is compared by: its value written out in full (``3840``, ``99.5``),
    never in exponent form — also for a number of more digits than the decimal context holds,
    which ``quantize`` refuses (a question or an answer may write any digits)."""
    return f"n:{Decimal(str(value)).normalize():f}"


def number_values(written: str) -> frozenset[Decimal]:
    """The values a written number may mean: ``"3 840"`` → {3840}; ``"3'840"`` → {3840};
    ``"99,5"`` → {99.5}; ``"3.840"`` → {3.84, 3840} (a ``.``/``,`` before exactly three digits is
    a decimal point or a thousands separator); ``"0.2"`` → {0.2}."""
    s = re.sub(r"[ \u00a0\u202f'’]", "", written)
    out: set[Decimal] = set()
    m = re.fullmatch(r"(\d+)(?:([.,])(\d+))?", s)
    if not m:
        return frozenset()
    whole, sep, frac = m.groups()
    if sep is None:
        v = _dec(whole)
        return frozenset({v} if v is not None else ())
    v = _dec(f"{whole}.{frac}")
    if v is not None:
        out.add(v)
    if len(frac) == 3:
        v = _dec(whole + frac)
        if v is not None:
            out.add(v)
    return frozenset(out)


def words_value(text: str) -> int | None:
    """The value of French number words (``"vingt-quatre"`` → 24, ``"quatre-vingt-dix"`` → 90,
    ``"trois cents"`` → 300, ``"deux mille"`` → 2000); ``None`` when ``text`` is not one."""
    parts = [p for p in re.split(r"[-\s]+", fold(text)) if p and p != "et"]
    if not parts or any(p not in _NUMBER_WORDS for p in parts):
        return None
    total, current = 0, 0
    for p in parts:
        v = _NUMBER_WORDS[p]
        if v == 100:
            current = (current or 1) * 100
        elif v >= 1000:
            total += (current or 1) * v
            current = 0
        elif v == 20 and current % 100 == 4:  # quatre-vingt(s)
            current += 76
        elif 10 <= v <= 19 and current % 100 in (60, 80):  # soixante-dix, quatre-vingt-onze
            current += v
        else:
            current += v
    return total + current


def _duration_keys(values: Iterable[Decimal], unit: str) -> set[str]:
    dim, factor = _UNITS[unit]
    return {f"t:{dim}:{_key(v * factor)[2:]}" for v in values}


def _unit_after(text: str, end: int) -> str | None:
    m = re.match(r"[ \u00a0\u202f]*([^\W\d_]+)", text[end:])
    if not m:
        return None
    w = fold(m.group(1))
    return w if w in _UNITS else None


def _noun_after(text: str, end: int) -> str | None:
    m = re.match(r"[ \u00a0\u202f]*(?:[^\W\d_]+[ \u00a0\u202f]+)?([^\W\d_]+)", text[end:])
    m1 = re.match(r"[ \u00a0\u202f]*([^\W\d_]+)", text[end:])
    for cand in (m1, m):
        if cand and fold(cand.group(1)) in _META_NOUNS:
            return fold(cand.group(1))
    return None


def _compact(token: str) -> str:
    return re.sub(r"[-_./\\:@]", "", fold(token))


# ----------------------------------------------------------------------------- scanning


@dataclass
class _Scan:
    """Facts of one text, and the character positions they took (each position belongs to one
    fact at most: a date's digits are not numbers too)."""

    text: str
    facts: list[Fact]
    taken: list[bool]

    def free(self, start: int, end: int) -> bool:
        return not any(self.taken[start:end])

    def take(self, fact: Fact) -> None:
        self.facts.append(fact)
        for i in range(fact.start, fact.end):
            self.taken[i] = True


def _date_facts(scan: _Scan) -> None:
    t = scan.text
    for m in _DATE_WORDS.finditer(t):
        if not scan.free(m.start(), m.end()):
            continue
        day = 1 if m.group(1).lower() == "premier" else int(m.group(1))
        month = _MONTHS[fold(m.group(2))]
        if not 1 <= day <= 31:
            continue
        keys = {f"dd:{month:02d}-{day:02d}"} if m.group(3) is None else {f"d:{m.group(3)}-{month:02d}-{day:02d}"}
        scan.take(Fact(m.group(0), FactKind.DATE, m.start(), m.end(), (frozenset(keys),)))
    for m in _MONTH_YEAR.finditer(t):
        if scan.free(m.start(), m.end()):
            month = _MONTHS[fold(m.group(1))]
            scan.take(Fact(m.group(0), FactKind.DATE, m.start(), m.end(), (frozenset({f"dm:{m.group(2)}-{month:02d}"}),)))
    for m in _DATE_NUM.finditer(t):
        day, month, year = int(m.group(1)), int(m.group(3)), m.group(4)
        if not (1 <= day <= 31 and 1 <= month <= 12) or not scan.free(m.start(), m.end()):
            continue
        if len(year) == 2:
            year = f"20{year}"
        scan.take(Fact(m.group(0), FactKind.DATE, m.start(), m.end(), (frozenset({f"d:{year}-{month:02d}-{day:02d}"}),)))
    for m in _DATE_ISO.finditer(t):
        year, month, day = m.group(1), int(m.group(2)), int(m.group(3))
        if 1 <= month <= 12 and 1 <= day <= 31 and scan.free(m.start(), m.end()):
            scan.take(Fact(m.group(0), FactKind.DATE, m.start(), m.end(), (frozenset({f"d:{year}-{month:02d}-{day:02d}"}),)))


def _time_facts(scan: _Scan) -> None:
    for m in _TIME.finditer(scan.text):
        hour = int(m.group(1))
        minute = int(m.group(2) or m.group(3) or 0)
        if hour > 24 or minute > 59 or not scan.free(m.start(), m.end()):
            continue
        if m.group(3) is None and m.group(2) is None and not re.search(r"h\s*$", m.group(0)):
            continue
        keys = {f"h:{hour:02d}:{minute:02d}", f"t:s:{hour * 3600 + minute * 60}"}  # « 4 h » is a time or 4 hours
        scan.take(Fact(m.group(0), FactKind.TIME, m.start(), m.end(), (frozenset(keys),)))


_RATE = re.compile(r"\d+(?:[.,'’]\d+)*(?:[.,][-–—])?/[^\W\d_]{1,15}")
"""A figure per unit written without spaces (``1040/mois``, ``160/h``): a rate, not a code."""


def _is_code(token: str) -> bool:
    if _ORDINAL.match(token) or _GLUED_UNIT.match(token) or _RATE.fullmatch(token):
        return False
    if re.fullmatch(r"\d+(?:[.,]\d+)?", token):
        return False
    joined = re.search(r"[-_./\\:@]", token) is not None
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    inner_upper = any(c.isupper() for c in token[1:]) and any(c.islower() for c in token)
    if joined:
        if has_digit:
            return True
        # a code of capitals (WD-EXCL, SRV-FICHIERS) or a mixed-case compound; not « pare-feu »
        parts = [p for p in re.split(r"[-_./\\:@]+", token) if p]
        return any(len(p) > 1 and p.isupper() for p in parts) or inner_upper or "\\" in token or ":" in token
    return has_digit and has_alpha


def _code_facts(scan: _Scan) -> None:
    for m in _COMPOUND.finditer(scan.text):
        token = m.group(0).rstrip(".:-/")
        end = m.start() + len(token)
        if not token or not scan.free(m.start(), end) or not _is_code(token):
            continue
        # a Windows path: keep the drive letter's colon and backslashes (C:\Axonix\Agent)
        scan.take(Fact(token, FactKind.CODE, m.start(), end, (frozenset({f"c:{_compact(token)}"}),)))


def _number_facts(scan: _Scan, *, answer: bool) -> None:
    t = scan.text
    for m in _NUMBER.finditer(t):
        start, end = m.start(), m.end()
        if not scan.free(start, end):
            continue
        values = number_values(m.group(0))
        if not values:
            continue
        if answer and _noun_after(t, end) is not None and all(v <= _META_MAX for v in values):
            continue
        keys = {_key(v) for v in values}
        kind = FactKind.NUMBER
        d_start, d_end = start, end
        before = _CURRENCY_BEFORE.search(t[:start])
        if before:
            kind, d_start = FactKind.AMOUNT, before.start()
        after = _DASH_SUFFIX.match(t[end:])
        if after:
            d_end = end + after.end()
        cur = _CURRENCY_AFTER.match(t[d_end:])
        if cur:
            kind, d_end = FactKind.AMOUNT, d_end + cur.end()
        tax = _TAX_AFTER.match(t[d_end:])
        if tax and kind is FactKind.AMOUNT:
            d_end += tax.end()
        pct = _PERCENT_AFTER.match(t[d_end:])
        if pct:
            d_end += pct.end()
            keys = {f"p:{k[2:]}" for k in keys}  # a percentage: never a count, a year or a section number
        unit = _unit_after(t, end)
        if unit is not None and kind is not FactKind.AMOUNT:
            keys = _duration_keys(values, unit)  # a length of time, in any unit; not the bare number
            kind = FactKind.DURATION
            d_end = end + re.match(r"[ \u00a0\u202f]*[^\W\d_]+", t[end:]).end()  # type: ignore[union-attr]  # the unit word found above follows
        scan.take(Fact(t[d_start:d_end].strip(), kind, d_start, d_end, (frozenset(keys),)))


def _word_number_facts(scan: _Scan, *, answer: bool) -> None:
    t = scan.text
    for m in _WORDS_RUN.finditer(t):
        value = words_value(m.group(0))
        if value is None or not scan.free(m.start(), m.end()):
            continue
        if answer and (fold(m.group(0)) in ("un", "une") or (value <= _META_MAX and _noun_after(t, m.end()))):
            continue
        if answer and fold(m.group(0)) == "cent" and re.search(r"pour\s*$", t[: m.start()], re.IGNORECASE):
            continue
        keys = {_key(value)}
        unit = _unit_after(t, m.end())
        kind, end = FactKind.NUMBER, m.end()
        pct = _PERCENT_AFTER.match(t[end:])
        if pct:
            keys, end, unit = {f"p:{_key(value)[2:]}"}, end + pct.end(), None
        if unit is not None:
            keys = _duration_keys([Decimal(value)], unit)
            kind = FactKind.DURATION
            end += re.match(r"[ \u00a0\u202f]*[^\W\d_]+", t[end:]).end()  # type: ignore[union-attr]  # the unit word found above follows
        scan.take(Fact(t[m.start() : end], kind, m.start(), end, (frozenset(keys),)))


def _opens(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence, a line, a list item, a table cell or a
    clause after a colon (its capital says nothing). An elided article (« l'Étude ») does not."""
    i = start - 1
    while i >= 0 and text[i] in " \t*_`":
        i -= 1
    if i < 0 or text[i] == "\n":
        return True
    ch = text[i]
    if ch in "'’":
        return False
    return ch in ".!?…" or ch in _OPENER_CHARS


def known_names(texts: Iterable[str]) -> frozenset[str]:
    """Folded words that ``texts`` write as names: capitalised where a capital says something
    (not opening a sentence or line), with an inner capital, or in capitals."""
    out: set[str] = set()
    for raw in texts:
        text = nfc(raw)
        for m in _NAME_WORD.finditer(text):
            w = m.group(0)
            if not w[0].isupper() and not any(c.isupper() for c in w[1:]):
                continue
            if any(c.isupper() for c in w[1:]) or not _opens(text, m.start()):
                out.add(fold(w))
    return frozenset(out - STOP_WORDS)


def _name_facts(scan: _Scan, names: frozenset[str]) -> None:
    t = scan.text
    run: list[re.Match[str]] = []

    def flush() -> None:
        if run:
            start, end = run[0].start(), run[-1].end()
            keys = tuple(_name_keys(w.group(0)) for w in run)
            scan.take(Fact(t[start:end], FactKind.NAME, start, end, keys, tuple(w.group(0) for w in run)))
            run.clear()

    last_end = -1
    for m in _NAME_WORD.finditer(t):
        w = m.group(0)
        if not scan.free(m.start(), m.end()):
            flush()
            continue
        folded = fold(w)
        inner = any(c.isupper() for c in w[1:])
        is_name = False
        if w[0].isupper() or inner:
            if folded in STOP_WORDS or folded in ACRONYMS_ALLOWED:
                is_name = False
            elif inner or (len(w) > 1 and w.isupper()) or not _opens(t, m.start()):
                is_name = True
            else:
                is_name = folded in names and folded not in _STARTERS
        if is_name:
            gap = t[last_end : m.start()] if run else ""
            if run and not re.fullmatch(r"[ \u00a0]", gap):
                flush()
            run.append(m)
            last_end = m.end()
        else:
            flush()
    flush()


def _name_keys(word: str) -> frozenset[str]:
    keys = {f"w:{fold(word)}"}
    keys |= {f"s:{s}" for s in tokenize(word)}
    return frozenset(keys)


def scan_facts(text: str, names: frozenset[str] = frozenset(), *, answer: bool = True) -> list[Fact]:
    """The facts of ``text`` (NFC), in text order: dates, times, codes, numbers (digits, then
    words), then names. ``names``: folded words known to be names (see :func:`known_names`), so a
    capitalised one is checked even in an opening position. ``answer=False`` reads evidence:
    small counts and articles (« un », « une ») count as numbers too."""
    text = nfc(text)
    scan = _Scan(text, [], [False] * len(text))
    for line in re.finditer(r"^.*$", text, re.MULTILINE):  # a numbered list's markers are no facts
        lm = _LIST_MARKER.match(line.group(0))
        if lm:
            for i in range(line.start(), line.start() + lm.end()):
                scan.taken[i] = True
    _date_facts(scan)
    _time_facts(scan)
    _code_facts(scan)
    _number_facts(scan, answer=answer)
    _word_number_facts(scan, answer=answer)
    _name_facts(scan, names)
    return sorted(scan.facts, key=lambda f: f.start)


# ----------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class Evidence:
    """The normalised keys of some extracts' text (and their documents' names and folders)."""

    keys: frozenset[str]

    @classmethod
    def of(cls, texts: Iterable[str]) -> Evidence:
        """The keys of ``texts``; a section or list number opening a line (« 5. Accès aux
        locaux », « 2.1 Périmètre ») is no figure of them."""
        keys: set[str] = set()
        for raw in texts:
            text = mask_numbering(nfc(raw))
            for f in scan_facts(text, answer=False):
                for ks in f.keys:
                    keys |= ks
                if f.kind is FactKind.DATE:
                    keys |= _date_parts(ks for ks in f.keys)
                if f.kind is FactKind.DURATION:
                    keys |= _duration_numbers(f.text)
                if f.kind is FactKind.CODE:
                    keys |= _code_parts(f.text)
            for m in _COMPOUND.finditer(text):
                keys.add(f"c:{_compact(m.group(0))}")
                for part in re.split(r"[-_./\\:@]+", m.group(0)):
                    if part:
                        keys.add(f"w:{fold(part)}")
                        keys.add(f"c:{fold(part)}")
            for m in _NUMBER.finditer(text):
                keys |= {_key(v) for v in number_values(m.group(0))}
                for group in re.split(r"[ \u00a0\u202f'’]", m.group(0)):
                    keys |= {_key(v) for v in number_values(group)}
            keys |= {f"w:{fold(m.group(0))}" for m in _NAME_WORD.finditer(text)}
            keys |= {f"s:{s}" for s in tokenize(text)}
            keys |= _table_durations(text)
        return cls(frozenset(keys))

    def supports(self, fact: Fact) -> bool:
        """Whether ``fact`` is found here (a name: each of its words)."""
        return all(bool(ks & self.keys) for ks in fact.keys)


_NUMBERING = re.compile(
    r"^([ \t]*(?:[-*+•][ \t]+)?)(\d{1,3}[.)](?=[ \t]+\S)|\d{1,3}(?:\.\d{1,3})+[.)]?(?=[ \t]+[A-ZÀ-ÖØ-Þ]))", re.MULTILINE
)
"""A section or list number opening a line: « 5. », « 3) », « 2.1 » before a capital (not « 4.5 heures »)."""
_NUMBER_ONLY = re.compile(r"[ \t]*(?:[-*+•][ \t]+)?(?:\d{1,3}[.)]|\d{1,3}(?:\.\d{1,3})+[.)]?)")


def mask_numbering(text: str) -> str:
    """``text`` with the section and list numbers that open its lines blanked (same length):
    « 5. Accès aux locaux » → «    Accès aux locaux »."""
    return _NUMBERING.sub(lambda m: m.group(1) + " " * len(m.group(2)), text)


def _table_durations(text: str) -> set[str]:
    """Duration keys of table cells whose column header is a unit of time (« Lot | Jours |
    Montant » then « Audit | 6 | CHF 9 600 HT »: 6 days)."""
    out: set[str] = set()
    header: list[str] | None = None
    for line in text.splitlines():
        if " | " not in line:
            header = None
            continue
        cells = [c.strip() for c in line.split(" | ")]
        if header is None:
            header = cells
            continue
        for h, cell in zip(header, cells, strict=False):  # a row may have more or fewer cells than the header
            words = re.findall(r"[^\W\d_]+", fold(h))
            unit = next((w for w in reversed(words) if w in _UNITS), None)
            if unit is None:
                continue
            for m in _NUMBER.finditer(cell):
                out |= _duration_keys(number_values(m.group(0)), unit)
    return out


def _duration_numbers(written: str) -> set[str]:
    """The bare number of a duration read in evidence (« trente-six mois » → ``n:36``)."""
    out: set[str] = set()
    for m in _NUMBER.finditer(written):
        out |= {_key(v) for v in number_values(m.group(0))}
    for m in _WORDS_RUN.finditer(written):
        v = words_value(m.group(0))
        if v is not None:
            out.add(_key(v))
    return out


def _date_parts(key_sets: Iterable[frozenset[str]]) -> set[str]:
    out: set[str] = set()
    for ks in key_sets:
        for k in ks:
            if k.startswith("d:"):
                year, month, day = k[2:].split("-")
                out |= {f"dm:{year}-{month}", f"dd:{month}-{day}", _key(int(year)), _key(int(day))}
            elif k.startswith("dm:"):
                out.add(_key(int(k[3:7])))
            elif k.startswith("dd:"):
                out.add(_key(int(k[6:8])))
    return out


def _code_parts(token: str) -> set[str]:
    return {f"c:{_compact(p)}" for p in re.split(r"[-_./\\:@]+", token) if p}


# ----------------------------------------------------------------------------- the control


@dataclass(frozen=True)
class _Sentence:
    start: int
    end: int
    paragraph: int


def _sentences(text: str) -> list[_Sentence]:
    out: list[_Sentence] = []
    paragraph = 0
    pos = 0
    for block in re.split(r"(\n[ \t]*\n)", text):
        if re.fullmatch(r"\n[ \t]*\n", block):
            paragraph += 1
            pos += len(block)
            continue
        offset = pos
        for line in re.finditer(r"[^\n]+", block):
            s = offset + line.start()
            cuts = [m.start() for m in _SENTENCE_SPLIT.finditer(line.group(0))
                    if not _NUMBER_ONLY.fullmatch(line.group(0)[: m.start()])]  # « 2. Objet »: a numbered line
            bounds = [0, *cuts, len(line.group(0))]
            for a, b in itertools.pairwise(bounds):
                if line.group(0)[a:b].strip():
                    out.append(_Sentence(s + a, s + b, paragraph))
        pos += len(block)
    return out


def _negative(sentence: str) -> bool:
    return _NEGATION.search(sentence) is not None


def _masked_body(scan: CitationScan) -> str:
    """``scan.text`` with every citation and its brackets blanked (line breaks kept, so positions
    stay those of ``scan.text``): the citations themselves are no facts."""
    text = scan.text
    masked = list(text)
    for c in scan.citations:
        lo = c.start - 1 if c.start > 0 and text[c.start - 1] == "[" else c.start
        hi = c.end + 1 if c.end < len(text) and text[c.end] == "]" else c.end
        for i in range(lo, hi):
            if masked[i] != "\n":
                masked[i] = " "
    return "".join(masked)


@dataclass(frozen=True)
class _Cite:
    """One citation of the answer: its span in the text and the file it names (``None``: invented)."""

    start: int
    end: int
    filename: str | None


@dataclass(frozen=True)
class _Segment:
    """The part of a sentence whose facts one run of citations sources: ``start``–``end`` in the
    body and the files it cites (``None``: it cites nothing; ``()``: only invented names)."""

    start: int
    end: int
    files: tuple[str, ...] | None


def _citation_only(line: str) -> bool:
    """Whether a line of the masked body holds nothing but its citations (« [x.docx] »,
    « Sources : [a], [b] »)."""
    rest = re.sub(r"(?i)(?<![^\W_])(?:sources?|r[ée]f[ée]rences?|voir)(?![^\W_])", " ", line)
    return not re.search(r"[^\W_]", rest)


def _lines(body: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"[^\n]*", body) if m.start() < len(body) or not body]


class _Citations:
    """Which citations source which facts of an answer (see the module doc, « Where each fact
    must be found »): a sentence's own runs of citations, a citation that opens the next sentence,
    a citation-only line for the lines or paragraph before it, an introducing line (« Selon [x] : »)
    for the lines after it."""

    def __init__(self, body: str, sentences: Sequence[_Sentence], scan: CitationScan) -> None:
        self.body, self.sentences = body, sentences
        self.own: list[list[_Cite]] = [[] for _ in sentences]
        self.block: list[tuple[str, ...] | None] = [None] * len(sentences)
        lines = _lines(body)
        cites = [_Cite(c.start, c.end, c.filename) for c in scan.citations]
        line_of = {id(c): next((i for i, (a, b) in enumerate(lines) if a <= c.start <= b), -1) for c in cites}
        only = {line_of[id(c)] for c in cites if _citation_only(body[slice(*lines[line_of[id(c)]])])}
        by_line: dict[int, list[_Cite]] = {}
        for c in cites:
            if line_of[id(c)] in only:
                by_line.setdefault(line_of[id(c)], []).append(c)
            else:
                self._attach(c)
        for line, found in by_line.items():
            self._cover_before(lines, line, tuple(dict.fromkeys(c.filename for c in found if c.filename)))
        self._cover_after_intros()
        self._cover_closed_paragraphs()

    def _attach(self, c: _Cite) -> None:
        """A citation to the sentence it is in (or the last one before it); one opening a sentence
        also closes the previous sentence of the same paragraph."""
        s = self.sentences
        idx = next((i for i, x in enumerate(s) if x.start <= c.start < x.end), None)
        if idx is None:
            idx = max((i for i, x in enumerate(s) if x.start <= c.start), default=None)
        if idx is None:
            return
        self.own[idx].append(c)
        before = self.body[s[idx].start : c.start]
        if idx > 0 and not before.strip(" \t*_([") and s[idx - 1].paragraph == s[idx].paragraph:
            self.own[idx - 1].append(_Cite(s[idx - 1].end, s[idx - 1].end, c.filename))

    def _cover_before(self, lines: list[tuple[int, int]], line: int, files: tuple[str, ...]) -> None:
        """A citation-only line sources the uncited sentences before it: the lines of its
        paragraph above it, or — opening a paragraph — the previous paragraph."""
        a, _ = lines[line]
        para_start = self.body.rfind("\n\n", 0, a)
        here = [i for i, s in enumerate(self.sentences) if s.end <= a and s.start > para_start]
        if not here:
            prev = [s.paragraph for s in self.sentences if s.end <= a]
            here = [i for i, s in enumerate(self.sentences) if prev and s.paragraph == prev[-1]]
        for i in here:
            if not self.own[i] and self.block[i] is None:
                self.block[i] = files

    def _cover_closed_paragraphs(self) -> None:
        """A paragraph whose last sentence ends with its citations (a quoted passage, a list
        closed by « … [x] ») sources its uncited sentences with those citations — and only with
        them: « 18 postes. 20 postes [x]. » must find 18 in x."""
        last: dict[int, int] = {}
        for i, sent in enumerate(self.sentences):
            last[sent.paragraph] = i
        for para, i in last.items():
            sent, own = self.sentences[i], self.own[i]
            if not own or re.search(r"[^\W_]", self.body[max(c.end for c in own) : sent.end]):
                continue
            files = tuple(dict.fromkeys(c.filename for c in own if c.filename))
            for j, other in enumerate(self.sentences):
                if other.paragraph == para and not self.own[j] and self.block[j] is None:
                    self.block[j] = files

    def _cover_after_intros(self) -> None:
        """A sentence ending with « : » that cites sources the uncited sentences after it, in its
        paragraph and the next one."""
        for i, s in enumerate(self.sentences):
            files = tuple(dict.fromkeys(c.filename for c in self.own[i] if c.filename))
            if not files or not self.body[s.start : s.end].rstrip(" \t*_").endswith(":"):
                continue
            for j in range(i + 1, len(self.sentences)):
                if self.sentences[j].paragraph > s.paragraph + 1:
                    break
                if not self.own[j] and self.block[j] is None:
                    self.block[j] = files

    def segments(self, i: int) -> list[_Segment]:
        """Sentence ``i`` cut at its runs of citations: each part with the files of the run that
        closes it (the part after the last run: that run's); one uncited part with its block's
        files (``None`` when nothing sources it)."""
        s = self.sentences[i]
        own = sorted(self.own[i], key=lambda c: c.start)
        if not own:
            return [_Segment(s.start, s.end, self.block[i])]
        runs: list[list[_Cite]] = []
        for c in own:
            if runs and not re.search(r"[^\W_]", self.body[runs[-1][-1].end : c.start]):
                runs[-1].append(c)
            else:
                runs.append([c])
        out: list[_Segment] = []
        start = s.start
        for run in runs:
            files = tuple(dict.fromkeys(c.filename for c in run if c.filename))
            out.append(_Segment(start, min(max(run[0].start, start), s.end), files))
            start = max(run[-1].end, start)
        if start < s.end:
            out.append(_Segment(start, s.end, out[-1].files))
        return out


_CURRENT_CLAIM = re.compile(
    r"en\s+vigueur|actuel(?:le)?s?(?:lement)?|aujourd['’]hui|d[ée]sormais|[àa]\s+ce\s+jour|version\s+courante|"
    r"derni[èe]re\s+version|nouvelle\s+version|applicable",
    re.IGNORECASE,
)
_OLD_CLAIM = re.compile(
    r"remplac|ancien|ant[ée]rieur|pr[ée]c[ée]dent|archiv|obsol[èe]t|caduc|pr[ée]voyait|[ée]tait|plus\s+en\s+vigueur|"
    r"n['’]est\s+plus",
    re.IGNORECASE,
)
_BOUND_KINDS = frozenset({FactKind.AMOUNT, FactKind.NUMBER, FactKind.DURATION, FactKind.DATE, FactKind.TIME, FactKind.CODE})
"""Facts bound to the subject their claim speaks of (a name is itself what is spoken of)."""
_FIELD_CLASS = {FactKind.AMOUNT: "n", FactKind.NUMBER: "n", FactKind.DURATION: "t", FactKind.DATE: "d", FactKind.TIME: "h"}
"""Facts compared field by field, and which of them compete for a field."""


@dataclass(frozen=True)
class _Labelled:
    """A figure in an extract and the words that name its field: a table row's first cell, else
    the words between the previous figure (or the sentence's start) and it."""

    keys: frozenset[str]
    field_class: str
    label: frozenset[str]


_CLAUSE = re.compile(r"[;,(]|(?<![^\W_])(?:et|ou|mais|soit)(?![^\W_])", re.IGNORECASE)
_NOT_FIELD = frozenset(tokenize(" ".join(DOCUMENT_WORDS))) | FILLER_TERMS
"""Words that name no field: the kind of document (« contrat »), request wording."""


def _label_terms(text: str) -> frozenset[str]:
    """The field words of the text before a figure: its last clause (after « , », « ; », « et »…),
    as index terms, without numbers and words that name no field."""
    clause = _CLAUSE.split(text)[-1]
    return frozenset(t for t in tokenize(clause) if t not in _NOT_FIELD and not t.isdigit())


def _labelled(text: str) -> list[_Labelled]:
    """The figures of an extract's text with their field labels (see :class:`_Labelled`)."""
    out: list[_Labelled] = []
    for line in mask_numbering(nfc(text)).splitlines():
        if " | " in line:
            first, _, rest = line.partition(" | ")
            parts: list[tuple[str, str]] = [(first, rest)]
        else:
            parts = []
            for piece in re.split(r"(?<=[.!?;])\s+", line):
                parts.append(("", piece))
        for label, piece in parts:
            last = 0
            for f in scan_facts(piece, answer=False):
                cls = _FIELD_CLASS.get(f.kind)
                if cls is None:
                    continue  # a name is part of a field's words
                words = label or piece[last : f.start]
                last = f.end
                out.append(_Labelled(frozenset().union(*f.keys), cls, _label_terms(words)))
    return out


class _Docs:
    """The documents of a context by file name: their texts (with file name, path and folder),
    names (:class:`~ancre.query.subjects.DocSubject`), evidence and labelled figures, computed once."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.texts: dict[str, list[str]] = {}
        self.subjects: dict[str, DocSubject] = {}
        self.by_path: dict[str, list[str]] = {}
        for e in context.extracts:
            key = nfc(e.filename)
            if key not in self.texts:
                self.texts[key] = [e.filename, e.path, e.location]
                self.subjects[key] = e.doc
            self.texts[key].append(e.text)
            self.by_path.setdefault(e.path, []).append(e.text)
        self._evidence: dict[tuple[str, ...], Evidence] = {}
        self._labels: dict[str, list[_Labelled]] = {}
        self._entities: dict[frozenset[str], frozenset[str] | None] = {}

    def replaced_only(self, f: Fact, holders: Sequence[str]) -> bool:
        """Whether the documents ``holders`` (file names) that hold ``f`` hold it only in versions
        known to be replaced (not in the version in force of their group), by path: a file and its
        archived copy may bear one name."""
        in_force = replaced = False
        for name in holders:
            groups = [g for g in self.context.versions if g.current is not None and nfc(name) in map(nfc, g.documents)]
            if not groups:
                return False  # a document that is no version of another: its figure stands
            for g in groups:
                for i, (doc, path) in enumerate(zip(g.documents, g.paths or g.documents, strict=True)):
                    texts = self.by_path.get(path) if g.paths else self.texts.get(nfc(doc), [])[3:]
                    if nfc(doc) == nfc(name) and texts and Evidence.of(texts).supports(f):
                        in_force |= i == 0
                        replaced |= i > 0
        return replaced and not in_force

    def evidence(self, files: Iterable[str]) -> Evidence:
        """The evidence of the extracts of ``files`` (file names as cited)."""
        k = tuple(sorted({nfc(f) for f in files}))
        if k not in self._evidence:
            self._evidence[k] = Evidence.of([t for f in k for t in self.texts.get(f, [f])])
        return self._evidence[k]

    def labelled(self, filename: str) -> list[_Labelled]:
        """The labelled figures of ``filename``'s extracts."""
        key = nfc(filename)
        if key not in self._labels:
            self._labels[key] = [x for t in self.texts.get(key, [])[3:] for x in _labelled(t)]
        return self._labels[key]

    def of_entity(self, name: Name) -> frozenset[str] | None:
        """The documents whose subject is ``name`` (the best level reached, at least partly), ``frozenset()`` for a
        near miss of a subject no document has, ``None`` when ``name`` tells nothing apart (no
        match, or every document of several subjects)."""
        if name.key in self._entities:
            return self._entities[name.key]
        self._entities[name.key] = found = self._of_entity(name)
        return found

    def _of_entity(self, name: Name) -> frozenset[str] | None:
        files = list(self.subjects)
        docs = [self.subjects[f] for f in files]
        levels = dict(zip(files, doc_levels(name, docs, ["\n".join(self.texts[f][3:]) for f in files]), strict=True))
        best = max(levels.values(), default=Level.NONE)
        if best is Level.NONE:
            return frozenset() if lookalike(name, docs) else None
        if not discriminates(list(levels.values()), docs):
            return None
        return frozenset(f for f, lv in levels.items() if lv is best)


@dataclass(frozen=True)
class _Claim:
    """One fact as the answer states it: the files its segment cites (``None``: uncited), the
    files of the subject it speaks of (``None``: no subject named), its field words."""

    files: tuple[str, ...] | None
    subject: frozenset[str] | None
    field: frozenset[str]


class _Binder:
    """Binds each fact of a sentence to the subject it speaks of: the nearest name of a subject
    before it in its part of the sentence, else after it there, else before that part in the
    sentence or earlier in the paragraph; a table cell, to its column's heading; else the subject
    the question asks about."""

    def __init__(self, body: str, docs: _Docs, asked: tuple[Name, ...]) -> None:
        self.body, self.docs = body, docs
        known = list(docs.subjects.values())
        self._known = known
        found = [m for m in mentions(body, known) if docs.of_entity(m.name) is not None]
        self.mentions = found
        asked_files = [docs.of_entity(n) for n in asked]
        bound = [f for f in asked_files if f is not None]
        self.asked: frozenset[str] | None = frozenset().union(*bound) if bound else None

    def subject(self, pos: int, seg: _Segment, para_start: int) -> frozenset[str] | None:
        """The files of the subject the fact at ``pos`` (in the body) speaks of."""
        column = self._column(pos)
        if column is not None:
            return self.docs.of_entity(column)
        inside = [m for m in self.mentions if seg.start <= m.start and m.end <= seg.end]
        before = [m for m in inside if m.start < pos]
        after = [m for m in inside if m.start >= pos]
        earlier = [m for m in self.mentions if para_start <= m.start and m.end <= seg.start]
        for group, pick in ((before, -1), (after, 0), (earlier, -1)):
            if group:
                return self.docs.of_entity(group[pick].name)
        return self.asked

    def _column(self, pos: int) -> Name | None:
        """The name in the heading of the table column the fact at ``pos`` is in, if any."""
        lines = self.body.split("\n")
        offsets = list(itertools.accumulate((len(x) + 1 for x in lines), initial=0))
        row = max(i for i, o in enumerate(offsets[:-1]) if o <= pos)
        if not lines[row].lstrip().startswith("|"):
            return None
        top = row
        while top > 0 and lines[top - 1].lstrip().startswith("|"):
            top -= 1
        if top == row:
            return None
        col = self.body[offsets[row] : pos].count("|") - 1
        cells = lines[top].strip().strip("|").split("|")
        if not 0 <= col < len(cells):
            return None
        names = [m.name for m in mentions(cells[col], self._known) if self.docs.of_entity(m.name) is not None]
        return names[0] if names else None


def _field_words(body: str, fact: Fact, offset: int, previous_end: int, seg_start: int, names: frozenset[str]) -> frozenset[str]:
    """The words that name the field of a fact of the answer: from the previous fact, « ; » or
    the start of its part of the sentence to the fact (a table row: its first cell), without
    the subjects' names."""
    start = max(previous_end, seg_start)
    window = body[start : offset + fact.start]
    line_start = body.rfind("\n", 0, offset + fact.start) + 1
    row = body[line_start : offset + fact.start]
    if row.lstrip().startswith("|"):
        window = row.strip().strip("|").split("|")[0]
    return frozenset(t for t in _label_terms(window) if t not in names)


def _wrong_field(fact: Fact, field: frozenset[str], labelled: Sequence[_Labelled]) -> bool:
    """Whether the claim names another field than the fact's own in the extract: a figure of the
    same class whose whole label the claim's words hold, matching them better than every label the
    fact itself has there (« forfait mensuel : CHF 160 HT » where CHF 160 HT is the « heure hors
    forfait »)."""
    cls = _FIELD_CLASS.get(fact.kind)
    if cls is None or not field:
        return False
    keys = frozenset().union(*fact.keys)
    own = [x for x in labelled if x.keys & keys]
    if not own:
        return False
    mine = max(len(x.label & field) for x in own)
    return any(
        x.field_class == cls and not x.keys & keys and x.label and x.label <= field and len(x.label) > mine
        for x in labelled
    )


class _Control:
    """Control 5 over one answer (see :func:`unsupported_facts`)."""

    def __init__(self, answer: str, context: Context, question: str, scan: CitationScan, uncited: bool) -> None:
        self.text = scan.text
        self.body = _masked_body(scan)
        self.context, self.uncited = context, uncited
        self.docs = _Docs(context)
        self.names = known_names([*(e.text for e in context.extracts), question])
        self.sentences = _sentences(self.body)
        self.citations = _Citations(self.body, self.sentences, scan)
        files = list(self.docs.subjects)
        asked = context.entities or asked_entities(
            question, [self.docs.subjects[f] for f in files], ["\n".join(self.docs.texts[f][3:]) for f in files]
        )
        self.binder = _Binder(self.body, self.docs, asked)
        self.question_facts = Evidence.of([question]) if question else Evidence(frozenset())
        self.subject_words = frozenset(w for d in self.docs.subjects.values() for n in d.names for w in tokenize(n.written))
        self.found: list[UnsupportedFact] = []
        self.seen: set[str] = set()

    def run(self) -> tuple[UnsupportedFact, ...]:
        for i, sent in enumerate(self.sentences):
            self._sentence(i, sent)
        return tuple(self.found)

    def _sentence(self, i: int, sent: _Sentence) -> None:
        sentence_text = self.body[sent.start : sent.end]
        facts = scan_facts(sentence_text, self.names)
        if not facts:
            return
        negative = _negative(sentence_text)
        current = _CURRENT_CLAIM.search(sentence_text) is not None and not _OLD_CLAIM.search(sentence_text)
        segments = self.citations.segments(i)
        para_start = self.body.rfind("\n\n", 0, sent.start) + 1
        previous_end = 0
        cited = [x.files for x in segments if x.files is not None]
        whole = _Segment(sent.start, sent.end, tuple(dict.fromkeys(f for fs in cited for f in fs)) if cited else None)
        for f in facts:
            pos = sent.start + f.start
            seg = next((s for s in segments if s.start <= pos < s.end), segments[-1])
            if f.kind not in _BOUND_KINDS:
                seg = whole  # a name is checked against everything its sentence cites
            claim = _Claim(
                seg.files,
                self.binder.subject(pos, seg, para_start) if f.kind in _BOUND_KINDS else None,
                _field_words(self.body, f, sent.start, sent.start + previous_end, seg.start, self.subject_words),
            )
            if f.kind in _BOUND_KINDS:
                previous_end = f.end  # a name is part of a field's words (« le forfait de X est de … »)
            reason = self._check(f, claim, current)
            if reason is None or (negative and self.question_facts.supports(f)):
                continue
            self._report(f, reason, claim, sent)

    def _check(self, f: Fact, claim: _Claim, current: bool) -> FactReason | None:
        """Why ``f`` is unsupported as ``claim`` states it, ``None`` when it is supported."""
        if claim.files is None:
            return FactReason.UNCITED if self.uncited else None
        files = claim.files if claim.subject is None else tuple(x for x in claim.files if nfc(x) in claim.subject)
        if not self.docs.evidence(files).supports(f):
            if claim.subject is not None and self.docs.evidence(claim.files).supports(f):
                return FactReason.OTHER_SUBJECT
            return FactReason.ABSENT
        holders = [x for x in files if self.docs.evidence([x]).supports(f)]
        if f.kind in _FIELD_CLASS and all(_wrong_field(f, claim.field, self.docs.labelled(x)) for x in holders):
            return FactReason.OTHER_FIELD
        if current and holders and self.docs.replaced_only(f, holders):
            return FactReason.SUPERSEDED
        return None

    def _report(self, f: Fact, reason: FactReason, claim: _Claim, sent: _Sentence) -> None:
        files = claim.files or ()
        label = _label(f, self.docs.evidence(files))
        if label.casefold() in self.seen:
            return
        self.seen.add(label.casefold())
        sentence = " ".join(self.text[sent.start : sent.end].split())
        self.found.append(UnsupportedFact(label, f.kind, sentence, files, reason))


def _label(f: Fact, ev: Evidence) -> str:
    """How an unsupported fact is reported: its text, whitespace collapsed — for a name, only
    its runs of words ``ev`` lacks, joined by « … »."""
    label = " ".join(f.text.split())
    if f.kind is FactKind.NAME and f.words:
        missing = [i for i, ks in enumerate(f.keys) if not ks & ev.keys]
        runs: list[list[int]] = []
        for j in missing:
            if runs and runs[-1][-1] == j - 1:
                runs[-1].append(j)
            else:
                runs.append([j])
        label = " … ".join(" ".join(f.words[j] for j in r) for r in runs) or label
    return label


def unsupported_facts(
    answer: str,
    context: Context,
    question: str = "",
    scan: CitationScan | None = None,
    *,
    uncited: bool = True,
) -> tuple[UnsupportedFact, ...]:
    """Control 5 on a raw answer (see the module doc): the facts of ``answer`` that the extracts
    they must be found in do not support as the answer states them, in text order, each text
    once, each with why (:class:`FactReason`). ``question``: what was asked (the resolved
    question), whose subject binds the figures of a sentence naming none, and whose names a
    negative sentence may repeat. ``scan``: the answer's citations when already scanned
    (:func:`~ancre.query.citations.scan_citations`). ``uncited=False``: facts of sentences that
    nothing cites are not reported (control 4 already found the whole answer uncited). ``()`` for
    an empty context (control 1 decides) or an answer without facts. Pure; never raises."""
    if context.empty or not answer.strip():
        return ()
    scan = scan if scan is not None else scan_citations(answer, context.sources)
    return _Control(answer, context, question, scan, uncited).run()


__all__ = [
    "ACRONYMS_ALLOWED",
    "Evidence",
    "Fact",
    "FactKind",
    "FactReason",
    "UnsupportedFact",
    "known_names",
    "mask_numbering",
    "number_values",
    "scan_facts",
    "unsupported_facts",
    "words_value",
]
