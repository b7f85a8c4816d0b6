"""query/thinking.py: a streamed answer's reasoning blocks are removed whatever the cut between its
pieces — the released pieces, joined, equal the whole text's :func:`strip_thinking` (a property
test over random texts and random chunkings), and that rule is checked on the shapes servers send
(vLLM docs, "Reasoning Outputs": Qwen3 with and without thinking, DeepSeek-R1 without a parser)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ancre.query.thinking import ThinkFilter, strip_thinking

# texts built from the pieces that matter: tags (in any ASCII case, or cut), whitespace, letters,
# a lone "<", Unicode letters whose case folding is not ASCII
PARTS = st.sampled_from([
    "<think>", "</think>", "<THINK>", "</Think>", "<thi", "nk>", "</", "think>", "<", ">", " ", "\n", "\n\n",
    "a", "Le forfait", " CHF 3 840 HT", "ı", "İ", "<thinking>", "[f.docx]", "\u00a0",
])
TEXTS = st.lists(PARTS, max_size=30).map("".join)


def run(text: str, cuts: list[int]) -> str:
    f = ThinkFilter()
    bounds = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    out = [f.feed(text[a:b]) for a, b in itertools.pairwise(bounds)]
    return "".join(out) + f.flush()


@settings(max_examples=2000, deadline=None)
@given(TEXTS, st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_any_chunking_releases_the_stripped_text(text: str, cuts: list[int]) -> None:
    assert run(text, cuts) == strip_thinking(text)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_one_character_at_a_time(text: str) -> None:
    assert run(text, list(range(len(text)))) == strip_thinking(text)


def test_nothing_of_a_block_is_released_before_it_is_known_to_be_one() -> None:
    f = ThinkFilter()
    assert f.feed("Réponse <thi") == "Réponse "  # "<thi" may start a tag: held
    assert f.feed("nk>le forfait est faux</th") == ""
    assert f.feed("ink>\n\nLe forfait s'élève à CHF 3 840 HT.") == "Le forfait s'élève à CHF 3 840 HT."
    assert f.flush() == "" and f.removed


def test_server_shapes() -> None:
    # Qwen3 with enable_thinking=False still writes an empty block first
    assert strip_thinking("<think>\n\n</think>\n\nLe forfait est de CHF 3 840 HT.") == "Le forfait est de CHF 3 840 HT."
    # a thinking model served without a reasoning parser: the block in the content
    assert strip_thinking("<think>Le contrat dit 3 840…</think>\nCHF 3 840 HT [a.docx]") == "CHF 3 840 HT [a.docx]"
    # cut by the token limit while thinking: nothing of it is an answer
    assert strip_thinking("<think>Je réfléchis encore") == ""
    # the opening tag was in the prompt: the stray closing tag goes, the text around stays
    assert strip_thinking("Réponse </think> finale") == "Réponse finale"
    # not a tag
    assert strip_thinking("a < b et <thinking> reste") == "a < b et <thinking> reste"
