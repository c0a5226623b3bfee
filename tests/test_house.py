"""The house rules a reviewer would otherwise check by eye."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from urllib.parse import unquote

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
SOURCES = ("impls", "benchmarks", "reports", "unfold_bench", ".github")  # whose text names docs' headings
FENCED = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)  # may wrap, not over a blank line
LINK = re.compile(r"\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title")
SOURCE_LINK = re.compile(r"(docs/[\w-]+\.md)#([\w-]+)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s", re.MULTILINE)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives ``path``'s ATX headings: the text lower-cased, punctuation but hyphens and underscores
    dropped, spaces to hyphens, a repeated heading's anchor numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in FENCED.sub("", path.read_text()).splitlines():
        heading = re.match(r" {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _reaches(path: Path, target: str, files: set[str]) -> bool:
    """Whether the link ``target`` in ``path`` leads to a file of this repository (and heading, for Markdown)."""
    file, _, anchor = unquote(target.strip("<>")).split("?")[0].partition("#")
    linked = (ROOT / file.lstrip("/")) if file.startswith("/") else (path.parent / file) if file else path
    linked = Path(os.path.normpath(linked))
    if not linked.is_relative_to(ROOT) or not linked.exists():
        return False
    inside = linked.relative_to(ROOT).as_posix()
    kept = inside in files if linked.is_file() else any(name.startswith(f"{inside}/") for name in files)
    if not kept:  # ignored or outside git: not in the repository a reader opens
        return False
    return not anchor or linked.suffix != ".md" or anchor in _anchors(linked)


def test_a_heading_gets_githubs_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Plain\n## `code`: it's (one)?\n```\n# not a heading\n```\n### Plain\n#### Closed ##\n")
    assert _anchors(page) == {"plain", "code-its-one", "plain-1", "closed"}


def test_every_link_of_the_docs_reaches_a_file_and_heading_of_this_repository():
    from benchmarks.trees import project_files

    files = set(project_files())
    broken, checked = [], 0
    for pattern in MARKDOWN:
        for path in sorted(ROOT.glob(pattern)):
            text = CODE_SPAN.sub("", FENCED.sub("", path.read_text()))
            assert not REFERENCE_DEFINITION.search(text), f"{path.name}: a reference-style link, which this reads not"
            for target in LINK.findall(text):
                if re.match(r"[a-z]+:", target):  # https:, mailto:: outside this repository
                    continue
                checked += 1
                if not _reaches(path, target, files):
                    broken.append(f"{path.relative_to(ROOT)}: {target}")
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py" if top != ".github" else "*.yml")):
            for file, anchor in SOURCE_LINK.findall(path.read_text()):
                checked += 1
                if not _reaches(ROOT / "README.md", f"{file}#{anchor}", files):
                    broken.append(f"{path.relative_to(ROOT)}: {file}#{anchor}")
    assert not broken, f"links to no file or heading: {broken}"
    assert checked > 100  # the links were found
