"""Legacy word-processor formats: RTF (``.rtf``: striprtf, one paragraph per line) and Word
97–2003 (``.doc``: Debian's ``antiword``, a child process under the file's time limit;
``unsupported: legacy .doc (antiword is not installed)`` without it; an RTF file saved as
``.doc`` is read as RTF)."""

from __future__ import annotations

import os
import re

from ancre.errors import ExtractionError
from ancre.ingest.formats.base import DEFAULT_OPTIONS, ExtractOptions, clean
from ancre.models import Block, BlockKind

__all__ = ["read_doc", "read_rtf"]


def read_rtf(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """One paragraph per line of the RTF text (``|``-separated lines: table rows). ``options``
    are not used. Raises ``corrupt`` when there is no ``{\\rtf`` header."""
    from striprtf.striprtf import rtf_to_text

    if not data.lstrip()[:5] == b"{\\rtf":
        raise ExtractionError("corrupt", "not an RTF file (no {\\rtf header)")
    # RTF is 7-bit; \'xx escapes are decoded by striprtf in the document's code page (\ansicpg)
    text = rtf_to_text(data.decode("latin-1"), errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _lines_to_blocks(text)


def _lines_to_blocks(text: str) -> list[Block]:
    """One paragraph per line of converter output; lines with ``|`` cell separators are table rows."""
    out: list[Block] = []
    for line in text.split("\n"):
        if "|" in line and line.strip().strip("|").strip():
            cells = [c for c in (clean(c) for c in line.strip().strip("|").split("|")) if c]
            if len(cells) > 1:
                out.append(Block(BlockKind.TABLE_ROW, " | ".join(cells)))
                continue
        cleaned = clean(line)
        if cleaned:
            out.append(Block(BlockKind.PARAGRAPH, cleaned))
    return out


# ------------------------------------------------------------------------------------------- doc

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def read_doc(data: bytes, options: ExtractOptions = DEFAULT_OPTIONS) -> list[Block]:
    """Word 97–2003 (and Word 6/95) binary documents through Debian's ``antiword`` (UTF-8 output,
    no line wrapping), run as a child process bounded by ``options.time_limit_s``."""
    import shutil
    import subprocess
    import tempfile

    if not data.startswith(_OLE_MAGIC):
        if data.lstrip()[:5] == b"{\\rtf":  # Word saves RTF under .doc too: read it as RTF
            return read_rtf(data, options)
        raise ExtractionError("corrupt", "not a Word 97-2003 file (no OLE compound file header)")
    exe = shutil.which("antiword")
    if exe is None:
        raise ExtractionError("unsupported", "legacy .doc (antiword is not installed)")
    with tempfile.TemporaryDirectory(prefix="ancre-doc-") as tmp:
        path = os.path.join(tmp, "document.doc")
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            proc = subprocess.run(
                [exe, "-m", "UTF-8.txt", "-w", "0", path],
                capture_output=True, timeout=options.time_limit_s, check=False,
                # antiword wants a HOME (for ~/.antiword); the service account may have none
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": tmp},
            )
        except subprocess.TimeoutExpired as exc:
            raise ExtractionError("timeout", f"antiword after {options.time_limit_s:g} s") from exc
    err = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        low = err.lower()
        if "encrypt" in low or "password" in low:
            raise ExtractionError("encrypted", err[:300])
        if proc.returncode < 0:  # antiword died on a signal (it segfaults on some damaged files)
            import signal

            try:
                sig = signal.Signals(-proc.returncode).name
            except ValueError:
                sig = str(-proc.returncode)
            raise ExtractionError("corrupt", f"antiword died on {sig} {err[:200]}".strip())
        raise ExtractionError("corrupt", f"antiword: {err[:300] or f'exit {proc.returncode}'}")
    text = proc.stdout.decode("utf-8", "replace")
    # antiword marks pictures and drawings it cannot render; they are not text
    text = re.sub(r"\[pic\]|\[picture\]", "", text)
    return _lines_to_blocks(text)
