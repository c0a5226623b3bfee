"""The forecast of how far paired ratios move between runs at k processes a cell (``reports.forecast``), and the
stability report's section that sizes a profile's processes from it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.intervals import RunLevel
from reports.forecast import forecast_spread, process_variances, processes_for, range_cdf, shown_means
from unfold_bench.commands.stability import forecast


def test_the_range_of_two_normals_is_the_absolute_value_of_their_difference():
    widths = np.array([0.0, 0.3, 1.0, 2.5, 6.0])
    assert range_cdf(widths, 2) == pytest.approx(2 * stats.norm.cdf(widths / math.sqrt(2)) - 1, abs=1e-6)


def test_the_range_of_more_draws_is_wider_and_matches_a_simulation():
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(200_000, 3))
    simulated = np.ptp(draws, axis=1)
    for width in (0.5, 1.5, 3.0):
        assert range_cdf(width, 3)[0] == pytest.approx((simulated <= width).mean(), abs=0.005)
        assert range_cdf(width, 3)[0] < range_cdf(width, 2)[0]
    with pytest.raises(ValueError, match="runs=1"):
        range_cdf(1.0, 1)


def _variances(variances: list[float], suites: tuple[str, ...] = ("ratios",)) -> pd.DataFrame:
    return pd.DataFrame({"suites": [suites] * len(variances), "cell": range(len(variances)), "variance": variances})


def test_one_cell_over_two_runs_has_the_quantile_of_a_half_normal():
    variance, processes, level = 0.04, 4, 0.001
    expected = math.exp(math.sqrt(2 * (variance / processes + level)) * stats.norm.ppf(0.95))
    found = forecast_spread(_variances([variance]), {"ratios": RunLevel(level, 2.0)}, processes, runs=2)
    assert found == pytest.approx(expected, rel=1e-6)
    # a negative estimate of the run level, or none for the suite, adds nothing
    bare = math.exp(math.sqrt(2 * variance / processes) * stats.norm.ppf(0.95))
    assert forecast_spread(_variances([variance]), {"ratios": RunLevel(-0.01, 2.0)}, processes, 2) == pytest.approx(
        bare
    )
    assert forecast_spread(_variances([variance]), {}, processes, 2) == pytest.approx(bare)


def test_the_forecast_is_the_quantile_over_the_cells_and_a_cell_that_never_moves_counts_as_within():
    # half the cells never move: the p90 over all of them is the p80 of the moving half
    moving = forecast_spread(_variances([0.02] * 5), {}, 4, quantile=0.8)
    assert forecast_spread(_variances([0.02] * 5 + [0.0] * 5), {}, 4, quantile=0.9) == pytest.approx(moving)
    with pytest.raises(ValueError, match="processes=0"):
        forecast_spread(_variances([0.02]), {}, 0)
    with pytest.raises(ValueError, match="quantile=1"):
        forecast_spread(_variances([0.02]), {}, 4, quantile=1)
    with pytest.raises(ValueError, match="no cell"):
        forecast_spread(_variances([]), {}, 4)


def test_the_processes_for_a_target_are_the_fewest_whose_forecast_meets_it():
    variances, levels = _variances([0.01, 0.02, 0.05, 0.005]), {"ratios": RunLevel(0.0001, 2.0)}
    fewest = processes_for(variances, levels, target=1.10)
    assert fewest is not None and fewest > 1
    assert forecast_spread(variances, levels, fewest) <= 1.10 < forecast_spread(variances, levels, fewest - 1)
    # the run level is not reduced by processes: a target below what it alone allows is never met
    alone = forecast_spread(_variances([0.0]), {"ratios": RunLevel(0.01, 2.0)}, 1)
    assert processes_for(variances, {"ratios": RunLevel(0.01, 2.0)}, target=alone * 0.99) is None
    with pytest.raises(ValueError, match="target=1"):
        processes_for(variances, levels, target=1.0)


def test_a_chained_ratio_adds_both_factors_run_levels():
    variance, processes = 0.04, 4
    levels = {"ratios": RunLevel(0.001, 2.0), "floors": RunLevel(0.002, 2.0)}
    chained = forecast_spread(_variances([variance], ("ratios", "floors")), levels, processes, runs=2)
    expected = math.exp(math.sqrt(2 * (variance / processes + 0.003)) * stats.norm.ppf(0.95))
    assert chained == pytest.approx(expected, rel=1e-6)


def _runs(shifts: list[float], processes: int = 4) -> list[pd.DataFrame]:
    """Tidy tables of runs of two cells: ``a`` with per-process logs -0.1, 0, 0.1, ... around the run's shift, and
    ``b`` with one process (left out: no variance)."""
    tables = []
    for shift in shifts:
        logs = shift + 0.1 * (np.arange(processes) - (processes - 1) / 2)
        rows = [
            {"suite": "ratios", "config": "a", "strategy": "s", "metric": "m", "device": "cpu"},
            {"suite": "ratios", "config": "b", "strategy": "s", "metric": "m", "device": "cpu"},
        ]
        rows[0]["samples"], rows[1]["samples"] = np.exp(logs).tolist(), [1.0]
        tables.append(pd.DataFrame(rows))
    return tables


def test_the_process_variance_is_pooled_over_the_runs_with_the_cells_spread_across_them():
    found = process_variances(_runs([0.0, 0.05, -0.02]))
    assert len(found) == 1 and found.processes.iloc[0] == 4
    assert found.variance.iloc[0] == pytest.approx(np.var(0.1 * np.arange(4), ddof=1))
    assert found.spread.iloc[0] == pytest.approx(math.exp(0.07))
    with pytest.raises(ValueError, match="none given"):
        process_variances([])


def test_the_shown_ratios_are_the_paired_ones_to_native_and_copy_and_the_chain_through_native():
    cell = ("conv", "gather", "track_ratio_forward", "cpu")
    means = pd.DataFrame(
        [
            {"suite": "ratios", "cell": cell, "processes": 4, "mean": 0.2, "variance": 0.01},
            {
                "suite": "floors",
                "cell": ("conv", None, "track_ratio_native_over_copy", "cpu"),
                "processes": 4,
                "mean": 1.0,
                "variance": 0.03,
            },
            {
                "suite": "floors",
                "cell": ("conv", None, "track_ratio_native_over_fill", "cpu"),
                "processes": 4,
                "mean": 1.5,
                "variance": 0.5,
            },
            {
                "suite": "direct_floors",
                "cell": ("big", "gather", "track_ratio_forward_over_copy", "cpu"),
                "processes": 3,
                "mean": 0.7,
                "variance": 0.02,
            },
            {
                "suite": "direct_floors",
                "cell": ("big", "gather", "track_ratio_forward_over_fill", "cpu"),
                "processes": 3,
                "mean": 0.9,
                "variance": 0.6,
            },
        ]
    )
    shown = shown_means(means).set_index("cell")
    assert set(shown.index) == {
        cell,
        ("conv", None, "track_ratio_native_over_copy", "cpu"),
        ("big", "gather", "track_ratio_forward_over_copy", "cpu"),
    }  # the ratios to fill_ are not among the stability check's
    assert len(shown) == 4
    to_native, chained = shown.loc[[cell]].sort_values("mean").itertuples()
    assert to_native.suites == ("ratios",) and to_native.mean == pytest.approx(0.2)
    assert chained.suites == ("ratios", "floors")  # the strategy's ratio to copy_, chained through native's
    assert chained.mean == pytest.approx(1.2) and chained.variance == pytest.approx(0.04)


def test_the_report_section_names_the_runs_own_processes_and_the_fewest_for_the_target():
    variances = process_variances(_runs([0.0, 0.05, -0.02], processes=4))
    lines = forecast(variances, {"ratios": RunLevel(0.0, 2.0)}, 3, 1.10)
    assert "over the 1 ratios the site shows" in lines[0] and "across 3 runs" in lines[0]
    assert lines[1] == f"  observed in these runs (4 processes a cell): {math.exp(0.07):.3f}x"
    assert " 4: " in lines[2] and " 12: " in lines[2]
    fewest = processes_for(variances, {"ratios": RunLevel(0.0, 2.0)}, 1.10, 3)
    assert lines[3] == f"  fewest processes a cell for 1.10x: {fewest}"
    never = forecast(variances, {"ratios": RunLevel(0.05, 2.0)}, 3, 1.10)
    assert never[3].endswith("none up to 64 (the run level alone does not allow it)")
