"""A seeded generator of shares written from templates (issue 41): dozens of documents of each kind
written from **one template per kind**, whose sections never repeat whose document it is, for
clients and people whose names look alike, with older versions in an archive folder and clients
that do not exist — the share on which an answer about one client can be built from another's.

:func:`generate` (``seed``, ``per_template`` subjects per template, ``archived`` older versions)
writes, under a folder:

- ``CLIENTS/``: a **maintenance contract** per client (Word): title « Contrat de maintenance —
  <client> » for two thirds of them and none for the others, parties « entre Axonix SA … et
  <client, legal form> », then « 2. Objet et périmètre », « 3. Durée », « 4. Conditions
  financières » (a table: monthly fee, hourly rate, on-call rate; indexation « de N % par an »),
  « 5. Accès aux locaux » (the server room's access code), « 6. Protection des données » — none of
  which names the client. File names in four styles: ``Contrat_Maintenance_GarageDubois.docx``
  (CamelCase, no separator), ``contrat-maintenance-garage-dubois.docx``, ``Contrat maintenance
  Garage Dubois.docx``, ``CM_07_Garage_Dubois.docx``;
- ``OFFRES/``: an **offer** per client (Markdown) from another template: « Offre de services n°
  2025-0NN » (no client in the title), « Client : <client> », the lots as a table (days, amounts
  in ``CHF 3'200.– HT``), the total, the validity;
- ``RH/``: an **engagement letter** per person (Word), a third template: the addressee line
  « Madame Sophie Dubois », the role, the start date, the yearly salary, holidays, probation;
- ``ARCHIVES/``: ``archived`` clients' **older contract**, each with one or more signals of its own
  — a version suffix in the name, « (version 2023, remplacée) » in the title, « remplacé par le
  contrat du … » in the text, the archive folder itself, an older modification time (one archived
  file is touched *after* the current one: the weakest clue must not decide).

Names: lookalike families of three — « Garage Dubois », « Garage Dubuis » (one letter apart), «
Dubois Transports SA » (a shared word) — and other clients; people likewise (« Sophie Dubois »,
« Sophie Dubuis », « Sophie Dubois-Martin »). Every fee, code, salary and offer total is unique, so
another client's figure in an answer is recognisable. :attr:`TemplateCorpus.missing` are clients
and people that do not exist — near misses of real names (« Garage Duboy »).

:meth:`TemplateCorpus.questions` gives the evaluation questions with their truth (the document
expected first, the figure it holds, the document that is its replaced version), per kind: fee,
duration, code, version, offer, salary, missing, list.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import docx

from support.corpus import CORPUS

SURNAMES = (
    "Dubois", "Favre", "Rochat", "Blanc", "Morel", "Perrin", "Girard", "Bonvin", "Meylan", "Pittet", "Jaquet",
    "Cuendet", "Monnier", "Chappuis", "Berset", "Vuilleumier", "Nicolet", "Reymond", "Fontana", "Ducret",
    "Burnier", "Golay", "Aubert", "Dufour", "Mercier", "Chevalley", "Tissot", "Jaccard", "Rossier", "Pasche",
    "Maillard", "Bovet", "Cornaz", "Grandjean", "Schaller", "Wenger", "Zbinden", "Hofer", "Keller", "Baumann",
    "Lambiel", "Udry", "Fournier", "Brunner", "Bertholet", "Chollet", "Dériaz", "Genoud", "Huguenin", "Junod",
)
KINDS = {  # business kind -> article before it (« du Garage », « de la Fiduciaire », « de l'Étude »)
    "Garage": "du", "Fiduciaire": "de la", "Étude": "de l'", "Cabinet": "du", "Boulangerie": "de la",
    "Menuiserie": "de la", "Pharmacie": "de la", "Carrosserie": "de la",
}
SECTORS = ("Transports", "Informatique", "Immobilier", "Conseil", "Électricité", "Sanitaire")
HYPHENATED = ("Martin", "Muller", "Bernard", "Roux", "Fasel")
"""Second names of hyphenated surnames, none of which is a client's."""
FIRST_NAMES = ("Sophie", "Julien", "Claire", "Marc", "Anne", "Luc", "Nadia", "Pierre", "Laura", "David")
ROLES = ("technicienne de support", "ingénieur système", "comptable", "assistante de direction", "chef de projet",
         "administrateur réseau", "développeuse", "responsable des ventes")
