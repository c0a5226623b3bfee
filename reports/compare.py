"""Judge two revisions' asv results for the CI regression gate (``unfold-bench regress``).

For every benchmark cell measured at both revisions on one machine:

- **time, paired mode** (the default, what CI runs): ``paired_verdict`` on the interval of the ratio head / base
  across processes: a regression when the whole interval lies above ``1 + paired_margin``; ``unresolved`` when
  the cell could not resolve ``resolution_limit``.
- **time, asv mode** (``time_*``): a regression when the median grew by more than the time threshold **and** the
  slowdown is significant by asv's Mann-Whitney U test on per-round medians (one process's samples are
  correlated, so the round, not the sample, is the observation); without rounds, ``asv._stats.is_different`` on
  pooled samples.
- **memory** (``track_net_peak_*``): deterministic, so no test; growth beyond the memory threshold and beyond
  ``MEMORY_FLOOR_BYTES``.
- **instructions** (``callgrind``): growth beyond the instruction threshold, no test.
- **failed**: a cell that fails at the new revision is a failure, never a pass; one failing only at the old
  revision is ``fixed``.

Every default is a field of ``Thresholds``. Verdicts come from ``ratio_verdict`` and ``FAILED_VERDICTS``, except
``unresolved``, ``failed (a round)``, ``new``, ``not measured``, ``removed`` and an ``unchanged`` for a change not
significant or within the floor, set where they arise (which where: docs/internals.md#reportscomparepy).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

import pandas as pd
from asv._stats import binom, is_different, mann_whitney_u
from asv.results import Results, iter_results_for_machine_and_hash

from reports.results import ResultCell, unroll_result
from reports.units import recorded_unit

MEMORY_FLOOR_BYTES = 1 << 20  # the interpreter's own allocations move a tiny cell's net peak by pages, even in an A/A
P_THRESHOLD = 0.002  # asv's own (asv._stats.is_different)
COLUMNS = ["benchmark", "params", "mode", "unit", "before", "after", "ratio", "significant", "verdict", "failed_at"]
PAIRED_COLUMNS = [*COLUMNS, "low", "high", "resolution", "pairs", "processes", "error"]


@dataclass(frozen=True)
class Thresholds:
    """The gate's thresholds and how much it measures: the one place of their defaults (``unfold-bench regress``'s
    options read them from here)."""

    time: float = 0.10
    memory: float = 0.05
    instructions: float = 0.02  # callgrind counts repeat to about 0.01%: a 2% change is real
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES
    paired_margin: float = 0.05  # paired mode: the slowdown a change must clear with confidence (see docs)
    resolution_limit: float = 1.25  # paired mode: a time cell that resolves no better is reported unresolved
    target: float = 1.08  # paired mode: the resolution its design aims at (``unfold-bench variance`` sizes it)
    processes: int = 8  # paired mode: replicate processes (unless a machine's design is recorded: gate_design) ...
    process_rounds: int = 2  # ... each placing every cell's inputs afresh this many times ...
    blocks: int = 24  # ... and taking at most this many blocks A B B A per placement ...
    round_seconds: float = 0.3  # ... or this many seconds of them (at least 4 blocks)
    rounds: int = 8  # asv mode: interleaved rounds (processes) a side; ``min_rounds()`` is the fewest that can pass
    repeat: int = 3  # asv mode: samples per round (fixed, so that a lost round shows)


# a cell that failed, by the revision it failed at (``failed_at``)
FAILED_VERDICTS = {
    "both": "failed (also before)",
    "head": "failed",
    "base": "fixed",
    "unknown": "failed (revision unknown)",
}


def ratio_verdict(low: float, high: float, threshold: float) -> str:
    """The verdict on a change whose ratio head / base lies in [``low``, ``high``] (a point estimate: both the
    ratio): ``regression`` when all of it is above ``1 + threshold``, ``improvement`` when all of it is below
    ``1 / (1 + threshold)``, else ``unchanged``. Every mode of the gate that judges a ratio ends here."""
    if low > 1 + threshold:
        return "regression"
    if high < 1 / (1 + threshold):
        return "improvement"
    return "unchanged"


def change_ratio(before: float, after: float) -> float:
    """after / before; a growth from 0 is infinite, 0 to 0 no change."""
    return after / before if before > 0 else (math.inf if after > 0 else 1.0)


def load_run(results_dir: str, machine: str, commit: str, env: str | None = None) -> Results:
    """The one result file of ``machine`` at ``commit`` (in ``env`` if given)."""
    found = [r for r in iter_results_for_machine_and_hash(results_dir, machine, commit)]
    found = [r for r in found if env is None or r.env_name == env]
    if len(found) != 1:
        names = [r.env_name for r in found]
        raise LookupError(f"expected one result of {machine} at {commit[:8]}, found {len(found)}: {names}")
    return found[0]


def _by_params(result: Results, name: str) -> dict[tuple[str, ...], ResultCell]:
    """The cells of benchmark ``name`` in ``result`` by their parameters (none if it did not run ``name``)."""
    return {cell.params: cell for cell in unroll_result(result, [name])}


def _lost_a_round(samples: list | None, rounds: int | None, repeat: int | None) -> bool:
    """Whether a time cell has other than ``rounds`` x ``repeat`` samples: asv dropped a failed round's samples
    and the ones before it. Unknowable without a fixed ``repeat`` (then unequal rounds fall back to pooled
    samples, see ``judge``)."""
    return bool(rounds and repeat and samples) and len(samples) != rounds * repeat


def round_medians(samples: list | None, rounds: int | None) -> list[float] | None:
    """The median of each round's samples, or None when ``samples`` do not split into ``rounds`` equal runs.

    asv appends each round's samples to the earlier rounds' (``Results.add_result(append_samples=True)``), so
    with a fixed ``repeat`` the samples are ``rounds`` consecutive runs of equal length.
    """
    if not samples or not rounds or rounds < 2 or len(samples) % rounds:
        return None
    size = len(samples) // rounds
    return [statistics.median(samples[i * size : (i + 1) * size]) for i in range(rounds)]


def smallest_p(before: int, after: int) -> float:
    """The smallest two-sided p-value of an exact Mann-Whitney U test with these sample sizes.

    It is reached when the two sides do not overlap: 2 of the C(before + after, before) equally likely
    orderings are that extreme (all lower, all higher).
    """
    return 2 / binom(before + after, min(before, after))


def min_rounds(p_threshold: float = P_THRESHOLD) -> int:
    """The fewest rounds a side (equal sides) whose round medians can reach ``p < p_threshold``: 7 for 0.002."""
    rounds = 2
    while smallest_p(rounds, rounds) >= p_threshold:
        rounds += 1
    return rounds


def rounds_differ(before: list[float], after: list[float], p_threshold: float = P_THRESHOLD) -> bool:
    """asv's Mann-Whitney U test on per-round medians; False when so few rounds cannot reach ``p_threshold``."""
    if smallest_p(len(before), len(after)) >= p_threshold:
        return False
    return mann_whitney_u(before, after)[1] < p_threshold


