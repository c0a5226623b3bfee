"""The paired ratios (``benchmarks.ratios``): one sample per process in asv's results, read back with an interval
across processes, shown in place of the quotient of medians, and the picks' tie rule that uses the intervals."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys

import pandas as pd
import pytest
import torch
from scipy import stats

from benchmarks import direct_floors, floors, ratios
from benchmarks.allocator import NET_PEAK_RESOLUTION
from benchmarks.cells import Cell, WrongResultError, gate, profile_config
from benchmarks.intervals import RunLevel, process_interval, summed_error
from benchmarks.profiles import QUICK
from benchmarks.runner import DIRECT_FLOORS_SUITE, FLOORS_SUITE, PAIRED_SUITE, plan, scratch_config
from benchmarks.trees import ROOT
from benchmarks.vocabulary import DIRECT_FLOOR_RATIOS, FLOOR_RATIOS
from reports import analysis
from reports.results import load_results
from reports.run_level import write_run_levels
from tests.test_harness import AT_TEST_SIZE
from unfold_bench.commands.bench import NOTHING_RUN

TRAINING = analysis.RULES[0]


def test_a_process_interval_is_students_t_on_the_logs_around_the_geometric_mean():
    samples = [0.8, 1.0, 1.1, 0.9]
    value, low, high = process_interval(samples)
    logs = [math.log(v) for v in samples]
    ends = stats.t.interval(0.95, len(logs) - 1, loc=sum(logs) / len(logs), scale=stats.sem(logs))
    assert value == pytest.approx(stats.gmean(samples))
    assert (low, high) == pytest.approx(tuple(math.exp(e) for e in ends))
    assert process_interval([0.5, 0.5, 0.5]) == pytest.approx((0.5, 0.5, 0.5))
    assert all(math.isnan(end) for end in process_interval([0.5])[1:])  # one process: no interval


def test_the_ratios_are_planned_as_replicate_asv_runs_each_appending_its_samples():
    chunks = plan(QUICK, r"'gather', '(example|allcnnc-conv2)'")
    figures, replicates = chunks[:2], chunks[2:]
    assert [c.config for c in figures] == ["example", "allcnnc-conv2"] and all(c.replicate is None for c in figures)
    assert not any(c.startswith(f"{PAIRED_SUITE}.") for chunk in figures for c in chunk.cells)
    assert len(replicates) == QUICK.ratio_processes > 1
    for index, chunk in enumerate(replicates, 1):
        assert chunk.replicate == index and len(chunk.cells) == 2 * 2 * 2  # configs x calls x devices
        assert all(c.startswith(f"{PAIRED_SUITE}.") for c in chunk.cells)
        assert ("--append-samples" in chunk.arguments()) == (index > 1)  # the first discards an earlier run's
        assert "--record-samples" in chunk.arguments()
    assert len({c.name for c in chunks}) == len(chunks)  # the ledger of a resumed run tells them apart
    assert [c.replicate for c in plan(QUICK, r"'gather', 'example'", ratio_processes=1)] == [None, 1]
    with pytest.raises(ValueError, match="ratio_processes=0"):
        plan(QUICK, "gather", ratio_processes=0)


def test_bench_refuses_a_ratio_process_count_below_two_before_any_work():
    ran = subprocess.run(
        [sys.executable, "-m", "unfold_bench.cli", "bench", "--ratio-processes", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == NOTHING_RUN
    assert "--ratio-processes: 1 processes: at least two, for an interval" in ran.stderr


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--bench", "("], "'(' is not a regular expression"),
        (["--bench", "zzz"], "no quick-profile cell matches"),
        (["--commits", "no-such-rev..HEAD"], "--commits 'no-such-rev..HEAD': "),
        (["--commits", "HEAD~1..HEAD", "--resume"], "--resume cannot go with --commits"),
        (["--commits", "HEAD..HEAD"], "--commits 'HEAD..HEAD': it selects no commit"),
    ],
)
def test_bench_refuses_a_selection_of_no_cell_before_any_work(arguments, named):
    ran = subprocess.run(
        [sys.executable, "-m", "unfold_bench.cli", "bench", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == NOTHING_RUN and named in ran.stderr  # make bench stops there (the Makefile's recipe)


def _row(config: str, name: str, ratio: float, low: float, high: float, peak: float, **extra) -> dict:
    """One cell of a cell table: its paired ratio to native with the interval's ends (NaN: none), its net peak."""
    metric, memory = TRAINING.time_metric, TRAINING.memory_metric
    return {
        "config": config,
        "strategy": name,
        metric: ratio * 1e-3,
        f"{metric}:status": "ok",
        f"{metric}:x_native": ratio,
        f"{metric}:x_native_low": low,
        f"{metric}:x_native_high": high,
        f"{metric}:x_native_paired": not math.isnan(low),
        memory: peak,
        f"{memory}:status": "ok",
        **extra,
    }


