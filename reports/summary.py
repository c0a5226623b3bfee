"""The terminal summary that ends `make bench`: one machine, one profile, one commit, every cell.

Per device, one row per config x strategy: forward ms, forward-backward ms and net peak MiB (forward and
forward-backward), each followed by its ratio to ``native`` on the same config and to the config's bound
(runtime: the ``copy_`` roofline; memory: the analytic minimum). Skipped and failed cells say so instead of
showing a number. Below the table, physics checks: a forward faster than the write-only ``fill_`` floor, or a
net peak below the analytic minimum by more than a net peak's resolution, means the measurement is wrong and is
listed. (The analytic minimum, ``benchmarks.traffic.analytic_minimum_bytes``, is never 0 now; older committed
results recorded 0 where it allowed the output to be a view of the input, which writes nothing, and for those the
``fill_`` floor is not applied.) Then the compile times of the strategies that compile.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

import pandas as pd

from benchmarks.allocator import NET_PEAK_RESOLUTION, regime_of_machine
from benchmarks.intervals import INTERVAL_LEVEL
from benchmarks.vocabulary import FILL_FLOOR, FRESH_OUTPUT_FLOOR, timed_metric, tracked_peak_metric
from reports.analysis import (
    REFERENCE_STRATEGY,
    RULES,
    RUN_KEYS,
    TIE_TEXT,
    break_tie,
    cell_label,
    cell_table,
    context_configs,
    fastest,
    fastest_against_bounds,
    floors_against_copy,
    least_memory,
    lost_text,
    not_ranked,
    other_regime_picks,
    own_loop_note,
    recommend,
    regime_note,
    relative_times,
    run_level_note,
    short_cells,
    skipped_cells,
    with_bandwidth,
)
from reports.results import Catalogue, load_catalogue, load_results
from reports.set_aside import complexity, set_aside
from reports.units import (
    BANDWIDTH,
    BYTES,
    METRICS,
    SECONDS,
    format_number,
    format_ratio,
    format_ratio_interval,
    format_spread,
)

LEGEND = (
    "value: a time's median over the samples of every process, with their interquartile range (IQR); a net peak, "
    f"measured with glibc's mmap threshold pinned, repeats to within its {NET_PEAK_RESOLUTION // 1024} KiB "
    "resolution (docs/methodology.md); "
    "xnat: time over native's on the same config, paired inside each process, with its 95% interval across "
    "processes, widened by the run level where one is recorded (*: a quotient of medians, from a run without "
    "paired ratios); "
    "xcopy: ratio to copy_ of the output's size (roofline), chained through native's paired ratios "
    "(benchmarks.floors), or paired with copy_ itself where native does not run (benchmarks.direct_floors), with its "
    "interval (*: a quotient of medians from different processes); "
    "xmin: ratio to the analytic minimum (forward: output; forward-backward: + grad_output + grad_input). "
    "The quotient of two values may disagree with xnat beyond both spreads: each value times a strategy after itself "
    "in processes of its own, xnat after native's call in the same process, so where the buffers and code landed and "
    "what the call before left in the caches differ between them (docs/methodology.md, 'Paired ratios' and 'Does a "
    "call's time depend on the call before it?'); the picks rank by the paired ratios."
)


def _format(value: float) -> str:
    return format_number(value, digits=3)


def _x_native(cell: dict | pd.Series, metric: str) -> str:
    """The ratio to native: a time's paired, with its interval across processes, or the quotient of medians (marked
    ``*``); a net peak's, measured alone in its process, unmarked."""
    ratio = format_ratio(cell[f"{metric}:x_native"], suffix="")
    if ratio == "-" or not cell.get(f"{metric}:x_native_paired", False):
        return f"{ratio}*" if METRICS[metric].unit is SECONDS and ratio != "-" else ratio
    low, high = cell.get(f"{metric}:x_native_low"), cell.get(f"{metric}:x_native_high")
    return format_ratio_interval(cell[f"{metric}:x_native"], low, high, suffix="") + own_loop_note(
        cell, metric, over=REFERENCE_STRATEGY
    )


