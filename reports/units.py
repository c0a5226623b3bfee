"""The reports' one vocabulary: how each figure is named, in which unit it is shown, and what bounds it.

Every table and chart of ``reports/`` (the site, its figures, the terminal summary, the gate's tables, advise)
writes a figure through this module, as ``torch.utils.benchmark``'s ``common.py`` does for its tables:

- ``UNITS``: asv's recorded unit (``seconds``, ``bytes``, ``instructions``) -> the unit shown (``ms``,
  ``MiB``, ``instr``) and its scale; ``format_value`` writes a value with its unit, ``format_number`` a
  number alone.
- ``METRICS``: the four figures of a cell (forward and forward-backward time and net peak memory), each with
  its label, its short column label, its unit and its bound (time: the ``copy_`` roofline; memory: the
  analytic minimum) measured in the same run.
- ``BOUNDS``: each bound's names (the ratio's column label and the word the site uses).
- ``RATIO_METRICS``: the paired ratios to native (``benchmarks.ratios``); ``SHOWN_METRICS``: both kinds.
- ``format_spread``: a median time with the interquartile range of its samples; ``format_ratio`` and
  ``format_ratio_interval``: a ratio, alone and with its interval, the one way every report writes one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from benchmarks.vocabulary import COPY_FLOOR, MIB


@dataclass(frozen=True)
class Unit:
    """How a value recorded in asv's unit ``recorded`` is shown: as ``shown``, ``scale`` times the recorded value."""

    recorded: str
    shown: str
    scale: float
    whole: bool = False  # counts: always a whole number

    def scaled(self, value: float) -> float:
        """``value`` (in the recorded unit) in the shown unit."""
        return value * self.scale

    def format(self, value: float, digits: int = 4) -> str:
        """``value`` (in the recorded unit) in the shown unit, with the unit (``format_number``'s digits)."""
        scaled = self.scaled(value)
        return f"{scaled:,.0f} {self.shown}" if self.whole else f"{format_number(scaled, digits)} {self.shown}"


SECONDS = Unit("seconds", "ms", 1e3)
BYTES = Unit("bytes", "MiB", 1 / MIB)
INSTRUCTIONS = Unit("instructions", "instr", 1.0, whole=True)
RATIO = Unit("ratio", "x", 1.0)  # a paired ratio (benchmarks.ratios): a strategy's time over the reference's
BANDWIDTH = Unit("GB/s", "GB/s", 1.0)  # derived by the reports (analysis.with_bandwidth), not recorded by asv
UNITS = {unit.recorded: unit for unit in (SECONDS, BYTES, INSTRUCTIONS, RATIO, BANDWIDTH)}
MACHINE_MEMORY = Unit("KiB", "GiB", 1 / 2**20)  # asv's machine file records the RAM in KiB


