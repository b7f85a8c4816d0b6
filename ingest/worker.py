"""Run text extraction in a worker process that can be killed.

Some files make parsers loop forever or crash the interpreter (pypdf on hostile PDFs, huge or
recursive documents). :class:`ExtractionPool` keeps one long-lived worker process (started with the
``spawn`` method of :mod:`multiprocessing`, so it is safe in a threaded parent), sends it one file at
a time over a pipe, and waits at most ``timeout_s`` seconds for the answer. On a timeout the worker
gets SIGKILL; when a worker dies (signal, ``os._exit``, ``MemoryError``) the file fails with reason
``crashed``. Either way the next call starts a fresh worker, so one bad file never stops a sync.

The worker ignores SIGINT (a Ctrl-C in a terminal is the parent's business) and exits by itself
when the parent goes away (end of file on its pipe). A fresh worker says it is ready once its
target is imported; the per-file clock starts only then, so a slow start (a loaded machine, heavy
imports) is never charged to a file.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from ancre.errors import ExtractionError
from ancre.ingest.limits import ExtractionLimits
from ancre.models import Block, Closing

__all__ = ["DEFAULT_TARGET", "ExtractionPool", "request_more_time"]

DEFAULT_TARGET = "ancre.ingest.extract:extract_bytes"
"""The function the worker runs, as ``"module:function"``."""

_CTX = multiprocessing.get_context("spawn")

STARTUP_TIMEOUT_S = 120.0
"""Seconds a fresh worker may take to start and import its target before it counts as crashed
(not charged to any file's ``timeout_s``)."""

_ask_for_time: Callable[[float], None] | None = None  # set in a worker process only


def request_more_time(seconds: float) -> None:
    """Ask the pool for ``seconds`` more on the file being extracted, before a long step whose
    length is known in advance (OCR of n scanned pages). The pool grants at most its
    ``max_extra_s`` per file in total. Outside a worker process (a direct call) it does nothing."""
    if _ask_for_time is not None and seconds > 0:
        _ask_for_time(float(seconds))


def _resolve(target: str) -> Callable[..., tuple[Block, ...]]:
    module, _, name = target.partition(":")
    func = getattr(importlib.import_module(module), name)
    if not callable(func):
        raise TypeError(f"{target} is not callable")
    return func


def _worker_main(
    conn: Connection, target: str, options: object | None = None, limits: ExtractionLimits | None = None
) -> None:
    """Worker loop: receive ``(data, filename)``, answer ``("ok", blocks)`` or
    ``("error", reason, detail)``; ``None`` or a closed pipe ends the loop. ``options`` and
    ``limits``, when given, are passed to the target as keyword arguments of those names."""
    global _ask_for_time  # noqa: PLW0603 - the worker process's one hook, set once as it starts
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _ask_for_time = lambda seconds: conn.send(("more_time", seconds))  # noqa: E731 - the hook is a one-line closure over the pipe
    func = _resolve(target)
    conn.send(("ready",))
    extra: dict[str, object] = {k: v for k, v in (("options", options), ("limits", limits)) if v is not None}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        data, filename = msg
        try:
            blocks = func(data, filename, **extra)
            reply: tuple[Any, ...] = ("ok", tuple(blocks))
            del blocks
        except ExtractionError as exc:
            reply = ("error", exc.reason, exc.detail)
        except MemoryError:
            # the heap may be in a bad state: report, then die so the parent starts a fresh worker
            try:
                conn.send(("error", "crashed", "MemoryError"))
            finally:
                os._exit(70)
        except Exception as exc:  # a bug or an unexpected parser failure: the file fails, we go on
            reply = ("error", "crashed", f"{type(exc).__name__}: {exc}"[:500])
        del data, msg
        conn.send(reply)


class ExtractionPool(Closing):
    """One extraction worker process, reused from file to file, killed on a per-file time limit.

    ``timeout_s`` (seconds, > 0) bounds each :meth:`extract` call, transfer included, from the
    moment the worker is ready (a fresh worker's start-up is bounded by :data:`STARTUP_TIMEOUT_S`).
    ``target`` is the ``"module:function"`` run in the worker, with the signature of
    :func:`ancre.ingest.extract.extract_bytes`; tests pass a hanging or crashing one (the
    module must be importable in the worker: ``spawn`` gives it the parent's ``sys.path``).
    ``limits`` (:class:`~ancre.ingest.limits.ExtractionLimits`), when given, is passed to
    ``target`` with each file as its ``limits`` keyword (the configured ``[extraction]`` limits).

    ``options`` (picklable, e.g. :class:`ancre.ingest.extract.ExtractOptions`: OCR settings),
    when not ``None``, is handed to the target as its ``options`` keyword for every file.
    ``max_extra_s`` (seconds, default 0): how much more time per file the target may ask for with
    :func:`request_more_time` (the OCR of a long scan), on top of ``timeout_s``.

    Thread-safe (calls are serialised: one file at a time). Use as a context manager or call
    :meth:`close`. The worker starts on the first :meth:`extract`, not in the constructor.
    """

    def __init__(
        self,
        timeout_s: float = 60.0,
        target: str = DEFAULT_TARGET,
        options: object | None = None,
        max_extra_s: float = 0.0,
        limits: ExtractionLimits | None = None,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if ":" not in target:
            raise ValueError(f"target must be 'module:function', got {target!r}")
        self.timeout_s = float(timeout_s)
        self.target = target
        self.options = options
        self.max_extra_s = max(0.0, float(max_extra_s))
        self.limits = limits
        self._lock = threading.Lock()
        self._proc: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._closed = False

    # ------------------------------------------------------------------------------ public API

    def extract(self, data: bytes, filename: str) -> tuple[Block, ...]:
        """Extract ``data`` (the file's bytes; ``filename`` picks the format) in the worker.

        Returns the blocks of :func:`~ancre.ingest.extract.extract_bytes`. Raises
        :class:`~ancre.errors.ExtractionError`: whatever the extractor raised (``unsupported``,
        ``empty``, ``encrypted``, ``corrupt``), ``"timeout"`` (detail ``"after {t} s"``) when the
        worker did not answer within ``timeout_s`` (plus the extra time it asked for, at most
        ``max_extra_s``) and was killed, ``"crashed"`` when the worker died or failed unexpectedly
        or did not start within :data:`STARTUP_TIMEOUT_S`. Raises ``RuntimeError`` after :meth:`close`.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("ExtractionPool is closed")
            conn = self._ensure_worker()
            deadline = time.monotonic() + self.timeout_s
            granted = 0.0
            sent = False
            while True:
                try:
                    if not sent:
                        conn.send((data, filename))
                        sent = True
                    ready = conn.poll(max(0.0, deadline - time.monotonic()))
                except (BrokenPipeError, EOFError, OSError) as exc:
                    detail = self._reap(f"{type(exc).__name__}")
                    raise ExtractionError("crashed", detail) from None
                if not ready:
                    self._kill()
                    raise ExtractionError("timeout", f"after {self.timeout_s + granted:g} s")
                try:
                    reply = conn.recv()
                except (EOFError, OSError):
                    raise ExtractionError("crashed", self._reap("no answer")) from None
                if reply[0] != "more_time":
                    break
                extra = min(float(reply[1]), self.max_extra_s - granted)
                granted += extra
                deadline += extra
            if reply[0] == "ok":
                return reply[1]
            _, reason, detail = reply
            if reason == "crashed" and detail == "MemoryError":
                self._reap("MemoryError")
            raise ExtractionError(reason, detail)

    def close(self) -> None:
        """Stop the worker (politely, then SIGKILL after 5 s). Idempotent."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                with contextlib.suppress(OSError):
                    self._conn.send(None)
            if self._proc is not None:
                self._proc.join(5)
            self._kill()

    @property
    def worker_pid(self) -> int | None:
        """PID of the live worker, or ``None`` when none runs (for logs and tests)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.is_alive() else None

    # -------------------------------------------------------------------------------- internals

    def _ensure_worker(self) -> Connection:
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            return self._conn
        self._kill()
        parent, child = _CTX.Pipe(duplex=True)
        proc = _CTX.Process(
            target=_worker_main, args=(child, self.target, self.options, self.limits), name="ancre-extract", daemon=True
        )
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        try:
            started = parent.poll(STARTUP_TIMEOUT_S)
            hello = parent.recv() if started else None
        except (EOFError, OSError):
            raise ExtractionError("crashed", self._reap("no start")) from None
        if hello != ("ready",):
            self._kill()
            raise ExtractionError("crashed", f"worker did not start within {STARTUP_TIMEOUT_S:g} s")
        return parent

    def _reap(self, what: str) -> str:
        """The worker died or must go: wait briefly for its exit code, clean up, describe it."""
        proc = self._proc
        code = None
        if proc is not None:
            proc.join(2)
            code = proc.exitcode
        self._kill()
        if code is None:
            return f"worker failed ({what})"
        if code < 0:
            try:
                return f"worker killed by {signal.Signals(-code).name} ({what})"
            except ValueError:
                pass
        return f"worker exited with code {code} ({what})"

    def _kill(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is not None:
            if proc.is_alive():
                proc.kill()  # SIGKILL: a looping parser will not listen to anything else
            proc.join()
            proc.close()
        if conn is not None:
            conn.close()
