"""The regression gate's number of processes on one machine, sized from the gate's own A/A runs there.

Each time cell of a gate run reports its resolution :math:`\\rho = (1 + \\text{margin}) \\exp(\\lambda_{k-2}\\, se)`
(``benchmarks.replicates.resolution``), where :math:`k` processes, half per set-up order, give
:math:`se = \\sqrt{v / k}` with :math:`v` the variance of one process's log-ratio head / base at the gate's rounds
and blocks (a process that returned too few rows leaves the halves unequal, which this ignores: 2% of
:math:`se^2` at 3 and 4). Inverting it gives :math:`v` per cell and run; the runs' estimates of a cell are
pooled by their :math:`k - 2` degrees of freedom, and the resolution at any other :math:`k` follows. The design is
the fewest processes whose median time cell resolves the target. It is sized from A/A runs through the gate's own
path (two revisions loaded side by side) on the machine that will run the gate, since the process level is what
differs between machines (``docs/regression-gate.md``).

The design is recorded per machine in ``results/<machine>/gate-design.jsonl``, the last record the one in force;
``unfold-bench regress`` takes its ``--processes`` from it for a run of the profile, regime, allocator setting, rounds,
blocks and round seconds it was sized at: a change of how the regime sets the allocator changes the process variance,
so a design sized before it no longer applies.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.allocator import get_regime, regime_environment
from benchmarks.machine import allocator_setting
from benchmarks.records import append_records
from benchmarks.replicates import MAX_PROCESSES, resolution

GATE_DESIGN_FILE = "gate-design.jsonl"  # results/<machine>/: asv reads only *.json there
# read back from validation_header's line
_VALIDATION_SOURCE = re.compile(r"machine (\S+), commit (\w+),")
_VALIDATION_ALLOCATOR = re.compile(r"allocator \[(.*?)\];")


@dataclass(frozen=True)
class GateDesign:
    """A design of the paired gate, what it was sized at and where it came from. ``processes`` is what it sets;
    a run uses it only at the same profile, regime, allocator setting, rounds, blocks and round seconds."""

    processes: int
    profile: str
    regime: str
    rounds: int
    blocks: int
    round_seconds: float
    target: float
    median_resolution: float  # of the measured time cells at ``processes``
    cells: int
    runs: int
    source: str  # the runs' tables
    commit: str  # the commit the runs measured
    date: str
    allocator: str = ""  # allocator_of(regime) when sized; "" in records from before the field


def allocator_of(regime: str) -> str:
    """How the allocator is set in the processes that time in ``regime`` (``benchmarks.machine.allocator_setting``)."""
    return allocator_setting(regime_environment(get_regime(regime)))


def process_variance(caught: float, processes: int, alpha: float, power: float, margin: float) -> float:
    """The variance of one process's log-ratio that a gate run of ``processes`` processes reports as the
    resolution ``caught`` at ``margin``: ``resolution`` solved for its standard error, squared, times ``processes``.
    A resolution below ``1 + margin`` cannot come from that margin, and is refused."""
    if caught < 1 + margin - 1e-12:
        raise ValueError(f"resolution {caught:.4f}x is below 1 + margin ({1 + margin:g}): judged at another margin")
    noncentrality = math.log(resolution(1.0, processes - 2, alpha, power))
    return processes * (math.log(caught / (1 + margin)) / noncentrality) ** 2


def resolution_at(variance: float, processes: int, alpha: float, power: float, margin: float) -> float:
    """The resolution of a cell of per-process log-ratio variance ``variance`` in ``processes`` processes."""
    return resolution(math.sqrt(variance / processes), processes - 2, alpha, power, margin)


def measured_cells(tables: Iterable[pd.DataFrame], processes: int) -> pd.DataFrame:
    """The time cells of the gate's tables that were measured (a pair or more, a resolution), one table after
    another, each with its processes: the table's ``processes`` column, or ``processes`` where a table has none
    (from before the column) or a row has none."""
    out = []
    for table in tables:
        time = table[(table.unit == "seconds") & (table.pairs > 0) & table.resolution.notna()].copy()
        counts = time["processes"] if "processes" in time else pd.Series(np.nan, index=time.index)
        time["processes"] = counts.where(pd.notna(counts) & (counts > 0), processes).astype(int)
        out.append(time[["benchmark", "params", "resolution", "processes"]])
    cells = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    if cells.empty:
        raise ValueError("no time cell with a resolution in the gate's tables")
    return cells


def cell_variances(cells: pd.DataFrame, alpha: float, power: float, margin: float) -> pd.Series:
    """Per time cell (benchmark, params) of ``measured_cells``: the per-process variance, its runs' estimates pooled by
    their degrees of freedom (``processes - 2`` each)."""
    variance = [process_variance(row.resolution, row.processes, alpha, power, margin) for row in cells.itertuples()]
    pooled = cells.assign(df=cells.processes - 2, weighted=np.asarray(variance) * (cells.processes - 2))
    sums = pooled.groupby(["benchmark", "params"])[["weighted", "df"]].sum()
    return sums.weighted / sums.df


def designs(
    variances: pd.Series, alpha: float, power: float, margin: float, slowdown: float, target: float
) -> pd.DataFrame:
    """For every even number of processes from 4 to ``MAX_PROCESSES``: the median and 90th percentile of the
    cells' resolutions, and the shares of cells resolving ``target`` and ``slowdown``."""
    out = []
    for k in range(4, MAX_PROCESSES + 1, 2):
        caught = np.array([resolution_at(v, k, alpha, power, margin) for v in variances])
        out.append(
            {
                "processes": k,
                "median": float(np.median(caught)),
                "p90": float(np.quantile(caught, 0.9)),
                "target": float((caught <= target).mean()),
                "slowdown": float((caught <= slowdown).mean()),
            }
        )
    return pd.DataFrame(out)


