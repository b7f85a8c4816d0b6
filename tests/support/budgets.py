"""The code budgets of docs/ARCHITECTURE.md ("Budgets"), checked over the package's source: a
function (or method) is at most 60 lines long, a class at most 400, and a blind ``except`` —
``except:``, ``except Exception`` or ``except BaseException``, alone or in a tuple — either
re-raises or raises a typed error from its body (``raise``, ``raise SomeError(...) from e``). The
few places allowed past a budget are listed in ONE place, ``[tool.ancre.budgets]`` of
pyproject.toml, each with its reason; an entry that no longer matches anything is reported too, so
the list only ever shrinks.

Why a checker of our own, ~150 lines of ``ast``: no maintained linter measures what the budgets
say. ruff's PLR0915 and pylint's too-many-statements count *statements* (a 90-line function of
long calls passes), C901 counts branches; flake8-functions' CFQ001 and flake8-max-function-length
measure functions only (no class length) and would bring flake8 beside ruff, with the exceptions
scattered in ``noqa`` comments; ruff's BLE001 flags blind excepts but its exceptions are ``noqa``
comments in 40 files, not one list. The lengths here are physical lines, ``def``/``class`` line
to the last line of the body, docstring included (what a reader scrolls through).

Run ``python tests/support/budgets.py`` (``make budgets``, part of ``make check``): one line per
finding, exit status 1 if any. ``tests/unit/test_budgets.py`` checks the tree and plants a 61-line
function, a 401-line class and a new blind except to see each fail.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIPPED = frozenset({"tests", "examples", "docs", "build", "systemd", ".venv", ".typecheck", ".git"})
"""Top-level folders that are not the package's source (``setup.py`` is left out too)."""


@dataclass(frozen=True)
class Budgets:
    """The limits (physical lines) and the places allowed past them: ``allowed`` maps a kind
    (``functions``, ``classes``, ``blind-excepts``) to ``{"path::Qual.name": reason}``."""

    function_lines: int = 60
    class_lines: int = 400
    allowed: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def from_pyproject(cls, path: Path = REPO / "pyproject.toml") -> Budgets:
        """The budgets of ``[tool.ancre.budgets]`` (``function-lines``, ``class-lines``, and the
        tables ``functions``, ``classes``, ``blind-excepts`` of allowed places with their
        reason). Raises ``ValueError`` for an unknown key or an entry without a reason."""
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("ancre", {}).get("budgets", {})
        kinds = ("functions", "classes", "blind-excepts")
        unknown = set(table) - {"function-lines", "class-lines", *kinds}
        if unknown:
            raise ValueError(f"[tool.ancre.budgets]: unknown key(s) {sorted(unknown)}")
        allowed = {k: dict(table.get(k, {})) for k in kinds}
        for kind, entries in allowed.items():
            for where, reason in entries.items():
                if not isinstance(reason, str) or not reason.strip():
                    raise ValueError(f"[tool.ancre.budgets.{kind}] {where!r}: a reason (a non-empty string) is required")
        return cls(int(table.get("function-lines", 60)), int(table.get("class-lines", 400)), allowed)


@dataclass(frozen=True)
class Finding:
    """One place over a budget: ``kind`` (``functions``, ``classes``, ``blind-excepts`` or ``stale``),
    ``where`` (``path::Qual.name``), ``line`` and what is wrong (``detail``)."""

    kind: str
    where: str
    line: int
    detail: str

    def __str__(self) -> str:
        path, _, qual = self.where.partition("::")
        return f"{path}:{self.line}: {qual}: {self.detail}"


def _blind(handler: ast.ExceptHandler) -> bool:
    """Whether the handler catches everything: bare, ``Exception`` or ``BaseException`` (alone or in a tuple)."""
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("Exception", "BaseException") for n in names)


def _raises(body: list[ast.stmt]) -> bool:
    """Whether a ``raise`` stands in ``body`` (not inside a nested function or class)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Raise):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
    """``(qualified name of the enclosing def/class, node)`` for every node below ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qual = f"{prefix}.{child.name}" if prefix else child.name
            yield qual, child
            yield from _walk(child, qual)
        else:
            yield prefix, child
            yield from _walk(child, prefix)


def check_source(rel: str, text: str, budgets: Budgets) -> Iterator[tuple[Finding, bool]]:
    """``(finding, allowed)`` for every place of the module ``rel`` (its path from the repository
    root, POSIX) over a budget; ``allowed``: listed with a reason."""
    for qual, node in _walk(ast.parse(text, rel), ""):
        where = f"{rel}::{qual}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind, limit = ("classes", budgets.class_lines) if isinstance(node, ast.ClassDef) else (
                "functions", budgets.function_lines)
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            if n > limit:
                what = "class" if kind == "classes" else "function"
                yield Finding(kind, where, node.lineno, f"{what} of {n} lines > {limit}"), where in budgets.allowed[kind]
        elif isinstance(node, ast.ExceptHandler) and _blind(node) and not _raises(node.body):
            detail = "blind except (Exception / BaseException / bare) neither re-raised nor turned into a typed error"
            yield Finding("blind-excepts", where or f"{rel}::<module>", node.lineno, detail), (
                (where or f"{rel}::<module>") in budgets.allowed["blind-excepts"])


def sources(root: Path = REPO) -> Iterator[tuple[str, str]]:
    """``(path from root, text)`` of every module of the package below ``root``."""
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if rel.parts[0] in SKIPPED or rel.parts[0].startswith(".") or rel.as_posix() == "setup.py":
            continue
        yield rel.as_posix(), p.read_text(encoding="utf-8")


def check_tree(root: Path = REPO, budgets: Budgets | None = None) -> list[Finding]:
    """Every finding not allowed in the package below ``root``, plus every allowed entry that
    matched nothing (``stale``: remove it from pyproject.toml)."""
    budgets = budgets or Budgets.from_pyproject(root / "pyproject.toml")
    out: list[Finding] = []
    used: set[tuple[str, str]] = set()
    for rel, text in sources(root):
        for finding, allowed in check_source(rel, text, budgets):
            if allowed:
                used.add((finding.kind, finding.where))
            else:
                out.append(finding)
    for kind, entries in budgets.allowed.items():
        out += [Finding("stale", w, 0, f"listed in [tool.ancre.budgets.{kind}] but within budget or gone: remove it")
                for w in entries if (kind, w) not in used]
    return out


def main() -> int:
    """Print the findings of the repository; 1 if any."""
    findings = check_tree()
    for f in findings:
        print(f)
    if findings:
        print(f"{len(findings)} place(s) over budget (docs/ARCHITECTURE.md \"Budgets\"; exceptions: pyproject.toml "
              "[tool.ancre.budgets], each with its reason)")
        return 1
    print("budgets kept: functions <= 60 lines, classes <= 400, no unlisted blind except")
    return 0


if __name__ == "__main__":
    sys.exit(main())
