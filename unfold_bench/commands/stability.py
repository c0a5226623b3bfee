"""How much the published figures move between runs of one commit: the stability check of the suite's figures.

Runs ``unfold-bench bench`` ``--runs`` times, one after another, each into a results directory of its own (asv keys
a result by commit and environment, so two runs of one commit cannot share one), then reports, for the CPU cells:

- every ratio to native the site shows, and every time's paired ratio to ``copy_`` (chained through native,
  ``benchmarks.floors``, or direct where native cannot run, ``benchmarks.direct_floors``): the paired ratio's
  max/min across the runs (median, 90th percentile, worst), beside the same for the quotient of medians (what
  the site showed before the paired ratios);
- calibration: how often one run's 95% interval holds another run's estimate, beside how often it would if two
  runs differed only by their processes (``expected_coverage``: less than 95%, since the other estimate has its
  own error); fewer means that something between runs moves the figures that the processes of one run do not show;
- the which-to-ship picks of every run, and whether they agree or every disagreement is a declared tie: with
  intervals across processes alone, and with the run level recorded, as the summary and the site then show them;
- each run's wall time;
- the forecast (``reports.forecast``) of the p90 max/min at other numbers of processes a cell, from these runs'
  process variances and the run level pooled over every set recorded, and the fewest processes a cell that meet
  ``--target``: what the profile's ``ratio_processes`` should be.

    unfold-bench stability --runs 3 --out docs/stability-quick.txt
"""

from __future__ import annotations

import argparse
import itertools
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.intervals import INTERVAL_LEVEL, RunLevel, t_quantile
from benchmarks.records import read_records
from benchmarks.runner import DIRECT_FLOORS_SUITE, PAIRED_SUITE, scratch_config
from benchmarks.trees import ROOT
from benchmarks.vocabulary import COPY_FLOOR, DIRECT_FLOOR_RATIOS, TIMED_PASSES
from reports import analysis
from reports.forecast import (
    MOST_PROCESSES,
    STABILITY_QUANTILE,
    STABILITY_TARGET,
    forecast_spread,
    process_variances,
    processes_for,
)
from reports.results import load_catalogue, load_results
from reports.run_level import (
    RUN_LEVEL_FILE,
    RunLevels,
    estimate,
    load_run_levels,
    pooled,
    with_set,
    write_run_levels,
)
from reports.set_aside import complexity, set_aside
from reports.units import METRICS
from unfold_bench.common_args import (
    add_bench,
    add_profile,
    command_parser,
    finite_float,
    output_file,
    output_folder,
    refuse_unkept_strategies,
    warn_if_busy,
    with_folder_made,
)

TIMES = [m for m, figure in METRICS.items() if figure.paired is not None]
SELECTION_FILE = "bench"  # beside a kept run's results: the --bench selection it was measured with


def run_bench(directory: Path, profile: str, bench: str) -> float:
    """One ``unfold-bench bench`` run into ``directory``'s own results; its wall seconds."""
    shutil.rmtree(directory / "results", ignore_errors=True)  # a run of its own, never mixed with an earlier one
    config = scratch_config(directory, ROOT)
    command = [sys.executable, "-m", "unfold_bench.cli", "bench", "--config", str(config), "--profile", profile]
    command += ["--summaries", str(directory / "summaries"), *(["--bench", bench] if bench else [])]
    start = time.monotonic()
    with (directory / "bench.log").open("w") as log:
        status = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
    if status not in (0, 2):
        raise SystemExit(f"unfold-bench bench exited with {status}: see {directory / 'bench.log'}")
    seconds = time.monotonic() - start
    (directory / "seconds").write_text(f"{seconds:.1f}\n")  # for --from-runs
    (directory / SELECTION_FILE).write_text(bench)  # what --from-runs reports again, and records as measured
    return seconds