def _x_bound(cell: dict | pd.Series, metric: str) -> str:
    """The ratio to the metric's bound: a time's chained through native with its interval, or the quotient of
    medians (marked ``*``); a net peak's over the analytic minimum."""
    ratio = format_ratio(cell[f"{metric}:x_bound"], suffix="")
    if cell.get(f"{metric}:x_bound_paired", False):
        low, high = cell.get(f"{metric}:x_bound_low"), cell.get(f"{metric}:x_bound_high")
        return format_ratio_interval(cell[f"{metric}:x_bound"], low, high, suffix="") + own_loop_note(
            cell, metric, over=METRICS[metric].bound_info.short
        )
    return f"{ratio}*" if METRICS[metric].unit is SECONDS and ratio != "-" else ratio


def summary_tables(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per device, the summary table of one machine/profile/commit slice of ``load_results``: the figures and
    ratios of ``analysis.cell_table``, formatted (cells skipped for every metric are not rows)."""
    out = {}
    for device in table.device.dropna().unique():
        lines = []
        for cell in cell_table(table, device).to_dict("records"):
            line = {("", "config"): cell["config"], ("", "strategy"): cell["strategy"]}
            for metric, figure in METRICS.items():
                status = cell.get(f"{metric}:status", "not run")
                if status == "not run":
                    continue
                ok = status == "ok"
                label = figure.column
                if not ok:
                    line[(label, "value")] = status
                elif figure.unit is SECONDS:
                    quartiles = cell[f"{metric}:q_25"], cell[f"{metric}:q_75"]
                    line[(label, "value")] = format_spread(cell[metric], *quartiles, "seconds", with_unit=False)
                else:
                    line[(label, "value")] = _format(figure.unit.scaled(cell[metric]))
                line[(label, "xnat")] = _x_native(cell, metric) if ok else ""
                line[(label, figure.bound_info.ratio_label)] = _x_bound(cell, metric) if ok else ""
            lines.append(line)
        if lines:
            frame = pd.DataFrame(lines).fillna("")
            frame.columns = pd.MultiIndex.from_tuples(frame.columns)
            out[device] = frame
    return out


def _quartile(row, name: str, median: float) -> float:
    value = getattr(row, name, None)
    return median if value is None or pd.isna(value) else float(value)


UNPAIRED_FLOOR = "below the write-only fill_ floor"  # how a forward below a floor timed in other processes is said


def _chained_fill(table: pd.DataFrame, devices) -> dict[tuple[str, str, str], tuple[float, float, float]]:
    """(device, config, strategy) -> the forward's ratio to ``fill_`` paired inside processes (chained through
    native, or direct where native cannot run), and its interval."""
    found = {}
    for device in devices:
        cells = cell_table(table, device)
        if "time_forward:x_fill_high" not in cells:
            continue
        for _, cell in cells.iterrows():
            figures = tuple(cell[f"time_forward:x_fill{end}"] for end in ("", "_low", "_high"))
            found[(device, cell.config, cell.strategy)] = figures
    return found


def physics_problems(table: pd.DataFrame) -> list[str]:
    """Figures that contradict the bounds measured in the same run (each means a measurement is wrong).

    A forward faster than the ``fill_`` floor counts only beyond the run's own noise. Where the run measured the
    forward's ratio to ``fill_`` paired inside processes, chained through native or direct (``analysis.cell_table``'s
    ``x_fill``, with its interval across processes), it counts when the whole interval lies below 1. Otherwise the
    forward and the floor come from different processes: when both have asv's interquartile range, the forward's
    upper quartile must lie below the floor's lower quartile (a forward that writes as fast as ``fill_`` has
    medians either side of it from run to run); without quartiles the medians are compared. A net peak counts
    below the analytic minimum only by more than its resolution (``benchmarks.allocator.NET_PEAK_RESOLUTION``): a
    block smaller than that may land on heap pages already resident.
    """
    problems = []
    ok = table[table.status == "ok"]
    bounds = ok[ok.suite == "bounds"].set_index(["device", "config", "metric"])
    chained = _chained_fill(table, ok.device.unique())
    for row in ok[ok.suite == "unfold"].itertuples():
        if row.metric == "time_forward":
            key = (row.device, row.config, FILL_FLOOR)
            can_be_a_view = bounds.value.get((row.device, row.config, "track_min_peak_forward")) == 0
            if can_be_a_view:
                continue
            ratio, low, high = chained.get((row.device, row.config, row.strategy), (math.nan,) * 3)
            if not pd.isna(high):
                if high < 1:
                    problems.append(
                        f"{row.strategy} forward on {row.config} ({row.device}) took "
                        f"{format_ratio_interval(ratio, low, high)} the write-only fill_ floor's time, paired "
                        "inside processes: the whole interval is below 1"
                    )
                continue
            if key not in bounds.index:
                continue
            floor = bounds.loc[key]
            low, high = _quartile(floor, "q_25", floor.value), _quartile(row, "q_75", row.value)
            if high < low:
                ms = SECONDS.scaled
                problems.append(
                    f"{row.strategy} forward on {row.config} ({row.device}) took {ms(row.value):.3f} {SECONDS.shown} "
                    f"(upper quartile {ms(high):.3f}), {UNPAIRED_FLOOR} {ms(floor.value):.3f} "
                    f"{SECONDS.shown} (lower quartile {ms(low):.3f})"
                )
        if row.metric.startswith("track_net_peak"):
            minimum = bounds.value.get((row.device, row.config, row.metric.replace("net_peak", "min_peak")))
            if minimum is not None and row.value < minimum - NET_PEAK_RESOLUTION:
                mib, short_kib = BYTES.scaled, (minimum - row.value) / 1024
                problems.append(
                    f"{row.strategy} {row.metric} on {row.config} ({row.device}): {mib(row.value):.2f} {BYTES.shown}, "
                    f"{short_kib:.0f} KiB below the analytic minimum {mib(minimum):.2f} {BYTES.shown} "
                    f"(a net peak resolves {NET_PEAK_RESOLUTION // 1024} KiB)"
                )
    return problems


def _best(rows: pd.DataFrame, metric: str, ratio: str, aside: Mapping[str, str], simplicity: Mapping[str, int]) -> str:
    """The best of one config's ``rows`` in ``metric`` and the strategies tied with it: for a time, the fastest by
    the paired ratios (``analysis.fastest``), shown by its ``ratio`` with its interval; for a net peak, every
    strategy within a net peak's resolution of the lowest is tied, and the one named is the tie-break's (the
    simplest, then the fastest: ``analysis.TIE_TEXT``), shown with its ratio to the analytic minimum."""
    ok = rows[rows[f"{metric}:status"] == "ok"] if f"{metric}:status" in rows else rows.iloc[:0]
    unit = METRICS[metric].unit
    ok = ok[~(not_ranked(ok, aside) if unit is SECONDS else ok.strategy.isin(list(aside)))]
    if ok.empty:
        return "-"
    if unit is not SECONDS:
        least = least_memory(ok, metric, NET_PEAK_RESOLUTION)
        timed = least[least[f"{TRAINING_TIME}:status"] == "ok"]
        relative = relative_times(timed, TRAINING_TIME).relative if not timed.empty else None
        best = break_tie(least.assign(_relative=relative), metric, simplicity, "_relative", NET_PEAK_RESOLUTION)
        tied = sorted(least.strategy.drop(best.name))
        shown = f"{best.strategy} {_format(unit.scaled(best[metric]))} {unit.shown} ({_x_bound(best, metric)})"
        return shown + (f"; tie: {', '.join(tied)}" if tied else "")
    best, tied = fastest(ok, metric)
    shown = _x_native(best, metric) if ratio == "x_native" else _x_bound(best, metric)
    if shown == "-" and ratio == "x_native" and _x_bound(best, metric) != "-":
        shown = f"{_x_bound(best, metric)} x copy_"  # the reference does not run this config (* where unpaired)
    return f"{best.strategy} {shown}" + (f"; tie: {', '.join(tied)}" if tied else "")


PEAK_FORWARD_BACKWARD = tracked_peak_metric("forward_backward")
TRAINING_TIME = timed_metric("forward_backward")  # the time whose paired ratios break a tie of net peaks, as the picks'


def compact_table(
    table: pd.DataFrame, device: str, aside: Mapping[str, str], simplicity: Mapping[str, int] = MappingProxyType({})
) -> pd.DataFrame:
    """One line per config of one run on ``device``: the fastest forward (its ratio to copy_), the fastest
    forward-backward (its ratio to native, or to copy_ where native does not run) and the lowest forward-backward
    net peak (its ratio to the analytic minimum), among the strategies that can be shipped (``aside`` left out:
    ``reports.set_aside``; for a time, nor one whose time there depends on what ran before it,
    ``analysis.not_ranked``). The fastest is ranked by the paired ratios (``analysis.fastest``) and shown by its
    ratio with its interval (its time, with its spread, is in the full table), and the strategies statistically
    tied with it are named; the lowest net peak names every strategy within a net peak's resolution of it, and the
    tie-break's (``simplicity``: strategy -> machinery count, ``reports.set_aside.complexity``) first."""
    cells = cell_table(table, device)
    lines = [
        {
            "config": config,
            "fastest forward (x copy_)": _best(rows, "time_forward", "x_bound", aside, simplicity),
            "fastest fwd+bwd (x native)": _best(rows, "time_forward_backward", "x_native", aside, simplicity),
            "lowest fwd+bwd peak (x min)": _best(rows, PEAK_FORWARD_BACKWARD, "x_bound", aside, simplicity),
        }
        for config, rows in cells.groupby("config", sort=False)
    ]
    return pd.DataFrame(lines)


