"""Which strategies a change between two checkouts can touch, from the ``impls`` files each strategy's module reads.

The paired gate loads both revisions' ``impls`` into the same processes and times them with one harness, so the only
difference it can measure is in ``impls``' own files. A strategy's files are the module that defines it (the module
whose ``unfold`` the registry holds), the module of its implementation, and every ``impls`` module those import,
directly or not (read with ``ast``: imports inside functions too, and the ``__init__`` of each subpackage on the
way). Where all of a strategy's files are byte-identical at both revisions, both sides run the same code: its cells
are an A/A and need not be measured.

It fails safe. A changed file that is no strategy's (the package's ``__init__``, the registry, the plugin loader, a
module no strategy imports, any file that is not Python, such as ``cpp``'s C++ source) may touch every strategy, so
then every strategy is affected. So is always a strategy whose files cannot be told: no module of the tree defines
it (a plugin), its implementation's source is elsewhere, or a module it reads imports by name at run time, binds
the bare package name or imports ``*`` from it.
"""

from __future__ import annotations

import ast
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.trees import import_from, package_from

PACKAGE = "impls"
EVERY = "every strategy"  # what ``Impact.why`` names when a change may touch them all


@dataclass(frozen=True)
class Impact:
    """What a change touches: ``affected``, the strategies to measure (``None``: every one), and why."""

    affected: frozenset[str] | None
    analysed: frozenset[str]  # the strategies of either registry; any other (an outside one) is always touched
    changed: tuple[str, ...]  # the package's files that differ (added, removed or edited), relative to the tree
    why: str

    def touches(self, strategy: str) -> bool:
        return self.affected is None or strategy in self.affected or strategy not in self.analysed


def package_files(tree: Path, package: str = PACKAGE) -> dict[str, bytes]:
    """Every file of ``tree``'s ``package`` (bytecode caches left out), by its path relative to ``tree``."""
    root = Path(tree) / package
    return {
        path.relative_to(tree).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def changed_files(base: Path, head: Path, package: str = PACKAGE) -> tuple[str, ...]:
    """The files of ``package`` that differ between the checkouts ``base`` and ``head`` (added and removed ones too)."""
    before, after = package_files(base, package), package_files(head, package)
    return tuple(sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name)))


class UnresolvedImportError(Exception):
    """A module reaches others in a way the import walk cannot follow (the bare package name, ``import *``,
    ``importlib``): the strategies reading it are touched by any change."""


def _module_file(tree: Path, dotted: str) -> str | None:
    """The file of the module ``dotted`` in ``tree``, relative to it, if it is there."""
    parts = dotted.split(".")
    for candidate in (Path(*parts).with_suffix(".py"), Path(*parts) / "__init__.py"):
        if (Path(tree) / candidate).is_file():
            return candidate.as_posix()
    return None


def _dynamic_import(node: ast.AST) -> bool:
    """Whether ``node`` calls ``__import__`` or an ``import_module``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "__import__") or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )


def _imported(tree: Path, relative: str, package: str) -> set[str]:
    """The files of ``package`` that the module ``relative`` (a path in ``tree``) imports, wherever in it, with the
    ``__init__`` of every subpackage on the way (Python runs those too); ``UnresolvedImportError`` where it cannot
    tell."""
    path = Path(tree) / relative
    here = relative.removesuffix(".py").split("/")[:-1]  # the package the module is in (its own, for an __init__)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if _dynamic_import(node):
            raise UnresolvedImportError(f"{relative} imports by name at run time")
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is None and (alias.name == package or alias.name.startswith(f"{package}.")):
                    raise UnresolvedImportError(f"{relative} binds the package name {package!r} (import {alias.name})")
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            if any(alias.name == "*" for alias in node.names) and origin.split(".")[0] == package:
                raise UnresolvedImportError(f"{relative} imports * from {origin}")
            names = [origin, *(f"{origin}.{alias.name}" for alias in node.names)]  # ``from p import m``: m may be one
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != package:
                continue
            for depth in range(2, len(parts) + 1):  # impls.sub, impls.sub.mod, ...: never the package's own __init__
                if (module := _module_file(tree, ".".join(parts[:depth]))) is not None:
                    found.add(module)
    return found


def module_closure(tree: Path, start: str, package: str = PACKAGE) -> set[str]:
    """``start`` (a file of ``package``, relative to ``tree``) and every file of the package it imports, directly or
    through others (``UnresolvedImportError`` where one of them cannot be followed). The package's own ``__init__``
    is left out: importing a submodule runs it, but a change to it touches every strategy anyway (module
    docstring)."""
    seen, todo = set(), [start]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo += [name for name in _imported(tree, current, package) if name not in seen]
    return seen


def _source_of(obj: object, tree: Path) -> str | None:
    """The file (relative to ``tree``) in which ``obj`` (a module, a function, or a callable object's class) was
    defined, if it is one of ``tree``'s."""
    try:
        source = inspect.getsourcefile(obj if inspect.ismodule(obj) or inspect.isroutine(obj) else type(obj))
    except TypeError:
        return None
    if source is None:
        return None
    try:
        return Path(source).resolve().relative_to(Path(tree).resolve()).as_posix()
    except ValueError:
        return None


def strategy_files(tree: Path, package: str = PACKAGE) -> dict[str, set[str] | None]:
    """Each registered strategy of ``tree``'s ``package`` and its files (module docstring); ``None`` where they cannot
    be told: no module of the tree defines it, its implementation's source is not in the tree, or a module it reads
    imports in a way the walk cannot follow. Loads the registry as the gate's processes do
    (``benchmarks.trees.package_from``)."""
    tree = Path(tree).resolve()
    with package_from(package, [tree]):
        registry = import_from(f"{package}.registry", [tree])
        modules = [m for name, m in sys.modules.items() if name.startswith(f"{package}.") and m is not None]
        files: dict[str, set[str] | None] = {}
        for name, strategy in registry.STRATEGIES.items():
            defining = {_source_of(m, tree) for m in modules if getattr(m, "unfold", None) is strategy}
            starts = defining | {_source_of(strategy.implementation, tree)}
            if not defining or None in starts:
                files[name] = None  # defined outside the tree, or nowhere to be found: touched by any change
                continue
            try:
                files[name] = set().union(*(module_closure(tree, start, package) for start in starts))
            except UnresolvedImportError:
                files[name] = None
    return files


def impact(base: Path, head: Path, package: str = PACKAGE) -> Impact:
    """Which strategies the change from checkout ``base`` to checkout ``head`` can touch (module docstring)."""
    changed = changed_files(base, head, package)
    sides = [strategy_files(base, package), strategy_files(head, package)]
    files: dict[str, set[str] | None] = {}
    for name in sorted(set(sides[0]) | set(sides[1])):
        own = [side.get(name, set()) for side in sides]  # a strategy absent at one side has no files there
        files[name] = None if None in own else set().union(*own)
    analysed = frozenset(files)
    untold = frozenset(name for name, own in files.items() if own is None)
    if not changed:
        return Impact(untold, analysed, changed, f"no file of {package}/ differs")
    theirs = set().union(*(own for own in files.values() if own is not None))
    shared = [name for name in changed if name not in theirs]
    if shared:
        return Impact(None, analysed, changed, f"{', '.join(shared)} changed, no single strategy's: {EVERY} affected")
    affected = frozenset(
        name for name, own in files.items() if own is None or own & set(changed) or not all(name in s for s in sides)
    )
    return Impact(affected, analysed, changed, f"{', '.join(changed)} changed")
