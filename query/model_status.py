"""Whether the configured models are on their servers — for ``ancre check``, ``GET /health`` and
``ancre serve``'s pre-load (docs/MODELS.md, "A model that is missing, or loading").

Each configured model — the answering model (``[llm]``) and, with one, the judge (``[judge]``) —
is looked up in its server's list: Ollama ``GET /api/tags`` (Ollama API reference, "List Local
Models"; a name without a tag is ``:latest``), an OpenAI-compatible server's ``GET /v1/models``
(its cards' ``id``). A model that is not there is named with the command that fixes it
(``ollama pull qwen2.5:14b``).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from ancre.config import Settings
from ancre.errors import ConfigError
from ancre.query.judge import Judge
from ancre.query.llm import ChatClient, LlmError, ModelNotFoundError, make_chat_client, ollama_name

log = logging.getLogger("ancre.query")


@dataclass(frozen=True)
class ModelStatus:
    """One configured model on its server: ``role`` (``llm`` or ``judge``), ``kind``, ``model``,
    ``url``; ``present`` (``None``: the server could not be asked, ``error`` says why)."""

    role: str
    kind: str
    model: str
    url: str
    present: bool | None
    error: str | None = None

    @property
    def fix(self) -> str:
        """What makes it work."""
        if self.present is None:
            return f"check {self.role}.url and that the server answers from this host"
        return ModelNotFoundError(self.kind, self.model, self.url).fix + f" — or set {self.role}.model"

    @property
    def label(self) -> str:
        """``present``, ``absent`` or ``unreachable`` (``GET /health``)."""
        return {True: "present", False: "absent", None: "unreachable"}[self.present]


def configured_clients(settings: Settings, timeout_s: float | None = None) -> list[tuple[str, ChatClient]]:
    """``[("llm", client), ("judge", client)]`` for the configured models (none with
    ``llm.kind = "none"``; no judge when it is disabled). ``timeout_s``: a shorter timeout for
    short requests. Raises :class:`~ancre.errors.ConfigError`."""
    llm = settings.llm
    if timeout_s is not None:
        llm = llm.model_copy(update={"timeout_s": timeout_s, "connect_timeout_s": min(timeout_s, llm.connect_timeout_s)})
    chat = make_chat_client(llm)
    if chat is None:
        return []
    out: list[tuple[str, ChatClient]] = [("llm", chat)]
    if settings.judge.enabled:
        judge = settings.judge
        if timeout_s is not None:
            judge = judge.model_copy(update={"timeout_s": timeout_s,
                                             "connect_timeout_s": min(timeout_s, judge.connect_timeout_s)})
        out.append(("judge", Judge.from_config(judge, llm).client))
    return out


def model_status(role: str, client: ChatClient) -> ModelStatus:
    """Whether ``client``'s model is in its server's list. Never raises."""
    url = str(getattr(client, "url", ""))
    try:
        names = client.models()
    except LlmError as e:
        return ModelStatus(role, client.kind, client.model, url, None, str(e))
    key = ollama_name if client.kind == "ollama" else str
    present = key(client.model) in {key(n) for n in names}
    return ModelStatus(role, client.kind, client.model, url, present)


def statuses(settings: Settings, timeout_s: float | None = None) -> list[ModelStatus]:
    """:func:`model_status` of every configured model. Raises :class:`~ancre.errors.ConfigError`
    (a model's settings can't be read)."""
    clients = configured_clients(settings, timeout_s)
    try:
        return [model_status(role, c) for role, c in clients]
    finally:
        for _, c in clients:
            c.close()


def preload(settings: Settings) -> threading.Thread | None:
    """Load the configured models on their servers now, in a background thread (``ancre serve``):
    Ollama is sent an empty chat request with ``keep_alive`` and the window questions use
    (Ollama API reference, "Load a model"), so that the first question does not wait 30–90 s
    for the load. One log line per model: loaded (and how long it took), not on its server (with
    the command that fixes it), or not reachable. Returns the thread (``None`` without a model)."""
    try:
        clients = configured_clients(settings)
    except ConfigError as e:
        log.warning("models not pre-loaded: %s", e)
        return None
    if not clients:
        return None

    def run() -> None:
        for role, client in clients:
            t = time.monotonic()
            try:
                if client.preload():
                    log.info("%s model %s loaded on %s in %.1f s", role, client.model, client.kind, time.monotonic() - t)
            except ModelNotFoundError as e:
                log.error("%s model: %s", role, e)
            except LlmError as e:
                log.warning("%s model %s not pre-loaded: %s", role, client.model, e)
            finally:
                client.close()

    thread = threading.Thread(target=run, name="ancre-preload", daemon=True)
    thread.start()
    return thread


__all__ = ["ModelStatus", "configured_clients", "model_status", "preload", "statuses"]