def print_summary(
    results_dir: str | Path,
    machine: str,
    profile: str,
    commit: str | None,
    skip_reason: Callable[[str, str, str], str | None] | None = None,
    full_dir: str | Path | None = None,
    selection: str = "",
    failure_reason: Callable[[str, str, str, str], str | None] | None = None,
) -> bool:
    """Print the summary of ``machine``'s ``profile`` results at ``commit`` (None: its latest commit); whether there
    were any.

    One summary per environment that has results for that commit (``make bench`` records the current
    environment, ``make bench-commits`` asv's per-commit virtualenvs: their figures are not mixed): one line
    per config, the recommendations, what was skipped or failed and the physics checks. The full tables (every
    cell's figures and ratios) go to a file in ``full_dir`` when it is given, else to the terminal too.
    ``skip_reason(strategy, config, device)`` explains skipped cells (asv's results only record "n/a"), and
    ``failure_reason(strategy, config, device, metric)`` failed ones where it knows why (asv records "failed").
    ``selection``: the ``--bench`` regex of a run that timed a selection, whose picks are not made (they would
    compare only what it timed; the site takes them from the newest complete run).
    """
    every_run, catalogue = load_results(results_dir), load_catalogue(results_dir)
    table = every_run[(every_run.machine == machine) & (every_run.profile == profile)]
    if table.empty:
        print(f"no {profile} results for machine {machine} in {results_dir}")
        return False
    if commit is None:
        commit = table.sort_values("date").commit.iloc[-1]
    regime = regime_of_machine(machine)
    if not (table.commit == commit).any():
        print(f"no {profile} results for machine {machine} at commit {commit[:8]} in {results_dir}")
        return False
    for env, rows in table[table.commit == commit].groupby("env", sort=True):
        heading = f"machine {machine}, profile {profile}, commit {commit[:8]}, environment {env}"
        print(f"\nSummary: {heading}\nTiming regime: {regime.label}")
        note = run_level_note(rows)
        if note:
            print(note)
        full = io.StringIO()
        with contextlib.redirect_stdout(full):
            print(f"Full summary: {heading}\nTiming regime: {regime.label}: {regime.description}")
            _print_run(rows, skip_reason, catalogue, failure_reason)
        if full_dir is None:
            print(full.getvalue())
            continue
        _print_compact(rows, every_run, skip_reason, catalogue, selection, failure_reason)
        path = Path(full_dir) / f"{machine}-{profile}-{commit[:8]}-{env}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(full.getvalue())
        print(f"Every cell's figures and ratios: {path}")
    print(f"Results: {Path(results_dir).resolve()}/{machine}/ (asv's JSON); the site: make report")
    return True


