"""Findings on the targets, judged on the All-CNN-C layers of full-profile runs: the fastest strategy against the
roofline (``copy_``, the analytic minimum) and the fastest that returns a new tensor against its floors."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from benchmarks.allocator import NET_PEAK_RESOLUTION
from benchmarks.vocabulary import COPY_FLOOR, FRESH_OUTPUT_FLOOR, HUGE_PAGE_FLOOR
from reports.analysis import REFERENCE_STRATEGY
from reports.findings.verdicts import (
    NEW_TENSOR,
    PASS_METRICS,
    ROOFLINE,
    Finding,
    Run,
    allcnnc,
    fastest,
    full_allcnnc_runs,
    get,
    interval_text,
    judged,
    no_full_run,
    not_measured,
    target_finding,
)
from reports.results import Catalogue
from reports.set_aside import set_aside
from reports.units import BYTES, SECONDS

# the roofline targets: the fastest strategy over copy_ of the same run, and its net peak over the analytic minimum
ROOFLINE_FORWARD_X_COPY = 0.8
ROOFLINE_FORWARD_BACKWARD_X_COPY = 1.6
ROOFLINE_PEAK_X_MINIMUM = 1.05
# the new-tensor targets: the fastest strategy that returns a new tensor
NEW_TENSOR_FORWARD_X_FRESH_OUTPUT = 1.15
NEW_TENSOR_FORWARD_X_COPY = 1.3
NEW_TENSOR_FORWARD_BACKWARD_X_NATIVE = 0.5
NEW_TENSOR_HALF_X_FLOAT32 = 1.2
ENDS = ("low", "high")  # a paired ratio's interval across processes, in the cell table's column names
HALF_PRECISION = {"conv4-bfloat16": "allcnnc-conv4", "conv4-float16": "allcnnc-conv4"}  # config -> its float32 twin

ROOFLINE_CLAIMS = {
    "time_forward": f"The fastest forward takes at most {ROOFLINE_FORWARD_X_COPY:g}x copy_ of the same run",
    "time_forward_backward": (
        f"The fastest forward-backward takes at most {ROOFLINE_FORWARD_BACKWARD_X_COPY:g}x copy_ of the same run"
    ),
    "peak": (
        f"The fastest strategy's net peak is within {ROOFLINE_PEAK_X_MINIMUM - 1:.0%} of the analytic minimum "
        "(forward and forward-backward)"
    ),
}


def roofline_findings(runs: list[Run], aside: Mapping[str, str]) -> list[Finding]:
    """The roofline targets per full-profile run: time over ``copy_`` and the fastest's net peak over the minimum,
    for the fastest that returns a new tensor and, separately, the fastest when output reuse is allowed."""
    full = full_allcnnc_runs(runs)
    if not full:
        return no_full_run(ROOFLINE, ROOFLINE_CLAIMS.values())
    out = []
    for run in full:
        cells = allcnnc(run.cells)
        new, reuse = fastest(cells, aside), fastest(cells, {})
        limits = {"time_forward": ROOFLINE_FORWARD_X_COPY, "time_forward_backward": ROOFLINE_FORWARD_BACKWARD_X_COPY}
        for metric, limit in limits.items():
            lines = []
            for config in dict.fromkeys(cells.config):
                key = (config, metric)
                line = {"config": config}
                for label, best in (("", new), (" (reuse allowed)", reuse)):
                    ratio = get(best, key, "x_copy")
                    interval = None if ratio is None else (get(best, key, "x_copy_low"), get(best, key, "x_copy_high"))
                    line[f"fastest{label}"] = get(best, key, "strategy")
                    line[f"x copy_{label}"] = math.nan if ratio is None else ratio
                    line[f"x copy_ interval{label}"] = interval_text(interval)
                    line[f"verdict{label}"] = judged(ratio, limit, interval=interval)
                lines.append(line)
            out.append(target_finding(ROOFLINE, ROOFLINE_CLAIMS[metric], run, pd.DataFrame(lines)))
        lines = []
        for config in dict.fromkeys(cells.config):
            for metric, (pass_name, _, _) in PASS_METRICS.items():
                key = (config, metric)
                line = {"config": config, "pass": pass_name}
                for label, best in (("", new), (" (reuse allowed)", reuse)):
                    ratio = get(best, key, "peak_x_minimum")
                    line[f"fastest{label}"] = get(best, key, "strategy")
                    line[f"net peak MiB{label}"] = math.nan if ratio is None else BYTES.scaled(get(best, key, "peak"))
                    line[f"x minimum{label}"] = math.nan if ratio is None else ratio
                    line[f"verdict{label}"] = judged(ratio, ROOFLINE_PEAK_X_MINIMUM)
                lines.append(line)
        out.append(target_finding(ROOFLINE, ROOFLINE_CLAIMS["peak"], run, pd.DataFrame(lines)))
    return out


NEW_TENSOR_CLAIMS = {
    "fresh": (
        f"The fastest forward that returns a new tensor takes at most {NEW_TENSOR_FORWARD_X_FRESH_OUTPUT:g}x the "
        "floor of its allocation (allocate and write the output: in 4 KiB pages, or in huge pages for a strategy "
        "that advises its results so; the target is set for the fresh-pages regime, and judged here in the run's "
        "own regime)"
    ),
    "copy": (
        f"The fastest forward that returns a new tensor takes at most {NEW_TENSOR_FORWARD_X_COPY:g}x copy_ (the "
        "target is set for the warm regime, and judged here in the run's own regime)"
    ),
    "native": (
        "The fastest forward-backward that returns a new tensor takes at most "
        f"{NEW_TENSOR_FORWARD_BACKWARD_X_NATIVE:g}x native's"
    ),
    "peak": (
        "The fastest strategy that returns a new tensor has its net peak at the analytic minimum (forward and "
        f"forward-backward; at most {NET_PEAK_RESOLUTION // 1024} KiB above, the resolution of a net peak)"
    ),
    "half": (
        f"In half precision (conv4-bfloat16, conv4-float16) the fastest takes, as a multiple of copy_, at most "
        f"{NEW_TENSOR_HALF_X_FLOAT32:g}x what it takes in float32 (allcnnc-conv4)"
    ),
}


# What explains a missed new-tensor target, in terms of the evidence's own columns (no figure: those are the data's)
WHY_FLOOR = (
    "the floor ('its floor': the fresh-output one, or the huge-page one for a strategy that advises its results "
    "into huge pages) only allocates and writes the output, while an unfold also reads its input: "
    "'input / output' is how many input elements it reads per output element written. That share is largest "
    "at stride 2, where windows overlap least, and there the innermost dim's elements are also deinterleaved "
    "(every other one kept), which costs a shuffle per vector. The floor takes a page fault per page on first "
    "touch; a strategy that faults its pages in first (cpp) can come in below it."
)
WHY_COPY = (
    "copy_ writes into memory it touched before, while an unfold returns a new output: fresh memory on every call "
    "(in the fresh-pages regime always, in a user's process when it is above glibc's mmap threshold), whose every "
    "page faults on first touch. Where 'fresh-output floor x copy_' is itself above the target, merely allocating "
    "and writing the output in 4 KiB pages takes longer than the target allows; 'huge-page floor x copy_' is the "
    "same with the output advised into huge pages (one fault per 2 MiB), the reachable bound of a strategy that "
    "does so. Elsewhere the unfold writes the output in rows of 'row elements' (the windows along the innermost "
    "dim), each with its own start, borders and padding, where copy_ streams whole rows. '(reuse allowed)' counts "
    "the strategies that write into a buffer kept between calls (set aside elsewhere: a call overwrites the "
    "previous result), whose output is resident as copy_'s is: where they meet the target and the fastest that "
    "returns a new tensor does not, the fresh output costs the difference, not the kernel."
)
WHY_NATIVE = (
    "'backward ms' (forward-backward minus forward of the same strategy, two medians from different processes, "
    "so '-' where their noise leaves no positive difference) against native's shows which pass falls short: the "
    "backward sums, for every input entry, the up to K output entries of the windows that read it."
)
WHY_HALF = (
    "the work per element (index arithmetic, masks, a conversion to float for the backward's sums) is the same "
    "in every dtype, while copy_'s time halves with the element size: where that work, not memory, bounds the "
    "time, the ratio to copy_ grows in half precision. The verdict compares the fastest of each dtype, as the "
    "target does; where the fastest differs between the dtypes, 'x its own on allcnnc-conv4' compares the same "
    "strategy in both, which separates the kernel's cost in half precision from a swing of another strategy."
)
WHY_PEAK = "'above minimum MiB' is memory the fastest strategy holds beyond its output (and gradients) at its peak."


def _input_per_output(catalogue: Catalogue, config: str) -> float:
    """Input elements per output element (at any batch size), or NaN for a config the bench did not record."""
    sizes = catalogue.config_sizes(config)
    return math.nan if sizes is None else sizes.input_numel / sizes.output_numel


def _row_elements(catalogue: Catalogue, config: str) -> float:
    """The windows along the innermost spatial dim: the length of one row of the output's writes."""
    sizes = catalogue.config_sizes(config)
    return math.nan if sizes is None or not sizes.output_size else sizes.output_size[-1]


