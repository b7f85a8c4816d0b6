"""End to end: grounded answers on the REAL synced Axonix corpus, with a scripted
Ollama-compatible server on 127.0.0.1 (real HTTP) answering as the model (qwen2.5:14b) and as the
judge (qwen3:4b), and with no model at all (extractive mode). Every question leaves one audit line,
read back from the audit file."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.corpus import copy_corpus, load_question_set, write_config
from support.hostile import text_pdf
from support.httpserver import Request, ScriptedServer, ndjson
from typer.testing import CliRunner

from ancre.acl.directory import FileDirectory
from ancre.app.cli import app
from ancre.app.runtime import Runtime
from ancre.audit.record import AuditLog
from ancre.config import Settings, load_settings
from ancre.errors import DirectoryError
from ancre.models import COLLECTIONS, Acl
from ancre.query.answer import ERROR_INTERRUPTED, ERROR_MODEL, Answer, AnswerService
from ancre.query.grounding import (
    CONTROL_FACT,
    CONTROL_INVENTED,
    CONTROL_JUDGE,
    CONTROL_NO_CHUNK,
    CONTROL_REFUSAL,
    CONTROL_UNCITED,
)
from ancre.query.judge import Judge
from ancre.query.llm import EXTRACTIVE_HEADER, LlmError, make_chat_client
from ancre.query.prompt import REFUSAL

QUESTIONS = load_question_set()
BAUMONT = "21_Contrat_Maintenance_Baumont_Industries.docx"
ROCHAT = "03_Contrat_Maintenance_Etude_Rochat.docx"
INVENTED = "22_Contrat_Maintenance_Étude_Rochat.docx"
CLIENTS_UNC = "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\"
RH_UNC = "\\\\SRV-FICHIERS\\Partage\\RH\\"
DEVIS = "Devis (v2) [final].pdf"
ANSWER_MODEL, JUDGE_MODEL = "qwen2.5:14b", "qwen3:4b"

Q_BAUMONT = QUESTIONS[0]["q"]  # alice, expect 21_Contrat_Maintenance_Baumont_Industries.docx
Q_SAME_FOR_ROCHAT = "Fais pareil pour l'étude Rochat"
Q_AUSTRALIA = "Quelle est la capitale de l'Australie ?"
Q_DUPONT = "Quel est le montant mensuel du contrat de maintenance de la société Dupont Logistique SA ?"
Q_ROCHAT = "Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?"
Q_SERVER_ROOM = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"

CASE1 = (
    f"Le contrat de maintenance avec Baumont Industries couvre l'infogérance de 35 postes Windows 11 "
    f"Pro [{BAUMONT}]. Le forfait mensuel s'élève à CHF 4 200 HT [{BAUMONT}]."
)
CASE2 = (
    f"Le contrat de maintenance de l'étude Rochat couvre 20 postes et un pare-feu pfSense [{INVENTED}]. "
    f"Le forfait mensuel s'élève à CHF 3 000 HT [{INVENTED}]."
)
UNCITED = (
    "Le contrat de maintenance couvre l'infogérance de 35 postes Windows 11 Pro, d'un serveur Windows "
    "Server 2022 et d'un NAS Synology. Le forfait mensuel s'élève à CHF 4 200 HT, facturé mensuellement "
    "à terme échu et payable à 30 jours."
)
GROUNDED = '{"ancree": true, "affirmations_non_sourcees": []}'


# ----------------------------------------------------------------------------- the corpus


@dataclass
class Synced:
    """The corpus (plus two documents in RH, read by emma) synced once; ``rt`` owns the store."""

    root: Path
    config: Path
    rt: Runtime

    def settings(self, **overrides: Any) -> Settings:
        return load_settings(self.config, **overrides)

    def release(self) -> None:
        """Close the runtime (and the store lock) so that the CLI can open the index."""
        self.rt.close()

    def reopen(self) -> None:
        self.rt = Runtime(load_settings(self.config))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synced]:
    root = copy_corpus(tmp_path_factory.mktemp("corpus"))
    rh = root / "share" / "RH"
    (rh / DEVIS).write_bytes(
        text_pdf(
            [
                [
                    "Devis de formation - version 2 finale",
                    "Formation à la sécurité informatique pour les collaborateurs.",
                    "Le montant total du devis de formation est de CHF 6 500 HT pour deux journées.",
                    "La navette vers le centre de formation roule à 50 km/h en ville.",
                ]
            ]
        )
    )
    (rh / "contrat_01.md").write_text(
        "# Contrat de formation continue\n\nLe contrat de formation continue prend effet le 1er "
        "janvier 2026 pour une durée de vingt-quatre mois. Il est reconductible tacitement par "
        "périodes de douze mois, sauf résiliation moyennant un préavis de trois mois.\n",
        encoding="utf-8",
    )
    config = write_config(root)
    synced = Synced(root, config, Runtime(load_settings(config)))
    for conn in synced.rt.connectors():
        rep = synced.rt.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.failed == 0, rep
    yield synced
    synced.rt.close()


@pytest.fixture
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


# ----------------------------------------------------------------------------- helpers


def _message(content: str, thinking: str | None = None, model: str = ANSWER_MODEL) -> dict:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        msg["thinking"] = thinking
    return {"model": model, "message": msg, "done": True, "done_reason": "stop"}


def script(srv: ScriptedServer, answer: Any = REFUSAL, judge: Any = GROUNDED) -> None:
    """One Ollama serving both models. ``answer``/``judge``: the content (str), or any
    ScriptedServer answer / handler. A streamed request gets the answer in 7-character pieces."""

    def handler(req: Request) -> Any:
        scripted = judge if req.json["model"] == JUDGE_MODEL else answer
        if callable(scripted):
            return scripted(req)
        if not isinstance(scripted, str):
            return scripted
        if req.json.get("stream"):
            pieces = [scripted[i : i + 7] for i in range(0, len(scripted), 7)]
            frames = [{"model": ANSWER_MODEL, "message": {"role": "assistant", "content": p}, "done": False} for p in pieces]
            return ndjson([*frames, {"model": ANSWER_MODEL, "message": {"role": "assistant", "content": ""}, "done": True}])
        return 200, _message(scripted, model=req.json["model"])

    srv.route("POST", "/api/chat", handler)


def service(
    corpus: Synced, audit_dir: Path, srv: ScriptedServer | None = None, judge: dict | None = None
) -> AnswerService:
    """An AnswerService over the synced index, wired from settings as the Runtime does: with
    ``srv``, the answering model and the judge on it; without, extractive mode."""
    overrides: dict[str, Any] = {}
    if srv is not None:
        overrides["llm"] = {"kind": "ollama", "url": srv.url}
        overrides["judge"] = judge or {}
    settings = corpus.settings(**overrides)
    chat = make_chat_client(settings.llm)
    jdg = Judge.from_config(settings.judge, settings.llm) if chat is not None else None
    rt = corpus.rt
    return AnswerService(rt.retriever, rt.store, rt.directory, settings, chat, jdg, AuditLog(audit_dir))


def chats(srv: ScriptedServer, model: str) -> list[Request]:
    return [r for r in srv.requests_to("/api/chat", "POST") if r.json["model"] == model]


def audit_lines(audit_dir: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(audit_dir.glob("audit-*.jsonl")) for line in f.read_text("utf-8").splitlines()]


def questions(audit_dir: Path) -> list[dict]:
    """One dict per question, as an audit reader joins them: an ``answer`` line, or a ``start``
    line updated with its ``outcome`` (same ``id``)."""
    out: dict[str, dict] = {}
    for line in audit_lines(audit_dir):
        if line["kind"] == "outcome":
            out[line["id"]].update(line)
        else:
            out[line["id"]] = dict(line)
    return list(out.values())


def check_audit(line: dict, answer: Answer, user: str, question: str) -> None:
    """The audit line of one answered question matches the answer."""
    assert line["user"] == user and line["question"] == question
    assert line["controls"] == list(answer.controles) and line["ancree"] is answer.ancree
    assert line["verification"] == answer.verification and line["invented"] == list(answer.invented)
    assert line["error"] is None
    assert re.fullmatch(r"[0-9a-f]{64}", line["principals"])
    for src in line["sources"]:
        assert set(src) == {"filename", "doc_id", "location", "acl", "rights"} and re.fullmatch(r"[0-9a-f]{64}", src["acl"])
        assert src["rights"] == "live"  # checked at its source before it was put in the context
    assert {r["doc_id"] for r in line["rights"]} >= {s["doc_id"] for s in line["sources"]}
    assert {s.doc_id for s in answer.sources} <= {s["doc_id"] for s in line["sources"]}
    assert {"directory", "retrieval", "context", "grounding", "total"} <= set(line["timings_ms"])
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$", line["time"])


def only_audit(audit_dir: Path) -> dict:
    (line,) = audit_lines(audit_dir)
    return line


# ----------------------------------------------------------------------------- seed cases


def test_case1_baumont_grounded(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    script(srv, CASE1, GROUNDED)
    svc = service(corpus, tmp_path, srv)
    ans = svc.ask(Q_BAUMONT, "alice")
    assert ans.ancree is True and ans.controles == () and ans.verification == "effectuee"
    assert ans.invented == () and not ans.extractive and ans.raw == CASE1
    assert [s.filename for s in ans.sources] == [BAUMONT]
    (src,) = ans.sources
    assert ans.reponse.count(f"[{BAUMONT} : ") == 2 and src.location in ans.reponse

    (req,) = chats(srv, ANSWER_MODEL)
    body = req.json
    assert body["options"]["temperature"] == 0.2 and body["stream"] is False
    system, user = body["messages"]
    assert system["role"] == "system" and REFUSAL in system["content"]
    assert f"[{BAUMONT}]\n" in user["content"] and Q_BAUMONT in user["content"]
    assert "35 postes" in user["content"] and "CHF 4 200 HT" in user["content"]
    # the source carries the passages the answer rests on: its extracts, as the model read them
    assert src.passages and "CHF 4 200 HT" in "\n".join(src.passages)
    assert all(p.strip() in user["content"] for p in src.passages)
    (judged,) = chats(srv, JUDGE_MODEL)
    assert judged.json["format"] == "json" and judged.json["think"] is False
    assert judged.json["options"]["temperature"] == 0 and judged.json["keep_alive"] == "2h"

    line = only_audit(tmp_path)
    check_audit(line, ans, "alice", Q_BAUMONT)
    assert line["cited"] == [BAUMONT]
    # the ACL digest logged is the one of the rights stored with the document
    stored = {
        p.payload.doc_id: Acl(frozenset(p.payload.acl_allow), frozenset(p.payload.acl_deny)).digest()
        for coll in COLLECTIONS
        for p in corpus.rt.store.scroll(coll)
    }
    assert all(s["acl"] == stored[s["doc_id"]] for s in line["sources"])
    assert not srv.errors


def test_case2_same_for_rochat_invented_citation(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    answers = iter([CASE1, CASE2])
    script(srv, lambda req: (200, _message(next(answers))), GROUNDED)
    svc = service(corpus, tmp_path, srv)
    first = svc.ask(Q_BAUMONT, "alice")
    ans = svc.ask(Q_SAME_FOR_ROCHAT, "alice")
    assert first.ancree is True
    # control 3 fires (and control 4 too: over 200 characters, no valid citation left); control 5
    # too: a sentence citing only an invented file has no evidence, each of its facts is reported
    assert ans.ancree is False and ans.controles == (CONTROL_INVENTED, CONTROL_UNCITED, CONTROL_FACT)
    assert [f.text for f in ans.facts] == ["Rochat", "20", "pfSense", "CHF 3 000 HT"]
    assert ans.invented == (INVENTED,) and ans.verification == "non_requise"
    assert len(chats(srv, JUDGE_MODEL)) == 1  # the judge only saw the first answer
    # the invented citation is shown as written, never enriched with a folder
    assert f"[{INVENTED}]" in ans.reponse and f"[{INVENTED} :" not in ans.reponse
    # no history: the second request carries the second question only
    second = chats(srv, ANSWER_MODEL)[1].json["messages"]
    assert [m["role"] for m in second] == ["system", "user"]
    assert Q_SAME_FOR_ROCHAT in second[1]["content"] and Q_BAUMONT not in second[1]["content"]
    assert CASE1 not in second[1]["content"]
    assert "[03_Contrat_Maintenance_Etude_Rochat" in second[1]["content"]  # the real file was shown
    one, two = audit_lines(tmp_path)
    check_audit(one, first, "alice", Q_BAUMONT)
    check_audit(two, ans, "alice", Q_SAME_FOR_ROCHAT)
    assert two["invented"] == [INVENTED] and two["controls"] == [CONTROL_INVENTED, CONTROL_UNCITED, CONTROL_FACT]
    assert [f["text"] for f in two["unsupported_facts"]] == [f.text for f in ans.facts]


def test_long_uncited_answer_is_control_4(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    script(srv, UNCITED, GROUNDED)
    ans = service(corpus, tmp_path, srv).ask(Q_BAUMONT, "alice")
    assert len(UNCITED) > 200
    assert ans.ancree is False and ans.controles == (CONTROL_UNCITED,) and ans.verification == "non_requise"
    assert ans.reponse == UNCITED and ans.sources  # the context's documents: what it came from
    assert chats(srv, JUDGE_MODEL) == []
    check_audit(only_audit(tmp_path), ans, "alice", Q_BAUMONT)


def test_exact_refusal_passes(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    script(srv, REFUSAL, GROUNDED)
    ans = service(corpus, tmp_path, srv).ask(Q_ROCHAT, "bruno")
    assert ans.reponse == REFUSAL and ans.ancree is True and ans.controles == (CONTROL_REFUSAL,)
    assert ans.sources == () and ans.verification == "non_requise"
    assert len(chats(srv, ANSWER_MODEL)) == 1 and chats(srv, JUDGE_MODEL) == []
    line = only_audit(tmp_path)
    check_audit(line, ans, "bruno", Q_ROCHAT)
    assert line["sources"] and not any("Rochat" in s["filename"] for s in line["sources"])


@pytest.mark.parametrize("mode", ["ask", "stream"])
def test_no_chunk_refuses_without_calling_the_model(corpus: Synced, srv: ScriptedServer, tmp_path: Path, mode: str) -> None:
    script(srv, CASE1, GROUNDED)
    svc = service(corpus, tmp_path, srv)
    if mode == "ask":
        ans = svc.ask(Q_BAUMONT, "AXONIX\\mallory")
    else:
        *pieces, ans = list(svc.stream(Q_BAUMONT, "AXONIX\\mallory"))
        assert pieces == [REFUSAL]
    # mallory is unknown to the directory: no chunk, and said so (the API tells him, not « not in the documents »)
    assert ans.reponse == REFUSAL and ans.controles == (CONTROL_NO_CHUNK, "utilisateur_inconnu") and ans.sources == ()
    assert srv.requests_to("/api/chat") == []
    line = only_audit(tmp_path)
    check_audit(line, ans, "AXONIX\\mallory", Q_BAUMONT)
    assert line["sources"] == [] and line["controls"] == [CONTROL_NO_CHUNK, "utilisateur_inconnu"]


def test_directory_failure_fails_closed(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    script(srv, CASE1, GROUNDED)
    broken = tmp_path / "directory.json"
    broken.write_text("{ not json", encoding="utf-8")
    settings = corpus.settings(llm={"kind": "ollama", "url": srv.url})
    svc = AnswerService(
        corpus.rt.retriever, corpus.rt.store, FileDirectory(broken), settings,
        make_chat_client(settings.llm), None, AuditLog(tmp_path / "audit"),
    )  # fmt: skip
    with pytest.raises(DirectoryError):
        svc.ask(Q_BAUMONT, "alice")
    assert srv.requests_to("/api/chat") == [] and audit_lines(tmp_path / "audit") == []


@pytest.mark.parametrize("question", [Q_AUSTRALIA, Q_DUPONT], ids=["australia", "dupont"])
def test_out_of_corpus_questions_take_the_refusal_path(
    corpus: Synced, srv: ScriptedServer, tmp_path: Path, question: str
) -> None:
    script(srv, REFUSAL, GROUNDED)
    ans = service(corpus, tmp_path / "llm", srv).ask(question, "alice")
    assert ans.reponse == REFUSAL and ans.controles == (CONTROL_REFUSAL,) and ans.ancree is True
    (req,) = chats(srv, ANSWER_MODEL)  # retrieval found extracts: the model was asked, and refused
    assert "Extraits des documents" in req.json["messages"][1]["content"]
    check_audit(only_audit(tmp_path / "llm"), ans, "alice", question)

    extractive = service(corpus, tmp_path / "ext").ask(question, "alice")
    assert extractive.extractive and extractive.reponse == REFUSAL
    assert extractive.controles == (CONTROL_REFUSAL,) and extractive.sources == ()
    check_audit(only_audit(tmp_path / "ext"), extractive, "alice", question)


# ----------------------------------------------------------------------------- the judge


def _slow_judge(release: threading.Event) -> Callable[[Request], Any]:
    def handler(req: Request) -> Any:
        release.wait(10)
        return 200, _message(GROUNDED, model=JUDGE_MODEL)

    return handler


JUDGE_SHAPES = [
    ("plain", (200, _message(GROUNDED, model=JUDGE_MODEL)), True, "effectuee"),
    (
        "think-prefix",
        (200, _message('<think>CHF 4 200 {"ancree": true} ?</think>\n{"ancree": false, "affirmations_non_sourcees": ["35 postes"]}', model=JUDGE_MODEL)),
        False,
        "effectuee",
    ),
    (
        "fenced",
        (200, _message('Verdict :\n```json\n{"ancree": false, "affirmations_non_sourcees": ["CHF 4 200 HT"]}\n```', model=JUDGE_MODEL)),
        False,
        "effectuee",
    ),
    ("thinking-only", (200, _message("", thinking=f"Je vérifie chaque montant. {GROUNDED}", model=JUDGE_MODEL)), True, "effectuee"),
    ("garbage", (200, _message("Je ne sais pas juger cette réponse.", model=JUDGE_MODEL)), None, "non_effectuee"),
    ("timeout", "slow", None, "non_effectuee"),
]


@pytest.mark.parametrize(("shape", "judge", "ancree", "verification"), JUDGE_SHAPES, ids=[s[0] for s in JUDGE_SHAPES])
def test_judge_output_shapes(
    corpus: Synced, srv: ScriptedServer, tmp_path: Path, shape: str, judge: Any, ancree: bool | None, verification: str
) -> None:
    release = threading.Event()
    script(srv, CASE1, _slow_judge(release) if judge == "slow" else judge)
    svc = service(corpus, tmp_path, srv, judge={"timeout_s": 0.3} if judge == "slow" else None)
    try:
        ans = svc.ask(Q_BAUMONT, "alice")
    finally:
        release.set()
        svc.close()
    assert ans.ancree is ancree and ans.verification == verification
    assert ans.controles == ((CONTROL_JUDGE,) if ancree is False else ())
    if ancree is False:
        assert ans.unsourced
    assert ans.reponse.count(f"[{BAUMONT} : ") == 2  # the answer is returned whatever the verdict
    assert len(chats(srv, JUDGE_MODEL)) == 1
    line = only_audit(tmp_path)
    check_audit(line, ans, "alice", Q_BAUMONT)
    assert line["unsourced"] == list(ans.unsourced)


# ----------------------------------------------------------------------------- citations


def test_bracketed_file_name_recognised_and_km_h_ignored(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    raw = (
        f"Le devis de formation s'élève à CHF 6 500 HT pour deux journées [{DEVIS}]. "
        f"La navette roule à 50 [km/h] en ville [{DEVIS}]."
    )
    script(srv, raw, GROUNDED)
    q = "Quel est le montant du devis de formation ?"
    ans = service(corpus, tmp_path, srv).ask(q, "emma")
    assert ans.ancree is True and ans.controles == () and ans.invented == ()
    assert [s.filename for s in ans.sources] == [DEVIS]
    assert ans.reponse.count(f"[{DEVIS} : `{RH_UNC}`]") == 2
    assert "50 [km/h] en ville" in ans.reponse
    check_audit(only_audit(tmp_path), ans, "emma", q)


def test_yevi_doc_id_chunk_citation_is_grounded(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    raw = (
        "Le contrat de formation continue prend effet le 1er janvier 2026 pour une durée de "
        "vingt-quatre mois ; il est reconductible tacitement par périodes de douze mois, sauf "
        "résiliation moyennant un préavis de trois mois [contrat_01#0]."
    )
    assert len(raw) > 200
    script(srv, raw, GROUNDED)
    q = "Quelle est la durée du contrat de formation continue ?"
    ans = service(corpus, tmp_path, srv).ask(q, "emma")
    assert ans.ancree is True and ans.controles == () and ans.invented == ()
    assert [s.filename for s in ans.sources] == ["contrat_01.md"]
    assert f"[contrat_01#0 : `{RH_UNC}`]" in ans.reponse
    line = only_audit(tmp_path)
    check_audit(line, ans, "emma", q)
    assert line["cited"] == ["contrat_01.md"]


def test_enrichment_happens_after_the_checks(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    raw = f"Le forfait mensuel du contrat Baumont Industries s'élève à CHF 4 200 HT [{BAUMONT}]."
    script(srv, raw, GROUNDED)
    q = "Quel est le forfait mensuel du contrat de maintenance de Baumont Industries ?"
    ans = service(corpus, tmp_path, srv).ask(q, "bruno")  # bruno reads the share copy only
    assert ans.ancree is True and ans.raw == raw
    assert ans.reponse == raw.replace(f"[{BAUMONT}]", f"[{BAUMONT} : `{CLIENTS_UNC}`]")
    (judged,) = chats(srv, JUDGE_MODEL)
    content = judged.json["messages"][1]["content"]
    assert f"Réponse à vérifier :\n{raw}" in content
    assert "SRV-FICHIERS" not in content and " : `" not in content
    check_audit(only_audit(tmp_path), ans, "bruno", q)


# ----------------------------------------------------------------------------- streaming, failures


def test_stream_gives_the_same_final_answer(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    script(srv, CASE1, GROUNDED)
    svc = service(corpus, tmp_path, srv)
    asked = svc.ask(Q_BAUMONT, "alice")
    *pieces, final = list(svc.stream(Q_BAUMONT, "alice"))
    assert len(pieces) > 3 and all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == final.raw == asked.raw == CASE1
    assert isinstance(final, Answer) and final.reponse == asked.reponse
    assert (final.ancree, final.controles, final.verification, final.sources) == (
        asked.ancree, asked.controles, asked.verification, asked.sources,
    )  # fmt: skip
    streamed = chats(srv, ANSWER_MODEL)[1].json
    assert streamed["stream"] is True
    answer, start, outcome = audit_lines(tmp_path)
    assert [answer["kind"], start["kind"], outcome["kind"]] == ["answer", "start", "outcome"]
    assert start["id"] == outcome["id"] != answer["id"] and "ancree" not in start
    _one, two = questions(tmp_path)
    check_audit(two, final, "alice", Q_BAUMONT)


def test_model_failure_is_raised_and_audited(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    script(srv, (500, {"error": "model requires more system memory"}), GROUNDED)
    with pytest.raises(LlmError, match="system memory"):
        service(corpus, tmp_path, srv).ask(Q_BAUMONT, "alice")
    line = only_audit(tmp_path)
    assert line["error"] == ERROR_MODEL and line["ancree"] is None and line["verification"] == "non_effectuee"
    assert line["sources"] and line["question"] == Q_BAUMONT


def test_abandoned_stream_is_audited(corpus: Synced, srv: ScriptedServer, tmp_path: Path) -> None:
    script(srv, CASE1, GROUNDED)
    gen = service(corpus, tmp_path, srv).stream(Q_BAUMONT, "alice")
    first = next(gen)
    assert first and CASE1.startswith(first)  # the last, unfinished word is held back
    gen.close()
    start, outcome = audit_lines(tmp_path)
    assert (start["kind"], outcome["kind"]) == ("start", "outcome") and start["id"] == outcome["id"]
    assert outcome["error"] == ERROR_INTERRUPTED and outcome["ancree"] is None
    assert chats(srv, JUDGE_MODEL) == []


# ----------------------------------------------------------------------------- extractive mode

EXPECT_SOURCE = [q for q in QUESTIONS if "expect_source" in q]


@pytest.mark.parametrize("case", EXPECT_SOURCE, ids=lambda q: f"{q['as']}:{q['expect_source']}")
def test_extractive_answers_quote_the_expected_source(corpus: Synced, tmp_path: Path, case: dict) -> None:
    ans = service(corpus, tmp_path).ask(case["q"], case["as"])
    assert ans.extractive and ans.raw.startswith(EXTRACTIVE_HEADER)
    assert ans.ancree is True and ans.controles == () and ans.verification == "non_requise"
    assert f"\n[{case['expect_source']}" in ans.raw
    assert case["expect_source"] in [s.filename for s in ans.sources]
    assert any(fact in ans.raw for fact in case["facts"]), ans.raw
    quoted = [line for line in ans.raw.splitlines() if line.startswith(">")]
    assert quoted, "the answer quotes extracts"
    first_citation = next(line for line in ans.raw.splitlines() if line.startswith("["))  # follows the first quote
    assert case["expect_source"] in first_citation, "the first quote comes from the expected source"
    check_audit(only_audit(tmp_path), ans, case["as"], case["q"])


def test_extractive_quotes_the_answering_passage_first(corpus: Synced, tmp_path: Path) -> None:
    """The fee's chunk does not name the client (its file name does): it must come before the
    contract's title page, and before the superseded 2024 version in ARCHIVES."""
    ans = service(corpus, tmp_path).ask(Q_ROCHAT, "alice")
    head, _, rest = ans.raw.partition("\n\n[")  # the first quote, then its citation paragraph
    first_quote, first_citation = head.split("\n\n", 1)[1], "[" + rest.splitlines()[0]
    assert "CHF 3 840 HT" in first_quote and first_citation == "[03_Contrat_Maintenance_Etude_Rochat.docx]"


