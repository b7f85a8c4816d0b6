"""Open WebUI's native citations: an answer's sources sent as ``source`` events, its citations
numbered ``[n]`` in the same order, and any other ``[digit`` escaped.

**The event.** Open WebUI 0.12 passes the ``event`` object of a streamed chunk to its event
emitter (``open_webui.utils.middleware``: ``if 'event' in data: await event_emitter(data['event'])``);
an event ``{"type": "source", "data": …}`` whose ``data`` has no ``type`` of its own is appended
to the message's ``sources`` in the chat (``open_webui.socket.main.get_event_emitter``), kept
across reloads, and shown as the chips under the answer and the side panel of each
(``Citations.svelte``, ``CitationModal.svelte``). ``data`` is ``{"source": {"id", "name",
"url"?}, "document": [passages], "metadata": [{"source": id, "name", "source_url"?}, …],
"distances": []}``, one ``metadata`` entry per passage. The chips are the *distinct*
``metadata[].source`` ids of the message's sources, in order, and ``[n]`` in the text links the
n-th (the ``citation`` extension of Open WebUI's ``marked``: ``[1]``, ``[1, 2]``, ``[1][2]``,
``[1#x]``) — so each document gets an id of its own, and the citations are numbered in the
order the events are sent, after the sources Open WebUI listed itself for the message
(attachments, :mod:`ancre.api.attachments`).

**Numbering while streaming.** The model's text arrives piece by piece and the verdict only at
the end, so :class:`InlineCitations` numbers as the text goes: every bracketed citation that
looks like a file (:func:`~ancre.query.citations.scan_citations` without known sources: a
document extension, a ``#N`` chunk suffix, a numbered file name) gets the next number on its
first appearance (a same file cited again, with or without extension or ``#N``, keeps its
number). At the end :meth:`InlineCitations.events` sends, in number order, the source each
number names among the answer's sources (:attr:`Answer.sources`) — or, for a name that is no
shown document (an invented citation, which also makes the answer not grounded), a source
saying so; then the answer's other sources, unnumbered. The text of a link ``[x](url)`` and code
are not numbered.

**Escaping.** Open WebUI links *any* ``[2]``, ``[2, 3]`` or ``[2#x]`` of the text
(open-webui#11592), e.g. a document's « art. 5 [2] » quoted by the model, to the n-th source — a
wrong file. Each such group that is not one of ancre's numbers is written ``[2\\]``,
``[2\\#x\\]`` (CommonMark §2.4: it renders as written; not ``\\[2]``, which Open WebUI reads
as the start of display math), outside code spans and fenced code blocks, where a backslash
would show. The same holds for quoted document text (:mod:`ancre.query.markdown`).
"""

from __future__ import annotations

import re
from typing import Any

from ancre.models import nfc
from ancre.query.answer import Answer, AnswerSource
from ancre.query.citations import DOC_EXTENSIONS, scan_citations
from ancre.query.markdown import escape_line, extract_blocks

MAX_GROUP_CHARS = 400
"""Longest bracketed text held back to decide whether it is a citation (characters); a longer
one is passed on as text."""
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})")
_FENCE_START_RE = re.compile(r" {0,3}(`*|~*)")
_OWUI_CITATION_RE = re.compile(r"\[\d+(?:#[^,\]\s]+)?(?:,\s*\d+(?:#[^,\]\s]+)?)*\]")
"""What Open WebUI's ``citation`` extension links (its tokenizer's regex, one bracket group)."""
_SUFFIX_RE = re.compile(r"\s*#\s*\d+$")
_STRIP = " \t*_`\"'«»[]"
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def citation_key(name: str) -> str:
    """What identifies the file a citation names: NFC, case-folded, without a ``#N`` chunk
    suffix, folders or a document extension (``[X.docx]``, ``[x]``, ``[x.docx#3]`` name the
    same file)."""
    name = _SUFFIX_RE.sub("", nfc(name).strip())
    name = re.split(r"[\\/]", name)[-1].strip()
    stem, dot, ext = name.rpartition(".")
    if dot and stem and ext.casefold() in DOC_EXTENSIONS:
        name = stem
    return name.casefold()


def passage_markdown(text: str) -> str:
    """An extract as Markdown for Open WebUI's side panel (which renders Markdown): each line an
    escaped paragraph (« 4. Conditions » stays text, ``[2]`` is no link), table rows a table
    (:mod:`ancre.query.markdown`)."""
    return "\n\n".join(extract_blocks(text))


def _is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def source_id(src: AnswerSource) -> str:
    """The id Open WebUI groups a source's passages by: the document's full location (UNC path
    or URL of the file), else its path in its source."""
    if not src.location:
        return src.path or src.doc_id
    sep = "" if src.location.endswith(("/", "\\")) else ("/" if _is_url(src.location) else "\\")
    return f"{src.location}{sep}{src.filename}"


