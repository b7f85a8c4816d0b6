"""Peak memory and time of an ``ancre sync`` in a fresh process (tests and benchmarks).

:func:`measure_sync` runs the CLI's ``sync`` in a child Python process and reads, once it is
done, the kernel's peak resident set sizes: the process's own (``VmHWM`` of ``/proc/self/status``,
proc(5): the peak of this process image only — ``getrusage``'s ``RUSAGE_SELF`` would also count
the pages it shared with the test process between fork and exec, hundreds of MiB late in a full
test run) and that of its extraction worker (``RUSAGE_CHILDREN``: the worker is the only child it
starts and waits for). Their sum bounds the peak of the whole process tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

_DRIVER = textwrap.dedent(
    """
    import json, resource, sys, time
    from ancre.app.cli import app
    t0 = time.monotonic()
    try:
        app(["sync", "--config", sys.argv[1], "--json"], standalone_mode=False)
    finally:
        seconds = time.monotonic() - t0
        self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            with open("/proc/self/status") as status:
                self_kib = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
        except (OSError, StopIteration):
            pass
        children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(json.dumps({"self_mib": self_kib / 1024, "worker_mib": children_kib / 1024, "seconds": seconds}))
    """
)


def measure_sync(cfg: Path, timeout_s: float = 600) -> dict[str, float]:
    """``{"self_mib", "worker_mib", "seconds"}`` of ``ancre sync --config cfg`` run in a fresh
    process (peak RSS in MiB of the process and of its extraction worker; seconds of the sync,
    interpreter start excluded). Raises ``AssertionError`` with the stderr tail if it failed."""
    out = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(cfg)], check=False, capture_output=True, text=True, timeout=timeout_s,
        env={**os.environ, "ANCRE_LOG_LEVEL": "ERROR"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def office_config(root: Path) -> Path:
    """An ``ancre.toml`` in ``root``: one folder source ``bureau`` at ``root/share`` readable by
    Everyone, a file directory with the user ``zoe``; returns its path."""
    (root / "directory.json").write_text(json.dumps({
        "domain_sid": "S-1-5-21-11", "netbios": "BUREAU", "groups": {},
        "users": {"zoe": {"sid": "S-1-5-21-11-1001", "groups": []}},
    }), encoding="utf-8")
    cfg = root / "ancre.toml"
    cfg.write_text(
        'data_dir = "data"\n[directory]\nkind = "file"\npath = "directory.json"\n'
        '[[sources]]\nid = "bureau"\nroot = "share"\nprincipals = ["sid:S-1-1-0"]\n'
        "unc_root = '\\\\SRV\\Bureau'\n",
        encoding="utf-8",
    )
    return cfg