def run_table(directory: Path, profile: str, run_levels: RunLevels | None = None) -> pd.DataFrame:
    """The results of the run in ``directory``: its newest commit's, in ``profile``; the intervals across its
    processes alone, or with ``run_levels`` ((machine, profile, suite) -> ``RunLevel``) added."""
    table = load_results(directory / "results", run_levels=run_levels or {})
    table = table[table.profile == profile]
    if table.empty:
        raise SystemExit(
            f"{directory / 'results'}: no {profile}-profile run there (a run cut off before asv saved it?)"
        )
    newest = analysis.runs(table).iloc[-1]
    return analysis.select_run(table, newest)


FORECAST_PROCESSES = (2, 3, 4, 5, 6, 8, 12)  # the process counts the report forecasts at, beside the runs' own
X_COPY = "x copy_"  # how a row of a time's paired ratio to copy_ is named beside the metrics


def expected_coverage(processes: int, other_processes: int, level: float = INTERVAL_LEVEL) -> float:
    """How often the two-sided ``level`` Student-t interval of one run's mean log-ratio over ``processes`` processes
    holds another run's mean over ``other_processes``, when the two runs differ only by their processes.

    With :math:`\\sigma` the process-level deviation, the difference of the two means has variance
    :math:`\\sigma^2 (1/k_1 + 1/k_2)`, so over the first run's standard error :math:`s/\\sqrt{k_1}` it is Student's
    :math:`t_{k_1 - 1}` times :math:`\\sqrt{1 + k_1/k_2}`, and the interval :math:`\\pm t_q s/\\sqrt{k_1}` holds it
    with probability :math:`P(|T_{k_1 - 1}| < t_q / \\sqrt{1 + k_1/k_2})`."""
    from scipy.stats import t as student

    if processes < 2 or other_processes < 1:
        raise ValueError(f"processes={processes}, other_processes={other_processes}: need at least 2 and 1")
    df = processes - 1
    bound = t_quantile(df, level) / math.sqrt(1 + processes / other_processes)
    return float(2 * student.cdf(bound, df) - 1)


def ratios(directory: Path, profile: str, run_levels: RunLevels | None = None) -> pd.DataFrame:
    """The run's CPU cells: per (config, strategy, metric) the paired ratio with its interval (``run_table``) and
    the quotient of medians; a time's paired ratio to ``copy_`` is the metric ``<time metric> x copy_``."""
    table = run_table(directory, profile, run_levels)
    cells = analysis.cell_table(table, "cpu")
    natives = cells[cells.strategy == analysis.REFERENCE_STRATEGY].set_index("config")
    by_cell = ["config", "strategy", "metric"]
    paired = table[(table.suite == PAIRED_SUITE) & (table.device == "cpu")].set_index(by_cell)
    direct = table[(table.suite == DIRECT_FLOORS_SUITE) & (table.device == "cpu")].set_index(by_cell)
    passes = TIMED_PASSES
    copies = table[(table.suite == "bounds") & (table.metric == COPY_FLOOR) & (table.device == "cpu")]
    copy_medians = copies.set_index("config").value
    rows = []
    for cell in cells.to_dict("records"):
        for metric in TIMES:
            if cell.get(f"{metric}:status") != "ok" or not cell.get(f"{metric}:x_bound_paired", False):
                continue
            rows.append(
                {
                    "config": cell["config"],
                    "strategy": cell["strategy"],
                    "metric": f"{metric} {X_COPY}",
                    "paired": cell[f"{metric}:x_bound"],
                    "low": cell[f"{metric}:x_bound_low"],
                    "high": cell[f"{metric}:x_bound_high"],
                    "medians": cell[metric] / copy_medians.get(cell["config"], np.nan),
                    # paired directly where native cannot run; chained through it: two factors' processes, no count
                    "processes": direct.processes.get(
                        (cell["config"], cell["strategy"], DIRECT_FLOOR_RATIOS[passes[metric], COPY_FLOOR]), np.nan
                    ),
                }
            )
        if cell["strategy"] == analysis.REFERENCE_STRATEGY:
            continue
        for metric in TIMES:
            if cell.get(f"{metric}:status") != "ok" or not cell.get(f"{metric}:x_native_paired", False):
                continue
            native = natives[metric].get(cell["config"], np.nan)
            rows.append(
                {
                    "config": cell["config"],
                    "strategy": cell["strategy"],
                    "metric": metric,
                    "paired": cell[f"{metric}:x_native"],
                    "low": cell[f"{metric}:x_native_low"],
                    "high": cell[f"{metric}:x_native_high"],
                    "medians": cell[metric] / native,
                    "processes": paired.processes.get((cell["config"], cell["strategy"], METRICS[metric].paired)),
                }
            )
    return pd.DataFrame(rows)


