"""The Findings page: every claim and target the project states, with its verdict computed from the results.

Nothing here is written down by hand: ``findings(table, catalogue)`` judges, on the newest run of each machine and
profile (``reports.analysis.latest_runs``) and each device that has figures, the source documents' claims (what
``Tensor.unfold`` and ``F.unfold`` return, from torch's view checks that the bench records in the catalogue; unfoldNd
against ``nn.Unfold``, from the results), the roofline and new-tensor targets on the All-CNN-C layers of
full-profile runs, and the physics checks (``reports.summary.physics_problems``). Each ``Finding`` carries its
claim, its verdict, the evidence as a DataFrame and where it came from; missing data gives "not measured" with the
reason, never an error. ``render_html`` writes the page's body, ``format_text`` the same for a terminal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd
from markupsafe import Markup

from benchmarks.allocator import NET_PEAK_RESOLUTION, regime_of_machine
from reports.analysis import (
    REFERENCE_STRATEGY,
    cell_table,
    fastest_against_bounds,
    latest_runs,
    regime_label,
    select_run,
)
from reports.results import Catalogue
from reports.set_aside import set_aside
from reports.summary import UNPAIRED_FLOOR, physics_problems
from reports.templates import render
from reports.units import BYTES, MIB, format_ratio

SOURCES = "Claims of the source documents"
ROOFLINE = "The fastest against the roofline and the analytic minimum: All-CNN-C layers, full profile"
NEW_TENSOR = "The fastest that returns a new tensor, against its floors: All-CNN-C layers, full profile"
PHYSICS = "Physics checks"
TOPICS = (SOURCES, ROOFLINE, NEW_TENSOR, PHYSICS)
ONEHOT = "onehot"  # unfoldNd's strategy
ALLCNNC_PREFIX = "allcnnc-"
FULL_PROFILE = "full"
# the roofline targets: the fastest strategy over copy_ of the same run, and its net peak over the analytic minimum
ROOFLINE_FORWARD_X_COPY = 0.8
ROOFLINE_FORWARD_BACKWARD_X_COPY = 1.6
ROOFLINE_PEAK_X_MINIMUM = 1.05
# the new-tensor targets: the fastest strategy that returns a new tensor
NEW_TENSOR_FORWARD_X_FRESH_OUTPUT = 1.15
NEW_TENSOR_FORWARD_X_COPY = 1.3
NEW_TENSOR_FORWARD_BACKWARD_X_NATIVE = 0.5
NEW_TENSOR_HALF_X_FLOAT32 = 1.2
HALF_PRECISION = {"conv4-bfloat16": "allcnnc-conv4", "conv4-float16": "allcnnc-conv4"}  # config -> its float32 twin
PASSES = {  # time metric -> (pass name, the net peak of that pass, its analytic minimum)
    "time_forward": ("forward", "track_net_peak_forward", "track_min_peak_forward"),
    "time_forward_backward": ("forward-backward", "track_net_peak_forward_backward", "track_min_peak_forward_backward"),
}
INTRO = Markup(
    "Every verdict on this page is computed when the site is built, from the newest results of each machine and "
    "profile (and, for the claims about <code>Tensor.unfold</code> and <code>F.unfold</code>, from what the bench "
    "recorded by running torch): no number here is written by hand, so none can be contradicted by the next run. "
    "Each says which run it comes from: machine, commit, profile, timing regime and device. <b>Fastest</b> means "
    "the lowest median among the strategies that return a new tensor (those that reuse their output buffer, "
    "{set_aside}, are shown separately where a target allows them). A target missed says by how much; a claim or "
    "target whose figures a run lacks is <b>not measured</b>, with the reason."
)


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
class _Run:
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

    def bound(self, config: str, metric: str) -> float:
        """A bound measured in this run (``time_copy``, ``time_fresh_output``, ...); NaN unless ``ok``."""
        rows = self.rows[(self.rows.suite == "bounds") & (self.rows.config == config) & (self.rows.metric == metric)]
        ok = rows[rows.status == "ok"]
        return float(ok.value.iloc[0]) if not ok.empty else math.nan


def _regime(run_rows: pd.DataFrame, machine: str) -> str:
    label = regime_label(run_rows)
    return regime_of_machine(machine).label if label == "unrecorded" else label


def _runs(table: pd.DataFrame) -> list[_Run]:
    """Every device with figures of the newest run of each machine and profile."""
    if table.empty:
        return []
    out = []
    for run in latest_runs(table).sort_values(["machine", "profile"]).to_dict("records"):
        run_rows = select_run(table, run)
        regime = _regime(run_rows, run["machine"])
        for device in sorted(set(run_rows.device.dropna())):
            cells = cell_table(run_rows, device)
            if cells.empty:
                continue  # every cell skipped (a device this machine lacks)
            keys = {key: str(run[key]) for key in ("machine", "env", "profile", "commit")}
            out.append(
                _Run(
                    MappingProxyType({**keys, "regime": regime, "device": device}),
                    run_rows[run_rows.device == device],
                    cells,
                )
            )
    return out


def _not_measured(topic: str, claim: str, reason: str, source: str = "", run: _Run | None = None) -> Finding:
    return Finding(
        topic,
        claim,
        f"not measured: {reason}",
        pd.DataFrame(),
        run.source if run else source,
        run=run.run if run else MappingProxyType({}),
    )


def _judged(value: float, limit: float, unit: Callable[[float], str] = format_ratio) -> str:
    """The verdict on a figure that must be at most ``limit``: met, missed by how much, or not measured."""
    if value is None or pd.isna(value):
        return "not measured"
    return "met" if value <= limit * (1 + 1e-9) else f"missed by {unit(value - limit)}"  # 1e-9: float round-off


def _met_verdict(verdicts: Iterable[str], where: Iterable[str]) -> tuple[str, str]:
    """The verdict over per-config verdicts ("met on k of n") and a note naming where it is missed."""
    pairs = list(zip(verdicts, where))
    measured = [(v, w) for v, w in pairs if v != "not measured"]
    if not measured:
        return "not measured: the run has none of the figures or bounds it needs", ""
    met = sum(v == "met" for v, _ in measured)
    verdict = f"met on {met} of {len(measured)}"
    missed = [f"{w} ({v})" for v, w in measured if v != "met"]
    unmeasured = [w for v, w in pairs if v == "not measured"]
    note = ("Missed on " + ", ".join(missed) + ".") if missed else ""
    if unmeasured:
        note += (" " if note else "") + "Not measured on " + ", ".join(unmeasured) + "."
    return verdict, note


# --- the source documents' claims ----------------------------------------------------------------------------


def tensor_unfold_findings(catalogue: Catalogue) -> list[Finding]:
    """The claims that ``Tensor.unfold`` copies and that ``F.unfold`` returns new memory, from the checks the bench
    ran with its torch (``benchmarks.catalogue.torch_view_records``)."""
    claims = ("Tensor.unfold copies its input", "F.unfold returns new memory")
    if len(catalogue.torch_views) < 4:
        why = "no bench recorded the checks (results older than results/<machine>/catalogue.jsonl)"
        return [_not_measured(SOURCES, claim, why, "the bench's catalogue") for claim in claims]
    evidence = pd.DataFrame(
        [
            {
                "operation": view["operation"],
                "shares x's storage": view["shares"],
                "a write through it changes x": view["writes_through"],
            }
            for view in catalogue.torch_views
        ]
    )
    results = {view["operation"]: (view["shares"], view["writes_through"]) for view in catalogue.torch_views}
    source = f"{catalogue.torch_source}, on a 2x3x5x5 float32 x"
    names = list(results)  # in the order the bench ran them
    unfold_view = all(results[name][0] and results[name][1] for name in names[:2])
    unfold_verdict = (
        "does not hold: it is a view (it shares x's storage, and a write through it changes x)"
        if unfold_view
        else "holds: Tensor.unfold returned memory of its own"
    )
    reshaped_copies = not results[names[2]][0]
    note = (
        "Rearranging the windows into F.unfold's (N, C*k*k, L) layout is what copies: the reshape of the "
        "non-contiguous view allocates."
        if unfold_view and reshaped_copies
        else ""
    )
    fresh, fresh_writes = results[names[3]]
    f_unfold_verdict = (
        "holds: its output has a storage of its own, and writing it leaves x unchanged"
        if not fresh and not fresh_writes
        else "does not hold: its output shares x's storage"
    )
    return [
        Finding(SOURCES, claims[0], unfold_verdict, evidence, source, note),
        Finding(SOURCES, claims[1], f_unfold_verdict, evidence.tail(1).reset_index(drop=True), source),
    ]


ONEHOT_CLAIM = (
    "unfoldNd (strategy onehot) is faster than nn.Unfold (strategy native) in all but one case, with higher peak "
    "memory ({pass_name})"
)


def onehot_findings(runs: list[_Run]) -> list[Finding]:
    """The claim that unfoldNd beats ``nn.Unfold`` in all but one case with a higher peak, per run and pass."""
    out = []
    for time_metric, (pass_name, peak_metric, _) in PASSES.items():
        claim = ONEHOT_CLAIM.format(pass_name=pass_name)
        judged = 0
        for run in runs:
            finding = _onehot_finding(run, claim, time_metric, peak_metric)
            if finding is not None:
                out.append(finding)
                judged += 1
        if not judged:
            out.append(
                _not_measured(
                    SOURCES,
                    claim,
                    f"no run has {ONEHOT} and {REFERENCE_STRATEGY} on a common config",
                    "the newest run of each machine and profile",
                )
            )
    return out


def _onehot_finding(run: _Run, claim: str, time_metric: str, peak_metric: str) -> Finding | None:
    cells = run.cells.set_index(["config", "strategy"])
    lines = []
    for config in dict.fromkeys(run.cells.config):
        if (config, ONEHOT) not in cells.index or (config, REFERENCE_STRATEGY) not in cells.index:
            continue
        onehot, native = cells.loc[(config, ONEHOT)], cells.loc[(config, REFERENCE_STRATEGY)]
        if onehot[f"{time_metric}:status"] != "ok" or native[f"{time_metric}:status"] != "ok":
            continue
        peaks_ok = onehot[f"{peak_metric}:status"] == "ok" and native[f"{peak_metric}:status"] == "ok"
        lines.append(
            {
                "config": config,
                "onehot ms": onehot[time_metric] * 1e3,
                "native ms": native[time_metric] * 1e3,
                "onehot / native": onehot[time_metric] / native[time_metric],
                "onehot faster": bool(onehot[time_metric] < native[time_metric]),
                "onehot net peak MiB": onehot[peak_metric] / MIB if peaks_ok else math.nan,
                "native net peak MiB": native[peak_metric] / MIB if peaks_ok else math.nan,
                # higher: by more than the resolution of a net peak
                "onehot peak higher": bool(onehot[peak_metric] > native[peak_metric] + NET_PEAK_RESOLUTION)
                if peaks_ok
                else None,
            }
        )
    if not lines:
        return None
    evidence = pd.DataFrame(lines)
    n, faster = len(evidence), int(evidence["onehot faster"].sum())
    compared = evidence["onehot peak higher"].dropna()
    higher = int(compared.astype(bool).sum())
    holds = n - faster == 1 and len(compared) > 0 and higher == len(compared)
    verdict = (
        f"{'holds' if holds else 'does not hold'}: onehot is faster on {faster} of {n} configs, its net peak "
        f"higher on {higher} of {len(compared)}"
    )
    note = (
        "Faster: a lower median time in the same run. Higher peak: more than "
        f"{NET_PEAK_RESOLUTION // 1024} KiB above (the resolution of a net peak)."
    )
    return Finding(SOURCES, claim, verdict, evidence, run.source, note, run.run)


# --- the targets -----------------------------------------------------------------------------------------------


def _full_allcnnc_runs(runs: list[_Run]) -> list[_Run]:
    return [r for r in runs if r.run["profile"] == FULL_PROFILE and r.cells.config.str.startswith(ALLCNNC_PREFIX).any()]


def _allcnnc(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells.config.str.startswith(ALLCNNC_PREFIX)]


def _no_full_run(topic: str, claims: Iterable[str]) -> list[Finding]:
    reason = "no full-profile run with All-CNN-C layers in the results (make bench-full)"
    return [_not_measured(topic, claim, reason, "the newest run of each machine and profile") for claim in claims]


def _fastest(cells: pd.DataFrame, set_aside: Mapping[str, str]) -> pd.DataFrame:
    """``fastest_against_bounds`` indexed by (config, metric)."""
    return fastest_against_bounds(cells, set_aside).set_index(["config", "metric"])


def _get(frame: pd.DataFrame, key: tuple, column: str) -> float | str | None:
    return frame.loc[key, column] if key in frame.index else None


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


def roofline_findings(runs: list[_Run], aside: Mapping[str, str]) -> list[Finding]:
    """The roofline targets per full-profile run: time over ``copy_`` and the fastest's net peak over the minimum,
    for the fastest that returns a new tensor and, separately, the fastest when output reuse is allowed."""
    full = _full_allcnnc_runs(runs)
    if not full:
        return _no_full_run(ROOFLINE, ROOFLINE_CLAIMS.values())
    out = []
    for run in full:
        cells = _allcnnc(run.cells)
        new, reuse = _fastest(cells, aside), _fastest(cells, {})
        limits = {"time_forward": ROOFLINE_FORWARD_X_COPY, "time_forward_backward": ROOFLINE_FORWARD_BACKWARD_X_COPY}
        for metric, limit in limits.items():
            lines = []
            for config in dict.fromkeys(cells.config):
                key = (config, metric)
                line = {"config": config}
                for label, best in (("", new), (" (reuse allowed)", reuse)):
                    ratio = _get(best, key, "x_copy")
                    line[f"fastest{label}"] = _get(best, key, "strategy")
                    line[f"x copy_{label}"] = math.nan if ratio is None else ratio
                    line[f"verdict{label}"] = _judged(ratio, limit)
                lines.append(line)
            out.append(_target_finding(ROOFLINE, ROOFLINE_CLAIMS[metric], run, pd.DataFrame(lines)))
        lines = []
        for config in dict.fromkeys(cells.config):
            for metric, (pass_name, _, _) in PASSES.items():
                key = (config, metric)
                line = {"config": config, "pass": pass_name}
                for label, best in (("", new), (" (reuse allowed)", reuse)):
                    ratio = _get(best, key, "peak_x_minimum")
                    line[f"fastest{label}"] = _get(best, key, "strategy")
                    line[f"net peak MiB{label}"] = math.nan if ratio is None else _get(best, key, "peak") / MIB
                    line[f"x minimum{label}"] = math.nan if ratio is None else ratio
                    line[f"verdict{label}"] = _judged(ratio, ROOFLINE_PEAK_X_MINIMUM)
                lines.append(line)
        out.append(_target_finding(ROOFLINE, ROOFLINE_CLAIMS["peak"], run, pd.DataFrame(lines)))
    return out


# A target judged a second way, in evidence columns suffixed by the label: the phrase that opens its note.
ALTERNATIVE_VERDICTS = {
    " (reuse allowed)": "With output reuse allowed",
    " (4 KiB pages)": "Without huge-page advice (4 KiB pages, against the fresh-output floor)",
}


def _target_finding(topic: str, claim: str, run: _Run, evidence: pd.DataFrame, why: str = "") -> Finding:
    """A target's finding from its evidence: ``verdict`` per row (and ``verdict (reuse allowed)`` and the like,
    ``ALTERNATIVE_VERDICTS``, if there).
    ``why``: what the evidence's explanatory columns show, added to the note when the target is missed somewhere."""
    where = [" ".join(str(v) for v in row) for row in evidence[[c for c in ("config", "pass") if c in evidence]].values]
    verdict, note = _met_verdict(evidence["verdict"], where)
    if why and note.startswith("Missed"):
        note += f" Why: {why}"
    for label, phrase in ALTERNATIVE_VERDICTS.items():
        if f"verdict{label}" in evidence:
            alternative, _ = _met_verdict(evidence[f"verdict{label}"], where)
            note = (note + " " if note else "") + f"{phrase}: {alternative}."
    return Finding(topic, claim, verdict, evidence, run.source, note, run.run)


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
    "'backward ms' (forward-backward minus forward of the same strategy) against native's shows which pass "
    "falls short: the backward sums, for every input entry, the up to K output entries of the windows that read it."
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