CODE_WORDS = ("ZETA", "OMEGA", "SIGMA", "DELTA", "KAPPA", "LAMBDA", "GAMMA", "THETA", "ALPHA", "BETA", "IOTA", "RHO")
MONTHS = ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
          "novembre", "décembre")
WORDS = {12: "douze", 24: "vingt-quatre", 36: "trente-six", 48: "quarante-huit"}
PROVIDER = "Axonix SA"


def chf(amount: int, style: str = "space") -> str:
    """``CHF 1 500 HT`` (``space``) or ``CHF 1'500.– HT`` (``swiss``)."""
    if style == "swiss":
        return f"CHF {amount:,}.– HT".replace(",", "'")
    return f"CHF {amount:,} HT".replace(",", " ")


def _lookalike(name: str, rng: random.Random, avoid: set[str]) -> str:
    """``name`` one letter apart (a vowel changed, else a letter doubled or dropped), not in ``avoid``."""
    swaps = {"o": "u", "u": "o", "e": "a", "a": "e", "i": "y", "y": "i", "é": "e"}
    vowels = [name[:i] + swaps[c] + name[i + 1 :] for i, c in enumerate(name) if i > 0 and c in swaps]
    doubled = [name[:i] + name[i] + name[i:] for i in range(2, len(name)) if name[i] not in "aeiouy"]
    rng.shuffle(vowels)
    rng.shuffle(doubled)
    return next(o for o in [*vowels, *doubled] if o not in avoid and o.casefold() != name.casefold())


@dataclass
class Client:
    """A client: ``name`` as people write it (« Garage Dubois »), ``legal`` its name with its legal
    form, ``article`` the « du / de la / de l' / de » before it, and its contract's figures."""

    name: str
    legal: str
    article: str
    fee: int
    hourly: int
    oncall: int
    postes: int
    months: int
    notice: int
    index_pct: int
    start: str
    code: str
    offer: int
    offer_number: str
    validity: int
    family: int | None = None
    titled: bool = True
    filename: str = ""
    offer_file: str = ""
    archived: Archived | None = None

    @property
    def of(self) -> str:
        """« du Garage Dubois », « de l'Étude Rochat », « de Dubois Transports SA »."""
        return f"{self.article}{self.name}" if self.article.endswith("'") else f"{self.article} {self.name}"


@dataclass
class Archived:
    """A client's older contract in ``ARCHIVES/``: its file, figures and the signals it carries."""

    filename: str
    fee: int
    months: int
    code: str
    start: str
    signals: tuple[str, ...]


@dataclass
class Person:
    """An employee: ``name`` (« Sophie Dubois »), ``civility`` (« Madame »), letter figures."""

    name: str
    civility: str
    role: str
    salary: int
    holidays: int
    probation: int
    start: str
    family: int | None = None
    filename: str = ""


@dataclass(frozen=True)
class Question:
    """One evaluation question: ``kind`` (fee, duration, code, version, offer, salary, missing,
    list), the ``text``, the ``expect``-ed document quoted first (``None``: a refusal), the
    ``figure`` it holds, the ``subject`` asked about, its replaced version's file (``superseded``)."""

    kind: str
    text: str
    expect: str | None
    figure: str = ""
    subject: str = ""
    superseded: str | None = None
    superseded_figure: str = ""
    """The figure the replaced version writes instead (told apart by it when both files share a name)."""