Picks = dict[str, tuple[str | None, tuple[str, ...]]]  # per rule: the pick and the strategies declared tied


def picks(directory: Path, profile: str, run_levels: RunLevels | None = None) -> Picks:
    """Per rule: the run's pick on the CPU and the strategies it declared tied (empty: no tie), from intervals
    across its processes alone or with ``run_levels`` added (``run_table``)."""
    cells = analysis.cell_table(run_table(directory, profile, run_levels), "cpu")
    strategies = load_catalogue(directory / "results").strategies
    out = {}
    for rule in analysis.RULES:
        advice = analysis.recommend(cells, rule, set_aside(strategies), complexity(strategies))
        out[rule.name] = (advice.strategy, advice.tied)
    return out


def spread(frame: pd.DataFrame, column: str) -> pd.Series:
    """Per cell, max/min of ``column`` across the runs."""
    grouped = frame.groupby(["config", "strategy", "metric"])[column]
    return (grouped.max() / grouped.min()).dropna()


def calibration(frames: list[pd.DataFrame], with_expected: bool = True, prefix: str = "calibration") -> list[str]:
    """Per kind of ratio (paired directly: to native, or to copy_ where native cannot run; to copy_ chained through
    native, whose rows have no process count), how often one run's 95% interval holds another run's estimate over
    every (run, other run, cell) triple, and, if ``with_expected``, for the direct ratios how often it would if the runs
    differed only by their processes (``expected_coverage``). Each line starts with ``prefix``."""
    keyed = [f.set_index(["config", "strategy", "metric"]) for f in frames]
    lines = []
    kinds = (
        ("paired to native (or directly to copy_ where native cannot run)", True),
        (f"{X_COPY}, chained through native", False),
    )
    for label, direct in kinds:
        covered, expected, total = 0, 0.0, 0
        for one, other in itertools.permutations(keyed, 2):
            shared = one.index.intersection(other.index)
            shared = shared[one.loc[shared, "processes"].notna().to_numpy() == direct]
            theirs = other.loc[shared, "paired"]
            held = (one.loc[shared, "low"] <= theirs) & (theirs <= one.loc[shared, "high"])
            covered, total = covered + int(held.sum()), total + len(shared)
            if direct and with_expected:
                counts = zip(one.loc[shared, "processes"], other.loc[shared, "processes"])
                expected += sum(expected_coverage(int(k), int(k_other)) for k, k_other in counts)
        if not total:
            continue
        line = f"{prefix}, {label}: one run's 95% interval holds another run's estimate in {covered}/{total} "
        line += f"({covered / total:.0%}) of the (run, other run, cell) triples"
        if direct and with_expected:
            line += f"; {expected / total:.0%} if the runs differed only by their processes"
        lines.append(line)
    return lines


def invocation(args: argparse.Namespace) -> str:
    """The command that measured the runs, as the report and the run-level record name it: the runs, the profile
    and the cells they cover (a record from a ``--bench`` selection says so)."""
    return f"unfold-bench stability --runs {args.runs} --profile {args.profile}" + (
        f" --bench {args.bench!r}" if args.bench else ""
    )


def recorded_levels(record_in: Path, machine: str, profile: str, leave_out: str | None = None) -> RunLevels:
    """The run levels recorded in ``record_in`` for ``machine`` and ``profile``, pooled over their sets of runs
    (``leave_out``: but the set first measured then), keyed as the results reader takes them."""
    found = load_run_levels(record_in, leave_out=leave_out)
    return {key: level for key, level in found.items() if key[:2] == (machine, profile)}