def source_data(src: AnswerSource, *, suffix: str = "") -> dict[str, Any]:
    """The ``data`` of a ``source`` event for ``src``: its passages (the first headed by the
    folder when it is not a URL; a SharePoint folder URL is the panel's link instead) —
    ``suffix`` makes the id distinct when one document is numbered twice."""
    sid = source_id(src) + suffix
    url = src.location if _is_url(src.location) else None
    passages = [passage_markdown(p) for p in src.passages if p.strip()] or [escape_line(src.filename)]
    if src.location and url is None:
        passages[0] = f"Dossier : `{src.location}`\n\n{passages[0]}"
    meta: dict[str, Any] = {"source": sid, "name": src.filename, **({"source_url": url} if url else {})}
    return {
        "source": {"id": sid, "name": src.filename, **({"url": url} if url else {})},
        "document": passages,
        "metadata": [dict(meta) for _ in passages],
        "distances": [],
    }


def invented_data(name: str) -> dict[str, Any]:
    """The ``data`` of a ``source`` event for a citation that names no document shown for the
    question (an invented citation): a source that says so, so that its number links no file."""
    label = f"⚠️ {name} : document introuvable"
    sid = f"ancre:citation-inventee:{citation_key(name)}"
    return {
        "source": {"id": sid, "name": label},
        "document": [(f"ancre n'a montré aucun document nommé « {escape_line(name)} » pour cette question : "
                      "cette citation ne renvoie à aucune source, vérifiez la réponse.")],
        "metadata": [{"source": sid, "name": label}],
        "distances": [],
    }


def source_event(data: dict[str, Any]) -> dict[str, Any]:
    """The ``event`` object Open WebUI expects for one source."""
    return {"type": "source", "data": data}


