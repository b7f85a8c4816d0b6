"""What Open WebUI's staff see of an answer, in process (Starlette's TestClient, a
scripted query service): native ``source`` events with ``[n]`` citations in the same order,
``[digit`` escaped, attachments set aside with one sentence, an unknown account and a service
failure told apart from « not in the documents », in French.

The reference for what Open WebUI links is its own tokenizer: the ``citation`` extension of its
``marked`` (Open WebUI 0.12.4 frontend, ``src/lib/utils/marked/citation-extension.ts``; the
regex below is copied from the shipped bundle), applied where ``marked`` applies it — after a
backslash escape and outside code spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from ancre.api.app import create_app
from ancre.api.attachments import own_question, user_turn
from ancre.api.native_sources import InlineCitations, citation_key, escape_citation_digits, native_text
from ancre.api.schemas import ChatMessage
from ancre.api.staff import ATTACHMENTS_NOTE, EXTRACTIVE_REFUSAL_NOTE
from ancre.config import load_settings
from ancre.errors import DirectoryError
from ancre.query.answer import CONTROL_UNKNOWN_USER, Answer, AnswerSource
from ancre.query.llm import LlmError
from ancre.query.prompt import REFUSAL

KEY = "unit-key"
EMAIL = "alice.martin@axonix.ch"
H = {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": EMAIL}
UNC = "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\"
SP = "https://axonix.sharepoint.example/sites/Direction/Documents partages"
ROCHAT = AnswerSource("03_Contrat_Rochat.docx", UNC, "CLIENTS/03_Contrat_Rochat.docx", "partage:3",
                      ("4. Conditions financières", "Forfait mensuel | CHF 3 840 HT"))
BUDGET = AnswerSource("Budget.xlsx", SP, "Budget.xlsx", "sp:1", ("Budget 2026 : CHF 120 000 [2]",))
RAW = ("Le forfait est de CHF 3 840 HT [03_Contrat_Rochat.docx] ; le budget, CHF 120 000 [Budget.xlsx]. "
       "Selon l'art. 5 [2], voir aussi [03_Contrat_Rochat.docx#1].")

# Open WebUI 0.12.4's citation tokenizer (frontend bundle): what it turns into a source link
OWUI_CITATION = re.compile(r"(\[(?:\d+(?:#[^,\]\s]+)?(?:,\s*\d+(?:#[^,\]\s]+)?)*)\])+")
# Open WebUI 0.12.4's RAG template (open_webui/config.py DEFAULT_RAG_TEMPLATE), as rendered by
# open_webui.utils.task.rag_template with one attached file and put before the user's text by
# add_or_update_user_message(append=False) — output of Open WebUI's own code
# (tests/integration/test_openwebui_template.py checks this against it, for many cases)
RAG_0124 = """### Task:
Respond to the user query using the provided context, incorporating inline citations in the format [id] **only when the <source> tag includes an explicit id attribute** (e.g., <source id="1">).

### Guidelines:
- If you don't know the answer, clearly state that.
- If uncertain, ask the user for clarification.
- Respond in the same language as the user's query.
- If the context is unreadable or of poor quality, inform the user and provide the best possible answer.
- If the answer isn't present in the context but you possess the knowledge, explain this to the user and provide the answer using your own understanding.
- **Only include inline citations using [id] (e.g., [1], [2]) when the <source> tag includes an id attribute.**
- Do not cite if the <source> tag does not contain an id attribute.
- Do not use XML tags in your response.
- Ensure citations are concise and directly related to the information provided.

### Example of Citation:
If the user asks about a specific topic and the information is found in a source with a provided id attribute, the response should include the citation like in the following example:
* "According to the study, the proposed method increases efficiency by 20% [1]."

### Output:
Provide a clear and direct response to the user's query, including inline citations in the format [id] only when the <source> tag with id attribute is present in the context.

