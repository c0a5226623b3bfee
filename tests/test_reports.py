"""The report builder on the committed fixture results (``tests/fixtures/report_results``, made by its
``make_fixture.py``): the tidy table, the winners and recommendations, the steps, and the site's files.

The expected answers are worked out by hand from the fixture's figures (``make_fixture.py``'s ``CELLS`` and
``BOUNDS``, in ms and MiB), never from the tables the code builds.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.cells import profile_config
from benchmarks.configs import configs
from benchmarks.profiles import get_profile
from benchmarks.traffic import Sizes, copy_bytes_moved, minimum_bytes_moved
from benchmarks.trees import ROOT
from reports import analysis, figures, units
from reports.results import COLUMNS, environment_label, load_catalogue, load_results
from reports.site import PAGES, PLOTLY_JS, build_site
from reports.summary import print_summary, summary_tables

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "report_results"
CPU, GPU = "fixture-cpu", "fixture-gpu"
LAST = "b" * 40  # commits in date order: c..., a..., d..., b... (hash order differs on purpose)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return load_results(FIXTURE)


def _cells(table: pd.DataFrame, machine: str, profile: str, device: str) -> pd.DataFrame:
    run = {"machine": machine, "env": "fixture-env", "profile": profile, "commit": LAST}
    return analysis.cell_table(analysis.select_run(table, run), device)


def test_tidy_table_has_one_row_per_result_and_never_a_number_for_skipped_or_failed(table):
    assert list(table.columns) == COLUMNS
    # fixture-cpu: quick at 4 commits + full at 1; fixture-gpu: quick at 2. Per run: 3 strategies x 2 configs
    # x 2 devices x 4 metrics of unfold + 2 configs x 2 devices x 5 bounds metrics.
    per_run = 3 * 2 * 2 * 4 + 2 * 2 * 5
    assert len(table) == (4 + 1 + 2) * per_run
    assert set(table.profile) == {"quick", "full"} and set(table.machine) == {CPU, GPU}
    assert table.groupby("machine").commit.nunique().to_dict() == {CPU: 4, GPU: 2}
    failed = table[table.status == "failed"]
    assert len(failed) == 1
    assert failed.iloc[0][["machine", "profile", "commit", "strategy", "config", "metric"]].tolist() == [
        CPU,
        "quick",
        LAST,
        "tiling",
        "vol3d-conv",
        "time_forward_backward",
    ]
    assert table[table.status != "ok"].value.isna().all()
    skipped = table[table.status == "skipped"]
    assert set(skipped[skipped.machine == GPU].strategy.dropna()) == {"native"}  # 3-d only
    assert (skipped[(skipped.machine == CPU)].device == "cuda").sum() > 0
    assert table[table.status == "ok"].value.notna().all()
    ok = table[(table.status == "ok") & (table.unit == "seconds")]
    assert (ok.q_25 <= ok.value).all() and (ok.value <= ok.q_75).all()
    assert table[table.machine == GPU].device_names.str.contains("Fixture H100").all()


def test_latest_runs_pick_each_machines_and_profiles_newest_commit_by_date_not_hash(table):
    latest = analysis.latest_runs(table)
    assert sorted(zip(latest.machine, latest.profile, latest.commit)) == [
        (CPU, "full", LAST),
        (CPU, "quick", LAST),
        (GPU, "quick", LAST),
    ]


def test_a_newer_run_of_a_selection_never_decides_the_picks(table):
    """``make bench BENCH=conv2`` on a newer commit: the picks stay with the newest complete run, which names it."""
    newest = table[(table.machine == CPU) & (table.profile == "quick") & (table.commit == LAST)]
    filtered = newest[(newest.config == "allcnnc-conv2") | (newest.suite != "unfold")].copy()
    partial = filtered.assign(commit="f" * 40, date=newest.date.max() + pd.Timedelta(days=1))
    partial.loc[partial.config != "allcnnc-conv2", "status"] = "skipped"  # what asv records for unselected cells
    latest = analysis.latest_runs(pd.concat([table, partial], ignore_index=True)).set_index(["machine", "profile"])
    assert latest.loc[(CPU, "quick"), "commit"] == LAST
    assert latest.loc[(CPU, "quick"), "newer_partial"] == ["f" * 40]
    assert latest.loc[(CPU, "full"), "newer_partial"] == []


def test_a_finished_whole_run_is_complete_whatever_an_older_run_of_more_strategies_measured(table, tmp_path):
    """A run records what it was asked for once it finishes (``benchmarks.selections``): a newer whole run of a
    registry that lost a strategy, short of the older runs' cell count, still decides the picks; a recorded selection
    never does, however many cells it ran; a run without a record is judged by its count, as before."""
    from benchmarks.selections import WHOLE, record_selection

    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results)
    newest = table[(table.machine == CPU) & (table.profile == "quick") & (table.commit == LAST)]
    dropped = sorted(set(newest.strategy.dropna()) - {"native"})[0]

    def thinned(loaded: pd.DataFrame) -> pd.DataFrame:  # the newest commit's run, of a registry without one strategy
        return loaded[~((loaded.commit == LAST) & (loaded.strategy == dropped))]

    runs = analysis.latest_runs(thinned(load_results(results))).set_index(["machine", "profile"])
    assert runs.loc[(CPU, "quick"), "commit"] != LAST  # by its count alone, it reads as a selection
    selected = tmp_path / "selected"
    shutil.copytree(FIXTURE, selected)
    record_selection(selected / CPU, "bbbbbbbb-fixture-env.json", "quick", "allcnnc")  # every cell ran, but asked for
    runs = analysis.latest_runs(load_results(selected)).set_index(["machine", "profile"])
    assert runs.loc[(CPU, "quick"), "commit"] != LAST and runs.loc[(CPU, "quick"), "newer_partial"] == [LAST]
    record_selection(results / CPU, "bbbbbbbb-fixture-env.json", "quick", WHOLE)
    loaded = load_results(results)
    ours = loaded[(loaded.machine == CPU) & (loaded.commit == LAST) & (loaded.profile == "quick")]
    assert set(ours.selection) == {WHOLE}
    runs = analysis.latest_runs(thinned(loaded)).set_index(["machine", "profile"])
    assert runs.loc[(CPU, "quick"), "commit"] == LAST and runs.loc[(CPU, "quick"), "complete"]
    record_selection(results / CPU, "bbbbbbbb-fixture-env.json", "full", "'gather'")  # every cell, but asked for
    runs = analysis.latest_runs(load_results(results)).set_index(["machine", "profile"])
    assert not runs.loc[(CPU, "full"), "complete"]  # the only full run: it stands, named partial


def test_a_run_that_stopped_early_records_no_selection(tmp_path):
    """Only a run whose every planned chunk finished, with asv's 0 or 2 (a failed cell is a result), says what it
    measured: one that asv gave up on, or that a kill cut short, is left to its cell count."""
    from benchmarks.selections import WHOLE, record_if_finished, selections

    machine = tmp_path / "m"
    planned = ["example", "ratios 1/2", "ratios 2/2"]
    assert not record_if_finished(machine, "f.json", "quick", WHOLE, planned, {"example", "ratios 1/2"}, 0)
    assert not record_if_finished(machine, "f.json", "quick", WHOLE, planned, set(planned), 1)  # asv failed
    assert not machine.exists() or selections(machine) == {}
    assert record_if_finished(machine, "f.json", "quick", WHOLE, planned, set(planned), 2)  # a failed cell
    assert record_if_finished(machine, "g.json", "quick", "conv2", planned, set(planned), 0)
    assert selections(machine) == {("f.json", "quick"): WHOLE, ("g.json", "quick"): "conv2"}
    assert sorted(p.name for p in machine.iterdir()) == ["f.selections.jsonl", "g.selections.jsonl"]  # one a file


def test_one_machines_results_from_two_checkouts_are_one_series():
    """asv names an existing interpreter's environment after its path; the tidy table names it by what decides
    the figures, so a laptop's and CI's checkouts of one machine are one series."""
    params, pins = {"python_version": "3.11.7"}, {"torch": "2.13.0"}
    laptop = environment_label("existing-py_home_me_unfold-bench_.venv_bin_python", params, pins)
    ci = environment_label("existing-py_home_runner_work_.venv_bin_python", params, pins)
    assert laptop == ci == "existing-py3.11-torch2.13.0"
    assert environment_label("existing-py_x", {"python_version": "3.12.1"}, pins) != ci  # another Python: apart
    assert environment_label("virtualenv-py3.11-torch2.13.0", params, pins) == "virtualenv-py3.11-torch2.13.0"


def test_cell_table_ratios_statuses_and_winners(table):
    cells = _cells(table, CPU, "quick", "cpu").set_index(["config", "strategy"])
    assert ("vol3d-conv", "native") not in cells.index  # skipped for every metric: not a row
    tiling = cells.loc[("vol3d-conv", "tiling")]
    assert tiling["time_forward_backward:status"] == "failed" and math.isnan(tiling["time_forward_backward"])
    view = cells.loc[("vol3d-conv", "as_strided")]
    strided = cells.loc[("allcnnc-conv2", "as_strided")]
    assert strided["time_forward:x_native"] == pytest.approx(2 / (4 * 1.03))  # native is 3% slower from commit 3
    assert strided["time_forward:x_bound"] == pytest.approx(2.0)  # 2 ms / copy_ 1 ms
    assert strided["track_net_peak_forward_backward:x_bound"] == pytest.approx(170 / 96)
    # Hand-worked from make_fixture.py, CPU, quick, last commit. allcnnc-conv2: copy_ 1.0 ms, fill_ 0.6 ms, minima
    # 48 / 96 MiB; native 4.0 x 1.03 / 10 ms, 52 / 100 MiB; tiling 3.0 x 1.5 / 8 ms, 52 / 110 MiB. vol3d-conv:
    # copy_ 3.0 ms, minima 96 / 190 MiB; as_strided 8 / 20 ms, 96 / 200 MiB; native skips it.
    assert strided["time_forward_backward:x_native"] == pytest.approx(0.6)  # 6 ms / native's 10 ms
    assert strided["time_forward_backward:x_bound"] == pytest.approx(6.0)  # 6 ms / copy_ 1 ms (not fill_'s 0.6)
    tiled = cells.loc[("allcnnc-conv2", "tiling")]
    assert tiled["time_forward:x_native"] == pytest.approx(4.5 / 4.12)  # 3 ms x 1.5 / native's 4 ms x 1.03
    assert tiled["time_forward:x_bound"] == pytest.approx(4.5)  # 4.5 ms / copy_ 1 ms
    assert tiled["track_net_peak_forward:x_bound"] == pytest.approx(52 / 48)  # its output over the minimum
    assert tiled["track_net_peak_forward_backward:x_native"] == pytest.approx(1.1)  # 110 / 100 MiB
    assert view["time_forward_backward:x_bound"] == pytest.approx(20 / 3)  # 20 ms / copy_ 3 ms
    assert math.isnan(view["time_forward_backward:x_native"])  # native skips 3-d: no reference
    assert view["track_net_peak_forward"] == 96 * 2**20 and view["track_net_peak_forward:status"] == "ok"
    best = analysis.winners(cells.reset_index()).groupby(["config", "metric"]).strategy.apply(sorted)
    assert best[("allcnnc-conv2", "time_forward")] == ["as_strided"]
    assert best[("allcnnc-conv2", "track_net_peak_forward")] == ["as_strided", "native", "tiling"]  # a tie
    assert best[("allcnnc-conv2", "track_net_peak_forward_backward")] == ["native"]
    assert best[("vol3d-conv", "time_forward_backward")] == ["as_strided"]  # tiling failed: it cannot win
    assert analysis.cell_table(analysis.select_run(table, {**_run(CPU, "quick")}), "cuda").empty  # no GPU


def test_the_star_goes_to_what_a_pick_can_take_and_net_peaks_within_their_resolution_tie():
    """★ (``winners``) leaves out the set-aside strategies, as every pick does, and counts net peaks closer than
    ``NET_PEAK_RESOLUTION`` as equal, as the picks' memory tie-break does: one page lower does not take the star."""
    from benchmarks.allocator import NET_PEAK_RESOLUTION

    metric = "track_net_peak_forward"
    mib = 2**20
    peaks = {"reuse": 27 * mib, "cpp": 27 * mib + 4096, "native": 27 * mib + 2 * NET_PEAK_RESOLUTION}
    cells = pd.DataFrame(
        [{"config": "c", "strategy": name, metric: peak, f"{metric}:status": "ok"} for name, peak in peaks.items()]
    )
    assert sorted(analysis.winners(cells).strategy) == ["cpp", "reuse"]  # within a page: both
    assert list(analysis.winners(cells, {"reuse": "reuses its output"}).strategy) == ["cpp"]


