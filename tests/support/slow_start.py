"""A test-only extraction target whose import takes 2 s (a worker starting on a loaded machine),
for :class:`ancre.ingest.worker.ExtractionPool`: ``target="support.slow_start:echo"``."""

from __future__ import annotations

import time

from ancre.models import Block, BlockKind

time.sleep(2.0)  # the import itself is slow


def echo(data: bytes, filename: str) -> tuple[Block, ...]:
    """The file's bytes as one block of text (``filename`` unused)."""
    return (Block(BlockKind.PARAGRAPH, data.decode()),)
