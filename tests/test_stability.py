"""The stability check's arithmetic: what share of one run's intervals should hold another run's estimate, and the
count it reports (no timing: the runs themselves are made by hand, ``unfold-bench stability``)."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student

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
    args = argparse.Namespace(runs=3, profile="full", bench="allcnnc-conv3", target=stability.STABILITY_TARGET)
    assert stability.invocation(args) == "unfold-bench stability --runs 3 --profile full --bench 'allcnnc-conv3'"
    args.bench, args.target = "", 1.2
    assert stability.invocation(args) == "unfold-bench stability --runs 3 --profile full --target 1.2"


def test_the_picks_agree_differ_inside_a_declared_tie_or_differ():
    """The runs' picks agree only when they are the same, or differ inside a tie that every run declared; otherwise
    the line says DIFFER and names the runs whose tie held every pick."""
    rules = [rule.name for rule in stability.analysis.RULES]
    same = [dict.fromkeys(rules, ("cpp", ())) for _ in range(3)]
    assert all(line.endswith(": agree") for line in stability.pick_lines(same))
    tied = [dict.fromkeys(rules, (pick, ("cpp", "gather"))) for pick in ("cpp", "gather", "cpp")]
    assert all(line.endswith("differ inside a tie every run declared") for line in stability.pick_lines(tied))
    one_sure = [*tied[:2], dict.fromkeys(rules, ("cpp", ()))]
    lines = stability.pick_lines(one_sure)
    assert all(line.endswith("DIFFER (run 1, 2 declared the tie)") for line in lines)
    shown = "cpp (tie: cpp, gather) | gather (tie: cpp, gather) | cpp"
    assert lines[0] == f"  {rules[0]}: {shown}: DIFFER (run 1, 2 declared the tie)"