def test_a_quotient_of_medians_is_marked_as_such_for_times_alone():
    """The marks "(medians)" and "*" say that a time's ratio compares medians of different processes (a run without
    paired ratios); a net peak's ratio is never paired and is not a median, so it carries neither."""
    from reports.site import _x_native_text
    from reports.summary import _x_native

    row = {"time_forward:x_native": 0.5, "track_net_peak_forward:x_native": 1.0}
    assert _x_native_text(row, "time_forward").endswith("(medians)") and _x_native(row, "time_forward").endswith("*")
    assert "medians" not in _x_native_text(row, "track_net_peak_forward")
    assert _x_native(row, "track_net_peak_forward") == "1.00"


def test_a_run_says_which_paired_intervals_hold_the_spread_between_runs():
    def rows(recorded: dict[str, float]) -> pd.DataFrame:
        suites = ("ratios", "floors", "direct_floors")
        base = {"machine": "m-freshpages", "profile": "quick", "processes": 7.0}
        return pd.DataFrame([{**base, "suite": s, "run_variance": recorded.get(s, math.nan)} for s in suites])

    both = analysis.run_level_note(rows({"ratios": 0.001, "floors": 0.0}))  # a pooled 0 is a record too
    assert "of x native, x copy_ (through native) hold the spread between runs recorded for m-freshpages" in both
    assert "those of x copy_ (where native cannot run) are across processes alone: no run level is recorded" in both
    assert (
        "the paired intervals of x native, x copy_ (through native), x copy_ (where native cannot run) are across "
        "processes alone" in (analysis.run_level_note(rows({})))
    )
    assert analysis.run_level_note(rows({}).assign(processes=math.nan)) == ""  # no paired ratios: nothing to say


def _run(machine: str, profile: str) -> dict:
    return {"machine": machine, "env": "fixture-env", "profile": profile, "commit": LAST}


def test_recommendation_per_config_follows_the_rule(table):
    training = analysis.RULES[0]
    picks = analysis.recommend_per_config(_cells(table, CPU, "quick", "cpu"), training).set_index("config")
    # conv2: lowest fwd-bwd peak 100 MiB (native); within 1.2x: native and tiling (110); as_strided (170) is
    # faster but out; tiling (8 ms) beats native (10 ms).
    assert picks.loc["allcnnc-conv2", "strategy"] == "tiling"
    assert picks.loc["allcnnc-conv2", "eligible"] == ["native", "tiling"]
    assert picks.loc["vol3d-conv", "strategy"] == "as_strided"  # tiling failed there, native skips 3-d


def test_recommendation_per_device_follows_the_rule(table):
    training, forward = analysis.RULES
    cpu = analysis.recommend(_cells(table, CPU, "quick", "cpu"), training)
    # tiling has a failed cell: out, and listed as such. as_strided: M = (170 + 200) / (100 + 200) = 1.23,
    # over 1.2x native's M of 1.0. native: T = 10 / 6 on the one config it supports.
    assert cpu.strategy == "native" and cpu.not_covered == ["vol3d-conv"]
    assert cpu.score == pytest.approx(10 / 6)
    ranking = cpu.ranking.set_index("strategy")
    assert ranking.loc["tiling", "why_not"] == "failed on vol3d-conv" and not ranking.loc["tiling", "eligible"]
    assert ranking.loc["as_strided", "memory_score"] == pytest.approx(370 / 300)
    assert not ranking.loc["as_strided", "eligible"] and ranking.loc["as_strided", "why_not"].startswith("M over")
    # forward only: as_strided has the lowest net peak on both configs, M = (52 + 96) / (52 + 96); tiling's 100 MiB
    # on vol3d-conv gives it (52 + 100) / (52 + 96).
    forward_cpu = analysis.recommend(_cells(table, CPU, "quick", "cpu"), forward)
    assert forward_cpu.strategy == "as_strided" and forward_cpu.ranking.memory_score.iloc[0] == pytest.approx(1.0)
    assert forward_cpu.ranking.set_index("strategy").loc["tiling", "memory_score"] == pytest.approx(152 / 148)
    gpu = analysis.recommend(_cells(table, GPU, "quick", "cuda"), training)
    assert gpu.strategy == "as_strided" and gpu.score == pytest.approx(1.0) and gpu.not_covered == []


