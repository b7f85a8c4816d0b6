"""Shared pytest setup: makes ``tests/support`` importable as ``support`` (import-mode=importlib)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CORPUS = REPO / "examples" / "axonix"

import ancre  # noqa: E402,F401  (first: keeps smbprotocol's smbclient ahead of impacket's bin/smbclient.py)

if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from support.samba import samba_dc  # noqa: E402,F401  (session fixture: a real Samba AD DC on loopback)