def _cells(**strategies: tuple[float, float, float, float]) -> pd.DataFrame:
    """One config's cell table: per strategy its paired ratio to native, the interval's ends and its net peak."""
    return pd.DataFrame([_row("c", name, *figures) for name, figures in strategies.items()])


def test_leaders_whose_intervals_overlap_are_a_tie_broken_by_memory():
    cells = _cells(fast=(0.50, 0.45, 0.55, 110e6), close=(0.52, 0.47, 0.57, 100e6), slow=(0.9, 0.85, 0.95, 95e6))
    advice = analysis.recommend(cells, TRAINING)
    assert advice.tied == ("close", "fast") and advice.strategy == "close"  # the one with less memory
    pick = analysis.recommend_per_config(cells, TRAINING).iloc[0]
    assert pick.strategy == "close" and pick.tied == ["close", "fast"]


def test_a_strategy_beaten_beyond_the_noise_by_a_tied_one_is_not_in_the_tie():
    # the leader's wide interval overlaps both; gather's lies wholly above cpp's, so the tie-break cannot pick it
    cells = _cells(leader=(0.15, 0.07, 0.30, 100e6), cpp=(0.20, 0.18, 0.22, 100e6), gather=(0.36, 0.27, 0.47, 100e6))
    pick = analysis.recommend_per_config(cells, TRAINING, complexity={"leader": 3, "cpp": 2, "gather": 1}).iloc[0]
    assert pick.tied == ["cpp", "leader"] and pick.strategy == "cpp"


def test_a_tie_with_equal_memory_goes_to_the_simpler_strategy():
    cells = _cells(compiled_one=(0.50, 0.45, 0.55, 100e6), plain=(0.52, 0.47, 0.57, 100e6))
    advice = analysis.recommend(cells, TRAINING, complexity={"compiled_one": 1, "plain": 0})
    assert advice.tied == ("compiled_one", "plain") and advice.strategy == "plain"


@pytest.mark.parametrize("extra", [4096, NET_PEAK_RESOLUTION])
def test_a_tie_whose_net_peaks_differ_within_their_resolution_goes_to_the_simpler_strategy(extra):
    cells = _cells(compiled_one=(0.50, 0.45, 0.55, 100e6), plain=(0.52, 0.47, 0.57, 100e6 + extra))
    simplicity = {"compiled_one": 1, "plain": 0}
    advice = analysis.recommend(cells, TRAINING, complexity=simplicity)
    assert advice.tied == ("compiled_one", "plain") and advice.strategy == "plain"
    pick = analysis.recommend_per_config(cells, TRAINING, complexity=simplicity).iloc[0]
    assert pick.strategy == "plain" and pick.tied == ["compiled_one", "plain"]


