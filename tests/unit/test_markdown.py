"""Quoted extracts render as the document reads: rendered here with markdown-it-py (CommonMark +
GFM tables), the same rules Open WebUI's renderer follows (the end-to-end test checks Open WebUI's
own rendering in Chromium)."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from ancre.query.context import Context, Extract, Source
from ancre.query.grounding import ground
from ancre.query.llm import ExtractiveAnswerer
from ancre.query.markdown import escape_line, quote_extract

MD = MarkdownIt("commonmark").enable("table")
ROCHAT = "03_Contrat_Maintenance_Etude_Rochat.docx"
CHUNK = (
    "4. Conditions financières\n"
    "Poste | Montant\n"
    "Forfait mensuel | CHF 3 840 HT\n"
    "Astreinte (par heure) | CHF 220 HT\n"
    "Le forfait mensuel s'élève à CHF 3 840 HT. Il est facturé *mensuellement* à terme échu."
)


def html(md: str) -> str:
    return MD.render(md)


def test_list_markers_headings_and_emphasis_stay_text() -> None:
    hostile = [
        "4. Conditions financières", "1) Parties", "# Titre", "## Sous-titre", "- tiret", "+ plus", "* étoile",
        "> citation", "---", "===", "*gras* et _souligné_ et **fort**", "<b>html</b> &amp; &#169;",
        "`code`", "[lien](http://x.example)", "![img](x.png)", "~~barré~~", "$x$", "    indenté", "| barre",
    ]
    for text in hostile:
        out = html(quote_extract(text))
        for tag in ("<ol", "<ul", "<h1", "<h2", "<em", "<strong", "<b>", "<code", "<a ", "<img", "<del", "<hr", "<pre"):
            assert tag not in out, (text, out)
        assert out.count("<p>") == 1, (text, out)
    # the text reads as written
    assert "4. Conditions financières" in html(quote_extract("4. Conditions financières"))
    assert "&lt;b&gt;html&lt;/b&gt; &amp;amp; &amp;#169;" in html(quote_extract("<b>html</b> &amp; &#169;"))
    assert "*gras* et _souligné_ et **fort**" in html(quote_extract("*gras* et _souligné_ et **fort**"))


def test_raw_text_stays_readable() -> None:
    assert escape_line("03_Contrat_Rochat et 2026 et 3.5 millions") == "03_Contrat_Rochat et 2026 et 3.5 millions"
    assert escape_line("4. Conditions") == "4\\. Conditions"
    assert escape_line("le dossier C:\\Axonix\\Agent des analyses") == "le dossier C:\\Axonix\\Agent des analyses"


def test_backslashes_render_as_written() -> None:
    for text in ("C:\\Axonix\\Agent", "\\\\SRV\\Partage\\", "a \\*b\\* c", "fin \\", "\\# titre"):
        out = html(quote_extract(text))
        assert out == f"<blockquote>\n<p>{text}</p>\n</blockquote>\n", (text, out)


def test_table_rows_become_a_table() -> None:
    out = html(quote_extract(CHUNK))
    assert out.startswith("<blockquote>")
    assert "<table>" in out and "<th>Poste</th>" in out and "<th>Montant</th>" in out
    assert "<td>Forfait mensuel</td>" in out and "<td>CHF 3 840 HT</td>" in out
    assert "<p>4. Conditions financières</p>" in out
    assert "<em>" not in out and "<ol" not in out


def test_ragged_rows_are_padded_and_pipes_kept() -> None:
    out = html(quote_extract("A | B | C\n1 | 2\nx|y | z"))
    assert out.count("<tr>") == 3 and out.count("<th>") == 3
    assert "<td>x|y</td>" in out


def test_extractive_answer_renders_and_stays_grounded() -> None:
    src = Source(ROCHAT, "r", "DIRECTION/" + ROCHAT, "\\\\SRV\\Partage\\DIRECTION\\", "documents", "d", 1.0)
    ctx = Context(
        extracts=(Extract(ROCHAT, "r", 3, CHUNK, src.location, src.path, "documents", 1.0),), sources=(src,))
    answer = ExtractiveAnswerer().answer(ctx)
    out = html(answer)
    assert "<table>" in out and "<ol" not in out
    assert f"<p>[{ROCHAT}]</p>" in out  # the citation is its own paragraph, after the quote
    v = ground("?", answer, ctx, extractive=True)
    assert v.ancree is True and v.cited == (ROCHAT,)


# Open WebUI 0.12.4's citation tokenizer (frontend bundle): what it links to a source
OWUI_CITATION = re.compile(r"\[(?:\d+(?:#[^,\]\s]+)?(?:,\s*\d+(?:#[^,\]\s]+)?)*)\]")


def test_brackets_stay_text_and_link_no_source_in_open_webui() -> None:
    """« [Menu] », « art. 5 [2] », « [3#x] » in a document: shown as written, never a link, never
    ``\\[`` (Open WebUI's display-math delimiter: the text vanished), never a group Open WebUI
    links to a source (checked in Chromium by tests/integration/test_openwebui.py)."""
    for text in ("[Menu] > [Sous-menu]", "art. 5 [2] et [1, 3]", "réf. [3#x] et [[9]]", "[lien](http://x.example)",
                 "[^1] note", "C# et #42"):
        md = quote_extract(text)
        assert "\\[" not in md.replace("\\\\", ""), md
        assert not OWUI_CITATION.search(md), md
        out = html(md)
        assert "<a " not in out and f"<p>{text.replace('>', '&gt;')}</p>" in out, (text, out)