@pytest.mark.parametrize(
    ("question", "user"),
    [(Q_AUSTRALIA, "alice"), (Q_DUPONT, "alice"), (Q_ROCHAT, "bruno")],
    ids=["australia", "dupont", "bruno-rochat"],
)
def test_extractive_refusals(corpus: Synced, tmp_path: Path, question: str, user: str) -> None:
    ans = service(corpus, tmp_path).ask(question, user)
    assert ans.reponse == REFUSAL and ans.extractive
    assert ans.controles == (CONTROL_REFUSAL,) and ans.sources == () and ans.ancree is True
    line = only_audit(tmp_path)
    check_audit(line, ans, user, question)
    assert line["sources"], "retrieval did find extracts: the refusal is the extractive gate's"
    if user == "chloe":
        assert "test-deny-explicite.docx" not in {s["filename"] for s in line["sources"]}


def test_extractive_gate_counts_words_only_in_what_the_user_may_read(corpus: Synced, tmp_path: Path) -> None:
    """chloe may not read the server-room code's document: its words (« code », « salle »),
    rare in the whole index, once made her answer a refusal — telling her they exist in a document
    she can't see. The gate's frequencies are those of her readable chunks: her answer is the one
    computed with frequencies the test counts itself over what visibility.json lets her read."""
    from support.corpus import readable_paths

    from ancre.index.bm25 import Bm25Entry, Bm25Index
    from ancre.query.context import build_context
    from ancre.query.llm import ExtractiveAnswerer

    rt = corpus.rt
    mine = readable_paths("chloe")
    entries = [
        Bm25Entry(p.id, c, p.payload.text, p.payload.filename, p.payload.acl_allow, p.payload.acl_deny)
        for c in COLLECTIONS for p in rt.store.scroll(c) if (p.payload.source, p.payload.path) in mine
    ]
    assert entries and not any(e.filename == "test-deny-explicite.docx" for e in entries)
    hers = Bm25Index.build(entries)
    principals = rt.directory.principals("chloe")
    context = build_context(rt.retriever.retrieve(Q_SERVER_ROOM, principals).results, rt.store, principals,
                            corpus.settings().context)
    expected = ExtractiveAnswerer().answer(context, Q_SERVER_ROOM, hers.term_stats)
    ans = service(corpus, tmp_path).ask(Q_SERVER_ROOM, "chloe")
    assert ans.raw == expected
    assert "test-deny-explicite.docx" not in ans.raw
    line = only_audit(tmp_path)
    assert "test-deny-explicite.docx" not in {s["filename"] for s in line["sources"]}


