"""Issue 41 end to end, on a share written from templates (:mod:`support.template_corpus`, seeded:
12 clients and 12 people per template, lookalike families, 4 archived contracts, clients that do not
exist) synced with the real e5 model into the embedded store:

- the extractive answers meet the issue's targets per kind of question (:mod:`support.template_eval`;
  the full share's table is printed by ``make bench``'s eval): the asked client's document quoted
  first, no other client's figure, replaced versions labelled and quoted after the one in force, no
  two subjects grouped as versions, every missing client refused, a list that says it is partial;
- through the API served by uvicorn on 127.0.0.1, with a scripted Ollama on 127.0.0.1 answering
  (no judge): a refusal followed by an invented figure is blocked (``/query`` 422 with the figure
  in ``faits_non_sources``), ``/v1`` carries the warning naming it, the audit records the
  unsupported span; another client's figure under the asked client's name likewise; a faithful
  answer passes; a follow-up whose condensed question turns a missing client into its lookalike is
  answered from the rule's question; a list question says how many documents matched;
- an index built before subjects (its state rows without a chunk format) is re-indexed by the
  next pass, every point then carrying its subject and header.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.httpserver import Request, ScriptedServer
from support.scripted_ollama import ANSWER_MODEL, script
from support.template_corpus import TemplateCorpus, chf, generate
from support.template_eval import evaluate

from ancre.api.app import create_app
from ancre.app.runtime import Runtime
from ancre.app.server import ApiServer
from ancre.config import Settings, load_settings
from ancre.index.store import PointWrite
from ancre.models import CHUNK_FORMAT, COLLECTIONS
from ancre.query.prompt import REFUSAL, SYSTEM_PROMPT

KEY = "test-service-key-0123456789"
WHO = {"Authorization": f"Bearer {KEY}", "X-OpenWebUI-User-Email": "alice.martin@axonix.ch"}


@dataclass
class Model:
    """What the scripted model answers: ``answer`` to the answer prompt, ``condensed`` to the
    condense prompt."""

    answer: str = ""
    condensed: str = ""

    def __call__(self, req: Request) -> str:
        return self.answer if req.json["messages"][0]["content"] == SYSTEM_PROMPT else self.condensed


@dataclass
class Served:
    settings: Settings
    url: str
    rt: Runtime
    corpus: TemplateCorpus
    model: Model

    def audit(self) -> list[dict[str, Any]]:
        d = Path(self.settings.data_dir) / "audit"
        return [json.loads(line) for f in sorted(d.glob("audit-*.jsonl")) for line in f.read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def srv() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, srv: ScriptedServer) -> Iterator[Served]:
    corpus = generate(tmp_path_factory.mktemp("templates"), seed=41, per_template=12, archived=4)
    settings = load_settings(
        corpus.write_config(), llm={"kind": "ollama", "url": srv.url, "model": ANSWER_MODEL}, judge={"enabled": False},
        api={"api_key": KEY},
    )
    rt = Runtime(settings)
    for conn in rt.connectors():
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.failed == 0, rep
    server = ApiServer(create_app(rt.query_core, settings, not_ready=rt.index_not_ready)).start()
    model = Model()
    script(srv, model)
    try:
        yield Served(settings, server.url, rt, corpus, model)
    finally:
        server.stop()
        rt.close()


def test_the_extractive_answers_meet_the_targets(served: Served) -> None:
    stats = {k: s.row() for k, s in evaluate(served.rt, served.corpus).items()}
    assert set(stats) >= {"fee", "duration", "code", "version", "offer", "salary", "missing", "list"}
    for kind in ("fee", "duration", "code"):
        assert stats[kind]["first_source_right"] >= 0.95, stats[kind]
    for kind in ("fee", "duration", "code", "version", "offer", "salary"):
        assert stats[kind]["other_figures"] == 0, stats[kind]
        assert stats[kind]["first_source_right"] == 1.0, stats[kind]
    for row in stats.values():
        assert row["versions_wrong"] == 0 and row["superseded_first"] == 0, row
        if row["superseded_labelled"]:
            done, quoted = row["superseded_labelled"].split("/")
            assert done == quoted, row
    assert stats["version"]["superseded_labelled"] == "4/4"
    missing = len(served.corpus.missing) + len(served.corpus.missing_people)
    assert stats["missing"]["refused"] == f"{missing}/{missing}" and missing >= 5
    for kind in ("fee", "duration", "code", "version", "offer", "salary"):
        assert stats[kind]["refused"] == f"0/{stats[kind]['questions']}"
    assert stats["list"]["listed"]


def _ask(served: Served, question: str, answer: str) -> httpx.Response:
    served.model.answer = answer
    return httpx.post(f"{served.url}/query", json={"question": question}, headers=WHO, timeout=120)


def _pair(served: Served) -> tuple[Any, Any]:
    fam = [c for c in served.corpus.clients if c.family == 0]
    return fam[0], fam[1]


def test_a_refusal_followed_by_figures_is_blocked_warned_and_audited(served: Served) -> None:
    a, b = _pair(served)
    q = f"Quel est le forfait mensuel du contrat de maintenance {a.of} ?"
    invented = f"{REFUSAL} Toutefois, le forfait mensuel est de {chf(b.fee)}."
    r = _ask(served, q, invented)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["ancree"] is False and body["controles"] == ["fait_non_source"] and "refus" not in body["controles"]
    assert [(f["texte"], f["raison"], f["documents"]) for f in body["faits_non_sources"]] == [(chf(b.fee), "non_cite", [])]
    line = served.audit()[-1]
    assert line["ancree"] is False and line["controls"] == ["fait_non_source"]
    assert [(f["text"], f["reason"]) for f in line["unsupported_facts"]] == [(chf(b.fee), "non_cite")]
    # /v1: the answer is given, with the warning naming the figure
    r = httpx.post(f"{served.url}/v1/chat/completions", headers=WHO, timeout=120,
                   json={"model": "ancre", "messages": [{"role": "user", "content": q}]})
    content = r.json()["choices"][0]["message"]["content"]
    warning = content.rsplit("\n", 1)[-1]
    assert warning.startswith("⚠️ Attention") and f"« {chf(b.fee)} »" in warning
    assert r.json()["ancre"]["faits_non_sources"][0]["raison"] == "non_cite"
    # the refusal alone is a refusal
    r = _ask(served, q, REFUSAL)
    assert r.status_code == 200 and r.json()["controles"] == ["refus"]


def test_another_clients_figure_under_the_asked_name_is_blocked(served: Served) -> None:
    a, b = _pair(served)
    q = f"Quel est le forfait mensuel du contrat de maintenance {a.of} ?"
    r = _ask(served, q, f"Le forfait mensuel s'élève à {chf(b.fee)} [{a.filename}].")
    assert r.status_code == 422 and [f["texte"] for f in r.json()["faits_non_sources"]] == [chf(b.fee)]
    r = _ask(served, q, f"Le forfait mensuel s'élève à {chf(a.hourly)} [{a.filename}].")  # the hourly rate
    assert r.status_code == 422 and r.json()["faits_non_sources"][0]["raison"] == "autre_champ"
    r = _ask(served, q, f"Le forfait mensuel {a.of} s'élève à {chf(a.fee)} [{a.filename}].")
    assert r.status_code == 200, r.text
    assert [s["filename"] for s in r.json()["sources"]][:1] == [a.filename]


def test_a_follow_up_never_turns_a_missing_client_into_its_lookalike(served: Served) -> None:
    asked, real = next(iter(served.corpus.near.items()))  # « de la Pharmacie Bartholet », « Pharmacie Bertholet »
    base = next(c for c in served.corpus.clients if c.name == real)
    first = f"Quel est le forfait mensuel du contrat de maintenance {base.of} ?"
    missing = asked.removeprefix("de la ").removeprefix("du ").removeprefix("de l'")
    served.model.condensed = first  # the model turns the missing client back into the real one
    served.model.answer = REFUSAL
    messages = [{"role": "user", "content": first}, {"role": "assistant", "content": "…"},
                {"role": "user", "content": f"Et {missing} ?"}]
    r = httpx.post(f"{served.url}/v1/chat/completions", headers=WHO, timeout=120, json={"model": "ancre", "messages": messages})
    assert r.status_code == 200, r.text
    resolved = r.json()["ancre"]["question_traitee"]
    assert resolved is not None and missing.split()[-1] in resolved and base.name not in resolved
    line = served.audit()[-1]
    assert line["resolution"]["method"] == "regle" and line["resolved_question"] == resolved


def test_a_list_says_it_is_partial(served: Served) -> None:
    served.model.answer = f"Les contrats trouvés sont ceux des clients cités [{served.corpus.clients[0].filename}]."
    r = httpx.post(f"{served.url}/query", json={"question": "Liste tous les contrats de maintenance"}, headers=WHO, timeout=120)
    body = r.json()
    listing = body["liste"]
    assert listing["correspondances"] == len(listing["documents"]) >= 1
    assert listing["passages"] >= listing["correspondances"]
    assert "peut être incomplète" in listing["note"] and f"{listing['correspondances']} documents" in listing["note"]
    assert set(listing["documents"]) <= {c.filename for c in served.corpus.clients} | {
        c.archived.filename for c in served.corpus.clients if c.archived}


def test_an_index_built_before_subjects_is_reindexed_by_the_next_pass(tmp_path: Path) -> None:
    corpus = generate(tmp_path, seed=5, per_template=9, archived=2, missing=2)
    for sub in ("OFFRES", "RH", "ARCHIVES"):  # a few documents are enough
        for p in (corpus.share / sub).iterdir():
            p.unlink()
    rt = Runtime(load_settings(corpus.write_config()))
    try:
        (conn,) = rt.connectors()
        first = rt.engine.run_pass(conn)
        assert first.new == 9 and first.failed == 0
        chunks = 0
        for row in rt.state.items("partage").values():  # what an older ancre left: no chunk format,
            assert row.chunking == CHUNK_FORMAT  # points without subject nor header, vectors of the text alone
            rt.state.put(replace(row, chunking=None))
            vectors = rt.store.vectors_of(row.collection, row.doc_id)
            old = [p for p in rt.store.scroll(row.collection) if p.payload.doc_id == row.doc_id]
            rt.store.upsert(row.collection, [
                PointWrite(p.id, vectors[p.payload.embedded], replace(p.payload, subject=None, header="")) for p in old
            ])
            chunks += len(old)
        assert all(p.payload.subject is None for c in COLLECTIONS for p in rt.store.scroll(c))
        again = rt.engine.run_pass(conn)
        assert again.changed == 9 and again.embedded_chunks == chunks and again.reused_chunks == 0
        assert all(row.chunking == CHUNK_FORMAT for row in rt.state.items("partage").values())
        points = [p for c in COLLECTIONS for p in rt.store.scroll(c)]
        assert points and all(p.payload.subject is not None and p.payload.header for p in points)
        assert rt.engine.run_pass(conn).changed == 0  # settled: nothing more to do
    finally:
        rt.close()