HUGE_PAGE_FLOOR = "time_fresh_output_huge_pages"
FLOOR_LABELS = {"time_fresh_output": "fresh-output", HUGE_PAGE_FLOOR: "huge-page"}


def _fresh_output_floor(run: _Run, config: str, strategy: str | None, catalogue: Catalogue) -> str:
    """The floor of the fastest strategy's own allocation: the huge-page one for a strategy that advises its
    results into huge pages (``Strategy.advises_huge_pages``), in a run that measured it (earlier runs predate
    both the bound and the advice), else the fresh-output floor."""
    advises = bool(catalogue.strategies.get(strategy or "", {}).get("advises_huge_pages"))
    return HUGE_PAGE_FLOOR if advises and run.bound(config, HUGE_PAGE_FLOOR) > 0 else "time_fresh_output"


def new_tensor_findings(runs: list[_Run], catalogue: Catalogue) -> list[Finding]:
    """The new-tensor targets per full-profile run, for the fastest strategy that returns a new tensor; the floor
    target again without huge-page advice and the ``copy_`` target again with output reuse allowed."""
    full = _full_allcnnc_runs(runs)
    if not full:
        return _no_full_run(NEW_TENSOR, NEW_TENSOR_CLAIMS.values())
    out = []
    for run in full:
        cells = _allcnnc(run.cells)
        aside = set_aside(catalogue.strategies)
        best, reuse = _fastest(cells, aside), _fastest(cells, {})
        advisers = {n: "advises huge pages" for n, r in catalogue.strategies.items() if r.get("advises_huge_pages")}
        in_small_pages = _fastest(cells, {**aside, **advisers})
        configs = list(dict.fromkeys(cells.config))
        lines = []
        for config in configs:
            key = (config, "time_forward")
            time, strategy = _get(best, key, "time"), _get(best, key, "strategy")
            floor_metric = _fresh_output_floor(run, config, strategy, catalogue)
            floor, fresh = run.bound(config, floor_metric), run.bound(config, "time_fresh_output")
            ratio = math.nan if time is None or not floor > 0 else time / floor
            small_time = _get(in_small_pages, key, "time")
            small_ratio = math.nan if small_time is None or not fresh > 0 else small_time / fresh
            lines.append(
                {
                    "config": config,
                    "fastest": strategy,
                    "forward ms": math.nan if time is None else time * 1e3,
                    "fresh-output floor ms": fresh * 1e3,
                    "huge-page floor ms": run.bound(config, HUGE_PAGE_FLOOR) * 1e3,
                    "its floor": FLOOR_LABELS[floor_metric],
                    "x its floor": ratio,
                    "input / output": _input_per_output(catalogue, config),
                    "verdict": _judged(ratio, NEW_TENSOR_FORWARD_X_FRESH_OUTPUT),
                    "fastest (4 KiB pages)": _get(in_small_pages, key, "strategy"),
                    "x fresh-output floor (4 KiB pages)": small_ratio,
                    "verdict (4 KiB pages)": _judged(small_ratio, NEW_TENSOR_FORWARD_X_FRESH_OUTPUT),
                }
            )
        out.append(_target_finding(NEW_TENSOR, NEW_TENSOR_CLAIMS["fresh"], run, pd.DataFrame(lines), WHY_FLOOR))
        lines = []
        for config in configs:
            key = (config, "time_forward")
            ratio, reused = _get(best, key, "x_copy"), _get(reuse, key, "x_copy")
            floor, copy = run.bound(config, "time_fresh_output"), run.bound(config, "time_copy")
            lines.append(
                {
                    "config": config,
                    "fastest": _get(best, key, "strategy"),
                    "x copy_": math.nan if ratio is None else ratio,
                    "fresh-output floor x copy_": floor / copy if copy > 0 else math.nan,
                    "huge-page floor x copy_": run.bound(config, HUGE_PAGE_FLOOR) / copy if copy > 0 else math.nan,
                    "row elements": _row_elements(catalogue, config),
                    "verdict": _judged(ratio, NEW_TENSOR_FORWARD_X_COPY),
                    "fastest (reuse allowed)": _get(reuse, key, "strategy"),
                    "x copy_ (reuse allowed)": math.nan if reused is None else reused,
                    "verdict (reuse allowed)": _judged(reused, NEW_TENSOR_FORWARD_X_COPY),
                }
            )
        out.append(_target_finding(NEW_TENSOR, NEW_TENSOR_CLAIMS["copy"], run, pd.DataFrame(lines), WHY_COPY))
        by_cell = cells.set_index(["config", "strategy"])
        lines = []
        for config in configs:
            strategy = _get(best, (config, "time_forward_backward"), "strategy")
            ratio = math.nan if strategy is None else by_cell.loc[(config, strategy), "time_forward_backward:x_native"]
            lines.append(
                {
                    "config": config,
                    "fastest": strategy,
                    "x native": ratio,
                    "backward ms": _backward_ms(by_cell, config, strategy),
                    "native's backward ms": _backward_ms(by_cell, config, REFERENCE_STRATEGY),
                    "verdict": _judged(ratio, NEW_TENSOR_FORWARD_BACKWARD_X_NATIVE),
                }
            )
        out.append(_target_finding(NEW_TENSOR, NEW_TENSOR_CLAIMS["native"], run, pd.DataFrame(lines), WHY_NATIVE))
        lines = []
        for config in configs:
            for metric, (pass_name, _, minimum_metric) in PASSES.items():
                key = (config, metric)
                peak, minimum = _get(best, key, "peak"), run.bound(config, minimum_metric)
                above = math.nan if peak is None or pd.isna(peak) else peak - minimum
                lines.append(
                    {
                        "config": config,
                        "pass": pass_name,
                        "fastest": _get(best, key, "strategy"),
                        "net peak MiB": math.nan if peak is None else peak / MIB,
                        "analytic minimum MiB": minimum / MIB,
                        "above minimum MiB": above / MIB,
                        "verdict": _judged(above, NET_PEAK_RESOLUTION, BYTES.format),
                    }
                )
        out.append(_target_finding(NEW_TENSOR, NEW_TENSOR_CLAIMS["peak"], run, pd.DataFrame(lines), WHY_PEAK))
        out.append(_half_precision_finding(run, aside))
    return out