def report(
    frames: list[pd.DataFrame],
    run_picks: list[Picks],
    seconds: list[float],
    args: argparse.Namespace,
    provenance: str,
    levels: dict[str, RunLevel],
    widened: list[pd.DataFrame],
    held_out: list[pd.DataFrame],
) -> str:
    """The stability report of the runs' ``frames`` (``ratios``, intervals across processes alone), picks and wall
    ``seconds``, the run ``levels`` they show per suite and the calibration of the ``widened`` frames (intervals
    with those levels) and of the ``held_out`` ones (with the level recorded from the other sets of runs: the check
    that a recorded level holds; empty where none was); ``provenance`` names the machine and its timing regime, the
    commit and the date on its first line."""
    both = pd.concat([f.assign(run=i) for i, f in enumerate(frames)], ignore_index=True)
    lines = [
        invocation(args)
        + (f" --target {args.target:g}" if args.target != STABILITY_TARGET else "")
        + (f" --out {args.out}" if args.out else "")
        + (
            " --from-runs" + " --record" * args.record + " (reported again from the runs kept)"
            if args.from_runs
            else ""
        )
        + f": {len(frames)} runs of one commit, one after another, CPU cells; {provenance}",
        "run wall times: " + ", ".join(f"{s / 60:.1f} min" for s in seconds),
        "",
        "max/min across runs of each ratio the site shows: to native, and to copy_ (paired through native or directly)",
        "(cells with a paired ratio in every run):",
        f"{'':<26} {'cells':>5} {'median':>7} {'p90':>7} {'worst':>7}",
    ]
    complete = both.groupby(["config", "strategy", "metric"]).run.transform("nunique") == len(frames)
    both = both[complete]
    for column, label in (("paired", "paired ratio"), ("medians", "quotient of medians")):
        values = spread(both, column)
        if values.empty:
            continue
        quantiles = values.quantile([0.5, 0.9]).tolist()
        lines.append(f"{label:<26} {len(values):>5} {quantiles[0]:>6.3f}x {quantiles[1]:>6.3f}x {values.max():>6.3f}x")
    for metric, label in [
        *((m, f"  paired, {METRICS[m].short}") for m in TIMES),
        *((f"{m} {X_COPY}", f"  paired, {METRICS[m].short} {X_COPY}") for m in TIMES),
    ]:
        values = spread(both[both.metric == metric], "paired")
        if not values.empty:
            quantiles = values.quantile([0.5, 0.9]).tolist()
            lines.append(
                f"{label:<26} {len(values):>5} {quantiles[0]:>6.3f}x {quantiles[1]:>6.3f}x {values.max():>6.3f}x"
            )
    worst = spread(both, "paired").sort_values().tail(5)
    lines.append("widest paired cells: " + "; ".join(f"{c} {s} {m}: {v:.2f}x" for (c, s, m), v in worst.items()))
    lines += [
        "",
        f"run level of each suite's paired ratios (reports.run_level; recorded in results/<machine>/{RUN_LEVEL_FILE})",
    ]
    lines.append("  these runs' estimate of the variance between runs of the mean log-ratio beyond what their")
    lines.append("  processes predict (negative: they moved less), and the standard deviation it gives:")
    lines += [
        f"  {suite:<14} {level.variance:+.5f}, sd {math.sqrt(max(level.variance, 0.0)):.3f} ({level.df:.0f} df)"
        for suite, level in levels.items()
    ]
    lines += ["", *calibration(frames)]
    lines += calibration(widened, with_expected=False, prefix="with the run level (in-sample: these runs estimated it)")
    if held_out:
        held = "with the run level recorded from the other sets of runs (held out)"
        lines += calibration(held_out, with_expected=False, prefix=held)
    lines += ["", *pick_lines(run_picks, "with intervals across processes alone")]
    return "\n".join(lines) + "\n"