def format_number(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits; from ``10**digits`` up a whole number with thousands separators
    (never an exponent)."""
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"


MAX_DECIMALS = 6  # a degenerate interval's end (a few processes can give 3e-6) does not stretch its ratio's figures


def shared_decimals(values: Iterable[float | None], decimals: int = 2) -> int:
    """Decimals to write ``values`` with, all alike: ``decimals``, or more where the smallest nonzero of them would
    otherwise show fewer than two significant digits (``0.0082`` and ``0.012`` become ``0.0082`` and ``0.0120``, not
    ``0.0082`` and ``0.01``), up to ``MAX_DECIMALS``: a ratio and its interval's ends are written to one precision."""
    nonzero = [abs(float(v)) for v in values if not is_missing(v) and v != 0 and math.isfinite(v)]
    if not nonzero:
        return decimals
    return max(decimals, min(MAX_DECIMALS, 1 - math.floor(math.log10(min(nonzero)))))


def format_ratio(value: float | None, decimals: int = 2, missing: str = "-", suffix: str = "x") -> str:
    """A ratio to ``decimals`` decimals and ``suffix``, more where it would show fewer than two significant digits
    (never ``0.00x`` nor ``0.01x`` for 0.0123: ``shared_decimals``); ``missing`` when there is none."""
    if is_missing(value):
        return missing
    return f"{value:.{shared_decimals([value], decimals)}f}{suffix}"


def format_ratio_interval(
    value: float | None, low: float | None, high: float | None, decimals: int = 2, suffix: str = "x"
) -> str:
    """``format_ratio``'s ratio followed by its interval ``[low, high]`` (none when an end is missing or the two
    are one value, as a single process gives), the three to one precision (``shared_decimals``)."""
    if is_missing(value) or is_missing(low) or is_missing(high) or low == high:
        return format_ratio(value, decimals, suffix=suffix)
    shared = shared_decimals([value, low, high], decimals)
    return f"{value:.{shared}f}{suffix} {format_interval(low, high, shared)}"


def format_interval(low: float | None, high: float | None, decimals: int = 2, missing: str = "") -> str:
    """An interval ``[low, high]`` to ``decimals`` decimals, both ends to one precision and more decimals where the
    smaller would show fewer than two significant digits (``shared_decimals``); ``missing`` when an end is missing."""
    if is_missing(low) or is_missing(high):
        return missing
    shared = shared_decimals([low, high], decimals)
    return f"[{low:.{shared}f}, {high:.{shared}f}]"


def is_missing(value: float | None) -> bool:
    """Whether ``value`` is no figure (None, NaN of any float type, or pandas' NA)."""
    return value is None or bool(pd.isna(value))


def format_value(value: float | None, unit: str, digits: int = 4, missing: str = "-") -> str:
    """``value``, recorded in asv's ``unit``, in its shown unit (``UNITS``); ``missing`` when there is none."""
    return missing if is_missing(value) else UNITS[unit].format(value, digits)


def recorded_unit(metric: str) -> str:
    """asv's unit of a benchmark method: ``time_*`` in seconds, ``track_ratio_*`` (paired ratios) a ratio, other
    ``track_*`` (net peaks, minima) in bytes."""
    if metric.startswith("time_"):
        return "seconds"
    return "ratio" if metric.startswith("track_ratio_") else "bytes"


@dataclass(frozen=True)
class Bound:
    """A bound measured in the same run (``benchmarks`` suite ``bounds``): its ratio's column label and its name."""

    metric: str
    ratio_label: str  # the summary's column of a figure over it
    short: str  # the site's word after a ratio ("2.00x copy_")
    name: str  # a chart axis's word ("forward time / copy_ time")


BOUNDS = {
    bound.metric: bound
    for bound in (
        Bound(COPY_FLOOR, "xcopy", "copy_", "copy_ time"),
        Bound("track_min_peak_forward", "xmin", "min", "analytic minimum"),
        Bound("track_min_peak_forward_backward", "xmin", "min", "analytic minimum"),
    )
}


@dataclass(frozen=True)
class Metric:
    """One figure of a cell: its label ("forward time"), its short column label ("forward"), its unit and its bound."""

    name: str
    label: str
    short: str
    unit: Unit
    bound: str | None  # a metric of BOUNDS (None: a ratio, bounded by nothing measured)
    paired: str | None = None  # the suite ``ratios``'s metric: this figure over the reference's, paired per process

    @property
    def column(self) -> str:
        """The summary's column: the short label and the unit ("fwd+bwd ms")."""
        return f"{self.short} {self.unit.shown}"

    @property
    def bound_info(self) -> Bound:
        """The bound's names (``BOUNDS``)."""
        return BOUNDS[self.bound]

    def format(self, value: float | None, digits: int = 4, missing: str = "-") -> str:
        """``value`` (seconds or bytes) in this figure's shown unit (``format_value``)."""
        return format_value(value, self.unit.recorded, digits, missing)


METRICS = {
    metric.name: metric
    for metric in (
        Metric("time_forward", "forward time", "forward", SECONDS, COPY_FLOOR, "track_ratio_forward"),
        Metric(
            "time_forward_backward",
            "forward-backward time",
            "fwd+bwd",
            SECONDS,
            COPY_FLOOR,
            "track_ratio_forward_backward",
        ),
        Metric("track_net_peak_forward", "forward net peak memory", "forward", BYTES, "track_min_peak_forward"),
        Metric(
            "track_net_peak_forward_backward",
            "forward-backward net peak memory",
            "fwd+bwd",
            BYTES,
            "track_min_peak_forward_backward",
        ),
    )
}


def format_spread(
    value: float | None, q_25: float | None, q_75: float | None, unit: str, digits: int = 3, with_unit: bool = True
) -> str:
    """A median ``value`` in its shown unit (without it: ``with_unit`` False, where a column names it) followed by
    the interquartile range of its samples, ``(IQR low-high)``, how far its calls spread over every process (none
    when a quartile is missing); "-" when there is no value."""
    if is_missing(value):
        return "-"
    shown = UNITS[unit]
    text = format_value(value, unit, digits) if with_unit else format_number(shown.scaled(value), digits)
    if is_missing(q_25) or is_missing(q_75):
        return text
    return f"{text} (IQR {format_number(shown.scaled(q_25), digits)}-{format_number(shown.scaled(q_75), digits)})"


# The paired ratios (benchmarks.ratios): a time over native's, measured paired inside each process.
RATIO_METRICS = {
    metric.name: metric
    for metric in (
        Metric("track_ratio_forward", "forward time / native's (paired)", "forward", RATIO, None),
        Metric("track_ratio_forward_backward", "forward-backward time / native's (paired)", "fwd+bwd", RATIO, None),
    )
}
SHOWN_METRICS = {**RATIO_METRICS, **METRICS}  # every figure a chart can plot, the paired ratios first
