"""asv suite: forward and forward-backward runtime and net peak memory of every strategy on every config.

Benchmarks (per profile class ``Quick`` / ``Full``, params strategy x config x device): ``time_forward``,
``time_forward_backward`` (backward with a fixed random ``grad_output``, not ``out.sum().backward()``, whose
stride-0 gradient flatters every backward) and ``track_net_peak_forward`` / ``track_net_peak_forward_backward``
(net peak bytes after one warm-up call, with the mmap threshold pinned: ``benchmarks.memory``,
``benchmarks.allocator``).

Every timed sample is one call, and asv re-runs ``setup`` before each, dropping the previous output, so the
allocator sees what a user's loop gives it. ``setup`` raises ``NotImplementedError`` (asv: "n/a") for a cell that
cannot run; a cell whose strategy failed the correctness gate (run once per asv run, in ``setup_cache``) raises
``WrongResultError``, so asv reports it as failed and records no figure.

Details: docs/internals.md#benchmarksunfoldpy.
"""

from __future__ import annotations

import gc
import os
import re
import sys

from benchmarks.allocator import apply_regime_now
from benchmarks.cell_suite import CellSuite, suite_params
from benchmarks.cells import (
    Cell,
    Verdict,
    Workload,
    WrongResultError,
    charged_net_peak,
    use_exact_float32,
    warm_compiler,
)
from benchmarks.profiles import FULL, PROFILES, QUICK
from benchmarks.runner import SELECTION_VARIABLE, suite_cells
from impls import STRATEGIES

_workloads: dict[tuple, Workload] = {}  # one per process and cell: inputs are made once, not per sample


class _UnfoldSuite(CellSuite):
    unit = "bytes"  # only used by the track_* benchmarks

    def setup(self, verdicts: dict, strategy: str, config: str, device: str) -> None:
        key = (self.profile.name, strategy, config, device)
        if getattr(self, "workload", None) is _workloads.get(key, False):  # asv re-runs setup before each sample:
            self.workload.reset()  # allocate nothing there, or small blocks split the freed output's heap chunk
            return
        cell = Cell.from_names(strategy, config, device, self.profile, self.strategies)
        reason = cell.skip_reason()
        if reason is not None:
            raise NotImplementedError(reason)
        verdict: Verdict | None = verdicts.get(cell.key)
        if verdict is None:  # asv ran a cell the gate was told the run would not select
            raise WrongResultError(f"{strategy} on {config} ({device}): not checked ({SELECTION_VARIABLE} left it out)")
        problem = verdict.problem(backward=False)
        if problem is not None:
            raise WrongResultError(f"{strategy} on {config} ({device}): {problem}")
        self.gradient_problem = verdict.problem(backward=True)
        apply_regime_now()  # before the inputs are allocated (benchmarks.allocator)
        use_exact_float32(device)
        if key not in _workloads:
            _workloads.clear()  # one cell per process in asv; keep memory bounded under other runners
            _workloads[key] = Workload(cell, backward=True)
        self.workload = _workloads[key]
        self.workload.compile()  # untimed (benchmarks.compile_time reports what compiling costs)
        self.workload.reset()

    def _require_gradient(self) -> None:
        if self.gradient_problem is not None:
            strategy, config, device = self.workload.cell.key
            raise WrongResultError(f"{strategy} on {config} ({device}): {self.gradient_problem}")

    def time_forward(self, verdicts: dict, strategy: str, config: str, device: str) -> None:
        self.workload.forward()

    def time_forward_backward(self, verdicts: dict, strategy: str, config: str, device: str) -> None:
        self._require_gradient()
        self.workload.forward_backward()

    def track_net_peak_forward(self, verdicts: dict, strategy: str, config: str, device: str) -> int:
        return charged_net_peak(self.workload, backward=False)

    def track_net_peak_forward_backward(self, verdicts: dict, strategy: str, config: str, device: str) -> int:
        self._require_gradient()
        return charged_net_peak(self.workload, backward=True)


class Quick(_UnfoldSuite):
    """The quick profile: batch size capped at 8."""

    profile = QUICK
    params = suite_params(QUICK)

    def setup_cache(self) -> dict:  # defined per class: asv keys the cache by source line
        return self._gate()

    setup_cache.timeout = QUICK.gate_timeout


class Full(_UnfoldSuite):
    """The full profile: the configs' real batch size (256 for All-CNN-C)."""

    profile = FULL
    params = suite_params(FULL)

    def setup_cache(self) -> dict:  # defined per class: asv keys the cache by source line
        return self._gate()

    setup_cache.timeout = FULL.gate_timeout


def selects_a_compiling_cell(selection: str | None) -> bool:
    """Whether the asv ``-b`` expression ``selection`` (``None``: every cell) selects a cell, of any suite and
    profile, whose strategy compiles."""
    compiling = {name for name, strategy in STRATEGIES.items() if strategy.compiles}
    if not selection:
        return bool(compiling)
    pattern = re.compile(selection)
    return any(
        params.get("strategy") in compiling and pattern.search(name) is not None
        for profile in PROFILES.values()
        for name, params in suite_cells(profile)
    )


if sys.argv[1:2] == ["run_server"]:  # asv's forkserver (not its discovery): every benchmark process forks from it
    if selects_a_compiling_cell(os.environ.get(SELECTION_VARIABLE)):  # a run without one never compiles
        warm_compiler()
    gc.freeze()  # a child's garbage collections (benchmarks.memory) then skip, and never copy, the server's objects