def judge(
    before: float,
    after: float,
    stats_before: dict | None,
    stats_after: dict | None,
    samples_before: list | None,
    samples_after: list | None,
    unit: str,
    thresholds: Thresholds,
    rounds: int | None = None,
) -> tuple[float, bool | None, str, str]:
    """(ratio, significant, verdict, mode) of one cell measured at both revisions."""
    ratio = change_ratio(before, after)
    if unit == "seconds":
        medians_before, medians_after = round_medians(samples_before, rounds), round_medians(samples_after, rounds)
        if medians_before is not None and medians_after is not None:
            mode = f"wall clock ({rounds} rounds)"
            significant = rounds_differ(medians_before, medians_after)
        else:
            mode = "wall clock (pooled samples)"
            significant = bool(stats_before and stats_after) and is_different(
                samples_before, samples_after, stats_before, stats_after
            )
        verdict = ratio_verdict(ratio, ratio, thresholds.time) if significant else "unchanged"
        return ratio, significant, verdict, mode
    beyond_floor = abs(after - before) > thresholds.memory_floor_bytes  # a few pages on a tiny cell do not count
    verdict = ratio_verdict(ratio, ratio, thresholds.memory) if beyond_floor else "unchanged"
    return ratio, None, verdict, "net peak"


def compare(
    base: Results,
    head: Results,
    thresholds: Thresholds = Thresholds(),
    include: str = "",
    rounds: int | None = None,
    repeat: int | None = None,
) -> pd.DataFrame:
    """One row per benchmark cell present in either run (see the module docstring for the verdicts).

    ``rounds``: how many rounds (processes) per revision produced the samples, if each gave the same number;
    ``repeat``: that number, if known (then a time cell with fewer samples lost a round).
    """
    rows = []
    names = sorted(set(base.get_all_result_keys()) | set(head.get_all_result_keys()))
    for name in names:
        if include and include not in name:
            continue
        metric = name.rsplit(".", 1)[-1]
        if not metric.startswith(("time_", "track_net_peak")):
            continue  # the analytic minima do not depend on the code
        unit = recorded_unit(metric)
        metric_mode = "wall clock" if unit == "seconds" else "net peak"
        old, new = _by_params(base, name), _by_params(head, name)
        for params in sorted(set(old) | set(new)):
            absent = ResultCell(name, params, math.nan, None, None, "skipped")  # not run at that revision
            was, now = old.get(params, absent), new.get(params, absent)
            row = {
                "benchmark": name,
                "params": ", ".join(params),
                "mode": metric_mode,
                "unit": unit,
                "before": was.value,
                "after": now.value,
                "ratio": math.nan,
                "significant": None,
                "failed_at": "",
            }
            if now.status == "failed":
                failed_at = "both" if was.status == "failed" else "head"
                rows.append({**row, "verdict": FAILED_VERDICTS[failed_at], "failed_at": failed_at})
            elif not now.ok and not was.ok:
                continue  # skipped at both (no GPU, unsupported dims, or not selected), or failed then skipped
            elif unit == "seconds" and _lost_a_round(now.samples, rounds, repeat):
                failed_at = "both" if was.status == "failed" else "head"
                rows.append({**row, "verdict": "failed (a round)", "failed_at": failed_at})
            elif was.status == "failed":
                rows.append({**row, "verdict": FAILED_VERDICTS["base"], "failed_at": "base"})
            elif not was.ok or not now.ok:
                gone = params not in new  # no such cell at HEAD: a strategy removed (or renamed), not one it skips
                rows.append({**row, "verdict": "new" if not was.ok else "removed" if gone else "not measured"})
            else:
                ratio, significant, verdict, mode = judge(
                    was.value, now.value, was.stats, now.stats, was.samples, now.samples, unit, thresholds, rounds
                )
                lost = "base" if unit == "seconds" and _lost_a_round(was.samples, rounds, repeat) else ""
                rows.append(
                    {
                        **row,
                        "mode": mode,
                        "ratio": ratio,
                        "significant": significant,
                        "verdict": verdict,
                        "failed_at": lost,
                    }
                )
    return pd.DataFrame(rows, columns=COLUMNS)


