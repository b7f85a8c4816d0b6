"""The one ``Embedder`` interface; implementations ``e5-local``, ``ollama``, ``openai``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised vectors.

    ``name`` identifies the model *and* its prefixes (recorded in the store), ``dim`` is the
    vector dimension.
    """

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dim)`` float32 for ``n`` passages (document prefix applied). ``n = 0`` → ``(0, dim)``.
        Raises :class:`~ancre.errors.EmbedderError`."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """``(dim,)`` float32 for one question (query prefix applied). Raises ``EmbedderError``."""
        ...