<context>
<source id="1" name="offre-concurrent.txt" resource-type="file" resource-id="f1">Notre offre: forfait mensuel CHF 2 900 HT [1].</source>
</context>

Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"""
Q_ROCHAT = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"


def owui_links(text: str) -> list[int]:
    """The source numbers Open WebUI would link in ``text`` (see the module doc): its citation
    regex tried at each position of the inline text, after ``\\`` escapes, outside code."""
    ids: list[int] = []
    i, fence, code = 0, "", 0
    lines_start = True
    while i < len(text):
        marker = re.match(r" {0,3}(`{3,}|~{3,})", text[i:]) if lines_start else None
        if marker and (not fence or marker.group(1)[0] == fence):  # a fenced code block opens / closes
            fence = "" if fence else marker.group(1)[0]
        c = text[i]
        lines_start = c == "\n"
        if c == "\n":
            code = 0
            i += 1
            continue
        if fence:
            i += 1
            continue
        if c == "`":
            j = i
            while j < len(text) and text[j] == "`":
                j += 1
            code = 0 if code == j - i else (j - i if code == 0 else code)
            i = j
            continue
        if code:
            i += 1
            continue
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~":
            i += 2
            continue
        m = OWUI_CITATION.match(text, i)
        if m:
            ids += [int(x.split("#")[0]) for g in re.findall(r"\[([^\]]+)\]", m.group(0)) for x in g.split(",")]
            i = m.end()
            continue
        i += 1
    return ids


def answer(raw: str = RAW, sources: tuple[AnswerSource, ...] = (ROCHAT, BUDGET), *, ancree: bool | None = True,
           controles: tuple[str, ...] = (), extractive: bool = False) -> Answer:
    return Answer(reponse=raw, raw=raw, sources=sources, ancree=ancree, controles=controles, invented=(),
                  verification="effectuee", extractive=extractive)


class Service:
    """Streams ``result.raw`` in 5-character pieces then ``result`` (or raises ``result``)."""

    def __init__(self, result: Answer | Exception, pieces: int = 5) -> None:
        self.result, self.pieces = result, pieces
        self.asked: list[str] = []
        self.histories: list[list[str] | None] = []

    def ask(self, question: str, user: str, *, asked_by: str | None = None,
            history: list[str] | None = None) -> Answer:
        self.asked.append(question)
        self.histories.append(history)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    def stream(self, question: str, user: str, *, asked_by: str | None = None,
               history: list[str] | None = None) -> Iterator[str | Answer]:
        self.asked.append(question)
        self.histories.append(history)
        if isinstance(self.result, Exception):
            raise self.result
        raw, n = self.result.raw, self.pieces
        if self.result.raw.strip() == REFUSAL:
            yield raw  # the query core yields a refusal in one piece
        else:
            for i in range(0, len(raw), n):
                yield raw[i : i + n]
        yield self.result

    def points(self) -> dict[str, int]:
        return {}

    def probe_directory(self) -> None:
        return None


def client(svc: Service, **api: Any) -> TestClient:
    return TestClient(create_app(svc, load_settings(None, api={"api_key": KEY, **api})), raise_server_exceptions=False)


def post(c: TestClient, content: Any, *, stream: bool, messages: list[dict[str, Any]] | None = None) -> Any:
    body = {"model": "ancre", "stream": stream, "messages": messages or [{"role": "user", "content": content}]}
    r = c.post("/v1/chat/completions", json=body, headers=H)
    assert r.status_code == 200, r.text
    return r


def streamed(r: Any) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """``(text, events, last chunk)`` of an SSE answer."""
    chunks = [json.loads(e[6:]) for e in r.text.split("\n\n") if e.startswith("data: ") and e[6:] != "[DONE]"]
    assert r.text.endswith("data: [DONE]\n\n")
    text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
    events = [ch["event"] for ch in chunks if "event" in ch]
    assert all(ch["choices"] == [] and ch["object"] == "chat.completion.chunk" for ch in chunks if "event" in ch)
    return text, events, chunks[-1]


# ----------------------------------------------------------------------------- 1. native citations


def test_a_streamed_answer_sends_its_sources_as_open_webui_events_in_citation_order() -> None:
    svc = Service(answer())
    with client(svc) as c:
        text, events, last = streamed(post(c, Q_ROCHAT, stream=True))
    assert text == ("Le forfait est de CHF 3 840 HT [1] ; le budget, CHF 120 000 [2]. "
                    "Selon l'art. 5 [2\\], voir aussi [1].")
    assert owui_links(text) == [1, 2, 1]  # the model's own « [2] » links nothing
    assert "Sources" not in text and last["choices"][0]["finish_reason"] == "stop" and last["ancre"]["ancree"] is True
    assert [e["type"] for e in events] == ["source", "source"]
    rochat, budget = (e["data"] for e in events)
    assert all("type" not in d for d in (rochat, budget))  # else Open WebUI does not keep it in message.sources
    assert rochat["source"] == {"id": f"{UNC}03_Contrat_Rochat.docx", "name": "03_Contrat_Rochat.docx"}
    assert rochat["document"] == [f"Dossier : `{UNC}`\n\n4\\. Conditions financières",
                                  "| Forfait mensuel | CHF 3 840 HT |\n| --- | --- |"]
    assert rochat["metadata"] == [{"source": f"{UNC}03_Contrat_Rochat.docx", "name": "03_Contrat_Rochat.docx"}] * 2
    assert rochat["distances"] == []
    sp_id = f"{SP}/Budget.xlsx"
    assert budget["source"] == {"id": sp_id, "name": "Budget.xlsx", "url": SP}
    assert budget["metadata"] == [{"source": sp_id, "name": "Budget.xlsx", "source_url": SP}]
    assert budget["document"] == ["Budget 2026 : CHF 120 000 [2\\]"]  # the panel renders Markdown: no link either
    assert owui_links(budget["document"][0]) == []
    assert svc.asked == [Q_ROCHAT]


def test_non_streamed_and_markdown_answers_keep_the_sources_block() -> None:
    """A non-streamed answer has no event channel; ``api.citations = "markdown"`` is for
    clients that show text only: ``[file name]`` citations and the « Sources » block."""
    block = (f"\n\n---\n**Sources :**\n- 03_Contrat_Rochat.docx — `{UNC}`\n"
             "- Budget.xlsx — <https://axonix.sharepoint.example/sites/Direction/Documents%20partages>")
    expected = RAW.replace("art. 5 [2]", "art. 5 [2\\]") + block
    with client(Service(answer())) as c:
        assert post(c, Q_ROCHAT, stream=False).json()["choices"][0]["message"]["content"] == expected
    with client(Service(answer()), citations="markdown") as c:
        text, events, _ = streamed(post(c, Q_ROCHAT, stream=True))
        assert text == expected and events == []
        assert post(c, Q_ROCHAT, stream=False).json()["choices"][0]["message"]["content"] == expected


def test_an_invented_citation_links_a_source_that_says_so_and_uncited_sources_follow() -> None:
    raw = "CHF 3 000 HT [22_Contrat_Inexistant.docx], puis CHF 3 840 HT [03_Contrat_Rochat.docx]."
    with client(Service(answer(raw, (ROCHAT, BUDGET), ancree=False, controles=("citation_inventee",)))) as c:
        text, events, _ = streamed(post(c, Q_ROCHAT, stream=True))
    assert text.startswith("CHF 3 000 HT [1], puis CHF 3 840 HT [2].") and "réponse non ancrée" in text
    names = [e["data"]["source"]["name"] for e in events]
    assert names == ["⚠️ 22_Contrat_Inexistant.docx : document introuvable", "03_Contrat_Rochat.docx", "Budget.xlsx"]
    assert "aucun document nommé" in events[0]["data"]["document"][0]
    assert len({e["data"]["metadata"][0]["source"] for e in events}) == 3  # one chip each: numbers stay aligned


def test_without_citation_every_source_is_a_chip_and_a_refusal_has_none() -> None:
    with client(Service(answer("Une réponse sans citation.", (ROCHAT,)))) as c:
        text, events, _ = streamed(post(c, Q_ROCHAT, stream=True))
    assert text == "Une réponse sans citation." and [e["data"]["source"]["name"] for e in events] == [ROCHAT.filename]
    with client(Service(answer(REFUSAL, (), controles=("refus",)))) as c:
        text, events, _ = streamed(post(c, Q_ROCHAT, stream=True))
    assert text == REFUSAL and events == []


def test_citation_keys() -> None:
    assert citation_key("03_Contrat.DOCX") == citation_key("03_contrat") == citation_key("03_Contrat.docx#4")
    assert citation_key("CLIENTS/03_Contrat.docx") == "03_contrat" and citation_key("a.b.pdf") == "a.b"


_TOKENS = st.sampled_from([
    "Le forfait ", "CHF 3 840 HT", " ", "\n", "\n\n", "[03_Contrat_Rochat.docx]", "[Budget.xlsx]", "[03_Contrat_Rochat]",
    "[2]", "[1, 3]", "[4#x]", "[2 ans]", "[Menu]", "[a.pdf, b.docx]", "`[5]`", "``x`[6]`y``", "\\[7]", "\\", "[",
    "]", "(", "[lien](http://x)", "```\n[8]\n```\n", "~~~\n", "[[9]]", "[22_Inconnu.docx]", "é", "«[10]»",
])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, max_size=30), st.lists(st.integers(1, 12), min_size=1, max_size=40), st.integers(1, 4))
def test_streamed_numbering_is_split_proof_and_links_only_ancre_numbers(tokens: list[str], cuts: list[int],
                                                                         first: int) -> None:
    """Whatever the pieces the model's text arrives in, the rewritten text is the same; Open
    WebUI links nothing but ancre's numbers, each to the file first cited under it."""
    text = "".join(tokens)
    whole, numbering = native_text(text, first)
    ic, out, i, k = InlineCitations(first), [], 0, 0
    while i < len(text):
        n = cuts[k % len(cuts)]
        out.append(ic.feed(text[i : i + n]))
        i, k = i + n, k + 1
    out.append(ic.finish())
    assert "".join(out) == whole
    numbers = set(range(first, first + len(numbering.names)))
    assert set(owui_links(whole)) <= numbers
    assert all(citation_key(a) != citation_key(b) for a, b in zip(numbering.names, numbering.names[1:], strict=False))
    assert escape_citation_digits(text).count("[") == text.count("[")  # escaping never adds or drops a bracket
    assert owui_links(escape_citation_digits(text)) == []
    assert whole.count("\\[") == text.count("\\[")  # never Open WebUI's display-math delimiter


