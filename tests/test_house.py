"""The house rules a reviewer would otherwise check by eye."""

from __future__ import annotations

import ast
import re
from pathlib import Path

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


MARKDOWN = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/*.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCED = re.compile(r"```.*?```", re.DOTALL)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives ``path``'s headings: lower case, punctuation dropped, spaces to hyphens, a repeated
    heading's anchor numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in FENCED.sub("", path.read_text()).splitlines():
        if line.startswith("#"):
            slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_every_link_of_the_docs_reaches_a_file_and_heading_of_this_repository():
    broken = []
    for pattern in MARKDOWN:
        for path in sorted(ROOT.glob(pattern)):
            for target in LINK.findall(CODE.sub("", path.read_text())):
                if re.match(r"[a-z]+:", target):  # https:, mailto:: outside this repository
                    continue
                file, _, anchor = target.partition("#")
                linked = (path.parent / file).resolve() if file else path
                if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
                    broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, f"links to no file or heading: {broken}"
