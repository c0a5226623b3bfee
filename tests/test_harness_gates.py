"""The harness's gradient gate and its charge for a reused output, through the suite's own benchmark methods.

The strategies are the fixture suite's ``GATED_STRATEGIES`` (``tests/fixtures/asv_suite``), called directly
rather than through asv: what asv adds (one process per cell, a failed cell reported alone) is shown by
``tests/test_harness.py``.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from benchmarks.allocator import NET_PEAK_RESOLUTION as RESOLUTION
from benchmarks.cells import Cell, Verdict, WrongResultError, gate, profile_config
from benchmarks.memory import cpu_peak_supported
from benchmarks.trees import ROOT
from tests.fixtures.asv_suite.faulty import GATED_STRATEGIES, TINY, _CalledDirectly

MEMORY_CONFIG = "allcnnc-conv2"  # an output of several MiB at the fixture's batch size: far above page noise


def test_a_wrong_gradient_fails_the_forward_backward_benchmarks_and_leaves_the_forward_ones_running():
    cell = ("wrong_gradient", "example", "cpu")
    verdicts = gate([Cell.from_names(*cell, TINY, GATED_STRATEGIES)])
    assert verdicts[cell].problem(backward=False) is None
    assert verdicts[cell].problem(backward=True).startswith("wrong input gradient: ")
    suite = _CalledDirectly()
    suite.setup(verdicts, *cell)
    suite.time_forward(verdicts, *cell)
    if cpu_peak_supported() is None:
        suite.setup(verdicts, *cell)
        assert suite.track_net_peak_forward(verdicts, *cell) > 0
    for benchmark in (suite.time_forward_backward, suite.track_net_peak_forward_backward):
        suite.setup(verdicts, *cell)
        with pytest.raises(WrongResultError, match=r"wrong_gradient on example \(cpu\): wrong input gradient"):
            benchmark(verdicts, *cell)


def net_peaks(name: str) -> tuple[int, int]:
    """The suite's forward and forward-backward net peaks of ``name`` on ``MEMORY_CONFIG`` (gate not run)."""
    suite, cell = _CalledDirectly(), (name, MEMORY_CONFIG, "cpu")
    verdicts = {cell: Verdict()}
    peaks = []
    for benchmark in (suite.track_net_peak_forward, suite.track_net_peak_forward_backward):
        suite.setup(verdicts, *cell)
        peaks.append(benchmark(verdicts, *cell))
    return peaks[0], peaks[1]


def _net_peaks_in_a_new_process(names: list[str]) -> dict[str, tuple[int, int]]:
    """``net_peaks`` of each of ``names``, measured in a new process, as asv measures a cell: a long-lived test
    worker's heap can hand a call pages it never touched before, which add to the figure."""
    code = f"from tests.test_harness_gates import net_peaks\nprint({{n: net_peaks(n) for n in {names!r}}})"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return ast.literal_eval(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(cpu_peak_supported() is not None, reason=str(cpu_peak_supported()))
def test_a_strategy_that_reuses_its_output_is_charged_the_buffer():
    config = profile_config(TINY, MEMORY_CONFIG)
    output_bytes = config.geometry.output_numel * config.torch_dtype.itemsize
    # the same calls with the buffer undeclared; the declared one; the same unfold into a new output every call
    peaks = _net_peaks_in_a_new_process(["reuses_output_undeclared", "reuses_output", "gather"])
    undeclared, charged, fresh = peaks["reuses_output_undeclared"], peaks["reuses_output"], peaks["gather"]
    for metric, reused, twin, new in zip(("forward", "forward-backward"), charged, undeclared, fresh):
        assert abs(reused - twin - output_bytes) <= RESOLUTION, (metric, reused, twin, output_bytes)
        assert abs(reused - new) <= RESOLUTION, (metric, reused, new)  # charged what a fresh output costs
    assert undeclared[0] <= RESOLUTION  # the reused call itself allocates next to nothing
