"""The regression gate's judgement (``reports/compare.py``), on asv results made here, not measured.

The gate itself runs benchmarks (``unfold-bench regress``); what it decides from their samples is tested here:
thresholds, asv's significance test, memory's page floor, failures, and exit statuses. The A/A and power
checks draw samples from a fixed noise model with a fixed seed: they test the decision rule, not a machine.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pandas as pd
import pytest
from asv._stats import mann_whitney_u
from asv.results import Results
from asv.runner import BenchmarkResult

from reports.compare import (
    SLOWDOWN_GRID,
    Thresholds,
    callgrind_rows,
    compare,
    detectable_slowdown,
    gate_decision,
    judge,
    load_run,
    min_rounds,
    paired_verdict,
    ratio_verdict,
    resolution,
    rounds_differ,
    smallest_p,
)
from reports.gate_report import annotations, format_resolution, format_table, verdict_record
from reports.results import load_results, unroll_result

MIB = 2**20
TIME = "unfold.Quick.time_forward"
MEMORY = "unfold.Quick.track_net_peak_forward"


def _status(table, asv_status: int = 0) -> int:
    return gate_decision(table, asv_status)[0]


def _unchanged_cells() -> pd.DataFrame:
    """A gate table of two cells that did not change: what the asv part of a clean run looks like."""
    same = [_samples(1.0, 24, 0.05, random.Random(9))]
    return compare(_results("a" * 40, same, [MIB]), _results("b" * 40, same, [MIB]), rounds=8, repeat=3)


def _samples(median: float, n: int, noise: float, rng: random.Random) -> list[float]:
    return [median * math.exp(rng.gauss(0, noise)) for _ in range(n)]


def _results(commit: str, time_samples: list[list[float] | None], memory: list[float | None]) -> Results:
    """A result file with one time and one memory benchmark over strategies s0, s1, ..."""
    result = Results({"machine": "m", "python": "3.11"}, {}, commit, 0, "3.11", "env", {})
    params = [[repr(f"s{i}") for i in range(len(memory))]]
    for name, values, samples, number in (
        (TIME, [None if s is None else sorted(s)[len(s) // 2] for s in time_samples], time_samples, 1),
        (MEMORY, memory, [None] * len(memory), None),
    ):
        benchmark = {"name": name, "params": params, "param_names": ["strategy"], "version": "1"}
        outcome = BenchmarkResult(values, samples, [number] * len(values), 0, "", None)
        result.add_result(benchmark, outcome, record_samples=True)
    return result


def test_time_needs_both_the_threshold_and_significance():
    rng = random.Random(0)
    base = _samples(1.0, 12, 0.05, rng)
    slower = _samples(1.3, 12, 0.05, rng)
    stats = _results("a" * 40, [base, slower], [MIB, MIB])
    table = compare(stats, _results("b" * 40, [slower, base], [MIB, MIB])).set_index(["benchmark", "params"])
    assert table.loc[(TIME, "s0"), "verdict"] == "regression" and table.loc[(TIME, "s0"), "significant"]
    assert table.loc[(TIME, "s1"), "verdict"] == "improvement"
    few = compare(_results("a" * 40, [[1.0, 1.01]], [MIB]), _results("b" * 40, [[1.3, 1.4]], [MIB]))
    assert few.set_index("benchmark").loc[TIME, "verdict"] == "unchanged"  # 2 samples each: not significant
    small = compare(_results("a" * 40, [base], [MIB]), _results("b" * 40, [[x * 1.05 for x in base]], [MIB]))
    assert small.set_index("benchmark").loc[TIME, "verdict"] == "unchanged"  # significant but under 10%


@pytest.mark.parametrize(
    ("before", "after", "verdict"),
    [
        (100 * MIB, 150 * MIB, "regression"),
        (100 * MIB, 103 * MIB, "unchanged"),  # under the 5% threshold
        (1 * MIB, 1.2 * MIB, "unchanged"),  # 20%, but 205 KiB: under the page floor
        (0, 10 * MIB, "regression"),  # a view became a copy
        (100 * MIB, 60 * MIB, "improvement"),
    ],
)
def test_memory_uses_the_threshold_and_a_floor(before, after, verdict):
    assert judge(before, after, None, None, None, None, "bytes", Thresholds())[2] == verdict


def test_a_failure_at_head_is_a_failure_and_outranks_a_regression():
    rng = random.Random(1)
    base = _results("a" * 40, [_samples(1.0, 12, 0.05, rng)] * 2, [MIB, 100 * MIB])
    head = _results("b" * 40, [None, _samples(1.0, 12, 0.05, rng)], [None, 200 * MIB])
    table = compare(base, head)
    assert sorted(table.verdict) == ["failed", "failed", "regression", "unchanged"]
    assert _status(table) == 2
    assert _status(table[table.verdict != "failed"]) == 1
    assert _status(table[table.verdict == "unchanged"]) == 0
    assert "failed" in format_table(table) and "wall clock" in format_table(table)
    failed = table[table.verdict == "failed"]
    assert set(failed["mode"]) == {"wall clock", "net peak"}  # not the mode of the row judged before it
    shown = format_table(failed).splitlines()[1:]
    assert all(line.split()[0] == "failed" and " failed " in line[10:] and "n/a" not in line for line in shown)


def test_skipped_at_both_revisions_is_left_out():
    nan = math.nan
    table = compare(_results("a" * 40, [None], [nan]), _results("b" * 40, [None], [nan]))
    assert list(table.verdict) == ["failed (also before)"]  # the time cell failed at both
    assert _status(table) == 2  # head has a cell the gate could not measure, broken before or not


@pytest.mark.slow
def test_decision_rule_rarely_cries_wolf_and_catches_a_30_percent_slowdown():
    # Noise model: log-normal samples with sigma 0.15 (interquartile range about 20% of the median, as seen
    # on this project's 2-core machines); 20 independent samples per revision, judged as pooled samples.
    rng = random.Random(2024)
    trials = 300

    def flagged(factor: float) -> int:
        count = 0
        for _ in range(trials):
            a, b = _samples(1.0, 20, 0.15, rng), _samples(factor, 20, 0.15, rng)
            count += (
                compare(_results("a" * 40, [a], [MIB]), _results("b" * 40, [b], [MIB])).verdict.eq("regression").any()
            )
        return count

    assert flagged(1.0) <= 3  # A/A: at most 1% false alarms
    assert flagged(1.3) >= 0.9 * trials  # a 30% slowdown: caught at least 90% of the time


def _rounds(
    median: float, rounds: int, per_round: int, between: float, within: float, rng: random.Random
) -> list[float]:
    """Samples of ``rounds`` processes: each process has its own level (log-sd ``between``), as measured here."""
    samples = []
    for _ in range(rounds):
        level = median * math.exp(rng.gauss(0, between))
        samples += _samples(level, per_round, within, rng)
    return samples


def test_round_medians_keep_correlated_samples_from_crying_wolf():
    # Noise model: every process has its own speed (log-sd 0.10 between rounds) and its samples vary little
    # around it (0.03), as on this project's machines, where 24 pooled samples passed a 1.24x A/A difference
    # as significant. 8 rounds x 3 samples a side, as the gate runs.
    rng = random.Random(7)
    trials = 300

    def count(factor: float, rounds: int | None, column: str) -> int:
        total = 0
        for _ in range(trials):
            a, b = _rounds(1.0, 8, 3, 0.10, 0.03, rng), _rounds(factor, 8, 3, 0.10, 0.03, rng)
            table = compare(_results("a" * 40, [a], [MIB]), _results("b" * 40, [b], [MIB]), rounds=rounds)
            row = table.set_index("benchmark").loc[TIME]
            total += bool(row["significant"]) if column == "significant" else row["verdict"] == "regression"
        return total

    # Identical revisions: pooled samples are "significant" (p < 0.002) far more often than 0.2% of the time.
    assert count(1.0, None, "significant") >= 10
    assert count(1.0, 8, "significant") <= 3  # one observation per round: at most 1%, near the nominal rate
    # The price: with rounds this noisy, a 30% slowdown is caught most of the time, a 40% one nearly always.
    assert count(1.3, 8, "regression") >= 0.75 * trials
    assert count(1.4, 8, "regression") >= 0.9 * trials


def test_samples_that_do_not_split_into_rounds_fall_back_to_pooled_and_say_so():
    rng = random.Random(3)
    before, after = _samples(1.0, 24, 0.05, rng), _samples(1.5, 23, 0.05, rng)
    table = compare(_results("a" * 40, [before], [MIB]), _results("b" * 40, [after], [MIB]), rounds=8)
    row = table.set_index("benchmark").loc[TIME]
    assert row["mode"] == "wall clock (pooled samples)" and row["verdict"] == "regression"
    split = compare(_results("a" * 40, [before], [MIB]), _results("b" * 40, [before[::-1]], [MIB]), rounds=8)
    assert split.set_index("benchmark").loc[TIME, "mode"] == "wall clock (8 rounds)"


def test_detectable_slowdown_grows_with_the_noise_between_rounds():
    quiet = detectable_slowdown(1e-4, 8)
    assert quiet == 1.15  # no noise: the first step of the grid past the 10% threshold
    assert detectable_slowdown(1e-4, 8, Thresholds(time=0.3)) == 1.4  # the threshold binds, not the noise
    found = [detectable_slowdown(spread, 8) for spread in (0.05, 0.10, 0.15, 0.20)]
    assert found == sorted(found) and found[0] < found[-1], found
    assert detectable_slowdown(1.0, 8) == math.inf and max(SLOWDOWN_GRID) < math.inf
    assert detectable_slowdown(0.10, 4) == math.inf  # 4 rounds a side cannot reach p < 0.002


def test_resolution_reads_each_cells_round_spread_from_the_run():
    rng = random.Random(5)
    steady, noisy = _rounds(1.0, 8, 3, 0.02, 0.01, rng), _rounds(1.0, 8, 3, 0.25, 0.01, rng)
    base = _results("a" * 40, [steady, noisy, None], [MIB, MIB, MIB])
    head = _results("b" * 40, [steady[::-1], noisy[::-1], None], [MIB, MIB, MIB])
    table = resolution(base, head, rounds=8).set_index("params")
    assert list(table.index) == ["s0", "s1"]  # a cell without samples has no resolution
    assert table.loc["s0", "spread"] < 0.05 < 0.15 < table.loc["s1", "spread"]
    assert table.loc["s0", "detectable"] < table.loc["s1", "detectable"]
    line = format_resolution(resolution(base, head, rounds=8))
    assert "best" in line and "worst" in line and line.index("s0") < line.index("worst") < line.index("s1"), line
    assert resolution(base, head, rounds=5).empty  # 24 samples do not split into 5 rounds


def test_instruction_counts_are_judged_by_their_own_threshold_alone():
    counts = {"native, example, forward": (1_000_000, 1_030_000), "tiling, example, forward": (100_000, 101_000)}
    rows = callgrind_rows(counts)  # +3% and +1% against the default 2%
    verdicts = dict(zip(rows.params, rows.verdict))
    assert verdicts == {"native, example, forward": "regression", "tiling, example, forward": "unchanged"}
    assert set(rows["mode"]) == {"callgrind"} and _status(pd.concat([_unchanged_cells(), rows])) == 1
    assert "instr" in format_table(rows)


def test_rounds_needed_for_significance_match_the_exact_two_sided_test():
    # Fully separated round medians give the test's smallest p; 6 a side cannot reach 0.002, 7 can.
    for rounds in (4, 6, 7, 8):
        low, high = [float(i) for i in range(rounds)], [100.0 + i for i in range(rounds)]
        assert rounds_differ(low, high) == (rounds >= 7), rounds
        assert smallest_p(rounds, rounds) == pytest.approx(mann_whitney_u(low, high)[1])
    assert min_rounds() == 7 and min_rounds(0.05) == 4


def test_a_time_cell_that_lost_a_round_at_head_fails_and_at_base_is_flagged():
    """asv restarts a cell's samples after a failed round, so a crash in round 4 of 8 leaves 4 rounds' samples
    and an ordinary-looking value: the gate must not judge that as a pass."""
    rng = random.Random(3)
    full, lost = _samples(1.0, 24, 0.05, rng), _samples(1.0, 12, 0.05, rng)  # 8 rounds of 3; 4 rounds of 3
    table = compare(_results("a" * 40, [full], [MIB]), _results("b" * 40, [lost], [MIB]), rounds=8, repeat=3)
    row = table.set_index("benchmark").loc[TIME]
    assert (row.verdict, row.failed_at) == ("failed (a round)", "head") and _status(table) == 2
    record = verdict_record(table, 2, "FAIL", "a" * 40, "b" * 40, {})
    assert any("failed (a round)" in line for line in annotations(record))  # where reviewers look, as any failure
    table = compare(_results("a" * 40, [lost], [MIB]), _results("b" * 40, [full], [MIB]), rounds=8, repeat=3)
    row = table.set_index("benchmark").loc[TIME]
    assert row.failed_at == "base" and row.verdict == "unchanged" and _status(table) == 0
    assert "base" in format_table(table)  # shown although unchanged: a reader must know base lost a round


def test_a_cell_fixed_at_head_is_reported_and_asv_failure_still_fails_closed():
    rng = random.Random(4)
    full = _samples(1.0, 24, 0.05, rng)
    table = compare(_results("a" * 40, [None], [MIB]), _results("b" * 40, [full], [MIB]), rounds=8, repeat=3)
    assert dict(zip(table.benchmark, table.verdict))[TIME] == "fixed"
    assert _status(table) == 0
    status, why = gate_decision(table, asv_status=2)  # asv cannot say whether a HEAD round failed too
    assert status == 2 and "BASE" in why
    lost = compare(_results("a" * 40, [None], [MIB]), _results("b" * 40, [full[:12]], [MIB]), rounds=8, repeat=3)
    row = lost.set_index("benchmark").loc[TIME]
    assert (row.verdict, row.failed_at) == ("failed (a round)", "both") and _status(lost) == 2


def test_asv_failure_without_a_trace_in_the_results_fails_the_gate():
    rng = random.Random(5)
    same = [_samples(1.0, 24, 0.05, rng)]
    table = compare(_results("a" * 40, same, [MIB]), _results("b" * 40, same, [MIB]), rounds=8, repeat=3)
    assert set(table.verdict) == {"unchanged"} and _status(table) == 0
    status, why = gate_decision(table, asv_status=2)  # e.g. a memory cell's lost round
    assert status == 2 and "asv reported" in why
    assert _status(table, asv_status=1) == 0  # asv's own regression verdict is not the gate's


def test_a_strategy_gone_at_head_is_removed_not_unmeasured_in_the_asv_mode_too():
    """A strategy the registry no longer has is no cell at HEAD: removed (a pass), where one HEAD skips is not
    measured; with nothing else compared the first passes, the second fails (``gate_decision``)."""
    rng = random.Random(6)
    both = [_samples(1.0, 24, 0.05, rng), _samples(1.0, 24, 0.05, rng)]
    gone = compare(_results("a" * 40, both, [MIB, MIB]), _results("b" * 40, both[:1], [MIB]), rounds=8, repeat=3)
    assert dict(zip(gone.params, gone.verdict))["s1"] == "removed" and _status(gone) == 0
    status, why = gate_decision(gone[gone.params == "s1"])
    assert status == 0 and "only added, removed or fixed" in why
    skipped = compare(_results("a" * 40, both, [MIB, MIB]), _results("b" * 40, both, [MIB, math.nan]))
    skipped = skipped[(skipped.params == "s1") & (skipped.benchmark == MEMORY)]  # n/a at HEAD: skipped there
    assert set(skipped.verdict) == {"not measured"} and gate_decision(skipped)[0] == 2


def test_nothing_compared_is_not_a_pass():
    nan = math.nan
    skipped = _results("a" * 40, [[1.0]], [nan]), _results("b" * 40, [[1.0]], [nan])
    assert list(compare(*skipped).benchmark) == [TIME]  # the memory cell, skipped at both, is left out
    nothing = compare(*skipped, include="no such benchmark")
    assert nothing.empty and _status(nothing) == 2
    counted = callgrind_rows({"tiling, example, forward": (1000, 1000)})
    assert _status(pd.concat([nothing, counted])) == 2  # instruction counts alone are not the gate


def test_a_failed_instruction_count_is_a_failure_at_the_revision_that_failed():
    rows = callgrind_rows({"tiling, example, forward": (1000, None), "gather, example, forward": (None, 1000)})
    verdicts = dict(zip(rows.params, zip(rows.verdict, rows.failed_at)))
    assert verdicts == {"tiling, example, forward": ("failed", "head"), "gather, example, forward": ("fixed", "base")}
    assert _status(pd.concat([_unchanged_cells(), rows])) == 2
    line = next(line for line in format_table(rows).splitlines() if "tiling" in line)
    assert "1,000 instr" in line and line.count("failed") == 2 and line.rstrip().endswith("head"), line


REPORT_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "report_results"


def test_the_gate_and_the_site_read_the_same_cells_through_one_reader():
    base, head = (load_run(str(REPORT_FIXTURE), "fixture-cpu", c * 40) for c in "db")  # the last two commits
    cells = list(unroll_result(head))
    failed = [c for c in cells if c.status == "failed"]
    assert [(c.benchmark, c.params) for c in failed] == [
        ("unfold.Quick.time_forward_backward", ("tiling", "vol3d-conv", "cpu"))
    ]  # unquoted, as the tidy table has them
    assert failed[0].value is None and all(math.isnan(c.value) for c in cells if c.status == "skipped")
    table = load_results(REPORT_FIXTURE)
    site = table[(table.machine == "fixture-cpu") & (table.commit == "b" * 40) & (table.suite == "unfold")]
    gate = compare(base, head, include="unfold.")  # the bounds do not depend on the code
    assert list(gate[gate.failed_at != ""].params) == ["tiling, vol3d-conv, cpu"]
    assert gate.loc[gate.failed_at != "", "verdict"].tolist() == ["failed"]
    # every cell the site shows with a figure or a failure, and only those, is compared (skipped at both: left out)
    shown = site[site.status != "skipped"]
    assert sorted(gate.benchmark + ": " + gate.params) == sorted(
        "unfold."
        + shown.profile.str.capitalize()
        + "."
        + shown.metric
        + ": "
        + shown.strategy
        + ", "
        + shown.config
        + ", "
        + shown.device
    )


def test_every_mode_ends_in_the_one_ratio_verdict():
    assert [ratio_verdict(r, r, 0.1) for r in (1.11, 1.1, 1 / 1.1, 0.9)] == [
        "regression",
        "unchanged",
        "unchanged",
        "improvement",
    ]
    assert ratio_verdict(1.06, 1.3, 0.05) == "regression" and ratio_verdict(0.9, 1.3, 0.05) == "unchanged"
    # paired: the interval across processes decides; an unknown bound is never beyond the margin
    assert paired_verdict(1.06, 1.2, 1.05, Thresholds()) == "regression"
    assert paired_verdict(1.04, 1.2, 1.05, Thresholds()) == "unchanged"
    assert paired_verdict(math.nan, 1.2, 1.05, Thresholds()) == "unchanged"
    assert paired_verdict(math.nan, math.nan, 1.3, Thresholds()) == "unresolved"
    assert paired_verdict(math.nan, math.nan, math.nan, Thresholds()) == "unresolved"  # nothing known: no vouching


def test_the_gate_writes_its_values_in_the_reports_units():
    rows = callgrind_rows({"tiling, example, forward": (10_000, 10_500)})
    time = compare(_results("a" * 40, [[12.0] * 3], [2 * MIB]), _results("b" * 40, [[12.5] * 3], [3 * MIB]))
    shown = format_table(pd.concat([time, rows], ignore_index=True), only_changed=False)
    assert "12,000 ms" in shown and "12,500 ms" in shown  # 12 s: a whole number of ms, not 1.2e+04
    assert "2 MiB" in shown and "3 MiB" in shown and "10,500 instr" in shown
