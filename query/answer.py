"""A question in, a grounded (or visibly not grounded) answer out: docs/ARCHITECTURE.md "Data flow of a question" steps 1–10.

:meth:`AnswerService.ask` runs, for one question of one user:

1. the directory account the user name designates, and its principals — the union of what every
   principal provider says (:class:`~ancre.acl.providers.PrincipalResolver`). A
   :class:`~ancre.errors.DirectoryError` from the directory or any provider propagates (fail
   closed: no answer at all); a user no provider knows gets no principal, hence no chunk, hence
   the refusal;
2. hybrid retrieval trimmed to those principals (:mod:`ancre.query.retrieval`), each result's
   document checked live against its source (:mod:`ancre.query.live_acl`): a document whose
   rights could not be checked is left out, the control ``droits_non_verifies`` fires and
   :attr:`Answer.unverified` says how many per source;
3. control 1: no chunk → the standard refusal, **no model is called**;
4. the context (:mod:`ancre.query.context`) and the strict prompt (:mod:`ancre.query.prompt`),
   sized to the answering model's window (:mod:`ancre.query.window`: complements left out to fit
   are recorded, Ollama is sent the ``num_ctx`` it needs; what the server says it read is checked
   after the answer — ``contexte_tronque``, ``reponse_tronquee``);
5. the answering model — or, with none configured, the extractive answer
   (:class:`~ancre.query.llm.ExtractiveAnswerer`, which refuses when the extracts do not carry the
   question's terms);
6. controls 2–4 and the judge on the **raw** answer (:func:`~ancre.query.grounding.ground`);
7. only then the citations are enriched with their folders (:mod:`ancre.query.enrich`);
8. links and images of the answer whose address is not in the extracts are made plain text
   (:mod:`ancre.query.links`, control ``lien_neutralise``): what the user gets never makes his
   browser fetch or open an address a document's injected instruction chose;
9. the audit record (:mod:`ancre.audit.record`), refusals included, written before the answer is
   returned (an ``answer`` record; a streamed one: a ``start`` record before the model is called
   and an ``outcome`` record at the end). Its ``sources`` are the documents of the context —
   every document whose extracts were put before the model, with the ACL digest read with them —
   and its ``cited`` field those the answer cites; a question that failed (model error, stream
   abandoned) is logged too, with its ``error``.

**Lists.** A question asking for a list (« Liste tous les contrats de maintenance ») is searched
deeper, and the answer lists the documents found among those results and says how many matched
and that the list rests on what the search returned (:mod:`ancre.query.listing`).

**Conversations.** A question that only makes sense with the conversation (« Fais pareil pour
l'étude Rochat », « Et quelle est sa durée ? ») is first turned into a standalone question from the
earlier *user questions* (``history``) only, by the condense prompt when a model is configured
or by a deterministic rule (:mod:`ancre.query.conversation`); Open WebUI's « More Concise » /
« Add Details » answer the previous question again with that instruction. The resolved question
is what retrieval, the prompt and the controls use; :attr:`Answer.resolution` carries both forms
(shown as « Question traitée : … ») and the audit records both. Earlier answers never reach the
model nor the evidence.

**Streaming** (:meth:`AnswerService.stream`, for the API): the model's text is yielded piece by
piece as it is generated (held back only where a link could still be forming, see
:class:`~ancre.query.links.LinkGuard`), then one final :class:`Answer`. Before the model is called
the question's ``start`` audit record is written and fsync'd: if it can't be, the first ``next()``
raises :class:`~ancre.errors.AuditError` and nothing of the answer exists. The checks need the
whole answer, so they run after the last piece, and the enrichment after them, exactly as in
:meth:`ask`: the pieces joined equal ``Answer.raw``, and ``Answer.reponse`` (the enriched text),
the sources and the verdict arrive with the final :class:`Answer` — identical to what :meth:`ask`
returns for the same model output. A streaming client therefore shows the raw text while it
arrives and then sends the verdict and the sources with their folders in a final block (a last SSE
event, or an appended « Sources » section); the enriched text itself is for non-streaming callers.
Refusals and extractive answers are yielded as one piece.

The stream (:class:`AnswerStream`) can be **cancelled from another thread** (the API does it when
its client disconnects): the model request is stopped at once — its connection shut down, even
while waiting for the first token (:class:`~ancre.query.llm.Abort`) — and the ``outcome`` record
is written then, with ``error = "interrompue"`` and the generation time up to the cancel.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ancre.acl.directory import Directory, resolve_account
from ancre.acl.providers import PrincipalResolver, directory_resolver
from ancre.audit.record import AuditKind, AuditLog, AuditOutcome, AuditRecord, new_question_id
from ancre.config import Settings
from ancre.index.store import Store
from ancre.models import Closing, SearchResult, nfc
from ancre.query.context import Context, Source, broad_topic, build_context
from ancre.query.conversation import INSTRUCTION_TEXT, ConversationResolver, Instruction, Resolution
from ancre.query.enrich import enrich_citations, format_location
from ancre.query.facts import UnsupportedFact
from ancre.query.grounding import (
    CONTROL_NO_CHUNK,
    CONTROL_REFUSAL,
    Verdict,
    Verification,
    check_deterministic,
    ground,
    no_context_verdict,
)
from ancre.query.judge import Judge
from ancre.query.links import CONTROL_LINK_NEUTRALISED, LinkGuard, neutralise
from ancre.query.listing import LIST_DEPTH, DocumentList, extractive_list, found_documents, list_question
from ancre.query.live_acl import RightsCheck, Unverified, unverified
from ancre.query.llm import Abort, ChatClient, ExtractiveAnswerer, LlmError, ModelCallAborted
from ancre.query.prompt import REFUSAL, build_messages
from ancre.query.retrieval import Retriever
from ancre.query.thinking import filtered
from ancre.query.versions import VersionGroup
from ancre.query.window import ContextWindow, Fitted, ModelRun, apply_run

log = logging.getLogger("ancre.query")

ERROR_MODEL = "erreur_modele"
"""Audit ``error`` when the answering model failed (the error itself is raised to the caller)."""
ERROR_INTERRUPTED = "interrompue"
"""Audit ``error`` when a streamed answer was abandoned by its consumer before the end."""
CONTROL_UNKNOWN_USER = "utilisateur_inconnu"
"""Control that fires when no principal provider knows the user (no principal: nothing is
readable, the answer is the refusal): the user is told so, not that the documents are silent."""
CONTROL_RIGHTS_UNVERIFIED = "droits_non_verifies"
"""Control that fires when documents were left out because their rights could not be checked
live (their source unreachable): the answer rests on the others only. It does not change
``ancree``."""


@dataclass(frozen=True)
class AnswerSource:
    """A document shown with the answer: file name, folder (UNC ``\\\\SRV\\Partage\\Dossier\\`` or
    SharePoint URL), path relative to its source, document id, and ``passages``: the texts of
    its extracts that were put before the model (or quoted), in reading order — what the
    answer rests on (Open WebUI shows them in its source panel)."""

    filename: str
    location: str
    path: str
    doc_id: str
    passages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    """The outcome of one question.

    ``reponse``: the text for the user, citations enriched with their folders; ``raw``: the
    text as generated — the controls and the judge checked it so — with the links and images
    whose address is not in the extracts made plain text (:mod:`ancre.query.links`; ``neutralised``
    lists those addresses). ``sources``: the documents the
    answer validly cites, in order of first citation — or, when it cites none and is not a
    refusal, every document of its context (what it was generated from); ``()`` for a refusal.
    ``ancree``: ``True`` grounded, ``False`` not grounded, ``None`` not established (no judge, or
    it failed: ``verification == "non_effectuee"``). ``controles``: the controls that fired
    (:mod:`ancre.query.grounding` names); ``invented``: cited file names that were never shown;
    ``unsourced``: affirmations the judge found unsupported; ``extractive``: no model wrote it;
    ``timings_ms``: step → wall-clock milliseconds (``directory``, ``retrieval``, ``context``,
    ``generation``, ``grounding``, ``total``).
    """

    reponse: str
    raw: str
    sources: tuple[AnswerSource, ...]
    ancree: bool | None
    controles: tuple[str, ...]
    invented: tuple[str, ...]
    verification: Verification
    extractive: bool
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    unsourced: tuple[str, ...] = ()
    unverified: tuple[Unverified, ...] = ()
    """Documents left out because their rights could not be checked live (source unreachable),
    per source; non-empty exactly when ``droits_non_verifies`` is among the controls."""
    neutralised: tuple[str, ...] = ()
    """Addresses of the model's links and images shown as plain text; non-empty exactly when
    ``lien_neutralise`` is among the controls."""
    facts: tuple[UnsupportedFact, ...] = ()
    """Facts of the answer found in no extract it cites (control 5, ``fait_non_source``)."""
    resolution: Resolution | None = None
    """The question as asked and the standalone question that was answered (a follow-up
    resolved from the conversation); ``None`` when the caller gave no conversation."""
    versions: tuple[VersionGroup, ...] = ()
    """Versions of one document among the answer's sources, the one that looks current first."""
    model_run: ModelRun | None = None
    """The model call: the window sent, the extracts left out to fit it, what the server
    evaluated and why it stopped (:mod:`ancre.query.window`); ``None`` without a model call."""
    listing: DocumentList | None = None
    """For a list question (« Liste tous les contrats … »): the documents found and what the list
    rests on (:mod:`ancre.query.listing`); ``None`` for any other question."""