@pytest.mark.parametrize(("text", "expected"), [
    ("[[03_Contrat_Rochat.docx]\\[7][03_Contrat_Rochat.docx]]", "[[1]\\[7][1]]"),
    ("[\\[03_Contrat_Rochat.docx]", "[\\[03_Contrat_Rochat.docx]"),
])
def test_a_group_with_an_escaped_bracket_is_the_models_text(text: str, expected: str) -> None:
    """Found by the property test above: a bracket group holding an escaped ``\\[`` or ``\\]``
    was read as one citation group, so its escaped text was dropped (``[[A]\\[7][A]]`` became
    ``[1]``) or moved; the escaped bracket stays as the model wrote it, the citations around it
    are numbered one by one."""
    whole, _numbering = native_text(text)
    assert whole == expected
    assert whole.count("\\[") == text.count("\\[")


# ----------------------------------------------------------------------------- 2. attachments


def test_open_webui_rag_template_is_recognised_and_set_aside() -> None:
    assert own_question(RAG_0124) == (Q_ROCHAT, 1)
    assert own_question(Q_ROCHAT) == (Q_ROCHAT, 0)
    older = RAG_0124.replace("</context>\n", f"</context>\n\n<user_query>\n{Q_ROCHAT}\n</user_query>\n")
    assert own_question(older) == (Q_ROCHAT, 1)  # earlier releases' template repeats it
    system = [ChatMessage(role="system", content=RAG_0124.removesuffix(Q_ROCHAT)), ChatMessage(role="user", content=Q_ROCHAT)]
    turn = user_turn(system, 4000)  # RAG_SYSTEM_CONTEXT=true: the template is the system message
    assert (turn.question, turn.attachments, turn.first_citation) == (Q_ROCHAT, 1, 2)
    # the model's builtin tools on: each user message with files starts with <attached_files>
    # (open_webui.utils.middleware.add_file_context), after the template's own copy of the context
    files = ('<attached_files>\n<file type="file" id="f1" url="f1" content_type="text/plain" name="offre.txt"/>\n'
             '<file type="file" id="f2" url="f2" name="b.pdf"/>\n</attached_files>\n\n')
    assert own_question(files + Q_ROCHAT) == (Q_ROCHAT, 2)
    assert own_question(RAG_0124.replace(f"\n{Q_ROCHAT}", f"\n{files}{Q_ROCHAT}")) == (Q_ROCHAT, 2)
    turn = user_turn([ChatMessage(role="user", content=files + Q_ROCHAT)], 4000)
    assert turn.attachments == 2 and turn.first_citation == 1  # no template: Open WebUI lists no source first
    image = ChatMessage.model_validate({"role": "user", "content": [
        {"type": "text", "text": Q_ROCHAT}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]})
    assert user_turn([image], 4000).attachments == 1 and user_turn([image], 4000).first_citation == 1


