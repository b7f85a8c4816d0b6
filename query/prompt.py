"""The strict French prompt (docs/ARCHITECTURE.md "Data flow of a question" step 5).

The model sees only the extracts, each document's block headed by its file name in brackets —
the exact form it must cite — and is told to cite every fact with the full name (prefix
included), to answer the part that the extracts cover and say what is missing, to go document by
document on broad questions, and to answer exactly :data:`REFUSAL` when nothing is relevant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ancre.query.context import Context, Extract

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
6. Si aucun extrait ne permet de répondre, réponds exactement, sans rien ajouter :
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


def build_messages(question: str, context: Context) -> list[ChatMessage]:
    """``[system, user]`` messages for ``question`` over ``context`` (which must not be empty:
    an empty context is refused before any model call, control 1)."""
    user = (
        "Extraits des documents :\n\n"
        f"{format_extracts(context.extracts)}\n\n"
        "---\n"
        f"Question : {question.strip()}\n\n"
        "Réponds en citant chaque fait avec le nom complet du fichier entre crochets."
    )
    return [ChatMessage("system", SYSTEM_PROMPT), ChatMessage("user", user)]


__all__ = [
    "REFUSAL",
    "REFUSAL_MARKER",
    "SYSTEM_PROMPT",
    "ChatMessage",
    "build_messages",
    "format_extracts",
]