def test_a_set_aside_strategy_is_scored_and_listed_but_never_recommended(table):
    training = analysis.RULES[0]
    cells = _cells(table, CPU, "quick", "cpu")
    set_aside = {"native": "reuses its output buffer"}
    advice = analysis.recommend(cells, training, set_aside)
    ranking = advice.ranking.set_index("strategy")
    assert ranking.loc["native", "why_not"] == "reuses its output buffer" and not ranking.loc["native", "eligible"]
    # without native the yardsticks are as_strided's and tiling's: as_strided (M = 1) now qualifies and wins;
    # native still gets a score, against what could be recommended: 10 ms / as_strided's 6 ms on conv2.
    assert advice.strategy == "as_strided" and ranking.loc["native", "time_score"] == pytest.approx(10 / 6)
    picks = analysis.recommend_per_config(cells, training, set_aside).set_index("config")
    assert "native" not in picks.loc["allcnnc-conv2", "eligible"]


def test_fastest_against_bounds_names_the_fastest_and_its_ratios(table):
    best = analysis.fastest_against_bounds(_cells(table, CPU, "quick", "cpu")).set_index(["config", "metric"])
    # allcnnc-conv2's forward-backward: as_strided 6 ms beats tiling's 8 and native's 10; copy_ takes 1 ms, and
    # as_strided's 170 MiB net peak is over the 96 MiB minimum.
    row = best.loc[("allcnnc-conv2", "time_forward_backward")]
    assert row.strategy == "as_strided" and row.time == pytest.approx(6e-3)
    assert row.x_copy == pytest.approx(6.0) and row.peak_x_minimum == pytest.approx(170 / 96)
    # vol3d-conv's forward: as_strided 8 ms over copy_'s 3 ms; its 96 MiB net peak is the 96 MiB minimum
    row = best.loc[("vol3d-conv", "time_forward")]
    assert (row.strategy, row.x_copy, row.peak_x_minimum) == ("as_strided", pytest.approx(8 / 3), 1.0)
    assert set(best.index.get_level_values("metric")) == {"time_forward", "time_forward_backward"}


def test_fastest_against_bounds_passes_over_set_aside_strategies(table):
    cells = _cells(table, CPU, "quick", "cpu")
    fastest = analysis.fastest_against_bounds(cells).set_index(["config", "metric"])
    winner = fastest.loc[("allcnnc-conv2", "time_forward"), "strategy"]
    without = analysis.fastest_against_bounds(cells, {winner: "reuses its output buffer"})
    without = without.set_index(["config", "metric"])
    assert winner == "as_strided" and winner not in set(without.strategy)
    # by the fixture's construction (make_fixture.py), at the last commit: native 4 ms x 1.03, tiling 3 ms x 1.5
    assert without.loc[("allcnnc-conv2", "time_forward"), "strategy"] == "native"


def test_floors_against_copy_are_the_bounds_over_copy_in_the_same_run(table):
    run = analysis.select_run(table, _run(CPU, "quick"))
    floors = analysis.floors_against_copy(run, "cpu").set_index("config")
    bounds = run[(run.suite == "bounds") & (run.device == "cpu")].set_index(["config", "metric"]).value
    for config in floors.index:
        copy = bounds[(config, "time_copy")]
        assert floors.loc[config, "time_fill:x_copy"] == pytest.approx(bounds[(config, "time_fill")] / copy)
        assert floors.loc[config, "time_fresh_output:x_copy"] == pytest.approx(
            bounds[(config, "time_fresh_output")] / copy
        )
    assert len(floors) >= 1
    assert analysis.floors_against_copy(run, "no-such-device").empty


def test_set_aside_is_the_registrys_output_reusing_strategies_as_the_bench_records_them():
    from benchmarks.catalogue import catalogue
    from impls import STRATEGIES
    from reports.results import catalogue_from_records
    from reports.set_aside import complexity, set_aside

    recorded = catalogue_from_records(catalogue(STRATEGIES, None)).strategies
    aside = set_aside(recorded)
    assert set(aside) == {name for name, s in STRATEGIES.items() if s.reuses_output} and "gather_reuse" in aside
    assert complexity(recorded) == {name: len(s.machinery) for name, s in STRATEGIES.items()}
    assert set(set_aside(load_catalogue(FIXTURE).strategies)) == set(aside)  # the fixture's catalogue is current


