"""Strategies from outside this repository: installed packages' entry points and modules a user names.

A package declares one in its ``pyproject.toml``::

    [project.entry-points."unfold_bench.strategies"]
    mine = "my_package.unfold:unfold"

and a module on the path is named with ``UNFOLD_BENCH_STRATEGIES="module:attribute,..."`` (``unfold-bench
--strategy module:attribute ...`` sets it, so that every process the suite starts loads the same). The
attribute is a ``Strategy`` (to declare spatial dims, devices and defects) or a plain callable with
``torch.nn.functional.unfold``'s signature, which is wrapped: it gets the suite's argument validation and is
declared for every spatial dim and device, and the correctness gate, the parity tests and the capability matrix
find what it does not do. Either must pickle (``PICKLABLE``). A plugin that cannot be loaded, that takes a built-in
strategy's name, or whose implementation another name loaded first, is left out, its name and reason kept in
``impls.PLUGIN_PROBLEMS``.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
from collections.abc import Callable, Mapping
from importlib import metadata

import torch

from impls.geometry import Geometry
from impls.strategy import Strategy

GROUP = "unfold_bench.strategies"
# The correctness gate checks a strategy in a child process, which gets it pickled: a function by reference
PICKLABLE = "its implementation must be picklable: define it at module level, not as a lambda or a closure"
VARIABLE = "UNFOLD_BENCH_STRATEGIES"


class Called:
    """A strategy's implementation that calls ``function`` with ``F.unfold``'s signature on validated arguments.
    A class, not a closure, so that a strategy pickles (the correctness gate checks it in a child process) with its
    function pickled by reference."""

    def __init__(self, function: Callable[..., torch.Tensor]) -> None:
        self.function = function

    def __call__(self, input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        g = geometry
        return self.function(input, g.kernel_size, dilation=g.dilation, padding=g.padding, stride=g.stride)


def wrap(name: str, function: Callable[..., torch.Tensor], origin: str) -> Strategy:
    """A plain callable ``function(input, kernel_size, dilation, padding, stride)`` as a strategy named ``name``."""
    summary = (inspect.getdoc(function) or "").strip().splitlines()
    return Strategy(
        name=name,
        description=f"from {origin}" + (f": {summary[0]}" if summary else ""),
        spatial_dims=(1, 2, 3),
        devices=("cpu", "cuda"),
        implementation=Called(function),
        origin=origin,
    )


def as_strategy(name: str, found: object, origin: str) -> Strategy:
    """``found`` (a ``Strategy`` or a callable) as a strategy, its ``origin`` recorded; a ``TypeError`` when it is
    neither, or when the strategy does not pickle (``PICKLABLE``), so that it is set aside before any cell runs."""
    if isinstance(found, Strategy):
        from dataclasses import replace

        strategy = replace(found, origin=found.origin or origin)
    elif callable(found):
        strategy = wrap(name, found, origin)
    else:
        raise TypeError(f"{type(found).__name__} is neither a Strategy nor a callable")
    try:
        pickle.dumps(strategy)
    except Exception as error:  # PicklingError, AttributeError ("Can't pickle local object"), TypeError, ...
        raise TypeError(f"{PICKLABLE} ({type(error).__name__}: {error})") from error
    return strategy


def _distribution(module_name: str) -> str | None:
    """The installed package (name and version) that provides ``module_name``'s top-level package, if any."""
    top = module_name.split(".")[0]
    for name in metadata.packages_distributions().get(top, []):
        return f"{name} {metadata.version(name)}"
    return None


def _from_entry_points(found: dict[str, Strategy], problems: dict[str, str], built_in: Mapping[str, Strategy]) -> None:
    for entry in metadata.entry_points(group=GROUP):
        origin = f"{entry.dist.name} {entry.dist.version}" if entry.dist else entry.value
        try:
            strategy = as_strategy(entry.name, entry.load(), origin)
        except Exception as error:  # any failure of someone else's package: reported, never fatal
            why = f"entry point {entry.value!r} ({origin}) could not be loaded: {_why(error)}"
            set_aside(problems, entry.name, why)
            continue
        _add(found, problems, strategy, built_in)


def specs(value: str | None = None) -> list[str]:
    """The ``MODULE:ATTRIBUTE`` specs of ``value`` (default ``$UNFOLD_BENCH_STRATEGIES``), each once, in order."""
    value = os.environ.get(VARIABLE, "") if value is None else value
    return list(dict.fromkeys(s.strip() for s in value.split(",") if s.strip()))


def _from_variable(
    found: dict[str, Strategy],
    problems: dict[str, str],
    value: str,
    built_in: Mapping[str, Strategy],
    unkept: dict[str, str],
) -> None:
    loaded: dict[str, Strategy] = {}
    for spec in specs(value):  # a spec named twice loads once
        module_name, _, attribute = spec.partition(":")
        name = attribute.rsplit(".", 1)[-1] or spec
        if not module_name or not attribute:
            set_aside(problems, spec, f"{VARIABLE}: {spec!r} is not module:attribute")
            unkept[spec] = "not MODULE:ATTRIBUTE"
            continue
        try:
            target: object = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
            origin = _distribution(module_name) or f"{module_name} (module)"
            strategy = as_strategy(name, target, origin)
        except Exception as error:  # any failure of someone else's module: reported, never fatal
            set_aside(problems, name, f"{VARIABLE}: {spec!r} could not be loaded: {_why(error)}")
            unkept[spec] = f"cannot be loaded: {_why(error)}"
            continue
        _add(found, problems, strategy, built_in)
        loaded[spec] = strategy
    kept = {id(_implementation(s)) for s in [*built_in.values(), *found.values()]}
    for spec, strategy in loaded.items():  # set aside, and its implementation kept under no other name
        if id(_implementation(strategy)) not in kept:
            unkept[spec] = problems[strategy.name]


