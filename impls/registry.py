"""The one registry of strategies. Tests, benchmarks and reports take their list from here.

Adding a strategy is one module exposing ``unfold = Strategy(...)`` plus one line in ``_REGISTERED``.
"""

from __future__ import annotations

from impls import as_strided, compiled, compiled_reuse, gather, gather_reuse, native, onehot, tiling
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
)

STRATEGIES: dict[str, Strategy] = {s.name: s for s in _REGISTERED}
if len(STRATEGIES) != len(_REGISTERED):
    raise RuntimeError("two registered strategies share a name")


def get_strategy(name: str) -> Strategy:
    """The registered strategy called ``name``; a ``KeyError`` listing the known names otherwise."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise KeyError(f"unknown strategy {name!r}; known strategies: {', '.join(STRATEGIES)}") from None


def strategy_names() -> list[str]:
    return list(STRATEGIES)