def unverified_note(groups: tuple[Unverified, ...]) -> str:
    """The sentence shown to the user when documents were left out unchecked (``""`` if none):
    the count and the source, never the documents' names."""
    if not groups:
        return ""
    n = sum(g.documents for g in groups)
    where = ", ".join(f"« {g.source} »" for g in groups)
    if n == 1:
        return f"1 document a été écarté : ses droits d'accès n'ont pas pu être vérifiés (source {where} injoignable)."
    return f"{n} documents ont été écartés : leurs droits d'accès n'ont pas pu être vérifiés (source {where} injoignable)."


@dataclass
class _Prepared:
    question: str
    user: str
    account: str | None
    principals: frozenset[str]
    context: Context
    timings: dict[str, float]
    started: float
    rights: tuple[RightsCheck, ...] = ()
    asked_for: str | None = None
    resolution: Resolution | None = None
    question_id: str = field(default_factory=new_question_id)
    run: ModelRun | None = None
    listing: DocumentList | None = None

    @property
    def asked(self) -> str:
        return self.resolution.asked if self.resolution is not None else self.question


def _extracts_text(context: Context) -> str:
    """What the model was shown of the extracts — their text, file names and paths — where a
    kept link's address must occur."""
    return "\n".join(part for e in context.extracts for part in (e.filename, e.path, e.text))


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0