def test_the_pareto_front_is_drawn_beyond_the_noise():
    from benchmarks.allocator import NET_PEAK_RESOLUTION

    mib, t, m = 2**20, "time_forward", "track_net_peak_forward"
    rows = pd.DataFrame(
        [
            ("a", 1.0, 0.9, 1.1, 3 * mib, False),
            ("b", 2.0, 1.9, 2.1, 2 * mib, False),
            ("c", 3.0, 2.9, 3.1, 1 * mib, False),
            ("slower_and_bigger", 2.5, 2.4, 2.6, 2.5 * mib, False),  # b beats it in both
            ("failed", math.nan, math.nan, math.nan, 0.5 * mib, False),
            ("tied_same_memory", 1.05, 0.95, 1.15, 3 * mib + NET_PEAK_RESOLUTION // 2, False),  # a does not beat it
            ("tied_more_memory", 1.08, 1.0, 1.2, 4 * mib, False),  # a ties its time with less memory
            ("open_below", 2.6, math.nan, 5.0, 1.5 * mib, False),  # asv's interval reached 0: its time may be any
            ("just_faster", 2.4, 2.35, 2.45, 1.5 * mib, False),  # a lower time, not beyond open_below's interval
            ("context", 0.5, 0.45, 0.55, 0.1 * mib, True),  # would beat all, but its time depends on what ran before
            ("reuse", 0.6, 0.55, 0.65, 0.2 * mib, False),  # overwrites its previous result
        ],
        columns=["strategy", t, f"{t}:low", f"{t}:high", m, f"{t}:context_dependent"],
    ).assign(**{f"{t}:own_loop": 3.0, f"{t}:x_native": 0.5, "config": "c"})
    aside = {"reuse": "reuses its output"}
    points = analysis.tradeoff(rows, t, m, aside).set_index("strategy")
    assert "failed" not in points.index and not points.paired.any()
    assert set(points.index[points.on_front]) == {"a", "b", "c", "tied_same_memory", "open_below", "just_faster"}
    assert not points.ranked[["context", "reuse"]].any() and points.aside["reuse"] == "reuses its output"
    # over the fastest the picks could take (a), not the context-dependent row
    assert tuple(points.loc["a", ["relative", "low", "high"]]) == pytest.approx((1.0, 0.9, 1.1))
    assert points.relative["context"] == pytest.approx(0.5)
    without_intervals = analysis.tradeoff(rows.drop(columns=[f"{t}:low", f"{t}:high"]), t, m, aside)
    assert set(without_intervals.strategy[without_intervals.on_front]) == {"a", "b", "c", "just_faster"}


def test_the_trade_off_ranks_by_the_paired_ratios_where_the_run_has_them():
    t, m = "time_forward", "track_net_peak_forward"
    rows = pd.DataFrame(
        [("native", 0.010, 1.0, 1.0, 1.0), ("fast", 0.020, 0.5, 0.45, 0.55)],  # its median from a slower process
        columns=["strategy", t, f"{t}:x_native", f"{t}:x_native_low", f"{t}:x_native_high"],
    ).assign(**{m: 5.0 * 2**20, f"{t}:x_native_paired": True, "config": "c"})
    points = analysis.tradeoff(rows, t, m).set_index("strategy")
    assert points.paired.all() and list(points.index[points.on_front]) == ["fast"]
    assert tuple(points.loc["native", ["relative", "low", "high"]]) == pytest.approx((2.0, 2.0, 2.0))
    assert tuple(points.loc["fast", ["relative", "low", "high"]]) == pytest.approx((1.0, 0.9, 1.1))


def test_a_strategys_history_draws_its_paired_ratios_as_they_are_and_its_times_over_the_first():
    commits = {"commit": ["a" * 40, "b" * 40], "order": [0, 1], "date": pd.to_datetime(["2026-01-01", "2026-01-02"])}
    history = pd.concat(
        [
            pd.DataFrame({**commits, "metric": "track_ratio_forward", "value": [0.5, 0.6], "low": [0.4, 0.5]}).assign(
                high=[0.7, 0.8], q_25=math.nan, q_75=math.nan
            ),
            pd.DataFrame({**commits, "metric": "time_forward", "value": [0.010, 0.020], "q_25": [0.009, 0.018]}).assign(
                q_75=[0.012, 0.021], low=math.nan, high=math.nan
            ),
        ]
    ).assign(config="allcnnc-conv2", status="ok")
    ratio, time = figures.strategy_history(history, "t").data
    assert list(ratio.y) == pytest.approx([0.5, 0.6]) and list(ratio.error_y.array) == pytest.approx([0.2, 0.2])
    assert list(time.y) == pytest.approx([1.0, 2.0]) and list(time.error_y.arrayminus) == pytest.approx([0.1, 0.2])
    assert "95% interval 0.4 to 0.7 x" in ratio.hovertext[0]
    assert "IQR 9 to 12 ms" in time.hovertext[0]
    # the reference's paired ratios to itself are all skipped: no view of them, so its chart opens on its times
    skipped = history.assign(status=np.where(history.metric == "track_ratio_forward", "skipped", "ok"))
    (only,) = figures.strategy_history(skipped, "t").data
    assert only.visible and list(only.y) == pytest.approx([1.0, 2.0])


def test_steps_are_found_by_asvs_step_detection_and_only_there(table):
    found = analysis.steps(analysis.series(table))
    assert len(found) == 1
    step = found.iloc[0]
    assert (step.machine, step.profile, step.device, step.config, step.strategy, step.metric) == (
        CPU,
        "quick",
        "cpu",
        "allcnnc-conv2",
        "tiling",
        "time_forward",
    )
    assert (step.commit_before[0], step.commit_after[0]) == ("a", "d")  # the 2nd and 3rd by date
    assert step.ratio == pytest.approx(1.5)  # native's 3% step at the same commit is below the threshold


# One series of the step detection (a column per key, the same on every row); each test adds its history.
ONE_SERIES = {
    "machine": "m",
    "env": "e",
    "profile": "quick",
    "device": "cpu",
    "config": "c",
    "strategy": "s",
    "metric": "track_net_peak_forward",
    "status": "ok",
}


def test_a_step_up_is_reported_at_the_level_after_it_and_never_as_a_drop():
    # the committed fresh-pages series of cpp_huge_pages, conv6 forward-backward: asv's detection gives (1, 2) with
    # the best value after it, 0.0288, below the 0.0441 before; no step up is there
    values = [0.0264, 0.0441, 0.0458, 0.0288, 0.0468]
    series = pd.DataFrame(
        {**ONE_SERIES, "order": range(5), "commit": list("vwxyz"), "value": values, "allocator": None}
    )
    found = analysis.steps(series.assign(metric="time_forward"))
    assert (found.ratio > 1).all() and (found.value_after > found.value_before).all()
    assert list(zip(found.commit_before, found.commit_after)) == [("v", "w")]  # 0.0264 to the level 0.0441
    up = pd.DataFrame(
        {**ONE_SERIES, "order": range(4), "commit": list("wxyz"), "value": [1.0, 1, 2, 2], "allocator": None}
    )
    assert analysis.steps(up).value_after.tolist() == [2.0]


def test_a_step_native_takes_at_the_same_commit_is_marked_the_machines():
    def one(strategy: str, values: list[float]) -> pd.DataFrame:
        rows = {**ONE_SERIES, "strategy": strategy, "order": range(3), "commit": list("xyz"), "value": values}
        return pd.DataFrame({**rows, "allocator": "a"})

    history = [one("native", [1.0, 2, 2]), one("s", [1.0, 2, 2]), one("t", [1.0, 1, 2]), one("u", [1.0, 3, 3])]
    found = analysis.steps(pd.concat(history)).set_index("strategy")
    # t steps at another commit; u at the same, but 3x where native took 2x: more than the machine's
    assert found.native_too.to_dict() == {"native": False, "s": True, "t": False, "u": False}


def test_a_step_across_an_allocator_change_is_not_a_step_of_the_code():
    values = [100.0, 100, 100, 150, 150, 150]
    same = pd.DataFrame({**ONE_SERIES, "order": range(6), "commit": list("uvwxyz"), "value": values, "allocator": None})
    assert len(analysis.steps(same)) == 1  # one allocator throughout (None: not recorded): a step
    changed = same.assign(allocator=["dynamic"] * 3 + ["pinned"] * 3)
    assert analysis.steps(changed).empty  # two series of three, each flat


def test_a_step_the_noise_could_explain_is_not_a_step():
    two = pd.DataFrame({**ONE_SERIES, "allocator": "a", "order": range(2), "commit": list("yz"), "value": [1.0, 2.0]})
    assert len(analysis.steps(two)) == 1  # a net peak: what a run measures is the figure
    assert analysis.steps(two.assign(metric="time_forward")).empty  # a time from two runs: no noise estimate
    three = pd.DataFrame({**ONE_SERIES, "allocator": "a", "order": range(3), "commit": list("xyz")})
    three = three.assign(metric="time_forward", value=[1.0, 1.0, 2.0])
    assert len(analysis.steps(three)) == 1
    paired = two.assign(metric="track_ratio_forward", low=[0.9, 1.8], high=[1.1, 2.2])
    assert len(analysis.steps(paired)) == 1  # intervals apart
    assert analysis.steps(paired.assign(low=[0.5, 1.0], high=[1.5, 3.0])).empty  # they overlap


def test_a_step_up_from_zero_is_a_step_with_an_infinite_ratio():
    # a view (0 bytes) turning into a copy is the step most worth catching
    values = [0, 0, 0, 100.0, 100]
    history = pd.DataFrame(
        {**ONE_SERIES, "allocator": "a", "order": range(5), "commit": list("vwxyz"), "value": values}
    )
    step = analysis.steps(history).iloc[0]
    assert (step.commit_before, step.commit_after, step.ratio) == ("x", "y", math.inf)


def test_site_is_self_contained_and_says_skipped_and_failed(tmp_path):
    written = build_site(FIXTURE, tmp_path)
    assert sorted(p.name for p in written) == sorted(PAGES)
    assert (tmp_path / PLOTLY_JS).stat().st_size > 1_000_000
    for page in written:
        text = page.read_text()
        sources = re.findall(r'<(?:script|link|img)[^>]*(?:src|href)="([^"]+)"', text)
        assert sources == [PLOTLY_JS], (page.name, sources)  # plotly.js once, nothing from the network
        assert not re.search(r">\s*nan\b", text, re.IGNORECASE), page.name
    overview = (tmp_path / "index.html").read_text()
    assert '<td class="failed">failed</td>' in overview
    assert "every cell was skipped on this machine" in overview  # fixture-cpu's CUDA
    assert "Recommendation for training (forward and backward)</b>: <b>native</b>" in overview
    assert "This run has no paired ratios" in overview  # the fixture's: its brackets are asv's
    assert "tiling out (failed on vol3d-conv)" in overview
    # as_strided's forward-backward on allcnnc-conv2 (CPU, quick): 6 ms, over native's 10 ms and copy_'s 1 ms
    # samples 0.98, 1 and 1.02 x 6 ms (make_fixture.py): quartiles 0.99 and 1.01 x 6 ms
    assert "★ 6 ms (IQR 5.94-6.06) · 0.60x native (medians) · 6.00x copy_ (medians)" in overview
    assert "Skipped (not supported, or not run on this machine): native on vol3d-conv." in overview
    trends = (tmp_path / "trends.html").read_text()
    assert "Steps found by asv&#39;s step detection" in trends and "Regressions found" not in trends
    assert "<th>native too</th>" in trends  # the fixture's one step is tiling's alone
    assert "asv's own site" not in overview  # no asv publish output in tmp_path
    (tmp_path / "asv").mkdir()
    (tmp_path / "asv" / "index.html").write_text("asv")
    build_site(FIXTURE, tmp_path)
    assert 'href="asv/index.html"' in (tmp_path / "index.html").read_text()


def test_hover_texts_never_show_a_missing_value_as_a_number(table):
    colors = figures.strategy_colors(["native", "as_strided", "tiling"])
    history = analysis.series(table)
    cells = _cells(table, GPU, "quick", "cuda")
    built = [
        figures.bound_ratio_bars(cells, colors, "t"),
        figures.strategy_history(history[history.strategy == "as_strided"], "t"),
    ]
    built += [figures.trend_lines(history, m, colors, analysis.steps(history), "t") for m in units.METRICS]
    texts = [text for figure in built for trace in figure.data for text in (trace.hovertext or [])]
    assert texts and not [t for t in texts if "nan" in t.lower() or "None" in t]
    bars = [t for t in texts if "vol3d-conv" in t and "forward net peak memory: 96 MiB" in t]
    assert bars and all("1.00x the bound" in t and "native has no figure here" in t for t in bars)
    view = (cells.config == "vol3d-conv") & (cells.strategy == "as_strided")  # a zero is a number, not a gap
    peaks = ("track_net_peak_forward", "track_net_peak_forward:x_bound")
    zero = cells.assign(**{column: cells[column].mask(view, 0.0) for column in peaks})
    zero_texts = [t for trace in figures.bound_ratio_bars(zero, colors, "t").data for t in trace.hovertext]
    assert any("forward net peak memory: 0 MiB" in t and "0.00x the bound" in t for t in zero_texts)
    timed = [t for t in figures.bound_ratio_bars(cells, colors, "t").data[0].hovertext if "time:" in t]
    assert timed and all("(IQR " in t and "the bound (medians)" in t for t in timed)  # the fixture has no pairs
    assert not [t for t in texts if "MiB" in t and "IQR" in t]  # memory has no spread: none is shown
    time, memory = "time_forward", "track_net_peak_forward"
    points = {config: analysis.tradeoff(rows, time, memory) for config, rows in cells.groupby("config")}
    tradeoff = figures.tradeoff_scatter(cells, time, memory, colors, points, "t")
    texts = [text for trace in tradeoff.data for text in (trace.hovertext or [])]
    assert texts and not [t for t in texts if "nan" in t.lower() or "None" in t]
    assert all("the fastest (medians, asv's 99% intervals); median" in t and "(IQR" in t for t in texts)
    assert all(t.endswith(("on the Pareto front", "not on the Pareto front")) for t in texts)


def test_a_strategy_without_a_figure_says_what_became_of_its_cells(table):
    from reports.site import strategies_page

    broken = table.assign(status=table.status.where(table.strategy != "tiling", "failed"))
    text = "".join(strategies_page(broken, {}).parts)
    section = text.split('id="tiling"', 1)[1]
    assert "No figures: " in section and "of its figures failed (the overview says why" in section
    assert "No figures yet" not in section


def test_a_machines_memory_is_shown_with_its_unit():
    from reports.site import machine_memory

    assert machine_memory("25165824") == "24 GiB"  # asv records KiB
    assert machine_memory("24 GiB") == "24 GiB" and machine_memory(None) == machine_memory("") == "-"


def test_a_machines_allocator_settings_are_each_shown_with_the_commits_they_timed():
    from reports.site import _allocator_settings

    runs = pd.DataFrame(
        {
            "commit": ["a", "a", "b", "c"],
            "date": pd.to_datetime(["2026-01-01", "2026-01-01", "2026-01-02", "2026-01-03"]),
            "allocator": ["dynamic", "dynamic", "dynamic", "pinned"],
        }
    )
    assert _allocator_settings(runs) == "pinned (1 commit) | earlier: dynamic (2 commits)"
    assert _allocator_settings(runs[runs.allocator == "dynamic"]) == "dynamic (2 commits)"
    assert _allocator_settings(runs.assign(allocator=None)) == "-"


def test_summary_prints_each_environment_of_a_commit_apart(tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results, ignore=shutil.ignore_patterns("*.py"))
    second = json.loads((results / CPU / "bbbbbbbb-fixture-env.json").read_text())
    second["env_name"] = "second-env"
    (results / CPU / "bbbbbbbb-second-env.json").write_text(json.dumps(second))
    print_summary(results, CPU, "quick", None)
    out = capsys.readouterr().out
    assert "environment fixture-env" in out and "environment second-env" in out
    assert out.count("Physics checks") == 2


def test_bytes_moved_are_input_read_and_output_written_worked_by_hand():
    conv2 = next(c for c in configs(batch_size=1) if c.name == "allcnnc-conv2")  # 96 x 32 x 32, 3x3, pad 1
    input_bytes, output_bytes = 96 * 32 * 32 * 4, 96 * 9 * 32 * 32 * 4  # float32
    sizes = Sizes.of(conv2)
    assert minimum_bytes_moved(sizes, backward=False) == input_bytes + output_bytes
    assert minimum_bytes_moved(sizes, backward=True) == 2 * (input_bytes + output_bytes)
    assert copy_bytes_moved(sizes) == 2 * output_bytes


def test_bandwidth_is_bytes_over_time_beside_copy_in_the_same_run():
    """Each GB/s over its own median with its IQR; copy_'s over copy_'s own median in the run, not a time derived
    from the fastest's paired ratio; the share of copy_ from that paired ratio, with its interval."""
    best = pd.DataFrame(
        {
            "config": ["allcnnc-conv2", "allcnnc-conv2", "gone-config"],
            "metric": ["time_forward", "time_forward_backward", "time_forward"],
            "strategy": ["a", "b", "c"],
            "time": [0.010, 0.040, 0.010],
            "time_q_25": [0.008, 0.036, 0.009],
            "time_q_75": [0.0125, 0.050, 0.011],
            "x_copy": [2.0, 8.0, 1.0],
            "x_copy_low": [1.6, 6.4, 0.9],
            "x_copy_high": [2.5, 10.0, 1.1],
            "copy": [0.004, 0.004, 0.010],  # not time / x_copy: medians of different processes
            "copy_q_25": [0.0032, 0.0032, 0.009],
            "copy_q_75": [0.005, 0.005, 0.011],
            "peak_x_minimum": [1.0, 1.0, 1.0],
        }
    )
    rows = analysis.with_bandwidth(best, load_catalogue(FIXTURE).profile_sizes("quick"))
    batch = get_profile("quick").batch_cap  # conv2 runs at 256, capped
    output_bytes, input_bytes = batch * 96 * 9 * 1024 * 4, batch * 96 * 1024 * 4
    moved, copied = (input_bytes + output_bytes) / 1e9, 2 * output_bytes / 1e9
    forward, both = rows.iloc[0], rows.iloc[1]
    ends = ("gb_per_s", "gb_per_s_low", "gb_per_s_high")
    assert tuple(forward[list(ends)]) == pytest.approx((moved / 0.010, moved / 0.0125, moved / 0.008))
    assert both.gb_per_s == pytest.approx(2 * moved / 0.040)
    ends = ("copy_gb_per_s", "copy_gb_per_s_low", "copy_gb_per_s_high")
    assert tuple(forward[list(ends)]) == pytest.approx((copied / 0.004, copied / 0.005, copied / 0.0032))
    ends = ("of_copy", "of_copy_low", "of_copy_high")
    assert tuple(forward[list(ends)]) == pytest.approx(
        (moved / copied / 2.0, moved / copied / 2.5, moved / copied / 1.6)
    )
    assert forward.of_copy != pytest.approx(forward.gb_per_s / forward.copy_gb_per_s)  # paired, not medians
    assert rows[rows.config == "gone-config"].filter(like="gb_per_s").isna().all(axis=None)


def test_a_one_element_kernel_moves_its_input_and_output_and_a_view_has_no_bandwidth():
    conv8 = profile_config(get_profile("quick"), "allcnnc-conv8")  # 1x1, stride 1, no pad
    once = (conv8.geometry.input_numel + conv8.geometry.output_numel) * 4  # the contract is new memory
    sizes = Sizes.of(conv8)
    assert minimum_bytes_moved(sizes, backward=False) == once and minimum_bytes_moved(sizes, backward=True) == 2 * once
    best = pd.DataFrame(
        {
            "config": ["allcnnc-conv8"] * 2,
            "metric": ["time_forward"] * 2,
            "strategy": ["as_strided", "compiled"],
            "time": [1e-5, 1e-3],
            "x_copy": [0.1, 10.0],
            "copy": [1e-4, 1e-4],
            "peak": [4096.0, once / 2],
            "peak_x_minimum": [0.0, 1.0],
        }
    )
    sizes = load_catalogue(FIXTURE).profile_sizes("quick")
    view, copy = analysis.with_bandwidth(best, sizes).itertuples()  # a 4 KiB view: results up to f26b0bd
    assert math.isnan(view.gb_per_s) and math.isnan(view.of_copy) and view.copy_gb_per_s > 0
    assert copy.gb_per_s == pytest.approx(once / 1e-3 / 1e9)


def _copy_as_fresh_pages(results: Path, slower: str) -> str:
    """The fixture CPU machine's results again, as its fresh-pages twin, with ``slower``'s times x10."""
    twin = f"{CPU}-freshpages"
    shutil.copytree(results / CPU, results / twin)
    for path in (results / twin).glob("*.json"):
        data = json.loads(path.read_text())
        machine = data["params"] if "params" in data else data  # a result file, or machine.json
        machine.update(machine=twin, timing_regime="fresh-pages")
        for name, entry in data.get("results", {}).items():
            values, params = entry[0], entry[1]
            if ".time_" in name and params:
                combos = list(itertools.product(*params))
                entry[0] = [v * 10 if v and f"'{slower}'" in combo else v for v, combo in zip(values, combos)]
        path.write_text(json.dumps(data))
    return twin


def test_the_regime_is_named_and_a_recommendation_says_when_the_other_regime_picks_another(tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results, ignore=shutil.ignore_patterns("*.py"))
    # as_strided x10: the forward-only rule (as_strided in the fixture) picks native in the fresh-pages twin
    twin = _copy_as_fresh_pages(results, slower="as_strided")
    table = load_results(results)
    assert set(table[table.machine == twin].timing_regime) == {"fresh-pages"}
    assert set(table[table.machine == CPU].timing_regime) == {"warm"}  # recorded before regimes: not pinned
    assert analysis.other_regime_machines(twin) == [CPU] and analysis.other_regime_machines(CPU) == [twin]
    build_site(results, tmp_path / "site")
    overview = html.unescape((tmp_path / "site" / "index.html").read_text())
    assert f"{twin} · quick profile · timed: fresh pages" in overview
    warm, fresh = "warm allocator (a user's process)", "fresh pages (every output first-touched)"
    assert f"Timed in the {warm} regime. The {fresh} regime picks native (the regimes disagree" in overview
    assert f"Timed in the {fresh} regime. The {warm} regime picks as_strided (the regimes disagree" in overview
    assert f"Timed in the {warm} regime. The {fresh} regime picks the same." in overview  # training: native in both

    print_summary(results, CPU, "quick", None, full_dir=tmp_path / "summaries")
    out = capsys.readouterr().out
    assert "Which to ship for forward only (e.g. KFAC statistics): as_strided, on average (geometric mean) " in out
    assert f"Timed in the {warm} regime. The {fresh} regime picks native (the regimes disagree" in out


def test_a_regime_note_names_the_other_regimes_run_when_it_timed_another_commit():
    fresh = "fresh pages (every output first-touched)"
    same = analysis.regime_note(CPU, "cpp", [(fresh, "gather", "a" * 40)], "a" * 40)
    assert f"The {fresh} regime picks gather (the regimes disagree" in same and "commit" not in same
    other = analysis.regime_note(CPU, "cpp", [(fresh, "cpp", "b" * 40)], "a" * 40)
    ran = f"The {fresh} regime's newest run, of commit {'b' * 8} (not this run's {'a' * 8}: the code may differ"
    assert f"{ran} as well as the regime), picks the same." in other
    differs = analysis.regime_note(CPU, "cpp", [(fresh, "gather", "b" * 40)], "a" * 40)
    assert f"{ran} as well as the regime), picks gather." in differs and "regimes disagree" not in differs


def test_the_summary_fits_a_screen_and_writes_the_full_tables_to_a_file(tmp_path, capsys):
    print_summary(FIXTURE, CPU, "quick", None, full_dir=tmp_path)
    out = capsys.readouterr().out
    written = list(tmp_path.glob(f"{CPU}-quick-*.txt"))
    assert len(written) == 1 and "Full summary" in written[0].read_text() and "xnat" in written[0].read_text()
    assert "Timing regime: warm allocator" in out and "xnat" not in out
    assert "Which to ship for training (forward and backward): native" in out
    assert len(out.splitlines()) < 40
    vol3d = next(line for line in out.splitlines() if line.strip().startswith("vol3d-conv"))
    assert "as_strided 6.67* x copy_" in vol3d  # native cannot run it: the unpaired ratio to copy_, marked


def test_which_to_ship_shows_each_machines_capability_matrix_and_explains_every_other_cell(tmp_path):
    empty, missing = "empty batch (N=0)", "unverified: no cuda device on this machine"
    cpu = {
        "gather": {"vmap": "works", empty: "works"},
        "onehot": {"vmap": "works", empty: "declared defect: unfoldNd <reshape>"},
    }
    cuda = {"gather": {"vmap": missing, empty: missing}}
    record = {
        "machine": "m1",
        "commit": "a" * 40,
        "torch": "2.13.0",
        "date": "2026-11-25",
        "capabilities": ["vmap", empty],
        "cells": {"cpu": cpu, "cuda": cuda},
        "checked_at": {"cpu": {"gather": "c" * 40, "onehot": "a" * 40}},  # gather's row kept from an earlier check
    }
    (tmp_path / "caps").mkdir()
    (tmp_path / "caps" / "m1.json").write_text(json.dumps(record))
    build_site(FIXTURE, tmp_path / "site", capabilities_dir=tmp_path / "caps")
    page = (tmp_path / "site" / "index.html").read_text()
    assert '<td class="best">works</td>' in page and '<td class="failed">defect [2]</td>' in page
    assert (
        '<td class="">gather [1]</td>' in page
        and "<li>gather: checked at commit cccccccc, the rows without a note at" in page
    )
    assert "<li>onehot, empty batch (N=0): declared defect: unfoldNd &lt;reshape&gt;</li>" in page
    assert "cuda on m1" in page and "unverified: no cuda device on this machine" in page and "aaaaaaaa" in page
    build_site(FIXTURE, tmp_path / "empty", capabilities_dir=tmp_path / "none")
    assert "No capability matrix yet" in (tmp_path / "empty" / "index.html").read_text()


def test_the_recommendation_says_what_to_ship_when_a_capability_is_needed(tmp_path):
    """The fixture's training pick is native; a matrix in which native lacks vmap moves the vmap pick elsewhere."""
    strategies = ["native", "as_strided", "tiling"]
    cells = {s: {"vmap": "works", "gradient": "works"} for s in strategies}
    cells["native"]["vmap"] = "declared defect: made up"
    record = {
        "machine": "fixture-cpu",
        "commit": "b" * 40,
        "torch": "2.13.0",
        "date": "2026-11-25",
        "capabilities": ["gradient", "vmap"],
        "cells": {"cpu": cells},
    }
    (tmp_path / "caps").mkdir()
    (tmp_path / "caps" / "fixture-cpu.json").write_text(json.dumps(record))
    build_site(FIXTURE, tmp_path / "site", capabilities_dir=tmp_path / "caps")
    overview = (tmp_path / "site" / "index.html").read_text()
    assert "Recommendation for training (forward and backward)</b>: <b>native</b>" in overview
    needs = re.findall(r"If your code needs .*?</div>", overview)
    assert needs and all("vmap: <b>" in line and "vmap: <b>native" not in line for line in needs)
    assert all("gradient" not in line for line in needs)  # every strategy has it: no line for it


def test_the_summary_table_shows_the_hand_worked_ratios(table):
    run = analysis.select_run(table, _run(CPU, "quick"))
    summary = summary_tables(run)["cpu"].set_index([("", "config"), ("", "strategy")])
    strided = summary.loc[("allcnnc-conv2", "as_strided")]
    # forward-backward: 6 ms; / native's 10 ms = 0.60; / copy_'s 1 ms = 6.00; net peak 170 MiB / minimum 96 MiB
    assert (strided[("fwd+bwd ms", "value")], strided[("fwd+bwd ms", "xnat")]) == (
        "6 (IQR 5.94-6.06)",  # samples 0.98, 1 and 1.02 x 6 ms: quartiles 0.99 and 1.01 x 6 ms
        "0.60*",
    )  # * a quotient of medians: the fixture has no paired ratios
    assert strided[("fwd+bwd ms", "xcopy")] == "6.00*" and strided[("fwd+bwd MiB", "xmin")] == "1.77"
    # forward: 2 ms / native's 4 ms x 1.03 = 0.485; net peak 52 MiB / minimum 48 MiB = 1.083
    assert (strided[("forward ms", "xnat")], strided[("forward MiB", "xmin")]) == ("0.49*", "1.08")
    assert summary.loc[("vol3d-conv", "tiling"), ("fwd+bwd ms", "value")] == "failed"
    full = analysis.select_run(table, _run(CPU, "full"))  # the full profile: 32x the quick batch
    row = summary_tables(full)["cpu"].set_index([("", "config"), ("", "strategy")]).loc[("vol3d-conv", "tiling")]
    assert row[("fwd+bwd MiB", "value")] == "6,720"  # 210 MiB x 32: a whole number from 1000 up, as on the site


def test_skipped_cells_are_one_list_for_the_site_and_the_summary(table, capsys):
    run = analysis.select_run(table, _run(CPU, "quick"))
    skipped = analysis.skipped_cells(run)
    # on CPU native skips the 3-d config; on CUDA (no GPU) all 3 strategies skip both configs
    assert len(skipped) == 1 + 3 * 2
    assert skipped[skipped.device == "cpu"][["strategy", "config"]].values.tolist() == [["native", "vol3d-conv"]]
    print_summary(FIXTURE, CPU, "quick", None)
    assert "Skipped cells (asv: n/a): 7" in capsys.readouterr().out


def test_a_failed_cell_says_why_where_the_bench_knows(capsys):
    def why(strategy: str, config: str, device: str, metric: str) -> str | None:
        return f"wrong output of {strategy} in {metric}" if (strategy, config) == ("tiling", "vol3d-conv") else None

    print_summary(FIXTURE, CPU, "quick", None, failure_reason=why)
    out = capsys.readouterr().out
    assert "vol3d-conv" in out and ": wrong output of tiling in time_forward_backward" in out


def test_one_vocabulary_writes_every_value_with_its_unit():
    assert units.format_value(0.0123, "seconds") == "12.3 ms" and units.format_value(3 * units.MIB, "bytes") == "3 MiB"
    assert units.format_value(1000, "instructions") == "1,000 instr"  # counts: whole numbers
    assert units.format_value(12.3456, "seconds") == "12,346 ms"  # from 10**4 up a whole number, never 1.235e+04
    assert units.format_value(1.234567, "seconds", digits=3) == "1,235 ms"
    assert units.format_value(math.nan, "seconds") == "-" and units.format_value(None, "bytes", missing="n/a") == "n/a"
    forward_backward = units.METRICS["time_forward_backward"]
    assert forward_backward.column == "fwd+bwd ms" and forward_backward.bound_info.ratio_label == "xcopy"
    net_peak = units.METRICS["track_net_peak_forward"]
    assert (net_peak.label, net_peak.unit.shown, net_peak.unit.scale, net_peak.bound) == (
        "forward net peak memory",
        "MiB",
        2.0**-20,
        "track_min_peak_forward",
    )


NO_TORCH = "import sys\nsys.modules['torch'] = None  # from here on, any import of torch (or torch.*) fails\n"


def test_the_site_and_the_summary_are_built_where_torch_cannot_be_imported(tmp_path):
    """The reports read results and the bench's catalogue only: with torch unimportable, ``unfold-bench report``
    builds every page (the findings' torch claims from the catalogue) and the summary prints."""
    import subprocess
    import sys

    report = ["report", "--results", str(FIXTURE), "--out", str(tmp_path), "--no-asv-publish"]
    code = NO_TORCH + f"from unfold_bench.cli import main\nraise SystemExit(main({report!r}))\n"
    ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert {p.name for p in tmp_path.glob("*.html")} == set(PAGES)
    found = html.unescape((tmp_path / "findings.html").read_text())
    assert "Tensor.unfold copies its input" in found and "does not hold: it is a view" in found
    assert "gather_reuse" in found  # the set-aside strategies, from the catalogue
    code = (
        NO_TORCH
        + f"from reports.summary import print_summary\nprint_summary({str(FIXTURE)!r}, 'fixture-cpu', 'quick', None)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert ran.returncode == 0 and "Fastest per config against the bounds" in ran.stdout, ran.stdout + ran.stderr


def test_a_run_of_a_selection_makes_no_pick_and_says_why(tmp_path, capsys):
    print_summary(FIXTURE, CPU, "quick", None, full_dir=tmp_path, selection="'native'")
    out = capsys.readouterr().out
    assert "Which to ship for" not in out
    assert "Which to ship: not judged from a selection (--bench \"'native'\", timed: " in out
    print_summary(FIXTURE, CPU, "quick", None, full_dir=tmp_path)
    assert "Which to ship for training" in capsys.readouterr().out


def test_every_report_writes_a_ratio_and_its_interval_one_way():
    assert units.format_ratio(1.23456) == "1.23x"
    assert units.format_ratio(1.23456, 3, suffix="") == "1.235"
    assert units.format_ratio(0.004) == "0.0040x"  # a small ratio to two significant digits, never 0.00x
    assert units.format_ratio(0.0123) == "0.012x"  # nor 0.01x
    assert units.format_interval(0.00197, 0.0031) == "[0.0020, 0.0031]"
    assert units.format_interval(0, 1) == "[0.00, 1.00]"
    # a ratio and its interval's ends to one precision, so that the ends of two intervals can be compared
    assert units.format_ratio_interval(0.0085, 0.0082, 0.0122) == "0.0085x [0.0082, 0.0122]"
    assert units.format_ratio_interval(0.016, 0.0150, 0.0173) == "0.016x [0.015, 0.017]"
    assert units.format_ratio_interval(2.75, 2.23, 3.39) == "2.75x [2.23, 3.39]"
    assert units.format_ratio_interval(1.0, 3.1e-6, 3.2e5) == "1.000000x [0.000003, 320000.000000]"  # bounded
    assert units.format_ratio(math.nan) == "-" and units.format_ratio(None, missing="") == ""
    assert units.format_ratio_interval(1.2, 1.1, 1.3, suffix="x native") == "1.20x native [1.10, 1.30]"
    assert units.format_ratio_interval(1.2, 1.2, 1.2) == "1.20x"  # one process: no interval to show
    assert units.format_ratio_interval(1.2, math.nan, 1.3) == "1.20x"
    assert units.format_ratio(pd.NA) == "-" and units.format_ratio(np.float32("nan")) == "-"  # any missing value


def test_the_write_floors_the_reports_name_are_the_bounds_suites_benchmarks():
    from benchmarks import bounds
    from benchmarks.vocabulary import COPY_FLOOR, FILL_FLOOR, FRESH_OUTPUT_FLOOR, HUGE_PAGE_FLOOR

    for floor in (COPY_FLOOR, FILL_FLOOR, FRESH_OUTPUT_FLOOR, HUGE_PAGE_FLOOR):
        assert callable(getattr(bounds.Quick, floor, None)), floor


def test_a_paired_cell_that_lost_a_replicate_is_named_in_the_summary_and_on_the_site(tmp_path, capsys):
    from asv.results import Results
    from asv.runner import BenchmarkResult

    from benchmarks.kept_samples import lost_path

    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results, ignore=shutil.ignore_patterns("*.py"))
    name, params = "ratios.Quick.track_ratio_forward", [["'as_strided'", "'tiling'"], ["'allcnnc-conv2'"], ["'cpu'"]]
    listed = json.loads((results / "benchmarks.json").read_text())
    listed[name] = {"name": name, "param_names": ["strategy", "config", "device"], "params": params, "unit": "ratio"}
    (results / "benchmarks.json").write_text(json.dumps(listed))
    stored = Results.load(str(results / CPU / "bbbbbbbb-fixture-env.json"))
    # as_strided: two processes, as a run of two replicates takes; tiling: two of three, its third replicate failed
    samples = [[0.5, 0.6], [2.0, 2.2]]
    result = BenchmarkResult(result=[0.55, 2.1], samples=samples, number=[1, 1], errcode=0, stderr="", profile=None)
    stored.add_result({"name": name, "version": "v", "params": params}, result, record_samples=True)
    stored.save(str(results))
    record = {"file": "bbbbbbbb-fixture-env.json", "benchmark": name, "params": ["'tiling'", *params[1], *params[2]]}
    lost_path(results / CPU, record["file"]).write_text(json.dumps({**record, "replicate": 3, "of": 3}) + "\n")

    print_summary(results, CPU, "quick", None)
    out = capsys.readouterr().out
    assert "Paired cells that failed in a replicate (1; asv's log says why), the others' kept:" in out
    line = "ratios.track_ratio_forward tiling allcnnc-conv2 cpu: 2 of 3 processes (replicate 3 failed)"
    assert f"  - {line}\n" in out and "as_strided allcnnc" not in out  # fewer processes is not a failure
    assert "  - time_forward_backward tiling vol3d-conv cpu\n" in out  # the fixture's failed cell, listed as before
    build_site(results, tmp_path / "site")
    overview = html.unescape((tmp_path / "site" / "index.html").read_text())
    assert f"kept the other replicates' processes, so with a wider interval (the run's asv log says why): {line}." in (
        overview
    )
    build_site(FIXTURE, tmp_path / "unpaired")
    unpaired = (tmp_path / "unpaired" / "index.html").read_text()
    # the forward pick of this run is now ranked by paired ratios, and no longer says its brackets are asv's
    assert overview.count("This run has no paired ratios") == unpaired.count("This run has no paired ratios") - 1


def test_report_refuses_a_results_folder_without_results_before_touching_the_site(tmp_path, capsys):
    from unfold_bench.cli import main

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("the published site")
    missing = tmp_path / "typo"
    assert main(["report", "--results", str(missing), "--out", str(tmp_path / "site"), "--no-asv-publish"]) == 2
    assert f"--results {missing}: no asv results there" in capsys.readouterr().err
    assert (tmp_path / "site" / "index.html").read_text() == "the published site"


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("--out", "argument --out: '{file}' is a file, not a folder"),
        ("--config", "argument --config: '{missing}': no such file"),
        ("--config", "argument --config: '{folder}' is a folder, not a file"),
        ("--config", "argument --config: '{file}' is not asv's configuration: "),
    ],
)
def test_report_refuses_an_unusable_out_or_config_naming_it_before_any_work(
    option, named, tmp_path, monkeypatch, capsys
):
    from unfold_bench.cli import main
    from unfold_bench.commands import report

    def work(*args, **kwargs):
        raise AssertionError("the report began before its options were checked")

    monkeypatch.setattr(report, "build_site", work)
    monkeypatch.setattr(report.subprocess, "run", work)  # asv publish
    paths = {"file": tmp_path / "site.txt", "missing": tmp_path / "no-such.json", "folder": tmp_path}
    paths["file"].write_text("not a folder, nor asv's configuration")
    value = str(paths[re.search(r"\{(\w+)\}", named).group(1)])
    arguments = ["report", "--results", str(FIXTURE), "--out", str(tmp_path / "site"), option, value]
    assert main(arguments) == 2
    assert named.format(**paths) in capsys.readouterr().err


