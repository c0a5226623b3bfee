"""What the website says, computed from the tidy results table (``reports.results.load_results``).

Pure pandas, no plotting, so the tests can check every claim the site makes: the runs and the newest complete one
per machine and profile (a run of a selection never decides the picks), each run's cell table with its ratios to
``native`` and to the bounds, the winners and the recommendation by the stated ``Rule`` (a time ranked by the
paired ratios, with those tied with it; skipped and failed cells never win), the Pareto front beyond the noise, the
floors, asv's own step detection across commits (the site calls what it finds steps; a "regression" is only ever the
CI gate's verdict, ``reports.compare``), and the skipped cells. Names, units and bounds come from ``reports.units``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import pandas as pd
from asv.step_detect import detect_regressions, detect_steps

from benchmarks.allocator import NET_PEAK_RESOLUTION, REGIMES, regime_of_machine
from benchmarks.intervals import chained_ratio, summed_error
from benchmarks.runner import DIRECT_FLOORS_SUITE, FLOORS_SUITE, PAIRED_REFERENCE, PAIRED_SUITE, PAIRED_SUITES
from benchmarks.selections import WHOLE
from benchmarks.traffic import Sizes, analytic_minimum_bytes, copy_bytes_moved, minimum_bytes_moved
from benchmarks.vocabulary import (
    COPY_FLOOR,
    DIRECT_FLOOR_RATIOS,
    FILL_FLOOR,
    FLOOR_RATIOS,
    FRESH_OUTPUT_FLOOR,
    TIMED_PASSES,
    timed_metric,
    tracked_peak_metric,
)
from reports.run_level import RUN_LEVEL_FILE
from reports.units import BOUNDS, METRICS, RATIO_METRICS, SECONDS, Metric, format_spread

RUN_KEYS = ["machine", "env", "profile", "commit"]
REFERENCE_STRATEGY = PAIRED_REFERENCE  # the strategy every "x native" is over
STEP_THRESHOLD = 0.05  # asv's default `regressions_thresholds`: steps below 5% are not reported
MIN_TIME_SERIES = 3  # the fewest commits a time without an interval across processes needs for a step (``steps``)
# A strategy's own calls one after another (asv's samples, over native's) and its paired ratio time one call after
# different work. Where the first is slower than the second by more than this factor, beyond both spreads, its time
# depends on what ran before it. The two figures come from different processes, so the margin has to exceed how far
# a quotient of medians moves between runs of one commit, which ``unfold-bench stability`` measures
# (docs/stability-*.txt).
CONTEXT_FACTOR = 2.0
CONTEXT_TEXT = (
    f"its own calls one after another over {CONTEXT_FACTOR:g}x slower than its paired ratio to native (to copy_ "
    "where native cannot run) says, beyond both spreads, in either timed pass"
)


def regime_label(run_table: pd.DataFrame) -> str:
    """How charts and tables name the timing regime of one run's rows (``benchmarks.allocator.REGIMES``)."""
    names = set(run_table.timing_regime.dropna()) if "timing_regime" in run_table else set()
    return " / ".join(REGIMES[name].label if name in REGIMES else name for name in sorted(names)) or "unrecorded"


def other_regime_machines(machine: str) -> list[str]:
    """The names the same machine has in the other timing regimes (the regime is a suffix of the name)."""
    regime = regime_of_machine(machine)
    base = machine[: len(machine) - len(regime.machine_suffix)] if regime.machine_suffix else machine
    return [base + other.machine_suffix for other in REGIMES.values() if other is not regime]