def test_a_tie_whose_net_peaks_differ_beyond_their_resolution_goes_to_the_least_memory():
    cells = _cells(compiled_one=(0.50, 0.45, 0.55, 100e6), plain=(0.52, 0.47, 0.57, 100e6 + NET_PEAK_RESOLUTION + 1))
    simplicity = {"compiled_one": 1, "plain": 0}
    assert analysis.recommend(cells, TRAINING, complexity=simplicity).strategy == "compiled_one"
    assert analysis.recommend_per_config(cells, TRAINING, complexity=simplicity).iloc[0].strategy == "compiled_one"


def test_the_memory_resolution_of_a_device_pick_counts_each_config_it_sums():
    """M sums a strategy's net peaks over its configs, so each config adds a net peak's resolution to what M
    cannot tell apart: two configs, each within it, are within it together, though their sum is not within one."""
    half = NET_PEAK_RESOLUTION * 3 // 4
    rows = []
    for config in ("c", "d"):
        one = _cells(compiled_one=(0.50, 0.45, 0.55, 100e6), plain=(0.52, 0.47, 0.57, 100e6 + half))
        rows.append(one.assign(config=config))
    advice = analysis.recommend(pd.concat(rows, ignore_index=True), TRAINING, complexity={"compiled_one": 1})
    assert advice.tied == ("compiled_one", "plain") and advice.strategy == "plain"


def test_a_device_picks_memory_limit_allows_a_net_peaks_resolution_on_each_config_as_a_config_pick_does():
    """Within 1.2x of the lowest plus 128 KiB on every config is eligible on each config, so on the device too;
    M's allowance is 128 KiB on each config it sums, not 1.2x alone (which would put it out)."""
    lowest, close, over = 2**20, math.ceil(1.2 * 2**20) + 100 * 1024, math.ceil(1.2 * 2**20) + NET_PEAK_RESOLUTION + 1
    rows = []
    for config in ("c", "d"):
        one = _cells(lean=(0.9, 0.85, 0.95, lowest), close=(0.5, 0.45, 0.55, close), over=(0.4, 0.35, 0.45, over))
        rows.append(one.assign(config=config))
    cells = pd.concat(rows, ignore_index=True)
    per_config = analysis.recommend_per_config(cells, TRAINING)
    assert list(per_config.strategy) == ["close", "close"]  # over is out on each config, close is in
    ranking = analysis.recommend(cells, TRAINING).ranking.set_index("strategy")
    assert ranking.loc["close", "eligible"] and ranking.loc["close", "memory_score"] > 1.2
    assert (
        not ranking.loc["over", "eligible"]
        and ranking.loc["over", "why_not"] == "M over 1.2x the lowest plus 128 KiB a config"
    )
    assert analysis.recommend(cells, TRAINING).strategy == "close"


def test_the_pick_for_a_needed_capability_breaks_ties_as_the_recommendation_does():
    lacks = (0.9, 0.85, 0.95, 100e6)  # slower, and without the capability
    cells = _cells(compiled_one=(0.50, 0.45, 0.55, 100e6), plain=(0.52, 0.47, 0.57, 100e6), lacks=lacks)
    record = {"capabilities": ["torch.func"], "cells": {"cpu": {"lacks": {"torch.func": "fails"}}}}
    simplicity = {"compiled_one": 1, "plain": 0}
    assert analysis.recommend(cells, TRAINING, complexity=simplicity).strategy == "plain"
    assert analysis.needs_picks(cells, TRAINING, record, "cpu", {}, simplicity) == [("torch.func", "plain")]


def _replicated(per_config: dict[str, dict[str, list[float]]]) -> pd.DataFrame:
    """Cell tables of several configs from each strategy's per-replicate paired ratios to native (replicate i's
    process is sample i), with each cell's interval across its processes as ``load_results`` gives it."""
    replicates = f"{TRAINING.time_metric}:x_native_replicates"
    return pd.DataFrame(
        [
            _row(config, name, *process_interval(samples), 100e6, **{replicates: analysis.Replicates(tuple(samples))})
            for config, strategies in per_config.items()
            for name, samples in strategies.items()
        ]
    )