def fewest(table: pd.DataFrame, target: float) -> int | None:
    """The fewest processes of ``designs``' table whose median cell resolves ``target`` (None: none does)."""
    reaching = table[table["median"] <= target]
    return int(reaching.processes.min()) if len(reaching) else None


def report(table: pd.DataFrame, measured: int, target: float, slowdown: float) -> str:
    """``designs``' table as text, each design's processes as a multiple of the measured runs' ``measured``."""
    lines = [
        f"{'processes':>9} {'median':>8} {'p90':>8} {f'resolving {target:.2f}x':>15} "
        f"{f'resolving {slowdown:.2f}x':>15} {'time':>6}"
    ]
    for row in table.itertuples():
        lines.append(
            f"{row.processes:>9} {row.median:>7.3f}x {row.p90:>7.3f}x {row.target:>15.0%} {row.slowdown:>15.0%} "
            f"{row.processes / measured:>5.2f}x"
        )
    return "\n".join(lines)


def record(results_dir: Path, machine: str, design: GateDesign) -> Path:
    """Append ``design`` to ``machine``'s record: from now on the one its gate runs with."""
    path = Path(results_dir) / machine / GATE_DESIGN_FILE
    append_records(path, [asdict(design)])
    return path


def recorded(results_dir: Path, machine: str) -> GateDesign | None:
    """The design in force for ``machine`` (its record's last line), or None where none is recorded; a record
    that is not a design of at least 4 processes, an even number, is refused naming its file."""
    path = Path(results_dir) / machine / GATE_DESIGN_FILE
    lines = [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if not lines:
        return None
    try:
        values = json.loads(lines[-1])
        design = GateDesign(
            **{f.name: values[f.name] for f in fields(GateDesign) if f.name in values or f.default is MISSING}
        )
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: its last line is not a gate design ({type(error).__name__}: {error})") from None
    if not isinstance(design.processes, int) or design.processes < 4 or design.processes % 2:
        raise ValueError(f"{path}: processes {design.processes!r}: must be even and at least 4")
    return design


def processes_for(
    results_dir: Path,
    machine: str,
    profile: str,
    regime: str,
    rounds: int,
    blocks: int,
    round_seconds: float,
    default: int,
) -> tuple[int, str]:
    """The gate's processes on ``machine`` for a run of this profile, regime, rounds, blocks and round seconds, and
    why: the design recorded for it under ``results_dir`` where it was sized at the same and under the regime's
    allocator setting of today (``allocator_of``), else ``default``."""
    design = recorded(results_dir, machine)
    if design is None:
        return default, "the default; no design is recorded for this machine (unfold-bench variance --from-gate-runs)"
    sized = (design.profile, design.regime, design.rounds, design.blocks, design.round_seconds)
    if sized != (profile, regime, rounds, blocks, round_seconds):
        return default, (
            f"the default; the design recorded for this machine was sized at the {design.profile} profile, "
            f"{design.regime} regime, {design.rounds} placements x {design.blocks} blocks or "
            f"{design.round_seconds:g} s, not this run's"
        )
    today = allocator_of(regime)
    if design.allocator != today:
        return default, (
            f"the default; the design recorded for this machine was sized with the allocator "
            f"{design.allocator or 'of an earlier version (not recorded)'}, not this run's: "
            f"{today} (unfold-bench variance --from-gate-runs to size it again)"
        )
    return design.processes, (
        f"this machine's design: median resolution {design.median_resolution:.3f}x of {design.cells} time cells "
        f"against a target of {design.target:g}x, from {design.runs} A/A gate runs at {design.commit} "
        f"({design.source}, {design.date})"
    )


def validation_header(command: str, machine: str, commit: str, date: str, allocator: str) -> str:
    """The start of the first line of ``validate-gate --out FILE``: its command, the machine and commit its runs
    measured and the allocator setting they timed under (``allocator_of`` the gate's regime)."""
    return f"{command}: machine {machine}, commit {commit}, {date}, allocator [{allocator}];"


def validation_first_line(runs: Path) -> str:
    """The first line of the ``validate-gate --out FILE`` whose tables ``runs`` holds (FILE's stem + "-runs/"):
    its command, machine, commit, allocator and what it injected; "" where there is no such file (a ``--workdir``)."""
    text = runs.with_name(runs.name.removesuffix("-runs") + ".txt")
    return text.read_text().split("\n", 1)[0] if runs.name.endswith("-runs") and text.exists() else ""


def validation_source(first_line: str) -> dict[str, str]:
    """The machine, commit and allocator setting that a validation's first line names (``validation_header``);
    empty where none, and no ``allocator`` in a line from before it was named."""
    found = _VALIDATION_SOURCE.search(first_line)
    if not found:
        return {}
    allocator = _VALIDATION_ALLOCATOR.search(first_line)
    return {"machine": found.group(1), "commit": found.group(2)} | (
        {"allocator": allocator.group(1)} if allocator else {}
    )
