"""asv suite: each strategy's time over the write floors, paired inside every process, where the reference cannot run.

Per profile class (``Quick`` / ``Full``), params strategy x config x device, unit ``ratio``:

- ``track_ratio_forward_over_copy`` / ``track_ratio_forward_backward_over_copy``: one process times the strategy's
  forward (or forward-backward) and ``copy_`` between two resident output-sized tensors, interleaved in blocks
  A B B A over ``Profile.placements`` placements (``benchmarks.ratios.process_ratio``), and gives
  ``t_strategy / t_copy``;
- ``track_ratio_forward_over_fill``: the forward against ``fill_`` of a resident output-sized tensor.

Where the reference runs, a strategy's time over a floor is chained through it (``benchmarks.floors``), so that
every strategy of a config is read against one yardstick, the paired ratio to native. Where it does not (``native``
has no 3-d unfold), this suite pairs the strategy with the floor itself: every strategy of that config is then read
against the same floor, paired per process, for ``x copy_``, the check against ``fill_`` and the picks. ``setup``
raises ``NotImplementedError`` (asv: "n/a") where the reference runs, for a cell that does not run here, and on a
device this machine lacks; a strategy that failed the correctness gate raises ``WrongResultError``. Each replicate is
an asv run of its own, as for the suites ``ratios`` and ``floors`` (``benchmarks.runner.plan``).
"""

from __future__ import annotations

import random

from benchmarks.cell_suite import CellSuite
from benchmarks.cells import Cell, WrongResultError, gate, use_exact_float32
from benchmarks.floors import over_floor
from benchmarks.profiles import FULL, QUICK, Profile
from benchmarks.ratios import REFERENCE, gate_problems
from benchmarks.vocabulary import COPY_FLOOR, DEVICES, FILL_FLOOR
from impls import STRATEGIES


def direct_params(profile: Profile) -> list[list[str]]:
    """strategy x config x device over the configs of ``profile`` whose spatial dims the reference does not take,
    and every strategy but the reference (a cell that could never run has none here, rather than one asv would set
    up only to skip)."""
    dims = STRATEGIES[REFERENCE].spatial_dims
    configs = [c.name for c in profile.configs() if c.spatial_dims not in dims]
    return [[name for name in STRATEGIES if name != REFERENCE], configs, list(DEVICES)]


def _reference_runs(config: str, device: str, suite: CellSuite) -> bool:
    return Cell.from_names(REFERENCE, config, device, suite.profile, suite.strategies).skip_reason() is None


class _DirectFloorSuite(CellSuite):
    unit = "ratio"

    def _gate(self) -> dict:
        """The correctness gate over the selected cells whose config the reference cannot run (the others are n/a)."""
        cells = [
            Cell.from_names(*names, self.profile, self.strategies)
            for names in self._selected()
            if not _reference_runs(names[1], names[2], self)
        ]
        return gate(cells, progress=print)

    def setup(self, verdicts: dict, strategy: str, config: str, device: str) -> None:
        cell = Cell.from_names(strategy, config, device, self.profile, self.strategies)
        reason = cell.skip_reason()
        if reason is not None:
            raise NotImplementedError(reason)
        if _reference_runs(config, device, self):
            raise NotImplementedError(f"{REFERENCE} runs {config}: over the floors through it (benchmarks.floors)")
        self.problems = gate_problems(verdicts, [cell])
        use_exact_float32(device)
        self.cell = cell
        self.seed = random.SystemRandom().randrange(1 << 30)

    def _over(self, which: str, bound: str) -> dict:
        """One sample: the strategy's ``which`` over one call of the floor ``bound``, paired in this process."""
        backward = which != "forward"
        if backward in self.problems:
            raise WrongResultError(self.problems[backward])
        return over_floor(self.cell, which, bound, self.profile, self.seed)

    def track_ratio_forward_over_copy(self, verdicts: dict, strategy: str, config: str, device: str) -> dict:
        return self._over("forward", COPY_FLOOR)

    def track_ratio_forward_over_fill(self, verdicts: dict, strategy: str, config: str, device: str) -> dict:
        return self._over("forward", FILL_FLOOR)

    def track_ratio_forward_backward_over_copy(self, verdicts: dict, strategy: str, config: str, device: str) -> dict:
        return self._over("forward_backward", COPY_FLOOR)


class Quick(_DirectFloorSuite):
    """The quick profile's strategies over the floors, where the reference cannot run."""

    profile = QUICK
    params = direct_params(QUICK)

    def setup_cache(self) -> dict:  # defined per class: asv keys the cache by source line
        return self._gate()

    setup_cache.timeout = QUICK.gate_timeout


class Full(_DirectFloorSuite):
    """The full profile's strategies over the floors, where the reference cannot run."""

    profile = FULL
    params = direct_params(FULL)

    def setup_cache(self) -> dict:  # defined per class: asv keys the cache by source line
        return self._gate()

    setup_cache.timeout = FULL.gate_timeout