def _skipped_and_failed(
    table: pd.DataFrame,
    skip_reason: Callable[[str, str, str], str | None] | None,
    failure_reason: Callable[[str, str, str, str], str | None] | None = None,
) -> None:
    skipped = skipped_cells(table)
    if not skipped.empty:
        reasons = Counter(
            (skip_reason(r.strategy, r.config, r.device) or "not run in this selection")
            if skip_reason
            else "reason not recorded (asv records n/a)"
            for r in skipped.itertuples()
        )
        print(f"\nSkipped cells (asv: n/a): {len(skipped)}")
        for reason, count in reasons.most_common():
            print(f"  {count:>4} x {reason}")
    failed = table[table.status == "failed"]
    if not failed.empty:
        print(f"\nFailed ({len(failed)}; wrong result, error, timeout or killed: asv's log says why; or as named):")
        for r in failed.itertuples():
            why = r.problem if isinstance(r.problem, str) else None  # reports.new_memory's
            if why is None and failure_reason:
                why = failure_reason(r.strategy, r.config, r.device, r.metric)
            print(f"  - {cell_label(r)}" + (f": {why}" if why else ""))
    short = short_cells(table)
    if not short.empty:
        print(f"\nPaired cells that failed in a replicate ({len(short)}; asv's log says why), the others' kept:")
        for r in short.itertuples():
            print(f"  - {cell_label(r)}: {lost_text(r)}")


