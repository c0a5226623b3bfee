"""Second copies of the code, each made one way: a revision's tree, a copy of the working tree, a clone to commit
in, and a folder whose ``impls`` is another tree's.

The gate checks out both revisions (``revision_tree``: a git worktree, so uncommitted work in the checkout is never
measured as either side); the instruction counts load one revision's ``impls`` beside this working tree's harness
(``impls_of``); the mutation check edits a copy of the working tree, uncommitted files included
(``working_copy``); the gate's validation commits an A/A change and injected slowdowns in a clone (``clone``); a
process loads two revisions' packages side by side (``package_from``, ``import_from``). Git itself runs through
``git`` (``head_commit`` where it may be absent). Child processes that print JSON are ``benchmarks.children``'s.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def git(*args: str, repo: Path = ROOT) -> str:
    """``git args`` in ``repo``: its standard output, stripped; ``CalledProcessError`` when git fails."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def git_failure(error: subprocess.CalledProcessError) -> str:
    """Why ``git`` failed, for a message naming the value a user gave: the first line of its error output, without
    git's ``fatal:`` and the usage hints that follow (such as "Use '--' to separate paths from revisions")."""
    lines = (error.stderr or "").strip().splitlines()
    reason = next((line for line in lines if line.startswith("fatal: ")), lines[0] if lines else "")
    return reason.removeprefix("fatal: ") or f"git exited with status {error.returncode}"


def head_commit(repo: Path = ROOT) -> str:
    """``repo``'s HEAD commit, or "" where git cannot say (a tree without ``.git``, as carried to a GPU loan)."""
    try:
        return git("rev-parse", "HEAD", repo=repo)
    except (OSError, subprocess.CalledProcessError):
        return ""


@contextmanager
def revision_tree(revision: str, path: Path, repo: Path = ROOT) -> Iterator[Path]:
    """``revision`` of ``repo`` checked out at ``path`` (a detached git worktree; one left there by a killed run is
    replaced), removed afterwards."""
    subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=repo, capture_output=True)
    git("worktree", "add", "--detach", str(path), revision, repo=repo)
    try:
        yield path
    finally:
        git("worktree", "remove", "--force", str(path), repo=repo)


def project_files(root: Path = ROOT) -> list[str]:
    """The working tree's tracked and untracked, not ignored, files that exist."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", repo=root)
    return sorted({name for name in listed.split("\0") if name and (root / name).is_file()})


@contextmanager
def working_copy(root: Path = ROOT, prefix: str = "unfold-bench-") -> Iterator[Path]:
    """A temporary copy of the working tree's files (``project_files``), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as directory:
        copy = Path(directory) / "project"
        for name in project_files(root):
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, target)
        yield copy


def clone(repo: Path, path: Path, name: str = "unfold-bench", email: str = "unfold-bench@localhost") -> Path:
    """A clone of ``repo`` at ``path`` with a committer configured, to commit changes in without touching ``repo``."""
    subprocess.run(["git", "clone", "-q", str(repo), str(path)], check=True)
    git("config", "user.name", name, repo=path)
    git("config", "user.email", email, repo=path)
    return path


@contextmanager
def impls_of(tree: Path) -> Iterator[Path]:
    """A temporary folder holding only a link to ``tree``'s ``impls``: first on ``PYTHONPATH``, it makes a process
    import that revision's strategies and this working tree's harness."""
    with tempfile.TemporaryDirectory() as folder:
        os.symlink(Path(tree).resolve() / "impls", Path(folder) / "impls")
        yield Path(folder)


@contextmanager
def package_from(top: str, roots: Sequence[Path]) -> Iterator[None]:
    """Inside the block, the package ``top`` is imported afresh from ``roots`` (first on the import path); the
    modules already imported under that name are back in place afterwards, so another checkout's can be loaded
    beside them in one process."""

    def mine(name: str) -> bool:
        return name == top or name.startswith(f"{top}.")

    saved = {name: module for name, module in sys.modules.items() if mine(name)}
    for name in saved:
        del sys.modules[name]
    paths = [str(root) for root in roots]
    sys.path[:0] = paths
    try:
        yield
    finally:
        for path in paths:
            sys.path.remove(path)
        for name in [name for name in sys.modules if mine(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


def import_from(module_name: str, roots: Sequence[Path]) -> ModuleType:
    """``module_name`` imported (inside ``package_from``), refused with ``ImportError`` unless its file is its
    top-level package's, or that module's, under one of ``roots``: timing other code than the revision's would make a
    verdict a lie."""
    module = importlib.import_module(module_name)
    found = Path(module.__file__ or "").resolve()
    tops = [Path(root).resolve() / module_name.split(".")[0] for root in roots]
    if not any(top in found.parents or found == top.with_suffix(".py") for top in tops):
        raise ImportError(f"imported {module_name} from {found}, not from {' or '.join(map(str, tops))}")
    return module