def test_the_device_score_takes_its_interval_from_the_replicates():
    a, b = [0.5, 0.6, 0.55], [1.0, 0.8, 0.9]
    per_config = {"c": {"s": a, "r": [0.5, 0.5, 0.5]}, "d": {"s": b, "r": [1.0, 1.0, 1.0]}}
    row = analysis.recommend(_replicated(per_config), TRAINING).ranking.set_index("strategy").loc["s"]
    fastest = {
        c: min(statistics.geometric_mean(v) for v in strategies.values()) for c, strategies in per_config.items()
    }
    scores = [(math.log(x / fastest["c"]) + math.log(y / fastest["d"])) / 2 for x, y in zip(a, b)]
    mean = sum(scores) / 3
    half = stats.t.ppf(0.975, 2) * math.sqrt(sum((v - mean) ** 2 for v in scores) / 2 / 3)
    assert row.time_score == pytest.approx(math.exp(mean))
    assert (row.time_low, row.time_high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))


def test_on_one_config_the_device_scores_interval_is_the_cells_own():
    cells = _replicated({"c": {"s": [0.52, 0.61, 0.55, 0.58], "r": [0.9, 1.1, 1.0, 0.95]}})
    times = analysis.relative_times(cells, TRAINING.time_metric)
    assert all(analysis.replicate_half_width(times.loc[[i]]) > 0 for i in times.index)  # not the fallback
    ranking = analysis.recommend(cells, TRAINING).ranking.set_index("strategy")
    for name in ("s", "r"):
        cell = cells.set_index("strategy").loc[name]
        fastest = cells[f"{TRAINING.time_metric}:x_native"].min()
        ends = (
            cell[f"{TRAINING.time_metric}:x_native_low"] / fastest,
            cell[f"{TRAINING.time_metric}:x_native_high"] / fastest,
        )
        assert (ranking.loc[name].time_low, ranking.loc[name].time_high) == pytest.approx(ends)


def test_the_replicates_interval_adds_the_run_level_once():
    a, b, reference = [0.5, 0.6, 0.55], [1.0, 0.8, 0.9], [1.0, 1.0, 1.0]
    cells = _replicated({"c": {"s": a, "r": reference}, "d": {"s": b, "r": reference}})
    replicates = f"{TRAINING.time_metric}:x_native_replicates"
    cells[replicates] = [analysis.Replicates(r.samples, 0.01, 4.0) for r in cells[replicates]]
    own = analysis.relative_times(cells[cells.config == "c"], TRAINING.time_metric).loc[[0]]
    own = pd.concat([own, analysis.relative_times(cells[cells.config == "d"], TRAINING.time_metric).loc[[2]]])
    scores = [(math.log(x) + math.log(y)) / 2 - own.log_fastest.mean() for x, y in zip(a, b)]
    mean = sum(scores) / 3
    across = sum((v - mean) ** 2 for v in scores) / 2 / 3
    assert analysis.replicate_half_width(own) == pytest.approx(summed_error([(across, 2.0), (0.01, 4.0)])[0])


@pytest.mark.parametrize("bad", [math.nan, 0.0, None])
def test_a_replicate_without_a_positive_ratio_leaves_the_interval_to_the_configs_ends(bad):
    cells = _replicated({"c": {"s": [0.5, 0.6, 0.55], "r": [0.5, 0.5, 0.5]}})
    replicates = f"{TRAINING.time_metric}:x_native_replicates"
    cells.loc[0, replicates] = analysis.Replicates.of(pd.Series({"samples": [0.5, bad, 0.55]}))
    assert analysis.replicate_half_width(analysis.relative_times(cells, TRAINING.time_metric).loc[[0]]) is None


