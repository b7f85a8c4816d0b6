"""Follow-up questions (docs/ARCHITECTURE.md "Data flow of a question" step 1): a question that only
makes sense with the conversation is turned into a standalone question before anything is searched.

« Fais pareil pour l'étude Rochat », « Et quelle est sa durée ? », « Compare les deux contrats »
mean nothing alone. :class:`ConversationResolver` rewrites such a question from the **earlier user
questions only** — never from the earlier answers, whose text must not become evidence: the
model that answers sees the standalone question and the extracts, nothing else. Rights are
untouched: retrieval runs for the asking user as always.

How (:meth:`ConversationResolver.resolve`):

1. **Open WebUI's regenerate variants.** Its « Add Details » / « More Concise » menu (Open WebUI
   0.12, ``RegenerateMenu.svelte``) sends the conversation up to the answer being regenerated,
   then a user message that is the menu label in the user's language (``regeneration_prompt``,
   appended by ``utils/middleware.py``): « Add Details », « More Concise », « Ajouter des
   détails », « Plus concis », « Details hinzufügen », « Kürzer », « Aggiungi dettagli », « Più
   conciso » (:data:`REGENERATE_PROMPTS`). Such a message is an instruction on the previous
   answer: the previous question is answered again, from the documents, with the instruction
   (:class:`Instruction`).
2. **Is it a follow-up?** (:func:`looks_like_follow_up`): it opens with « et », asks for « the
   same » for another subject, compares (« compare », « les deux », « la différence »), or it names
   no subject (no proper name, code or number) and refers to one (« sa », « son », « ses »,
   « leur », « celui-ci », « ce contrat », « il »…) or is short. A standalone question is used as
   asked.
3. **With a model configured**, a short condense prompt (:data:`CONDENSE_PROMPT`, temperature 0)
   gets the earlier user questions and the new one and returns one standalone question. Its output
   is used only when it is one line, every name and word of it occurs in the user's questions,
   case and accents aside (request wording apart), and it keeps every word the new question
   brings: a model cannot bring a subject in, nor swap a client that does not exist (« Fiduciaire
   Dubuy ») for its real lookalike (« Fiduciaire Dubuis »), even one asked about earlier.
   Otherwise, and without a model, the rule below applies.
4. **The deterministic rule** works on the previous question, itself resolved first:
   « fais pareil / et pour X / même chose (mais) pour X / pareil pour X / et X ? » puts X in place
   of the previous question's named subject — one of the same kind as X (« garage », « étude »),
   never a counterparty (« le contrat signé avec Axonix SA ») when another is named, else the last
   (« … avec Baumont Industries ? » → « … avec l'étude Rochat ? »); « et quelle est sa durée ? »
   takes the previous question's subject phrase (« du contrat de maintenance d'Axonix SA avec
   l'étude Rochat ») and puts it after the new question's noun, a possessive becoming an article;
   « compare les deux » names the last two distinct subjects of the conversation.
5. A follow-up that neither can resolve (no earlier question, no subject in it) is answered **as
   asked** (:attr:`ResolutionMethod.UNRESOLVED`).

The resolved question is what retrieval, the prompt and the controls use; the answer shows it
(« Question traitée : … ») and the audit records both forms.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ancre.index.tokenize import STOP_WORDS, fold
from ancre.models import nfc
from ancre.query.llm import ChatClient, LlmError
from ancre.query.prompt import ChatMessage
from ancre.query.relevance import question_terms
from ancre.query.wording import any_word

log = logging.getLogger("ancre.query")


class ResolutionMethod(StrEnum):
    """How the question that was answered came from the one asked."""

    STANDALONE = "autonome"
    """Asked alone, or not a follow-up: used as asked."""
    RULE = "regle"
    """Rewritten by the deterministic rule."""
    MODEL = "modele"
    """Rewritten by the condense prompt."""
    REGENERATION = "regeneration"
    """An instruction on the previous answer (Open WebUI's « More Concise » / « Add Details »)."""
    UNRESOLVED = "non_resolue"
    """Looked like a follow-up but could not be resolved: answered as asked."""


class Instruction(StrEnum):
    """What a regenerate variant asks of the previous answer."""

    CONCISE = "plus_concis"
    DETAILS = "plus_de_details"


REGENERATE_PROMPTS: Mapping[str, Instruction] = {
    "add details": Instruction.DETAILS,
    "ajouter des détails": Instruction.DETAILS,
    "details hinzufügen": Instruction.DETAILS,
    "aggiungi dettagli": Instruction.DETAILS,
    "more concise": Instruction.CONCISE,
    "plus concis": Instruction.CONCISE,
    "kürzer": Instruction.CONCISE,
    "più conciso": Instruction.CONCISE,
}
"""Open WebUI 0.12's regenerate labels (``$i18n.t('Add Details')`` / ``$i18n.t('More Concise')``,
sent as the last user message) in English, French, German and Italian, casefolded."""

INSTRUCTION_TEXT: Mapping[Instruction, str] = {
    Instruction.CONCISE: "Réponds de façon plus concise : l'essentiel en une ou deux phrases, toujours cité.",
    Instruction.DETAILS: (
        "Donne plus de détails, toujours uniquement à partir des extraits, chaque fait cité."
    ),
}
"""What the answering model is told for each instruction."""

INSTRUCTION_LABEL: Mapping[Instruction, str] = {
    Instruction.CONCISE: "réponse plus concise",
    Instruction.DETAILS: "réponse plus détaillée",
}

CONDENSE_PROMPT = """\
Tu reformules la dernière question d'une conversation en une question autonome, compréhensible \
sans la conversation, en français.

Règles :
1. Utilise uniquement les questions précédentes de l'utilisateur pour savoir de quoi il parle \
(le client, le document, le sujet).
2. N'ajoute aucun nom, chiffre, date ni sujet qui ne figure pas dans ces questions.
3. Si la dernière question est déjà autonome, recopie-la telle quelle.
4. Réponds uniquement par la question reformulée, sur une seule ligne, sans guillemets ni \
explication.
"""

MAX_HISTORY = 8
"""Earlier user questions given to the condense prompt (the most recent ones)."""


@dataclass(frozen=True)
class Resolution:
    """The question as asked (``asked``) and the standalone ``question`` that was answered, how it
    was obtained (``method``) and, for a regenerate variant, the ``instruction``."""

    asked: str
    question: str
    method: ResolutionMethod = ResolutionMethod.STANDALONE
    instruction: Instruction | None = None

    @property
    def rewritten(self) -> bool:
        """Whether what was answered is not the question as asked (« Question traitée » is shown)."""
        return self.method in (ResolutionMethod.RULE, ResolutionMethod.MODEL, ResolutionMethod.REGENERATION)

    @property
    def standalone(self) -> bool:
        """Whether the question was asked alone (the audit then records no resolution)."""
        return self.method is ResolutionMethod.STANDALONE

    def shown(self) -> str:
        """The line shown with the answer, ``""`` when nothing was rewritten:
        « Question traitée : Quelle est la durée du contrat … ? »"""
        if not self.rewritten:
            return ""
        label = f" ({INSTRUCTION_LABEL[self.instruction]})" if self.instruction is not None else ""
        return f"Question traitée : {self.question}{label}"


# ----------------------------------------------------------------------------- reading questions


_SAME_FOR = re.compile(
    r"^\s*(?:et\s+)?(?:(?:fais|faites|fait|refais|refaites|donne|donnez|idem|pareil|m[eê]me\s+chose|"
    r"la\s+m[eê]me\s+chose|de\s+m[eê]me|m[eê]me\s+question)(?:\s+(?:pareil|la\s+m[eê]me\s+chose|de\s+m[eê]me|"
    r"idem|aussi))?[\s,]+(?:mais[\s,]+)?)?(?:pour|avec|concernant|chez|sur)\s+(?P<subject>[^?!.]+?)\s*[?!.]*\s*$",
    re.IGNORECASE,
)
"""« Fais pareil pour X », « Et pour X ? », « Même chose avec X », « Même chose mais pour X »,
« Pareil pour X »."""
_QUALIFIER_WORDS = (
    r"(?:[ée]tude|garage|fiduciaire|cabinet|soci[ée]t[ée]|entreprise|groupe|bureau|atelier|maison|agence|"
    r"commune|association|fondation|clinique|pharmacie|boulangerie|menuiserie|carrosserie|h[ôo]tel|restaurant|"
    r"client|cliente|ma[îi]tre|madame|monsieur)"
)
_AND_NAME = re.compile(
    r"^\s*(?i:et|idem|pareil|m[eê]me\s+chose)[\s,]+(?:(?i:mais|alors)[\s,]+)?"
    rf"(?P<subject>(?:l['’]|la\s+|le\s+|les\s+)?(?:(?i:{_QUALIFIER_WORDS})\s+[^\W\d_][^?!.]*?|[A-ZÀ-Ý][^?!.]*?))"
    r"\s*[?!.]*\s*$"
)
"""« Et Rochat ? », « Et l'étude Rochat ? », « Et le Garage Dubuis ? », « Et le garage dubuis ? »."""
_ASKS_AGAIN = re.compile(
    r"^\s*(?:et\s+)?(?:fais|faites|fait|refais|refaites|donne|donnez|idem|pareil|m[eê]me|la\s+m[eê]me|de\s+m[eê]me"
    r"|pour|avec|concernant|chez|sur)",
    re.IGNORECASE,
)
"""A follow-up that asks the same again (« fais pareil », « même chose », « pour X »)."""
_COMPARE = re.compile(
    r"compar|diff[ée]ren|les\s+deux|l['’]un\s+et\s+l['’]autre|lequel|laquelle|lesquels|entre\s+eux|entre\s+les",
    re.IGNORECASE,
)
_DEMONSTRATIVE = any_word(
    "celui-ci", "celle-ci", "ceux-ci", "celles-ci", "celui-l[àa]", "celle-l[àa]", r"ce\s+contrat", r"cette\s+offre",
    r"ce\s+document", r"ce\s+client", r"cette\s+r[èe]gle", r"cette\s+version", r"ces\s+contrats", r"ces\s+documents",
)
"""A reference to something named earlier, whatever the question's length."""
_PRONOUN = re.compile(
    r"(?<![^\W_])(?:sa|son|ses|leur|leurs)\s|^(?:il|elle|ils|elles)\s|-(?:t-)?(?:il|elle|ils|elles)(?![^\W_])",
    re.IGNORECASE,
)
"""A possessive or a subject pronoun: a reference in a short question only (« Et quelle est sa
durée ? », « Est-il reconductible ? »)."""
_IMPERSONAL = re.compile(r"(?:faut|agit|y\s+a|existe|suffit|convient|vaut|reste)-(?:t-)?il(?![^\W_])", re.IGNORECASE)
_DEFINITE_TOPIC = re.compile(
    r"(?<![^\W_])(?P<prep>du|de\s+la|de\s+l['’]|le|la|l['’])\s*(?P<noun>contrat|offre|document|client|politique|grille|migration|devis)(?![^\W_])",
    re.IGNORECASE,
)
"""A definite topical noun with no name (« du contrat », « l'offre »): the one spoken of."""
SHORT_FOLLOW_UP_WORDS = 7
"""A question naming no subject is read as a follow-up when it refers to one (possessive,
pronoun) in at most this many words, or is at most 4 words long."""
_OPENS_WITH_AND = re.compile(r"^\s*(?:et|mais|alors|ensuite|puis|aussi)(?![^\W_])", re.IGNORECASE)
_POSSESSIVE = {"sa": "la", "son": "le", "ses": "les", "leur": "le", "leurs": "les"}
_TOPICAL = [
    "contrat", "contrats", "offre", "offres", "réponse", "appel", "politique", "grille", "document", "documents",
    "règle", "règles", "migration", "devis", "facture", "projet", "étude", "société", "client", "clients", "accord",
    "convention", "avenant", "rapport", "procédure", "note", "fiche", "serveur", "pipeline",
]
_TOPICAL_FOLDED = frozenset(fold(w) for w in _TOPICAL)
_PREPOSITION = re.compile(
    r"(?<![^\W_])(?:du|de\s+la|de\s+l['’]|des|d['’]|de|pour|avec|chez|concernant|sur)(?:\s+|(?<=['’]))", re.IGNORECASE
)
_QUALIFIERS = frozenset(
    fold(w) for w in ["étude", "société", "cabinet", "fiduciaire", "entreprise", "groupe", "client", "bureau"]
)
_NAME_RUN = re.compile(r"[A-ZÀ-Ý][\w'’.-]*(?:(?:\s+|\s*&\s*)(?:[A-ZÀ-Ý&][\w'’.-]*|SA|AG|SARL|Sàrl))*")


def _strip_end(q: str) -> str:
    return re.sub(r"[\s?!.…]+$", "", q.strip())


def _capitalize(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def _named(question: str) -> tuple[str, ...]:
    return question_terms(question).distinctive


def _opens_sentence(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t\"'«“(")
    return not before or before[-1] in ".!?:\n"


def entity_phrases(question: str) -> list[tuple[int, int]]:
    """Spans of the named subjects of ``question``, in order: a run of capitalised words not
    opening the question (« Baumont Industries », « Axonix SA »), with a qualifier and article
    before it when present (« l'étude Rochat », « la société Dupont Logistique SA »)."""
    out: list[tuple[int, int]] = []
    for m in _NAME_RUN.finditer(question):
        if _opens_sentence(question, m.start()):
            continue
        start = m.start()
        before = question[:start]
        q = re.search(r"(?:(?<![^\W_])(?:l['’]|la\s+|le\s+|les\s+))?([^\W\d_]+)\s+$", before)
        if q and fold(q.group(1)) in _QUALIFIERS:
            start = q.start()
        elif re.search(r"(?:l['’])$", before):
            start -= 2
        out.append((start, m.end()))
    return out


def subject_phrase(question: str) -> str | None:
    """The part of ``question`` that says what it is about, from the preposition that introduces
    it (« Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ? » → « du contrat
    de maintenance de l'étude Rochat »); ``None`` when it has none."""
    text = _strip_end(question)
    entities = entity_phrases(text)
    for m in _PREPOSITION.finditer(text):
        rest = text[m.end() :]
        first = re.match(r"(?:l['’]|la\s+|le\s+|les\s+|un\s+|une\s+)?([^\W\d_]+)", rest)
        if first and fold(first.group(1)) in _TOPICAL_FOLDED:
            return text[m.start() :].strip()
        if any(s <= m.end() + 3 and s >= m.end() - 3 for s, _ in entities):
            return text[m.start() :].strip()
    if entities:
        s, _ = entities[-1]
        return text[s:].strip()
    return None


def looks_like_follow_up(question: str) -> bool:
    """Whether ``question`` seems to need the conversation (see the module doc, step 2)."""
    q = question.strip()
    if not q:
        return False
    if _SAME_FOR.match(q) and _ASKS_AGAIN.match(q):
        return True
    if _AND_NAME.match(q):
        return True
    named = _named(q)
    if _COMPARE.search(q) and len(entity_phrases(q)) < 2:
        return True
    if _OPENS_WITH_AND.match(q) and (len(entity_phrases(q)) == 0 or len(re.findall(r"[^\W_]+", q)) <= SHORT_FOLLOW_UP_WORDS):
        return True  # « Et la consommation Azure par mois ? »: a name, but not the subject
    if named:
        return False
    if _DEMONSTRATIVE.search(q):
        return True
    words_n = len(re.findall(r"[^\W_]+", q))
    if _DEFINITE_TOPIC.search(q) and words_n <= SHORT_FOLLOW_UP_WORDS + 1:
        return True  # « Quelle est la durée du contrat ? »: the contract spoken of
    words = re.findall(r"[^\W_]+", q)
    refers = _PRONOUN.search(_IMPERSONAL.sub(" ", q)) is not None
    return (refers and len(words) <= SHORT_FOLLOW_UP_WORDS) or len(words) <= 4


# ----------------------------------------------------------------------------- the rule


_COUNTERPARTY = re.compile(
    r"(?:sign[ée]e?s?|conclue?s?|pass[ée]e?s?|[ée]tabli[es]*)\s+(?:avec|par)\s+$|(?:selon|par|chez)\s+$",
    re.IGNORECASE,
)
"""Words before a name that make it the other party or the source (« le contrat signé avec Axonix
SA », « selon Axonix SA »), not the subject asked about."""


def _qualifier(phrase: str) -> str | None:
    m = re.search(rf"(?i:{_QUALIFIER_WORDS})", phrase)
    return fold(m.group(0)) if m else None


def _entity_to_replace(previous: str, spans: list[tuple[int, int]], subject: str) -> tuple[int, int]:
    """Which named subject of ``previous`` a follow-up about ``subject`` replaces: one of the same
    kind (« garage » for « le Garage Dubuis »), else one with a kind when ``subject`` has one,
    never a counterparty (« signé avec Axonix SA ») when another is named, else the last."""
    kind = _qualifier(subject)

    def score(i: int) -> tuple[int, int, int, int]:
        s, e = spans[i]
        mine = _qualifier(previous[s:e])
        counterparty = _COUNTERPARTY.search(previous[:s]) is not None
        return (int(kind is not None and mine == kind), int(kind is not None and mine is not None), -int(counterparty), i)

    return spans[max(range(len(spans)), key=score)]


def _replace_entity(previous: str, subject: str) -> str | None:
    """``previous`` with its named subject (:func:`_entity_to_replace`) replaced by ``subject``."""
    spans = entity_phrases(previous)
    if not spans:
        return None
    s, e = _entity_to_replace(previous, spans, subject)
    head, subject = _contracted(previous[:s], subject)
    return head + subject + previous[e:]


def _contracted(head: str, subject: str) -> tuple[str, str]:
    """``head`` (the question up to the replaced name) and ``subject`` with their articles joined
    as French writes them: no article twice (« de la » + « la Fiduciaire X »), « du » + « le
    Garage X » → « du Garage X », « du » + « la Fiduciaire X » → « de la Fiduciaire X », « d' » before a
    consonant → « de », « de le » → « du »."""
    article = re.match(r"(?:l['’]|la\s+|le\s+|les\s+)", subject, re.IGNORECASE)
    if article:
        head = re.sub(r"(?<![^\W_])(?:l['’]|la\s+|le\s+|les\s+)$", "", head, flags=re.IGNORECASE)
        contracted = re.search(r"(?<![^\W_])(du|des|au|aux)\s+$", head, re.IGNORECASE)
        if contracted:
            word = article.group(0).strip().lower()
            if (contracted.group(1).lower() in ("du", "au") and word == "le") or (
                    contracted.group(1).lower() in ("des", "aux") and word == "les"):
                subject = subject[article.end() :]
            else:
                head = head[: contracted.start()] + ("de " if contracted.group(1).lower() in ("du", "des") else "à ")
    if re.search(r"(?<![^\W_])d['’]$", head) and not re.match(r"[aeiouyhàâéèêëîïôûAEIOUYHÉ]", subject):
        head = head[:-2] + "de "
    if re.search(r"(?<![^\W_])de\s+$", head) and re.match(r"(?:le|les)\s", subject, re.IGNORECASE):
        # « de le client » → « du client »
        art = subject.split(maxsplit=1)[0].lower()
        head = head[: re.search(r"de\s+$", head).start()] + ("du " if art == "le" else "des ")  # type: ignore[union-attr]  # matched two lines above
        subject = subject.split(None, 1)[1]
    return head, subject


def _attach(question: str, subject: str) -> str:
    """``question`` (which names no subject) about ``subject`` (a phrase starting with its
    preposition): « Et quelle est sa durée ? » + « du contrat X » → « Quelle est la durée du
    contrat X ? »."""
    q = _strip_end(question)
    q = re.sub(r"^\s*(?:et|mais|alors|ensuite|puis|aussi)[\s,]+", "", q, flags=re.IGNORECASE)
    topic = _DEFINITE_TOPIC.search(q)
    sub = re.match(
        r"(?:du|de\s+la|de\s+l['’]|des|d['’]|de|pour|avec|chez|concernant|sur)\s*(?:l['’]|la\s+|le\s+|les\s+)?([^\W\d_]+)",
        subject, re.IGNORECASE,
    )
    if topic and sub and fold(sub.group(1)).rstrip("s") == fold(topic.group("noun")):
        # « la durée du contrat » + « du contrat de maintenance de X » → « la durée du contrat de maintenance de X »
        lead = topic.group("prep").lower()
        if lead.startswith(("du", "de")):
            phrase = subject
        else:
            prep = topic.group("prep") + (" " if not topic.group("prep").endswith(("'", "’")) else "")
            phrase = re.sub(r"^(?:du|de\s+la|de\s+l['’]|de)\s*", prep, subject, count=1, flags=re.IGNORECASE)
        return _capitalize(q[: topic.start()] + phrase + q[topic.end() :]) + " ?"

    def article(m: re.Match[str]) -> str:
        word = m.group(1)
        art = _POSSESSIVE[word.lower()]
        nxt = m.group(2)
        if (art == "le" and re.match(r"[aeiouyhàâéèêëîïôûAEIOUYH]", nxt)) or (
            art == "la" and re.match(r"[aeiouyàâéèêëîïôûAEIOUY]", nxt)
        ):
            return "l'" + nxt
        return f"{art} {nxt}"

    replaced = re.sub(r"(?<![^\W_])(sa|son|ses|leur|leurs)\s+([^\W\d_][\w'’-]*)", article, q, count=1, flags=re.IGNORECASE)
    if re.search(r"-(?:t-)?(?:il|elle|ils|elles)(?![^\W_])|^(?:il|elle|ils|elles)\s", replaced, re.IGNORECASE) and replaced == q:
        return f"{_capitalize(replaced)} ? (à propos {_as_de(subject)})"
    return f"{_capitalize(replaced)} {subject} ?"


def _as_de(phrase: str) -> str:
    """A subject phrase introduced by « de » (« pour l'étude Rochat » → « de l'étude Rochat »,
    « avec Baumont » → « de Baumont », « du contrat » unchanged)."""
    m = re.match(r"(?:pour|avec|chez|concernant|sur)\s+(.*)$", phrase, re.IGNORECASE | re.DOTALL)
    if not m:
        return phrase
    rest = m.group(1)
    if re.match(r"le\s", rest, re.IGNORECASE):
        return "du " + rest[3:]
    if re.match(r"les\s", rest, re.IGNORECASE):
        return "des " + rest[4:]
    if re.match(r"[aeiouyhàâéèêëîïôûAEIOUYHÉ]", rest) and not rest.lower().startswith(("l'", "l’")):
        return "d'" + rest
    return "de " + rest


def _compare(question: str, subjects: list[str]) -> str | None:
    if len(subjects) < 2:
        return None
    a, b = subjects[-2], subjects[-1]
    q = _strip_end(question)
    return f"{_capitalize(q)} : {a} et {b}"


def _last_entity(question: str) -> str | None:
    spans = entity_phrases(_strip_end(question))
    return _strip_end(question)[spans[-1][0] : spans[-1][1]] if spans else None


def rule_resolve(question: str, history: Sequence[str]) -> str | None:
    """The deterministic rewrite of ``question`` from the resolved earlier ``history`` (oldest
    first), or ``None`` when it cannot be resolved (module doc, step 4). Pure."""
    if not history:
        return None
    previous = history[-1]
    q = question.strip()
    m = _SAME_FOR.match(q) or _AND_NAME.match(q)
    if m and (_SAME_FOR.match(q) is None or _ASKS_AGAIN.match(q)):
        subject = _strip_end(m.group("subject"))
        out = _replace_entity(previous, subject)
        if out is None:
            phrase = subject_phrase(previous)
            out = f"{_strip_end(previous)} — pour {subject} ?" if phrase is None else None
            if out is None:
                out = f"{_strip_end(previous)} (pour {subject}) ?"
        return out
    if _COMPARE.search(q) and len(entity_phrases(q)) < 2:
        subjects: list[str] = []
        for h in history:
            e = _last_entity(h)
            if e and fold(e) not in {fold(s) for s in subjects}:
                subjects.append(e)
        return _compare(q, subjects)
    phrase = subject_phrase(previous)
    if phrase is None:
        return None
    return _attach(q, phrase)


# ----------------------------------------------------------------------------- the resolver


def regenerate_instruction(text: str) -> Instruction | None:
    """The :class:`Instruction` of an Open WebUI regenerate label, or ``None``."""
    return REGENERATE_PROMPTS.get(" ".join(nfc(text).split()).casefold().rstrip(" .!"))


def _words(text: str) -> set[str]:
    """The folded words of ``text`` that say something: not stop words, not request wording."""
    return {w for w in re.findall(r"[^\W_]+", fold(text)) if w not in STOP_WORDS and w not in _WORDING_WORDS}


_WORDING_RAW = (
    "document documents concerne concernant prévu prévue mentionné indiqué précisé information informations "
    "question fais fait faire pareil idem même chose donne dis indique quels quelles quel quelle"
)
_WORDING_WORDS = frozenset(fold(w) for w in _WORDING_RAW.split())
"""Words a condensed question may add to the user's: how a question is put, never what it is about."""


def _introduces_nothing(candidate: str, sources: Sequence[str]) -> bool:
    """Whether ``candidate`` names nothing the user's ``sources`` (their questions) do not: every
    word of it occurs in them as written, case and accents aside (request wording apart) — a
    model that swaps « Fiduciaire Dubuy » for its real lookalike « Fiduciaire Dubuis », or
    « Fontana » for « Fontane » (one stem), capitalised or not, is caught."""
    return _words(candidate) <= _words(" ".join(sources))


def _keeps_the_new_words(candidate: str, question: str, history: Sequence[str]) -> bool:
    """Whether ``candidate`` keeps every word the follow-up ``question`` brings (its index terms
    the earlier questions do not hold): « Et la Fiduciaire Dubuy ? » after a question about the
    Fiduciaire Dubuis must still ask about Dubuy, not turn back to Dubuis."""
    return _words(question) - _words(" ".join(history)) <= _words(candidate)


class ConversationResolver:
    """Turns a question and the earlier user questions into a :class:`Resolution` (see the module
    doc). ``chat``: the model for the condense prompt, ``None`` for the rule alone. Thread-safe
    when the client is."""

    def __init__(self, chat: ChatClient | None = None) -> None:
        self.chat = chat

    def _condense(self, question: str, history: Sequence[str]) -> str | None:
        if self.chat is None:
            return None
        recent = list(history)[-MAX_HISTORY:]
        listing = "\n".join(f"{i}. {h.strip()}" for i, h in enumerate(recent, 1))
        user = (
            f"Questions précédentes de l'utilisateur :\n{listing}\n\n"
            f"Dernière question : {question.strip()}\n\nQuestion autonome :"
        )
        try:
            result = self.chat.chat([ChatMessage("system", CONDENSE_PROMPT), ChatMessage("user", user)], temperature=0.0)
        except LlmError as e:
            log.warning("condense prompt failed (the rule resolves the follow-up): %s", e)
            return None
        text = re.sub(r"<think>.*?</think>", "", result.content or "", flags=re.DOTALL | re.IGNORECASE).strip()
        lines = [ln.strip().strip("«»\"“”' ").strip() for ln in text.splitlines() if ln.strip()]
        if not lines:
            return None
        out = re.sub(r"^(?:question\s+autonome\s*:\s*)", "", lines[0], flags=re.IGNORECASE).strip()
        if (
            not out
            or len(out) > 4 * max(len(question), 80)
            or "ne figure pas dans les documents" in out.casefold()
            or not _introduces_nothing(out, [*recent, question])
            or not _keeps_the_new_words(out, question, recent)
        ):
            log.info("condense prompt output not used: %r", out[:200])
            return None
        return out

    def resolve(self, question: str, history: Sequence[str] = ()) -> Resolution:
        """The standalone question for ``question`` after the earlier user questions ``history``
        (oldest first; the earlier answers are never given). Never raises: a failing model falls
        back to the rule, an unresolvable follow-up is answered as asked."""
        asked = question.strip()
        history = [h.strip() for h in history if h and h.strip()]
        instruction = regenerate_instruction(asked)
        if instruction is not None and history:
            previous = self._resolved_history(history)
            return Resolution(asked, previous[-1], ResolutionMethod.REGENERATION, instruction)
        if not history or not looks_like_follow_up(asked):
            return Resolution(asked, asked)
        condensed = self._condense(asked, history)
        if condensed is not None and " ".join(condensed.split()) != " ".join(asked.split()):
            return Resolution(asked, condensed, ResolutionMethod.MODEL)
        resolved = rule_resolve(asked, self._resolved_history(history))
        if resolved is None:
            return Resolution(asked, asked, ResolutionMethod.UNRESOLVED)
        return Resolution(asked, resolved, ResolutionMethod.RULE)

    def _resolved_history(self, history: Sequence[str]) -> list[str]:
        """Each earlier question made standalone by the rule, in order (regenerate labels skipped)."""
        out: list[str] = []
        for h in history:
            if regenerate_instruction(h) is not None:
                continue
            if out and looks_like_follow_up(h):
                r = rule_resolve(h, out)
                out.append(r if r is not None else h)
            else:
                out.append(h)
        return out or list(history)


__all__ = [
    "CONDENSE_PROMPT",
    "INSTRUCTION_TEXT",
    "REGENERATE_PROMPTS",
    "ConversationResolver",
    "Instruction",
    "Resolution",
    "ResolutionMethod",
    "entity_phrases",
    "looks_like_follow_up",
    "regenerate_instruction",
    "rule_resolve",
    "subject_phrase",
]
