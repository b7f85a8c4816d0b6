"""A daemon lane's thread and the condition it sleeps on (:class:`Wakeable`), shared by the BM25
lane (:mod:`ancre.daemon.bm25_rebuild`) and the index-build lane (:mod:`ancre.daemon.maintenance`)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Wakeable:
    """One daemon thread named ``name`` running ``loop`` (which returns once it is told to stop)
    and :attr:`cv`, the condition it waits on between its tasks: :meth:`wake` ends a wait early,
    :meth:`join` wakes it and waits for it to end."""

    def __init__(self, name: str, loop: Callable[[], None]) -> None:
        self.cv = threading.Condition()
        """The lane's condition: its state is read and changed under it."""
        self._thread = threading.Thread(target=loop, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def wake(self) -> None:
        """End the thread's current wait (it looks at its state again)."""
        with self.cv:
            self.cv.notify_all()

    def join(self, timeout: float) -> bool:
        """Wake the thread and wait at most ``timeout`` seconds for it to end; ``True`` if it did
        (or never started)."""
        self.wake()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()


__all__ = ["Wakeable"]
