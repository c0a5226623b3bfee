"""A ratio from paired log-ratios with a signed-rank interval: the statistic of ``unfold-bench advise``'s race.

Its one caller is ``benchmarks.advise`` (``race.ratio``): each round times every strategy once, the order reversed
every round, and a strategy's log-ratio to the baseline's call of the same round is one paired sample :math:`d_i`,
so drift and load that hit a round hit both. ``EARLY_ROUNDS``/``FAR_BEHIND`` are the race's too; ``ALPHA`` and
``POWER`` are the regression gate's per-cell false-alarm rate and power, read by its design and reports.

- **Estimate**: the Hodges-Lehmann estimator, the median of the Walsh averages :math:`(d_i + d_j) / 2`,
  :math:`i \\le j`; the ratio is its exponential, robust to the odd slow call (a breakdown point of 29%).
- **Interval**: the inversion of the Wilcoxon signed-rank test (Hollander & Wolfe, *Nonparametric Statistical
  Methods*, 3.2): of the :math:`n(n+1)/2` sorted Walsh averages, the bounds are the :math:`(C+1)`-th smallest and
  largest, :math:`C` the largest count whose signed-rank tail is at most :math:`\\alpha`: from the exact
  distribution below ``MIN_PAIRS`` pairs (advise asks for at least its ``MIN_ROUNDS``), from the normal
  approximation :math:`C = \\lfloor n(n+1)/4 - z_{1-\\alpha} \\sqrt{n(n+1)(2n+1)/24} \\rfloor` from there on. It
  assumes the :math:`d_i` symmetric about their centre.
- **Resolution**: the smallest slowdown this rule flags with probability ``POWER`` at the noise measured,
  :math:`(1 + m) \\exp((z_{1-\\alpha} + z_{\\text{power}})\\, s)`, with :math:`s = (\\text{high} - \\text{low}) /
  (2 z_{1-\\alpha})` the standard error read off the interval and :math:`m` the margin (normal approximation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

ALPHA = 0.001  # one-sided false-alarm rate per cell
POWER = 0.95  # the probability with which a slowdown of the cell's resolution is caught
# advise's race: after EARLY_ROUNDS rounds a strategy is out when its fastest call is over FAR_BEHIND x the leader's
# slowest (no contender, whatever the noise)
EARLY_ROUNDS, FAR_BEHIND = 3, 2.0
MIN_ROUNDS = 6  # advise's fewest rounds with a 95% signed-rank interval (the exact tail 2^-6 < 0.025)
MIN_PAIRS = 16  # below this the normal approximation of the signed-rank distribution is poor


@dataclass(frozen=True)
class PairedRatio:
    """The ratio B / A of a cell timed in pairs, its interval at ``1 - 2 * ALPHA`` and its resolution."""

    ratio: float
    low: float
    high: float
    pairs: int
    resolution: float


def _z(probability: float) -> float:
    return NormalDist().inv_cdf(probability)


def _exact_count(n: int, alpha: float) -> int:
    """The largest ``c`` with P(T <= c) <= ``alpha`` for the signed-rank statistic T of ``n`` pairs (its exact
    null distribution: every sign pattern equally likely), or -1 when even T = 0 is likelier than ``alpha``."""
    ways = np.zeros(n * (n + 1) // 2 + 1)
    ways[0] = 1.0
    for rank in range(1, n + 1):
        ways[rank:] = ways[rank:] + ways[:-rank].copy()
    below = np.cumsum(ways) / 2.0**n
    return int(np.searchsorted(below, alpha, side="right")) - 1


def paired_ratio(
    log_ratios: np.ndarray | list[float], margin: float = 0.0, alpha: float = ALPHA, min_pairs: int = MIN_PAIRS
) -> PairedRatio:
    """Hodges-Lehmann ratio, signed-rank interval and resolution of the paired log-ratios (module docstring).

    ``margin``: the relative slowdown a change must clear before it counts (the resolution includes it).
    ``min_pairs``: fewer pairs are an error; below ``MIN_PAIRS`` the interval comes from the exact signed-rank
    distribution instead of its normal approximation (an error when ``alpha`` is below its smallest tail, 2^-n).
    """
    d = np.asarray(log_ratios, dtype=float)
    n = d.size
    if n < min_pairs:
        raise ValueError(f"log_ratios: {n} pairs; the signed-rank interval needs at least {min_pairs}")
    upper = np.triu_indices(n)
    walsh = np.sort((d[upper[0]] + d[upper[1]]) / 2)
    z = _z(1 - alpha)
    if n < MIN_PAIRS:
        c = _exact_count(n, alpha)
        if c < 0:
            raise ValueError(f"log_ratios: {n} pairs; no signed-rank interval at alpha={alpha} (needs 2^-n <= alpha)")
    else:
        c = max(math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)), 0)
    low, high = walsh[c], walsh[walsh.size - 1 - c]
    estimate = float(np.median(walsh))
    standard_error = (high - low) / (2 * z)
    resolution = (1 + margin) * math.exp((z + _z(POWER)) * standard_error)
    return PairedRatio(math.exp(estimate), math.exp(low), math.exp(high), n, resolution)
