"""The base of the asv suites over strategy x config x device whose cells pass the correctness gate first.

``CellSuite._gate`` is what each profile class's ``setup_cache`` returns: the correctness verdict of every cell
the run selects (``benchmarks.cells.gate``), all of them unless ``SELECTION_VARIABLE`` holds the run's asv
``-b`` expression.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping

from benchmarks.cells import Cell, gate
from benchmarks.profiles import Profile, SampledByProfile
from benchmarks.runner import BENCHMARK_PREFIXES, SELECTION_VARIABLE, cell_name
from benchmarks.vocabulary import DEVICES
from impls import STRATEGIES, Strategy


class CellSuite(SampledByProfile):
    """Base of a suite over strategy x config x device whose cells pass the correctness gate first."""

    profile: Profile
    strategies: Mapping[str, Strategy] = STRATEGIES
    params: list[list[str]]
    param_names = ("strategy", "config", "device")

    def _gate(self) -> dict:
        """The verdict of every cell of ``params`` that the run selects (asv's ``setup_cache`` of each profile class
        returns it): all of them unless ``SELECTION_VARIABLE`` holds the run's asv ``-b`` expression."""
        cells = [Cell.from_names(*names, self.profile, self.strategies) for names in self._selected()]
        return gate(cells, progress=print)

    def _selected(self) -> list[tuple[str, str, str]]:
        """The (strategy, config, device) of ``params`` whose cells in this class the run selects."""
        combos = list(itertools.product(*self.params))
        selection = os.environ.get(SELECTION_VARIABLE)
        if selection:
            module_name, class_name = type(self).__module__.rsplit(".", 1)[-1], type(self).__name__
            methods = [name for name in dir(self) if name.startswith(BENCHMARK_PREFIXES)]
            pattern = re.compile(selection)
            combos = [
                combo
                for combo in combos
                if any(pattern.search(cell_name(module_name, class_name, method, combo)) for method in methods)
            ]
        return combos


def suite_params(profile: Profile) -> list[list[str]]:
    return [list(STRATEGIES), [c.name for c in profile.configs()], list(DEVICES)]


def config_device_params(profile: Profile) -> list[list[str]]:
    """The params of a suite over config x device (the write bounds, the paired floors)."""
    return [[c.name for c in profile.configs()], list(DEVICES)]
