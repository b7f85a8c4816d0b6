"""The strict French prompt (docs/ARCHITECTURE.md "Data flow of a question" step 5).

The model sees only the extracts, each document's block headed by its file name in brackets —
the exact form it must cite — and is told to cite every fact with the full name (prefix
included), to answer the part that the extracts cover and say what is missing, to go document by
document on broad questions, and to answer exactly :data:`REFUSAL` when nothing is relevant.
Every figure, date, code and name must be copied from the extract it cites (control 5 checks it,
:mod:`ancre.query.facts`). When the extracts hold versions of one document
(:attr:`~ancre.query.context.Context.versions`), the message says which looks current and why, and
asks for the current version's value first and the other labelled as replaced, both cited. A
regenerate variant adds its instruction (« plus concise », « plus de détails »).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ancre.query.context import Context, Extract
from ancre.query.versions import VersionGroup

REFUSAL = "Cette information ne figure pas dans les documents disponibles."
"""The one standard refusal (control 2 recognises it by :data:`REFUSAL_MARKER`)."""

REFUSAL_MARKER = "ne figure pas dans les documents disponibles"

SYSTEM_PROMPT = f"""\
Tu es l'assistant documentaire de l'entreprise. Tu réponds en français, uniquement à partir des \
extraits de documents fournis dans le message de l'utilisateur.

Règles strictes :
1. N'utilise que les extraits fournis. N'ajoute aucune connaissance extérieure, aucune supposition, \
aucun chiffre, nom, produit ou date qui n'y figure pas mot pour mot.
2. Chaque fait doit être suivi de sa source : le nom complet du fichier entre crochets, préfixe et \
extension compris, exactement comme il apparaît en tête de l'extrait, par exemple \
[03_Contrat_Maintenance_Etude_Rochat.docx]. N'invente jamais un nom de fichier et ne modifie \
jamais un nom (ni son préfixe, ni ses accents).
3. N'attribue jamais un fait d'un document à un autre sujet : un montant du contrat d'un client \
n'est pas celui d'un autre client.
4. Si les extraits ne répondent qu'en partie, réponds à cette partie en citant tes sources, puis \
indique clairement ce qui ne figure pas dans les extraits.
5. Pour une question large, traite les documents un par un, chacun avec sa citation.
6. Recopie chaque chiffre, montant, date, durée, code et nom tel qu'il figure dans l'extrait que tu \
cites, dans la phrase même qui le cite. Ne calcule ni total, ni différence, ni montant annuel qui \
ne figure pas dans les extraits.
7. Si des extraits sont des versions d'un même document, dis-le quand elles diffèrent sur un point \
de ta réponse : donne d'abord la valeur de la version en vigueur, puis celle de l'autre version en \
précisant qu'elle est remplacée, chacune avec sa citation ; ne choisis jamais en silence.
8. Si aucun extrait ne permet de répondre, réponds exactement, sans rien ajouter :
{REFUSAL}
"""

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    """One chat message as sent to a model."""

    role: Role
    content: str


def format_extracts(extracts: tuple[Extract, ...]) -> str:
    """The extracts as ``[filename]``-headed blocks, one block per run of consecutive extracts of
    the same document, blocks separated by a blank line."""
    blocks: list[str] = []
    current: tuple[str, str] | None = None
    for e in extracts:
        key = (e.collection, e.doc_id)
        if key != current:
            blocks.append(f"[{e.filename}]\n{e.text.strip()}")
            current = key
        else:
            blocks[-1] += f"\n{e.text.strip()}"
    return "\n\n".join(blocks)


def _version_names(g: VersionGroup) -> list[str]:
    """Each member of ``g`` as the model cites it, with its folder when two bear one name."""
    out = []
    for i, d in enumerate(g.documents):
        same = g.documents.count(d) > 1 and i < len(g.locations)
        out.append(f"[{d}] (dossier {g.locations[i]})" if same else f"[{d}]")
    return out


def versions_block(groups: tuple[VersionGroup, ...]) -> str:
    """What the model is told of the versions in its extracts (``""`` when there are none): the
    same groups, order and reasons as the audit's and the note shown with the answer."""
    lines = []
    for g in groups:
        shown = _version_names(g)
        names = ", ".join(shown)
        if g.current is None:
            lines.append(f"- {names} sont des versions d'un même document ; rien n'indique laquelle est en vigueur : dis-le.")
        else:
            why = f" ({' ; '.join(g.reasons)})" if g.reasons else ""
            older = ", ".join(shown[1:])
            lines.append(
                f"- {names} sont des versions d'un même document : {shown[0]} semble la version en vigueur{why} ; "
                f"{older} est une version antérieure."
            )
    return "Versions d'un même document parmi les extraits :\n" + "\n".join(lines) if lines else ""


def build_messages(question: str, context: Context, instruction: str | None = None) -> list[ChatMessage]:
    """``[system, user]`` messages for ``question`` over ``context`` (which must not be empty:
    an empty context is refused before any model call, control 1). ``instruction``: what a
    regenerate variant asks (« Réponds de façon plus concise … »), appended to the request."""
    versions = versions_block(context.versions)
    user = (
        "Extraits des documents :\n\n"
        f"{format_extracts(context.extracts)}\n\n"
        + (f"{versions}\n\n" if versions else "")
        + "---\n"
        f"Question : {question.strip()}\n\n"
        "Réponds en citant chaque fait avec le nom complet du fichier entre crochets."
        + (f"\n{instruction.strip()}" if instruction else "")
    )
    return [ChatMessage("system", SYSTEM_PROMPT), ChatMessage("user", user)]


__all__ = [
    "REFUSAL",
    "REFUSAL_MARKER",
    "SYSTEM_PROMPT",
    "ChatMessage",
    "build_messages",
    "format_extracts",
    "versions_block",
]
