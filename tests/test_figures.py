"""Each figure pinned to what physics or arithmetic says it must be, computed independently of the code under test.

Net peaks are read against allocations whose size is known (mmapped blocks and reused heap holes) and against the
analytic minimum; the gate's false-alarm and detection rates are simulated at the shipped defaults with fixed
seeds; the pick's score is checked on a table worked by hand where the aggregation matters; a cold compile is held
to seconds against the same call warm; the huge-page floor is checked to be advised as an independent allocation
of the same kind is.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest
import torch

from benchmarks.allocator import pinned_environment
from benchmarks.replicates import across_processes
from benchmarks.trees import ROOT

MIB = 1 << 20
# A net peak moves in whole pages, and the resident set also holds file-backed pages (libraries) that the kernel may
# reclaim during a call when the machine is loaded (61 pages once, under the whole test suite): the figures below are
# held to 1 MiB, far inside what each break they guard against would change (megabytes).
SLACK = 1 << 20


def _in_a_process(code: str, env: dict | None = None) -> dict:
    """Run ``code`` (which prints one JSON object last) in a fresh interpreter: an allocator in a known state."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_net_peak_counts_heap_holes_reused_as_well_as_fresh_mmapped_blocks():
    # glibc raises its mmap threshold to the size of a freed mmapped block (up to 32 MiB): after one 16 MiB block is
    # freed, blocks of a few MiB come from the heap. Four of 5 MiB, freed between small live ones, leave resident
    # holes in its middle (5 MiB: a 4 MiB request with torch's alignment needs a little more than 4 MiB); a call that
    # allocates and writes 4 x 4 MiB then reuses them. It needs 16 MiB all the same (without the trim: 0).
    figures = _in_a_process(
        """
        import json, torch
        from benchmarks.memory import net_peak_bytes
        MIB = 1 << 20
        torch.empty(16 * MIB, dtype=torch.uint8).fill_(1)  # mmapped, freed: the threshold rises to 16 MiB
        keep, holes = [], []
        for _ in range(4):
            holes.append(torch.empty(5 * MIB, dtype=torch.uint8).fill_(1))
            keep.append(torch.empty(64 * 1024, dtype=torch.uint8).fill_(1))
        del holes  # four resident 5 MiB holes inside the heap
        def reuse():
            return [torch.empty(4 * MIB, dtype=torch.uint8).fill_(2) for _ in range(4)]
        def mmapped():
            return torch.empty(96 * MIB, dtype=torch.uint8).fill_(2)
        print(json.dumps({"reused": net_peak_bytes(reuse, "cpu"), "mmapped": net_peak_bytes(mmapped, "cpu")}))
        """
    )
    assert abs(figures["reused"] - 16 * MIB) <= SLACK, figures
    assert abs(figures["mmapped"] - 96 * MIB) <= SLACK, figures