FLOOR_LABELS = {FRESH_OUTPUT_FLOOR: "fresh-output", HUGE_PAGE_FLOOR: "huge-page"}


def _fresh_output_floor(run: Run, config: str, strategy: str | None, catalogue: Catalogue) -> str:
    """The floor of the fastest strategy's own allocation: the huge-page one for a strategy that advises its
    results into huge pages (``Strategy.advises_huge_pages``), in a run that measured it (earlier runs predate
    both the bound and the advice), else the fresh-output floor."""
    advises = bool(catalogue.strategies.get(strategy or "", {}).get("advises_huge_pages"))
    return HUGE_PAGE_FLOOR if advises and run.bound(config, HUGE_PAGE_FLOOR) > 0 else FRESH_OUTPUT_FLOOR


def new_tensor_findings(runs: list[Run], catalogue: Catalogue) -> list[Finding]:
    """The new-tensor targets per full-profile run, for the fastest strategy that returns a new tensor; the floor
    target again without huge-page advice and the ``copy_`` target again with output reuse allowed."""
    full = full_allcnnc_runs(runs)
    if not full:
        return no_full_run(NEW_TENSOR, NEW_TENSOR_CLAIMS.values())
    out = []
    for run in full:
        cells = allcnnc(run.cells)
        aside = set_aside(catalogue.strategies)
        best, reuse = fastest(cells, aside), fastest(cells, {})
        advisers = {n: "advises huge pages" for n, r in catalogue.strategies.items() if r.get("advises_huge_pages")}
        in_small_pages = fastest(cells, {**aside, **advisers})
        configs = list(dict.fromkeys(cells.config))
        lines = []
        for config in configs:
            key = (config, "time_forward")
            time, strategy = get(best, key, "time"), get(best, key, "strategy")
            floor_metric = _fresh_output_floor(run, config, strategy, catalogue)
            fresh = run.bound(config, FRESH_OUTPUT_FLOOR)
            ratio, spread = _over_floor(run, best, key, floor_metric)
            small_ratio, small_spread = _over_floor(run, in_small_pages, key, FRESH_OUTPUT_FLOOR)
            lines.append(
                {
                    "config": config,
                    "fastest": strategy,
                    "forward ms": math.nan if time is None else SECONDS.scaled(time),
                    "fresh-output floor ms": SECONDS.scaled(fresh),
                    "huge-page floor ms": SECONDS.scaled(run.bound(config, HUGE_PAGE_FLOOR)),
                    "its floor": FLOOR_LABELS[floor_metric],
                    "x its floor": ratio,
                    "x its floor, quartiles apart": interval_text(spread),
                    "input / output": _input_per_output(catalogue, config),
                    "verdict": judged(ratio, NEW_TENSOR_FORWARD_X_FRESH_OUTPUT, interval=spread),
                    "fastest (4 KiB pages)": get(in_small_pages, key, "strategy"),
                    "x fresh-output floor (4 KiB pages)": small_ratio,
                    "x fresh-output floor, quartiles apart (4 KiB pages)": interval_text(small_spread),
                    "verdict (4 KiB pages)": judged(
                        small_ratio, NEW_TENSOR_FORWARD_X_FRESH_OUTPUT, interval=small_spread
                    ),
                }
            )
        out.append(target_finding(NEW_TENSOR, NEW_TENSOR_CLAIMS["fresh"], run, pd.DataFrame(lines), WHY_FLOOR))
        lines = []
        for config in configs:
            key = (config, "time_forward")
            ratio, reused = get(best, key, "x_copy"), get(reuse, key, "x_copy")
            interval = None if ratio is None else (get(best, key, "x_copy_low"), get(best, key, "x_copy_high"))
            reused_interval = (
                None if reused is None else (get(reuse, key, "x_copy_low"), get(reuse, key, "x_copy_high"))
            )
            floor, copy = run.bound(config, FRESH_OUTPUT_FLOOR), run.bound(config, COPY_FLOOR)
            lines.append(
                {
                    "config": config,
                    "fastest": get(best, key, "strategy"),
                    "x copy_": math.nan if ratio is None else ratio,
                    "x copy_ interval": interval_text(interval),
                    "fresh-output floor x copy_": floor / copy if copy > 0 else math.nan,
                    "huge-page floor x copy_": run.bound(config, HUGE_PAGE_FLOOR) / copy if copy > 0 else math.nan,
                    "row elements": _row_elements(catalogue, config),
                    "verdict": judged(ratio, NEW_TENSOR_FORWARD_X_COPY, interval=interval),
                    "fastest (reuse allowed)": get(reuse, key, "strategy"),
                    "x copy_ (reuse allowed)": math.nan if reused is None else reused,
                    "x copy_ interval (reuse allowed)": interval_text(reused_interval),
                    "verdict (reuse allowed)": judged(reused, NEW_TENSOR_FORWARD_X_COPY, interval=reused_interval),
                }
            )
        out.append(target_finding(NEW_TENSOR, NEW_TENSOR_CLAIMS["copy"], run, pd.DataFrame(lines), WHY_COPY))
        by_cell = cells.set_index(["config", "strategy"])
        lines = []
        for config in configs:
            strategy = get(best, (config, "time_forward_backward"), "strategy")
            cell = None if strategy is None else by_cell.loc[(config, strategy)]
            ratio = math.nan if cell is None else cell["time_forward_backward:x_native"]
            interval = (
                None if cell is None else tuple(cell.get(f"time_forward_backward:x_native_{end}") for end in ENDS)
            )
            lines.append(
                {
                    "config": config,
                    "fastest": strategy,
                    "x native": ratio,
                    "x native interval": interval_text(interval),
                    "backward ms": _backward_ms(by_cell, config, strategy),
                    "native's backward ms": _backward_ms(by_cell, config, REFERENCE_STRATEGY),
                    "verdict": judged(ratio, NEW_TENSOR_FORWARD_BACKWARD_X_NATIVE, interval=interval),
                }
            )
        out.append(target_finding(NEW_TENSOR, NEW_TENSOR_CLAIMS["native"], run, pd.DataFrame(lines), WHY_NATIVE))
        lines = []
        for config in configs:
            for metric, (pass_name, _, minimum_metric) in PASS_METRICS.items():
                key = (config, metric)
                peak, minimum = get(best, key, "peak"), run.bound(config, minimum_metric)
                above = math.nan if peak is None or pd.isna(peak) else peak - minimum
                lines.append(
                    {
                        "config": config,
                        "pass": pass_name,
                        "fastest": get(best, key, "strategy"),
                        "net peak MiB": math.nan if peak is None else BYTES.scaled(peak),
                        "analytic minimum MiB": BYTES.scaled(minimum),
                        "above minimum MiB": BYTES.scaled(above),
                        "verdict": judged(above, NET_PEAK_RESOLUTION, BYTES.format),
                    }
                )
        out.append(target_finding(NEW_TENSOR, NEW_TENSOR_CLAIMS["peak"], run, pd.DataFrame(lines), WHY_PEAK))
        out.append(_half_precision_finding(run, aside))
    return out


