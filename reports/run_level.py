"""The run level of a paired ratio: how far it moves between runs of one commit beyond what one run's processes show.

One run's interval of a paired ratio (``benchmarks.intervals.ratio_interval``) is built from its processes. If every
run of the same commit also carried an effect of its own, shared by all of its processes, that interval would be
too narrow, and no single run could tell. Following Kalibera and Jones ("Rigorous benchmarking in reasonable time",
ISMM 2013), the level is measured once with repeated runs (``unfold-bench stability``), recorded per machine,
profile and suite, and added to the variance of every later interval of that machine's ratios.

With :math:`R` runs of one cell, run :math:`r`'s mean log-ratio :math:`m_r` over :math:`n_r` processes of sample
variance :math:`s_r^2`, the method of moments gives

.. math::

    \\hat\\sigma^2_{\\mathrm{run}} = \\operatorname{Var}_r(m_r) - \\frac{1}{R} \\sum_r s_r^2 / n_r,

averaged over the suite's cells, with :math:`R - 1` degrees of freedom (the cells of one run share whatever moved
it). Each set of runs is recorded with its own estimate, negative where the runs moved less than their processes
predict; an interval pools every set recorded for the machine, profile and suite, weighted by degrees of freedom,
and floors the pool at 0, so that the noise of small sets averages out instead of adding up. Delete a record to
start afresh after a change of the harness or the machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.intervals import RunLevel
from benchmarks.records import read_records, write_records

RUN_LEVEL_FILE = "run-level.jsonl"  # results/<machine>/: one record per (profile, suite); asv reads only *.json


def log_means(table: pd.DataFrame) -> pd.DataFrame:
    """Per paired cell of one run's table (rows with per-process ``samples``): the number of processes, the mean
    log-ratio, its variance across the processes and its squared standard error."""
    rows = []
    for row in table.itertuples():
        logs = np.log([v for v in (row.samples or []) if v is not None and v > 0])
        if len(logs) < 2:
            continue
        rows.append(
            {
                "suite": row.suite,
                "cell": (row.config, row.strategy, row.metric, row.device),
                "processes": len(logs),
                "mean": float(logs.mean()),
                "variance": float(logs.var(ddof=1)),
                "error": float(logs.var(ddof=1) / len(logs)),
            }
        )
    return pd.DataFrame(rows, columns=["suite", "cell", "processes", "mean", "variance", "error"])


RunLevels = dict[tuple[str, str, str], RunLevel]  # (machine, profile, suite) -> the level its intervals add


def estimate(runs: Iterable[pd.DataFrame]) -> dict[str, RunLevel]:
    """Per suite, the run level of its paired ratios from several runs' tidy tables (``load_results`` of each
    run's own results): the method of moments over the cells measured in every run."""
    frames = [log_means(table).assign(run=index) for index, table in enumerate(runs)]
    count = len(frames)
    if count < 2:
        raise ValueError(f"runs: {count} given; a variance between runs needs at least 2")
    both = pd.concat(frames, ignore_index=True)
    out = {}
    for suite, rows in both.groupby("suite"):
        per_cell = rows.groupby("cell").agg(runs=("run", "nunique"), between=("mean", "var"), within=("error", "mean"))
        per_cell = per_cell[per_cell.runs == count]
        if per_cell.empty:
            continue
        out[str(suite)] = RunLevel(float((per_cell.between - per_cell.within).mean()), float(count - 1))
    return out


def pool(levels: Iterable[RunLevel]) -> RunLevel:
    """Several sets of runs' estimates of one run level as one: their mean weighted by degrees of freedom, at
    their summed degrees of freedom, floored at 0."""
    levels = list(levels)
    df = sum(level.df for level in levels)
    if not levels or df <= 0:
        raise ValueError(f"levels: {levels!r}; pooling needs at least one estimate with degrees of freedom")
    return RunLevel(max(sum(level.variance * level.df for level in levels) / df, 0.0), float(df))


def with_set(
    records: list[dict], profile: str, levels: dict[str, RunLevel], measured: str, provenance: dict
) -> list[dict]:
    """A machine's ``records`` with the estimates ``levels`` of one set of runs of ``profile``, first ``measured`` at
    that date and time, in place of that set's own earlier records; ``provenance`` (command, runs, commit) goes into
    each of its records."""
    kept = [r for r in records if (r.get("profile"), r.get("measured")) != (profile, measured)]
    written = time.strftime("%Y-%m-%d")
    new = [
        {"profile": profile, "suite": s, **asdict(v), "measured": measured, "date": written, **provenance}
        for s, v in levels.items()
    ]
    return [*kept, *new]


def write_run_levels(
    machine_dir: Path, profile: str, levels: dict[str, RunLevel], measured: str, provenance: dict
) -> Path:
    """Record the estimates ``levels`` of one set of runs in ``machine_dir`` beside the other sets' (``with_set``: a
    set recorded again replaces its own records). The file's path."""
    path = Path(machine_dir) / RUN_LEVEL_FILE
    return write_records(path, with_set(read_records(path), profile, levels, measured, provenance))


def pooled(records: list[dict], machine: str, leave_out: str | None = None) -> RunLevels:
    """The run levels of ``machine``'s ``records``: (machine, profile, suite) -> the ``pool`` of every set of runs
    recorded for it (but the set first ``measured`` at ``leave_out``)."""
    found: dict[tuple[str, str, str], list[RunLevel]] = {}
    for record in records:
        if leave_out is not None and record.get("measured") == leave_out:
            continue
        key = (machine, record["profile"], record["suite"])
        found.setdefault(key, []).append(RunLevel(record["variance"], record["df"]))
    return {key: pool(levels) for key, levels in found.items()}


def load_run_levels(results_dir: str | Path, leave_out: str | None = None) -> RunLevels:
    """The run levels recorded under ``results_dir`` (``pooled``), each machine named by its results directory (asv's
    machine name)."""
    found: RunLevels = {}
    for path in Path(results_dir).glob(f"*/{RUN_LEVEL_FILE}"):
        found.update(pooled(read_records(path), path.parent.name, leave_out))
    return found
