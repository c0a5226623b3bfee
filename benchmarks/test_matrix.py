"""pytest-benchmark runs of the asv matrix, for quick local comparisons (``--benchmark-compare``).

Each test is one cell (parametrised in ``benchmarks/conftest.py``): it is skipped with the harness's reason
where the cell cannot run, checked against the reference once (a wrong strategy fails and is not timed),
then timed with ``benchmark.pedantic``: one warm-up round, and ``Workload.reset`` between rounds outside
the timed region, as in the asv suite. Benchmarks are grouped by config, device, pass (forward or
forward-backward) and timing regime (``make bench-pytest REGIME=...``; a run not started through
``benchmarks.allocator`` says "unset"), so pytest-benchmark's table compares the strategies of one config in one
pass and one regime, and a saved run records its regime (``extra_info``). asv remains
the suite of record (results across commits, memory); this is the fast loop while editing a strategy.
"""

from __future__ import annotations

import os

from benchmarks.allocator import REGIME_VARIABLE, apply_regime_now
from benchmarks.cells import Cell, Workload, check_cell, use_exact_float32
from benchmarks.profiles import Profile


def _prepare(cell_names: tuple[str, str, str], profile: Profile, benchmark, backward: bool) -> Workload:
    import pytest  # only under pytest; see conftest.py

    cell = Cell.from_names(*cell_names, profile)
    reason = cell.skip_reason()
    if reason is not None:
        pytest.skip(reason)
    problem = check_cell(cell).problem(backward=backward)
    if problem is not None:
        pytest.fail(f"{'/'.join(cell.key)}: {problem}")
    use_exact_float32(cell.device)
    regime = os.environ.get(REGIME_VARIABLE) or "unset (not run through benchmarks.allocator)"
    benchmark.group = f"{cell.config.name} {cell.device} {'forward-backward' if backward else 'forward'}, {regime}"
    benchmark.extra_info.update(profile=profile.name, batch_size=cell.config.batch_size, regime=regime)
    apply_regime_now()  # the warm regime's thresholds, before the timed inputs exist, as in the asv suite
    return Workload(cell, backward=backward)


def test_forward(cell_names, profile, benchmark):
    workload = _prepare(cell_names, profile, benchmark, backward=False)
    benchmark.pedantic(workload.forward, setup=workload.reset, rounds=5, warmup_rounds=1)


def test_forward_backward(cell_names, profile, benchmark):
    workload = _prepare(cell_names, profile, benchmark, backward=True)
    benchmark.pedantic(workload.forward_backward, setup=workload.reset, rounds=5, warmup_rounds=1)