def _add(
    found: dict[str, Strategy], problems: dict[str, str], strategy: Strategy, built_in: Mapping[str, Strategy]
) -> None:
    """``strategy`` under its own name (a ``Strategy``'s ``name``, which the cells and pages show, may differ from
    the entry point's or attribute's), unless that name is refused.

    A name in ``built_in`` is never accepted: a plugin cannot replace a built-in strategy, and is set aside saying
    so; nor is a built-in's own implementation under another name. The same implementation reached twice (an
    installed entry point also named with ``--strategy``) is kept once: under the same name, silently; under
    another name (it would be benchmarked twice), the first name accepted keeps it and each later one is set
    aside, naming both. A plugin's copy under a built-in's name is never accepted, so a plugin's function loaded as
    ``gather`` and as ``mine`` is kept as ``mine`` whichever loads first. Another plugin of a name one took first is
    set aside, not swapped in."""
    if strategy.name in built_in:
        set_aside(
            problems, strategy.name, f"{strategy.origin}: the name {strategy.name!r} is taken by a built-in strategy"
        )
        return
    taken = found.get(strategy.name)
    if taken is not None:
        if _implementation(taken) is not _implementation(strategy):
            why = f"{strategy.origin}: the name {strategy.name!r} is taken by {taken.origin}"
            set_aside(problems, strategy.name, why)
        return
    candidates = [*built_in.values(), *found.values()]
    twin = next((s for s in candidates if _implementation(s) is _implementation(strategy)), None)
    if twin is not None:
        why = (
            f"{strategy.origin}: the same implementation as {twin.name!r} ({twin.origin or 'built in'}), kept under "
            f"that name: as {strategy.name!r} too it would be benchmarked twice"
        )
        set_aside(problems, strategy.name, why)
        return
    found[strategy.name] = strategy


def _implementation(strategy: Strategy) -> object:
    """What ``strategy`` calls: a wrapped callable's function, else its implementation."""
    implementation = strategy.implementation
    return implementation.function if isinstance(implementation, Called) else implementation


def set_aside(problems: dict[str, str], name: str, why: str) -> None:
    """Record why a plugin called ``name`` is left out, after any earlier reason for that name."""
    problems[name] = f"{problems[name]}; {why}" if name in problems else why


def _why(error: BaseException) -> str:
    why = f"{type(error).__name__}: {error}"
    if isinstance(error, ImportError) and "partially initialized module 'impls'" in str(error):
        why += (
            " (the registry loads the plugins while impls is imported: import Strategy, Geometry or parse from impls "
            "at the top of a plugin, and the registry's own names, such as get_strategy, inside a function)"
        )
    return why


def load(
    value: str | None = None, built_in: Mapping[str, Strategy] | None = None, unkept: dict[str, str] | None = None
) -> tuple[dict[str, Strategy], dict[str, str]]:
    """The outside strategies (entry points of group ``GROUP``, then ``value``, by default ``$UNFOLD_BENCH_STRATEGIES``)
    by name, and the plugins set aside (not loaded, or a name or implementation taken: ``_add``), by name, with why;
    no outside strategy takes a name or an implementation of ``built_in``, the built-in strategies by name.

    ``unkept``, where given, gets each spec of ``value`` from which no strategy is kept (it could not be loaded, or
    another strategy has its name), with why: what a user named on the command line, which a command that measures
    refuses before any work (``impls.PLUGIN_UNKEPT``). The same implementation kept under another name is kept."""
    built_in = {} if built_in is None else built_in
    found: dict[str, Strategy] = {}
    problems: dict[str, str] = {}
    _from_entry_points(found, problems, built_in)
    value = os.environ.get(VARIABLE, "") if value is None else value
    _from_variable(found, problems, value, built_in, {} if unkept is None else unkept)
    return found, problems


def describe(strategies: Mapping[str, Strategy], problems: Mapping[str, str]) -> list[str]:
    """What a command that loaded the registry says of the outside strategies: where each one came from, and each
    one set aside with its name and why (bench, advise and capabilities print these, then exit non-zero for a
    strategy set aside)."""
    outside = [s for s in strategies.values() if s.origin]
    lines = ["strategies from outside: " + ", ".join(f"{s.name} ({s.origin})" for s in outside)] if outside else []
    return lines + [f"set aside: strategy {name!r}: {why}" for name, why in problems.items()]


def set_aside_count(problems: Mapping[str, str]) -> str:
    """The closing line of a command that set outside strategies aside."""
    return f"{len(problems)} outside strateg{'y' if len(problems) == 1 else 'ies'} set aside (above)"
