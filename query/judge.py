"""The grounding judge (docs/ARCHITECTURE.md "Data flow of a question" step 7): a second, small model reads the extracts, the
question and the answer, and says whether every affirmation is supported.

The call goes through the same client code as answers (:func:`~ancre.query.llm.make_client`), to
Ollama (``/api/chat`` with ``"format": "json"``, ``"think": false`` and the configured
``keep_alive``, default ``"2h"``: the judge stays loaded next to the answering model) or to an
OpenAI-compatible server such as vLLM (``response_format: {"type": "json_object"}``,
``chat_template_kwargs: {"enable_thinking": false}`` — Qwen3's switch), temperature 0, its prompt
sized to the judge's window like an answer's (:mod:`ancre.query.window`) but never cut: a judge
whose prompt can't fit, or that the server says read less of it than was sent, gives no verdict.
The verdict is ``{"ancree": bool, "affirmations_non_sourcees": [...]}``.

Small models wrap their JSON in many ways, so :func:`parse_verdict` looks for it in the content,
after a ``<think>…</think>`` block, inside a fenced ```json block, and — when the content is
empty — in the separate ``thinking`` text. A verdict that cannot be read, a timeout or any error
gives ``None``: the caller then records ``verification: non_effectuee`` and never counts the
answer as grounded on the judge's behalf.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from ancre.models import nfc
from ancre.query.context import Context
from ancre.query.llm import ChatClient, make_client
from ancre.query.prompt import ChatMessage, format_extracts
from ancre.query.window import ContextWindow
from ancre.settings import resolve_secret
from ancre.settings.query import JudgeConfig, LlmConfig

log = logging.getLogger(__name__)

JUDGE_SYSTEM_PROMPT = """\
Tu es un contrôleur d'ancrage. On te donne des extraits de documents, une question et une réponse \
rédigée à partir de ces extraits. Tu vérifies que chaque affirmation de la réponse est soutenue \
par les extraits.

Méthode :
1. Relève chaque affirmation factuelle de la réponse : montants, chiffres, quantités, durées, \
dates, noms de personnes, d'entreprises, de produits ou de logiciels, conditions.
2. Pour chacune, cherche dans les extraits un passage qui la dit explicitement.
3. Une affirmation attribuée au mauvais sujet n'est pas sourcée : par exemple un chiffre du \
contrat Baumont présenté comme celui de l'étude Rochat, ou un produit d'un client attribué à un \
autre. La citation [fichier] doit désigner le document qui contient réellement l'affirmation.
4. Une affirmation absente des extraits, même plausible ou vraie par ailleurs, n'est pas sourcée. \
N'utilise aucune connaissance extérieure.
5. Une réponse qui indique que l'information ne figure pas dans les documents disponibles est \
ancrée.

