"""Principal providers on the query path, over the synced Axonix corpus with the real
embedder and store: the principals a query runs with are the union of every provider's (the
Runtime's hook for providers declared by sources), and a provider that fails makes the question
fail closed — no answer, no document, no audit line of an answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from support.corpus import copy_corpus, write_config
from support.providers import DownProvider, StaticProvider

from ancre.acl.providers import PrincipalProvider
from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.errors import DirectoryError

GG_RH = "sid:S-1-5-21-1004336348-1177238915-682003330-1105"
SALARIES = "RH/Grille_Salariale_2026.docx"
Q_SALARIES = "grille salariale 2026 des collaborateurs"


class _WithProviders(Runtime):
    """A runtime whose sources declared ``extra`` principal providers."""

    extra: ClassVar[list[PrincipalProvider]] = []

    def principal_providers(self) -> list[PrincipalProvider]:
        return list(self.extra)


def _runtime(config: Path, *extra: PrincipalProvider) -> Runtime:
    rt = _WithProviders(load_settings(config))
    rt.extra = list(extra)
    return rt


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    cfg = write_config(copy_corpus(tmp_path_factory.mktemp("providers")))
    with Runtime(load_settings(cfg)) as rt:
        for conn in rt.connectors():
            assert rt.engine.run_pass(conn).outcome == "ok"
    yield cfg


def _paths(rt: Runtime, user: str) -> set[str]:
    return {r.path for r in rt.retriever.retrieve(Q_SALARIES, rt.principals.principals(user), limit=20).results}


def test_a_second_provider_adds_to_what_the_query_reads(config: Path) -> None:
    with _runtime(config) as rt:
        assert rt.principals.names == ("directory",)
        assert SALARIES not in _paths(rt, "bruno")  # GG_Techniciens: RH is not his
        assert SALARIES in _paths(rt, "emma")  # GG_RH
    # another provider says bruno holds GG_RH: the same query now reads the RH document for him
    with _runtime(config, StaticProvider("entra", {"bruno": frozenset({GG_RH})})) as rt:
        assert rt.principals.names == ("directory", "entra")
        assert rt.principals.origins("bruno")[GG_RH] == "entra"
        assert SALARIES in _paths(rt, "bruno")
        ans = rt.answer_service.ask(Q_SALARIES, "bruno")
        assert any(s.path == SALARIES for s in ans.sources), ans


def test_a_failing_provider_fails_the_question_closed(config: Path) -> None:
    audit = load_settings(config).data_dir / "audit"
    before = sorted(p.read_text() for p in audit.glob("*")) if audit.is_dir() else []
    with _runtime(config, DownProvider()) as rt:
        with pytest.raises(DirectoryError, match="unreachable"):
            rt.principals.principals("emma")  # the directory alone would give her GG_RH
        with pytest.raises(DirectoryError, match="unreachable"):
            rt.answer_service.ask(Q_SALARIES, "emma")
        with pytest.raises(DirectoryError):
            rt.answer_service.stream(Q_SALARIES, "emma").__next__()
    after = sorted(p.read_text() for p in audit.glob("*")) if audit.is_dir() else []
    assert after == before  # no answer was given, so none was recorded


def test_an_identity_no_provider_knows_reads_nothing(config: Path) -> None:
    with _runtime(config, StaticProvider("entra", {"bruno": frozenset({GG_RH})})) as rt:
        assert rt.principals.principals("mallory") == frozenset()
        assert _paths(rt, "mallory") == set()
        ans = rt.answer_service.ask(Q_SALARIES, "mallory")
        assert ans.sources == () and "ne figure pas" in ans.reponse
