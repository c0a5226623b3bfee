"""The run level of the paired ratios (``reports.run_level``): its estimate from several runs, its record, and the
intervals that include it (``benchmarks.intervals.ratio_interval``)."""

from __future__ import annotations

import math
from dataclasses import astuple

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.intervals import RunLevel, chained_ratio, process_interval, ratio_interval, summed_error
from reports.run_level import RUN_LEVEL_FILE, estimate, load_run_levels, pool, write_run_levels

SAMPLES = [0.8, 1.0, 1.1, 0.9]


def test_without_a_run_level_the_interval_is_the_processes_alone():
    value, low, high, df = ratio_interval(SAMPLES)
    assert (value, low, high) == pytest.approx(process_interval(SAMPLES)) and df == len(SAMPLES) - 1
    assert ratio_interval(SAMPLES, run_level=RunLevel(0.0, 2.0)) == pytest.approx((value, low, high, df))
    assert all(math.isnan(v) for v in ratio_interval([0.9], run_level=RunLevel(0.01, 2.0))[1:])


def test_a_run_level_adds_its_variance_with_welch_satterthwaites_degrees_of_freedom():
    level = RunLevel(0.01, 8.0)
    value, low, high, df = ratio_interval(SAMPLES, run_level=level)
    logs = np.log(SAMPLES)
    error = logs.var(ddof=1) / len(logs)
    total = error + level.variance
    assert df == pytest.approx(total**2 / (error**2 / 3 + level.variance**2 / level.df))
    half = stats.t.ppf(0.975, df) * math.sqrt(total)
    assert value == pytest.approx(stats.gmean(SAMPLES))
    assert (low, high) == pytest.approx((value * math.exp(-half), value * math.exp(half)))
    _, narrow_low, narrow_high = process_interval(SAMPLES)
    assert low < narrow_low and high > narrow_high


def test_a_run_level_never_narrows_the_interval_and_the_degrees_of_freedom_match_its_half_width():
    # two processes and a small, well-known run level: Welch-Satterthwaite alone would narrow the interval
    # (t at 1.04 degrees of freedom is far below t at 1), as it did on CI's samples
    samples = [0.8, 1.3]
    level = RunLevel(0.001, 4.0)
    _, low, high = process_interval(samples)
    value, wide_low, wide_high, df = ratio_interval(samples, run_level=level)
    error = np.log(samples).var(ddof=1) / len(samples)
    satterthwaite = (error + level.variance) ** 2 / (error**2 + level.variance**2 / level.df)
    assert stats.t.ppf(0.975, satterthwaite) * math.sqrt(error + level.variance) < stats.t.ppf(0.975, 1) * math.sqrt(
        error
    )
    assert (wide_low, wide_high) == pytest.approx((low, high)) and 1 < df < satterthwaite
    half = math.log(wide_high / value)  # the degrees of freedom returned carry the summed variance
    assert half == pytest.approx(stats.t.ppf(0.975, df) * math.sqrt(error + level.variance))
    # read back by a product with an exact factor, the interval is the same
    assert chained_ratio((value, wide_low, wide_high, df), (2.0, 2.0, 2.0, 3.0)) == pytest.approx(
        (2 * value, 2 * wide_low, 2 * wide_high)
    )


@pytest.mark.parametrize("seed", range(3))
def test_every_summed_interval_is_at_least_as_wide_as_each_of_its_terms(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        terms = [(float(rng.lognormal(-6, 2)), float(rng.choice([1.0, 2.0, 3.0, 4.0, 7.0, 30.0]))) for _ in range(2)]
        half, df = summed_error(terms)
        assert min(nu for _, nu in terms) <= df <= sum(nu for _, nu in terms) + 1e-9
        for variance, nu in terms:
            assert half >= stats.t.ppf(0.975, nu) * math.sqrt(variance) * (1 - 1e-12)
        assert half == pytest.approx(stats.t.ppf(0.975, df) * math.sqrt(sum(v for v, _ in terms)))


def _runs(run_sd: float, seed: int, runs: int = 3, cells: int = 40, processes: int = 4) -> list[pd.DataFrame]:
    """Tidy tables of ``runs`` runs, each cell's per-process ratios drawn around an effect of the run (sd
    ``run_sd`` on the logs, shared by a run's processes) and of the process (sd 0.1)."""
    rng = np.random.default_rng(seed)
    tables = []
    for _ in range(runs):
        rows = []
        for cell in range(cells):
            shift = rng.normal(0, run_sd)
            samples = np.exp(shift + rng.normal(0, 0.1, processes)).tolist()
            rows.append({"suite": "floors", "config": f"c{cell}", "strategy": None, "metric": "m", "device": "cpu"})
            rows[-1]["samples"] = samples
        tables.append(pd.DataFrame(rows))
    return tables


@pytest.mark.parametrize("seed", [0, 1])
def test_the_estimate_recovers_a_run_level_and_finds_none_where_the_runs_differ_by_their_processes(seed):
    found = estimate(_runs(0.1, seed))["floors"]
    assert 0.5 * 0.01 < found.variance < 2 * 0.01 and found.df == 2
    assert abs(estimate(_runs(0.0, seed))["floors"].variance) < 0.3 * 0.01  # noise around 0, either sign


def test_a_cell_missing_from_a_run_or_with_one_process_is_left_out_and_one_run_is_refused():
    runs = _runs(0.1, 0, cells=3)
    runs[1].loc[0, "samples"] = [1.0]  # one process: no standard error
    runs[2] = runs[2].iloc[1:]
    assert estimate(runs)["floors"] == estimate([r[r.config != "c0"] for r in _runs(0.1, 0, cells=3)])["floors"]
    with pytest.raises(ValueError, match="runs: 1"):
        estimate(runs[:1])


def test_the_sets_of_runs_recorded_are_pooled_by_degrees_of_freedom_per_machine_profile_and_suite(tmp_path):
    machine = tmp_path / "vm-a"
    write_run_levels(machine, "quick", {"floors": RunLevel(0.01, 2.0)}, "2026-01-01", {"runs": 3})
    write_run_levels(machine, "full", {"floors": RunLevel(0.04, 1.0)}, "2026-01-02", {"runs": 2})
    write_run_levels(machine, "quick", {"floors": RunLevel(-0.004, 3.0), "ratios": RunLevel(-0.001, 3.0)}, "b", {})
    found = {key: astuple(level) for key, level in load_run_levels(tmp_path).items()}
    assert found == {
        ("vm-a", "full", "floors"): (0.04, 1.0),
        ("vm-a", "quick", "floors"): pytest.approx(((2 * 0.01 - 3 * 0.004) / 5, 5.0)),
        ("vm-a", "quick", "ratios"): (0.0, 3.0),  # a negative estimate floored only once pooled
    }
    write_run_levels(machine, "quick", {"floors": RunLevel(0.02, 2.0)}, "2026-01-01", {})  # the same set again
    again = load_run_levels(tmp_path)["vm-a", "quick", "floors"]
    assert astuple(again) == pytest.approx(((2 * 0.02 - 3 * 0.004) / 5, 5.0))
    assert (machine / RUN_LEVEL_FILE).exists() and not list(machine.glob("*.json"))  # asv reads *.json as results
    assert load_run_levels(tmp_path, leave_out="2026-01-01")["vm-a", "quick", "floors"] == RunLevel(0.0, 3.0)
    assert load_run_levels(tmp_path / "none") == {}
    with pytest.raises(ValueError, match="pooling"):
        pool([])
