"""`make agreement`'s arithmetic: the Timer's paired ratios and the judgements of agreement (no timing: the check
itself is run by hand; reading the harness's samples back is checked with the suite ratios, ``tests/test_ratios``)."""

from __future__ import annotations

import math
import statistics

import pytest

from benchmarks.independent_timer import BLOCKS
from unfold_bench.commands import agreement


def test_the_timers_paired_ratio_is_each_process_strategy_over_its_own_native():
    processes = [
        {"gather:c:forward": 2.0, "native:c:forward": 4.0},
        {"gather:c:forward": 3.0, "native:c:forward": 3.0},
        {"native:c:forward": 1.0},  # this process lost the strategy's figure: no ratio from it
        {"gather:c:forward": 1.0},  # nor from one without the reference's
    ]
    assert agreement.timer_ratios(processes, "gather:c:forward") == [0.5, 1.0]
    assert agreement.timer_ratios(processes, "native:c:forward") == []  # the reference has no ratio to itself
    assert agreement.reference_key("cpp:allcnnc-conv2:forward_backward") == "native:allcnnc-conv2:forward_backward"


def test_agreement_is_judged_within_ten_percent_either_way_and_by_overlapping_intervals():
    assert agreement.overlap((1.0, 2.0), (1.9, 3.0)) == "yes"
    assert agreement.overlap((1.0, 2.0), (2.1, 3.0)) == "no"
    assert agreement.overlap((1.0, math.nan), (0.5, 3.0)) == "-"
    _, close, ranges = agreement.time_line("k", [1.0e-3, 1.2e-3], [1.09e-3, 1.3e-3])
    assert close and ranges == "yes"
    _, close, ranges = agreement.time_line("k", [1.0e-3, 1.05e-3], [1.2e-3, 1.3e-3])  # harness 0.86x: beyond 10%
    assert not close and ranges == "no"
    line, close, intervals = agreement.ratio_line("k", [0.50, 0.52, 0.49, 0.51], [0.60, 0.62, 0.59, 0.61])
    assert not close and intervals == "no" and "0.50 [" in line
    _, close, intervals = agreement.ratio_line("k", [0.50, 0.60, 0.45, 0.55], [0.52, 0.50, 0.62, 0.48])
    assert close and intervals == "yes"


def test_a_table_names_a_cell_a_timer_failed_and_counts_the_cells_judged():
    harness = {"a:c:forward": [1.0e-3, 1.1e-3], "b:c:forward": [], "d:c:forward": [1.0e-3, 1.02e-3]}
    timer = {"a:c:forward": [1.05e-3, 1.2e-3], "b:c:forward": [1.0e-3], "d:c:forward": [2.0e-3, 2.2e-3]}
    lines = agreement.table_lines(list(harness), harness, timer, agreement.time_line, 10, "ranges")
    assert lines[1].split() == ["b:c:forward", "failed"]
    assert lines[-1] == "within 10%: 1 of 2; ranges overlap: 1 of 2"  # b is not judged


def test_rounds_are_compared_across_the_timers_and_within_each():
    harness = {"a:c:forward": [1.0, 1.05, 1.5], "b:c:forward": [2.0], "d:c:forward": []}
    timer = {"a:c:forward": [1.02, 1.3], "b:c:forward": [2.1, 2.0], "d:c:forward": [1.0, 1.0]}
    line = agreement.round_agreement(list(harness), harness, timer)
    # a: harness x Timer 6 pairs, 1.0~1.02, 1.05~1.02 within; b: 2 pairs, both within; d is not measured by both
    assert line == (
        "one round against another, within 10%: harness vs Timer 4 of 8 (50%); harness vs harness 1 of 3 (33%); "
        "Timer vs Timer 1 of 2 (50%)"
    )
    assert agreement.round_agreement(["d:c:forward"], harness, timer).endswith("no pair of rounds")
    assert agreement.within(1.1) and agreement.within(1 / 1.1) and not agreement.within(1.11)