def test_a_run_level_without_its_degrees_of_freedom_gives_no_replicates():
    measured = pd.Series({"samples": [0.5, 0.6], "run_variance": 0.01, "run_df": math.nan})
    assert analysis.Replicates.of(measured) is None
    assert analysis.Replicates.of(pd.Series({"samples": [0.5, 0.6], "run_variance": 0.0, "run_df": math.nan}))


def test_a_tie_of_equal_memory_and_machinery_goes_to_the_faster_by_the_paired_ratio_not_the_median():
    seconds = TRAINING.time_metric
    cells = _cells(a=(0.50, 0.45, 0.55, 100e6), b=(0.52, 0.47, 0.57, 100e6))
    cells.loc[cells.strategy == "a", seconds] = 1.0  # its median from other processes reads slower
    assert analysis.recommend_per_config(cells, TRAINING).iloc[0].strategy == "a"


def test_replicates_that_do_not_line_up_leave_the_interval_to_the_configs_ends():
    cells = _replicated({"c": {"s": [0.5, 0.6, 0.55], "r": [0.5, 0.5, 0.5]}, "d": {"s": [1.0, 0.8], "r": [1.0, 1.0]}})
    row = analysis.recommend(cells, TRAINING).ranking.set_index("strategy").loc["s"]
    rows = cells[cells.strategy == "s"].set_index("config")
    fastest = cells.groupby("config")[f"{TRAINING.time_metric}:x_native"].min()
    ends = [
        math.sqrt(math.prod(rows[f"{TRAINING.time_metric}:x_native_{end}"][c] / fastest[c] for c in ("c", "d")))
        for end in ("low", "high")
    ]
    assert (row.time_low, row.time_high) == pytest.approx(ends)


def test_cells_that_each_lost_another_replicate_do_not_line_up_though_their_counts_agree():
    """Config c lost replicate 1 and d replicate 3 of 3: two samples each, which are not the same replicates."""
    cells = _replicated({"c": {"s": [0.6, 0.55], "r": [0.5, 0.5]}, "d": {"s": [1.0, 0.8], "r": [1.0, 1.0]}})
    times = analysis.relative_times(cells[cells.strategy == "s"], TRAINING.time_metric)
    assert analysis.replicate_half_width(times) is not None  # as they stand, they would be paired by position
    replicates = f"{TRAINING.time_metric}:x_native_replicates"
    for index, lost in zip(cells.index[cells.strategy == "s"], ([1], [3])):
        measured = pd.Series({"samples": list(cells.loc[index, replicates].samples), "lost_replicates": lost})
        cells.at[index, replicates] = analysis.Replicates.of(measured)
        assert cells.at[index, replicates].lost == tuple(lost)
    times = analysis.relative_times(cells[cells.strategy == "s"], TRAINING.time_metric)
    assert analysis.replicate_half_width(times) is None  # the per-config ends instead


def test_a_leader_whose_configs_scatter_but_whose_replicates_agree_is_no_tie():
    """Each config's interval of the leader is wide, but what one replicate loses on one config it gains on the
    other: its score is steady from replicate to replicate, and the slower, simpler rival is no tie."""
    leader_c, leader_d = [0.40, 0.60, 0.50], [0.60, 0.40, 0.48]
    cells = _replicated(
        {"c": {"fast": leader_c, "plain": [0.70, 0.71, 0.69]}, "d": {"fast": leader_d, "plain": [0.70, 0.69, 0.71]}}
    )
    advice = analysis.recommend(cells, TRAINING, complexity={"fast": 1, "plain": 0})
    assert advice.strategy == "fast" and advice.tied == ()
    per_config = analysis.recommend_per_config(cells, TRAINING, complexity={"fast": 1, "plain": 0})
    assert set(per_config.strategy) == {"plain"}  # each config alone cannot tell them apart


def test_separated_intervals_are_no_tie_and_the_fastest_is_picked():
    cells = _cells(fast=(0.50, 0.48, 0.52, 110e6), close=(0.60, 0.57, 0.63, 100e6))
    advice = analysis.recommend(cells, TRAINING)
    assert advice.tied == () and advice.strategy == "fast"
    assert analysis.recommend_per_config(cells, TRAINING).iloc[0].tied == []


