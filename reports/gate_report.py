"""The regression gate's verdict where reviewers look: one JSON file, markdown, text tables and CI annotations.

``unfold-bench regress`` writes ``verdict.json`` (the exit status, the verdict, both revisions and every cell) on
every run; under GitHub Actions it also appends the markdown table to the job summary (``$GITHUB_STEP_SUMMARY``)
and prints an ``::error`` annotation naming each regressed or failed cell, which GitHub shows on the run and the
pull request. ``python -m reports.gate_report verdict.json`` prints the markdown of a saved verdict (the body of the
pull request's comment, posted by ``.github/workflows/gate-comment.yml``). The gate's text tables and progress lines
are written here too; ``reports.compare`` judges, this module says what was judged.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from benchmarks.paired_stats import ALPHA, POWER
from benchmarks.vocabulary import measure_of
from reports.compare import DETECTION_POWER
from reports.units import BYTES, format_interval, format_ratio, format_value

FLAGGED = ("regression", "failed", "failed (also before)", "failed (revision unknown)", "failed (a round)")


def _cell(row: pd.Series) -> str:
    return f"{measure_of(row.benchmark)} {row.params}"


def verdict_record(table: pd.DataFrame, status: int, verdict: str, base: str, head: str, extra: Mapping) -> dict:
    """Everything a later job needs to report the run, JSON-ready."""
    cells = []
    for row in table.itertuples(index=False):
        cells.append(
            {
                "cell": _cell(pd.Series(row._asdict())),
                "verdict": row.verdict,
                "ratio": None if pd.isna(row.ratio) else float(row.ratio),
                "low": None if pd.isna(getattr(row, "low", math.nan)) else float(row.low),
                "high": None if pd.isna(getattr(row, "high", math.nan)) else float(row.high),
                "resolution": None if pd.isna(getattr(row, "resolution", math.nan)) else float(row.resolution),
                "error": (getattr(row, "error", "") or "") if isinstance(getattr(row, "error", ""), str) else "",
            }
        )
    return {"status": status, "verdict": verdict, "base": base, "head": head, **dict(extra), "cells": cells}


def markdown(record: Mapping) -> str:
    """The run as a markdown section: the verdict, the flagged cells first, then every other cell."""
    flagged = [c for c in record["cells"] if c["verdict"] in FLAGGED]
    rest = [c for c in record["cells"] if c["verdict"] not in FLAGGED]
    lines = [
        f"### Benchmark regression gate: {record['verdict']}",
        "",
        f"`{record['base'][:8]}` (base) to `{record['head'][:8]}` (head); {record.get('resolution_line', '')}",
        "",
        *(
            [f"Not measured, their files identical at both revisions: {', '.join(record['identical'])}", ""]
            if record.get("identical")
            else []
        ),
        "| verdict | cell | ratio | interval | resolution |",
        "|---|---|---|---|---|",
    ]
    for cell in flagged + rest:
        interval = format_interval(cell["low"], cell["high"], 3)
        lines.append(
            f"| {'**' + cell['verdict'] + '**' if cell in flagged else cell['verdict']} | {cell['cell']} | "
            f"{format_ratio(cell['ratio'], 3, missing='')} | {interval} | "
            f"{format_ratio(cell['resolution'], 3, missing='')} |"
        )
    return "\n".join(lines) + "\n"


def annotations(record: Mapping) -> list[str]:
    """GitHub's workflow commands for the flagged cells (``::error title=...::message``)."""
    lines = []
    for cell in record["cells"]:
        if cell["verdict"] in FLAGGED:
            detail = cell["error"] or f"ratio {format_ratio(cell['ratio'], 3, missing='')}"
            interval = format_interval(cell["low"], cell["high"], 3)
            if interval:
                detail += f" (interval {interval})"
            message = f"{cell['cell']}: {cell['verdict']}, {detail}".replace("\n", " ").replace("%", "%25")
            lines.append(f"::error title=benchmark {cell['verdict']}::{message}")
    return lines


def publish(record: Mapping, path: Path, environ: Mapping[str, str] = os.environ) -> None:
    """Write ``record`` to ``path``; under GitHub Actions, also the job summary and the annotations."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as out:
            out.write(markdown(record))
    if environ.get("GITHUB_ACTIONS") == "true":
        for line in annotations(record):
            print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="print a saved verdict (verdict.json) as markdown")
    parser.add_argument("verdict", type=Path, help="a verdict file written by unfold-bench regress")
    args = parser.parse_args(argv)
    try:
        record = json.loads(args.verdict.read_text())
    except (OSError, ValueError) as error:
        parser.error(f"verdict {str(args.verdict)!r}: {error}")
    print(markdown(record), end="")
    return 0


def format_resolution(table: pd.DataFrame) -> str:
    """One line for the gate's output: the range of slowdowns this run caught reliably, its best and worst cell."""
    if table.empty:
        return "wall-clock resolution: no cell has equal rounds at both revisions"
    best, worst = table.loc[table.detectable.idxmin()], table.loc[table.detectable.idxmax()]

    def cell(row: pd.Series) -> str:
        return f"{format_ratio(row.detectable)} ({row.benchmark.rsplit('.', 1)[-1]} {row.params})"

    return (
        f"wall-clock resolution of this run (slowdown caught {DETECTION_POWER:.0%} of the time, from each cell's "
        f"spread of round medians): median {format_ratio(table.detectable.median())}, best {cell(best)}, "
        f"worst {cell(worst)}"
    )