def _half_precision_finding(run: Run, aside: Mapping[str, str]) -> Finding:
    claim = NEW_TENSOR_CLAIMS["half"]
    best = fastest(run.cells, aside)
    lines = []
    for config, twin in HALF_PRECISION.items():
        for metric, (pass_name, _, _) in PASS_METRICS.items():
            half, single = get(best, (config, metric), "x_copy"), get(best, (twin, metric), "x_copy")
            ratio = math.nan if half is None or single is None or not single > 0 else half / single
            ends = [get(best, (c, metric), f"x_copy_{end}") for c, end in ((config, "low"), (twin, "high"))]
            ends += [get(best, (c, metric), f"x_copy_{end}") for c, end in ((config, "high"), (twin, "low"))]
            interval = None
            if not any(end is None or pd.isna(end) or not end > 0 for end in ends):
                interval = (ends[0] / ends[1], ends[2] / ends[3])  # the two intervals' far ends: no narrower than 95%
            strategy = get(best, (config, metric), "strategy")
            same = _x_copy_of(run.cells, twin, metric, strategy)
            lines.append(
                {
                    "config": config,
                    "pass": pass_name,
                    "fastest": strategy,
                    "x copy_": math.nan if half is None else half,
                    f"fastest on {twin}": get(best, (twin, metric), "strategy"),
                    f"x copy_ on {twin}": math.nan if single is None else single,
                    "x float32's": ratio,
                    "x float32's, intervals' ends": interval_text(interval),
                    "verdict": judged(ratio, NEW_TENSOR_HALF_X_FLOAT32, interval=interval),
                    f"x its own on {twin}": math.nan if half is None or not same > 0 else half / same,
                }
            )
    evidence = pd.DataFrame(lines)
    if (evidence.verdict == "not measured").all():
        reason = f"the run lacks {' or '.join(HALF_PRECISION)} or allcnnc-conv4, or their copy_ bound"
        return not_measured(NEW_TENSOR, claim, reason, run=run)
    return target_finding(NEW_TENSOR, claim, run, evidence, WHY_HALF)