def _as_source(s: Source, context: Context) -> AnswerSource:
    passages = tuple(e.text for e in context.extracts if (e.collection, e.doc_id) == (s.collection, s.doc_id))
    return AnswerSource(s.filename, s.location, s.path, s.doc_id, passages)


def shown_sources(verdict: Verdict, context: Context) -> tuple[AnswerSource, ...]:
    """The sources listed with an answer (see :attr:`Answer.sources`)."""
    if CONTROL_NO_CHUNK in verdict.controls or CONTROL_REFUSAL in verdict.controls:
        return ()
    by_name = {nfc(s.filename): s for s in context.sources}
    cited = [by_name[n] for n in verdict.cited if n in by_name]
    return tuple(_as_source(s, context) for s in (cited or context.sources))


def _relay(deltas: Iterator[str], guard: LinkGuard, abort: Abort) -> Iterator[str]:
    """The model's pieces as they may be shown: each waited for under ``abort`` (a cancel stops
    the wait), passed through ``guard`` (links and images not in the extracts made plain text,
    :mod:`ancre.query.links`), then what ``guard`` still held at the end."""

    def waited() -> Iterator[str]:
        while True:
            with abort.bound():
                abort.check()
                try:
                    piece = next(deltas)
                except StopIteration:
                    return
            yield piece

    return filtered(waited(), guard)


