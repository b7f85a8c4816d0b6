"""The systemd files agree with each other and with the install steps of docs/DEPLOY.md (issue 45): one
admin group everywhere — the one ``ancre.sysusers.conf`` creates, the one ``/etc/ancre`` and
``ancre.toml`` are installed with, the one the units run with and the one ``ancre.env.example``
says reads the TOML. (``systemd-analyze verify`` and ``security`` of the units:
tests/integration/test_daemon.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from ancre.settings import DaemonConfig

REPO = Path(__file__).resolve().parents[2]
SYSTEMD = REPO / "systemd"


def _sysusers() -> tuple[set[str], set[str]]:
    users, groups = set(), set()
    for line in (SYSTEMD / "ancre.sysusers.conf").read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if fields and fields[0] == "u":
            users.add(fields[1])
        elif fields and fields[0] == "g":
            groups.add(fields[1])
    return users, groups


def test_one_admin_group_everywhere() -> None:
    users, groups = _sysusers()
    admin = DaemonConfig().admin_group
    assert admin in groups and users == {"ancre"}
    deploy = (REPO / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    installed = set(re.findall(r"^sudo install .*?-g (\S+) .*?/etc/ancre", deploy, re.MULTILINE))
    assert installed == {admin}, installed
    for unit in ("ancre.service", "ancre-api.service"):
        text = (SYSTEMD / unit).read_text(encoding="utf-8")
        assert re.findall(r"^Group=(\S+)$", text, re.MULTILINE) == [admin], unit
        assert re.findall(r"^User=(\S+)$", text, re.MULTILINE) == ["ancre"], unit
    env = (SYSTEMD / "ancre.env.example").read_text(encoding="utf-8")
    said = re.findall(r"readable by the (\S+) group", " ".join(env.split()))
    assert said == [admin], said
