"""The regression gate's verdict where reviewers look: one JSON file, a markdown table, and CI annotations.

``scripts/regress.py`` writes ``verdict.json`` (the exit status, the verdict, both revisions and every cell) on
every run; under GitHub Actions it also appends the markdown table to the job summary (``$GITHUB_STEP_SUMMARY``)
and prints an ``::error`` annotation naming each regressed or failed cell, which GitHub shows on the run and the
pull request. ``python -m reports.gate_report verdict.json`` prints the markdown of a saved verdict (the body of the
pull request's comment, posted by ``.github/workflows/gate-comment.yml``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from reports.units import format_ratio

FLAGGED = ("regression", "failed", "failed (also before)", "failed (revision unknown)")


def _cell(row: pd.Series) -> str:
    call = row.benchmark.rsplit(".", 1)[-1].removeprefix("time_").removeprefix("track_")
    return f"{call} {row.params}"


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
        "| verdict | cell | ratio | interval | resolution |",
        "|---|---|---|---|---|",
    ]
    for cell in flagged + rest:
        interval = "" if cell["low"] is None else f"{cell['low']:.3f}-{cell['high']:.3f}"
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
            if cell["low"] is not None:
                detail += f" (interval {cell['low']:.3f}-{cell['high']:.3f})"
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
    parser.add_argument("verdict", type=Path, help="a verdict file written by scripts/regress.py")
    args = parser.parse_args(argv)
    try:
        record = json.loads(args.verdict.read_text())
    except (OSError, ValueError) as error:
        parser.error(f"verdict {str(args.verdict)!r}: {error}")
    print(markdown(record), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