class InlineCitations:
    """The answer's text as it streams, rewritten for Open WebUI: :meth:`feed` each piece and
    emit what it returns, then :meth:`finish`; the concatenation is the whole text with its
    citations numbered from ``first`` (``number=True``) and stray ``[digit`` escaped (see the
    module doc). Text that may still turn out to be a citation (an open ``[``, a backtick run,
    a backslash at the end of a piece) is held back until it is decided, at most
    :data:`MAX_GROUP_CHARS` characters. ``number=False`` only escapes (``[file name]``
    citations kept, for the Markdown « Sources » rendering)."""

    def __init__(self, first: int = 1, *, number: bool = True) -> None:
        self.first = first
        self.number = number
        self.names: list[str] = []
        """The name each number stands for, as first written: ``names[i]`` is ``[first + i]``."""
        self._keys: dict[str, int] = {}
        self._buf = ""
        self._line_start = True
        self._fence: str | None = None
        self._code = 0

    # ------------------------------------------------------------------ streaming

    def feed(self, piece: str) -> str:
        """Add ``piece``; returns the text that can be emitted now."""
        self._buf += piece
        return self._drain(final=False)

    def finish(self) -> str:
        """The rest of the text, once the answer has ended."""
        return self._drain(final=True)

    def rewrite(self, text: str) -> str:
        """A whole text at once (:meth:`feed` then :meth:`finish`)."""
        return self.feed(text) + self.finish()

    def _drain(self, final: bool) -> str:
        """The part of the held text that can be emitted now, rewritten (all of it when
        ``final``); the rest stays held until more text comes."""
        buf, i, n = self._buf, 0, len(self._buf)
        out: list[str] = []
        while i < n:
            nxt = self._step(buf, i, final, out)
            if nxt is None:
                break  # undecided: wait for more text
            i = nxt
        self._buf = buf[i:]
        return "".join(out)

    def _step(self, buf: str, i: int, final: bool, out: list[str]) -> int | None:
        """Rewrite the text at ``buf[i]`` (a fence marker, a line break, a character inside code,
        a backtick run, an escape, a bracket group or one plain character) into ``out``: the
        position after it, ``None`` when more text is needed to decide (never when ``final``)."""
        c = buf[i]
        if self._line_start:
            if not final and _FENCE_START_RE.fullmatch(buf, i):
                return None  # a fence marker may still be coming
            m = _FENCE_RE.match(buf, i)
            run_end = m.end() if m else i
            if m and (self._fence is None or (m.group(1)[0] == self._fence[0] and len(m.group(1)) >= len(self._fence))):
                self._fence = m.group(1) if self._fence is None else None
                out.append(buf[i:run_end])
                self._line_start = False
                return run_end
        if c == "\n":
            out.append(c)
            self._line_start, self._code = True, 0
            return i + 1
        self._line_start = False
        if self._fence is not None:
            out.append(c)
            return i + 1
        if c == "`":
            return self._backticks(buf, i, final, out)
        if self._code:
            out.append(c)
            return i + 1
        if c == "\\":  # a backslash escape (CommonMark §2.4: before ASCII punctuation only)
            if i + 1 == len(buf) and not final:
                return None
            step = 2 if buf[i + 1 : i + 2] in _PUNCTUATION else 1
            out.append(buf[i : i + step])
            return i + step
        if c == "[":
            return self._bracket(buf, i, final, out)
        out.append(c)
        return i + 1

    def _backticks(self, buf: str, i: int, final: bool, out: list[str]) -> int | None:
        """The backtick run at ``buf[i]``: opens or closes inline code (a closing run is as long
        as the opening one); ``None`` when the run may go on."""
        j, n = i, len(buf)
        while j < n and buf[j] == "`":
            j += 1
        if j == n and not final:
            return None
        run = j - i
        if self._code == 0:
            self._code = run
        elif run == self._code:
            self._code = 0
        out.append(buf[i:j])
        return j

    def _bracket(self, buf: str, i: int, final: bool, out: list[str]) -> int | None:
        """The ``[`` at ``buf[i]``: an Open WebUI citation escaped, a citation numbered (a group
        followed by ``(`` is a link: kept), else the ``[`` alone; ``None`` when more text is
        needed to decide."""
        close = self._group_end(buf, i)
        if close is None:  # undecided: wait for more text
            if not final:
                return None
            close = -1
        if close >= 0:
            after = buf[close + 1 : close + 2]
            if not after and not final:
                return None
            linked = _OWUI_CITATION_RE.match(buf, i)
            if linked is not None:  # Open WebUI would link it to a source: [2\], [2\#x\]
                out.append(linked.group(0)[:-1].replace("#", "\\#") + "\\]")
                return linked.end()
            replaced = None if after == "(" else self._citation(buf[i : close + 1])  # (: a link
            if replaced is not None:
                out.append(replaced)
                return close + 1
        out.append("[")
        return i + 1

    @staticmethod
    def _group_end(buf: str, start: int) -> int | None:
        """Index of the ``]`` closing the ``[`` at ``start`` (nested brackets allowed); ``-1``
        when it cannot close (end of line, too long); ``None`` when more text is needed."""
        depth = 0
        for j in range(start, min(len(buf), start + MAX_GROUP_CHARS)):
            ch = buf[j]
            if ch == "\n":
                return -1
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
                if depth == 0:
                    return j
        return None if len(buf) < start + MAX_GROUP_CHARS else -1

    def _citation(self, group: str) -> str | None:
        """``group`` (``[…]``) rewritten as numbered citations, or ``None`` if it is none."""
        if not self.number or "\\[" in group or "\\]" in group:
            return None  # an escaped bracket inside: the model's own text, left as written
        scan = scan_citations(group, ())
        if not scan.citations:
            return None
        numbers: list[int] = []
        for c in scan.citations:
            key = citation_key(c.name)
            if key not in self._keys:
                self._keys[key] = self.first + len(self.names)
                self.names.append(c.name)
            if self._keys[key] not in numbers:
                numbers.append(self._keys[key])
        rest_text = scan.text
        for c in reversed(scan.citations):
            rest_text = rest_text[: c.start] + rest_text[c.end :]
        rest = [p.strip(_STRIP) for p in re.split(r"[,;]", rest_text)]
        rest = [p for p in rest if p]
        tail = f" ({escape_citation_digits('; '.join(rest))})" if rest else ""
        return "[" + ", ".join(str(k) for k in numbers) + "]" + tail

    # ------------------------------------------------------------------ the sources

    def events(self, answer: Answer) -> list[dict[str, Any]]:
        """The ``source`` events of ``answer``, in number order (see the module doc): the source
        each number names, or one saying the named document was not shown, then the answer's
        other sources."""
        by_key: dict[str, AnswerSource] = {}
        for s in answer.sources:
            for label in (s.filename, s.doc_id):
                by_key.setdefault(citation_key(label), s)
        sent: set[str] = set()
        out: list[dict[str, Any]] = []
        for i, name in enumerate(self.names):
            src = by_key.get(citation_key(name))
            if src is None:
                out.append(source_event(invented_data(name)))
                continue
            suffix = f"#{self.first + i}" if src.doc_id in sent else ""
            sent.add(src.doc_id)
            out.append(source_event(source_data(src, suffix=suffix)))
        for s in answer.sources:
            if s.doc_id not in sent:
                sent.add(s.doc_id)
                out.append(source_event(source_data(s)))
        return out


def escape_citation_digits(text: str) -> str:
    """``text`` with every ``[`` that starts a ``[digit`` escaped, outside code (see the module doc)."""
    return InlineCitations(number=False).rewrite(text)


def native_text(text: str, first: int = 1) -> tuple[str, InlineCitations]:
    """A whole answer text rewritten at once: ``(text, numbering)``."""
    numbering = InlineCitations(first)
    return numbering.rewrite(text), numbering


__all__ = [
    "MAX_GROUP_CHARS",
    "InlineCitations",
    "citation_key",
    "escape_citation_digits",
    "invented_data",
    "native_text",
    "passage_markdown",
    "source_data",
    "source_event",
    "source_id",
]