def test_extractive_stream_is_one_piece(corpus: Synced, tmp_path: Path) -> None:
    svc = service(corpus, tmp_path)
    text, final = list(svc.stream(Q_ROCHAT, "alice"))
    assert text == final.raw and final.extractive and f"[{ROCHAT} : `" in final.reponse


# ----------------------------------------------------------------------------- CLI and Runtime


def test_cli_ask_json(corpus: Synced, srv: ScriptedServer) -> None:
    script(srv, CASE1, GROUNDED)
    llm_config = corpus.root / "ancre-llm.toml"
    llm_config.write_text(
        corpus.config.read_text(encoding="utf-8")
        + f'\n[llm]\nkind = "ollama"\nurl = "{srv.url}"\n[audit]\npseudonymize = true\n',
        encoding="utf-8",
    )
    runner = CliRunner()
    corpus.release()
    try:
        ext = runner.invoke(app, ["ask", Q_ROCHAT, "--as", "alice", "--json", "--config", str(corpus.config)])
        refusal = runner.invoke(app, ["ask", Q_AUSTRALIA, "--as", "alice", "--json", "--config", str(corpus.config)])
        llm = runner.invoke(app, ["ask", Q_BAUMONT, "--as", "alice", "--json", "--config", str(llm_config)])
        human = runner.invoke(app, ["ask", Q_ROCHAT, "--as", "alice", "--config", str(corpus.config)])
    finally:
        corpus.reopen()
    assert ext.exit_code == 0, ext.output
    out = json.loads(ext.stdout)
    assert set(out) == {"reponse", "sources", "ancree", "controles", "verification", "extractive", "documents_ecartes"}
    assert out["documents_ecartes"] == []  # every document's rights were checked live
    assert out["extractive"] is True and out["ancree"] is True and out["verification"] == "non_requise"
    assert out["reponse"].startswith(EXTRACTIVE_HEADER) and "CHF 3 840 HT" in out["reponse"]
    rochat = next(s for s in out["sources"] if s["filename"] == ROCHAT)
    assert rochat == {"filename": ROCHAT, "location": "\\\\SRV-FICHIERS\\Partage\\DIRECTION\\", "path": f"DIRECTION/{ROCHAT}"}
    assert f"[{ROCHAT} : `\\\\SRV-FICHIERS\\Partage\\DIRECTION\\`]" in out["reponse"]

    assert json.loads(refusal.stdout) == {
        "reponse": REFUSAL, "sources": [], "ancree": True, "controles": [CONTROL_REFUSAL],
        "verification": "non_requise", "extractive": True, "documents_ecartes": [],
    }  # fmt: skip

    assert llm.exit_code == 0, llm.output
    out = json.loads(llm.stdout)
    assert out["ancree"] is True and out["verification"] == "effectuee" and out["extractive"] is False
    assert [s["filename"] for s in out["sources"]] == [BAUMONT]
    assert len(chats(srv, ANSWER_MODEL)) == 1 and len(chats(srv, JUDGE_MODEL)) == 1

    assert human.exit_code == 0 and "CHF 3 840 HT" in human.stdout and "DIRECTION" in human.stdout
    assert "ancrée : oui" in human.stdout

    # the Runtime's audit log: <data_dir>/audit, one line per question, the user pseudonymised
    # with the key created in <data_dir>/audit.key when the config asks for it
    lines = audit_lines(corpus.root / "data" / "audit")
    assert [line["question"] for line in lines] == [Q_ROCHAT, Q_AUSTRALIA, Q_BAUMONT, Q_ROCHAT]
    assert [line["user"] for line in lines][:2] == ["alice", "alice"]
    assert lines[2]["user"].startswith("hmac-sha256:") and (corpus.root / "data" / "audit.key").stat().st_size == 32
    assert all(oct(f.stat().st_mode & 0o777) == "0o600" for f in (corpus.root / "data" / "audit").iterdir())


def test_unknown_identity_is_logged_for_the_admin(caplog: pytest.LogCaptureFixture) -> None:
    """An identity the directory does not know gets the refusal (fail closed) and a warning in
    the logs, so a mis-mapped e-mail can be diagnosed."""
    import logging

    from support.corpus import CORPUS

    from ancre.acl.directory import FileDirectory
    from ancre.config import Settings
    from ancre.query.answer import CONTROL_UNKNOWN_USER, AnswerService

    class _NoRetrieval:
        def retrieve(self, *a, **k):  # pragma: no cover - must not be reached for no principals
            raise AssertionError("retrieval must not run without principals")

    svc = AnswerService(_NoRetrieval(), None, FileDirectory(CORPUS / "directory.json"), Settings())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="ancre.query"):
        ans = svc.ask("Forfait de l'étude Rochat ?", "mallory@evil.example")
    assert ans.sources == () and "ne figure pas" in ans.reponse
    assert ans.controles == ("aucun_extrait", CONTROL_UNKNOWN_USER)  # the API tells him (tests/unit/test_api_openwebui.py)
    assert "mallory@evil.example" in caplog.text and "unknown to the directory" in caplog.text
