"""Reasoning text kept out of answers (docs/ARCHITECTURE.md "Data flow of a question" step 5).

A thinking model (Qwen3, DeepSeek-R1, QwQ) writes its reasoning between ``<think>`` and
``</think>``. Ollama returns it apart (``message.thinking``, Ollama API reference, "Generate a chat
completion": ``think``), and so does vLLM when it runs with a reasoning parser (``reasoning``,
formerly ``reasoning_content``: vLLM docs, "Reasoning Outputs"); but a server without one —
vLLM without ``--reasoning-parser``, llama.cpp, an older Ollama — leaves the block in the answer's
``content``, and Qwen3 with thinking switched off still writes an empty ``<think>\\n\\n</think>``.
None of it may reach the user, the controls or the audit log as part of the answer.

:func:`strip_thinking` is the rule, on a whole text; :class:`ThinkFilter` applies the same rule to
an answer arriving in pieces, with a tag possibly split between two pieces — the pieces it
releases, joined, are :func:`strip_thinking` of the whole text whatever the cut
(``tests/unit/test_thinking.py``, a property test over random chunkings):

- a ``<think>…</think>`` block is removed, with the whitespace that follows it;
- a ``<think>`` never closed removes everything after it (the model was cut while thinking);
- a stray ``</think>`` (its opening tag was in the prompt) is removed, with the whitespace after it.

Tags are matched whatever the case of their ASCII letters. Known limit: with a chat template that opens the block in the
prompt (so that the answer only holds ``</think>``), the reasoning before that tag can't be told
from an answer while it streams; run such a model with the server's reasoning parser (vLLM
``--reasoning-parser qwen3`` / ``deepseek_r1``), which moves it to ``reasoning``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Protocol

OPEN, CLOSE = "<think>", "</think>"

_T = "[tT][hH][iI][nN][kK]"  # ASCII letters only: no Unicode case folding (U+0131 is not "i")
_REASONING = re.compile(rf"<{_T}>.*?</{_T}>\s*|<{_T}>.*|</{_T}>\s*", re.DOTALL)
"""A block with the whitespace after it, an unclosed block, or a stray closing tag with the
whitespace after it; one left-to-right pass, so what is left around a removed block never joins
into a new tag (``"</<think>…</think>think>"`` keeps ``"</think>"``), as :class:`ThinkFilter`,
which never takes back what it released."""
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class PieceFilter(Protocol):
    """A filter of a text arriving in pieces (:class:`ThinkFilter`,
    :class:`~ancre.query.links.LinkGuard`): :meth:`feed` returns what may be released now,
    :meth:`flush` what it still held at the end."""

    def feed(self, piece: str) -> str:
        """The next piece in; what may be shown now out (``""``: nothing yet)."""
        ...

    def flush(self) -> str:
        """What is still held, the text having ended."""
        ...


def filtered(pieces: Iterable[str], pf: PieceFilter) -> Iterator[str]:
    """``pieces`` through ``pf``: each piece it releases as it comes (empty ones left out), then
    what it still held at the end."""
    for piece in pieces:
        out = pf.feed(piece)
        if out:
            yield out
    tail = pf.flush()
    if tail:
        yield tail


def strip_thinking(text: str) -> str:
    """``text`` without its reasoning blocks (the rules of the module doc)."""
    return _REASONING.sub("", text)


def _fold(text: str) -> str:
    """``text`` with its ASCII capitals in lower case (same length, nothing else changed)."""
    return text.translate(_ASCII_LOWER)


def _tag_prefix(text: str) -> bool:
    """Whether ``text`` (starting with ``<``) may still grow into ``<think>`` or ``</think>``."""
    low = _fold(text)
    return OPEN.startswith(low) or CLOSE.startswith(low)


class ThinkFilter:
    """:func:`strip_thinking` applied piece by piece: :meth:`feed` takes the next piece and returns
    what may be released now (``""`` while a tag may be forming, or inside a block); :meth:`flush`
    returns the rest at the end. :attr:`removed` tells whether anything was taken out. One
    answer, one consumer (not thread-safe)."""

    def __init__(self) -> None:
        self._buf = ""
        self._inside = False
        self._skip_space = False
        self.removed = False

    def feed(self, piece: str) -> str:
        """Add ``piece``; return the text that can be released now."""
        self._buf += piece
        out: list[str] = []
        while self._buf:
            if self._inside:
                end = _fold(self._buf).find(CLOSE)
                if end < 0:  # keep only what may be the start of the closing tag
                    self._buf = self._buf[-(len(CLOSE) - 1):]
                    break
                self._buf = self._buf[end + len(CLOSE):]
                self._inside, self._skip_space = False, True
                continue
            if self._skip_space:
                rest = self._buf.lstrip()
                if not rest:
                    self._buf = ""
                    break
                self._buf, self._skip_space = rest, False
            lt = self._buf.find("<")
            if lt < 0:
                out.append(self._buf)
                self._buf = ""
                break
            out.append(self._buf[:lt])
            self._buf = self._buf[lt:]
            low = _fold(self._buf[: len(CLOSE)])
            if low.startswith(OPEN):
                self._buf, self._inside, self.removed = self._buf[len(OPEN):], True, True
            elif low.startswith(CLOSE):
                self._buf, self._skip_space, self.removed = self._buf[len(CLOSE):], True, True
            elif len(self._buf) < len(CLOSE) and _tag_prefix(self._buf):
                break  # may still become a tag: wait for the next piece
            else:
                out.append("<")
                self._buf = self._buf[1:]
        return "".join(out)

    def flush(self) -> str:
        """The text still held when the answer ended (``""`` inside a block never closed)."""
        rest = "" if self._inside else self._buf.lstrip() if self._skip_space else self._buf
        self._buf = ""
        return rest


__all__ = ["ThinkFilter", "strip_thinking"]
