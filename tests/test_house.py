"""The house rules a reviewer would otherwise check by eye."""

from __future__ import annotations

import ast

from benchmarks.trees import ROOT

PACKAGES = ("impls", "benchmarks", "reports", "unfold_bench", "tests")
DOCSTRING_LINES = 20  # a summary, the why and the math; the longer explanation belongs in docs/internals.md


def test_a_module_docstring_is_a_summary_and_the_why_not_a_manual():
    long = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
            lines = len(docstring.rstrip().splitlines())
            if lines > DOCSTRING_LINES:
                long[str(path.relative_to(ROOT))] = lines
    assert not long, f"module docstrings over {DOCSTRING_LINES} lines (move the detail to docs/internals.md): {long}"


def test_the_files_the_packages_read_beside_their_code_are_installed_with_them():
    """asv's own environments (``regress --mode asv``, ``bench --commits``) install the project: a file the code reads
    from beside itself must be package data, or the installed suite cannot load it."""
    from fnmatch import fnmatch

    import pytest

    from impls.cpp import SOURCE

    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    read = {"impls": [SOURCE], "reports": sorted((ROOT / "reports" / "templates").glob("*.html"))}
    for package, files in read.items():
        for path in files:
            inside = path.relative_to(ROOT / package).as_posix()
            assert any(fnmatch(inside, pattern) for pattern in declared.get(package, [])), f"{package}/{inside}"
