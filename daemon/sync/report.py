"""The report of one sync pass (:class:`PassReport`) and how problems are counted in it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ancre.models import ItemStatus, PassOutcome, PassScope, ReasonCode

ProgressFn = Callable[[str, int, int], None]
"""``progress(path, done, total)`` callback for progress bars."""


def skip_reason_key(code: ReasonCode | None, detail: str | None) -> str:
    """The group a skipped document is counted under in ``ancre status``: its reason code
    (``no_text_layer``, ``empty``, ``encrypted``, ``too_large``…) without the per-file detail
    (page counts, sizes); for ``unsupported``, the code with its detail, so that
    ``unsupported: legacy .doc (…)`` and each unsupported extension are counted apart; for an
    item the source did not read (``not_read``), the source's words (``symlink``, ``junction``…).
    ``(UNSUPPORTED, "extension '.png'")`` → ``"unsupported: extension '.png'"``;
    ``(NO_TEXT_LAYER, "3 of 3 pages…")`` → ``"no_text_layer"``; ``(None, …)`` → ``"(none)"``."""
    if code is None:
        return "(none)"
    if code in (ReasonCode.UNSUPPORTED, ReasonCode.NOT_READ) and detail:
        return code.text(detail)
    return code.value


@dataclass
class PassReport:
    """Outcome of one pass over one source. Counts are documents unless named ``chunks``."""

    source: str
    outcome: PassOutcome = PassOutcome.OK
    """``ok``; ``partial`` (full pass done except under subtrees the connector reported
    unreachable, e.g. dead DFS links: nothing purged under them, ``reason`` names them);
    ``suspect`` (root unreachable or mass deletion: nothing purged); ``interrupted`` (stop
    requested: nothing purged); ``error`` (an exception stopped the pass — store or embedder
    down —; ``reason`` says which; what was committed stays)."""
    scope: PassScope = PassScope.FULL
    """``full`` (:meth:`SyncEngine.run_pass`), ``paths`` (:meth:`SyncEngine.sync_paths`) or ``acl``
    (:meth:`SyncEngine.refresh_acls`)."""
    reason: str | None = None
    listed: int = 0
    new: int = 0
    changed: int = 0
    acl_only: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: int = 0
    skipped: int = 0
    acl_unreadable: int = 0
    """Documents listed in this pass whose ACL could not be read, parsed or understood
    (:func:`~ancre.acl.engine.acl_problem`): indexed, but readable by nobody until it can."""
    embedded_chunks: int = 0
    """Chunk texts sent to the embedder."""
    reused_chunks: int = 0
    """Chunks written without embedding their text: with the vector their document already had
    for that exact text (a changed document's unchanged passages), or with the one just embedded
    for the same text in the same embedder call (a copy of a file synced beside it)."""
    bm25_generation: int | None = None
    duration_s: float = 0.0
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    """``(path, status, reason)`` for every failed or skipped item, and ``(path,
    "acl_unreadable", reason)`` for every document counted in ``acl_unreadable``."""

    @property
    def changed_index(self) -> bool:
        """Whether the store was modified by this pass."""
        return bool(self.new or self.changed or self.acl_only or self.deleted)

    def to_json(self) -> str:
        """JSON summary (for the state DB and ``--json`` output)."""
        return json.dumps(asdict(self), ensure_ascii=False)

    def count_acl_problem(self, path: str, issue: str | None) -> None:
        """Count the document at ``path`` as ``acl_unreadable`` when ``issue`` (its ACL problem) is set."""
        if issue is not None:
            self.acl_unreadable += 1
            self.problems.append((path, "acl_unreadable", issue))

    def count_problem(self, path: str, status: ItemStatus, reason: str) -> None:
        """Count the document at ``path`` as ``skipped`` or ``failed`` (``reason``: the prose shown)."""
        if status == ItemStatus.SKIPPED:
            self.skipped += 1
        else:
            self.failed += 1
        self.problems.append((path, status, reason))

    def add(self, part: PassReport) -> None:
        """Add the counts of a commit batch's own report (:class:`~ancre.daemon.sync.commit.CommitPipe`)."""
        self.new += part.new
        self.changed += part.changed
        self.embedded_chunks += part.embedded_chunks
        self.reused_chunks += part.reused_chunks
        self.acl_unreadable += part.acl_unreadable
        self.problems.extend(part.problems)