def _half_precision_finding(run: _Run, aside: Mapping[str, str]) -> Finding:
    claim = NEW_TENSOR_CLAIMS["half"]
    best = _fastest(run.cells, aside)
    lines = []
    for config, twin in HALF_PRECISION.items():
        for metric, (pass_name, _, _) in PASSES.items():
            half, single = _get(best, (config, metric), "x_copy"), _get(best, (twin, metric), "x_copy")
            ratio = math.nan if half is None or single is None or not single > 0 else half / single
            strategy = _get(best, (config, metric), "strategy")
            same = _x_copy_of(run.cells, twin, metric, strategy)
            lines.append(
                {
                    "config": config,
                    "pass": pass_name,
                    "fastest": strategy,
                    "x copy_": math.nan if half is None else half,
                    f"fastest on {twin}": _get(best, (twin, metric), "strategy"),
                    f"x copy_ on {twin}": math.nan if single is None else single,
                    "x float32's": ratio,
                    "verdict": _judged(ratio, NEW_TENSOR_HALF_X_FLOAT32),
                    f"x its own on {twin}": math.nan if half is None or not same > 0 else half / same,
                }
            )
    evidence = pd.DataFrame(lines)
    if (evidence.verdict == "not measured").all():
        reason = f"the run lacks {' or '.join(HALF_PRECISION)} or allcnnc-conv4, or their copy_ bound"
        return _not_measured(NEW_TENSOR, claim, reason, run=run)
    return _target_finding(NEW_TENSOR, claim, run, evidence, WHY_HALF)