def test_without_paired_ratios_the_medians_decide_and_no_tie_is_claimed():
    nan = math.nan
    cells = _cells(fast=(0.50, nan, nan, 110e6), close=(0.52, nan, nan, 100e6))
    advice = analysis.recommend(cells, TRAINING)
    assert advice.strategy == "fast" and advice.tied == ()
    assert math.isnan(advice.ranking.time_low.iloc[0])


def test_a_median_whose_asv_interval_reaches_below_zero_has_no_lower_end_and_the_pick_stands():
    nan, metric = math.nan, TRAINING.time_metric
    cells = _cells(fast=(0.50, nan, nan, 110e6), wide=(0.52, nan, nan, 100e6))
    cells[f"{metric}:low"] = [0.45e-3, -4e-3]  # asv's 99% interval of a median of a few wide samples
    cells[f"{metric}:high"] = [0.55e-3, 5e-3]
    advice = analysis.recommend(cells, TRAINING).ranking.set_index("strategy")
    assert advice.loc["fast", "time_low"] == pytest.approx(0.9) and math.isnan(advice.loc["wide", "time_low"])
    assert analysis.recommend(cells, TRAINING).strategy == "fast"


REPLICATES = 2  # fewer than the profile's: the test needs two samples appended, not their interval's width


@pytest.mark.slow
def test_a_paired_ratio_is_one_sample_per_process_in_asvs_results_and_asv_publishes_it(tmp_path):
    config = scratch_config(tmp_path, ROOT)
    # cpp and native on a 2-d config, the floors there, and cpp over the floors on a 3-d one (native cannot run it)
    selection = r"'(native|cpp)', 'example', 'cpu'|(?<!direct_)floors\..*'example', 'cpu'"
    selection += r"|direct_floors\..*'cpp', 'vol3d-conv', 'cpu'"
    command = [sys.executable, "-m", "unfold_bench.cli", "bench", "--config", str(config), "--bench", selection]
    command += ["--ratio-processes", str(REPLICATES)]
    before = pd.Timestamp.now(tz="UTC").floor("s")
    ran = subprocess.run([*command, "--summaries", str(tmp_path / "s")], cwd=ROOT, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    table = load_results(tmp_path / "results")
    ran_cells = table[table.status == "ok"]
    assert (ran_cells.started >= before).all()  # the run's clock, which keys a set of runs' run level
    assert (ran_cells.date <= before).all()  # asv's result date is the commit's
    direct = table[(table.suite == DIRECT_FLOORS_SUITE) & (table.config == "vol3d-conv") & (table.device == "cpu")]
    direct = direct[direct.strategy == "cpp"].set_index("metric")
    assert set(direct.index) == set(DIRECT_FLOOR_RATIOS.values()) and (direct.status == "ok").all()
    assert (direct.processes == REPLICATES).all()
    assert ((direct.low <= direct.value) & (direct.value <= direct.high)).all()
    table = table[(table.config == "example") & (table.device == "cpu")]  # asv lists the unselected cells too
    assert table[table.suite == DIRECT_FLOORS_SUITE].empty  # native runs example: its floors are chained through it
    paired = table[table.suite == PAIRED_SUITE].set_index(["strategy", "metric"])
    cpp = paired.loc["cpp"]
    assert set(cpp.index) == {"track_ratio_forward", "track_ratio_forward_backward"}
    assert (cpp.status == "ok").all() and (cpp.processes == REPLICATES).all()
    assert ((cpp.low <= cpp.value) & (cpp.value <= cpp.high)).all()
    assert (paired.loc["native"].status == "skipped").all()  # the reference is not its own ratio

    cells = analysis.cell_table(table, "cpu").set_index("strategy")
    for metric, ratio in (
        ("time_forward", "track_ratio_forward"),
        ("time_forward_backward", "track_ratio_forward_backward"),
    ):
        assert cells.loc["cpp", f"{metric}:x_native_paired"]
        assert cells.loc["cpp", f"{metric}:x_native"] == pytest.approx(cpp.loc[ratio, "value"])
    # the forward over the floors, chained through native: both factors paired, one sample per process each
    floor_rows = table[table.suite == FLOORS_SUITE].set_index("metric")
    assert (floor_rows.status == "ok").all() and (floor_rows.processes == REPLICATES).all()
    over_copy = floor_rows.loc[FLOOR_RATIOS["forward", "time_copy"], "value"]
    assert cells.loc["cpp", "time_forward:x_bound_paired"] and cells.loc["native", "time_forward:x_bound_paired"]
    chained = cpp.loc["track_ratio_forward", "value"] * over_copy
    assert cells.loc["cpp", "time_forward:x_bound"] == pytest.approx(chained)
    assert cells.loc["cpp", "time_forward:x_fill_low"] < cells.loc["cpp", "time_forward:x_fill_high"]
    # the forward-backward over copy_, chained the same way through native's forward-backward over copy_'s forward
    over_copy = floor_rows.loc[FLOOR_RATIOS["forward_backward", "time_copy"], "value"]
    chained = cpp.loc["track_ratio_forward_backward", "value"] * over_copy
    assert cells.loc["cpp", "time_forward_backward:x_bound_paired"]
    assert cells.loc["cpp", "time_forward_backward:x_bound"] == pytest.approx(chained)
    assert cells.loc["native", "time_forward_backward:x_bound"] == pytest.approx(over_copy)

    (result_file,) = (tmp_path / "results").glob("*/*-existing*.json")
    saved = json.loads(result_file.read_text())
    columns = saved["result_columns"]
    record = dict(zip(columns, saved["results"]["ratios.Quick.track_ratio_forward"]))
    assert {len(s) for s in record["samples"] if s} == {REPLICATES}  # asv kept every process's sample
    # the tidy table keeps each process's sample, as make agreement reads them
    assert [len(samples) for samples in cpp.samples] == [REPLICATES, REPLICATES]
    forward = cpp.loc["track_ratio_forward"]
    assert process_interval(forward.samples)[0] == pytest.approx(forward.value)
    # a recorded run level widens the floors' intervals (never narrows them) and leaves the ratios to native as they are
    (machine_dir,) = (p.parent for p in (tmp_path / "results").glob("*/machine.json"))
    levels = {FLOORS_SUITE: RunLevel(0.01, 2.0), PAIRED_SUITE: RunLevel(-0.001, 2.0)}
    write_run_levels(machine_dir, "quick", levels, "one set of runs", {})
    again = load_results(tmp_path / "results")
    again = again[(again.config == "example") & (again.device == "cpu")]
    floors_again = again[again.suite == FLOORS_SUITE].set_index("metric")
    assert (floors_again.run_variance == 0.01).all() and (floors_again.value == floor_rows.value).all()
    assert (floors_again.high / floors_again.low >= floor_rows.high / floor_rows.low).all()  # never narrower
    cpp_again = again[(again.suite == PAIRED_SUITE) & (again.strategy == "cpp")].set_index("metric")
    assert (cpp_again.low == cpp.low).all() and (cpp_again.df == REPLICATES - 1).all()
    published = subprocess.run(
        [sys.executable, "-m", "asv", "--config", str(config), "publish"], cwd=ROOT, capture_output=True, text=True
    )
    assert published.returncode == 0, published.stdout + published.stderr


@pytest.mark.parametrize("seed", [2, 3])  # even: the first cell is set up first; odd: the second
def test_a_process_ratio_times_each_side_in_its_own_pass_whichever_is_set_up_first(monkeypatch, seed):
    """A floor's forward against native's forward-backward: each side keeps its pass when the order flips, and the
    ratio is always the second cell's time over the first's."""
    calls = []

    def measure_pair(cells, passes, *args, warmup_blocks, warmup_seconds):
        # the profile's, not the gate's: its warm-up ends once it has taken as long as its timed blocks aim to
        assert (warmup_blocks, warmup_seconds) == (QUICK.warmup_blocks, QUICK.placement_seconds)
        calls.append((cells, passes))
        log_ratio = math.log(2.0)  # log(second side's time / first side's), as measured in this order
        return [{"log_ratios": [log_ratio] * 4}] * QUICK.placements

    monkeypatch.setattr(ratios, "measure_pair", measure_pair)
    floor, native = "floor cell", "native cell"
    ratio = ratios.process_ratio((floor, native), ("forward", "forward_backward"), QUICK, seed)
    ((cells, passes),) = calls
    if seed % 2:
        assert cells == (native, floor) and passes == ("forward_backward", "forward") and ratio == pytest.approx(0.5)
    else:
        assert cells == (floor, native) and passes == ("forward", "forward_backward") and ratio == pytest.approx(2.0)


def test_the_floor_suite_times_native_against_resident_writes_and_skips_where_native_cannot_run():
    suite = floors.Quick()
    assert {name for name in dir(suite) if name.startswith("track_")} == set(FLOOR_RATIOS.values())
    suite.setup("example", "cpu")
    for metric in FLOOR_RATIOS.values():
        measured = getattr(suite, metric)("example", "cpu")
        assert measured["number"] == 1 and len(measured["samples"]) == 1 and measured["samples"][0] > 0
    with pytest.raises(NotImplementedError, match="no reference: strategy 'native' supports spatial dims"):
        suite.setup("vol3d-conv", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(NotImplementedError, match="no CUDA device"):
            suite.setup("example", "cuda")


class _QuickDirectFloorsAtTestSize(direct_floors.Quick):
    profile = AT_TEST_SIZE  # the quick profile's cells, a quarter of the work


def test_the_direct_floor_suite_pairs_a_strategy_with_the_floors_only_where_the_reference_cannot_run():
    suite = _QuickDirectFloorsAtTestSize()
    assert {name for name in dir(suite) if name.startswith("track_")} == set(DIRECT_FLOOR_RATIOS.values())
    assert suite.params[1] == [c.name for c in QUICK.configs() if c.spatial_dims == 3]  # native: 1-d and 2-d
    verdicts = gate([Cell.from_names("as_strided", "vol3d-conv", "cpu", AT_TEST_SIZE)])
    suite.setup(verdicts, "as_strided", "vol3d-conv", "cpu")
    for metric in DIRECT_FLOOR_RATIOS.values():
        measured = getattr(suite, metric)(verdicts, "as_strided", "vol3d-conv", "cpu")
        assert measured["number"] == 1 and len(measured["samples"]) == 1 and measured["samples"][0] > 0
    with pytest.raises(NotImplementedError, match="native runs example: over the floors through it"):
        suite.setup(verdicts, "as_strided", "example", "cpu")
    assert "native" not in suite.params[0]  # it could never run here
    with pytest.raises(WrongResultError, match="gather/vol3d-conv/cpu: not checked"):
        suite.setup(verdicts, "gather", "vol3d-conv", "cpu")


def test_a_floor_writes_one_resident_output_sized_tensor():
    config = profile_config(QUICK, "example")
    x, kwargs = config.make_input("cpu", seed=0), config.unfold_kwargs()
    filled = floors.FLOORS["time_fill"](x, **kwargs)
    assert filled.shape == config.geometry.output_shape and filled.dtype == x.dtype and bool((filled == 1).all())
    assert floors.FLOORS["time_fill"](x, **kwargs).data_ptr() == filled.data_ptr()  # resident: no allocation
    copied = floors.FLOORS["time_copy"](x, **kwargs)
    assert copied.shape == config.geometry.output_shape and bool((copied == 1).all())