class AnswerService:
    """Answers questions for users (see the module doc). Thread-safe when its parts are.

    ``chat_client``: the answering model, ``None`` for the extractive mode; ``judge``: the
    grounding judge, ``None`` to skip it (answers that pass controls 2–4 then stay
    ``ancree = None``, ``verification = "non_effectuee"``); ``audit``: where the one line per
    question goes, ``None`` for no audit. ``settings`` gives the context knobs and the answering
    temperature. ``directory`` resolves the account a user name designates; ``resolver`` gives
    that account's principal set (default: the directory's own, :func:`~ancre.acl.providers.directory_resolver`).
    """

    def __init__(
        self,
        retriever: Retriever,
        store: Store,
        directory: Directory,
        settings: Settings,
        chat_client: ChatClient | None = None,
        judge: Judge | None = None,
        audit: AuditLog | None = None,
        *,
        resolver: PrincipalResolver | None = None,
    ) -> None:
        self.retriever = retriever
        self.store = store
        self.directory = directory
        self.resolver = resolver if resolver is not None else directory_resolver(directory)
        self.settings = settings
        self.chat_client = chat_client
        self.judge = judge
        self.audit = audit
        self.extractive = ExtractiveAnswerer()
        llm = settings.llm
        self.window = (ContextWindow(chat_client, num_ctx=llm.num_ctx, max_tokens=llm.max_tokens,
                                     context_length=llm.context_length) if chat_client is not None else None)
        """Sizes the prompt to the answering model's window (:mod:`ancre.query.window`)."""
        self.conversation = ConversationResolver(chat_client)
        """Resolves follow-ups (the answering model's condense prompt, else the rule)."""

    # ------------------------------------------------------------------ steps

    def _prepare(
        self, question: str, user: str, identity: str | None, history: Sequence[str] | None = None
    ) -> _Prepared:
        """Steps 1–4: the standalone question (with ``history``, the earlier user questions),
        account and principals, retrieval, context. ``identity``: what the audit records as the
        user (default ``user``). Raises ``DirectoryError``, ``EmbedderError``, ``StoreError``."""
        started = time.perf_counter()
        timings: dict[str, float] = {}
        resolution: Resolution | None = None
        if history is not None:
            t = time.perf_counter()
            resolution = self.conversation.resolve(question, history)
            question = resolution.question
            timings["conversation"] = _ms(t)
        t = time.perf_counter()
        account = resolve_account(self.directory, user)
        # an account the directory does not know may still be known to another provider (Entra)
        principals = self.resolver.principals(account if account is not None else user)
        if not principals:
            # not an error (fail closed: nothing is readable), but an admin must be able to see
            # why a user only ever gets the refusal (a mis-mapped e-mail, a typo)
            log.warning("identity %r is unknown to the directory: nothing is readable for it", user)
        timings["directory"] = _ms(t)
        t = time.perf_counter()
        results: tuple[SearchResult, ...] = ()
        rights: tuple[RightsCheck, ...] = ()
        listing: DocumentList | None = None
        if principals:
            listed = list_question(question)
            retrieval = (self.retriever.retrieve(question, principals, 2 * LIST_DEPTH, candidates=LIST_DEPTH) if listed
                         else self.retriever.retrieve(question, principals))
            results, rights = retrieval.results, retrieval.rights
            timings["live_acl"] = retrieval.timings.live_acl_ms
            if listed:  # the context rests on the usual top results, the list on them all
                listing = found_documents(question, results)
                results = results[: self.settings.query.limit]
        timings["retrieval"] = _ms(t)
        t = time.perf_counter()
        broad = broad_topic(question) is not None
        context = build_context(results, self.store, principals, self.settings.context, broad=broad, question=question)
        timings["context"] = _ms(t)
        asked_for = user if identity is not None and identity != user else None
        return _Prepared(
            question, user if identity is None else identity, account, principals, context, timings, started, rights,
            asked_for, resolution, listing=listing,
        )

    def _record(self, prep: _Prepared, verdict: Verdict | None, error: str | None = None, *,
                kind: AuditKind = AuditKind.ANSWER, neutralised: tuple[str, ...] = ()) -> None:
        """Write the question's ``answer`` (or ``start``, ``verdict`` ``None``) record."""
        if self.audit is None:
            return
        self.audit.append(
            AuditRecord(
                user=prep.user,
                account=prep.account,
                principals=prep.principals,
                question=prep.asked,
                sources=prep.context.sources,
                verdict=verdict,
                timings_ms=dict(prep.timings),
                error=error,
                rights=prep.rights,
                asked_for=prep.asked_for,
                kind=kind,
                id=prep.question_id,
                neutralised=neutralised,
                resolution=prep.resolution,
                versions=prep.context.versions,
                model=prep.run.audit() if prep.run is not None else None,
            )
        )

    def _record_outcome(self, prep: _Prepared, verdict: Verdict, error: str | None = None,
                        neutralised: tuple[str, ...] = ()) -> None:
        """Write the ``outcome`` record of a streamed question."""
        if self.audit is None:
            return
        self.audit.append(
            AuditOutcome(prep.question_id, prep.user, verdict, dict(prep.timings), error, prep.account, neutralised,
                         model=prep.run.audit() if prep.run is not None else None)
        )

    def _failed(self, prep: _Prepared, error: str, *, streamed: bool = False, neutralised: tuple[str, ...] = ()) -> None:
        """Audit a question whose answer never reached the user (or only in part)."""
        prep.timings["total"] = _ms(prep.started)
        verdict = Verdict(None, (), verification="non_effectuee")
        if streamed:
            self._record_outcome(prep, verdict, error, neutralised)
        else:
            self._record(prep, verdict, error, neutralised=neutralised)

    def _verdict(self, prep: _Prepared, written: str, extractive: bool, neutralised: tuple[str, ...]) -> Verdict:
        """Controls and judge on the model's text as ``written``, plus the controls of the links
        neutralised and of the documents left out unchecked."""
        t = time.perf_counter()
        if prep.context.empty:
            verdict = no_context_verdict()
        elif prep.run is not None and prep.run.context_truncated:  # the model never read it all: no judge
            verdict = check_deterministic(written, prep.context, prep.question)
        else:
            verdict = ground(prep.question, written, prep.context, self.judge, extractive=extractive)
        verdict = apply_run(verdict, prep.run)
        prep.timings["grounding"] = _ms(t)
        extra = ((CONTROL_LINK_NEUTRALISED,) if neutralised else ()) + (
            (CONTROL_RIGHTS_UNVERIFIED,) if unverified(prep.rights) else ()) + (
            (CONTROL_UNKNOWN_USER,) if not prep.principals else ())
        return replace(verdict, controls=(*verdict.controls, *extra)) if extra else verdict

    def _finish(self, prep: _Prepared, written: str, delivered: str, extractive: bool,
                neutralised: tuple[str, ...] = (), verdict: Verdict | None = None, *, streamed: bool = False) -> Answer:
        """Steps 6–9 on the complete answer — the model's text as ``written`` is checked,
        ``delivered`` (links neutralised) is enriched and returned — then the audit record
        (``outcome`` when ``streamed``, else ``answer``): it is written before the answer is
        returned (raises :class:`~ancre.errors.AuditError`)."""
        if verdict is None:
            verdict = self._verdict(prep, written, extractive, neutralised)
        reponse = enrich_citations(delivered, prep.context.sources)  # after every check
        prep.timings["total"] = _ms(prep.started)
        if streamed:
            self._record_outcome(prep, verdict, None, neutralised)
        else:
            self._record(prep, verdict, neutralised=neutralised)
        sources = shown_sources(verdict, prep.context)
        shown = {s.filename for s in sources}
        return Answer(
            reponse=reponse,
            raw=delivered,
            sources=sources,
            ancree=verdict.ancree,
            controles=verdict.controls,
            invented=verdict.invented,
            verification=verdict.verification,
            extractive=extractive,
            timings_ms=dict(prep.timings),
            unsourced=verdict.unsourced,
            unverified=unverified(prep.rights),
            neutralised=neutralised,
            facts=verdict.facts,
            resolution=prep.resolution,
            versions=tuple(g for g in prep.context.versions if shown & set(g.documents)),
            model_run=prep.run,
            listing=prep.listing,
        )

    def _direct(self, prep: _Prepared, text: str, extractive: bool) -> Answer:
        """A refusal or an extractive answer (no model), its links checked like a model's."""
        if prep.context.empty:
            return self._finish(prep, text, text, extractive)
        safe = neutralise(text, _extracts_text(prep.context))
        return self._finish(prep, text, safe.text, extractive, safe.addresses)

    def _without_model(self, prep: _Prepared) -> tuple[str, bool] | None:
        """The answer when no model is to be called: the control-1 refusal, or the extractive
        answer; ``None`` when the model must answer."""
        if prep.context.empty:
            return REFUSAL, self.chat_client is None
        if self.chat_client is None and prep.listing is not None:
            text = extractive_list(prep.listing, format_location) if prep.listing.documents else REFUSAL
            return text, True
        if self.chat_client is None:
            t = time.perf_counter()
            principals = prep.principals
            instruction = prep.resolution.instruction if prep.resolution is not None else None
            # the user's own document frequencies: a refusal never hints at a word of a document he can't read
            text = self.extractive.answer(
                prep.context, prep.question, lambda terms: self.retriever.term_stats(terms, principals),
                concise=instruction is Instruction.CONCISE, details=instruction is Instruction.DETAILS,
                folder=format_location,
            )
            prep.timings["generation"] = _ms(t)
            return text, True
        return None

    def _fit(self, prep: _Prepared) -> Fitted:
        """The prompt sized to the model's window; the context becomes the one it holds (the
        extracts left out to fit are in ``prep.run``). Raises :class:`~ancre.query.llm.LlmError`."""
        assert self.window is not None
        instruction = prep.resolution.instruction if prep.resolution is not None else None
        extra = INSTRUCTION_TEXT[instruction] if instruction else None
        fitted = self.window.fit(prep.context, lambda ctx: build_messages(prep.question, ctx, extra))
        prep.context = fitted.context
        prep.run = ModelRun(fitted, self.window.client.model)
        return fitted

    # ------------------------------------------------------------------ API

    def ask(
        self, question: str, user: str, *, identity: str | None = None, history: Sequence[str] | None = None
    ) -> Answer:
        """Answer ``question`` for ``user`` (sAMAccountName, UPN or ``DOMAIN\\user``, as the
        directory knows it). ``identity``: the caller's identity as received (the forwarded
        e-mail header), recorded in the audit log as ``user`` next to the resolved ``account``;
        default ``user``. ``history``: the earlier *user* questions of the conversation, oldest
        first (``None``: no conversation; a follow-up is resolved from them, see the module doc).

        Raises :class:`~ancre.errors.DirectoryError` (the directory cannot be read: no answer),
        :class:`~ancre.errors.EmbedderError` / :class:`~ancre.errors.StoreError` from retrieval,
        :class:`~ancre.query.llm.LlmError` when the answering model fails (audited with
        ``error = "erreur_modele"``), :class:`~ancre.errors.AuditError` when the audit line cannot be written (the answer is
        withheld). A failing judge never raises: the answer passes with ``verification = "non_effectuee"``.
        """
        prep = self._prepare(question, user, identity, history)
        direct = self._without_model(prep)
        if direct is not None:
            return self._direct(prep, *direct)
        assert self.chat_client is not None
        t = time.perf_counter()
        try:
            fitted = self._fit(prep)
            result = self.chat_client.chat(list(fitted.messages), temperature=self.settings.llm.temperature,
                                           num_ctx=fitted.num_ctx)
            assert self.window is not None
            prep.run = self.window.run(fitted, result.done_reason, result.prompt_tokens)
            raw = result.content
        except LlmError:
            prep.timings["generation"] = _ms(t)
            self._failed(prep, ERROR_MODEL)
            raise
        prep.timings["generation"] = _ms(t)
        safe = neutralise(raw, _extracts_text(prep.context))
        return self._finish(prep, raw, safe.text, False, safe.addresses)

    def stream(
        self, question: str, user: str, *, identity: str | None = None, history: Sequence[str] | None = None
    ) -> AnswerStream:
        """Like :meth:`ask`, streamed: the text in pieces (``str``) as the model writes it, then
        the final :class:`Answer` (see the module doc for how the pieces and the enriched text
        relate). ``history`` as in :meth:`ask`. Nothing runs before the first ``next()``. Raises
        as :meth:`ask`, possibly after some pieces — :class:`~ancre.errors.AuditError` always
        before the first one (the ``start`` record is written before the model is called); a
        consumer that stops early (``close()``, or :meth:`AnswerStream.cancel` from another
        thread) leaves an ``outcome`` record with ``error = "interrompue"``.
        """
        abort = Abort()
        return AnswerStream(self._stream(question, user, identity, history, abort), abort)

    def _stream(self, question: str, user: str, identity: str | None, history: Sequence[str] | None,
                abort: Abort) -> Iterator[str | Answer]:
        prep = self._prepare(question, user, identity, history)
        if abort.cancelled:  # the client left during retrieval: nothing was shown
            self._failed(prep, ERROR_INTERRUPTED)
            raise ModelCallAborted("the answer was abandoned before it started")
        direct = self._without_model(prep)
        if direct is not None:
            answer = self._direct(prep, *direct)
            yield answer.raw
            yield answer
            return
        assert self.chat_client is not None and self.window is not None
        t = time.perf_counter()
        try:
            fitted = self._fit(prep)
        except LlmError:
            prep.timings["generation"] = _ms(t)
            self._failed(prep, ERROR_MODEL)
            raise
        # written and fsync'd before the model is called: no byte of the answer exists without it
        self._record(prep, None, kind=AuditKind.START)
        guard = LinkGuard(_extracts_text(prep.context))
        t = time.perf_counter()
        deltas = self.chat_client.stream(list(fitted.messages), temperature=self.settings.llm.temperature,
                                         num_ctx=fitted.num_ctx)
        try:
            yield from _relay(deltas, guard, abort)
        except LlmError:
            prep.timings["generation"] = _ms(t)
            self._failed(prep, ERROR_INTERRUPTED if abort.cancelled else ERROR_MODEL, streamed=True,
                         neutralised=guard.addresses)
            raise
        except GeneratorExit:
            prep.timings["generation"] = _ms(t)
            self._failed(prep, ERROR_INTERRUPTED, streamed=True, neutralised=guard.addresses)
            raise
        finally:
            close = getattr(deltas, "close", None)
            if close is not None:
                close()  # release the HTTP stream at once, also when abandoned
        prep.timings["generation"] = _ms(t)
        prep.run = self.window.run(fitted, deltas.done_reason, deltas.prompt_tokens)
        with abort.bound():  # the judge's call is stopped by a cancel too
            verdict = self._verdict(prep, guard.source, False, guard.addresses)
        if abort.cancelled:
            self._failed(prep, ERROR_INTERRUPTED, streamed=True, neutralised=guard.addresses)
            raise ModelCallAborted("the answer was abandoned during its verification")
        yield self._finish(prep, guard.source, guard.text, False, guard.addresses, verdict, streamed=True)

    def close(self) -> None:
        """Release the model clients and the audit file (the store and directory are the
        caller's)."""
        if self.chat_client is not None:
            self.chat_client.close()
        if self.judge is not None:
            self.judge.close()
        if self.audit is not None:
            self.audit.close()


