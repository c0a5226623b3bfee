"""A cell whose forward allocated less than its output is no figure of the contract (``reports.new_memory``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmarks.allocator import NET_PEAK_RESOLUTION
from benchmarks.traffic import Sizes
from reports import analysis
from reports.new_memory import CELL_KEYS, FORWARD_PEAK, MINIMUM, not_new_memory
from reports.results import FIGURE_COLUMNS, load_results
from reports.site import _failed_note, _not_new_memory_note
from reports.summary import print_summary

ROOT = Path(__file__).resolve().parents[1]
SIZES = {("full", "c"): Sizes(input_numel=1024, output_numel=1 << 20, itemsize=4)}  # a 4 MiB output
OUTPUT = 4 << 20
RUN = {"machine": "m", "env": "e", "commit": "a" * 40, "profile": "full", "config": "c", "device": "cpu"}


def _rows(strategy: str, forward_peak: float, commit: str = "a" * 40) -> list[dict]:
    cell = {**RUN, "strategy": strategy, "commit": commit, "status": "ok"}
    return [
        {**cell, "suite": "unfold", "metric": FORWARD_PEAK, "value": forward_peak},
        {**cell, "suite": "unfold", "metric": "time_forward", "value": 1e-3},
        {**cell, "suite": "ratios", "metric": "track_ratio_forward", "value": 0.5},
    ]


def test_a_forward_below_its_outputs_bytes_fails_every_figure_of_its_cell_in_that_run_alone():
    table = pd.DataFrame(
        _rows("view", 0.0)
        + _rows("view", OUTPUT, commit="b" * 40)  # the same strategy, fixed, in another run
        + _rows("fresh", OUTPUT - NET_PEAK_RESOLUTION)  # within a net peak's resolution of its output
        + _rows("small", OUTPUT - NET_PEAK_RESOLUTION - 4096)
    )
    problems = not_new_memory(table, SIZES)
    flagged = table[problems.notna()]
    assert sorted(set(flagged.strategy)) == ["small", "view"] and set(flagged.commit) == {"a" * 40}
    assert len(flagged) == 6  # every suite's row of the two cells: their times and paired ratios too
    assert "allocated 0.00 MiB, less than its output's 4.00 MiB: not new memory" in problems[flagged.index[0]]
    assert not_new_memory(table.assign(config="unknown"), SIZES).isna().all()  # no sizes recorded: no judgement
    assert CELL_KEYS[-3:] == ["strategy", "config", "device"]


def test_the_runs_own_analytic_minimum_decides_where_it_recorded_one_above_zero():
    """The catalogue holds the newest sizes of every config; a run's bounds hold what that run measured."""
    bound = {**RUN, "strategy": None, "suite": "bounds", "metric": MINIMUM, "status": "ok"}
    cell = _rows("copy", OUTPUT + (1 << 20))  # above the catalogue's 4 MiB, below this run's 8 MiB
    own = pd.DataFrame([*cell, {**bound, "value": 2 * OUTPUT}])
    assert not_new_memory(own, SIZES).notna().sum() == 3
    view = pd.DataFrame([*_rows("view", 0.0), {**bound, "value": 0.0}])  # a run whose minimum allowed a view
    assert not_new_memory(view, SIZES).notna().sum() == 3  # the catalogue's output decides there


def test_the_committed_runs_in_which_as_strided_returned_a_view_count_none_of_its_figures_there():
    """Before b15e30d as_strided returned its input itself on allcnnc-conv8 (a 1x1, stride-1 kernel): the Intel VM's
    full run timed no copy and charged no memory there, and its pick for the forward was as_strided."""
    table = load_results(ROOT / "results")
    machine = "vm-intel-xeon-2cpu-nogpu"
    intel = table[(table.machine == machine) & (table.profile == "full")]
    failed = intel[intel.problem.notna()]
    assert set(zip(failed.strategy, failed.config)) == {("as_strided", "allcnnc-conv8")}
    assert (failed.status == "failed").all() and failed[FIGURE_COLUMNS].isna().all(axis=None)
    assert failed.samples.isna().all()  # failed as asv records a failure: no figure, no spread, no samples
    assert table[table.date > pd.Timestamp("2026-11-24", tz="UTC")].problem.isna().all()  # none since the gate checks
    (run,) = [r for _, r in analysis.latest_runs(table).iterrows() if r.machine == machine]
    run_table = analysis.select_run(table, run)
    gaps = _not_new_memory_note(table)  # the trends page's: which series have a gap there, and why
    assert "as_strided on allcnnc-conv8 (vm-intel-xeon-2cpu-nogpu · full · cpu; commits 4c790701)" in gaps
    note = _failed_note(run_table, "cpu")
    assert "as_strided on allcnnc-conv8 (time_forward, time_forward_backward, track_net_peak_forward," in note
    assert "track_net_peak_forward_backward): its forward allocated 0.00 MiB, less than its output's 6.75 MiB" in note
    cells = analysis.cell_table(run_table, "cpu")
    for rule in analysis.RULES:
        pick = analysis.recommend(cells, rule)
        assert pick.strategy != "as_strided"
        assert pick.ranking.set_index("strategy").loc["as_strided", "why_not"] == "failed on allcnnc-conv8"


def test_the_summary_names_why_the_cell_failed(capsys):
    print_summary(ROOT / "results", "vm-intel-xeon-2cpu-nogpu", "full", None)
    out = capsys.readouterr().out
    line = "time_forward as_strided allcnnc-conv8 cpu: its forward allocated 0.00 MiB, less than its output's"
    assert line in out


def test_asvs_interval_of_a_median_has_no_end_at_or_below_zero_and_none_where_it_was_not_recorded():
    rows = pd.DataFrame({"m": [1.0, 1.0, 1.0], "m:low": [0.9, -0.2, 0.0], "m:high": [1.1, 2.0, -1.0]})
    low, high = analysis.median_ends(rows, "m")
    assert low.tolist()[0] == 0.9 and low.iloc[1:].isna().all()
    assert high.tolist()[:2] == [1.1, 2.0] and pd.isna(high.iloc[2])
    assert analysis.median_ends(rows.iloc[0], "m") == (0.9, 1.1)  # one row: plain floats
    assert all(pd.isna(end) for end in analysis.median_ends(rows[["m"]], "m"))  # no interval recorded
    assert all(pd.isna(end) for end in analysis.median_ends(rows.iloc[1], "m")[:1])
