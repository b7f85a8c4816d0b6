"""Versions on a share written from templates (issue 41): only within one subject, the one in force
decided by each signal the archived contract carries — even with the archive folder taken away —,
and the extractive answer quoting one document's passages together, the one in force first."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path
from tempfile import mkdtemp

from support.template_context import context, extracts
from support.template_corpus import TemplateCorpus, chf, generate

from ancre.query.context import Context, Extract, Source, find_versions
from ancre.query.llm import ExtractiveAnswerer


@cache
def corpus() -> TemplateCorpus:
    return generate(Path(mkdtemp(prefix="ancre-template-versions-")), seed=11, per_template=14, archived=7)


def _moved(ex: tuple[Extract, ...], folder: str) -> tuple[Extract, ...]:
    """The extracts of a document as if it lay in ``folder`` (its own signals only)."""
    return tuple(replace(e, path=f"{folder}/{e.filename}", location=f"\\\\SRV\\{folder}\\") for e in ex)


def test_each_signal_alone_names_the_contract_in_force() -> None:
    """The archived contract moved next to the current one: a version suffix in its name, « remplacée »
    in its title or « remplacé » in its text is enough; with none of them (the archive folder was its
    only signal) the versions are still grouped, and said undecided rather than guessed — save for
    the later date its text states."""
    c = corpus()
    seen: set[tuple[str, ...]] = set()
    for x in (x for x in c.clients if x.archived is not None):
        assert x.archived is not None
        current = extracts(c, f"CLIENTS/{x.filename}")
        old = _moved(extracts(c, f"ARCHIVES/{x.archived.filename}"), "CLIENTS")
        if x.archived.filename == x.filename:
            old = tuple(replace(e, filename=f"Copie de {e.filename}", path=f"CLIENTS/Copie de {e.filename}") for e in old)
        sources = [Source(ex[0].filename, ex[0].doc_id, ex[0].path, ex[0].location, "documents", "", 0.0)
                   for ex in (current, old)]
        (g,) = find_versions([*current, *old], sources)
        signals = tuple(s for s in x.archived.signals if s not in ("folder", "touched"))
        seen.add(signals)
        assert g.documents[0] == x.filename and g.current == x.filename, (signals, g.reasons)
    assert {("name",), ("title",), ("text",)} <= seen


def test_the_extractive_answer_keeps_one_documents_passages_together() -> None:
    c = corpus()
    x = next(x for x in c.clients if x.archived is not None)
    assert x.archived is not None
    ctx: Context = context(c, f"ARCHIVES/{x.archived.filename}", f"CLIENTS/{x.filename}")
    text = ExtractiveAnswerer(max_quotes=4).answer(ctx, f"Quel est le forfait mensuel et le code d'accès {x.of} ?")
    current_at, old_at = text.find(chf(x.fee)), text.find(chf(x.archived.fee))
    assert 0 <= current_at < old_at
    assert text.count("**Version en vigueur (probable)**") == 1
    assert text.count("**Version antérieure (remplacée)**") == 1
    label_old = text.index("**Version antérieure (remplacée)**")
    assert current_at < label_old < old_at and x.code not in text[label_old:]  # the current code comes before
