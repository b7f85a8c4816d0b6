"""French-aware tokenizer shared by the BM25 index build (daemon) and BM25 queries (query core).

``tokenize(text)`` turns text into index terms:

1. **Folding**: Unicode NFKD, combining marks dropped, casefolded, ``œ``/``æ`` spelled out —
   ``"Étude"`` → ``"etude"``, ``"cœur"`` → ``"coeur"``. NFKD also turns no-break and narrow
   no-break spaces (French thousands separators) into plain spaces.
2. **Words**: runs of letters/digits. Apostrophes (``'`` ``’`` …) always split, so the elided
   articles and pronouns (``l'``, ``d'``, ``qu'``, ``j'``…) become tokens of their own and are
   dropped as stop words: ``"l'Étude"`` → ``["etude"]``.
3. **Codes and file names**: letters/digits joined by one to three of ``- _ . / \\ : @`` with no
   space (``WD-EXCL-042``, ``21_Contrat_Maintenance_Baumont_Industries.docx``, ``qwen2.5:14b``,
   ``C:\\Axonix\\Agent``) are emitted whole (folded, never stemmed nor stop-filtered), then the
   name without its extension when the last ``.``-part looks like one (1–5 characters with a
   letter), then each part as a word: ``"WD-EXCL-042"`` → ``["wd-excl-042", "wd", "excl", "042"]``.
   A hyphenated French compound (only letters, only ``-``) is emitted whole with each part
   stemmed, so its inflections match: ``"sous-traitants"`` → ``["sous-traitant", "traitant"]``.
4. **Numbers** are kept as written (``"042"`` stays ``"042"``); a number written in thousands groups
   (``"4 200"``, ``"4'200"``, ``"44 800"``: groups of exactly three digits) also yields the joined
   form ``"4200"``, so that either spelling in a question finds it.
5. **Stop words**: a French list (articles, pronouns, prepositions, conjunctions, forms of *être* and
   *avoir*, elided forms, interrogatives) compared after folding; dropped from words and parts only.
6. **Stemming**: French Snowball (PyStemmer) on a *canonical accented form* of the folded word,
   then the stem is folded again. Snowball's French rules need some accents (``ée``/``ées`` of past
   participles, ``ère``, ``ité``, ``ié``), so stemming the folded word split inflections
   (``estimée`` → ``estime`` but ``estimé`` → ``estim``); stemming the text as written conflates
   them but then a question typed without accents (``securite``) stems apart from the accented
   text (``sécurité``). So the one order is: fold (step 1), put back the accent of the suffixes
   Snowball reads (:data:`_REACCENT`: ``-ee`` → ``-ée``, ``-ere`` → ``-ère``, ``-ie`` → ``-ié``,
   ``-ite`` → ``-ité``, plural forms too), stem, fold the stem, and spell a final ``y`` as ``i``
   (Snowball stems ``payé`` to ``pay`` but ``payée`` to ``pai``: both become ``pai``). A plural
   (a final ``s`` that Snowball's step 4 reads as one: not after ``a i o u s``) takes its
   singular's stem when that one is shorter and a prefix of its own: Snowball removes a verb
   ending the ``s`` hides (``forfait`` → ``forf`` but ``forfaits`` → ``forfait``; both become
   ``forf``; on a 325 000-word French list this joins 324 singular/plural pairs and parts none). As every
   step works on the folded word, accented, unaccented and capitalised forms give the same term
   by construction; the property test ``tests/unit/test_tokenize_french.py`` checks that each inflection of a French word
   list (with elision, apostrophe, ligature and hyphen variants) gives one term. Kept on (:data:`STEM`):
   questions worded with other inflections than the text (``résilier``/``résiliation``,
   ``machine virtuelle``/``machines virtuelles``, ``estimée``/``estimé``) share their terms with
   it only when stemmed (the retrieval evaluation in docs/BENCHMARKS.md has such questions).
7. **Hyphens and soft hyphens**: U+2010/U+2011/U+2012/U+2212 (Word's non-breaking hyphen, PDF
   hyphens) are read as ``-``; a soft hyphen (U+00AD) is dropped, so ``sécu<U+00AD>rité`` is ``sécurité``.

Deterministic: the same text always gives the same list, in text order. Fast path: the terms of
each word or code are cached (``functools.lru_cache``), so the Python cost per word is one cache
hit. Thread-safe.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache
from itertools import chain

import Stemmer

STEM: bool = True
"""Whether :func:`tokenize` applies the French Snowball stemmer (see the module docstring)."""

TOKENIZER_VERSION = f"fr-3{'-stem' if STEM else ''}"
"""Recorded with each saved BM25 index: an index built by another tokenizer is not loaded."""

_STOP_WORDS_RAW = """
a à ai aie aient aies ait as au aura aurai auraient aurais aurait auras aurez auriez aurions aurons
auront aux avaient avais avait avec avez aviez avions avons ayant ayez ayons
c ça ce ceci cela celle celles celui ces cet cette ceux ci d dans de des du
elle elles en es est et été étée étées étés être eu eue eues eurent eus eusse eussent eut eux
êtes étaient étais était étant étiez étions
fut furent fus fusse fussent
il ils j je jusqu l la le les leur leurs lorsqu lui m ma mais me même mêmes mes moi mon
n ne ni nos notre nous on ont ou où par pas pour puisqu qu quand que quel quelle quelles quels
qui quoi quoiqu s sa se sera serai seraient serais serait seras serez seriez serions serons
seront ses si soient sois soit sommes son sont soyez soyons suis sur t ta te tes toi ton tu
un une vos votre vous y
afin ainsi alors aussi car chez comme comment combien dont donc lors or selon sous tandis vers
"""

_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
_LIGATURES = str.maketrans({"œ": "oe", "æ": "ae"})
_SEPARATORS = str.maketrans(
    {**dict.fromkeys("'’‘ʼ`´«»“”„‹›—–•", " "), **dict.fromkeys("‐‑‒−", "-"), "\u00ad": None}  # noqa: RUF001 - the hyphens to fold
)
"""Apostrophes split words; typographic punctuation becomes a space too, so that most folded French
text is ASCII and takes the faster ASCII pattern."""
_WORD = r"[^\W_]+"
_JOIN = r"[-_./\\:@]{1,3}"
_TERM = re.compile(rf"\d{{1,3}}(?: \d{{3}})+(?![^\W_])|{_WORD}(?:{_JOIN}{_WORD})*")
"""A number in thousands groups (apostrophes are spaces by then), or a word or compound term."""
_TERM_ASCII = re.compile(r"\d{1,3}(?: \d{3})+(?![a-z0-9])|[a-z0-9]+(?:[-_./\\:@]{1,3}[a-z0-9]+)*")
"""``_TERM`` for folded ASCII text (no upper case left), about a third faster."""
_SPLIT = re.compile(_JOIN)
_EXTENSION = re.compile(r"[a-z0-9]{0,4}[a-z][a-z0-9]{0,4}")

_stem_lock = threading.Lock()
_stemmer = Stemmer.Stemmer("french")


def fold(text: str) -> str:
    """Accent- and case-fold ``text``: NFKD, combining marks dropped, casefold, ``œ``→``oe``,
    ``æ``→``ae``. ``"Étude Œuvre"`` → ``"etude oeuvre"``. Length may change."""
    if text.isascii():
        return text.lower()
    text = _COMBINING.sub("", unicodedata.normalize("NFKD", text))
    return text.casefold().translate(_LIGATURES)


STOP_WORDS: frozenset[str] = frozenset(fold(w) for w in _STOP_WORDS_RAW.split())
"""French stop words, already folded (``"où"`` is stored as ``"ou"``)."""


@lru_cache(maxsize=1 << 16)
def _word(word: str) -> str | None:
    """Index term of one folded word (no joiner inside), or ``None`` for a stop word."""
    if word in STOP_WORDS:
        return None
    if not STEM or word.isdigit():
        return word
    return _stem(word)


_REACCENT = (
    ("ees", "ées"), ("ee", "ée"), ("eres", "ères"), ("ere", "ère"),
    ("ies", "iés"), ("ie", "ié"), ("ites", "ités"), ("ite", "ité"),
)
"""Suffixes of a folded word given back the accent the French Snowball rules read (first match)."""


def _stem(folded: str) -> str:
    """Stem of one folded word: :func:`_snowball`, and a plural takes its singular's stem (module
    doc, step 6). A function of the folded word only."""
    stem = _snowball(folded)
    if len(folded) > 3 and folded[-1] == "s" and folded[-2] not in _NOT_PLURAL_BEFORE_S:
        singular = _snowball(folded[:-1])
        if len(singular) < len(stem) and stem.startswith(singular):
            return singular
    return stem


_NOT_PLURAL_BEFORE_S = frozenset("aious")
"""Letters before a final ``s`` that Snowball's step 4 does not read as a plural mark (``cas``,
``tapis``, ``dos``, ``refus``, ``stress``; its ``è`` never occurs in a folded word)."""


def _snowball(folded: str) -> str:
    """Re-accent the suffix of a folded word (:data:`_REACCENT`), French Snowball, fold, final
    ``y`` → ``i``."""
    word = folded
    for plain, accented in _REACCENT:
        if word.endswith(plain) and len(word) >= len(plain) + 2:
            word = word[: -len(plain)] + accented
            break
    with _stem_lock:
        stem = fold(_stemmer.stemWord(word))
    return stem[:-1] + "i" if stem.endswith("y") else stem


@lru_cache(maxsize=1 << 18)
def _terms(term: str) -> tuple[str, ...]:
    """Index terms of one ``_TERM`` match."""
    if term.isalnum():
        w = _word(term)
        return () if w is None else (w,)
    if " " in term:  # "4 200": the groups as written, then joined
        groups = term.split(" ")
        return (*groups, "".join(groups))
    parts = term.split("-")
    if all(p.isalpha() for p in parts):  # a French compound: whole with its parts stemmed
        out = ["-".join(p if p in STOP_WORDS else _stem(p) for p in parts)] if STEM else [term]
    else:
        out = [term]  # a code or file name: whole, without extension, then its parts
    head, dot, ext = term.rpartition(".")
    if dot and _EXTENSION.fullmatch(ext) and _SPLIT.search(head):
        out.append(head)
    for part in _SPLIT.split(term):
        w = _word(part)
        if w is not None:
            out.append(w)
    return tuple(out)


def tokenize(text: str) -> list[str]:
    """Index terms of ``text`` (see the module docstring for the rules).

    ``"Que fait la règle WD-EXCL-042 ?"`` → ``["fait", "regl", "wd-excl-042", "wd", "excl", "042"]``.
    Returns ``[]`` for empty text or text made only of stop words and punctuation. Never raises.
    """
    folded = fold(text).translate(_SEPARATORS)
    terms = (_TERM_ASCII if folded.isascii() else _TERM).findall(folded)
    return list(chain.from_iterable(map(_terms, terms)))


__all__ = ["STEM", "STOP_WORDS", "TOKENIZER_VERSION", "fold", "tokenize"]
