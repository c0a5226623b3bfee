"""asv suite: forward and forward-backward runtime and net peak memory of every strategy on every config.

Benchmarks (per profile class ``Quick`` / ``Full``, params strategy x config x device, identical on every
machine):

- ``time_forward``: one call, output kept (freeing it is not timed; allocating it is).
- ``time_forward_backward``: forward plus ``out.backward(grad_output)`` with a fixed random ``grad_output``
  made in setup (not ``out.sum().backward()``, whose stride-0 gradient flatters every backward).
- ``track_net_peak_forward`` / ``track_net_peak_forward_backward``: net peak bytes of one call after one
  untimed warm-up call (``benchmarks.memory``); forward-backward materialises ``grad_output`` inside the call
  so the figure is comparable with the analytic minimum in ``benchmarks.bounds``.

``setup`` raises ``NotImplementedError`` (asv: "n/a", skipped) for a CUDA cell on a machine without a GPU
and for a strategy that does not support the config. The correctness gate runs once per profile in
``setup_cache`` (asv runs it before the cells and hands its verdicts to every setup); a cell whose strategy
failed it raises ``WrongResultError`` in setup (forward) or in the body (forward-backward, when only the gradient
is wrong), so asv reports it as failed and records no figure. Each cell runs in its own process, so an
exception or an out-of-memory kill fails that cell only.
"""

from __future__ import annotations

from benchmarks.cells import DEVICES, Cell, Verdict, Workload, WrongResultError, all_cells, gate, use_exact_float32
from benchmarks.memory import net_peak_bytes
from benchmarks.profiles import FULL, QUICK, Profile
from impls import strategy_names

_workloads: dict[tuple, Workload] = {}  # one per process and cell: inputs are made once, not per sample


def _run_gate(profile: Profile) -> dict:
    return gate(all_cells(profile), progress=print)


class _UnfoldSuite:
    profile: Profile
    param_names = ("strategy", "config", "device")
    unit = "bytes"  # only used by the track_* benchmarks

    def setup(self, verdicts: dict, strategy: str, config: str, device: str) -> None:
        cell = Cell.from_names(strategy, config, device, self.profile)
        reason = cell.skip_reason()
        if reason is not None:
            raise NotImplementedError(reason)
        verdict: Verdict = verdicts[cell.key]
        problem = verdict.problem(backward=False)
        if problem is not None:
            raise WrongResultError(f"{strategy} on {config} ({device}): {problem}")
        self.gradient_problem = verdict.problem(backward=True)
        use_exact_float32(device)
        key = (self.profile.name, *cell.key)
        if key not in _workloads:
            _workloads.clear()  # one cell per process in asv; keep memory bounded under other runners
            _workloads[key] = Workload(cell, backward=True)
        self.workload = _workloads[key]
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
        self.workload.forward()  # warm-up: lazy initialisation and first-touched library pages
        self.workload.reset()
        return net_peak_bytes(self.workload.forward, device)

    def track_net_peak_forward_backward(self, verdicts: dict, strategy: str, config: str, device: str) -> int:
        self._require_gradient()
        self.workload.forward_backward_fresh_grad()
        self.workload.reset()
        return net_peak_bytes(self.workload.forward_backward_fresh_grad, device)


def _params(profile: Profile) -> list[list[str]]:
    return [strategy_names(), [c.name for c in profile.configs()], list(DEVICES)]


class Quick(_UnfoldSuite):
    """The quick profile: batch size capped at 8, one process per cell."""

    profile = QUICK
    params = _params(QUICK)
    rounds, repeat, warmup_time, timeout = QUICK.rounds, QUICK.repeat, QUICK.warmup_time, QUICK.timeout

    def setup_cache(self) -> dict:  # defined per class: asv keys the cache by source line
        return _run_gate(self.profile)

    setup_cache.timeout = QUICK.gate_timeout


class Full(_UnfoldSuite):
    """The full profile: the configs' real batch size (256 for All-CNN-C)."""

    profile = FULL
    params = _params(FULL)
    rounds, repeat, warmup_time, timeout = FULL.rounds, FULL.repeat, FULL.warmup_time, FULL.timeout

    def setup_cache(self) -> dict:  # defined per class: asv keys the cache by source line
        return _run_gate(self.profile)

    setup_cache.timeout = FULL.gate_timeout
