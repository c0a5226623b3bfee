"""The stability check's arithmetic: what share of one run's intervals should hold another run's estimate, and the
count it reports (no timing: the runs themselves are made by hand, ``unfold-bench stability``)."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student

from benchmarks.intervals import RunLevel
from benchmarks.records import read_records
from reports.run_level import RUN_LEVEL_FILE, write_run_levels
from unfold_bench.commands import stability


@pytest.mark.parametrize("processes, other", [(4, 4), (3, 6), (8, 8)])
def test_the_expected_coverage_is_what_runs_that_differ_only_by_their_processes_give(processes, other):
    draws = np.random.default_rng(0).normal(size=(40_000, processes + other))
    one, another = draws[:, :processes], draws[:, processes:]
    half = student.ppf(0.975, processes - 1) * one.std(axis=1, ddof=1) / np.sqrt(processes)
    simulated = float((np.abs(another.mean(axis=1) - one.mean(axis=1)) < half).mean())
    assert stability.expected_coverage(processes, other) == pytest.approx(simulated, abs=0.01)
    assert stability.expected_coverage(processes, other) < 0.95  # the other estimate has an error of its own


def test_against_an_exact_other_estimate_the_coverage_is_the_intervals_level():
    assert stability.expected_coverage(4, 10**12) == pytest.approx(0.95, abs=1e-6)
    with pytest.raises(ValueError, match="processes=1"):
        stability.expected_coverage(1, 4)


def _run(paired: float, low: float, high: float, chained: tuple[float, float, float]) -> pd.DataFrame:
    rows = [
        {"config": "c", "strategy": "s", "metric": "time_forward", "paired": paired, "low": low, "high": high},
        {"config": "c", "strategy": "s", "metric": f"time_forward {stability.X_COPY}", "paired": chained[0]},
    ]
    rows[0]["processes"], rows[1]["processes"] = 4, np.nan
    rows[1]["low"], rows[1]["high"] = chained[1], chained[2]
    return pd.DataFrame(rows)


def test_calibration_counts_each_kind_of_ratio_and_names_the_rate_the_processes_alone_would_give():
    # the direct ratio: run 0's interval holds run 1's estimate, not the other way round; the chained one: both
    frames = [_run(1.0, 0.9, 1.2, (2.0, 1.5, 2.5)), _run(1.15, 1.1, 1.2, (2.2, 2.0, 2.4))]
    direct, chained = stability.calibration(frames)
    assert "paired to native" in direct and "in 1/2 (50%)" in direct
    assert f"{stability.expected_coverage(4, 4):.0%} if the runs differed only by their processes" in direct
    assert "chained through native" in chained and "in 2/2 (100%)" in chained and "differed" not in chained


def test_a_set_of_runs_is_named_by_its_profile_and_the_cells_it_covered():
    """The report's first line and the run-level record name the command alike: a record measured on a selection
    of cells says which, since its level then stands for every cell of that profile on the machine."""
    args = argparse.Namespace(runs=3, profile="full", bench="allcnnc-conv3", target=1.2)
    assert stability.invocation(args) == "unfold-bench stability --runs 3 --profile full --bench 'allcnnc-conv3'"
    args.bench = ""
    assert stability.invocation(args) == "unfold-bench stability --runs 3 --profile full"


def test_the_recorded_levels_are_this_machines_and_profiles_keyed_as_the_results_reader_takes_them(tmp_path):
    levels = {"ratios": RunLevel(0.002, 2.0), "floors": RunLevel(0.001, 2.0)}
    write_run_levels(tmp_path / "vm-a", "full", levels, "2026-01-01 00:00:00+00:00", {"command": "c"})
    write_run_levels(tmp_path / "vm-a", "full", levels, "2026-01-02 00:00:00+00:00", {"command": "c"})
    write_run_levels(tmp_path / "vm-a", "quick", levels, "2026-01-01 00:00:00+00:00", {"command": "c"})
    write_run_levels(tmp_path / "vm-b", "full", levels, "2026-01-01 00:00:00+00:00", {"command": "c"})
    found = stability.recorded_levels(tmp_path, "vm-a", "full")
    assert set(found) == {("vm-a", "full", "ratios"), ("vm-a", "full", "floors")}
    assert found["vm-a", "full", "ratios"].df == pytest.approx(4.0)  # two sets pooled
    held_out = stability.recorded_levels(tmp_path, "vm-a", "full", leave_out="2026-01-02 00:00:00+00:00")
    assert held_out["vm-a", "full", "ratios"].df == pytest.approx(2.0)


def _kept_runs(tmp_path, monkeypatch) -> list[str]:
    """Two runs kept in ``tmp_path / "keep"``, read back by stand-ins that give each suite one run level and time
    nothing, and a record of another set of runs of the machine in ``tmp_path / "results"``: the arguments that
    report the runs again."""
    for index in range(2):
        (tmp_path / "keep" / f"quick-run-{index}" / "results").mkdir(parents=True)
    first = pd.DataFrame({"machine": ["vm-a"], "commit": ["c" * 40], "started": [pd.Timestamp("2026-01-02", tz="UTC")]})
    chosen = dict.fromkeys([rule.name for rule in stability.analysis.RULES], ("cpp", ()))
    monkeypatch.setattr(stability, "run_table", lambda *args: first)
    monkeypatch.setattr(stability, "ratios", lambda *args: pd.DataFrame())
    monkeypatch.setattr(stability, "picks", lambda *args: chosen)
    monkeypatch.setattr(stability, "estimate", lambda tables: {"ratios": RunLevel(0.01, 1.0)})
    monkeypatch.setattr(stability, "report", lambda *args: "the report\n")
    monkeypatch.setattr(stability, "process_variances", lambda tables: None)
    monkeypatch.setattr(stability, "forecast", lambda *args: [])
    monkeypatch.setattr(stability.analysis, "regime_label", lambda table: "warm")
    earlier = {"ratios": RunLevel(0.03, 1.0)}
    write_run_levels(tmp_path / "results" / "vm-a", "quick", earlier, "2026-01-01 00:00:00+00:00", {"command": "c"})
    return ["--runs", "2", "--from-runs", "--keep", str(tmp_path / "keep"), "--record-in", str(tmp_path / "results")]


POOLED_WITH_THESE = "  ratios         sd 0.141 (2 df)"  # the other set's 0.03 and these runs' 0.01, 1 df each


def test_kept_runs_reported_again_leave_the_run_level_record_as_it_is(tmp_path, monkeypatch, capsys):
    """A report again measures nothing and records nothing: the runs' evidence is recorded when they are measured,
    and once; the report still shows the level that recording them would leave, and says it was not recorded."""
    arguments = _kept_runs(tmp_path, monkeypatch)
    record = tmp_path / "results" / "vm-a" / RUN_LEVEL_FILE
    before = record.read_text()
    assert stability.main(arguments) == 0
    out = capsys.readouterr().out
    assert record.read_text() == before
    assert "run level not recorded (--from-runs without --record)" in out and POOLED_WITH_THESE in out
    assert "with the run level recording these runs would leave" in out


def test_kept_runs_reported_again_with_record_replace_their_own_record_only(tmp_path, monkeypatch, capsys):
    arguments = _kept_runs(tmp_path, monkeypatch)
    for _ in range(2):  # recorded twice: the second replaces the first, never adds to it
        assert stability.main([*arguments, "--record"]) == 0
        out = capsys.readouterr().out
        assert "run level recorded now" in out and POOLED_WITH_THESE in out
    records = read_records(tmp_path / "results" / "vm-a" / RUN_LEVEL_FILE)
    assert [(r["measured"], r["variance"]) for r in records] == [
        ("2026-01-01 00:00:00+00:00", 0.03),
        ("2026-01-02 00:00:00+00:00", 0.01),
    ]


def test_the_picks_agree_differ_inside_a_declared_tie_or_differ():
    """The runs' picks agree only when they are the same, or differ inside a tie that every run declared; otherwise
    the line says DIFFER and names the runs whose tie held every pick."""
    rules = [rule.name for rule in stability.analysis.RULES]

    def verdicts(run_picks):
        lines = stability.pick_lines([dict.fromkeys(rules, pick) for pick in run_picks], "as shown")
        assert lines[0] == "which to ship (CPU), per run, as shown: pick (statistical tie)"
        return lines[1:]

    assert all(line.endswith(": agree") for line in verdicts([("cpp", ())] * 3))
    tied = [(pick, ("cpp", "gather")) for pick in ("cpp", "gather", "cpp")]
    assert all(line.endswith("differ inside a tie every run declared") for line in verdicts(tied))
    lines = verdicts([*tied[:2], ("cpp", ())])
    shown = "cpp (tie: cpp, gather) | gather (tie: cpp, gather) | cpp"
    assert lines[0] == f"  {rules[0]}: {shown}: DIFFER (run 1, 2 declared the tie)"
    assert verdicts([("cpp", ()), (None, ())])[0] == f"  {rules[0]}: cpp | none: DIFFER"
