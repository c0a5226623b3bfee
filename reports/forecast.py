"""How far the paired ratios will move between runs at ``k`` processes a cell: the forecast that sizes a profile.

Following Kalibera and Jones (ISMM 2013), repetitions go to the level whose variance dominates. A run's estimate of
a paired ratio is the mean log-ratio over its ``k`` processes, so with :math:`s_c^2` cell :math:`c`'s variance
between processes and :math:`\\sigma^2_{\\mathrm{run}}` its suite's run level (``reports.run_level``), separate
runs' estimates scatter with variance :math:`v_c(k) = s_c^2 / k + \\sigma^2_{\\mathrm{run}}`, and the max/min of
:math:`R` runs is :math:`e^{W}`, :math:`W` the range of :math:`R` normal draws of that variance:

.. math::

    P(W \\le w) = R \\int \\varphi(x) \\left[\\Phi\\left(x + w / \\sqrt{v_c(k)}\\right) - \\Phi(x)\\right]^{R - 1} dx.

A ratio to ``copy_`` chained through native's sums two factors' logs, so its :math:`v_c(k)` sums theirs. The
forecast of the stability check's quantile :math:`q` over the ratios the site shows (its p90) is the :math:`w` at
which their mean of :math:`P(W_c \\le w)` reaches :math:`q`; the fewest ``k`` whose forecast meets a target is what a
profile's ``ratio_processes`` should be. The variances come from the runs that measured them, so the forecast at
their own ``k`` checks the model against what they showed. No ``k`` beats the run level alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
from scipy.integrate import trapezoid
from scipy.stats import norm

from benchmarks.intervals import RunLevel
from benchmarks.runner import FLOORS_SUITE, PAIRED_SUITE
from benchmarks.vocabulary import COPY_FLOOR, DIRECT_FLOOR_RATIOS, FLOOR_RATIOS, PASSES, TIMED_PASSES
from reports.run_level import log_means
from reports.units import METRICS

STABILITY_TARGET = 1.10  # the stability check's target: p90 over the cells of max/min across 3 runs
STABILITY_QUANTILE = 0.9
MOST_PROCESSES = 64  # processes_for looks no further
_PASS_OF_RATIO = {figure.paired: TIMED_PASSES[metric] for metric, figure in METRICS.items() if figure.paired}
_GRID = np.linspace(-8.0, 8.0, 1601)  # where the minimum of the runs' draws lies, in standard deviations


def process_variances(runs: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Per ratio the site shows that every run measured (``shown_means``): the suites its factors come from, the
    variance of its log between processes (the mean over the runs of each run's sample variance; a chained ratio's
    is the sum of its factors'), the median number of processes a run gave it, and how far its log moved across the
    runs (``spread``: max/min)."""
    frames = [shown_means(log_means(table)).assign(run=index) for index, table in enumerate(runs)]
    if not frames:
        raise ValueError("runs: none given; the process variance needs at least one run")
    rows = pd.concat(frames, ignore_index=True)
    per_cell = rows.groupby(["suites", "cell"]).agg(
        runs=("run", "nunique"),
        variance=("variance", "mean"),
        processes=("processes", "median"),
        low=("mean", "min"),
        high=("mean", "max"),
    )
    per_cell = per_cell[per_cell.runs == len(frames)].reset_index()
    return per_cell.assign(spread=np.exp(per_cell.high - per_cell.low))[
        ["suites", "cell", "variance", "processes", "spread"]
    ]


