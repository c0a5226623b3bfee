"""The other entry points of the benchmarks: pytest-benchmark's matrix, the memory_profiler script, the machine
entry and the terminal summary. No timing is asserted."""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import subprocess
import sys

import pandas as pd
import pytest

from benchmarks.allocator import NET_PEAK_RESOLUTION, regime_of_machine
from benchmarks.cells import Cell
from benchmarks.intervals import chained_ratio, process_interval
from benchmarks.machine import HOST_VARIABLE, THP_VARIABLE, THREAD_VARIABLES, machine_info, machine_name
from benchmarks.profiles import QUICK
from benchmarks.runner import DIRECT_FLOORS_SUITE, FLOORS_SUITE
from benchmarks.trees import ROOT
from benchmarks.vocabulary import DEVICES, DIRECT_FLOOR_RATIOS, FLOOR_RATIOS
from impls import STRATEGIES
from reports.analysis import (
    RULES,
    cell_table,
    context_configs,
    context_dependent,
    fastest_against_bounds,
    recommend,
    recommend_per_config,
    relative_times,
    winners,
)
from reports.figures import bound_ratio_bars, strategy_colors
from reports.site import _x_bound_text, _x_native_text
from reports.summary import _x_native, compact_table, physics_problems, summary_tables
from reports.units import MIB, format_ratio_interval
from tests.helpers import RUN_REGRESS_MAIN


