"""Unfold (im2col) strategies behind one contract: the exact output of ``torch.nn.functional.unfold``.

Every strategy is called as ``unfold(input, kernel_size, dilation=1, padding=0, stride=1)`` on 3-d, 4-d or 5-d
input ``(N, C, *spatial)`` and returns ``(N, C * prod(kernel_size), L)`` with autograd, for the spatial dims and
devices its registry entry declares (``Strategy.spatial_dims``, ``Strategy.devices``); other input is refused with
a ``ValueError`` naming what it supports.
"""

from impls.geometry import SPATIAL_DIMS, SUPPORTED_DTYPES, Geometry, parse
from impls.strategy import Strategy  # bound before the registry loads the plugins, which may import it from here

# isort: split
from impls.registry import (
    PLUGIN_PROBLEMS,
    PLUGIN_UNKEPT,
    STRATEGIES,
    TESTED_STRATEGIES,
    UNVERIFIED,
    get_strategy,
    strategy_names,
)

__all__ = [
    "PLUGIN_PROBLEMS",
    "PLUGIN_UNKEPT",
    "SPATIAL_DIMS",
    "STRATEGIES",
    "SUPPORTED_DTYPES",
    "TESTED_STRATEGIES",
    "UNVERIFIED",
    "Geometry",
    "Strategy",
    "get_strategy",
    "parse",
    "strategy_names",
]
