"""The one helper every admin output goes through (:func:`ancre.models.visible`, and its JSON twin
:func:`ancre.models.json_visible`): checked against Unicode's own character data — every code
point whose general category is Cc (C0, DEL, C1), Zl, Zp or Cs, or whose bidirectional class is an
explicit embedding, override, isolate or implicit mark (UAX #9), is written out; every other one is
left as it is; the JSON stays the same value."""

from __future__ import annotations

import json
import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from ancre.models import json_visible, visible

BIDI_CONTROLS = {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}
IMPLICIT_MARKS = {"\u200e", "\u200f", "\u061c"}  # LRM, RLM, ALM: bidi class L / R / AL, but format marks


def hidden(c: str) -> bool:
    """The reference: Unicode's character database, not the helper's own table."""
    return (unicodedata.category(c) in {"Cc", "Zl", "Zp", "Cs"} or unicodedata.bidirectional(c) in BIDI_CONTROLS
            or c in IMPLICIT_MARKS)


def test_every_code_point_is_written_out_exactly_when_unicode_says_it_hides_or_drives_text() -> None:
    wrong = [hex(cp) for cp in range(sys.maxunicode + 1)
             if (visible(chr(cp)) != chr(cp)) != hidden(chr(cp))]
    assert wrong == []


def test_the_forms() -> None:
    assert visible("a\x1b]0;t\x07b\x1b[2J\x9b31m\u202ec\nd") == "a\\x1b]0;t\\x07b\\x1b[2J\\x9b31m<U+202E>c\\x0ad"
    assert visible("ligne 1\nligne\x1b 2", newlines=True) == "ligne 1\nligne\\x1b 2"
    assert visible("\\\\SRV\\Partage\\RH\\Grille é.docx") == "\\\\SRV\\Partage\\RH\\Grille é.docx"


def reference(text: str) -> str:
    """The documented forms, over the reference set: ``\\x1b`` up to U+009F, else ``<U+202E>``."""
    return "".join((f"\\x{ord(c):02x}" if ord(c) <= 0x9F else f"<U+{ord(c):04X}>") if hidden(c) else c for c in text)


@given(st.text())
def test_any_text_is_written_out_as_the_reference_model_says(text: str) -> None:
    out = visible(text)
    assert out == reference(text)
    assert not any(hidden(c) for c in out) and visible(out) == out  # nothing left to write out


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)))
def test_json_stays_the_same_value_and_safe(value: object) -> None:
    for indent in (None, 2):
        out = json_visible(json.dumps(value, ensure_ascii=False, indent=indent))
        assert json.loads(out) == value
        assert not any(hidden(c) and c != "\n" for c in out)
