"""A streamed HTTP response whose body is made by a worker thread and stopped when the client
disconnects (Open WebUI's Stop button closes the connection).

Starlette's ``StreamingResponse`` pulls a synchronous body one item at a time from its thread
pool and, on a disconnect, only stops waiting: the body is left suspended until garbage
collection closes it, so the model keeps generating into an unread connection and the audit
record of the abandoned answer is written minutes later. :class:`CancellableStream` instead:

- runs the whole body in one worker thread, which hands each chunk to the event loop;
- listens for ``http.disconnect`` all along (uvicorn sends it as soon as the connection closes),
  also before the first chunk; on it, calls ``cancel`` — for an answer,
  :meth:`ancre.query.answer.AnswerStream.cancel`, which shuts the model's connection down — and
  waits (at most ``grace_s`` seconds) for the body to end, so that what it does on the way out
  (the ``interrompue`` audit record) is done when the request ends;
- sends the response's status and headers only with the first chunk: an exception the body
  raises before its first chunk propagates from the response, before anything was sent, so the
  app's exception handlers still answer it with its proper status (503 ``audit_unavailable``
  when the audit record can't be written).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

log = logging.getLogger("ancre.api")

GRACE_S = 10.0
"""Seconds a cancelled body has to end once its client disconnected."""

_CHUNK, _END, _ERROR = "chunk", "end", "error"


class CancellableStream(Response):
    """Streams the bytes ``body`` yields, made in a worker thread; ``cancel()`` (from the event
    loop's thread) is called when the client disconnects before the body ended (see the module
    doc). ``headers``, ``media_type``: as for any response; the status is 200."""

    def __init__(
        self,
        body: Iterator[bytes],
        *,
        cancel: Callable[[], None],
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
        grace_s: float = GRACE_S,
    ) -> None:
        self.body_iterator = body
        self.cancel = cancel
        self.grace_s = grace_s
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)

    def _produce(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[tuple[str, Any]]) -> None:
        def put(kind: str, value: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        try:
            for chunk in self.body_iterator:
                put(_CHUNK, chunk)
            put(_END, None)
        except BaseException as e:  # handed to the event loop, raised there
            put(_ERROR, e)
        finally:
            close = getattr(self.body_iterator, "close", None)
            if close is not None:
                close()

    @staticmethod
    async def _disconnected(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        worker = threading.Thread(target=self._produce, args=(loop, queue), name="ancre-stream", daemon=True)
        worker.start()
        gone = asyncio.ensure_future(self._disconnected(receive))
        started = False
        try:
            while True:
                item = asyncio.ensure_future(queue.get())
                await asyncio.wait({item, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not item.done():
                    item.cancel()
                    await self._abandon(queue, worker)
                    return
                kind, value = item.result()
                if kind == _ERROR:
                    if not started:
                        raise value
                    log.error("stream body failed after its start", exc_info=value)
                    break
                if kind == _END:
                    break
                if not started:
                    await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
                    started = True
                await send({"type": "http.response.body", "body": value, "more_body": True})
            if not started:
                await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()

    async def _abandon(self, queue: asyncio.Queue[tuple[str, Any]], worker: threading.Thread) -> None:
        """The client left: cancel the body and wait for it to end (at most :attr:`grace_s`)."""
        self.cancel()
        try:
            async with asyncio.timeout(self.grace_s):
                while (await queue.get())[0] == _CHUNK:
                    pass
        except TimeoutError:
            log.warning("a cancelled stream did not end within %g s (thread %s)", self.grace_s, worker.name)


__all__ = ["GRACE_S", "CancellableStream"]