def _x_copy_of(cells: pd.DataFrame, config: str, metric: str, strategy: str | None) -> float:
    """``strategy``'s time over ``copy_`` on ``config`` (NaN where it has no ``ok`` figure)."""
    rows = cells[(cells.config == config) & (cells.strategy == strategy) & (cells[f"{metric}:status"] == "ok")]
    return float(rows[f"{metric}:x_bound"].iloc[0]) if not rows.empty else math.nan


def _backward_ms(by_cell: pd.DataFrame, config: str, strategy: str | None) -> float:
    """Forward-backward minus forward of one strategy on one config, in ms (NaN where either is missing)."""
    if strategy is None or (config, strategy) not in by_cell.index:
        return math.nan
    cell = by_cell.loc[(config, strategy)]
    return (cell["time_forward_backward"] - cell["time_forward"]) * 1e3


# --- physics ---------------------------------------------------------------------------------------------------

PHYSICS_CLAIM = (
    "Every figure respects the bounds measured in the same run: no forward faster than the write-only fill_ floor "
    "(beyond the run's noise), no net peak below the analytic minimum"
)
# How to read a forward below the fill_ floor (the check stays strict: it is the one that catches a wrong timer)
PHYSICS_FLOOR_NOTE = (
    "Where a run has no paired floors (benchmarks.floors), a forward and its fill_ floor are timed in different "
    "processes. On a shared VM the same resident write "
    "can run at different speeds in two processes (the memory a process is given differs), which the run's "
    "quartiles, taken within processes, do not show. A lone forward below the floor is therefore first a sign "
    "that its processes ran faster than the floor's; many of them, or one far below, point at the measurement."
)