def shown_means(means: pd.DataFrame) -> pd.DataFrame:
    """The ratios the site shows among one run's ``log_means``, each with the tuple of ``suites`` of its factors:
    a strategy's paired ratio to native, native's (``benchmarks.floors``) or a strategy's own
    (``benchmarks.direct_floors``) paired ratio to ``copy_``, and a strategy's ratio to ``copy_`` chained through
    native's, whose log is the sum of its two factors' logs: their processes are independent, so their variances
    add, and so do their suites' run levels."""
    to_copy = {ratios[p, COPY_FLOOR] for ratios in (FLOOR_RATIOS, DIRECT_FLOOR_RATIOS) for p in PASSES}
    direct = means[(means.suite == PAIRED_SUITE) | means.cell.map(lambda cell: cell[2] in to_copy)]
    direct = direct.assign(suites=direct.suite.map(lambda suite: (suite,)))
    floors = {(r.cell[0], r.cell[2], r.cell[3]): r for r in means[means.suite == FLOORS_SUITE].itertuples()}
    chained = []
    for row in means[means.suite == PAIRED_SUITE].itertuples():
        config, _, ratio, device = row.cell
        floor = floors.get((config, FLOOR_RATIOS.get((_PASS_OF_RATIO.get(ratio), COPY_FLOOR)), device))
        if floor is None:
            continue
        chained.append(
            {
                "suites": (PAIRED_SUITE, FLOORS_SUITE),
                "cell": row.cell,  # its suites tell it from the ratio to native
                "processes": min(row.processes, floor.processes),
                "mean": row.mean + floor.mean,
                "variance": row.variance + floor.variance,
            }
        )
    columns = ["suites", "cell", "processes", "mean", "variance"]
    return pd.concat(
        [direct[columns], *([pd.DataFrame(chained, columns=columns)] if chained else [])], ignore_index=True
    )


def range_cdf(width: float | np.ndarray, runs: int) -> np.ndarray:
    """P(W <= width) for W the range (max - min) of ``runs`` independent standard normal draws."""
    if runs < 2:
        raise ValueError(f"runs={runs}: a range needs at least 2")
    width = np.atleast_1d(np.asarray(width, dtype=float))
    low = norm.cdf(_GRID)
    inside = np.clip(norm.cdf(_GRID[None, :] + width[:, None]) - low[None, :], 0.0, 1.0)
    density = runs * norm.pdf(_GRID)[None, :] * inside ** (runs - 1)
    return trapezoid(density, _GRID, axis=1)


def forecast_spread(
    variances: pd.DataFrame,
    levels: Mapping[str, RunLevel],
    processes: int,
    runs: int = 3,
    quantile: float = STABILITY_QUANTILE,
) -> float:
    """The forecast ``quantile`` over the cells of ``variances`` (``process_variances``) of a ratio's max/min across
    ``runs`` runs of ``processes`` processes a cell, with each suite's run level from ``levels`` (0 where none, or
    where the estimate is negative)."""
    if processes < 1:
        raise ValueError(f"processes={processes}: at least one process a cell")
    if not 0 < quantile < 1:
        raise ValueError(f"quantile={quantile}: must lie strictly between 0 and 1")
    if variances.empty:
        raise ValueError("variances: no cell; the forecast needs cells measured in every run")
    run_level = variances.suites.map(lambda suites: sum(max(levels[s].variance, 0.0) for s in suites if s in levels))
    sd = np.sqrt(variances.variance.to_numpy() / processes + run_level.to_numpy())
    low, high = 0.0, 1.0
    while _mixture_cdf(high, sd, runs) < quantile:
        high *= 2
    for _ in range(50):  # bisection on log(max/min): 2^-50 of the bracket
        middle = (low + high) / 2
        low, high = (middle, high) if _mixture_cdf(middle, sd, runs) < quantile else (low, middle)
    return float(np.exp(high))


def _mixture_cdf(log_width: float, sd: np.ndarray, runs: int) -> float:
    """The cells' mean of P(log max/min <= ``log_width``), each cell's log-ratio of standard deviation ``sd``."""
    positive = sd > 0
    reached = np.ones(len(sd))  # a cell that never moves is within any width
    reached[positive] = range_cdf(log_width / sd[positive], runs)
    return float(reached.mean())


def processes_for(
    variances: pd.DataFrame,
    levels: Mapping[str, RunLevel],
    target: float = STABILITY_TARGET,
    runs: int = 3,
    quantile: float = STABILITY_QUANTILE,
    most: int = MOST_PROCESSES,
) -> int | None:
    """The fewest processes a cell (up to ``most``) whose ``forecast_spread`` is at most ``target``; None where
    even ``most`` does not reach it (the run level alone may not allow it)."""
    if target <= 1:
        raise ValueError(f"target={target}: a max/min target must exceed 1")
    for processes in range(1, most + 1):
        if forecast_spread(variances, levels, processes, runs, quantile) <= target:
            return processes
    return None
