"""Student-t intervals of ratios measured once per process, across the processes and the further errors they add.

A paired ratio holds one sample per process, :math:`r_1, \\dots, r_n`; its figure is their geometric mean and its
interval is Student's t on the logs, :math:`\\bar\\ell \\pm t_{0.975,\\,n-1}\\, s_\\ell / \\sqrt{n}`, with
:math:`\\ell_i = \\log r_i`: the process, not the call, is the unit of replication. Further independent sources of
error (a machine's run level, a chained factor's own interval) add their variances, at Welch-Satterthwaite's
degrees of freedom (``summed_error``). ``reports`` applies it to asv's results, ``benchmarks.variance`` and
``unfold-bench agreement`` to their processes' figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class RunLevel:
    """The variance between runs, on the logs of a suite's paired ratios, beyond what their processes predict,
    and the degrees of freedom of that estimate (estimated by ``reports.run_level``)."""

    variance: float
    df: float


INTERVAL_LEVEL = 0.95  # the two-sided level of a paired ratio's interval across processes


def t_quantile(df: float, level: float = INTERVAL_LEVEL) -> float:
    """Student's t quantile of a two-sided ``level`` interval at ``df`` degrees of freedom (``scipy.special.stdtrit``,
    the function behind ``scipy.stats.t.ppf``, without its argument handling: a report asks for thousands)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + level / 2))


def summed_error(terms: Iterable[tuple[float, float]], level: float = INTERVAL_LEVEL) -> tuple[float, float]:
    """The half-width at ``level`` and the degrees of freedom of a Student-t interval on a sum of independent error
    variances, each term ``(variance, df)``: Welch-Satterthwaite's degrees of freedom
    :math:`(\\sum v_i)^2 / \\sum (v_i^2 / \\nu_i)`, and a half-width never narrower than any term's own
    :math:`t_{\\nu_i} \\sqrt{v_i}`. At few degrees of freedom t's quantile falls faster with the approximated
    degrees of freedom than the variance grows, so adding a small, well-known term would otherwise narrow the
    interval; a further source of error must never make a figure look surer. Where that floor holds, the degrees of
    freedom returned are those at which the half-width is t's quantile times the summed standard error, so that an
    interval read back (``chained_ratio``) gives the summed variance. Terms without variance add nothing; with
    none, the half-width is 0 at the fewest degrees of freedom given."""
    from scipy.optimize import brentq

    terms = list(terms)
    spread = [(variance, df) for variance, df in terms if variance > 0]
    if not spread:
        return 0.0, min(df for _, df in terms)
    if len(spread) == 1:
        return t_quantile(spread[0][1], level) * math.sqrt(spread[0][0]), spread[0][1]
    error = math.sqrt(sum(v for v, _ in spread))
    df = error**4 / sum(v**2 / nu for v, nu in spread)
    half = t_quantile(df, level) * error
    floor, floor_df = max((t_quantile(nu, level) * math.sqrt(v), nu) for v, nu in spread)
    if floor <= half:
        return half, df
    return floor, brentq(lambda nu: t_quantile(nu, level) * error - floor, floor_df, df)


def ratio_interval(
    samples: Iterable[float], level: float = INTERVAL_LEVEL, run_level: RunLevel | None = None
) -> tuple[float, float, float, float]:
    """The geometric mean of per-process ratios, its two-sided Student-t interval at ``level`` on the logs, and that
    interval's degrees of freedom. Across the processes alone the variance of the mean log is :math:`s^2/n` at
    :math:`n - 1` degrees of freedom; a recorded ``run_level`` (``reports.run_level``) adds its variance
    (``summed_error``). NaN ends with fewer than two processes."""
    logs = [math.log(v) for v in samples if v is not None and v > 0]
    if not logs:
        return math.nan, math.nan, math.nan, math.nan
    mean = sum(logs) / len(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan, math.nan
    terms = [(sum((v - mean) ** 2 for v in logs) / (len(logs) - 1) / len(logs), float(len(logs) - 1))]
    if run_level is not None and run_level.variance > 0:
        terms.append((run_level.variance, run_level.df))
    half, df = summed_error(terms, level)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), df


def process_interval(samples: Iterable[float], level: float = INTERVAL_LEVEL) -> tuple[float, float, float]:
    """The geometric mean of per-process ratios and its two-sided Student-t interval at ``level`` across the
    processes alone (``ratio_interval`` without a run level)."""
    return ratio_interval(samples, level)[:3]


def chained_ratio(
    first: tuple[float, float, float, float], second: tuple[float, float, float, float], level: float = INTERVAL_LEVEL
) -> tuple[float, float, float]:
    """The product of two ratios measured in separate processes, each ``(value, low, high, df)`` with its
    ``ratio_interval`` and that interval's degrees of freedom, and the interval of the product: on the logs the
    factors' error variances (each read back from its interval's half-width) add (``summed_error``). NaN ends where
    either factor has no interval."""
    value = first[0] * second[0]
    terms = []
    for _, low, high, df in (first, second):
        if any(pd.isna(v) or v <= 0 for v in (low, high)) or pd.isna(df) or df < 1:
            return value, math.nan, math.nan
        terms.append((((math.log(high) - math.log(low)) / (2 * t_quantile(df, level))) ** 2, df))
    half, _ = summed_error(terms, level)
    return value, math.exp(math.log(value) - half), math.exp(math.log(value) + half)