def runs(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run: machine, env, profile, commit, date; in commit-date order."""
    return table[[*RUN_KEYS, "date"]].drop_duplicates(RUN_KEYS).sort_values(["date", "commit"], ignore_index=True)


COMPLETE_SHARE = 0.9  # a run that ran fewer cells than this share of its machine's and profile's most is partial


def latest_runs(table: pd.DataFrame) -> pd.DataFrame:
    """Each machine's and profile's newest **complete** run (if several environments ran that commit, the one with
    the most ``ok`` figures), so that a run of a selection (``make bench BENCH=conv2``) never decides the picks.

    A run is complete when a finished run recorded that it measured every cell (``benchmarks.selections``), and
    partial when it recorded a selection; a run without a record (older results, a killed run) is complete when it
    ran (``ok`` or ``failed``) at least ``COMPLETE_SHARE`` of the strategy x config x device cells of the machine's
    and profile's largest run. Where none is complete, the newest run stands. Column ``newer_partial``: the commits
    of newer partial runs left out (the site names them)."""
    cells = table[(table.suite == "unfold") & table.status.isin(["ok", "failed"])]
    ran = cells.drop_duplicates([*RUN_KEYS, "strategy", "config", "device"]).groupby(RUN_KEYS).size()
    ok_counts = table[table.status == "ok"].groupby(RUN_KEYS).size()
    all_runs = runs(table).join(ran.rename("cells_run"), on=RUN_KEYS).join(ok_counts.rename("ok_figures"), on=RUN_KEYS)
    all_runs = all_runs.fillna({"cells_run": 0, "ok_figures": 0}).sort_values(["date", "ok_figures"], kind="stable")
    largest = all_runs.groupby(["machine", "profile"]).cells_run.transform("max")
    recorded = table.groupby(RUN_KEYS).selection.agg(lambda s: WHOLE if (s == WHOLE).any() else s.dropna().max())
    selection = all_runs.join(recorded.rename("recorded"), on=RUN_KEYS).recorded
    by_count = all_runs.cells_run >= COMPLETE_SHARE * largest
    all_runs["complete"] = by_count.where(selection.isna(), selection == WHOLE).astype(bool)
    chosen = []
    for _, group in all_runs.groupby(["machine", "profile"], sort=True):
        complete = group[group.complete]
        run = (complete if not complete.empty else group).iloc[-1]
        newer = group[(group.date > run.date) & ~group.complete]
        chosen.append({**run.to_dict(), "newer_partial": list(dict.fromkeys(newer.commit))})
    columns = [*all_runs.columns, "newer_partial"]
    return pd.DataFrame(chosen, columns=columns).reset_index(drop=True)


def rows_where(frame: pd.DataFrame, **values: str) -> pd.DataFrame:
    """The rows of ``frame`` whose columns equal ``values``."""
    mask = pd.Series(True, index=frame.index)
    for column, value in values.items():
        mask &= frame[column] == value
    return frame[mask]


def select_run(table: pd.DataFrame, run: pd.Series | dict) -> pd.DataFrame:
    """The rows of one run (``run`` holds its ``RUN_KEYS``)."""
    return rows_where(table, **{key: run[key] for key in RUN_KEYS})


@dataclass(frozen=True)
class Replicates:
    """A paired cell's per-process ratios in the order of the replicates that measured them (each replicate is an
    asv run of its own that appends its process's sample: ``benchmarks.runner.Chunk``), and the run level its
    interval adds (``reports.run_level``; 0 where none). No samples: the reference's own ratio, exactly 1."""

    samples: tuple[float, ...]
    run_variance: float = 0.0
    run_df: float = math.inf
    lost: tuple[int, ...] = ()  # replicates the cell failed in: then its samples' positions do not name replicates

    @classmethod
    def of(cls, measured: pd.Series | Mapping) -> Replicates | None:
        """The replicates of a paired cell's row of ``load_results`` (None where it kept no samples)."""
        samples = measured.get("samples")
        if not isinstance(samples, list | tuple) or not samples:
            return None
        values = tuple(math.nan if v is None else float(v) for v in samples)  # screened by replicate_half_width
        lost = measured.get("lost_replicates")
        lost = tuple(lost) if isinstance(lost, list | tuple) else ()
        variance, df = measured.get("run_variance"), measured.get("run_df")
        if variance is None or pd.isna(variance) or variance <= 0:
            return cls(values, lost=lost)
        if df is None or pd.isna(df):
            return None  # a run level without its degrees of freedom: no interval that adds it can be trusted
        return cls(values, float(variance), float(df), lost)


EXACT_REPLICATES = Replicates(())  # the reference over itself


def cell_table(run_table: pd.DataFrame, device: str) -> pd.DataFrame:
    """One row per config x strategy of one run on ``device``.

    Columns per metric ``m`` of ``reports.units.METRICS``: ``m`` (value in seconds or bytes, NaN unless ``ok``),
    ``m:status``, ``m:q_25``, ``m:q_75``, ``m:x_native`` and ``m:x_bound``. Cells skipped for every metric
    are dropped (a strategy that does not support the config, or a device this machine lacks). ``m:x_native`` is
    the paired ratio of the suite ``ratios`` where the run measured one (``m:x_native_paired``, with its interval
    across processes ``m:x_native_low``/``m:x_native_high``), else the quotient of the two medians (older runs).
    A time's ``m:x_bound`` (over ``copy_``) and the forward's ``m:x_fill`` (over ``fill_``) are chained through
    native where the run measured both factors paired (``m:x_bound_paired``; ``benchmarks.floors``): the paired
    ratio to native times native's paired ratio to the floor, with the product's interval
    (``m:x_bound_low``/``m:x_bound_high``, ``m:x_fill_low``/``m:x_fill_high``); on a config native cannot run,
    they are the strategy's own paired ratios to the floors (``benchmarks.direct_floors``); otherwise ``m:x_bound``
    is the quotient of the two medians. ``m:own_loop`` is always that quotient (each side's own calls one after
    another), and ``m:context_dependent`` says where it exceeds the paired ratio by more than ``CONTEXT_FACTOR``
    beyond both spreads (the strategy's lower quartile over native's upper one, against the paired interval's high
    end; quartiles, since such a cell's samples are often two-humped, where asv's interval of the median falls
    apart): such a strategy's time depends on what ran before it. On a config native cannot run, both are taken
    against ``copy_`` instead, with the direct paired ratio to it (``m:own_loop_over`` names the reference).
    """
    rows = run_table[run_table.device == device]
    bound_rows = rows[rows.suite == "bounds"].set_index(["config", "metric"])
    bounds = bound_rows["value"].to_dict()
    bound_q25, bound_q75 = (bound_rows[q].to_dict() if q in bound_rows else {} for q in ("q_25", "q_75"))
    cells = rows[rows.suite == "unfold"]
    if cells.empty:
        return pd.DataFrame(columns=["config", "strategy"])
    native_rows = cells[cells.strategy == REFERENCE_STRATEGY].set_index(["config", "metric"])
    natives = native_rows["value"].to_dict()
    native_q75 = native_rows["q_75"].to_dict() if "q_75" in native_rows else {}
    measured_ok = rows[rows.status == "ok"]
    paired = _rows_by(measured_ok[measured_ok.suite == PAIRED_SUITE], ("config", "strategy", "metric"))
    floors = _rows_by(measured_ok[measured_ok.suite == FLOORS_SUITE], ("config", "metric"))
    direct = _rows_by(measured_ok[measured_ok.suite == DIRECT_FLOORS_SUITE], ("config", "strategy", "metric"))
    by_cell: dict[tuple[str, str], dict[str, dict]] = {}
    for key, row in _rows_by(cells.dropna(subset=["config", "strategy"]), ("config", "strategy", "metric")).items():
        by_cell.setdefault(key[:2], {})[key[2]] = row
    out = []
    for (config, strategy), by_metric in by_cell.items():
        if all(entry["status"] == "skipped" for entry in by_metric.values()):
            continue
        line: dict = {"config": config, "strategy": strategy}
        for metric, figure in METRICS.items():
            if metric not in by_metric:
                line[f"{metric}:status"] = "not run"
                line[metric] = math.nan
                continue
            entry = by_metric[metric]
            ok = entry["status"] == "ok"
            value = float(entry["value"]) if ok else math.nan
            line[metric] = value
            line[f"{metric}:status"] = entry["status"]
            line[f"{metric}:q_25"] = entry["q_25"] if ok else math.nan
            line[f"{metric}:q_75"] = entry["q_75"] if ok else math.nan
            line[f"{metric}:low"] = entry.get("low", math.nan) if ok else math.nan  # asv's 99% interval
            line[f"{metric}:high"] = entry.get("high", math.nan) if ok else math.nan
            line[f"{metric}:x_native"] = _ratio(value, natives.get((config, metric)))
            line[f"{metric}:own_loop"] = line[f"{metric}:x_native"]  # stays the quotient of the medians
            line[f"{metric}:own_loop_over"] = REFERENCE_STRATEGY
            line[f"{metric}:context_dependent"] = False
            line[f"{metric}:x_native_low"] = line[f"{metric}:x_native_high"] = math.nan
            line[f"{metric}:x_native_paired"] = False
            key = (config, strategy, figure.paired)
            if ok and figure.paired is not None and key in paired:
                measured = paired[key]
                line[f"{metric}:x_native"] = float(measured["value"])
                line[f"{metric}:x_native_low"], line[f"{metric}:x_native_high"] = measured["low"], measured["high"]
                line[f"{metric}:x_native_paired"] = True
                line[f"{metric}:x_native_replicates"] = Replicates.of(measured)
                own_low = _ratio(line[f"{metric}:q_25"], native_q75.get((config, metric)))
                paired_high = measured["high"] if pd.notna(measured["high"]) else measured["value"]  # one process
                line[f"{metric}:context_dependent"] = bool(own_low > CONTEXT_FACTOR * paired_high)
            elif ok and figure.paired is not None and strategy == REFERENCE_STRATEGY and paired:
                line[f"{metric}:x_native_low"] = line[f"{metric}:x_native_high"] = 1.0  # itself, exactly
                line[f"{metric}:x_native_paired"] = True
                line[f"{metric}:x_native_replicates"] = EXACT_REPLICATES
            line[f"{metric}:x_bound"] = _ratio(value, bounds.get((config, figure.bound)))
            for column, figures in (("bound", bounds), ("bound_q_25", bound_q25), ("bound_q_75", bound_q75)):
                line[f"{metric}:{column}"] = figures.get((config, figure.bound), math.nan)  # the bound's own
            line[f"{metric}:x_bound_low"] = line[f"{metric}:x_bound_high"] = math.nan
            line[f"{metric}:x_bound_paired"] = False
            if figure.paired is not None:
                _chain_floors(line, metric, config, floors, paired, is_reference=strategy == REFERENCE_STRATEGY)
                if ok:
                    _direct_floors(line, metric, config, direct, bound_q75.get((config, figure.bound)))
        out.append(line)
    return pd.DataFrame(out)


def _rows_by(rows: pd.DataFrame, keys: tuple[str, ...]) -> dict[tuple, dict]:
    """``rows`` as dicts by the values of ``keys``; a run's table holds one row a cell, and two are refused."""
    by_key = {}
    for row in rows.to_dict("records"):
        key = tuple(row[k] for k in keys)
        if key in by_key:
            raise ValueError(f"two rows of one cell in a run's table: {dict(zip(keys, key))}, suite {row['suite']!r}")
        by_key[key] = row
    return by_key


def cell_spread(row: pd.Series | Mapping, metric: str, digits: int = 3, with_unit: bool = True) -> str:
    """A ``cell_table`` row's median of ``metric`` with the interquartile range of its samples (``format_spread``)."""
    unit = METRICS[metric].unit.recorded
    return format_spread(row[metric], row.get(f"{metric}:q_25"), row.get(f"{metric}:q_75"), unit, digits, with_unit)


def _chain_floors(
    line: dict, metric: str, config: str, floors: Mapping[tuple, dict], paired: Mapping[tuple, dict], is_reference: bool
) -> None:
    """Fill ``line``'s time ``metric``'s ``x_bound`` (copy_) and, for the forward, ``x_fill`` (fill_) chained
    through native's paired ratios to the floors (``cell_table``), where the cell's own ratio to native is paired
    and the run measured the floor."""
    line[f"{metric}:x_fill"] = line[f"{metric}:x_fill_low"] = line[f"{metric}:x_fill_high"] = math.nan
    if not line[f"{metric}:x_native_paired"]:
        return
    to_native = None  # the reference's own row: the floor ratio is its figure
    if not is_reference:
        df = paired[config, line["strategy"], METRICS[metric].paired]["df"]
        to_native = tuple(line[f"{metric}:x_native{end}"] for end in ("", "_low", "_high")) + (df,)
    for bound, column in ((COPY_FLOOR, "x_bound"), (FILL_FLOOR, "x_fill")):
        floor_metric = FLOOR_RATIOS.get((TIMED_PASSES[metric], bound))
        key = (config, floor_metric)
        if floor_metric is None or key not in floors:
            continue
        floor = floors[key]
        measured = (float(floor["value"]), floor["low"], floor["high"], floor["df"])
        chained = measured[:3] if to_native is None else chained_ratio(to_native, measured)
        line[f"{metric}:{column}"], line[f"{metric}:{column}_low"], line[f"{metric}:{column}_high"] = chained
        line[f"{metric}:x_bound_paired"] |= column == "x_bound"


def _direct_floors(line: dict, metric: str, config: str, direct: Mapping[tuple, dict], copy_q75: float | None) -> None:
    """Fill ``line``'s time ``metric``'s ``x_bound`` and ``x_fill`` from the strategy's own paired ratios to the
    floors (``benchmarks.direct_floors``: a config the reference cannot run), where the run measured them and
    nothing was chained. There the context rule (``cell_table``) compares the strategy's own calls with ``copy_``'s
    (``copy_q75``, its upper quartile) against the paired ratio to ``copy_``, as it does with native's elsewhere."""
    if line[f"{metric}:x_bound_paired"]:
        return
    own_loop = line[f"{metric}:x_bound"]  # the quotient of the medians, before a paired ratio replaces it
    for bound, column in ((COPY_FLOOR, "x_bound"), (FILL_FLOOR, "x_fill")):
        key = (config, line["strategy"], DIRECT_FLOOR_RATIOS.get((TIMED_PASSES[metric], bound)))
        if key[2] is None or key not in direct:
            continue
        measured = direct[key]
        line[f"{metric}:{column}"] = float(measured["value"])
        line[f"{metric}:{column}_low"], line[f"{metric}:{column}_high"] = measured["low"], measured["high"]
        line[f"{metric}:{column}_replicates"] = Replicates.of(measured)
        line[f"{metric}:x_bound_paired"] |= column == "x_bound"
        if column == "x_bound" and not line[f"{metric}:x_native_paired"]:
            line[f"{metric}:own_loop"], line[f"{metric}:own_loop_over"] = own_loop, BOUNDS[COPY_FLOOR].short
            own_low = _ratio(line[f"{metric}:q_25"], copy_q75)
            paired_high = measured["high"] if pd.notna(measured["high"]) else measured["value"]
            line[f"{metric}:context_dependent"] = bool(own_low > CONTEXT_FACTOR * paired_high)


ROOFLINE_PAIRS = {metric: tracked_peak_metric(which) for metric, which in TIMED_PASSES.items()}


def fastest_against_bounds(cells: pd.DataFrame, set_aside: Mapping[str, str] = MappingProxyType({})) -> pd.DataFrame:
    """Per config and time metric of ``cell_table``: the fastest ``ok`` strategy (``fastest``: ranked by the paired
    ratios, with the strategies ``tied`` with it), its time over the ``copy_`` roofline with that ratio's interval,
    and its net peak over the analytic minimum (how close the suite's best comes to the hardware). ``set_aside``
    strategies (name -> why), and one whose time there depends on what ran before it, are never the fastest, as in
    ``recommend_per_config``."""
    columns = ["config", "metric", "strategy", "tied", "time", "time_q_25", "time_q_75", "x_copy", "x_copy_low"]
    columns += ["x_copy_high", "copy", "copy_q_25", "copy_q_75", "peak", "peak_x_minimum"]
    if cells.empty:
        return pd.DataFrame(columns=columns)
    out = []
    for config, rows in cells.groupby("config", sort=False):
        for time_metric, memory_metric in ROOFLINE_PAIRS.items():
            ok = rows[(rows[f"{time_metric}:status"] == "ok") & ~not_ranked(rows, set_aside)]
            if ok.empty:
                continue
            best, tied = fastest(ok, time_metric)
            out.append(
                {
                    "config": config,
                    "metric": time_metric,
                    "strategy": best.strategy,
                    "tied": tied,
                    "time": best[time_metric],
                    "time_q_25": best.get(f"{time_metric}:q_25", math.nan),
                    "time_q_75": best.get(f"{time_metric}:q_75", math.nan),
                    "x_copy": best[f"{time_metric}:x_bound"],
                    "x_copy_low": best.get(f"{time_metric}:x_bound_low", math.nan),
                    "x_copy_high": best.get(f"{time_metric}:x_bound_high", math.nan),
                    "copy": best.get(f"{time_metric}:bound", math.nan),
                    "copy_q_25": best.get(f"{time_metric}:bound_q_25", math.nan),
                    "copy_q_75": best.get(f"{time_metric}:bound_q_75", math.nan),
                    "peak": best.get(memory_metric, math.nan),
                    "peak_x_minimum": best.get(f"{memory_metric}:x_bound", math.nan),
                }
            )
    return pd.DataFrame(out, columns=columns)


def with_bandwidth(best: pd.DataFrame, sizes: Mapping[str, Sizes]) -> pd.DataFrame:
    """``fastest_against_bounds``'s rows (of one run, ``sizes`` its profile's configs' as the bench recorded them:
    ``Catalogue.profile_sizes``) with the achieved bandwidth, each figure with its spread (``_low``/``_high``):
    ``gb_per_s``, the least bytes the unfold must move (``benchmarks.traffic.minimum_bytes_moved``) over its median
    time, spread over its interquartile range; ``copy_gb_per_s``, the bytes ``copy_`` moves over ``copy_``'s own
    median in the same run (the machine's measured copy bandwidth), spread likewise; and ``of_copy``, the fastest's
    share of ``copy_``'s bandwidth from its paired ratio to ``copy_`` (``x_copy``: the bytes' ratio over it), with
    that ratio's interval. The first two are medians of different processes, so their quotient need not be
    ``of_copy``. NaN for a config the bench did not record, and where the fastest's net ``peak`` is below the
    analytic minimum: it did not write the contract's new output (the results committed up to ``f26b0bd`` have
    ``as_strided`` returning a view of its input on allcnnc-conv8, 4 KiB), so the bytes the contract must move say
    nothing about it."""
    columns = ["gb_per_s", "gb_per_s_low", "gb_per_s_high", "copy_gb_per_s", "copy_gb_per_s_low"]
    columns += ["copy_gb_per_s_high", "of_copy", "of_copy_low", "of_copy_high"]
    out = []
    for row in best.itertuples():
        config = sizes.get(row.config)
        if config is None:
            out.append(dict.fromkeys(columns, math.nan))
            continue
        backward = row.metric == "time_forward_backward"
        moved = minimum_bytes_moved(config, backward) / 1e9
        copied = copy_bytes_moved(config) / 1e9
        if getattr(row, "peak", math.nan) < analytic_minimum_bytes(config, backward):  # no new output written
            moved = math.nan
        line = {}
        for name, size, median, faster, slower in (
            ("gb_per_s", moved, row.time, getattr(row, "time_q_25", math.nan), getattr(row, "time_q_75", math.nan)),
            ("copy_gb_per_s", copied, *(getattr(row, c, math.nan) for c in ("copy", "copy_q_25", "copy_q_75"))),
            (
                "of_copy",
                moved / copied,
                row.x_copy,
                *(getattr(row, c, math.nan) for c in ("x_copy_low", "x_copy_high")),
            ),
        ):
            line[name], line[f"{name}_low"], line[f"{name}_high"] = (_ratio(size, t) for t in (median, slower, faster))
        out.append(line)
    return pd.concat([best.reset_index(drop=True), pd.DataFrame(out, columns=columns)], axis=1)


def floors_against_copy(run_table: pd.DataFrame, device: str) -> pd.DataFrame:
    """Per config of one run on ``device``: the write-only floor (``time_fill``) and the fresh-output floor
    (``time_fresh_output``: allocate and write, page faults included) as multiples of the ``copy_`` roofline.
    A strategy that returns a new tensor and takes its faults on first touch cannot beat the second, so it says
    how far a target in ``x copy_`` is reachable without reusing the output (one that faults its pages in first,
    as ``cpp`` does, can come in somewhat below it)."""
    floors = [FILL_FLOOR, FRESH_OUTPUT_FLOOR]
    bounds = run_table[(run_table.device == device) & (run_table.suite == "bounds") & (run_table.status == "ok")]
    wide = bounds.pivot_table(index="config", columns="metric", values="value", aggfunc="first", sort=False)
    wide = wide.reindex(columns=[COPY_FLOOR, *floors]).astype(float)
    copy = wide[COPY_FLOOR].where(wide[COPY_FLOOR] > 0)
    out = pd.DataFrame({f"{floor}:x_copy": wide[floor] / copy for floor in floors})
    return out.rename_axis("config").reset_index()


def _ratio(value: float, reference: float | None) -> float:
    if reference is None or pd.isna(reference) or reference <= 0 or pd.isna(value):
        return math.nan
    return value / reference


def _flagged(row: pd.Series | Mapping, metric: str) -> bool:
    flag = row.get(f"{metric}:context_dependent", False)
    return bool(pd.notna(flag) and flag)


def _context_flags(cells: pd.DataFrame) -> Iterator[tuple[pd.Series, str, Metric]]:
    """Each ``cell_table`` row and timed metric whose time depends on what ran before it (``m:context_dependent``)."""
    for _, row in cells.iterrows():
        for metric, figure in METRICS.items():
            if figure.unit is SECONDS and _flagged(row, metric):
                yield row, metric, figure


def context_dependent(cells: pd.DataFrame) -> dict[str, str]:
    """The strategies whose time depends on what ran before it on some config, in either timed pass (``cell_table``'s
    ``m:context_dependent``: a forward-backward holds the forward), each with why: the configs and its figures."""
    found: dict[str, list[str]] = {}
    for row, metric, figure in _context_flags(cells):
        over = row.get(f"{metric}:own_loop_over", REFERENCE_STRATEGY)
        paired = row[f"{metric}:x_native" if over == REFERENCE_STRATEGY else f"{metric}:x_bound"]
        found.setdefault(row.strategy, []).append(
            f"{row.config} {figure.label}: {row[f'{metric}:own_loop']:.2f}x {over} against {paired:.2f}x paired"
        )
    return {
        strategy: f"its own calls one after another are over {CONTEXT_FACTOR:g}x slower than its paired ratio says, "
        f"beyond both spreads ({'; '.join(figures)}): its time depends on what runs before it"
        for strategy, figures in found.items()
    }


def context_configs(cells: pd.DataFrame) -> dict[str, list[str]]:
    """Per strategy whose time depends on what ran before it somewhere (``context_dependent``), the configs where it
    does: the rankings leave it out there only."""
    found: dict[str, list[str]] = {}
    for row, _, _ in _context_flags(cells):
        if row.config not in found.setdefault(row.strategy, []):  # either pass flags the config
            found[row.strategy].append(row.config)
    return found


def not_ranked(rows: pd.DataFrame, set_aside: Mapping[str, str] = MappingProxyType({})) -> pd.Series:
    """Which of one config's ``rows`` no ranking takes: the ``set_aside`` strategies, and those whose time on that
    config depends on what ran before it (``context_dependent``)."""
    return rows.strategy.isin([*set_aside, *context_dependent(rows)])


def own_loop_note(row: pd.Series | Mapping, metric: str, sep: str = "; ", over: str | None = None) -> str:
    """What a paired ratio adds where the cell's time depends on what ran before it (``context_dependent``): its own
    calls one after another over its reference's (native's, or ``copy_``'s where native cannot run), marked; else
    nothing. ``over`` given: only where the note is over that reference (beside the ratio it qualifies)."""
    reference = row.get(f"{metric}:own_loop_over", REFERENCE_STRATEGY)
    if not _flagged(row, metric) or over not in (None, reference):
        return ""
    return f"{sep}own calls {row[f'{metric}:own_loop']:.2f}x {reference} (depends on what runs before it)"


def winners(cells: pd.DataFrame, set_aside: Mapping[str, str] = MappingProxyType({})) -> pd.DataFrame:
    """The best ``ok`` figure per config and metric among the strategies that can be shipped (not ``set_aside``):
    columns config, metric, strategy, value. A time's best is ``fastest``'s, ranked by the paired ratios among those
    whose time there does not depend on what ran before it, and every strategy statistically tied with it gets a row
    too; a net peak's is the lowest, and every strategy within ``NET_PEAK_RESOLUTION`` of it gets a row (smaller
    differences say nothing, as the picks' memory tie-break counts them)."""
    out = []
    for config, rows in cells.groupby("config", sort=False):
        for metric in METRICS:
            ok = rows[rows[f"{metric}:status"] == "ok"] if f"{metric}:status" in rows else rows.iloc[:0]
            if ok.empty:
                continue
            timed = METRICS[metric].unit is SECONDS
            ok = ok[~not_ranked(ok, set_aside)] if timed else ok[~ok.strategy.isin(list(set_aside))]
            if ok.empty:
                continue
            if timed:
                leader, tied = fastest(ok, metric)
                best = ok[ok.strategy.isin([leader.strategy, *tied])]
            else:  # within a net peak's resolution of the lowest, as the picks' tie-break counts it
                best = least_memory(ok, metric, NET_PEAK_RESOLUTION)
            for strategy, value in zip(best.strategy, best[metric]):
                out.append({"config": config, "metric": metric, "strategy": strategy, "value": value})
    return pd.DataFrame(out, columns=["config", "metric", "strategy", "value"])


@dataclass(frozen=True)
class Rule:
    """Fastest ``time_metric`` among strategies whose ``memory_metric`` is within ``tolerance`` x the lowest, plus
    ``slack`` bytes, the resolution of a net peak (``benchmarks.allocator.NET_PEAK_RESOLUTION``)."""

    name: str
    time_metric: str
    memory_metric: str
    tolerance: float = 1.2
    slack: int = NET_PEAK_RESOLUTION

    def memory_limit(self, lowest: float) -> float:
        """The most memory a strategy may take to be eligible, when the lowest of its rivals' is ``lowest``."""
        return self.tolerance * lowest + self.slack

    def _within(self) -> str:
        return f"within {self.tolerance:g}x of the lowest (plus {self.slack // 1024} KiB, its resolution)"

    def _labels(self) -> tuple[str, str]:
        return METRICS[self.time_metric].label, METRICS[self.memory_metric].label

    def short_text(self) -> str:
        time, memory = self._labels()
        return f"fastest {time} among strategies whose {memory} is {self._within()}"

    def per_config_text(self, own_calls_timed: bool = True) -> str:
        """The per-config rule in words; ``own_calls_timed`` False where only paired times exist (``advise``), so
        that a time's dependence on what ran before it cannot be seen."""
        time, memory = self._labels()
        context = f", and not one whose time there depends on what ran before it: {CONTEXT_TEXT}"
        return (
            f"the fastest {time} among the strategies whose {memory} is {self._within()} on that config (only "
            f"cells that ran and passed the correctness gate count{context if own_calls_timed else ''})"
        )

    def per_device_text(self) -> str:
        time, memory = self._labels()
        return (
            f"a strategy with a failed cell in either figure is out, and so is one whose time depends on what ran "
            f"before it on a config ({CONTEXT_TEXT}); every other one is scored over the configs "
            f"it supports: T, the geometric mean of its {time} divided by the config's fastest, and M, its "
            f"{memory} summed over those configs divided by the sum of each config's lowest (a sum, so that a "
            f"config whose lowest is zero (a view, in results up to commit f26b0bd) still counts, and the largest "
            f"layers, which set a process's peak, weigh most); among those with M within {self.tolerance:g}x of the "
            f"lowest M (plus {self.slack // 1024} KiB, a net peak's resolution, on each config it sums), the "
            "lowest T is recommended; a config a strategy does not support is not held against it, and is listed"
        )


RULES = (
    Rule(
        "training (forward and backward)",
        timed_metric("forward_backward"),
        tracked_peak_metric("forward_backward"),
    ),
    Rule("forward only (e.g. KFAC statistics)", timed_metric("forward"), tracked_peak_metric("forward")),
)


def _eligible(rows: pd.DataFrame, rule: Rule, set_aside: Mapping[str, str]) -> pd.DataFrame:
    ok = rows[(rows[f"{rule.time_metric}:status"] == "ok") & (rows[f"{rule.memory_metric}:status"] == "ok")]
    ok = ok[~not_ranked(ok, set_aside)]  # on this config
    if ok.empty:
        return ok
    return ok[ok[rule.memory_metric] <= rule.memory_limit(ok[rule.memory_metric].min())]


TIE_TEXT = (
    "strategies whose intervals overlap the leader's are a statistical tie (except one that another of them beats "
    "beyond the noise); among them the pick is the one with "
    f"the least memory (memory within a net peak's resolution, {NET_PEAK_RESOLUTION // 1024} KiB a config, of the "
    "least counts as the least), then the simplest (the fewest of: torch.compile, a C++ extension, a reused "
    "output, huge-page advice), then the fastest"
)


def paired_yardstick(rows: pd.DataFrame, metric: str) -> str | None:
    """The paired ratio one config's ``rows`` are ranked by: to the reference (``x_native``) where every row has one,
    else to ``copy_`` (``x_bound``, where the reference does not run) where every row has that; None otherwise."""
    for yardstick in ("x_native", "x_bound"):
        column = f"{metric}:{yardstick}_paired"
        if column in rows and rows[column].fillna(False).astype(bool).all():
            return yardstick
    return None


def relative_times(rows: pd.DataFrame, metric: str, among: pd.Series | None = None) -> pd.DataFrame:
    """Per row of one config's ``rows`` (``ok`` in ``metric``): its time over the fastest row's (``relative``) with
    an interval (``low``, ``high``). Where every row has a paired ratio to the reference (``m:x_native_paired``)
    these come from the paired ratios and their intervals across processes; where the reference does not run and
    every row has a paired ratio to ``copy_`` (``m:x_bound_paired``: ``benchmarks.direct_floors``), from those;
    otherwise (an older run) from the medians, with asv's interval of each median (``median_ends``). With the
    paired ratios, each row's ``replicates`` (``Replicates``, or None) and the log of the fastest row's ratio
    (``log_fastest``), from which ``recommend`` works out the per-replicate score. ``among`` (a mask of ``rows``;
    default all): the rows whose ratios choose the yardstick and whose fastest every row is over, so that rows no
    ranking takes are placed on the ranked rows' scale (NaN where such a row lacks that yardstick's ratio)."""
    basis = rows if among is None else rows[among]
    yardstick = paired_yardstick(basis, metric)
    if yardstick is not None:
        ratio = rows[f"{metric}:{yardstick}"].astype(float)
        fastest = ratio[basis.index].min()
        replicates = rows.get(f"{metric}:{yardstick}_replicates", pd.Series(None, index=rows.index))
        return pd.DataFrame(
            {
                "relative": ratio / fastest,
                "low": rows[f"{metric}:{yardstick}_low"].astype(float) / fastest,
                "high": rows[f"{metric}:{yardstick}_high"].astype(float) / fastest,
                "replicates": replicates.astype(object).where(replicates.notna(), None),
                "log_fastest": math.log(fastest) if fastest > 0 else math.nan,
            },
            index=rows.index,
        )
    time = rows[metric].astype(float)
    ends = median_ends(rows, metric)
    fastest = time[basis.index].min()
    return pd.DataFrame(
        {"relative": time / fastest, "low": ends[0] / fastest, "high": ends[1] / fastest, "replicates": None},
        index=rows.index,
    )


def median_ends(cells: pd.DataFrame | pd.Series, metric: str) -> tuple:
    """asv's interval of each median ``metric`` of ``cells`` (rows of ``cell_table``, or one row): NaN where it has
    none, and where an end is at or below zero, which asv's normal approximation gives a few wide samples: a time has
    no such bound, and a ratio or a geometric mean of the ends cannot take it."""

    def positive(end: str):
        value = pd.to_numeric(cells.get(f"{metric}:{end}", math.nan), errors="coerce")
        return value.where(value > 0) if isinstance(value, pd.Series) else float(value) if value > 0 else math.nan

    return positive("low"), positive("high")


def fastest(rows: pd.DataFrame, metric: str) -> tuple[pd.Series, list[str]]:
    """The fastest of one config's ``rows`` (each ``ok`` in ``metric``) as ``relative_times`` ranks them (by the
    paired ratios where every row has one, not by medians from different processes), and the other strategies
    statistically tied with it (``tied_with_leader``), by name."""
    times = relative_times(rows, metric)
    leader = times.relative.idxmin()
    tied = tied_with_leader(times.relative, times.low, times.high)
    return rows.loc[leader], sorted(rows.loc[i, "strategy"] for i in tied if i != leader)


def tied_with_leader(relative: pd.Series, low: pd.Series, high: pd.Series) -> list:
    """The index labels tied with the leader (the lowest ``relative``): the leader, and every row whose interval
    ``[low, high]`` overlaps the leader's (none without intervals), but for a row that another of them beats beyond
    the noise (its interval wholly below the row's): a leader with a wide interval overlaps rows that are apart
    from each other, and the tie-break must not pick one that a tied strategy is faster than."""
    leader = relative.idxmin()
    if pd.isna(high[leader]):
        return [leader]
    tied = [i for i in relative.index if i == leader or (not pd.isna(low[i]) and low[i] <= high[leader])]
    return [i for i in tied if i == leader or not any(high[j] < low[i] for j in tied if not pd.isna(high[j]))]


def least_memory(rows: pd.DataFrame, memory: str, resolution: float | pd.Series) -> pd.DataFrame:
    """The ``rows`` whose ``memory`` exceeds the least by no more than ``resolution`` (one for all, or per row): net
    peaks that differ by less than a net peak's resolution say nothing, so these all count as the least."""
    return rows[rows[memory] <= rows[memory].min() + resolution]


def break_tie(
    tied: pd.DataFrame, memory: str, complexity: Mapping[str, int], time: str, resolution: float | pd.Series
) -> pd.Series:
    """The row of ``tied`` with the least ``memory``, then the lowest ``complexity``, then the lowest ``time``. A row
    whose ``memory`` exceeds the least by no more than its ``resolution`` (in ``memory``'s units: per row, or one for
    all) counts as the least: net peaks that differ by less than ``NET_PEAK_RESOLUTION`` say nothing, and a tie
    broken by a few pages of the allocator's bookkeeping would rank inside that noise."""
    least = least_memory(tied, memory, resolution)
    order = least.assign(_complexity=[complexity.get(s, 0) for s in least.strategy])
    return order.sort_values(["_complexity", time, memory, "strategy"], kind="stable").iloc[0]


def recommend_per_config(
    cells: pd.DataFrame,
    rule: Rule,
    set_aside: Mapping[str, str] = MappingProxyType({}),
    complexity: Mapping[str, int] = MappingProxyType({}),
) -> pd.DataFrame:
    """Per config: the pick under ``rule`` (None when no strategy qualifies), the eligible strategies and the
    strategies tied for the fastest (``TIE_TEXT``: the pick is then the tie-break's).

    ``set_aside``: strategies never picked (name -> why), e.g. those that overwrite their previous result;
    ``complexity``: each strategy's machinery count (``reports.set_aside.complexity``), the second tie-break.
    """
    out = []
    for config, rows in cells.groupby("config", sort=False):
        eligible = _eligible(rows, rule, set_aside)
        pick, tied = None, []
        if not eligible.empty:
            times = relative_times(eligible, rule.time_metric)
            tied_index = tied_with_leader(times.relative, times.low, times.high)
            tied = sorted(eligible.loc[tied_index, "strategy"])
            tied_rows = eligible.loc[tied_index].assign(_relative=times.relative)  # faster: by the paired ratio
            pick = break_tie(tied_rows, rule.memory_metric, complexity, "_relative", rule.slack)
        out.append(
            {
                "config": config,
                "strategy": None if pick is None else pick.strategy,
                "time": math.nan if pick is None else pick[rule.time_metric],
                "eligible": sorted(eligible.strategy),
                "tied": tied if len(tied) > 1 else [],
            }
        )
    return pd.DataFrame(out, columns=["config", "strategy", "time", "eligible", "tied"])


@dataclass(frozen=True)
class Recommendation:
    rule: Rule
    strategy: str | None  # None: every strategy failed somewhere
    score: float  # T: geometric mean of time / the config's fastest (1.0: fastest everywhere it runs)
    configs: list[str]  # the configs the recommended strategy covers
    not_covered: list[str]  # configs it does not support (skipped)
    ranking: pd.DataFrame  # strategy, time_score (T), time_low, time_high, memory_score (M), eligible, why_not, ...
    tied: tuple[str, ...] = ()  # the eligible strategies statistically tied with the fastest (empty: no tie)
    low: float = math.nan  # T's interval (the ranking's time_low, time_high); nan where a config has none
    high: float = math.nan


def _geometric_mean(values: list[float]) -> float:
    return statistics.geometric_mean(values) if values else math.nan


def replicate_half_width(own: pd.DataFrame) -> float | None:
    """The half-width on the logs of T's interval from the replicates, for one strategy's rows of ``relative_times``
    over the configs it covers; None where their replicates do not line up (a row without them, a cell that lost a
    replicate, or a count that differs), and T's interval falls back to the geometric mean of the per-config
    intervals' ends.

    Replicate :math:`r` scores the strategy :math:`T_r = \\frac{1}{C} \\sum_c (\\log x_{c,r} - \\log f_c)`, its ratio
    in that replicate's process over each config's fastest :math:`f_c`; their mean over the :math:`k` replicates is
    :math:`\\log T`. Its error is :math:`s_T^2 / k` at :math:`k - 1` degrees of freedom, plus the run level, whatever
    the configs share within a replicate (its processes fork from one server), where the ends of independent
    per-config intervals would be too wide if they share nothing and the sum of their variances too narrow if they
    share much."""
    if "replicates" not in own or any(r is None for r in own.replicates):
        return None
    measured = [r for r in own.replicates if r.samples]
    if not measured:
        return 0.0  # the reference itself: exactly its ratio on every config
    if any(r.lost for r in measured):
        return None
    k = len(measured[0].samples)
    if k < 2 or any(len(r.samples) != k or not all(math.isfinite(v) and v > 0 for v in r.samples) for r in measured):
        return None
    logs = [
        np.log(r.samples) - shift if r.samples else np.full(k, -shift)
        for r, shift in zip(own.replicates, own.log_fastest)
    ]
    per_replicate = np.mean(logs, axis=0)
    if not np.isfinite(per_replicate).all():
        return None
    terms = [(float(per_replicate.var(ddof=1)) / k, float(k - 1))]
    levels = [r for r in measured if r.run_variance > 0]
    if levels:
        terms.append((statistics.fmean(r.run_variance for r in levels), min(r.run_df for r in levels)))
    return summed_error(terms)[0]


def _against_shippable(rows: pd.DataFrame, shippable: pd.DataFrame, metric: str) -> pd.DataFrame:
    """A set-aside strategy's ``rows`` over the shippable fastest of each config (``relative``, ``low``, ``high``),
    by the yardstick ``relative_times`` ranks that config by: the paired ratios to native, or to ``copy_`` where
    native cannot run, with the interval of its own, where it and every shippable row of the config have one; else
    by the medians, without an interval."""
    out = []
    for index, row in rows.iterrows():
        rivals = shippable[shippable.config == row.config]
        yardstick = paired_yardstick(pd.concat([rivals, rows.loc[[index]]]), metric)
        if yardstick is None:
            relative = row[metric] / rivals[metric].astype(float).min()
            out.append({"relative": relative, "low": math.nan, "high": math.nan})
            continue
        fastest = rivals[f"{metric}:{yardstick}"].astype(float).min()
        out.append({end: row[f"{metric}:{yardstick}{suffix}"] / fastest for end, suffix in RATIO_ENDS})
    return pd.DataFrame(out, columns=["relative", "low", "high"])


RATIO_ENDS = (("relative", ""), ("low", "_low"), ("high", "_high"))  # a ratio's columns and its interval's


def recommend(
    cells: pd.DataFrame,
    rule: Rule,
    set_aside: Mapping[str, str] = MappingProxyType({}),
    complexity: Mapping[str, int] = MappingProxyType({}),
) -> Recommendation:
    """The per-device recommendation under ``rule`` (see ``Rule.per_device_text``); ``set_aside`` strategies
    (name -> why), and those whose time depends on what ran before it on a config (``context_dependent``), are
    scored and listed but never recommended. T's interval comes from the replicates
    (``replicate_half_width``), or else is the geometric mean of the per-config intervals' ends
    (``relative_times``); strategies tied with the fastest T are broken as ``TIE_TEXT`` says,
    with ``complexity`` (strategy -> machinery count) the second key; M counts as the least within the net peaks'
    resolution (``Rule.slack``) on each config the strategy covers, in the tie-break and in the memory limit."""
    set_aside = {**context_dependent(cells), **set_aside}  # a default must not hang on what runs around it
    columns = ["strategy", "time_score", "time_low", "time_high", "memory_score", "eligible", "why_not", "configs"]
    columns.append("not_covered")
    all_configs = list(dict.fromkeys(cells.config))
    time_status, memory_status = f"{rule.time_metric}:status", f"{rule.memory_metric}:status"
    ok = cells[(cells[time_status] == "ok") & (cells[memory_status] == "ok")]
    shippable = ok[~ok.strategy.isin(list(set_aside))]  # scores are relative to what could be recommended
    relative = pd.concat(
        [relative_times(rows, rule.time_metric) for _, rows in shippable.groupby("config", sort=False)]
        + [pd.DataFrame(columns=["relative", "low", "high", "replicates", "log_fastest"])]
    )
    lowest = shippable.groupby("config")[rule.memory_metric].min()
    scores = []
    resolution: dict[str, float] = {}  # per strategy, a net peak's resolution on each config it covers, in M's units
    for strategy, rows in cells.groupby("strategy", sort=False):
        failed = sorted(rows[(rows[[time_status, memory_status]] == "failed").any(axis=1)].config)
        ran = ok[ok.strategy == strategy]
        covered = list(ran.config)
        not_covered = [c for c in all_configs if c not in covered]
        if failed or ran.empty:
            why = f"failed on {', '.join(failed)}" if failed else "no figure"
            scores.append([strategy, math.nan, math.nan, math.nan, math.nan, False, why, covered, not_covered])
            continue
        ran = ran[ran.config.isin(lowest.index)]  # a config only set-aside strategies ran has no yardstick
        if strategy in set(shippable.strategy):
            own = relative.loc[ran.index]
        else:  # a set-aside strategy is scored against the shippable fastest of each config
            own = _against_shippable(ran, shippable, rule.time_metric)
        floor = lowest[ran.config].sum()
        memory = ran[rule.memory_metric].sum() / floor if floor > 0 else 1.0
        resolution[strategy] = rule.slack * len(ran) / floor if floor > 0 else 0.0
        why_not = set_aside.get(strategy, "")
        score, half = _geometric_mean(list(own.relative)), replicate_half_width(own)
        if half is None:
            ends = [_geometric_mean(list(own[end])) if own[end].notna().all() else math.nan for end in ("low", "high")]
        else:
            ends = [score * math.exp(-half), score * math.exp(half)]
        row = [strategy, score, *ends, memory, not why_not, why_not, covered]
        scores.append([*row, not_covered])
    ranking = pd.DataFrame(scores, columns=columns)
    if not ranking.eligible.any():
        return Recommendation(rule, None, math.nan, [], all_configs, ranking)
    candidates = ranking.eligible
    allowance = ranking.strategy.map(resolution).fillna(0.0)  # as the per-config limit's slack, once per config
    limit = rule.tolerance * ranking.memory_score[candidates].min() + allowance
    too_much = candidates & (ranking.memory_score > limit)
    ranking.loc[too_much, "eligible"] = False
    ranking.loc[too_much, "why_not"] = f"M over {rule.tolerance:g}x the lowest plus {rule.slack // 1024} KiB a config"
    ranking = ranking.sort_values(["eligible", "time_score", "strategy"], ascending=[False, True, True])
    ranking = ranking.reset_index(drop=True)
    eligible = ranking[ranking.eligible]
    tied_index = tied_with_leader(eligible.time_score, eligible.time_low, eligible.time_high)
    tied_rows = eligible.loc[tied_index]
    best = break_tie(
        tied_rows, "memory_score", complexity, "time_score", tied_rows.strategy.map(resolution).fillna(0.0)
    )
    tied = tuple(sorted(eligible.loc[tied_index, "strategy"])) if len(tied_index) > 1 else ()
    return Recommendation(
        rule,
        best.strategy,
        best.time_score,
        best.configs,
        best.not_covered,
        ranking,
        tied,
        best.time_low,
        best.time_high,
    )


def lacking(record: Mapping | None, device: str, capability: str) -> dict[str, str]:
    """The strategies a capability matrix (``unfold-bench capabilities``) does not show working for ``capability``
    on ``device``, each with its cell (to set aside when a user needs that capability): an unverified cell counts
    too, since a user who needs the capability cannot rely on it; there are none without a matrix."""
    rows = (record or {}).get("cells", {}).get(device, {})
    return {
        s: f"no {capability} ({row[capability]})" for s, row in rows.items() if row.get(capability, "works") != "works"
    }


def needs_picks(
    cells: pd.DataFrame,
    rule: Rule,
    record: Mapping | None,
    device: str,
    set_aside: Mapping[str, str],
    complexity: Mapping[str, int] = MappingProxyType({}),
) -> list[tuple[str, str | None]]:
    """(capability, pick under ``rule`` among the strategies that work for it) for every capability of the matrix
    that some strategy of ``cells`` lacks: which strategy to ship when the user's code needs that capability, with
    the ties broken as the recommendation's are (``complexity``, as ``recommend`` takes it)."""
    picks = []
    for capability in (record or {}).get("capabilities", []):
        without = {s: why for s, why in lacking(record, device, capability).items() if s in set(cells.strategy)}
        if without:
            picks.append((capability, recommend(cells, rule, {**set_aside, **without}, complexity).strategy))
    return picks


def other_regime_picks(
    table: pd.DataFrame,
    run: Mapping[str, str],
    device: str,
    rule: Rule,
    set_aside: Mapping[str, str],
    complexity: Mapping[str, int] = MappingProxyType({}),
) -> list[tuple[str, str | None, str]]:
    """(regime label, pick under ``rule``, commit) of ``run``'s machine in each other timing regime: its newest run
    of the same profile there (regimes with no such run are left out), with the ties broken as the recommendation's
    are (``complexity``, as ``recommend`` takes it). The sentence both the site and the terminal summary print
    beside a recommendation is ``regime_note``."""
    picks = []
    latest = latest_runs(table)
    for machine in other_regime_machines(run["machine"]):
        other = latest[(latest.machine == machine) & (latest.profile == run["profile"])]
        if other.empty:
            continue
        cells = cell_table(select_run(table, other.iloc[0]), device)
        if not cells.empty:
            pick = recommend(cells, rule, set_aside, complexity).strategy
            picks.append((regime_of_machine(machine).label, pick, str(other.iloc[0].commit)))
    return picks


def regime_note(machine: str, pick: str | None, other_picks: list[tuple[str, str | None, str]], commit: str) -> str:
    """Which regime a recommendation (of a run at ``commit``) was timed in, and whether each other regime picks the
    same strategy, naming that regime's run where it timed another commit (the code may differ, not only the
    regime)."""
    note = f"Timed in the {regime_of_machine(machine).label} regime."
    for label, other, other_commit in other_picks:
        verdict = "the same" if other == pick else (other or "none")
        if other_commit != commit:
            note += (
                f" The {label} regime's newest run, of commit {other_commit[:8]} (not this run's {commit[:8]}: "
                f"the code may differ as well as the regime), picks {verdict}."
            )
        elif other == pick:
            note += f" The {label} regime picks the same."
        else:
            note += (
                f" The {label} regime picks {verdict} (the regimes disagree: which fits depends on "
                "whether your outputs land on memory the process already touched)."
            )
    return note


def tradeoff(
    rows: pd.DataFrame, time_metric: str, memory_metric: str, set_aside: Mapping[str, str] = MappingProxyType({})
) -> pd.DataFrame:
    """One config's ``rows`` (``cell_table``) as points of time against memory, with the Pareto front.

    Per row with both figures: its time over the fastest that the picks could take, with an interval (``relative``,
    ``low``, ``high``: ``relative_times`` over the rows ``not_ranked`` leaves, so from the paired ratios where the run
    has them, ``paired`` True, and else from medians of different processes with asv's interval of each), its
    ``memory``, ``ranked`` (False: ``set_aside``, ``aside`` saying why, or its time there depends on what ran before
    it), and whether it is
    ``on_front``: ranked and dominated by no ranked row. One row dominates another when its time is no higher and
    its memory no more (within a net peak's resolution, ``NET_PEAK_RESOLUTION``), and it is better in one of the two
    beyond the noise: faster with its interval wholly below the other's (a missing end is open, a row without an
    interval a point), or less memory by more than that resolution. So of two rows tied in time the one with less
    memory dominates, as the picks' tie-break prefers it, and rows tied in both are both on the front.
    """
    columns = ["strategy", "relative", "low", "high", "memory", "ranked", "on_front", "paired", "aside"]
    valid = rows[rows[time_metric].notna() & rows[memory_metric].notna()]
    ranked = ~not_ranked(valid, set_aside)
    if not ranked.any():
        return pd.DataFrame(columns=columns)
    points = relative_times(valid, time_metric, among=ranked)[["relative", "low", "high"]]
    points.insert(0, "strategy", valid.strategy)
    points["memory"] = valid[memory_metric].astype(float)
    points["ranked"] = ranked
    points["paired"] = paired_yardstick(valid[ranked], time_metric) is not None
    points["aside"] = [set_aside.get(name, "") for name in points.strategy]  # context: own_loop_note says it
    points = points[points.relative.notna()]
    no_interval = points.low.isna() & points.high.isna()
    lower = points.low.where(points.low.notna(), np.where(no_interval, points.relative, 0.0))
    upper = points.high.where(points.high.notna(), np.where(no_interval, points.relative, math.inf))

    def dominates(a: object, b: object) -> bool:
        no_slower = points.relative[a] <= points.relative[b]
        no_more_memory = points.memory[a] <= points.memory[b] + NET_PEAK_RESOLUTION
        faster = upper[a] < lower[b]
        less_memory = points.memory[a] < points.memory[b] - NET_PEAK_RESOLUTION
        return no_slower and no_more_memory and (faster or less_memory)

    contenders = points.index[points.ranked]
    points["on_front"] = [
        bool(points.ranked[i]) and not any(dominates(j, i) for j in contenders if j != i) for i in points.index
    ]
    return points[columns]


def series(table: pd.DataFrame) -> pd.DataFrame:
    """The strategies' figures and paired ratios across commits: one row per (machine, env, profile, device,
    config, strategy, metric, commit), with the commit's position in its machine's run order (``order``)."""
    figures = (table.suite == "unfold") & table.metric.isin(list(METRICS))
    cells = table[figures | ((table.suite == PAIRED_SUITE) & table.metric.isin(list(RATIO_METRICS)))].copy()
    order = runs(table).drop_duplicates(["machine", "env", "commit"]).copy()
    order["order"] = order.groupby(["machine", "env"]).cumcount()
    cells = cells.merge(order[["machine", "env", "commit", "order"]], on=["machine", "env", "commit"])
    return cells.sort_values("order", ignore_index=True, kind="stable")  # keeps the config table's order


def steps(history: pd.DataFrame, threshold: float = STEP_THRESHOLD) -> pd.DataFrame:
    """Upward steps (slower or hungrier) in each series of ``series(table)``, found by asv's step detection.

    A step is reported where asv's ``detect_regressions`` finds one: the last commit at the good level
    (``before``), the first at the worse level (``after``), and the two levels (asv's own second value is the best
    level anywhere after the step, which can lie below the first: the level that starts at ``after`` is reported,
    and a step whose level there is not above the one before by ``threshold`` is not a step up). ``native_too``: a
    time's or memory's step that native (torch's own unfold, whose code no commit changes) takes at the same commit,
    and by as much (within ``threshold``): the machine's or the run's, not the strategy's. Failed and skipped
    points are left out of the series (they are not measurements). A change of the machine's allocator variant
    (e.g. glibc's mmap threshold pinned or dynamic) starts a new series: it moves time and memory without a
    code change, so a step across it is not a step of the code. What the noise could explain is not a step: a paired
    ratio's step needs the ``before`` and ``after`` intervals across processes apart, and a time, whose noise is
    between processes that its one run does not show, needs a series of at least ``MIN_TIME_SERIES`` points, from
    which asv's detection estimates it.
    """
    keys = ["machine", "env", "profile", "allocator", "device", "config", "strategy", "metric"]
    out = []
    for key, rows in history[history.status == "ok"].groupby(keys, sort=True, dropna=False):
        rows = rows.sort_values("order")
        metric = dict(zip(keys, key))["metric"]
        paired = metric in RATIO_METRICS  # its low and high: the interval across processes (a time's: asv's)
        with_intervals = paired and {"low", "high"} <= set(rows) and rows[["low", "high"]].notna().all(axis=None)
        timed = metric in METRICS and METRICS[metric].unit is SECONDS
        if len(rows) < (MIN_TIME_SERIES if timed and not with_intervals else 2):
            continue
        values = rows.value.astype(float).tolist()
        levels = detect_steps(values)
        level_from = {first: level for first, _, level, _, _ in levels}
        _, _, found = detect_regressions(levels, threshold=threshold)
        for before, after, value_before, _ in found or []:  # asv's last item: the best value after, not the level
            value_after = level_from.get(after, values[after])
            if value_after <= value_before * (1 + threshold):
                continue  # asv reports it as a regression towards a later, lower value: not a step up here
            if with_intervals and rows.low.iloc[after] <= rows.high.iloc[before]:
                continue  # the two commits' intervals overlap
            out.append(
                {
                    **dict(zip(keys, key)),
                    "commit_before": rows.commit.iloc[before],
                    "commit_after": rows.commit.iloc[after],
                    "value_before": value_before,
                    "value_after": value_after,
                    "ratio": value_after / value_before if value_before > 0 else math.inf,
                }
            )
    columns = [*keys, "commit_before", "commit_after", "value_before", "value_after", "ratio", "native_too"]
    found = pd.DataFrame(out, columns=columns)
    # native's code is torch's own unfold, the same at every commit of one environment: a time or memory step it
    # shares, no larger than native's own beyond the threshold, is the machine's or the run's
    where = [k for k in keys if k != "strategy"] + ["commit_after"]
    native = found[found.strategy == REFERENCE_STRATEGY]
    native_ratio = dict(zip(map(tuple, native[where].astype(str).values), native.ratio))
    found["native_too"] = [
        row.strategy != REFERENCE_STRATEGY
        and row.metric in METRICS
        and row.ratio <= native_ratio.get(tuple(str(row[k]) for k in where), 0.0) * (1 + threshold)
        for _, row in found.iterrows()
    ]
    return found


regressions = steps  # the name it had


# what each paired suite's ratios are to a reader of the site and the summary
PAIRED_FIGURES = {
    PAIRED_SUITE: "x native",
    FLOORS_SUITE: "x copy_ (through native)",
    DIRECT_FLOORS_SUITE: "x copy_ (where native cannot run)",
}


def run_level_note(run_table: pd.DataFrame) -> str:
    """Whether one run's paired intervals hold the spread between runs: the suites whose intervals a run level
    recorded for the machine widened (``reports.run_level``), and those across processes alone, for want of one;
    "" for a run without paired ratios."""
    paired = run_table[run_table.suite.isin(PAIRED_SUITES) & run_table.processes.notna()]
    if paired.empty:
        return ""
    widened = sorted(set(paired.suite[paired.run_variance.notna()]), key=list(PAIRED_FIGURES).index)
    alone = sorted(set(paired.suite) - set(widened), key=list(PAIRED_FIGURES).index)
    machine, profile = paired.machine.iloc[0], paired.profile.iloc[0]
    parts = []
    if widened:
        parts.append(
            f"the paired intervals of {', '.join(map(PAIRED_FIGURES.get, widened))} hold the spread between runs "
            f"recorded for {machine} "
            f"(results/{machine}/{RUN_LEVEL_FILE})"
        )
    if alone:
        which = "those" if widened else "the paired intervals"
        parts.append(
            f"{which} of {', '.join(map(PAIRED_FIGURES.get, alone))} are across processes alone: no run level is "
            f"recorded for {machine} at the "
            f"{profile} profile (unfold-bench stability records one), so they are narrower than what another run "
            "would show"
        )
    return "Intervals: " + "; ".join(parts) + "."


def unmeasured_note(run_table: pd.DataFrame, device: str, strategies: Mapping[str, Mapping]) -> str:
    """The strategies registered now (``strategies``, the catalogue's records) for ``device`` of which one run has no
    figure there (registered after it, left out of its registry, or skipped on every cell), whom its picks therefore
    do not weigh; "" where it measured every one. A strategy whose cells failed was measured: the picks weigh its
    failures."""
    ran = run_table.status.isin(["ok", "failed"])
    measured = set(run_table.strategy[(run_table.device == device) & ran].dropna())
    missing = sorted(name for name, record in strategies.items() if device in record.get("devices", (device,)))
    missing = [name for name in missing if name not in measured]
    if not missing:
        return ""
    return (
        f"Not measured by this run: {', '.join(missing)} (registered on {device} now, no figure of it in this "
        "run); its picks weigh only the strategies it measured. A newer complete run would judge them."
    )


def short_cells(run_table: pd.DataFrame, device: str | None = None) -> pd.DataFrame:
    """The paired cells of one run that failed in some of its replicates and kept the others' samples
    (``benchmarks.kept_samples``), on ``device`` only if given: their intervals are the wider for it, and the picks'
    per-replicate score falls back to the per-config ends. Their suite, metric, strategy (NaN for the reference's
    floors), config, device, processes and lost_replicates."""
    lost = run_table.lost_replicates.map(lambda r: isinstance(r, list | tuple) and len(r) > 0).astype(bool)
    rows = run_table[(run_table.status == "ok") & run_table.processes.notna() & lost]
    if device is not None:
        rows = rows[rows.device == device]
    return rows[["suite", "metric", "strategy", "config", "device", "processes", "lost_replicates"]]


def lost_text(row) -> str:
    """How many processes a ``short_cells`` row kept and which replicates it lost: "6 of 7 processes (replicate 3
    failed)"."""
    lost = list(row.lost_replicates)
    which = f"replicate{'s' if len(lost) > 1 else ''} {', '.join(map(str, lost))} failed"
    return f"{int(row.processes)} of {int(row.processes) + len(lost)} processes ({which})"


def metric_label(row) -> str:
    """A row's metric as the summary and the site name it: ``unfold``'s alone, another suite's after the suite."""
    return row.metric if row.suite == "unfold" else f"{row.suite}.{row.metric}"


def cell_label(row) -> str:
    """A cell as the summary and the site list it: its metric (``metric_label``), then the strategy (none for the
    reference's floors), config and device."""
    return " ".join(v for v in (metric_label(row), row.strategy, row.config, row.device) if isinstance(v, str))


def skipped_cells(run_table: pd.DataFrame, device: str | None = None) -> pd.DataFrame:
    """The strategy x config x device cells of one run that were skipped (asv's n/a) in any figure, once each
    (on ``device`` only, if given): what the site's note and the summary's count both list."""
    rows = run_table[(run_table.suite == "unfold") & (run_table.status == "skipped")]
    if device is not None:
        rows = rows[rows.device == device]
    return rows.drop_duplicates(["strategy", "config", "device"])[["strategy", "config", "device"]]