def test_an_attachment_is_not_read_not_asked_and_numbering_follows_its_chip() -> None:
    """The user's own question is asked (the attachment's text is neither searched nor audited:
    the query core gets the question only), one sentence says the attachment is not read, and
    ancre's first citation is [2] because Open WebUI's chip for the file comes first."""
    big = RAG_0124.replace("Notre offre: forfait mensuel CHF 2 900 HT [1].", "Texte joint. " * 800)  # > 4,000 chars
    svc = Service(answer())
    with client(svc) as c:
        text, events, _ = streamed(post(c, big, stream=True))
        whole = post(c, big, stream=False).json()["choices"][0]["message"]["content"]
    assert svc.asked == [Q_ROCHAT, Q_ROCHAT]
    assert text.startswith(f"{ATTACHMENTS_NOTE}\n\nLe forfait est de CHF 3 840 HT [2] ; le budget, CHF 120 000 [3].")
    assert owui_links(text) == [2, 3, 2] and len(events) == 2
    assert whole.startswith(f"{ATTACHMENTS_NOTE}\n\nLe forfait est de CHF 3 840 HT [03_Contrat_Rochat.docx]")
    assert ATTACHMENTS_NOTE.count(".") == 1 and ATTACHMENTS_NOTE.endswith(".")  # one sentence