def _over_floor(
    run: Run, best: pd.DataFrame, key: tuple[str, str], floor_metric: str
) -> tuple[float, tuple[float, float] | None]:
    """The fastest's forward over a floor of the same run, a quotient of two medians from different processes (no
    paired ratio to a floor exists), with how far apart their quartiles put it: (its lower quartile over the floor's
    upper one, its upper over the floor's lower), as the context rule reads two medians beyond both spreads."""
    time, floor = get(best, key, "time"), run.bound(key[0], floor_metric)
    if time is None or not floor > 0:
        return math.nan, None
    quartiles = (get(best, key, "time_q_25"), get(best, key, "time_q_75"))
    floor_quartiles = (run.bound(key[0], floor_metric, "q_75"), run.bound(key[0], floor_metric, "q_25"))
    if any(q is None or pd.isna(q) or not q > 0 for q in (*quartiles, *floor_quartiles)):
        return time / floor, None
    return time / floor, (quartiles[0] / floor_quartiles[0], quartiles[1] / floor_quartiles[1])


def _x_copy_of(cells: pd.DataFrame, config: str, metric: str, strategy: str | None) -> float:
    """``strategy``'s time over ``copy_`` on ``config`` (NaN where it has no ``ok`` figure)."""
    rows = cells[(cells.config == config) & (cells.strategy == strategy) & (cells[f"{metric}:status"] == "ok")]
    return float(rows[f"{metric}:x_bound"].iloc[0]) if not rows.empty else math.nan


def _backward_ms(by_cell: pd.DataFrame, config: str, strategy: str | None) -> float:
    """Forward-backward minus forward of one strategy on one config, in ms: NaN where either is missing, or where
    the difference is not positive (two medians from different processes, whose noise can exceed a backward)."""
    if strategy is None or (config, strategy) not in by_cell.index:
        return math.nan
    cell = by_cell.loc[(config, strategy)]
    difference = cell["time_forward_backward"] - cell["time_forward"]
    return SECONDS.scaled(difference) if difference > 0 else math.nan
