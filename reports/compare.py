"""Judge two revisions' asv results for the CI regression gate (``scripts/regress.py``).

For every benchmark cell measured at both revisions on one machine:

- **time** (``time_*``, wall clock): a regression when the median grew by more than the time threshold
  (default 10%) **and** asv's own significance test says the two sets of samples differ (``asv._stats.
  is_different``: a Mann-Whitney U test at p < 0.002 when there are enough samples, else non-overlapping
  99% confidence intervals; the test ``asv compare`` and ``asv continuous`` use).
- **memory** (``track_net_peak_*``, bytes): a net peak is deterministic up to the allocator's page
  granularity, so there are no samples to test; a regression is growth by more than the memory threshold
  (default 5%) **and** by more than ``MEMORY_FLOOR_BYTES``, so that a few pages on a tiny cell do not count.
- **failed**: a cell that fails at the new revision (and did not at the old) is a failure, reported as such
  and never as a pass; one skipped at both is left out.

- **instructions** (``callgrind``, for the cells the gate is told to count): instruction counts repeat to
  about 0.01%, so a regression is growth by more than the instruction threshold (default 2%), no test needed.

Rows name the mode that judged them (``wall clock``, ``net peak``, ``callgrind``), so a reader knows how to
read the significance column.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pandas as pd
from asv._stats import is_different
from asv.results import Results, iter_results_for_machine_and_hash

MEMORY_FLOOR_BYTES = 256 * 1024
COLUMNS = ["benchmark", "params", "mode", "unit", "before", "after", "ratio", "significant", "verdict"]


@dataclass(frozen=True)
class Thresholds:
    time: float = 0.10
    memory: float = 0.05
    instructions: float = 0.02  # callgrind counts repeat to about 0.01%: a 2% change is real
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES


def load_run(results_dir: str, machine: str, commit: str, env: str | None = None) -> Results:
    """The one result file of ``machine`` at ``commit`` (in ``env`` if given)."""
    found = [r for r in iter_results_for_machine_and_hash(results_dir, machine, commit)]
    found = [r for r in found if env is None or r.env_name == env]
    if len(found) != 1:
        names = [r.env_name for r in found]
        raise LookupError(f"expected one result of {machine} at {commit[:8]}, found {len(found)}: {names}")
    return found[0]


def _cells(result: Results, name: str) -> list[tuple[tuple, float | None, dict | None, list | None]]:
    params = result.get_result_params(name)
    combos = list(itertools.product(*params)) if params else [()]
    values = result.get_result_value(name, params)
    stats = result.get_result_stats(name, params)
    samples = result.get_result_samples(name, params)
    return list(zip(combos, values, stats, samples))


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def judge(before: float, after: float, stats_before: dict | None, stats_after: dict | None,
          samples_before: list | None, samples_after: list | None, unit: str,
          thresholds: Thresholds) -> tuple[float, bool | None, str]:  # fmt: skip
    """(ratio, significant, verdict) of one cell measured at both revisions."""
    ratio = after / before if before > 0 else (math.inf if after > 0 else 1.0)
    if unit == "seconds":
        significant = bool(stats_before and stats_after) and is_different(
            samples_before, samples_after, stats_before, stats_after
        )
        if significant and ratio > 1 + thresholds.time:
            return ratio, True, "regression"
        if significant and ratio < 1 / (1 + thresholds.time):
            return ratio, True, "improvement"
        return ratio, significant, "unchanged"
    grew = after - before
    if ratio > 1 + thresholds.memory and grew > thresholds.memory_floor_bytes:
        return ratio, None, "regression"
    if ratio < 1 / (1 + thresholds.memory) and -grew > thresholds.memory_floor_bytes:
        return ratio, None, "improvement"
    return ratio, None, "unchanged"


def compare(base: Results, head: Results, thresholds: Thresholds = Thresholds(),
            include: str = "") -> pd.DataFrame:  # fmt: skip
    """One row per benchmark cell present in either run (see the module docstring for the verdicts)."""
    rows = []
    names = sorted(set(base.get_all_result_keys()) | set(head.get_all_result_keys()))
    for name in names:
        if include and include not in name:
            continue
        metric = name.rsplit(".", 1)[-1]
        if not metric.startswith(("time_", "track_net_peak")):
            continue  # the analytic minima do not depend on the code
        unit = "seconds" if metric.startswith("time_") else "bytes"
        mode = "wall clock" if unit == "seconds" else "net peak"
        old = {c[0]: c[1:] for c in _cells(base, name)} if name in base.get_all_result_keys() else {}
        new = {c[0]: c[1:] for c in _cells(head, name)} if name in head.get_all_result_keys() else {}
        for params in sorted(set(old) | set(new)):
            before, stats_before, samples_before = old.get(params, (math.nan, None, None))
            after, stats_after, samples_after = new.get(params, (math.nan, None, None))
            row = {"benchmark": name, "params": ", ".join(p.strip("'") for p in params), "mode": mode,
                   "unit": unit, "before": before, "after": after, "ratio": math.nan, "significant": None}  # fmt: skip
            if after is None and before is not None:
                rows.append({**row, "before": before, "after": None, "verdict": "failed"})
            elif after is None:
                rows.append({**row, "verdict": "failed (also before)"})
            elif _missing(after) and _missing(before):
                continue  # skipped at both (no GPU, unsupported dims, or not selected)
            elif _missing(before) or _missing(after):
                rows.append({**row, "verdict": "new" if _missing(before) else "not measured"})
            else:
                ratio, significant, verdict = judge(
                    before, after, stats_before, stats_after, samples_before, samples_after, unit, thresholds
                )
                rows.append({**row, "ratio": ratio, "significant": significant, "verdict": verdict})
    return pd.DataFrame(rows, columns=COLUMNS)


def callgrind_rows(counts: dict[str, tuple[int, int]], thresholds: Thresholds = Thresholds()) -> pd.DataFrame:
    """Rows for instruction counts: ``counts`` maps a cell ("strategy, config, forward") to (before, after)."""
    rows = []
    for cell, (before, after) in counts.items():
        ratio = after / before
        verdict = "unchanged"
        if ratio > 1 + thresholds.instructions:
            verdict = "regression"
        elif ratio < 1 / (1 + thresholds.instructions):
            verdict = "improvement"
        rows.append({"benchmark": "instructions (callgrind)", "params": cell, "mode": "callgrind",
                     "unit": "instructions", "before": before, "after": after, "ratio": ratio,
                     "significant": None, "verdict": verdict})  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def exit_status(table: pd.DataFrame) -> int:
    """0: pass; 1: a significant regression beyond the threshold; 2: a cell failed at the new revision."""
    if (table.verdict == "failed").any():
        return 2
    return 1 if (table.verdict == "regression").any() else 0


def format_table(table: pd.DataFrame, only_changed: bool = True) -> str:
    """The rows a reviewer needs (changes and failures), with units."""
    shown = table[table.verdict != "unchanged"] if only_changed else table
    if shown.empty:
        return "no benchmark changed beyond its threshold; none failed"

    def value(v: float | None, unit: str) -> str:
        if v is None:
            return "failed"
        if isinstance(v, float) and math.isnan(v):
            return "n/a"
        if unit == "instructions":
            return f"{v:,.0f} instr"
        return f"{v * 1e3:.4g} ms" if unit == "seconds" else f"{v / 2**20:.4g} MiB"

    lines = pd.DataFrame(
        {
            "verdict": shown.verdict,
            "benchmark": shown.benchmark,
            "params": shown.params,
            "mode": shown["mode"],  # not shown.mode: that is DataFrame.mode()
            "before": [value(v, u) for v, u in zip(shown.before, shown.unit)],
            "after": [value(v, u) for v, u in zip(shown.after, shown.unit)],
            "ratio": [f"{r:.2f}x" if not math.isnan(r) else "" for r in shown.ratio],
            "significant": ["" if s is None else ("yes" if s else "no") for s in shown.significant],
        }
    )
    return lines.to_string(index=False)
