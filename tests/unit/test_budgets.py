"""The code budgets (tests/support/budgets.py, ``make budgets`` in ``make check``): the package keeps
them, and a planted 61-line function, a 401-line class, a new blind except and a stale exception
each make the check fail (issue 46)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from support.budgets import REPO, Budgets, check_tree

NONE_ALLOWED = Budgets(allowed={"functions": {}, "classes": {}, "blind-excepts": {}})


def _function(name: str, lines: int) -> str:
    """A function of exactly ``lines`` physical lines (``def`` line included)."""
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 2))
    return f"def {name}() -> int:\n{body}    return 0\n"


def _tree(tmp_path: Path, files: dict[str, str], budgets: str = "") -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.ancre.budgets]\n{budgets}", encoding="utf-8")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    return tmp_path


def test_the_package_keeps_its_budgets() -> None:
    findings = check_tree()
    assert not findings, "\n".join(map(str, findings))


def test_a_planted_61_line_function_fails_the_check(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"acl/ok.py": _function("sixty", 60), "acl/long.py": _function("sixty_one", 61)})
    findings = check_tree(root, NONE_ALLOWED)
    assert [(f.kind, f.where, f.detail) for f in findings] == [
        ("functions", "acl/long.py::sixty_one", "function of 61 lines > 60")
    ]


def test_the_make_target_fails_on_a_planted_61_line_function(tmp_path: Path) -> None:
    """The command ``make check`` runs: status 1 and the place named, on a copy of the package
    with one function planted."""
    copy = tmp_path / "ancre"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".venv", ".git", ".typecheck", "tests", "examples",
                                                              "docs", "__pycache__", "build", "*.egg-info"))
    (copy / "tests" / "support").mkdir(parents=True)
    shutil.copy2(REPO / "tests" / "support" / "budgets.py", copy / "tests" / "support" / "budgets.py")
    ok = subprocess.run([sys.executable, "tests/support/budgets.py"], cwd=copy, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout
    (copy / "query" / "planted.py").write_text(_function("too_long", 61), encoding="utf-8")
    bad = subprocess.run([sys.executable, "tests/support/budgets.py"], cwd=copy, capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert "query/planted.py:1: too_long: function of 61 lines > 60" in bad.stdout, bad.stdout


def test_a_401_line_class_fails_and_a_listed_one_passes(tmp_path: Path) -> None:
    def cls(name: str, lines: int) -> str:
        return f"class {name}:\n" + "".join(f"    x{i} = {i}\n" for i in range(lines - 1))

    root = _tree(tmp_path, {"index/big.py": cls("Big", 401), "index/fine.py": cls("Fine", 400)})
    assert [f.where for f in check_tree(root, NONE_ALLOWED)] == ["index/big.py::Big"]
    listed = Budgets(allowed={"functions": {}, "classes": {"index/big.py::Big": "split on branch x"}, "blind-excepts": {}})
    assert check_tree(root, listed) == []


def test_a_new_blind_except_fails_unless_it_raises(tmp_path: Path) -> None:
    src = '''
def reraised() -> None:
    try:
        pass
    except Exception:
        raise

def typed(e: int) -> None:
    try:
        pass
    except (ValueError, Exception) as err:
        raise RuntimeError("typed") from err

def narrow() -> None:
    try:
        pass
    except OSError:
        pass

def swallowed() -> None:
    try:
        pass
    except BaseException:
        def later() -> None:
            raise ValueError  # a raise in a nested function raises nothing here
'''
    root = _tree(tmp_path, {"daemon/x.py": src})
    findings = check_tree(root, NONE_ALLOWED)
    assert [(f.kind, f.where) for f in findings] == [("blind-excepts", "daemon/x.py::swallowed")]


def test_a_stale_exception_is_reported_and_a_reason_is_required(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"acl/ok.py": _function("short", 5)},
                 '[tool.ancre.budgets.functions]\n"acl/ok.py::short" = "was long"\n')
    findings = check_tree(root)
    assert [(f.kind, f.where) for f in findings] == [("stale", "acl/ok.py::short")]
    (root / "pyproject.toml").write_text('[tool.ancre.budgets.functions]\n"acl/ok.py::short" = ""\n', encoding="utf-8")
    try:
        Budgets.from_pyproject(root / "pyproject.toml")
    except ValueError as e:
        assert "a reason" in str(e)
    else:  # pragma: no cover
        raise AssertionError("an exception without a reason was accepted")