def test_agreement_over_k_rounds_rises_where_the_misses_are_spread_and_not_where_the_timers_differ():
    # a: each round misses by 1.3x one way or the other, the median over all three agrees; b: 2x apart in every round;
    # d: a round without the Timer's figure, so it is not counted at any k
    harness = {"a:c:forward": [[1.0], [1.3], [1.0]], "b:c:forward": [[2.0], [2.0], [2.0]], "d:c:forward": [[1.0]] * 3}
    timer = {
        "a:c:forward": [[1.3], [1.0], [1.0]],
        "b:c:forward": [[1.0], [1.0], [1.0]],
        "d:c:forward": [[1.0], [], [1.0]],
    }
    lines = agreement.by_rounds(list(harness), harness, timer, statistics.median, (2, 7))
    assert lines[0].startswith("cells within 10% with each figure over k of the 3 rounds")
    # k=1: only round 2 agrees for a; k=2: only rounds 1 and 2 (medians 1.15 and 1.15); k=3: the medians, 1.0 and 1.0
    assert lines[1:] == [
        "  k=1 (2 harness / 7 Timer processes): 0.3 of 2 (0-1 over 3 choices)",
        "  k=2 (4 harness / 14 Timer processes): 0.3 of 2 (0-1 over 3 choices)",
        "  k=3 (6 harness / 21 Timer processes): 1.0 of 2 (1-1 over 1 choice)",
    ]
    # the paired ratios pool every process of the chosen rounds by their geometric mean (0.5 and 2.0 pool to 1.0; their
    # arithmetic mean, 1.25, would miss the Timer's 1.0)
    harness_ratios, timer_ratios = {"a:c:forward": [[0.5, 2.0], [1.0, 1.0]]}, {"a:c:forward": [[1.0], [1.05]]}
    assert agreement.by_rounds(["a:c:forward"], harness_ratios, timer_ratios, statistics.geometric_mean, (2, 1))[
        1:
    ] == [
        "  k=1 (2 harness / 1 Timer processes): 1.0 of 1 (1-1 over 2 choices)",
        "  k=2 (4 harness / 2 Timer processes): 1.0 of 1 (1-1 over 1 choice)",
    ]
    assert agreement.by_rounds(["d:c:forward"], harness, timer, statistics.median, (2, 2)) == [
        "by rounds: no cell measured by both timers in every round"
    ]


def test_the_timers_suite_order_ratios_are_read_from_the_processes_that_report_one():
    processes = [
        {BLOCKS + "cpp:c:forward": 0.4},
        {"cpp:c:forward": 1.0},  # a process whose ratio came out at zero or below reports none
        {BLOCKS + "cpp:c:forward": 0.35},
    ]
    assert agreement.blocks_ratios(processes, "cpp:c:forward") == [0.4, 0.35]
    assert agreement.blocks_ratios(processes, "native:c:forward") == []


def test_asv_failing_or_no_cell_coming_back_stops_the_round_with_asvs_output(monkeypatch, capsys):
    """asv's 2 (a cell failed) is a result like any other, the cell named; any other status, or no cell at all
    coming back (asv's 2 where its suite did not import), ends the command with asv's own last lines, not a
    traceback of a discarded output nor a table of nothing."""
    import subprocess

    from benchmarks.profiles import get_profile
    from unfold_bench.commands import agreement

    cells = [("gather", "example", "forward")]
    for status, said in ((2, "cell gather failed\n"), (1, "ERROR: asv could not start\n")):
        monkeypatch.setattr(
            agreement.subprocess,
            "run",
            lambda command, status=status, said=said, **kw: subprocess.CompletedProcess(command, status, said, ""),
        )
        if status == 2:  # every cell failed (asv's 2 also where its suite did not import): nothing to compare
            with pytest.raises(agreement.HarnessError, match="no cell came back .asv exited 2.; its last lines:\ncell"):
                agreement._time_by_harness(cells, get_profile("quick"), "m", "0" * 40, {})
            assert "harness: cell gather failed (left out)" in capsys.readouterr().out
        else:
            with pytest.raises(agreement.HarnessError, match="asv exited 1; its last lines:\nERROR: asv could not"):
                agreement._time_by_harness(cells, get_profile("quick"), "m", "0" * 40, {})