@dataclass
class TemplateCorpus:
    """What :func:`generate` wrote under ``root`` (``share/`` holds the documents), and the truth."""

    root: Path
    clients: list[Client]
    people: list[Person]
    missing: list[str]
    """Clients that do not exist, as asked (« de la Pharmacie Bartholet »)."""
    missing_people: list[str]
    near: dict[str, str] = field(default_factory=dict)
    """A missing client as asked → the real client it is a near miss of."""
    subject_of: dict[str, str] = field(default_factory=dict)
    """File name → the subject it belongs to (a client's or a person's name)."""

    @property
    def share(self) -> Path:
        return self.root / "share"

    def figures_of(self, subject: str) -> set[str]:
        """The unique figures (fees, codes, offer totals, salaries) written in ``subject``'s documents."""
        out: set[str] = set()
        for c in self.clients:
            if c.name == subject:
                out |= {chf(c.fee), c.code, chf(c.offer, "swiss")}
                if c.archived is not None:
                    out |= {chf(c.archived.fee), c.archived.code}
        for p in self.people:
            if p.name == subject:
                out.add(f"CHF {p.salary:,}".replace(",", " "))
        return out

    def questions(self) -> list[Question]:
        """The evaluation questions (see the module doc)."""
        qs: list[Question] = []
        for c in self.clients:
            a = c.archived
            old = a.filename if a else None
            qs.append(Question("fee", f"Quel est le forfait mensuel du contrat de maintenance {c.of} ?", c.filename,
                               chf(c.fee), c.name, old, chf(a.fee) if a else ""))
            qs.append(Question("duration", f"Quelle est la durée du contrat de maintenance {c.of} ?", c.filename,
                               f"durée de {WORDS.get(c.months, c.months)} mois", c.name, old,
                               f"durée de {WORDS.get(a.months, a.months)} mois" if a else ""))
            qs.append(Question("code", f"Quel est le code d'accès de la salle serveur {c.of} ?", c.filename, c.code,
                               c.name, old, a.code if a else ""))
            if a is not None:
                qs.append(Question("version", f"Quel est le forfait mensuel {c.of} ?", c.filename, chf(c.fee),
                                   c.name, old, chf(a.fee)))
            qs.append(Question("offer", f"Quel est le prix total de l'offre de services pour {c.legal} ?", c.offer_file,
                               chf(c.offer, "swiss"), c.name))
        for p in self.people:
            qs.append(Question("salary", f"Quel est le salaire annuel brut de {p.name} ?", p.filename,
                               f"CHF {p.salary:,}".replace(",", " "), p.name))
        for m in self.missing:
            qs.append(Question("missing", f"Quel est le forfait mensuel du contrat de maintenance {m} ?", None, subject=m))
        for m in self.missing_people:
            qs.append(Question("missing", f"Quel est le salaire annuel brut de {m} ?", None, subject=m))
        qs.append(Question("list", "Liste tous les contrats de maintenance", None))
        return qs

    def write_config(self, *, extra: str = "") -> Path:
        """An ``ancre.toml`` for the share (one folder source alice's GG_Direction reads), e5-local,
        edge store, the Axonix directory."""
        shutil.copy2(CORPUS / "directory.json", self.root / "directory.json")
        cfg = self.root / "ancre.toml"
        cfg.write_text(
            'data_dir = "data"\n[embedder]\nkind = "e5-local"\n[store]\nkind = "edge"\n[directory]\nkind = "file"\n'
            'path = "directory.json"\ncache_ttl_s = 0\n[[sources]]\nid = "partage"\nroot = "share"\n'
            "unc_root = '\\\\\\\\SRV-FICHIERS\\\\Partage'\nprincipals = [\"GG_Direction\"]\n" + extra,
            encoding="utf-8",
        )
        return cfg


# ----------------------------------------------------------------------------- names