DETECTION_POWER = 0.95
SLOWDOWN_GRID = (1.1, 1.15, 1.2, 1.25, 1.3, 1.4, 1.5, 1.6, 1.75, 2.0, 2.5, 3.0, 4.0)


def round_spread(medians_before: list[float], medians_after: list[float]) -> float:
    """The noise between rounds: the standard deviation of log(round median), pooled over both revisions."""
    variances = [statistics.variance([math.log(m) for m in medians]) for medians in (medians_before, medians_after)]
    return math.sqrt(sum(variances) / 2)


def detectable_slowdown(
    spread: float,
    rounds: int,
    thresholds: Thresholds = Thresholds(),
    power: float = DETECTION_POWER,
    trials: int = 400,
    seed: int = 0,
) -> float:
    """The smallest slowdown in ``SLOWDOWN_GRID`` the wall-clock rule flags with probability >= ``power``.

    Simulated: ``rounds`` round medians a side, log-normal with standard deviation ``spread`` (a cell's
    ``round_spread``), the later side slower by the factor; flagged when ``rounds_differ`` and the ratio passes
    the time threshold. The simulation has no samples within a round, so its ratio is that of the medians of
    round medians, where ``judge`` uses asv's median of all samples; with equal rounds both estimate the same
    factor, and the test, which decides here, is the same. ``math.inf`` when even the grid's largest is
    missed. Power grows with the factor, so the grid is bisected.
    """

    def caught(factor: float) -> bool:
        rng = random.Random(seed)
        hits = 0
        for _ in range(trials):
            a = [math.exp(rng.gauss(0, spread)) for _ in range(rounds)]
            b = [factor * math.exp(rng.gauss(0, spread)) for _ in range(rounds)]
            hits += rounds_differ(a, b) and statistics.median(b) / statistics.median(a) > 1 + thresholds.time
        return hits >= power * trials

    low, high = 0, len(SLOWDOWN_GRID) - 1
    if not caught(SLOWDOWN_GRID[high]):
        return math.inf
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if caught(SLOWDOWN_GRID[middle]) else (middle + 1, high)
    return SLOWDOWN_GRID[low]