def physics_findings(runs: list[_Run]) -> list[Finding]:
    """``reports.summary.physics_problems`` per run and device; a run without bounds is not measured."""
    if not runs:
        return [_not_measured(PHYSICS, PHYSICS_CLAIM, "no results", "the newest run of each machine and profile")]
    out = []
    for run in runs:
        bounds = run.rows[(run.rows.suite == "bounds") & (run.rows.status == "ok")]
        if bounds.empty:
            out.append(_not_measured(PHYSICS, PHYSICS_CLAIM, "the run has no bounds", run=run))
            continue
        problems = physics_problems(run.rows)
        count = f"{len(problems)} figure contradicts" if len(problems) == 1 else f"{len(problems)} figures contradict"
        verdict = f"does not hold: {count} the bounds" if problems else "holds"
        out.append(
            Finding(
                PHYSICS,
                PHYSICS_CLAIM,
                verdict,
                pd.DataFrame({"problem": problems}, dtype=object),
                run.source,
                note=PHYSICS_FLOOR_NOTE if any(UNPAIRED_FLOOR in problem for problem in problems) else "",
                run=run.run,
            )
        )
    return out


# --- all of them, and how they are shown -----------------------------------------------------------------------


def findings(table: pd.DataFrame, catalogue: Catalogue) -> list[Finding]:
    """Every finding, from ``load_results``' tidy table (the newest run of each machine and profile) and what the
    bench recorded (``load_catalogue``)."""
    runs = _runs(table)
    return [
        *tensor_unfold_findings(catalogue),
        *onehot_findings(runs),
        *roofline_findings(runs, set_aside(catalogue.strategies)),
        *new_tensor_findings(runs, catalogue),
        *physics_findings(runs),
    ]