def pick_lines(run_picks: list[Picks], intervals: str) -> list[str]:
    """Under a heading naming the ``intervals`` the picks were made with, per rule each run's pick with the
    strategies it declared tied, and whether the runs agree: the same pick, or different picks inside a tie every run
    declared, or not (``DIFFER``, naming the runs that declared the tie)."""
    lines = [f"which to ship (CPU), per run, {intervals}: pick (statistical tie)"]
    for rule in analysis.RULES:
        shown = [
            f"{p or 'none'}" + (f" (tie: {', '.join(t)})" if t else "") for p, t in (r[rule.name] for r in run_picks)
        ]
        chosen = {r[rule.name][0] for r in run_picks}
        ties = [set(r[rule.name][1]) for r in run_picks]
        if len(chosen) == 1:
            verdict = "agree"
        elif all(chosen <= t for t in ties):
            verdict = "differ inside a tie every run declared"
        else:
            declared = [str(i + 1) for i, t in enumerate(ties) if chosen <= t]
            verdict = "DIFFER" + (f" (run {', '.join(declared)} declared the tie)" if declared else "")
        lines.append(f"  {rule.name}: {' | '.join(shown)}: {verdict}")
    return lines


def forecast(variances: pd.DataFrame, levels: dict[str, RunLevel], runs: int, target: float) -> list[str]:
    """The forecast section of the report: the p90 over the ratios the site shows (``variances``:
    ``process_variances`` of the runs) of max/min across ``runs`` runs, observed and forecast at several processes
    a cell with the run ``levels`` pooled over every set of runs recorded, and the fewest processes a cell whose
    forecast meets ``target``."""
    own = int(variances.processes.median())
    counts = sorted({*FORECAST_PROCESSES, own})
    observed = variances.spread.quantile(STABILITY_QUANTILE)
    at = ", ".join(f"{k}: {forecast_spread(variances, levels, k, runs):.3f}x" for k in counts)
    fewest = processes_for(variances, levels, target, runs)
    return [
        f"forecast (reports.forecast): p{STABILITY_QUANTILE * 100:.0f} over the {len(variances)} ratios the site "
        f"shows of max/min across {runs} runs (to native, to copy_ directly or chained through native), from these "
        "runs' process variances and the run level pooled over every set of runs recorded (these included)",
        f"  observed in these runs ({own} processes a cell): {observed:.3f}x",
        f"  forecast at k processes a cell: {at}",
        f"  fewest processes a cell for {target:.2f}x: "
        + (
            f"{fewest}"
            if fewest is not None
            else f"none up to {MOST_PROCESSES} (the run level alone does not allow it)"
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("stability", __doc__)
    parser.add_argument("--runs", type=int, default=3, help="bench runs of the current commit (3)")
    add_profile(parser)
    add_bench(parser)
    parser.add_argument(
        "--keep",
        default=str(ROOT / ".asv" / "stability"),
        help="where the runs' results are kept, and --from-runs reads them (%(default)s)",
    )
    parser.add_argument("--out", type=output_file, help="also write the report to this file")
    parser.add_argument("--from-runs", action="store_true", help="report the runs already in --keep, measure nothing")
    parser.add_argument(
        "--record",
        action="store_true",
        help="with --from-runs: record the runs' run level in --record-in too, in place of their own earlier record "
        "(a measurement always records it; a report again leaves the record as it is)",
    )
    parser.add_argument(
        "--target",
        type=finite_float,
        default=STABILITY_TARGET,
        help=f"the p{STABILITY_QUANTILE * 100:.0f} max/min the forecast sizes processes for ({STABILITY_TARGET:.2f})",
    )
    parser.add_argument(
        "--record-in",
        type=Path,
        default=ROOT / "results",
        help="the results directory whose <machine>/run-level.jsonl records the run levels found (results/)",
    )
    args = parser.parse_args(argv)
    refuse_unkept_strategies(parser)
    if not args.from_runs:  # the runs are written there; --from-runs only reads them
        try:
            output_folder(args.keep)
        except argparse.ArgumentTypeError as error:
            parser.error(f"--keep: {error}")
    args.keep = Path(args.keep)
    if args.runs < 2:
        parser.error(f"--runs {args.runs}: a spread needs at least 2 runs")
    if args.target <= 1:
        parser.error(f"--target {args.target}: a max/min target must exceed 1")
    if args.record and not args.from_runs:
        parser.error("--record: a measurement records its run level anyway; --record is for --from-runs")
    if not args.record_in.is_dir():  # else the levels recorded elsewhere would silently be none
        parser.error(f"--record-in {args.record_in}: no such folder (a results directory, results/ by default)")
    if not args.from_runs:  # before the runs kept in --keep are replaced
        from benchmarks.profiles import get_profile
        from benchmarks.runner import plan

        chunks = plan(get_profile(args.profile), args.bench)
        if not chunks:
            parser.error(f"--bench {args.bench!r}: no {args.profile}-profile cell matches")
        if all(chunk.replicate is not None for chunk in chunks):  # the report reads each ratio beside its figures
            parser.error(
                f"--bench {args.bench!r}: selects paired ratios alone; the report reads them beside the figures of "
                "their cells (suite unfold): select those too"
            )
    if not args.from_runs:
        warn_if_busy()
    directories = [args.keep / f"{args.profile}-run-{i}" for i in range(args.runs)]
    seconds = []
    for index, directory in enumerate(directories, 1):
        if args.from_runs:
            if not (directory / "results").is_dir():
                parser.error(f"--from-runs: {directory} holds no kept run (--keep {args.keep}, --runs {args.runs})")
            seconds_file, selection = directory / "seconds", directory / SELECTION_FILE
            seconds.append(float(seconds_file.read_text()) if seconds_file.exists() else float("nan"))
            measured_with = selection.read_text() if selection.exists() else args.bench
            if measured_with != args.bench:
                parser.error(f"--bench {args.bench!r}: the runs in {directory} were measured with {measured_with!r}")
            continue
        directory.mkdir(parents=True, exist_ok=True)
        seconds.append(run_bench(directory, args.profile, args.bench))
        print(f"run {index}/{args.runs}: {seconds[-1] / 60:.1f} min", flush=True)
    frames = [ratios(d, args.profile) for d in directories]
    tables = [run_table(d, args.profile) for d in directories]  # intervals across processes alone
    first = tables[0]
    machine, commit = first.machine.iloc[0], first.commit.iloc[0]
    provenance = f"{machine} ({analysis.regime_label(first)}), commit {commit[:8]}, {time.strftime('%Y-%m-%d')}"
    measured = first.started.min()  # a time of this set's first run, not its commit's: two sets are two records
    if pd.isna(measured):
        raise SystemExit(f"{directories[0]}: its results record no start time (asv's started_at) to key the set by")
    measured = str(measured)
    others = recorded_levels(args.record_in, machine, args.profile, leave_out=measured)  # every other set's
    held_out = [ratios(d, args.profile, others) for d in directories] if others else []
    levels = estimate(tables)
    record = {"command": invocation(args), "runs": args.runs, "commit": commit}
    keyed = {(machine, args.profile, suite): level for suite, level in levels.items()}
    widened = [ratios(d, args.profile, keyed) for d in directories]
    picked = [picks(d, args.profile) for d in directories]
    text = report(frames, picked, seconds, args, provenance, levels, widened, held_out)
    # the record with these runs in it, written or not: reported again, runs show what their measurement showed
    records = with_set(read_records(args.record_in / machine / RUN_LEVEL_FILE), args.profile, levels, measured, record)
    recorded = {key: level for key, level in pooled(records, machine).items() if key[1] == args.profile}
    by_suite = {suite: level for (_, _, suite), level in recorded.items()}
    if not args.from_runs or args.record:
        write_run_levels(args.record_in / machine, args.profile, levels, measured, record)
        text += "\nrun level recorded now, pooled over every set of runs in the record (what later intervals add):\n"
        shown = "with the run level recorded now (as the summary and the site show them)"
    else:
        text += "\nrun level not recorded (--from-runs without --record), pooled over every set of runs in the record "
        text += "with these runs' in place of their own record (what recording them would leave):\n"
        shown = "with the run level recording these runs would leave"
    text += "".join(f"  {suite:<14} sd {math.sqrt(v.variance):.3f} ({v.df:.0f} df)\n" for suite, v in by_suite.items())
    text += "\n" + "\n".join(pick_lines([picks(d, args.profile, recorded) for d in directories], shown)) + "\n"
    text += "\n" + "\n".join(forecast(process_variances(tables), by_suite, args.runs, args.target)) + "\n"
    print(text)
    if args.out:
        with_folder_made(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