def resolution(
    base: Results, head: Results, rounds: int, thresholds: Thresholds = Thresholds(), include: str = ""
) -> pd.DataFrame:
    """Per wall-clock cell of a gate run: its round spread and the slowdown the gate catches 95% of the time.

    A gate run measures its own noise: this is what a regression had to be for this run to catch it reliably
    (``detectable_slowdown`` at that cell's ``round_spread``), so a pass says how much it rules out.
    """
    rows = []
    for name in sorted(set(base.get_all_result_keys()) & set(head.get_all_result_keys())):
        if include not in name or not name.rsplit(".", 1)[-1].startswith("time_"):
            continue
        after = {params: cell.samples for params, cell in _by_params(head, name).items()}
        for cell in unroll_result(base, [name]):
            medians_before = round_medians(cell.samples, rounds)
            medians_after = round_medians(after.get(cell.params), rounds)
            if medians_before is None or medians_after is None:
                continue
            spread = round_spread(medians_before, medians_after)
            rows.append(
                {
                    "benchmark": name,
                    "params": ", ".join(cell.params),
                    "spread": spread,
                    "detectable": detectable_slowdown(spread, rounds, thresholds),
                }
            )
    return pd.DataFrame(rows, columns=["benchmark", "params", "spread", "detectable"])