def _summary_and_picks(text: str) -> list[str]:
    """A printed summary's lines from its heading to its picks, but for those that name another regime's newest
    run (a later run of another commit changes them) and the run's own reasons for its skipped cells."""
    lines = text[text.index("\nSummary: ") + 1 :].splitlines()
    lines = lines[: next((i for i, line in enumerate(lines) if line.startswith("Skipped cells")), len(lines))]
    return [line for line in lines if not line.startswith("  Timed in the ")]


def test_the_committed_full_run_summary_is_what_the_reports_print_from_its_results(tmp_path, capsys):
    """docs/bench-full-amd.txt shows a whole run's output, its summary re-rendered from the committed results: a
    change to the reports' rules that moves a figure or a pick there fails here until it is rendered again."""
    committed = (ROOT / "docs" / "bench-full-amd.txt").read_text()
    machine, commit = re.search(r"machine (\S+), profile full, commit (\w+),", committed).groups()
    table = load_results(ROOT / "results")
    found = {c for c in table[(table.machine == machine) & (table.profile == "full")].commit if c.startswith(commit)}
    assert len(found) == 1, f"docs/bench-full-amd.txt shows a run of {commit} on {machine}, whose results are gone"
    (full,) = found
    print_summary(ROOT / "results", machine, "full", full, None, tmp_path)
    again = _summary_and_picks(capsys.readouterr().out)
    assert again == _summary_and_picks(committed), (
        "docs/bench-full-amd.txt's summary is no longer what the reports print from its results (a change to the "
        "reports' rules, or a run level recorded since): print it with `unfold-bench summary --machine "
        f"{machine} --profile full --commit {commit}` and put it in the file, from 'Summary:' to the skipped cells"
    )


