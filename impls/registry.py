"""The one registry of strategies. Tests, benchmarks and reports take their list from here.

Adding a strategy is one module exposing ``unfold = Strategy(...)`` plus one line in ``_REGISTERED``; a strategy
from another package comes in without an edit here (``impls.plugins``: an entry point or
``UNFOLD_BENCH_STRATEGIES``).

A strategy whose code runs only on a device that no GPU check has passed on yet waits in ``_UNVERIFIED``: the
tests run it (``TESTED_STRATEGIES``) wherever it can run, benchmarks and reports never see it. Once the test suite
passes on that device (``pytest -m cuda`` on a GPU machine for the Triton kernels), its line moves to ``_REGISTERED``.
"""

from __future__ import annotations

from impls import (
    as_strided,
    compiled,
    compiled_reuse,
    cpp,
    cpp_huge_pages,
    cpp_reuse,
    gather,
    gather_reuse,
    native,
    onehot,
    plugins,
    tiling,
    triton_gather,
)
from impls.strategy import Strategy

_REGISTERED: tuple[Strategy, ...] = (
    native.unfold,
    onehot.unfold,
    as_strided.unfold,
    tiling.unfold,
    gather.unfold,
    gather_reuse.unfold,
    compiled.unfold,
    compiled_reuse.unfold,
    cpp.unfold,
    cpp_reuse.unfold,
    cpp_huge_pages.unfold,
)

# Checked only under Triton's CPU interpreter so far: supported on CUDA once the GPU check's parity tests pass there.
_UNVERIFIED: tuple[Strategy, ...] = (triton_gather.unfold,)

_BUILT_IN: dict[str, Strategy] = {s.name: s for s in _REGISTERED}
UNVERIFIED: dict[str, Strategy] = {s.name: s for s in _UNVERIFIED}
if len({**_BUILT_IN, **UNVERIFIED}) != len(_REGISTERED) + len(_UNVERIFIED):
    raise RuntimeError("two strategies share a name")

# Strategies from outside the repository (impls.plugins): added after the built-in ones, whose names and
# implementations they never take; one that cannot be loaded, or whose name or implementation is taken, is left out
# and listed in PLUGIN_PROBLEMS (name -> why). A built-in name is refused while loading, so a plugin's function
# loaded under a built-in's name and under one of its own is kept under its own. PLUGIN_UNKEPT: the specs of
# $UNFOLD_BENCH_STRATEGIES (--strategy) from which no strategy is kept (spec -> why): a command that measures refuses
# them before any work.
PLUGIN_UNKEPT: dict[str, str] = {}
_OUTSIDE, PLUGIN_PROBLEMS = plugins.load(built_in={**_BUILT_IN, **UNVERIFIED}, unkept=PLUGIN_UNKEPT)
STRATEGIES: dict[str, Strategy] = {**_BUILT_IN, **_OUTSIDE}
TESTED_STRATEGIES: dict[str, Strategy] = {**STRATEGIES, **UNVERIFIED}


def get_strategy(name: str) -> Strategy:
    """The registered strategy called ``name``; a ``KeyError`` listing the known names otherwise."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; known strategies: {', '.join(STRATEGIES)}") from None


def strategy_names() -> list[str]:
    return list(STRATEGIES)