class AnswerStream(Closing, Iterator["str | Answer"]):
    """What :meth:`AnswerService.stream` returns: the answer's text pieces, then its
    :class:`Answer`. Iterate it (and :meth:`close` it) from one thread at a time; :meth:`cancel`
    may be called from any thread, also while another one waits in ``next()``: the model call
    stops at once and that ``next()`` raises :class:`~ancre.query.llm.ModelCallAborted` after the
    ``outcome`` record (``interrompue``) was written. A context manager (closed on exit)."""

    def __init__(self, pieces: Iterator[str | Answer], abort: Abort) -> None:
        self._pieces = pieces
        self._abort = abort

    def __iter__(self) -> AnswerStream:
        return self

    def __next__(self) -> str | Answer:
        return next(self._pieces)

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._abort.cancelled

    def cancel(self) -> None:
        """Stop the answer (thread-safe, idempotent): see the class doc."""
        self._abort.cancel()

    def close(self) -> None:
        """Stop consuming (an unfinished answer is audited ``interrompue``). Not while another
        thread is in ``next()``: :meth:`cancel` that one."""
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()


__all__ = [
    "CONTROL_RIGHTS_UNVERIFIED",
    "CONTROL_UNKNOWN_USER",
    "ERROR_INTERRUPTED",
    "ERROR_MODEL",
    "Answer",
    "AnswerService",
    "AnswerSource",
    "AnswerStream",
    "shown_sources",
    "unverified_note",
]
