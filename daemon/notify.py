"""systemd's notification protocol (sd_notify(3)) over the stdlib ``socket``.

A ``Type=notify`` service sends newline-separated ``KEY=VALUE`` assignments in one datagram to the
``AF_UNIX`` socket named by ``$NOTIFY_SOCKET``; a name starting with ``@`` is in the Linux
abstract namespace (the ``@`` stands for a leading NUL byte). Used here: ``READY=1``,
``STATUS=…``, ``WATCHDOG=1`` (every half ``$WATCHDOG_USEC``, the interval systemd recommends),
``STOPPING=1``. Source: systemd's sd_notify(3) and sd_watchdog_enabled(3) man pages.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("ancre.daemon.notify")


class SdNotifier:
    """Sends notifications to ``socket_path`` (default ``$NOTIFY_SOCKET``); a no-op without one.
    Never raises: a failed send is logged once and reported as ``False``."""

    def __init__(self, socket_path: str | None = None) -> None:
        path = socket_path if socket_path is not None else os.environ.get("NOTIFY_SOCKET")
        self.address: str | bytes | None = None
        if path:
            self.address = b"\0" + path[1:].encode() if path.startswith("@") else path
        self._warned = False

    @property
    def enabled(self) -> bool:
        """Whether a notification socket is configured."""
        return self.address is not None

    def send(self, **fields: str | int) -> bool:
        """Send ``KEY=VALUE`` lines (``send(READY=1, STATUS="…")``); ``True`` when delivered.
        Newlines in values are replaced by spaces (one assignment per line)."""
        if self.address is None:
            return False
        msg = "\n".join(f"{k}={str(v).replace(chr(10), ' ')}" for k, v in fields.items()).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.sendto(msg, self.address)
            return True
        except OSError as e:
            if not self._warned:
                log.warning("sd_notify to %r failed: %s", self.address, e)
                self._warned = True
            return False

    def ready(self, status: str) -> bool:
        """``READY=1`` with a ``STATUS=`` line."""
        return self.send(READY=1, STATUS=status)

    def status(self, status: str) -> bool:
        """``STATUS=`` (shown by ``systemctl status``)."""
        return self.send(STATUS=status)

    def watchdog(self) -> bool:
        """``WATCHDOG=1`` keep-alive."""
        return self.send(WATCHDOG=1)

    def stopping(self, status: str = "stopping") -> bool:
        """``STOPPING=1``."""
        return self.send(STOPPING=1, STATUS=status)


def watchdog_interval(environ: dict[str, str] | None = None) -> float | None:
    """Seconds between keep-alives: half of ``$WATCHDOG_USEC`` when it is set (and
    ``$WATCHDOG_PID``, if set, is this process), else ``None`` (no watchdog configured)."""
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) <= 0:
        return None
    if pid and pid != str(os.getpid()):
        return None
    return int(usec) / 1e6 / 2


__all__ = ["SdNotifier", "watchdog_interval"]
