"""A real syslog daemon for the audit witness tests: rsyslogd (Debian's `rsyslog`, installed by
.ci/setup-test-deps.sh) started unprivileged on a Unix datagram socket of the test's folder, writing
the ``authpriv`` facility to a file with the traditional file format
(``RSYSLOG_TraditionalFileFormat``: ``<date> <host> <tag><message>``, what Debian writes to
/var/log/auth.log). Configuration: rsyslog's documented RainerScript (imuxsock's ``Socket``,
``SysSock.Use``; omfile's ``file`` and ``template``), https://www.rsyslog.com/doc/configuration/modules/imuxsock.html
and https://www.rsyslog.com/doc/configuration/modules/omfile.html.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

RSYSLOGD = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"


def available() -> str | None:
    """``None`` when rsyslogd can run here, else why not."""
    if not os.path.exists(RSYSLOGD):
        return "rsyslogd is not installed (Debian package rsyslog; .ci/setup-test-deps.sh installs it as root)"
    return None


@dataclass
class Rsyslog:
    """A running rsyslogd: its socket, the file it writes ``authpriv`` messages to, its process."""

    folder: Path
    socket: Path
    log: Path
    proc: subprocess.Popen[bytes]

    @classmethod
    def start(cls, folder: Path) -> Rsyslog:
        """Start rsyslogd in ``folder`` and wait until its socket is there. Raises
        :class:`RuntimeError` (with its output) when it does not come up within 10 s."""
        folder.mkdir(parents=True, exist_ok=True)
        sock, log, conf = folder / "log.sock", folder / "auth.log", folder / "rsyslog.conf"
        conf.write_text(
            f'global(workDirectory="{folder}")\n'
            'module(load="imuxsock" SysSock.Use="off")\n'
            f'input(type="imuxsock" Socket="{sock}" CreatePath="on")\n'
            f'authpriv.* action(type="omfile" file="{log}" template="RSYSLOG_TraditionalFileFormat")\n',
            encoding="utf-8",
        )
        proc = subprocess.Popen([RSYSLOGD, "-n", "-f", str(conf), "-i", str(folder / "rsyslogd.pid")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = proc.communicate()[0].decode("utf-8", "replace")
                raise RuntimeError(f"rsyslogd did not start: {out}")
            time.sleep(0.05)
        return cls(folder, sock, log, proc)

    def wait_for(self, text: str, timeout: float = 10.0, *, count: int = 1) -> None:
        """Wait until the log file holds ``text`` (``count`` times; rsyslog writes asynchronously)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log.exists() and self.log.read_text(encoding="utf-8", errors="replace").count(text) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not in {self.log} after {timeout} s")

    def stop(self) -> None:
        """Stop rsyslogd (SIGTERM, then SIGKILL after 5 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