@pytest.mark.slow
def test_a_forward_backward_net_peak_is_at_least_the_analytic_minimum():
    # output, grad_output and grad_input must all exist at once: the minimum is their sum, computed here from the
    # config's shapes, not by the function the harness uses
    figures = _in_a_process(
        """
        import json
        from benchmarks.cells import Cell, Workload, charged_net_peak, profile_config
        from benchmarks.profiles import get_profile
        from impls import STRATEGIES
        config = profile_config(get_profile("quick"), "allcnnc-conv3")
        out = {}
        for name in ("native", "gather"):
            workload = Workload(Cell(STRATEGIES[name], config, "cpu"), backward=True)
            out[name] = [charged_net_peak(workload, backward=False), charged_net_peak(workload, backward=True)]
        print(json.dumps(out))
        """,
        env=pinned_environment(),
    )
    n, c, h, w = 8, 96, 32, 32  # allcnnc-conv3 at the quick profile's batch: 3x3, stride 2, padding 1
    windows = ((h + 2 - 3) // 2 + 1) * ((w + 2 - 3) // 2 + 1)  # 16 x 16
    output = n * c * 9 * windows * 4
    grad_input = n * c * h * w * 4
    for name, (forward, forward_backward) in figures.items():
        assert forward >= output - SLACK, (name, forward, output)
        assert forward_backward >= 2 * output + grad_input - SLACK, (name, forward_backward, 2 * output + grad_input)


def test_the_gates_shipped_false_alarm_rate_is_the_documented_one():
    # docs/regression-gate.md: a one-sided false-alarm rate of 0.001 per cell, at the gate's defaults (no alpha
    # passed here): 20,000 cells of unchanged code, 8 processes each, with an order effect, flag about 20
    rng = np.random.default_rng(5)
    flags = 0
    for _ in range(20_000):
        a = 0.05 + rng.normal(0, 0.03, 4)
        b = -0.05 + rng.normal(0, 0.03, 4)
        flags += across_processes(a, b).low > 1
    assert 5 <= flags <= 40, flags  # 0.001 per cell; ten times that would be about 200


def test_the_gates_shipped_power_catches_a_slowdown_of_its_printed_resolution():
    # docs: a slowdown of the printed resolution is caught 95% of the time (margin 5%, the shipped default)
    from reports.compare import Thresholds, paired_verdict

    margin = Thresholds().paired_margin
    rng = np.random.default_rng(6)
    stated = np.median(
        [across_processes(rng.normal(0, 0.02, 4), rng.normal(0, 0.02, 4), margin=margin).resolution for _ in range(400)]
    )
    caught = 0
    for _ in range(2000):
        r = across_processes(
            rng.normal(math.log(stated), 0.02, 4), rng.normal(math.log(stated), 0.02, 4), margin=margin
        )
        caught += paired_verdict(r.low, r.high, r.resolution) == "regression"
    assert 0.9 <= caught / 2000 <= 0.99, (stated, caught / 2000)


def _cells(times: dict[str, dict[str, float]]) -> pd.DataFrame:
    rows = []
    for strategy, per_config in times.items():
        for config, seconds in per_config.items():
            rows.append(
                {
                    "strategy": strategy,
                    "config": config,
                    "time_forward_backward": seconds,
                    "time_forward_backward:status": "ok",
                    "track_net_peak_forward_backward": 100.0,
                    "track_net_peak_forward_backward:status": "ok",
                }
            )
    return pd.DataFrame(rows)


def test_the_pick_scores_by_the_geometric_mean_of_times_over_each_configs_fastest():
    from reports.analysis import RULES, recommend

    # worked by hand, each time over its config's fastest: "steady" 2.2 and 2.2 (T = 2.2); "uneven" 1 and 4
    # (T = sqrt(4) = 2.0, though its arithmetic mean, 2.5, is worse than steady's); "yard" 5 and 1 (T = sqrt(5) =
    # 2.24, arithmetic 3.0). The geometric mean picks uneven; the arithmetic mean would pick steady.
    table = _cells(
        {
            "steady": {"c1": 2.2, "c2": 2.2},
            "uneven": {"c1": 1.0, "c2": 4.0},
            "yard": {"c1": 5.0, "c2": 1.0},
        }
    )
    pick = recommend(table, RULES[0])
    scores = dict(zip(pick.ranking.strategy, pick.ranking.time_score))
    assert scores == pytest.approx({"steady": 2.2, "uneven": 2.0, "yard": math.sqrt(5)})
    assert pick.strategy == "uneven" and pick.score == pytest.approx(2.0)


@pytest.mark.slow
def test_a_cold_compile_takes_seconds_and_the_same_call_warm_takes_a_fraction_of_it():
    figures = _in_a_process(
        """
        import json, time
        from benchmarks.compile_time import Quick
        suite = Quick()
        suite.setup("compiled", "allcnnc-conv2", "cpu")
        cold = suite.track_compile_seconds("compiled", "allcnnc-conv2", "cpu")
        start = time.perf_counter()
        suite.workload.forward_backward()
        warm = time.perf_counter() - start
        print(json.dumps({"cold": cold, "warm": warm}))
        """
    )
    assert figures["cold"] > 1.0 and figures["cold"] > 20 * figures["warm"], figures


def test_the_huge_page_floor_is_advised_as_an_independent_advised_allocation_is_and_the_plain_one_is_not():
    from impls import huge_pages
    from tests.test_huge_pages import advised

    if huge_pages.thp_mode() != "madvise":
        pytest.skip(f"transparent huge pages are {huge_pages.thp_mode()!r}: advice shows only in 'madvise' mode")
    from benchmarks.bounds import Full

    suite = Full()
    suite.setup("allcnnc-conv7", "cpu")  # an output of 256 x 1728 x 36 float32: 61 MiB, over RESULT_BYTES
    assert math.prod(suite.shape) * 4 >= huge_pages.RESULT_BYTES
    suite.time_fresh_output_huge_pages("allcnnc-conv7", "cpu")
    independent = torch.empty(suite.shape, dtype=suite.dtype)
    huge_pages.advise(independent)
    assert advised(suite.result) and advised(independent)
    suite.time_fresh_output("allcnnc-conv7", "cpu")
    assert not advised(suite.result)


def test_the_copy_floor_reads_its_source_and_writes_its_target():
    from benchmarks.bounds import Quick

    suite = Quick()
    suite.setup("example", "cpu")
    suite.source = torch.arange(suite.source.numel(), dtype=suite.dtype).reshape(suite.shape)
    suite.time_copy("example", "cpu")
    assert torch.equal(suite.target, suite.source)


def test_a_timer_reads_a_known_sleep():
    # the harness times with perf_counter around the call: a call that sleeps 50 ms reads at least 50 ms
    from benchmarks.paired import timed_call

    class Sleeper:
        def reset(self) -> None:
            pass

        def forward(self) -> None:
            time.sleep(0.05)

    seconds = timed_call((Sleeper(), Sleeper()), 0, "forward")
    assert seconds >= 0.05, seconds  # no upper bound: a loaded machine may wake the sleeper late