def _print_compact(
    table: pd.DataFrame,
    every_run: pd.DataFrame,
    skip_reason: Callable[[str, str, str], str | None] | None,
    catalogue: Catalogue,
    selection: str = "",
    failure_reason: Callable[[str, str, str, str], str | None] | None = None,
) -> None:
    run = table.iloc[0][RUN_KEYS].to_dict()
    aside, simplicity = set_aside(catalogue.strategies), complexity(catalogue.strategies)
    for device in table[table.suite == "unfold"].device.unique():
        cells = cell_table(table, device)
        if cells.empty:
            continue
        units = (
            f"times as ratios with their {INTERVAL_LEVEL:.0%} interval across processes (*: a quotient of medians), "
            f"net peaks in {BYTES.shown}; tie: an interval that overlaps the leader's, or a net peak within "
            f"{NET_PEAK_RESOLUTION // 1024} KiB of the lowest"
        )
        context = context_configs(cells)
        where = "; ".join(f"{name} on {', '.join(configs)}" for name, configs in context.items())
        after = f"; nor {where}, where its time depends on what runs before it" if context else ""
        print(f"\n[{device}] per config ({units}; not counted: {', '.join(aside)}, which reuse their output{after})")
        print(compact_table(table, device, aside, simplicity).to_string(index=False))
        if selection:
            timed = sorted(set(cells.strategy))
            print(
                f"Which to ship: not judged from a selection (--bench {selection!r}, timed: "
                f"{', '.join(timed)}); make bench without BENCH times them all, and the site picks from the newest "
                "complete run."
            )
            continue
        for rule in RULES:
            advice = recommend(cells, rule, aside, simplicity)
            score = format_ratio_interval(advice.score, advice.low, advice.high)
            pick = (
                "none (every strategy failed somewhere)"
                if advice.strategy is None
                else f"{advice.strategy}, on average (geometric mean) {score} the fastest time of each config"
            )
            print(f"Which to ship for {rule.name}: {pick}")
            if advice.tied:
                print(
                    f"  A statistical tie between {', '.join(advice.tied)}; the tie-break picks {advice.strategy} "
                    f"(the rule: {TIE_TEXT})."
                )
            others = other_regime_picks(every_run, run, device, rule, aside, simplicity)
            print(f"  {regime_note(run['machine'], advice.strategy, others, run['commit'])}")
    _skipped_and_failed(table, skip_reason, failure_reason)
    problems = physics_problems(table)
    print("Physics checks: " + ("all figures respect the measured bounds." if not problems else ""))
    for problem in problems:
        print("  - " + problem)