def test_the_results_of_a_folder_that_holds_none_are_an_empty_table_with_the_columns(tmp_path):
    for folder in (tmp_path / "absent", tmp_path):  # a run whose every asv call failed leaves no folder at all
        table = load_results(folder)
        assert table.empty and list(table.columns) == list(COLUMNS)


def test_a_run_that_did_not_measure_a_strategy_registered_now_says_its_picks_do_not_weigh_it():
    run = pd.DataFrame(
        {"strategy": ["native", "gather", None, "onehot"], "device": ["cpu"] * 4, "status": ["ok"] * 3 + ["skipped"]}
    )
    registered = {name: {"devices": ["cpu"]} for name in ("native", "gather", "cpp", "onehot")}
    registered["triton"] = {"devices": ["cuda"]}
    note = analysis.unmeasured_note(run, "cpu", registered)
    assert note.startswith("Not measured by this run: cpp, onehot (registered on cpu now")  # onehot: skipped only
    assert analysis.unmeasured_note(run, "cpu", {"native": {"devices": ["cpu"]}}) == ""
    failed = run.assign(status=["ok", "failed", "ok", "skipped"])  # gather failed every cell: measured, and out
    assert analysis.unmeasured_note(failed, "cpu", registered).startswith("Not measured by this run: cpp, onehot (")