def callgrind_rows(
    counts: dict[str, tuple[int | None, int | None]], thresholds: Thresholds = Thresholds()
) -> pd.DataFrame:
    """Rows for instruction counts: ``counts`` maps a cell ("strategy, config, forward") to (before, after),
    ``None`` for a count that failed."""
    rows = []
    for cell, (before, after) in counts.items():
        failed_at = {(True, True): "both", (False, True): "head", (True, False): "base"}.get(
            (before is None, after is None), ""
        )
        ratio = math.nan if failed_at else change_ratio(before, after)
        verdict = FAILED_VERDICTS[failed_at] if failed_at else ratio_verdict(ratio, ratio, thresholds.instructions)
        rows.append(
            {
                "benchmark": "instructions (callgrind)",
                "params": cell,
                "mode": "callgrind",
                "unit": "instructions",
                "before": before,
                "after": after,
                "ratio": ratio,
                "significant": None,
                "verdict": verdict,
                "failed_at": failed_at,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


COMPARED_VERDICTS = ("regression", "improvement", "unchanged", "unresolved")  # a cell measured at both revisions


def paired_verdict(low: float, high: float, resolution: float, thresholds: Thresholds = Thresholds()) -> str:
    """The paired mode's verdict on one time cell from its interval of the ratio head / base across processes
    (``benchmarks.replicates.across_processes``): a regression when the whole interval lies above
    ``1 + paired_margin``, an improvement when it lies below ``1 / (1 + paired_margin)``; otherwise
    ``unresolved`` when the cell could not resolve ``resolution_limit`` (the gate cannot vouch for it), else
    ``unchanged``. The interval already holds the spread between processes, so no process is judged alone."""
    if math.isnan(low) or math.isnan(high):  # nothing is known: never beyond
        low = high = math.nan
    verdict = ratio_verdict(low, high, thresholds.paired_margin)
    if verdict == "unchanged" and not resolution <= thresholds.resolution_limit:  # a NaN resolution resolves nothing
        return "unresolved"
    return verdict


def paired_table(measurements: list[dict], profile: str, thresholds: Thresholds = Thresholds()) -> pd.DataFrame:
    """The gate's table from the paired mode's measurements (``benchmarks.paired``: one dict per time or memory
    cell), in the rows and verdicts of ``compare`` plus the time cells' interval, resolution, pairs and processes."""
    rows = []
    for m in measurements:
        benchmark = (
            f"unfold.{profile.capitalize()}.{'track_' if m['measure'].startswith('net_peak') else ''}{m['measure']}"
        )
        unit = recorded_unit(benchmark.rsplit(".", 1)[-1])
        row = {
            "benchmark": benchmark,
            "params": f"{m['strategy']}, {m['config']}, {m['device']}",
            "unit": unit,
            "mode": "net peak" if unit == "bytes" else "wall clock (paired)",
            "before": math.nan,
            "after": math.nan,
            "ratio": math.nan,
            "significant": None,
            "failed_at": m.get("failed_at", ""),
            "low": math.nan,
            "high": math.nan,
            "resolution": math.nan,
            "pairs": 0,
            "processes": 0,
            "error": m.get("error", ""),
        }
        if m.get("skipped_at") == "both":
            continue  # runs at neither revision here (no GPU, unsupported dims or dtype), as in ``compare``
        if m.get("absent_at") or m.get("skipped_at"):
            side = m.get("absent_at") or m["skipped_at"]
            rows.append(
                {
                    **row,
                    "verdict": {"base": "new", "head": "removed" if m.get("absent_at") else "not measured"}.get(
                        side, "not measured"
                    ),
                }
            )
        elif row["failed_at"]:
            rows.append({**row, "verdict": FAILED_VERDICTS[row["failed_at"]]})
        elif unit == "bytes":
            ratio, _, verdict, mode = judge(m["before"], m["after"], None, None, None, None, unit, thresholds)
            rows.append({**row, "before": m["before"], "after": m["after"], "ratio": ratio, "verdict": verdict})
        else:
            verdict = paired_verdict(m["low"], m["high"], m["resolution"], thresholds)
            significant = verdict in ("regression", "improvement")
            rows.append(
                {
                    **row,
                    "ratio": m["ratio"],
                    "low": m["low"],
                    "high": m["high"],
                    "significant": significant,
                    "resolution": m["resolution"],
                    "pairs": m["pairs"],
                    "processes": m.get("processes", 0),
                    "verdict": verdict,
                }
            )
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def gate_decision(table: pd.DataFrame, asv_status: int = 0, nothing_to_time: bool = False) -> tuple[int, str]:
    """(exit status, why): 2 when a cell failed at the new revision, when asv reported a failed benchmark
    (``asv continuous`` exits 2), or when no cell was compared, unless ``nothing_to_time`` (every selected
    strategy's files were the same at both revisions, so none was measured: ``benchmarks.impact``); else 1 for a
    significant regression beyond a threshold; else 0. No cell compared at both revisions is 2 where the new
    revision stopped running a cell the old one ran (``not measured``: a change that makes the strategy refuse
    every selected input would otherwise pass unjudged), 0 where strategies were only added, removed or fixed.

    asv's status counts whatever it saw fail: asv restarts a cell's samples after a failed round, and a memory
    cell keeps no samples, so a round lost at HEAD can leave no trace in the results. asv's status does not say
    which revision failed, so a failure at BASE (rows ``fixed``) cannot rule one out at HEAD: the gate fails
    closed, and says so."""
    failed_at = table.failed_at.fillna("")
    measured = (table["mode"] != "callgrind").sum()
    if not measured and not nothing_to_time:
        return 2, "FAIL: no benchmark cell was compared (all skipped or none selected)"
    if failed_at.isin(["head", "both", "unknown"]).any():
        return 2, "FAIL: a benchmark failed at head (or a measuring process died, revision unknown)"
    if asv_status == 2:
        if failed_at.astype(bool).any():
            return 2, (
                "FAIL: asv reported a failed benchmark; rows marked base failed at BASE, and asv does not "
                "say whether a round also failed at HEAD (see its log above)"
            )
        return 2, "FAIL: asv reported a failed benchmark that the saved results do not show (see its log above)"
    if (table.verdict == "regression").any():
        return 1, "FAIL: regression"
    if not measured:
        return 0, "PASS: nothing timed: every selected strategy's files are identical at both revisions"
    if not table.verdict[table["mode"] != "callgrind"].isin(COMPARED_VERDICTS).any():
        unmeasured = int((table.verdict == "not measured").sum())
        if unmeasured:
            return 2, (
                f"FAIL: no time or memory cell was compared at both revisions: head no longer runs {unmeasured} "
                "cell(s) that base ran (not measured)"
            )
        return 0, "PASS: no time or memory cell was compared at both revisions: strategies only added, removed or fixed"
    return 0, "PASS"