Réponds uniquement par un objet JSON, sans aucun autre texte :
{"ancree": true ou false, "affirmations_non_sourcees": ["affirmation non soutenue", ...]}
"ancree" vaut true seulement si toutes les affirmations sont soutenues ; sinon false, avec la \
liste des affirmations non sourcées.
"""


@dataclass(frozen=True)
class JudgeVerdict:
    """The judge's reading: ``ancree`` (every affirmation supported) and the affirmations it found
    unsupported. A verdict with ``ancree: true`` but a non-empty list is read as not grounded."""

    ancree: bool
    affirmations_non_sourcees: tuple[str, ...] = ()


_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)


def _verdict_from(obj: Any) -> JudgeVerdict | None:
    if not isinstance(obj, dict):
        return None
    keys = {nfc(str(k)).casefold(): v for k, v in obj.items()}
    ancree = keys.get("ancree", keys.get("ancrée"))
    if not isinstance(ancree, bool):
        return None
    raw = keys.get("affirmations_non_sourcees", keys.get("affirmations_non_sourcées", []))
    if raw is None:
        raw = []
    elif isinstance(raw, str):
        raw = [raw] if raw.strip() else []
    elif not isinstance(raw, list):
        return None
    items = tuple(str(x).strip() for x in raw if str(x).strip())
    return JudgeVerdict(ancree and not items, items)


def _objects(text: str) -> list[JudgeVerdict]:
    """Every verdict-shaped JSON object in ``text``, in order (decoded with :mod:`json`)."""
    decoder = json.JSONDecoder()
    found: list[JudgeVerdict] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        verdict = _verdict_from(obj)
        if verdict is not None:
            found.append(verdict)
        i = text.find("{", end)
    return found


def parse_verdict(content: str, thinking: str = "") -> JudgeVerdict | None:
    """The judge's verdict from a chat answer, or ``None`` when none can be read.

    Looks, in order: in ``content`` without its ``<think>…</think>`` blocks (or after a lone
    ``</think>``), first inside fenced blocks, then anywhere (first verdict wins); then in
    ``thinking`` (last verdict wins: the conclusion comes at the end).
    """
    body = _THINK_BLOCK.sub("", content or "")
    if "</think>" in body.lower():
        body = body[body.lower().rfind("</think>") + len("</think>") :]
    candidates = [m.group(1) for m in _FENCE.finditer(body)] + [body]
    for text in candidates:
        found = _objects(text)
        if found:
            return found[0]
    found = _objects(thinking or "")
    return found[-1] if found else None


def judge_kind(cfg: JudgeConfig, llm: LlmConfig | None = None) -> str:
    """The judge's server kind: ``judge.kind``, else the answering model's, else ``ollama``."""
    if cfg.kind is not None:
        return cfg.kind
    return llm.kind if llm is not None and llm.kind != "none" else "ollama"


class Judge:
    """Grounding judge over a :class:`ChatClient` (Ollama or OpenAI-compatible). ``window``
    sizes its prompt (default: the client's model with an 8,192-token window and 512 tokens for
    the verdict)."""

    def __init__(self, client: ChatClient, window: ContextWindow | None = None) -> None:
        self.client = client
        self.window = window if window is not None else ContextWindow(client, num_ctx=8192, max_tokens=512)

    @classmethod
    def from_config(cls, cfg: JudgeConfig, llm: LlmConfig | None = None) -> Judge:
        """The judge of ``cfg``: on the server of kind :func:`judge_kind`, at ``cfg.url`` — else
        ``llm.url`` when the kinds match, else Ollama's default URL — with ``cfg.api_key``, else
        ``llm.api_key`` when it is the answering model's server. Raises
        :class:`~ancre.errors.ConfigError` (``judge.url`` missing for kind ``openai``, a secret
        that can't be read)."""
        kind = judge_kind(cfg, llm)
        same = llm is not None and llm.kind == kind
        url = cfg.url or (llm.url if same and llm is not None else None)
        key = cfg.api_key
        if key is None and same and llm is not None and (cfg.url is None or cfg.url == llm.url):
            key = llm.api_key
        client = make_client(
            kind, url, cfg.model, where="judge", api_key=resolve_secret(key, "judge.api_key"),
            keep_alive=cfg.keep_alive, timeout_s=cfg.timeout_s, connect_timeout_s=cfg.connect_timeout_s,
            num_ctx=cfg.num_ctx, max_tokens=cfg.max_tokens,
        )
        window = ContextWindow(client, num_ctx=cfg.num_ctx, max_tokens=cfg.max_tokens, context_length=cfg.context_length)
        return cls(client, window)

    def messages(self, question: str, answer: str, context: Context) -> list[ChatMessage]:
        """The judge's ``[system, user]`` messages."""
        user = (
            "Extraits des documents :\n\n"
            f"{format_extracts(context.extracts)}\n\n"
            "---\n"
            f"Question : {question.strip()}\n\n"
            f"Réponse à vérifier :\n{answer.strip()}\n\n"
            "---\n"
            'Réponds uniquement par l\'objet JSON {"ancree": ..., "affirmations_non_sourcees": [...]}.'
        )
        return [ChatMessage("system", JUDGE_SYSTEM_PROMPT), ChatMessage("user", user)]

    def check(self, question: str, answer: str, context: Context) -> JudgeVerdict | None:
        """The verdict on ``answer``, or ``None`` when the judge failed (error, timeout, HTTP
        error, unreadable output). Never raises."""
        try:
            fitted = self.window.fit(context, lambda ctx: self.messages(question, answer, ctx), drop=False)
            result = self.client.chat(list(fitted.messages), temperature=0.0, format="json", think=False,
                                      num_ctx=fitted.num_ctx)
        except Exception as exc:  # any judge failure means "not verified", never a crash
            log.warning("grounding judge failed: %s", exc)
            return None
        if self.window.run(fitted, result.done_reason, result.prompt_tokens).context_truncated:
            return None  # it did not read the extracts: its verdict is worth nothing (logged by run())
        verdict = parse_verdict(result.content, result.thinking)
        if verdict is None:
            shown = (result.content or result.thinking)[:300]
            log.warning("grounding judge gave no usable verdict: %r", shown)
        return verdict

    def close(self) -> None:
        """Release the client's connections."""
        self.client.close()


__all__ = ["JUDGE_SYSTEM_PROMPT", "Judge", "JudgeVerdict", "judge_kind", "parse_verdict"]