def test_earlier_turns_reach_the_conversation_without_their_attachments() -> None:
    """A follow-up is resolved from the earlier user turns: what Open WebUI put
    around them — the ``<attached_files>`` block it keeps on every turn with files (native tools),
    a RAG template — is set aside there too, and earlier answers are never passed on."""
    attached = ('<attached_files>\n<file type="file" id="f1" name="offre-concurrent.txt"/>\n</attached_files>\n\n'
                "Quel est le forfait mensuel du contrat de maintenance de Baumont Industries ?")
    messages = [{"role": "user", "content": attached},
                {"role": "assistant", "content": "CHF 4 200 HT [1]"},
                {"role": "user", "content": RAG_0124.replace(Q_ROCHAT, "Et pour Rochat ?")},
                {"role": "assistant", "content": "CHF 3 840 HT [2]"},
                {"role": "user", "content": RAG_0124}]
    svc = Service(answer())
    with client(svc) as c:
        for stream in (True, False):
            post(c, None, stream=stream, messages=messages)
    assert svc.asked == [Q_ROCHAT, Q_ROCHAT]
    assert svc.histories == [["Quel est le forfait mensuel du contrat de maintenance de Baumont Industries ?",
                              "Et pour Rochat ?"]] * 2
    with client(svc) as c:  # a question asked alone: no conversation at all
        post(c, RAG_0124, stream=True)
    assert svc.histories[-1] is None


def test_a_pasted_document_over_the_limit_is_a_french_message() -> None:
    with client(Service(answer()), max_question_chars=50) as c:
        r = c.post("/v1/chat/completions", json={"model": "ancre", "messages": [{"role": "user", "content": "x" * 60}]},
                   headers=H)
    assert r.status_code == 422 and r.json()["error"]["code"] == "question_too_long"
    assert r.json()["error"]["message"].startswith("Votre question fait 60 caractères ; ancre en accepte au plus 50.")


# ----------------------------------------------------------------------------- 3. honest refusals


@pytest.mark.parametrize("stream", [False, True])
def test_an_unknown_account_is_told_so_and_whom_to_contact(stream: bool) -> None:
    unknown = answer(REFUSAL, (), controles=("aucun_extrait", CONTROL_UNKNOWN_USER), extractive=True)
    with client(Service(unknown), support_contact="le service informatique (support@axonix.ch)") as c:
        r = post(c, Q_ROCHAT, stream=stream)
    text = streamed(r)[0] if stream else r.json()["choices"][0]["message"]["content"]
    assert text == (f"Votre compte « {EMAIL} » n'est pas connu de l'annuaire de l'entreprise : ancre ne peut donc "
                    "pas vérifier vos droits d'accès et ne vous montre aucun document. Contactez le service "
                    "informatique (support@axonix.ch) : votre adresse dans Open WebUI doit correspondre à votre "
                    "compte de l'annuaire.")
    assert REFUSAL not in text


