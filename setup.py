"""Build script: only the package list, found on disk (everything else is in pyproject.toml).

The repository root *is* the ``ancre`` package (``package-dir = {"ancre" = "."}``), which
``[tool.setuptools.packages.find]`` can't express: it would install ``acl``, ``connectors`` … as
top-level packages. Here every folder below the root with an ``__init__.py`` becomes
``ancre.<folder>`` (``tests`` and build output excluded), and this script itself is left out of
the wheel. ``tests/integration/test_wheel.py`` builds the wheel and imports every module from it.
"""

from __future__ import annotations

import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
EXCLUDE = ("tests", "tests.*", "build", "build.*", "examples", "examples.*", "docs", "docs.*")


class _BuildPy(build_py):
    """``build_py`` without ``ancre.setup`` (this file sits in the package's folder)."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if not (package == "ancre" and m[1] == "setup")]


if __name__ == "__main__":
    setup(
        packages=["ancre", *(f"ancre.{p}" for p in find_packages(where=HERE, exclude=EXCLUDE))],
        cmdclass={"build_py": _BuildPy},
    )