def _clients(rng: random.Random, n: int, surnames: list[str]) -> list[Client]:
    """``n`` clients: lookalike families of three (a third of them), then distinct ones."""
    names: list[tuple[str, str, str, int | None]] = []  # (name, legal, article, family)
    used: set[str] = set(surnames)
    families = max(2, n // 9)
    for fam in range(families):
        base = surnames.pop()
        kind = rng.choice(list(KINDS))
        twin = _lookalike(base, rng, used)
        used.add(twin)
        sector = rng.choice(SECTORS)
        names += [
            (f"{kind} {base}", f"{kind} {base} {rng.choice(['Sàrl', 'SA', ''])}".strip(), KINDS[kind], fam),
            (f"{kind} {twin}", f"{kind} {twin} {rng.choice(['Sàrl', 'SA', ''])}".strip(), KINDS[kind], fam),
            (f"{base} {sector} SA", f"{base} {sector} SA", "de", fam),
        ]
    while len(names) < n:
        base = surnames.pop()
        kind = rng.choice(list(KINDS))
        legal = f"{kind} {base} & Associés" if kind in ("Étude", "Cabinet") else f"{kind} {base} {rng.choice(['Sàrl', 'SA'])}"
        names.append((f"{kind} {base}", legal, KINDS[kind], None))
    names = names[:n]
    fees = rng.sample(range(900, 9000, 10), len(names))
    offers = rng.sample(range(4_000, 60_000, 50), len(names))
    codes = rng.sample(range(1000, 9999), len(names))
    out = []
    for i, (name, legal, article, fam) in enumerate(names):
        out.append(Client(
            name, legal, article, fees[i], rng.choice([140, 150, 160, 170, 180]), rng.choice([200, 220, 240]),
            rng.randint(5, 60), rng.choice([12, 24, 36, 48]), rng.choice([1, 2, 3, 6]), rng.choice([1, 2, 3]),
            f"1er {rng.choice(MONTHS)} {rng.choice([2025, 2026])}", f"{codes[i]}-{rng.choice(CODE_WORDS)}",
            offers[i], f"2025-{i + 1:03d}", rng.choice([30, 60, 90]), fam, titled=rng.random() < 0.67,
        ))
    return out


def _people(rng: random.Random, n: int, surnames: list[str]) -> list[Person]:
    """``n`` people: lookalike families of three (« Sophie Dubois », « Sophie Dubuis », « Sophie
    Dubois-Martin »), then distinct ones."""
    found: list[tuple[str, str, int | None]] = []
    used = set(surnames)
    for fam in range(max(2, n // 9)):
        base, first = surnames.pop(), rng.choice(FIRST_NAMES)
        civility = "Madame" if first in ("Sophie", "Claire", "Anne", "Nadia", "Laura") else "Monsieur"
        twin = _lookalike(base, rng, used)
        used.add(twin)
        found += [(f"{first} {base}", civility, fam), (f"{first} {twin}", civility, fam),
                  (f"{first} {base}-{rng.choice(HYPHENATED)}", civility, fam)]
    while len(found) < n:
        first = rng.choice(FIRST_NAMES)
        civility = "Madame" if first in ("Sophie", "Claire", "Anne", "Nadia", "Laura") else "Monsieur"
        found.append((f"{first} {surnames.pop()}", civility, None))
    salaries = rng.sample(range(62_000, 140_000, 500), n)
    return [
        Person(name, civ, rng.choice(ROLES), salaries[i], rng.choice([20, 22, 25, 28]), rng.choice([1, 2, 3]),
               f"1er {rng.choice(MONTHS)} 2026", fam)
        for i, (name, civ, fam) in enumerate(found[:n])
    ]


def _missing(
    rng: random.Random, clients: list[Client], people: list[Person], n: int
) -> tuple[list[str], list[str], dict[str, str]]:
    """``n`` clients that do not exist — near misses of real names (one letter apart), and one real
    name under another kind of business (« Garage Mercier » when only « Pharmacie Mercier » is a
    client) — with their « du / de la », and one person one letter apart from a real one."""
    taken = {w for c in clients for w in c.name.split()} | {w for p in people for w in p.name.replace("-", " ").split()}
    singles = [c for c in clients if c.family is None and " " in c.name and c.name.split()[0] in KINDS]
    out: list[str] = []
    near: dict[str, str] = {}
    for c in rng.sample(singles, n - 1):
        kind, base = c.name.split(" ", 1)
        fake = _lookalike(base, random.Random(base), taken)
        taken.add(fake)
        out.append(f"{c.article}{kind} {fake}" if c.article.endswith("'") else f"{c.article} {kind} {fake}")
        near[out[-1]] = c.name
    other = next(c for c in singles if f"{c.article} {c.name}" not in out)
    kind = next(k for k in ("Garage", "Cabinet") if k != other.name.split()[0])
    if any(c.name == f"{kind} {other.name.split(' ', 1)[1]}" for c in clients):  # pragma: no cover - guarded by the seed
        raise AssertionError("a missing client must not exist")
    out.append(f"{KINDS[kind]} {kind} {other.name.split(' ', 1)[1]}")
    near[out[-1]] = other.name
    person = rng.choice([p for p in people if p.family is None])
    first, base = person.name.split()[0], person.name.split()[-1]
    return out, [f"{first} {_lookalike(base, random.Random(first + base), taken)}"], near


# ----------------------------------------------------------------------------- files


def _camel(name: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in name.replace("-", " ").split())


def _slug(name: str) -> str:
    return "-".join(name.lower().split())


def _contract_name(c: Client, i: int) -> str:
    style = i % 4
    if style == 0:
        return f"Contrat_Maintenance_{_camel(c.name)}.docx"
    if style == 1:
        return f"contrat-maintenance-{_slug(c.name)}.docx"
    if style == 2:
        return f"Contrat maintenance {c.name}.docx"
    return f"CM_{i:02d}_{c.name.replace(' ', '_')}.docx"


def _contract(path: Path, c: Client, *, fee: int, months: int, code: str, start: str, title: str | None,
              remark: str = "") -> None:
    """The maintenance contract template (module doc)."""
    d = docx.Document()
    d.add_paragraph(f"{PROVIDER} — Confidentiel")
    if title is not None:
        d.add_heading(title, level=1)
    d.add_heading("1. Parties", level=2)
    d.add_paragraph(
        f"Le présent contrat de maintenance est conclu entre {PROVIDER}, société de services informatiques sise à "
        f"Lausanne, ci-après « le Prestataire », et {c.legal}, ci-après « le Client »."
    )
    if remark:
        d.add_paragraph(remark)
    d.add_heading("2. Objet et périmètre", level=2)
    d.add_paragraph(
        f"Le Prestataire assure l'infogérance du parc informatique du Client : {c.postes} postes de travail, un "
        "serveur de fichiers et le réseau local."
    )
    d.add_heading("3. Durée", level=2)
    d.add_paragraph(
        f"Le contrat prend effet le {start} pour une durée de {WORDS.get(months, months)} mois. Il est reconductible "
        f"tacitement par périodes de douze mois, sauf résiliation moyennant un préavis de {c.notice} mois."
    )
    d.add_heading("4. Conditions financières", level=2)
    rows = [("Poste", "Montant"), ("Forfait mensuel", chf(fee)), ("Heure hors forfait", chf(c.hourly)),
            ("Astreinte (par heure)", chf(c.oncall))]
    table = d.add_table(rows=len(rows), cols=2)
    for r, (a, b) in enumerate(rows):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    d.add_paragraph(
        f"Le forfait mensuel est facturé à terme échu, payable à 30 jours. Il est indexé de {c.index_pct} % par an."
    )
    d.add_heading("5. Accès aux locaux", level=2)
    d.add_paragraph(
        f"Le code d'accès de la salle serveur est {code}. Les interventions sur site ont lieu du lundi au vendredi, "
        "de 7h30 à 18h00."
    )
    d.add_heading("6. Protection des données", level=2)
    d.add_paragraph("Les parties s'engagent à respecter la loi fédérale sur la protection des données (nLPD).")
    d.save(str(path))


def _offer(path: Path, c: Client, rng: random.Random) -> None:
    """The offer template (Markdown, module doc): the lots add up to the total."""
    audit = rng.choice([2, 3, 4])
    rest = c.offer - audit * 1600
    lines = [
        f"# Offre de services n° {c.offer_number}", "", f"Client : {c.legal}", "", f"Date : {c.start}", "",
        "## 1. Contexte", "", "Le Client souhaite migrer sa messagerie et ses fichiers vers Microsoft 365.", "",
        "## 2. Prestations", "", "| Lot | Jours | Montant |", "| --- | --- | --- |",
        f"| Audit et conception | {audit} | {chf(audit * 1600, 'swiss')} |",
        f"| Migration et formation | {max(1, rest // 1600)} | {chf(rest, 'swiss')} |", "",
        "## 3. Prix total", "", f"Le prix total de l'offre s'élève à {chf(c.offer, 'swiss')}.", "",
        "## 4. Validité", "", f"L'offre est valable {c.validity} jours à compter de sa date.", "",
    ]
    path.write_text("\n".join(lines), encoding="utf-8")


def _letter(path: Path, p: Person) -> None:
    """The engagement letter template (Word, module doc)."""
    d = docx.Document()
    d.add_paragraph(f"{p.civility} {p.name}")
    d.add_paragraph("Chemin des Alpes 12, 1004 Lausanne")
    d.add_heading("Lettre d'engagement", level=1)
    d.add_paragraph(f"{p.civility},")
    d.add_paragraph(f"Nous avons le plaisir de vous confirmer votre engagement en qualité de {p.role} dès le {p.start}.")
    d.add_heading("Salaire", level=2)
    d.add_paragraph(f"Votre salaire annuel brut s'élève à CHF {p.salary:,}, versé en treize mensualités.".replace(",", " ", 1))
    d.add_heading("Vacances", level=2)
    d.add_paragraph(f"Vous bénéficiez de {p.holidays} jours de vacances par année civile.")
    d.add_heading("Temps d'essai", level=2)
    d.add_paragraph(f"Le temps d'essai est de {p.probation} mois.")
    d.save(str(path))


_SIGNALS = (("name",), ("title",), ("text",), ("folder",), ("name", "title"), ("title", "text"), ("folder", "touched"))
"""The signals each archived contract carries besides its archive folder (cycled)."""


def _archive(share: Path, c: Client, rng: random.Random, i: int, taken_codes: set[str]) -> Archived:
    """``c``'s older contract in ``ARCHIVES/`` with the signals of :data:`_SIGNALS` ``[i]``."""
    signals = _SIGNALS[i % len(_SIGNALS)]
    stem = c.filename.rsplit(".", 1)[0]
    name = f"{stem}_v2023.docx" if "name" in signals else c.filename
    code = next(f"{n}-{rng.choice(CODE_WORDS)}" for n in iter(lambda: rng.randint(1000, 9999), None)
                if f"{n}" not in {t.split('-')[0] for t in taken_codes})
    taken_codes.add(code)
    months = rng.choice([m for m in (12, 24, 36, 48) if m != c.months])
    fee = c.fee - rng.choice([100, 200, 300, 400])
    start = f"1er {rng.choice(MONTHS)} 2023"
    title = f"Contrat de maintenance — {c.name}" + (" (version 2023, remplacée)" if "title" in signals else "")
    remark = "Ce contrat a été remplacé par le contrat en vigueur du Client." if "text" in signals else ""
    _contract(share / "ARCHIVES" / name, c, fee=fee, months=months, code=code, start=start,
              title=title if c.titled or "title" in signals else None, remark=remark)
    return Archived(name, fee, months, code, start, tuple(dict.fromkeys(("folder", *signals))))


def generate(dest: Path, seed: int = 41, per_template: int = 30, archived: int = 10, missing: int = 5) -> TemplateCorpus:
    """Write the corpus (module doc) under ``dest`` (``dest/share/…``) and return it with its truth.
    The same ``seed`` and sizes always give the same names, figures and files."""
    rng = random.Random(seed)
    surnames = list(SURNAMES)
    rng.shuffle(surnames)
    clients = _clients(rng, per_template, surnames)
    people = _people(rng, per_template, surnames)
    fake, fake_people, near = _missing(rng, clients, people, missing)
    share = dest / "share"
    for sub in ("CLIENTS", "OFFRES", "RH", "ARCHIVES"):
        (share / sub).mkdir(parents=True, exist_ok=True)
    corpus = TemplateCorpus(dest, clients, people, fake, fake_people, near=near)
    now = 1_767_225_600.0  # 1 January 2026
    for i, c in enumerate(clients):
        c.filename = _contract_name(c, i)
        _contract(share / "CLIENTS" / c.filename, c, fee=c.fee, months=c.months, code=c.code, start=c.start,
                  title=f"Contrat de maintenance — {c.name}" if c.titled else None)
        os.utime(share / "CLIENTS" / c.filename, (now, now))
        c.offer_file = f"Offre_{c.offer_number}_{_camel(c.name)}.md" if i % 2 else f"offre-{_slug(c.name)}.md"
        _offer(share / "OFFRES" / c.offer_file, c, rng)
        corpus.subject_of[c.filename] = corpus.subject_of[c.offer_file] = c.name
    codes = {c.code for c in clients}
    for i, c in enumerate(rng.sample(clients, archived)):
        c.archived = _archive(share, c, rng, i, codes)
        when = now + 86_400 * 30 if "touched" in c.archived.signals else now - 86_400 * 400
        os.utime(share / "ARCHIVES" / c.archived.filename, (when, when))
        corpus.subject_of[c.archived.filename] = c.name
    for i, p in enumerate(people):
        p.filename = f"Lettre_Engagement_{_camel(p.name)}.docx" if i % 2 else f"lettre engagement {p.name}.docx"
        _letter(share / "RH" / p.filename, p)
        corpus.subject_of[p.filename] = p.name
    (dest / "truth.json").write_text(json.dumps({"seed": seed, "subjects": corpus.subject_of}, ensure_ascii=False, indent=1),
                                     encoding="utf-8")
    return corpus


__all__ = ["Client", "Person", "Question", "TemplateCorpus", "chf", "generate"]