@pytest.mark.parametrize("stream", [False, True])
def test_not_in_the_documents_stays_the_refusal_and_extractive_mode_says_why(stream: bool) -> None:
    cases = [
        (answer(REFUSAL, (), controles=("refus",)), REFUSAL),  # a model read the extracts
        (answer(REFUSAL, (), controles=("aucun_extrait",), extractive=True), REFUSAL),  # nothing readable found
        (answer(REFUSAL, (), controles=("refus",), extractive=True), f"{REFUSAL}\n\n{EXTRACTIVE_REFUSAL_NOTE}"),
    ]
    for ans, expected in cases:
        with client(Service(ans)) as c:
            r = post(c, Q_ROCHAT, stream=stream)
        assert (streamed(r)[0] if stream else r.json()["choices"][0]["message"]["content"]) == expected


def _jwt_settings() -> dict[str, Any]:
    return {"user_jwt_secret": "s" * 40}


@pytest.mark.parametrize(
    ("setup", "headers", "status", "code", "french"),
    [
        ({}, {"Authorization": "Bearer wrong"}, 401, "invalid_api_key", "la clé de la connexion ancre"),
        (_jwt_settings(), {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Jwt": "a.b.c"}, 401,
         "invalid_user_jwt", "FORWARD_USER_INFO_HEADER_JWT_SECRET d'Open WebUI et le secret api.user_jwt_secret d'ancre"),
        (_jwt_settings(), H, 401, "plain_identity_refused", "Open WebUI envoie l'identité sans jeton signé"),
        ({}, {"Authorization": f"Bearer {KEY}"}, 401, "missing_identity", "ENABLE_FORWARD_USER_INFO_HEADERS=true"),
    ],
)
def test_identity_failures_are_french_and_name_the_fix(setup: dict[str, Any], headers: dict[str, str], status: int,
                                                       code: str, french: str) -> None:
    with client(Service(answer()), **setup) as c:
        r = c.post("/v1/chat/completions", json={"model": "ancre", "messages": [{"role": "user", "content": "q"}]},
                   headers=headers)
        q = c.post("/query", json={"question": "q"}, headers=headers)
    assert r.status_code == status and r.json()["error"]["code"] == code
    msg = r.json()["error"]["message"]
    assert msg.startswith("ancre n'a pas pu vérifier votre identité transmise par Open WebUI : contactez votre "
                          "service informatique") and french in msg
    assert "Error" not in msg and "JWT:" not in msg
    assert q.status_code == status and q.json()["error"]["message"] != msg  # machines keep the English detail


@pytest.mark.parametrize(
    ("error", "status", "code", "start"),
    [
        (LlmError("connection refused"), 502, "model_unavailable", "Le modèle de langage qui rédige les réponses"),
        (DirectoryError("ldap down"), 503, "directory_unavailable", "L'annuaire de l'entreprise ne répond pas"),
        (RuntimeError("bug"), 500, "internal_error", "ancre a rencontré une erreur interne"),
    ],
)
def test_service_failures_are_french_not_the_refusal(error: Exception, status: int, code: str, start: str) -> None:
    for stream in (False, True):
        with client(Service(error)) as c:
            r = c.post("/v1/chat/completions", headers=H,
                       json={"model": "ancre", "stream": stream, "messages": [{"role": "user", "content": "q"}]})
        assert r.status_code == status and r.json()["error"]["code"] == code
        assert r.json()["error"]["message"].startswith(start) and REFUSAL not in r.text


def test_not_ready_and_too_large_are_french_on_the_chat_route() -> None:
    app = create_app(Service(answer()), load_settings(None, api={"api_key": KEY, "max_body_bytes": 2048}),
                     not_ready=lambda: "the first sync of source 'partage' has not finished")
    with TestClient(app) as c:
        r = c.post("/v1/chat/completions", headers=H, json={"model": "ancre", "messages": [{"role": "user", "content": "q"}]})
        assert r.status_code == 503 and r.json()["error"]["message"].startswith("ancre démarre")
        r = c.post("/query", headers=H, json={"question": "q"})
        assert r.status_code == 503 and "partage" in r.json()["error"]["message"]
        r = c.post("/v1/chat/completions", headers=H,
                   json={"model": "ancre", "messages": [{"role": "user", "content": "x" * 3000}]})
        assert r.status_code == 413 and "ancre ne lit pas les fichiers joints" in r.json()["error"]["message"]
