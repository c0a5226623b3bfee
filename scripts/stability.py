"""How much the published figures move between runs of one commit: the stability check of the suite's figures.

Runs ``scripts/bench.py`` ``--runs`` times, one after another, each into a results directory of its own (asv keys
a result by commit and environment, so two runs of one commit cannot share one), then reports, for the CPU cells:

- every ratio to native the site shows, and every time's paired ratio to ``copy_`` (chained through native,
  ``benchmarks.floors``, or direct where native cannot run, ``benchmarks.direct_floors``): the paired ratio's
  max/min across the runs (median, 90th percentile, worst), beside the same for the quotient of medians (what
  the site showed before the paired ratios);
- calibration: how often one run's 95% interval holds another run's estimate (about 95% if the interval is
  honest about the run-to-run spread);
- the which-to-ship picks of every run, and whether they agree or every disagreement is a declared tie;
- each run's wall time.

    python scripts/stability.py --runs 3 --out docs/stability-quick.txt
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.runner import scratch_config
from benchmarks.trees import ROOT
from reports import analysis
from reports.results import load_catalogue, load_results
from reports.set_aside import complexity, set_aside
from reports.units import METRICS
from unfold_bench.common_args import add_bench, add_profile

TIMES = [m for m, figure in METRICS.items() if figure.paired is not None]


def run_bench(directory: Path, profile: str, bench: str) -> float:
    """One ``bench.py`` run into ``directory``'s own results; its wall seconds."""
    shutil.rmtree(directory / "results", ignore_errors=True)  # a run of its own, never mixed with an earlier one
    config = scratch_config(directory, ROOT)
    command = [sys.executable, "-m", "unfold_bench.cli", "bench", "--config", str(config), "--profile", profile]
    command += ["--summaries", str(directory / "summaries"), *(["--bench", bench] if bench else [])]
    start = time.monotonic()
    with (directory / "bench.log").open("w") as log:
        status = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
    if status not in (0, 2):
        raise SystemExit(f"bench.py exited with {status}: see {directory / 'bench.log'}")
    seconds = time.monotonic() - start
    (directory / "seconds").write_text(f"{seconds:.1f}\n")  # for --from-runs
    return seconds


def run_table(directory: Path, profile: str) -> pd.DataFrame:
    """The results of the run in ``directory``: its newest commit's, in ``profile``."""
    table = load_results(directory / "results")
    table = table[table.profile == profile]
    newest = analysis.runs(table).iloc[-1]
    return analysis.select_run(table, newest)


X_COPY = "x copy_"  # how a row of a time's paired ratio to copy_ is named beside the metrics


def ratios(directory: Path, profile: str) -> pd.DataFrame:
    """The run's CPU cells: per (config, strategy, metric) the paired ratio with its interval and the quotient of
    medians; a time's paired ratio to ``copy_`` is the metric ``<time metric> x copy_``."""
    table = run_table(directory, profile)
    cells = analysis.cell_table(table, "cpu")
    natives = cells[cells.strategy == analysis.REFERENCE_STRATEGY].set_index("config")
    copies = table[(table.suite == "bounds") & (table.metric == "time_copy") & (table.device == "cpu")]
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
                }
            )
    return pd.DataFrame(rows)


def picks(directory: Path, profile: str) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Per rule: the run's pick on the CPU and the strategies it declared tied (empty: no tie)."""
    cells = analysis.cell_table(run_table(directory, profile), "cpu")
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


def report(frames: list[pd.DataFrame], run_picks: list[dict], seconds: list[float], args: argparse.Namespace) -> str:
    both = pd.concat([f.assign(run=i) for i, f in enumerate(frames)], ignore_index=True)
    lines = [
        f"python scripts/stability.py --runs {args.runs} --profile {args.profile}"
        + (f" --bench {args.bench!r}" if args.bench else "")
        + f": {len(frames)} runs of one commit, one after another, CPU cells",
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
    covered, total = 0, 0
    keyed = [f.set_index(["config", "strategy", "metric"]) for f in frames]
    for one, other in itertools.permutations(keyed, 2):
        shared = one.index.intersection(other.index)
        held = (one.loc[shared, "low"] <= other.loc[shared, "paired"]) & (
            other.loc[shared, "paired"] <= one.loc[shared, "high"]
        )
        covered, total = covered + int(held.sum()), total + len(shared)
    if total:
        lines += ["", f"calibration: one run's 95% interval holds another run's estimate in {covered}/{total} "]
        lines[-1] += f"({covered / total:.0%}) of the (run, other run, cell) triples"
    lines += ["", "which to ship (CPU), per run: pick (statistical tie)"]
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
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="bench runs of the current commit (3)")
    add_profile(parser)
    add_bench(parser)
    parser.add_argument("--keep", type=Path, default=ROOT / ".asv" / "stability", help="where the runs' results go")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument("--from-runs", action="store_true", help="report the runs already in --keep, measure nothing")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error(f"--runs {args.runs}: a spread needs at least 2 runs")
    directories = [args.keep / f"{args.profile}-run-{i}" for i in range(args.runs)]
    seconds = []
    for index, directory in enumerate(directories, 1):
        if args.from_runs:
            recorded = directory / "seconds"
            seconds.append(float(recorded.read_text()) if recorded.exists() else float("nan"))
            continue
        directory.mkdir(parents=True, exist_ok=True)
        seconds.append(run_bench(directory, args.profile, args.bench))
        print(f"run {index}/{args.runs}: {seconds[-1] / 60:.1f} min", flush=True)
    frames = [ratios(d, args.profile) for d in directories]
    text = report(frames, [picks(d, args.profile) for d in directories], seconds, args)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