def _print_run(
    table: pd.DataFrame,
    skip_reason: Callable[[str, str, str], str | None] | None,
    catalogue: Catalogue,
    failure_reason: Callable[[str, str, str, str], str | None] | None = None,
) -> None:
    aside = set_aside(catalogue.strategies)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 500):
        for device, summary in summary_tables(table).items():
            print(f"\n[{device}]")
            print(summary.to_string(index=False))
    print("\n" + LEGEND)
    _skipped_and_failed(table, skip_reason, failure_reason)
    for device in table[table.suite == "unfold"].device.unique():
        best = fastest_against_bounds(cell_table(table, device), aside)
        if best.empty:
            continue
        best = with_bandwidth(best, catalogue.profile_sizes(table.profile.iloc[0]))
        best = best.merge(floors_against_copy(table, device), on="config", how="left")
        floor = best[f"{FRESH_OUTPUT_FLOOR}:x_copy"].where(best.metric == "time_forward")
        shown = pd.DataFrame(
            {
                "config": best.config,
                "metric": best.metric,
                "fastest": best.strategy,
                "tied": best.tied.map(lambda names: ", ".join(names) or "-"),
                "xcopy": [
                    format_ratio_interval(*ends, suffix="")
                    for ends in zip(best.x_copy, best.x_copy_low, best.x_copy_high)
                ],
                "fresh-output floor xcopy": floor.map(lambda v: format_ratio(v, suffix="")),
                "its net peak xmin": best.peak_x_minimum.map(lambda v: format_ratio(v, suffix="")),
                **{
                    label: [
                        format_spread(v, low, high, BANDWIDTH.recorded, with_unit=False)
                        for v, low, high in zip(best[name], best[f"{name}_low"], best[f"{name}_high"])
                    ]
                    for label, name in (("GB/s", "gb_per_s"), ("copy_ GB/s", "copy_gb_per_s"))
                },
                "of copy_": [
                    format_ratio_interval(*ends, suffix="")
                    for ends in zip(best.of_copy, best.of_copy_low, best.of_copy_high)
                ],
            }
        )
        print(
            f"\nFastest per config against the bounds [{device}] (a new output written on first touch cannot beat"
            " the fresh-output floor; GB/s: the least bytes an unfold moves, input read and output written,"
            " twice that with the backward, over its median time, with the IQR; copy_ GB/s: copy_'s bytes over"
            " copy_'s median in the same run, with the IQR; of copy_: the fastest's share of copy_'s bandwidth from"
            " its paired ratio to copy_, with that interval (the two GB/s are medians of different processes, each"
            " timing a call after itself: on a problem that fits in the caches they can disagree with of copy_ by"
            " far more than their spreads, as the legend above says of xnat);"
            " fastest: ranked by the paired ratios, tied: the others whose intervals overlap its own, except one"
            " that another of them beats beyond the noise):"
        )
        print(shown.to_string(index=False))
        for name, why in aside.items():
            if name in set(table.strategy):
                print(f"  (not counted: {name}, which {why}; its rows above show what reuse buys)")
    compiling = table[(table.suite == "compile_time") & (table.status == "ok")]
    if not compiling.empty:
        print(
            "\nCompile time (cold: the first forward-backward call with Inductor's caches off; asv keeps one figure "
            "a cell, so no spread), seconds:"
        )
        for (strategy, device), rows in compiling.groupby(["strategy", "device"], sort=False):
            print(f"  {strategy} ({device}): " + ", ".join(f"{r.config} {r.value:.1f}" for r in rows.itertuples()))
    problems = physics_problems(table)
    print("\nPhysics checks: " + ("all figures respect the measured bounds." if not problems else ""))
    for problem in problems:
        print("  - " + problem)