def test_the_reference_s_score_without_width_says_why_and_no_other_does():
    from reports.site import _exact

    row = pd.Series({"strategy": analysis.REFERENCE_STRATEGY, "time_score": 3.0, "time_low": 3.0, "time_high": 3.0})
    assert _exact(row)
    assert not _exact(pd.Series({**row, "strategy": "gather"}))
    assert not _exact(pd.Series({**row, "time_low": 2.5, "time_high": 3.5}))


def test_the_summary_command_prints_a_stored_runs_summary_again_and_writes_its_full_tables(tmp_path, capsys):
    from unfold_bench.commands import summary

    arguments = ["--machine", "vm-amd-epyc-2cpu-nogpu", "--profile", "full", "--commit", "a6d50396"]
    assert summary.main([*arguments, "--summaries", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Summary: machine vm-amd-epyc-2cpu-nogpu, profile full, commit a6d50396" in out
    assert "Which to ship for training (forward and backward): " in out
    (full,) = tmp_path.glob("vm-amd-epyc-2cpu-nogpu-full-a6d50396-*.txt")
    assert full.read_text().startswith("Full summary: machine vm-amd-epyc-2cpu-nogpu, profile full, commit a6d50396")
    assert summary.main([*arguments[:2], "--profile", "full", "--commit", "1940150d"]) == 2  # a quick run's commit
    assert "no full results for machine vm-amd-epyc-2cpu-nogpu at commit 1940150d" in capsys.readouterr().out


def test_the_summarys_lowest_peak_names_every_strategy_within_a_net_peaks_resolution_and_the_tie_breaks_first():
    """Net peaks within NET_PEAK_RESOLUTION of the lowest say nothing apart: the summary's lowest-peak column names
    them all as tied, and first the one the picks' tie-break takes (the simplest, then the fastest), not whichever
    has the fewest bytes."""
    from benchmarks.allocator import NET_PEAK_RESOLUTION
    from reports.set_aside import complexity, set_aside
    from reports.summary import PEAK_FORWARD_BACKWARD, compact_table

    results = ROOT / "results"
    every_run, catalogue = load_results(results), load_catalogue(results)
    run = every_run[
        (every_run.machine == "vm-amd-epyc-2cpu-nogpu")
        & (every_run.profile == "quick")
        & (every_run.commit.str.startswith("1940150d"))
    ]
    aside, simplicity = set_aside(catalogue.strategies), complexity(catalogue.strategies)
    shown = compact_table(run, "cpu", aside, simplicity).set_index("config")["lowest fwd+bwd peak (x min)"]
    cells = analysis.cell_table(run, "cpu")
    several = 0
    for config, rows in cells.groupby("config"):
        rows = rows[(rows[f"{PEAK_FORWARD_BACKWARD}:status"] == "ok") & ~rows.strategy.isin(list(aside))]
        least = rows[rows[PEAK_FORWARD_BACKWARD] <= rows[PEAK_FORWARD_BACKWARD].min() + NET_PEAK_RESOLUTION]
        named, _, rest = shown[config].partition("; tie: ")
        first = named.split()[0]
        assert {first, *filter(None, rest.split(", "))} == set(least.strategy), config
        assert simplicity.get(first, 0) == min(simplicity.get(s, 0) for s in least.strategy), config
        several += len(least) > 1
    assert several  # the committed run has configs where several strategies share the lowest peak


def test_the_summary_command_names_skip_reasons_for_this_hosts_runs_in_either_timing_regime(
    tmp_path, capsys, monkeypatch
):
    """A run of this host in the fresh-pages regime is recorded under a machine name of its own; its skipped cells
    are this host's, so their reasons are named as for its warm runs."""
    from benchmarks import machine
    from benchmarks.allocator import get_regime
    from unfold_bench.commands import summary

    host = "vm-amd-epyc-2cpu-nogpu"  # this host, for the test: a machine of the committed results
    monkeypatch.setattr(machine, "machine_name", lambda regime="warm": host + get_regime(regime).machine_suffix)
    assert summary.main(["--machine", f"{host}-freshpages", "--summaries", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Skipped cells" in out and "reason not recorded" not in out