def format_paired(table: pd.DataFrame, all_rows: bool = True) -> str:
    """Every paired time cell with its ratio, interval, resolution and blocks (``pairs``); memory cells that
    changed or failed."""
    failed = table.failed_at.fillna("").astype(bool)
    time_rows = table[(table.unit == "seconds") & (all_rows | (table.verdict != "unchanged") | failed)]
    memory_rows = table[(table.unit == "bytes") & ((table.verdict != "unchanged") | failed)]
    lines = []
    if not time_rows.empty:
        calls = [measure_of(b) for b in time_rows.benchmark]
        lines.append(
            pd.DataFrame(
                {
                    "verdict": time_rows.verdict,
                    "cell": [f"{call} {params}" for call, params in zip(calls, time_rows.params)],
                    "ratio": [format_ratio(r, 3, missing="") for r in time_rows.ratio],
                    "interval": [format_interval(lo, hi, 3) for lo, hi in zip(time_rows.low, time_rows.high)],
                    "resolution": [format_ratio(r, 3, missing="") for r in time_rows.resolution],
                    "blocks": ["" if f else str(n) for n, f in zip(time_rows.pairs, failed[time_rows.index])],
                }
            ).to_string(index=False)
        )
    lines.append(
        format_table(memory_rows) if not memory_rows.empty else "memory: no net peak changed beyond its threshold"
    )
    errors = table[table.error.fillna("").astype(bool)]
    lines += [f"  {row.params} {row.benchmark.rsplit('.', 1)[-1]}: {row.error}" for row in errors.itertuples()]
    return "\n".join(lines)


def format_paired_row(m: dict) -> str:
    """One progress line for a paired measurement as it arrives (``benchmarks.paired``)."""
    cell = f"{m['strategy']} {m['config']} {m['device']} {m['measure']}"
    if m.get("absent_at"):
        return f"{cell}: not registered at {m['absent_at']}"
    if m.get("skipped_at"):
        return f"{cell}: not run at {m['skipped_at']} ({m.get('error', '')})"
    if m.get("failed_at"):
        return f"{cell}: FAILED at {m['failed_at']}: {m.get('error', '')}"
    if m["measure"].startswith("net_peak"):
        return f"{cell}: {BYTES.format(m['before'])} -> {BYTES.format(m['after'])}"
    processes = " ".join(format_ratio(r, 3, suffix="") for r in m.get("process_ratios", []))
    each = f"; per process {processes}" if processes else ""
    interval = format_interval(m["low"], m["high"], 3, missing="(no interval)")
    return (
        f"{cell}: {format_ratio(m['ratio'], 3)} {interval}, resolves {format_ratio(m['resolution'], 3)}, "
        f"{m.get('processes', '?')} processes, {m['pairs']} blocks{each}"
    )


def format_paired_resolution(table: pd.DataFrame) -> str:
    """One line: the resolution of the run's paired time cells (median, worst) and how many did not resolve."""
    timed = table[(table.unit == "seconds") & (table.pairs > 0)]
    if timed.empty:
        return "wall-clock resolution: no time cell was measured at both revisions"
    worst = timed.loc[timed.resolution.idxmax()]
    unresolved = (timed.verdict == "unresolved").sum()
    return (
        f"wall-clock resolution of this run (slowdown caught {POWER:.0%} of the time at a one-sided false-alarm "
        f"rate of {ALPHA:g} per cell): median {format_ratio(timed.resolution.median(), 3)}, worst "
        f"{format_ratio(worst.resolution, 3)} "
        f"({worst.benchmark.rsplit('.', 1)[-1]} {worst.params}); {unresolved} of {len(timed)} time cells "
        "unresolved"
    )


def format_table(table: pd.DataFrame, only_changed: bool = True) -> str:
    """The rows a reviewer needs (changes and failures), with units."""
    failed_at = table.failed_at.fillna("")
    shown = table[(table.verdict != "unchanged") | failed_at.astype(bool)] if only_changed else table
    if shown.empty:
        return "no benchmark changed beyond its threshold; none failed"
    failed_at = failed_at[shown.index]

    def value(v: float | None, unit: str, failed: bool) -> str:
        if v is None or (failed and isinstance(v, float) and math.isnan(v)):
            return "failed"
        return format_value(v, unit, missing="n/a")

    lines = pd.DataFrame(
        {
            "verdict": shown.verdict,
            "benchmark": shown.benchmark,
            "params": shown.params,
            "mode": shown["mode"],  # not shown.mode: that is DataFrame.mode()
            "before": [value(v, u, f in ("base", "both")) for v, u, f in zip(shown.before, shown.unit, failed_at)],
            "after": [value(v, u, f in ("head", "both")) for v, u, f in zip(shown.after, shown.unit, failed_at)],
            "ratio": [format_ratio(r, missing="") for r in shown.ratio],
            "significant": ["" if s is None else ("yes" if s else "no") for s in shown.significant],
            "failed at": list(failed_at),
        }
    )
    return lines.to_string(index=False)


if __name__ == "__main__":
    raise SystemExit(main())
