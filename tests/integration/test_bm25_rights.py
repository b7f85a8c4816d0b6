"""Rights-aware keyword candidates, end to end (folder source, e5-local, embedded store):
60 technician notes that a commercial user may not read repeat a code; the one commercial note he
may read mentions it once. BM25 must find *his* note (``found_by`` has ``bm25``) and rank it first,
and he must never see a technician note — with BM25 in the embedded store's text index (the
default), with the BM25 snapshot and its rights mask (``[store] bm25 = "snapshot"``), and with
BM25 kept in Qdrant as sparse vectors (qdrant-client's local mode standing in for a server)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.corpus import CORPUS

from ancre.app.runtime import Runtime
from ancre.config import load_settings

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

CODE = "RX-7731-KAPPA"
COMMERCIAL_NOTE = "offre-client-lemanic.md"


def _write_share(root: Path, store: str) -> None:
    tech, com = root / "share" / "TECHNIQUE", root / "share" / "COMMERCIAL"
    tech.mkdir(parents=True)
    com.mkdir(parents=True)
    for i in range(60):
        (tech / f"note-intervention-{i:02d}.md").write_text(
            f"# Intervention {i}\n\nRelais {CODE} remplacé. Contrôle du relais {CODE} après "
            f"remplacement : {CODE} conforme. Ticket {1000 + i}.\n",
            encoding="utf-8",
        )
    (com / COMMERCIAL_NOTE).write_text(
        "# Offre commerciale Lémanic Transports\n\nNous proposons au client le renouvellement de "
        "son parc de passerelles industrielles, la formation de deux opérateurs et un contrat de "
        "support de trois ans. Le devis comprend la fourniture, la mise en service et la "
        f"documentation. Le modèle de passerelle retenu porte la référence {CODE}. Les prix "
        "s'entendent hors taxes, livraison comprise, payables à trente jours.\n",
        encoding="utf-8",
    )
    shutil.copy2(CORPUS / "directory.json", root / "directory.json")
    manifest = {
        "share": "Partage",
        "unc_root": "\\\\SRV-FICHIERS\\Partage",
        "entries": {
            "": {"protected": True, "aces": [["ALLOW", "Administrators", "FULL", "OI|CI"]]},
            "TECHNIQUE": {"aces": [["ALLOW", "GG_Techniciens", "READ", "OI|CI"]]},
            "COMMERCIAL": {"aces": [["ALLOW", "GG_Commercial", "READ", "OI|CI"]]},
        },
    }
    (root / "acl.json").write_text(json.dumps(manifest), encoding="utf-8")
    (root / "ancre.toml").write_text(
        '''data_dir = "data"
[embedder]
kind = "e5-local"
[store]
{store}
[directory]
kind = "file"
path = "directory.json"
[[sources]]
id = "partage"
root = "share"
unc_root = '\\\\SRV-FICHIERS\\Partage'
acl_manifest = "acl.json"
'''.replace("{store}", store),
        encoding="utf-8",
    )


STORES = {
    "edge": 'kind = "edge"',  # the default: embedded store, BM25 in its text index, rights in the query
    "snapshot": 'kind = "edge"\nbm25 = "snapshot"',  # BM25 snapshot with the rights mask
    "qdrant": 'kind = "local"\nbm25 = "qdrant"',  # BM25 as sparse vectors, rights in the query
}


@pytest.fixture(scope="module", params=sorted(STORES))
def rt(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("narrow")
    _write_share(root, STORES[request.param])
    runtime = Runtime(load_settings(root / "ancre.toml"))
    for conn in runtime.connectors():
        rep = runtime.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.failed == 0, rep
    assert runtime.settings.query.candidates == 30, "the 60 notes outnumber the candidates"
    yield runtime
    runtime.close()


@pytest.mark.parametrize("question", [CODE, f"Quelle est la référence {CODE} ?"])
def test_narrow_user_finds_his_note_by_bm25_first(rt: Runtime, question: str) -> None:
    david = rt.directory.principals("david")  # GG_Commercial: reads the one commercial note
    res = rt.retriever.retrieve(question, david, limit=10)
    assert res.results, "david reads the commercial note"
    first = res.results[0]
    assert first.filename == COMMERCIAL_NOTE
    assert "bm25" in first.found_by, first.found_by
    assert all(r.path.startswith("COMMERCIAL/") for r in res.results), [r.path for r in res.results]
    assert res.bm25_dropped == 0, "the snapshot's mask proposed nothing the store then refused"


def test_the_technician_still_gets_the_notes(rt: Runtime) -> None:
    bruno = rt.directory.principals("bruno")  # GG_Techniciens
    res = rt.retriever.retrieve(CODE, bruno, limit=60)
    assert len(res.results) >= 30
    assert all(r.path.startswith("TECHNIQUE/") for r in res.results)
    assert sum("bm25" in r.found_by for r in res.results) == 30


def test_a_user_who_reads_neither_gets_nothing(rt: Runtime) -> None:
    assert rt.retriever.retrieve(CODE, rt.directory.principals("emma"), limit=10).results == ()
