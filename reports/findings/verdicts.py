"""What a finding is, the runs findings judge, and how a figure's verdict against a target is worked out."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd

from benchmarks.allocator import regime_of_machine
from benchmarks.vocabulary import FULL_PROFILE, TIMED_PASSES, min_peak_metric, pass_label, tracked_peak_metric
from reports.analysis import cell_table, fastest_against_bounds, latest_runs, regime_label, select_run
from reports.units import format_interval, format_ratio, format_ratio_interval

SOURCES = "Claims of the source documents"
ROOFLINE = "The fastest against the roofline and the analytic minimum: All-CNN-C layers, full profile"
NEW_TENSOR = "The fastest that returns a new tensor, against its floors: All-CNN-C layers, full profile"
PHYSICS = "Physics checks"
TOPICS = (SOURCES, ROOFLINE, NEW_TENSOR, PHYSICS)
ONEHOT = "onehot"  # unfoldNd's strategy
ALLCNNC_PREFIX = "allcnnc-"
PASS_METRICS = {  # time metric -> (pass name, the net peak of that pass, its analytic minimum)
    metric: (pass_label(which), tracked_peak_metric(which), min_peak_metric(which))
    for metric, which in TIMED_PASSES.items()
}


@dataclass(frozen=True, eq=False)
class Finding:
    """One claim or target and its verdict, with the evidence and where it came from."""

    topic: str  # one of TOPICS: the section of the page
    claim: str
    verdict: str  # "holds", "does not hold", "met on k of n" or "not measured", then ": " and the details
    evidence: pd.DataFrame
    source: str  # machine, commit, profile, regime and device, or how the verdict was computed
    note: str = ""  # e.g. where a target is missed, or the verdict when output reuse is allowed
    run: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # machine, commit, ... device

    @property
    def outcome(self) -> str:
        """The verdict's kind: ``holds``, ``does not hold``, ``met`` (on every config), ``partly met``,
        ``missed`` (on every config) or ``not measured``."""
        if self.verdict.startswith("met on "):
            met, measured = self.verdict.removeprefix("met on ").split(":")[0].split(" of ")
            return "met" if met == measured else "missed" if int(met) == 0 else "partly met"
        return self.verdict.split(":")[0]


@dataclass(frozen=True)
class Run:
    """One device of one run: its rows, its cells (``cell_table``) and how findings name it."""

    run: Mapping[str, str]  # RUN_KEYS plus regime and device
    rows: pd.DataFrame  # the run's rows on this device (unfold and bounds)
    cells: pd.DataFrame

    @property
    def source(self) -> str:
        r = self.run
        return (
            f"{r['machine']}, commit {r['commit'][:8]}, {r['profile']} profile, timed: {r['regime']}, "
            f"{r['device'].upper()}"
        )

    def bound(self, config: str, metric: str, column: str = "value") -> float:
        """A bound measured in this run (``time_copy``, ``time_fresh_output``, ...): its median, or another column
        of its row (``q_25``, ``q_75``: the quartiles of its samples); NaN unless ``ok``."""
        rows = self.rows[(self.rows.suite == "bounds") & (self.rows.config == config) & (self.rows.metric == metric)]
        ok = rows[rows.status == "ok"]
        value = ok[column].iloc[0] if not ok.empty and column in ok else None
        return math.nan if value is None or pd.isna(value) else float(value)


def run_regime(run_rows: pd.DataFrame, machine: str) -> str:
    label = regime_label(run_rows)
    return regime_of_machine(machine).label if label == "unrecorded" else label


def newest_runs(table: pd.DataFrame) -> list[Run]:
    """Every device with figures of the newest run of each machine and profile."""
    if table.empty:
        return []
    out = []
    for run in latest_runs(table).sort_values(["machine", "profile"]).to_dict("records"):
        run_rows = select_run(table, run)
        regime = run_regime(run_rows, run["machine"])
        for device in sorted(set(run_rows.device.dropna())):
            cells = cell_table(run_rows, device)
            if cells.empty:
                continue  # every cell skipped (a device this machine lacks)
            keys = {key: str(run[key]) for key in ("machine", "env", "profile", "commit")}
            out.append(
                Run(
                    MappingProxyType({**keys, "regime": regime, "device": device}),
                    run_rows[run_rows.device == device],
                    cells,
                )
            )
    return out


def not_measured(topic: str, claim: str, reason: str, source: str = "", run: Run | None = None) -> Finding:
    return Finding(
        topic,
        claim,
        f"not measured: {reason}",
        pd.DataFrame(),
        run.source if run else source,
        run=run.run if run else MappingProxyType({}),
    )


UNDECIDED = "within the noise"  # a verdict whose figure's interval spans the limit


def judged(
    value: float,
    limit: float,
    unit: Callable[[float], str] = format_ratio,
    interval: tuple[float, float] | None = None,
) -> str:
    """The verdict on a figure that must be at most ``limit``: met, missed (a ratio: the figure against the limit, as a
    ratio misses by a factor; else by how much), or not measured. With the figure's ``interval`` (both ends known),
    met only when all of it is within the limit, missed only when all of it is beyond, and otherwise ``UNDECIDED``,
    saying the interval."""
    if value is None or pd.isna(value):
        return "not measured"
    if interval is not None and not any(pd.isna(end) for end in interval):
        low, high = interval
        if low <= limit * (1 + 1e-9) < high:
            return f"{UNDECIDED}: {format_ratio_interval(value, low, high)} spans {unit(limit)}"
    if value <= limit * (1 + 1e-9):  # 1e-9: float round-off
        return "met"
    if unit is format_ratio:  # a ratio misses by a factor, not by a difference of ratios
        decimals = next((d for d in range(2, 6) if format_ratio(value, d) != format_ratio(limit, d)), 6)
        return f"missed: {format_ratio(value, decimals)} against at most {format_ratio(limit, decimals)}"
    return f"missed by {unit(value - limit)}"


def interval_text(interval: tuple[float, float] | None) -> str:
    """A figure's range as an evidence column shows it, "[low, high]" (a paired ratio's 95% interval across
    processes, or the range its column names: quartiles apart, intervals' ends); "-" without one."""
    if interval is None or any(pd.isna(end) for end in interval):
        return "-"
    return format_interval(*interval)