def _formatted(evidence: pd.DataFrame) -> pd.DataFrame:
    """The evidence as text: figures to 3 significant digits, a missing one as "-"."""

    def cell(value: object) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
        return str(value)

    return evidence.astype(object).map(cell) if not evidence.empty else evidence


CSS_OF_OUTCOME = {"holds": "box", "met": "box"}  # anything else: the warning box


def render_html(found: list[Finding], aside: Iterable[str] = ()) -> Markup:
    """The Findings page's body (``templates/findings.html``): an index of every verdict, then per topic each
    claim, its verdict, where it came from and its evidence table; ``aside``: the strategies set aside
    (``reports.set_aside``)."""
    names = Markup(", ").join(Markup("<code>{}</code>").format(name) for name in aside) or "none recorded"
    numbered = list(enumerate(found, 1))
    topics = []
    for topic in [*TOPICS, *sorted({f.topic for f in found} - set(TOPICS))]:
        mine = [
            (
                number,
                finding,
                CSS_OF_OUTCOME.get(finding.outcome, "box none"),
                Markup(_formatted(finding.evidence).to_html(index=False, border=0, escape=True))
                if not finding.evidence.empty
                else "",
            )
            for number, finding in numbered
            if finding.topic == topic
        ]
        if mine:
            topics.append((topic, mine))
    return render("findings.html", intro=INTRO.format(set_aside=names), numbered=numbered, topics=topics)


def format_text(found: list[Finding], tables: bool = False) -> str:
    """The findings as plain text for a terminal: per topic, each claim, its verdict, where it came from and
    the note (``tables``: the evidence tables too)."""
    lines = []
    for topic in [*TOPICS, *sorted({f.topic for f in found} - set(TOPICS))]:
        mine = [f for f in found if f.topic == topic]
        if not mine:
            continue
        lines.append(f"\n{topic}")
        for finding in mine:
            lines.append(f"- {finding.claim}\n    {finding.verdict}\n    from {finding.source}")
            if finding.note:
                lines.append(f"    {finding.note}")
            if tables and not finding.evidence.empty:
                text = _formatted(finding.evidence).to_string(index=False)
                lines.extend("      " + line for line in text.splitlines())
    return "\n".join(lines).lstrip("\n")
