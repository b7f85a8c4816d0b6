"""The principal formats ``ancre.models.Principal`` documents are the ones the code writes."""

from __future__ import annotations

import ast
import inspect
import itertools
import re

import ancre.models
from ancre.connectors.sharepoint.permissions import site_group_principal
from ancre.models import sid_principal


def _principal_doc() -> str:
    """The docstring under ``Principal = NewType(...)`` in ancre/models.py (a ``NewType`` keeps none)."""
    body = ast.parse(inspect.getsource(ancre.models)).body
    for stmt, nxt in itertools.pairwise(body):
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "Principal" for t in stmt.targets):
            assert isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
            return str(nxt.value.value)
    raise AssertionError("no Principal in ancre.models")


def _documented(prefix: str) -> str:
    """The documented form of the principals with ``prefix`` (``sp:<site-id>:<group-id>``)."""
    m = re.search(rf"``({re.escape(prefix)}:[^`]*)``", _principal_doc())
    assert m, f"{prefix}: not documented on Principal"
    return m.group(1)


def _pattern(documented: str) -> re.Pattern[str]:
    """A documented form as a regex: each ``<placeholder>`` stands for a value without the separators."""
    parts = re.split(r"<[^>]+>", documented)
    return re.compile("[^:/]+".join(re.escape(p) for p in parts).replace(re.escape("…"), ".*") + "$")


def test_the_sharepoint_site_group_principal_is_written_as_documented() -> None:
    written = site_group_principal("axonix.sharepoint.com,0f3c,9a1b", 7)
    assert _pattern(_documented("sp")).match(written), (_documented("sp"), written)


def test_the_sid_principal_is_written_as_documented() -> None:
    assert _pattern(_documented("sid")).match(sid_principal("S-1-5-21-1-2-3-1105"))