def met_verdict(verdicts: Iterable[str], where: Iterable[str]) -> tuple[str, str]:
    """The verdict over per-config verdicts ("met on k of n") and a note naming where it is missed, where its
    interval spans the limit, and where it was not measured."""
    pairs = list(zip(verdicts, where))
    measured = [(v, w) for v, w in pairs if v != "not measured"]
    if not measured:
        return "not measured: the run has none of the figures or bounds it needs", ""
    met = sum(v == "met" for v, _ in measured)
    verdict = f"met on {met} of {len(measured)}"
    missed = [f"{w} ({v})" for v, w in measured if v.startswith("missed")]
    undecided = [f"{w} ({v.removeprefix(UNDECIDED + ': ')})" for v, w in measured if v.startswith(UNDECIDED)]
    unmeasured = [w for v, w in pairs if v == "not measured"]
    notes = [("Missed on " + ", ".join(missed) + ".") if missed else ""]
    notes.append(f"Within the noise on {', '.join(undecided)}." if undecided else "")
    notes.append(("Not measured on " + ", ".join(unmeasured) + ".") if unmeasured else "")
    return verdict, " ".join(n for n in notes if n)


def full_allcnnc_runs(runs: list[Run]) -> list[Run]:
    return [r for r in runs if r.run["profile"] == FULL_PROFILE and r.cells.config.str.startswith(ALLCNNC_PREFIX).any()]


def allcnnc(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells.config.str.startswith(ALLCNNC_PREFIX)]


def no_full_run(topic: str, claims: Iterable[str]) -> list[Finding]:
    reason = "no full-profile run with All-CNN-C layers in the results (make bench-full)"
    return [not_measured(topic, claim, reason, "the newest run of each machine and profile") for claim in claims]


def fastest(cells: pd.DataFrame, set_aside: Mapping[str, str]) -> pd.DataFrame:
    """``fastest_against_bounds`` indexed by (config, metric)."""
    return fastest_against_bounds(cells, set_aside).set_index(["config", "metric"])


def get(frame: pd.DataFrame, key: tuple, column: str) -> float | str | None:
    return frame.loc[key, column] if key in frame.index else None


# A target judged a second way, in evidence columns suffixed by the label: the phrase that opens its note.
ALTERNATIVE_VERDICTS = {
    " (reuse allowed)": "With output reuse allowed",
    " (4 KiB pages)": "Without huge-page advice (4 KiB pages, against the fresh-output floor)",
}


def target_finding(topic: str, claim: str, run: Run, evidence: pd.DataFrame, why: str = "") -> Finding:
    """A target's finding from its evidence: ``verdict`` per row (and ``verdict (reuse allowed)`` and the like,
    ``ALTERNATIVE_VERDICTS``, if there).
    ``why``: what the evidence's explanatory columns show, added to the note when the target is missed somewhere."""
    where = [" ".join(str(v) for v in row) for row in evidence[[c for c in ("config", "pass") if c in evidence]].values]
    verdict, note = met_verdict(evidence["verdict"], where)
    if why and note.startswith("Missed"):
        note += f" Why: {why}"
    for label, phrase in ALTERNATIVE_VERDICTS.items():
        if f"verdict{label}" in evidence:
            alternative, _ = met_verdict(evidence[f"verdict{label}"], where)
            note = (note + " " if note else "") + f"{phrase}: {alternative}."
    return Finding(topic, claim, verdict, evidence, run.source, note, run.run)