def _pytest(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "benchmarks/", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


@pytest.mark.slow
def test_pytest_benchmark_matrix_is_the_registry_times_configs_times_devices():
    collected = _pytest("--collect-only", "-q")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    ids = {line.strip() for line in collected.stdout.splitlines() if "::" in line}
    for test, (strategy, config, device) in itertools.product(
        ("test_forward", "test_forward_backward"),
        itertools.product(STRATEGIES, [c.name for c in QUICK.configs()], DEVICES),
    ):
        assert f"benchmarks/test_matrix.py::{test}[{strategy}-{config}-{device}-quick]" in ids


@pytest.mark.slow
def test_pytest_benchmark_runs_a_config_and_skips_with_reasons():
    # every strategy on the smallest config, and a cell skipped for its spatial dims (every cell runs in
    # test_harness.test_every_quick_cell_runs_or_skips_for_a_stated_reason)
    run = _pytest("-k", "example or (native and vol3d)", "--benchmark-disable", "-rs", "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    cells = [Cell.from_names(s, "example", d, QUICK) for s in STRATEGIES for d in DEVICES]
    runnable = [cell for cell in cells if cell.skip_reason() is None]
    assert runnable and f"{2 * len(runnable)} passed" in run.stdout, run.stdout  # forward and forward-backward
    assert "strategy 'native' supports spatial dims (1, 2), not 3" in run.stdout


# Command lines unfold-bench regress must refuse before any work (exit status 2), and what its message must name
REGRESS_REFUSALS = [
    (["--mode", "asv", "--rounds", "6"], ["--rounds 6", "at least 7"]),
    *[
        (["--callgrind", spec], [named, repr(spec)])
        for spec, named in [
            ("tilling:example:forward", "unknown strategy 'tilling'"),
            ("tiling:conv2:forward", "unknown config 'conv2'"),
            ("tiling:example:backward", "unknown pass 'backward'"),
            ("tiling:example", "expected STRATEGY:CONFIG"),
        ]
    ],
]


@pytest.mark.slow
def test_regress_refuses_bad_arguments_before_any_work():
    arguments = json.dumps([arguments for arguments, _ in REGRESS_REFUSALS])
    run = subprocess.run(
        [sys.executable, "-c", RUN_REGRESS_MAIN, arguments], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    results = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(results) == len(REGRESS_REFUSALS), run.stdout
    for (arguments, named), (status, stderr) in zip(REGRESS_REFUSALS, results):
        assert status == 2 and all(word in stderr for word in named), (arguments, status, stderr)


def test_benchmark_regex_selects_suites_by_name_and_rejects_unknown_ones():
    import re

    import pytest

    from benchmarks.profiles import QUICK, benchmark_regex

    strategies_only = re.compile(benchmark_regex(QUICK, "conv2", suites=("unfold",)))
    assert strategies_only.search("unfold.Quick.time_forward('native', 'allcnnc-conv2', 'cpu')")
    assert not strategies_only.search("bounds.Quick.time_copy('allcnnc-conv2', 'cpu')")
    assert re.search(benchmark_regex(QUICK), "compile_time.Quick.track_compile_seconds('compiled', 'example', 'cpu')")
    with pytest.raises(ValueError, match="suites=\\('unfolds',\\)"):
        benchmark_regex(QUICK, suites=("unfolds",))


@pytest.mark.slow
def test_memory_profile_script_shows_lines_and_timeline():
    run = subprocess.run(
        [sys.executable, "-m", "unfold_bench.cli", "memprofile", "as_strided", "example"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "Line #" in run.stdout and "pad_spatial" in run.stdout and "out.backward(grad_output)" in run.stdout
    assert "net resident memory over" in run.stdout


@pytest.mark.slow
def test_memory_profile_script_rejects_an_unsupported_cell():
    run = subprocess.run(
        [sys.executable, "-m", "unfold_bench.cli", "memprofile", "native", "vol3d-conv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "supports spatial dims (1, 2), not 3" in run.stderr


def test_memory_profile_re_executes_itself_pinned_not_the_command_that_called_it(monkeypatch):
    """Called from another command (``cli.main``, a script), it re-executes as its own module with its arguments:
    re-running the caller's command line would run the caller again."""
    import os

    from benchmarks.allocator import MMAP_THRESHOLD_VARIABLE
    from unfold_bench.commands import memory_profile

    class ReExecutedError(Exception):
        pass

    def execve(path, arguments, environment):
        raise ReExecutedError(arguments[1:], environment.get(MMAP_THRESHOLD_VARIABLE))

    monkeypatch.delenv(MMAP_THRESHOLD_VARIABLE, raising=False)
    monkeypatch.delenv("UNFOLD_BENCH_ALLOCATOR_PINNED", raising=False)  # set only in a re-executed process
    monkeypatch.setattr(os, "execve", execve)
    with pytest.raises(ReExecutedError) as re_executed:
        memory_profile.main(["as_strided", "example"])
    arguments, threshold = re_executed.value.args
    assert arguments == ["-m", "unfold_bench.commands.memory_profile", "as_strided", "example"] and threshold


def test_machine_entry_names_the_devices_and_the_allocator_variant(monkeypatch):
    for variable in (THP_VARIABLE, *THREAD_VARIABLES):  # pytest-xdist's workers set OMP_NUM_THREADS (conftest)
        monkeypatch.delenv(variable, raising=False)
    info = machine_info()
    assert info["machine"] == machine_name() and not info["machine"].endswith("-thp")
    assert info["torch_version"] and "GPU:" in info["device_names"] and THP_VARIABLE in info["allocator"]
    monkeypatch.setenv(THP_VARIABLE, "1")
    assert machine_name().endswith("-thp") and "huge pages" in machine_info()["allocator"]


def test_a_thread_count_set_by_the_environment_is_a_machine_name_of_its_own(monkeypatch):
    """torch's thread count moves one strategy against another (a strategy of many small parallel regions waits at
    each for a thread another task holds), so a count the environment sets is named, and none is named where it
    sets none (the names of earlier results stand)."""
    import torch

    for variable in (THP_VARIABLE, *THREAD_VARIABLES):
        monkeypatch.delenv(variable, raising=False)
    default = machine_name()
    assert "threads" not in default
    for variable in THREAD_VARIABLES:
        monkeypatch.setenv(variable, "1")
        monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
        assert machine_name() == f"{default}-1threads"
        assert machine_name("fresh-pages") == f"{default}-1threads-freshpages"
        assert regime_of_machine(machine_name("fresh-pages")).name == "fresh-pages"
        monkeypatch.delenv(variable)


def test_a_stable_host_label_replaces_the_host_name(monkeypatch):
    monkeypatch.delenv(THP_VARIABLE, raising=False)
    monkeypatch.setenv(HOST_VARIABLE, "GitHub hosted")
    labelled = machine_name()
    assert labelled.startswith("github-hosted-")
    monkeypatch.delenv(HOST_VARIABLE)
    by_host = machine_name()
    assert by_host != labelled and by_host.endswith(labelled.removeprefix("github-hosted"))  # CPU, cores, GPU kept


def _row(suite: str, metric: str, value: float | None, strategy: str | None = None, status: str = "ok") -> dict:
    return {
        "suite": suite,
        "metric": metric,
        "strategy": strategy,
        "config": "c",
        "device": "cpu",
        "value": value,
        "status": status,
        "q_25": None,
        "q_75": None,
    }


def test_summary_ratios_skips_and_physics_checks():
    rows = [
        _row("bounds", "time_copy", 0.010),
        _row("bounds", "time_fill", 0.005),
        _row("bounds", "track_min_peak_forward", 2 * MIB),
        _row("unfold", "time_forward", 0.040, "native"),
        {**_row("unfold", "time_forward", 0.020, "fast"), "q_25": 0.018, "q_75": 0.0235},
        _row("unfold", "time_forward", 0.001, "impossible"),
        _row("unfold", "track_net_peak_forward", 2 * MIB, "native"),
        _row("unfold", "track_net_peak_forward", MIB, "impossible"),
        _row("unfold", "track_net_peak_forward", 2 * MIB - NET_PEAK_RESOLUTION, "within_resolution"),
        _row("unfold", "time_forward", None, "broken", status="failed"),
        _row("unfold", "time_forward", None, "absent", status="skipped"),
    ]
    table = pd.DataFrame(rows)
    summary = summary_tables(table)["cpu"].set_index(("", "strategy"))
    assert summary.loc["fast", ("forward ms", "value")] == "20 (IQR 18-23.5)"  # a time with its spread
    assert summary.loc["impossible", ("forward ms", "value")] == "1"  # asv recorded no quartiles: none shown
    assert summary.loc["native", ("forward MiB", "value")] == "2"
    assert summary.loc["fast", ("forward ms", "xnat")] == "0.50*"  # a quotient of medians: no paired ratio here
    assert summary.loc["fast", ("forward ms", "xcopy")] == "2.00*"  # a quotient of medians: no paired floor
    assert summary.loc["broken", ("forward ms", "value")] == "failed"
    assert "absent" not in summary.index  # skipped everywhere: listed with its reason, not as a row
    problems = physics_problems(table)
    assert len(problems) == 2
    assert "impossible forward" in problems[0] and "below the write-only fill_ floor" in problems[0]
    assert "impossible track_net_peak_forward" in problems[1] and "1024 KiB below the analytic minimum" in problems[1]
    # Beyond the noise only: a forward whose quartiles overlap the fill_ floor's is not a contradiction.
    noisy = pd.DataFrame(
        [
            {**_row("bounds", "time_fill", 0.018), "q_25": 0.012, "q_75": 0.030},
            {**_row("unfold", "time_forward", 0.0179, "as_fast"), "q_25": 0.014, "q_75": 0.019},
            {**_row("unfold", "time_forward", 0.008, "faster"), "q_25": 0.007, "q_75": 0.011},
        ]
    )
    found = physics_problems(noisy)
    assert len(found) == 1 and "faster forward" in found[0] and "upper quartile 11.000" in found[0], found


def test_a_forward_paired_with_the_fill_floor_through_native_is_judged_by_its_interval():
    """A forward below the fill_ floor's median from other processes, but above it chained through native inside
    processes, is no contradiction; one whose chained interval lies below 1 is, and is said so."""

    def paired(suite: str, metric: str, value: float, low: float, high: float, strategy: str | None = None) -> dict:
        return {**_row(suite, metric, value, strategy), "low": low, "high": high, "processes": 4, "df": 3}

    rows = [
        _row("bounds", "time_fill", 0.005),
        _row("bounds", "track_min_peak_forward", 2 * MIB),
        _row("unfold", "time_forward", 0.040, "native"),
        _row("unfold", "time_forward", 0.004, "placed_well"),  # below the floor's median from other processes
        _row("unfold", "time_forward", 0.004, "truly_below"),
        paired("ratios", "track_ratio_forward", 0.2, 0.18, 0.22, "placed_well"),
        paired("ratios", "track_ratio_forward", 0.05, 0.045, 0.055, "truly_below"),
        paired(FLOORS_SUITE, FLOOR_RATIOS["forward", "time_fill"], 6.0, 5.5, 6.5),  # native takes 6 fills
    ]
    problems = physics_problems(pd.DataFrame(rows))
    assert len(problems) == 1, problems
    assert problems[0].startswith("truly_below forward on c (cpu) took 0.30x [0.27, 0.33] the write-only fill_")
    assert "paired inside processes" in problems[0]
    cells = cell_table(pd.DataFrame(rows), "cpu").set_index("strategy")
    assert cells.loc["placed_well", "time_forward:x_fill"] == pytest.approx(1.2)
    assert cells.loc["native", "time_forward:x_fill_low"] == 5.5  # native's own: the floor ratio as measured
    assert not cells.loc["native", "time_forward:x_bound_paired"]  # no paired copy_ floor in this run


def test_where_native_cannot_run_the_floors_and_the_picks_come_from_each_strategys_own_paired_ratios():
    """A 3-d config: no ratio to native, so x copy_, the fill_ check and the ranking come from the suite
    direct_floors (each strategy against the floors inside processes), with their intervals."""

    def direct(metric: str, value: float, low: float, high: float, strategy: str) -> dict:
        return {**_row(DIRECT_FLOORS_SUITE, metric, value, strategy), "low": low, "high": high, "processes": 4, "df": 3}

    over_copy, over_fill = DIRECT_FLOOR_RATIOS["forward", "time_copy"], DIRECT_FLOOR_RATIOS["forward", "time_fill"]
    rows = [
        _row("bounds", "time_fill", 0.010),
        _row("bounds", "time_copy", 0.020),
        _row("bounds", "track_min_peak_forward", 2 * MIB),
        _row("unfold", "time_forward", 0.008, "placed_well"),  # below the floor's median from other processes
        _row("unfold", "time_forward", 0.008, "truly_below"),
        _row("unfold", "time_forward", 0.030, "slow"),
        direct(over_copy, 0.9, 0.8, 1.0, "placed_well"),
        direct(over_fill, 1.5, 1.3, 1.7, "placed_well"),
        direct(over_copy, 0.4, 0.35, 0.45, "truly_below"),
        direct(over_fill, 0.6, 0.55, 0.65, "truly_below"),
        direct(over_copy, 0.95, 0.7, 1.3, "slow"),
    ]
    table = pd.DataFrame(rows)
    problems = physics_problems(table)
    assert len(problems) == 1 and problems[0].startswith("truly_below forward on c (cpu) took 0.60x [0.55, 0.65]")
    cells = cell_table(table, "cpu").set_index("strategy")
    assert cells["time_forward:x_bound_paired"].all() and not cells["time_forward:x_native_paired"].any()
    assert cells.loc["placed_well", "time_forward:x_bound"] == 0.9  # not 0.008 / 0.020 from other processes
    assert (cells.loc["slow", "time_forward:x_bound_low"], cells.loc["slow", "time_forward:x_bound_high"]) == (0.7, 1.3)
    relative = relative_times(cells.reset_index(), "time_forward").set_index(cells.index)
    assert relative.loc["slow", "relative"] == pytest.approx(0.95 / 0.4)  # not the medians' 0.030 / 0.008
    assert relative.loc["placed_well", "low"] == pytest.approx(0.8 / 0.4)


def _paired_run() -> pd.DataFrame:
    """One config's run with paired ratios: "lucky"'s median process was placed well, yet it is the slowest paired
    with native; "steady" is the fastest paired, and "close" is tied with it."""

    def paired(metric: str, value: float, low: float, high: float, strategy: str | None = None) -> dict:
        suite = FLOORS_SUITE if strategy is None else "ratios"
        return {**_row(suite, metric, value, strategy), "low": low, "high": high, "processes": 4, "df": 3}

    return pd.DataFrame(
        [
            _row("bounds", "time_copy", 0.010),
            _row("unfold", "time_forward", 0.040, "native"),
            _row("unfold", "time_forward", 0.005, "lucky"),
            _row("unfold", "time_forward", 0.008, "steady"),
            _row("unfold", "time_forward", 0.009, "close"),
            paired("track_ratio_forward", 0.5, 0.45, 0.55, "lucky"),
            paired("track_ratio_forward", 0.2, 0.18, 0.22, "steady"),
            paired("track_ratio_forward", 0.21, 0.19, 0.24, "close"),
            paired(FLOOR_RATIOS["forward", "time_copy"], 4.0, 4.0, 4.0),
        ]
    )


@pytest.mark.parametrize("doubled", [6, 1, 8], ids=["paired ratio", "strategy's time", "floor"])
def test_a_run_table_with_two_rows_of_one_cell_is_refused_naming_it(doubled):
    table = _paired_run()
    with pytest.raises(ValueError, match="two rows of one cell in a run's table: .*'config': 'c'"):
        cell_table(pd.concat([table, table.iloc[[doubled]]], ignore_index=True), "cpu")


def test_the_fastest_is_ranked_by_the_paired_ratios_and_names_those_tied_with_it():
    """The fastest per config in the summary and against the roofline: the least paired ratio to native, not the
    least median (one process placed luckily), with the strategies whose intervals overlap it named as tied."""
    table = _paired_run()
    best = fastest_against_bounds(cell_table(table, "cpu")).set_index("metric").loc["time_forward"]
    assert (best.strategy, best.tied) == ("steady", ["close"])
    assert best.x_copy == pytest.approx(0.8) and best.x_copy_low < 0.8 < best.x_copy_high  # chained through native
    line = compact_table(table, "cpu", {}).iloc[0]["fastest forward (x copy_)"]
    assert line.startswith("steady 0.80 [") and line.endswith("]; tie: close"), line
    no_tie = compact_table(table[table.strategy != "close"], "cpu", {}).iloc[0]["fastest forward (x copy_)"]
    assert "tie" not in no_tie
    site_bold = winners(cell_table(table, "cpu")).set_index("metric").loc["time_forward", "strategy"]
    assert sorted(site_bold) == ["close", "steady"]


def test_the_picks_score_comes_with_the_geometric_mean_of_its_paired_intervals_ends():
    """The pick's score (T: its time over each config's fastest, geometric mean) carries an interval, the geometric
    mean of the ends of its paired intervals, which the summary's and the site's pick lines print beside it."""
    memory = [_row("unfold", "track_net_peak_forward", 1.0e6, s) for s in ("native", "lucky", "steady", "close")]
    cells = cell_table(pd.concat([_paired_run(), pd.DataFrame(memory)], ignore_index=True), "cpu")
    pick = recommend(cells, RULES[1])  # forward only
    assert (pick.strategy, pick.tied) == ("steady", ("close", "steady"))
    assert (pick.score, pick.low, pick.high) == pytest.approx((1.0, 0.18 / 0.2, 0.22 / 0.2))
    assert format_ratio_interval(pick.score, pick.low, pick.high) == "1.00x [0.90, 1.10]"


def test_a_strategy_whose_own_calls_run_far_slower_than_its_paired_ratio_says_is_marked_and_never_picked():
    """As huge-page advice on the full profile: paired with native a strategy's forward takes 0.15x its time, its own
    calls one after another (asv's samples) 2.5x. Its time depends on what ran before it: the cell says so, and no
    pick, fastest or star takes it, for either pass (a forward-backward holds the forward). One whose own calls read
    higher by less than ``CONTEXT_FACTOR`` beyond both spreads (its lower quartile over native's upper one) is kept,
    though its medians alone are over the factor apart."""

    def timed(metric: str, value: float, strategy: str, q_25: float | None = None) -> dict:
        quartiles = {"q_25": q_25 or 0.95 * value, "q_75": 1.05 * value}
        return {**_row("unfold", metric, value, strategy), **quartiles, "low": 0.9 * value, "high": 1.1 * value}

    def paired(metric: str, value: float, low: float, high: float, strategy: str) -> dict:
        return {**_row("ratios", metric, value, strategy), "low": low, "high": high, "df": 3}

    forward, both = "time_forward", "time_forward_backward"
    rows = [
        timed(forward, 0.040, "native"),
        timed(forward, 0.100, "advised"),  # its own calls: 2.5x native's
        timed(forward, 0.008, "steady"),
        timed(forward, 0.030, "two_humped", q_25=0.010),  # 0.75x alone against 0.3x paired, but its quartiles spread
        paired("track_ratio_forward", 0.15, 0.14, 0.16, "advised"),
        paired("track_ratio_forward", 0.20, 0.18, 0.22, "steady"),
        paired("track_ratio_forward", 0.30, 0.27, 0.33, "two_humped"),
        *(timed(both, 0.080, s) for s in ("native", "advised")),  # the forward-backward agrees in both contexts
        *(timed(both, 0.040, s) for s in ("steady", "two_humped")),
        paired("track_ratio_forward_backward", 0.45, 0.42, 0.48, "advised"),
        paired("track_ratio_forward_backward", 0.50, 0.47, 0.53, "steady"),
        paired("track_ratio_forward_backward", 0.55, 0.52, 0.58, "two_humped"),
        *(
            _row("unfold", metric, 1.0e6, s)
            for s in ("native", "advised", "steady", "two_humped")
            for metric in ("track_net_peak_forward", "track_net_peak_forward_backward")
        ),
    ]
    cells = cell_table(pd.DataFrame(rows), "cpu")
    flagged = cells.set_index("strategy")[f"{forward}:context_dependent"]
    assert flagged.to_dict() == {"native": False, "advised": True, "steady": False, "two_humped": False}
    assert not cells[f"{both}:context_dependent"].any()
    for rule in RULES:  # advised is the fastest paired in both passes, and out of both
        pick = recommend(cells, rule)
        assert pick.strategy == "steady" and recommend_per_config(cells, rule).iloc[0].strategy == "steady"
    advised_score = pick.ranking.set_index("strategy").loc["advised"]
    assert advised_score[["time_score", "time_low", "time_high"]].tolist() == pytest.approx([0.75, 0.7, 0.8])
    why = advised_score.why_not  # scored by its paired ratio over the shippable fastest's, with its interval
    assert "c forward time: 2.50x native against 0.15x paired" in why and "depends on what runs before it" in why
    assert set(fastest_against_bounds(cells).strategy) == {"steady"}
    assert "advised" not in set(winners(cells).query("metric in @TIMED").strategy)
    advised = cells.set_index("strategy").loc["advised"]
    assert _x_native_text(advised, forward).endswith("; own calls 2.50x native (depends on what runs before it)")
    assert _x_native(advised, forward).endswith("; own calls 2.50x native (depends on what runs before it)")
    assert _x_native(advised, both) == "0.45 [0.42, 0.48]"  # the pass that agrees carries no note
    # a paired ratio without an interval (one process, results taken elsewhere) is held at its value: still marked
    alone = [{**r, "low": math.nan, "high": math.nan} if r["suite"] == "ratios" else r for r in rows]
    assert cell_table(pd.DataFrame(alone), "cpu").set_index("strategy").loc["advised", f"{forward}:context_dependent"]


def test_where_native_cannot_run_the_own_calls_are_held_against_the_paired_ratio_to_copy():
    """A 3-d config: no ratio to native, so a strategy's own calls over copy_'s (its lower quartile over copy_'s upper
    one) are held against its direct paired ratio to copy_. As huge-page advice on the quick profile's vol3d-conv:
    paired with copy_ it takes 3x copy_'s time, its own calls 15x; it is marked and no ranking takes it there."""

    def timed(value: float, strategy: str, suite: str = "unfold", metric: str = "time_forward") -> dict:
        return {**_row(suite, metric, value, strategy), "q_25": 0.9 * value, "q_75": 1.1 * value}

    def over_copy(value: float, low: float, high: float, strategy: str) -> dict:
        metric = DIRECT_FLOOR_RATIOS["forward", "time_copy"]
        return {**_row(DIRECT_FLOORS_SUITE, metric, value, strategy), "low": low, "high": high, "df": 6}

    rows = [
        timed(0.004, None, "bounds", "time_copy"),
        timed(0.060, "advised"),  # 15x copy_ in its own calls
        timed(0.014, "steady"),  # 3.5x
        over_copy(3.0, 2.4, 3.8, "advised"),
        over_copy(3.4, 3.1, 3.7, "steady"),
    ]
    cells = cell_table(pd.DataFrame(rows), "cpu").set_index("strategy")
    assert cells["time_forward:context_dependent"].to_dict() == {"advised": True, "steady": False}
    advised = cells.loc["advised"]
    assert advised["time_forward:x_bound"] == 3.0 and advised["time_forward:own_loop"] == pytest.approx(15.0)
    assert _x_bound_text(advised, "time_forward", "copy_").endswith(
        "; own calls 15.00x copy_ (depends on what runs before it)"
    )
    assert _x_native_text(advised, "time_forward") == "- native"
    why = context_dependent(cells.reset_index())["advised"]
    assert "c forward time: 15.00x copy_ against 3.00x paired" in why
    assert set(fastest_against_bounds(cells.reset_index()).strategy) == {"steady"}
    assert context_configs(cells.reset_index()) == {"advised": ["c"]}


TIMED = ["time_forward", "time_forward_backward"]


def test_the_bars_over_the_bounds_show_each_paired_ratios_interval():
    cells = cell_table(_paired_run(), "cpu")
    bars = bound_ratio_bars(cells, strategy_colors(sorted(cells.strategy)), "t")
    steady = next(bar for bar in bars.data if bar.name == "steady" and bar.visible)
    assert steady.error_y.array[0] > 0 and steady.error_y.arrayminus[0] > 0  # the interval of 0.80x copy_
    assert "0.80x [" in steady.hovertext[0] and "0.20x [0.18, 0.22] native" in steady.hovertext[0]


def test_a_chained_ratio_multiplies_and_its_interval_adds_the_factors_spreads():
    rng = random.Random(5)
    first = [2.0 * math.exp(rng.gauss(0, 0.05)) for _ in range(4)]
    second = [3.0 * math.exp(rng.gauss(0, 0.10)) for _ in range(6)]
    a, b = (*process_interval(first), 3), (*process_interval(second), 5)  # df: processes - 1
    value, low, high = chained_ratio(a, b)
    assert value == pytest.approx(a[0] * b[0]) and low < value < high
    assert (value, low, high) == pytest.approx(chained_ratio(b, a))  # the order of the factors does not matter
    for factor in (a, b):  # wider, on the logs, than either factor alone
        assert math.log(high / low) > math.log(factor[2] / factor[1])
    exact = chained_ratio((1.5, 1.5, 1.5, 3), b)  # a factor without spread adds none
    assert exact == pytest.approx((1.5 * b[0], 1.5 * b[1], 1.5 * b[2]))
    one_process = chained_ratio((2.0, math.nan, math.nan, math.nan), b)
    assert one_process[0] == pytest.approx(2.0 * b[0]) and math.isnan(one_process[1]) and math.isnan(one_process[2])


def test_a_cell_on_the_command_line_is_strategy_config_and_pass_or_refused_naming_it():
    from benchmarks.vocabulary import split_cell

    assert split_cell("gather:allcnnc-conv2:forward_backward") == ("gather", "allcnnc-conv2", "forward_backward")
    expected = re.escape("'gather:allcnnc-conv2': expected STRATEGY:CONFIG:forward|forward_backward")
    with pytest.raises(ValueError, match=expected):
        split_cell("gather:allcnnc-conv2")
    with pytest.raises(ValueError, match="unknown pass 'backward'; known: forward, forward_backward"):
        split_cell("gather:allcnnc-conv2:backward")


def test_regress_registers_its_machine_under_the_regime_it_times(monkeypatch):
    """The asv mode records results under the machine it registers: the regime's name and environment, as make
    bench registers it, so a fresh-pages gate never files its results under the warm machine."""
    import benchmarks.machine
    from benchmarks.allocator import FRESH_PAGES, regime_environment
    from unfold_bench.commands import regress

    class RegisteredError(Exception):
        pass

    def register(name=None, regime="warm", environ=None):
        raise RegisteredError(regime, environ)

    monkeypatch.setattr(benchmarks.machine, "register_machine", register)
    with pytest.raises(RegisteredError) as registered:
        regress.run_gate(["HEAD", "--regime", FRESH_PAGES.name])
    assert registered.value.args == (FRESH_PAGES.name, regime_environment(FRESH_PAGES))
