"""Paired ratios measured with the process and the placement as levels of their own.

Where a process's buffers land and how its code is laid out move a timing more than the call does, so a ratio of
two callables' times is measured at three nested levels: **blocks** (A B B A on the same inputs, one log-ratio
each), **rounds** (the inputs placed afresh at addresses of their own) and **processes** (fresh interpreters, half
setting up side B first). ``process_estimate`` reduces a process's rows to a log-ratio per unit;
``across_processes`` gives the ratio, interval and resolution, with Student's t over the processes and the set-up
order as a fixed effect.

Run as a module (one process)::

    python -m benchmarks.replicates SPEC.json   # SPEC: {"sides": [...], "units": [...], "rounds": R, ...}

Details: docs/internals.md#benchmarksreplicatespy.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import resource
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypedDict

import numpy as np

from benchmarks.paired_stats import ALPHA, POWER

SPACER_BYTES = 4 << 20  # a round's inputs land behind up to this many bytes of spacer, at any 64-byte offset
ABSENT = "absent"  # a side's registry has no such strategy (added or removed by the change)
SKIPPED = "skipped: "  # a side's cell does not run here (no GPU, spatial dims, a refused dtype): no failure
MAX_PROCESSES = 32  # the most replicate processes a design is sized up to (``variance``, ``gate_design``)
TRIM = 0.1  # a round's statistic: the mean of its block log-ratios with this fraction cut from each end


class _SideRequired(TypedDict):
    tree: str
    strategy: str


class Side(_SideRequired, total=False):
    """Where one side's strategy comes from: a checkout's ``impls`` (``tree``), the strategy's name in it, and which
    ``copy`` of that ``impls`` (default 0; two copies of one tree are two imports of the same code: an A/A)."""

    copy: int


class Unit(TypedDict):
    """One paired measurement, as a replicate process's spec holds it (JSON): side A's and side B's strategies on
    ``config``, one call (``which``), on ``device``; ``key`` is how the caller names it."""

    key: str
    sides: list[Side]
    config: str
    which: str
    device: str


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> float:
    """The mean of ``values`` with ``trim`` of them cut from each end (robust to the odd slow call)."""
    ordered = np.sort(np.asarray(values, dtype=float))
    cut = int(math.floor(trim * ordered.size))
    return float(ordered[cut : ordered.size - cut].mean())


def _placed(template, seed: int):
    """A copy of ``template`` in fresh memory, starting ``64 * (seed % 64)`` bytes into its allocation: consecutive
    rounds land at other addresses (another offset into a page) even when the allocator hands back the same block,
    and stay 64-byte aligned, as PyTorch's own allocations are."""
    import torch

    offset = 64 * (seed % 64) // template.element_size()
    buffer = torch.empty(template.numel() + offset, dtype=template.dtype, device=template.device)
    placed = buffer[offset : offset + template.numel()].view(template.shape)
    placed.copy_(template)
    return placed


def fresh_workloads(cells: tuple, seed: int, templates: dict | None = None) -> tuple:
    """Both sides' workloads on inputs allocated now behind a random spacer; returns (workloads, spacer). The inputs
    are copies of the cell's fixed inputs (drawn once per process into ``templates``), so a round pays a copy, not
    the random draws, for its fresh placement."""
    import torch

    from benchmarks.cells import Workload
    from benchmarks.paired import share_inputs

    templates = {} if templates is None else templates
    key = (cells[0].config, cells[0].device)
    if key not in templates:
        drawn = Workload(cells[0], backward=True)
        templates.clear()  # one config's inputs at a time: they can be tens of MiB
        templates[key] = (drawn.input, drawn.grad_output)
    spacer = torch.empty(random.Random(seed).randrange(0, SPACER_BYTES, 64), dtype=torch.uint8)
    first = Workload.on(cells[0], *(_placed(t, seed) for t in templates[key]))
    second = Workload.on(cells[1], first.input, first.grad_output)
    share_inputs(second, first)
    for workload in (first, second):
        workload.compile()
    return (first, second), spacer


def measure_units(spec: Mapping) -> Iterator[dict]:
    """The rows of one process (module docstring) for ``spec``: ``units`` (``Unit``),
    ``rounds``, ``blocks`` (per round, at most), ``round_seconds`` (per round, at most), ``b_first`` (set side B up
    first), ``profile`` and ``seed``; a unit whose side fails its correctness check, does not run or whose tree's
    impls does not import is reported with the reason instead of ratios."""
    from benchmarks.cells import Cell, check_cell, profile_config, reference_for, use_exact_float32
    from benchmarks.paired import load_strategies
    from benchmarks.profiles import DEFAULT_PROFILE, get_profile

    profile = get_profile(spec.get("profile", DEFAULT_PROFILE))
    b_first = bool(spec.get("b_first", False))

    def source(side: Mapping) -> tuple[str, int]:
        return side["tree"], int(side.get("copy", 0))

    loads = list(dict.fromkeys(source(side) for unit in spec["units"] for side in unit["sides"]))
    registries, unimportable = {}, {}
    for load in reversed(loads) if b_first else loads:  # each copy of each tree imported once, in set-up order
        try:
            registries[load] = load_strategies(Path(load[0]))
        except Exception as error:  # a revision whose impls does not import fails there, not at both
            unimportable[load] = f"its impls does not import ({type(error).__name__}: {error})"
    seed = int(spec.get("seed", 0))
    templates: dict = {}
    verdicts: dict[tuple, object] = {}  # (source, strategy, config, device) -> the correctness gate's Verdict
    references: dict[tuple, object] = {}  # (config, device) -> the reference's answers, one config at a time
    for unit in spec["units"]:
        row = {"key": unit["key"]}
        layer = profile_config(profile, unit["config"])
        device = unit.get("device", "cpu")
        backward = unit["which"] != "forward"
        order = (1, 0) if b_first else (0, 1)
        cells, problems = [], {}
        for side in order:
            name, label = unit["sides"][side]["strategy"], "AB"[side]
            if source(unit["sides"][side]) in unimportable:
                problems[label] = unimportable[source(unit["sides"][side])]
                continue
            registry = registries[source(unit["sides"][side])]
            if name not in registry:
                problems[label] = ABSENT
                continue
            cell = Cell(registry[name], layer, device)
            reason = cell.skip_reason()
            if reason is not None:
                problems[label] = f"{SKIPPED}{reason}"
                continue
            known = (source(unit["sides"][side]), name, unit["config"], device)
            if known not in verdicts:
                if (unit["config"], device) not in references:
                    references.clear()
                    references[(unit["config"], device)] = reference_for(cell)
                verdicts[known] = check_cell(cell, references[(unit["config"], device)])
            problem = verdicts[known].problem(backward=backward)
            if problem is not None:
                problems[label] = problem
                continue
            cells.append(cell)
        if problems:
            yield {**row, "problems": problems}
            continue
        use_exact_float32(device)
        rounds = measure_pair(
            (cells[0], cells[1]),
            unit["which"],
            int(spec["rounds"]),
            int(spec["blocks"]),
            spec["round_seconds"],
            seed,
            templates,
        )
        for measured in rounds:
            sign = -1.0 if b_first else 1.0  # always log(B / A), whichever was set up first
            yield {**row, **measured, "log_ratios": [sign * r for r in measured["log_ratios"]]}
        seed += int(spec["rounds"])


def minor_faults() -> int:
    """The minor page faults this process has taken so far (every thread's): a page touched for the first time."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Disturbances(NamedTuple):
    """What the kernel counted against this process (every thread's) besides its own work, from one ``getrusage``."""

    faults: int  # minor page faults: a page touched for the first time
    # involuntary context switches: times the kernel took a CPU from one of its threads for other work. A call of
    # many short parallel regions waits at each for a thread so descheduled, one of few regions does not, so such
    # switches slow the two sides of a pair unalike
    switches: int

    def since(self, before: Disturbances) -> Disturbances:
        """The counts taken between ``before`` and these."""
        return Disturbances(self.faults - before.faults, self.switches - before.switches)


def disturbances() -> Disturbances:
    """This process's minor page faults and involuntary context switches so far (``Disturbances``)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return Disturbances(usage.ru_minflt, usage.ru_nivcsw)


def measure_pair(
    cells: tuple,
    which: str | tuple[str, str],
    rounds: int,
    blocks: int,
    round_seconds: float,
    seed: int = 0,
    templates: dict | None = None,
    warmup_blocks: int = 2,
    warmup_seconds: float | None = None,
) -> Iterator[dict]:
    """``rounds`` rounds of one pair of cells (checked by the caller): each places fresh inputs (shared by both
    sides) behind a random spacer, makes ``warmup_blocks`` untimed blocks of one call a side (the first blocks
    after a placement read high; the gate's designs were sized with 2), or fewer once ``warmup_seconds`` have passed
    (at least one), then takes at most ``blocks`` blocks A B B A or ``round_seconds`` of them (at least 4); per
    round, the log-ratios log(second cell's time / first's), the minor page faults each block took
    (a call whose output lands on fresh pages faults once per page, which adds time to both sides whatever their
    work and pulls a fast side's ratio towards 1), its involuntary context switches (other work that took a CPU
    from it; both ``Disturbances``), the untimed blocks made (``warmup_made``)
    and its seconds (``setup_seconds``: the placement and warm-up). ``which`` is the call both sides make, or
    each side's (a floor's forward against a strategy's forward-backward)."""
    from benchmarks.allocator import apply_regime_now
    from benchmarks.paired import timed_call

    apply_regime_now()  # before the first placement's inputs are allocated
    passes = (which, which) if isinstance(which, str) else which

    for round_ in range(rounds):
        round_started = time.monotonic()
        workloads, spacer = fresh_workloads(cells, seed + round_, templates)
        # first touches, lazy set-up, the allocator's threshold, the placement's settling: what a fast call's first
        # blocks pay; a slow call's first block has paid it, and more blocks would cost seconds each
        warm_until = None if warmup_seconds is None else time.monotonic() + warmup_seconds
        warmed = 0
        while warmed < warmup_blocks and (warmed < 1 or warm_until is None or time.monotonic() < warm_until):
            for side in (0, 1):
                timed_call(workloads, side, passes[side])
            warmed += 1
        setup_seconds = time.monotonic() - round_started
        ratios, faults, switches = [], [], []
        end = time.monotonic() + round_seconds
        while len(ratios) < blocks and (len(ratios) < 4 or time.monotonic() < end):
            before = disturbances()
            a, b = timed_call(workloads, 0, passes[0]), timed_call(workloads, 1, passes[1])
            b2, a2 = timed_call(workloads, 1, passes[1]), timed_call(workloads, 0, passes[0])
            taken = disturbances().since(before)
            faults.append(taken.faults)
            switches.append(taken.switches)
            ratios.append((math.log(b / a) + math.log(b2 / a2)) / 2)
        for workload in workloads:
            workload.reset()
        del workloads, spacer
        yield {
            "round": round_,
            "log_ratios": ratios,
            "minor_faults": faults,
            "involuntary_switches": switches,
            "warmup_made": warmed,
            "seconds": time.monotonic() - round_started,
            "setup_seconds": setup_seconds,
        }


def run_process(spec: Mapping, env: Mapping[str, str] | None = None, timeout: float = 900.0) -> tuple[list[dict], str]:
    """One replicate process for ``spec``: its rows, and why it ended if it failed (else "")."""
    from benchmarks.children import run_json_child

    return run_json_child([sys.executable, "-m", "benchmarks.replicates", "-"], spec, env, timeout)


def process_estimate(rows: Sequence[Mapping]) -> dict[str, float]:
    """Per unit key: the process's log-ratio, the mean over its rounds of each round's trimmed mean."""
    per_unit: dict[str, list[float]] = {}
    for row in rows:
        if row.get("log_ratios"):
            per_unit.setdefault(row["key"], []).append(trimmed_mean(row["log_ratios"]))
    return {key: float(np.mean(values)) for key, values in per_unit.items()}


@dataclass(frozen=True)
class AcrossProcesses:
    """A ratio B / A from per-process log-ratios: estimate, one-sided ``1 - alpha`` bounds, resolution."""

    ratio: float
    low: float
    high: float
    processes: int
    resolution: float
    process_ratios: tuple[float, ...]


@functools.cache
def _noncentrality(alpha: float, power: float, df: int) -> float:
    """The noncentrality at which a one-sided t test at level ``alpha`` with ``df`` degrees of freedom rejects with
    probability ``power`` (the noncentral t distribution)."""
    from scipy.optimize import brentq
    from scipy.stats import nct
    from scipy.stats import t as student

    critical = float(student.ppf(1 - alpha, df))
    return float(brentq(lambda nc: nct.sf(critical, df, nc) - power, 0.0, 100.0))


def resolution(se: float, df: int, alpha: float, power: float, margin: float = 0.0) -> float:
    """The smallest slowdown factor caught with probability ``power`` by a one-sided t test at ``alpha`` with ``df``
    degrees of freedom on a log-ratio of standard error ``se``, beyond ``margin``: ``(1 + margin) exp(nc se)``, with
    ``nc`` the noncentrality that gives that power (about ``t_{1-alpha} + z_{power}``, more with few degrees)."""
    return (1 + margin) * math.exp(_noncentrality(alpha, power, df) * se)


def across_processes(
    a_first: Sequence[float],
    b_first: Sequence[float],
    alpha: float = ALPHA,
    power: float = POWER,
    margin: float = 0.0,
) -> AcrossProcesses:
    """The ratio from per-process log-ratios grouped by set-up order: the mean of the two orders' means (the
    order's systematic shift cancels), its standard error from the pooled within-order variance, and
    Student's t with ``n_a + n_b - 2`` degrees of freedom. ``low``/``high``: the one-sided bounds at ``1 - alpha``
    each; ``resolution``: the smallest slowdown flagged with probability ``power`` (``resolution``)."""
    from scipy.stats import t as student

    a, b = np.asarray(a_first, dtype=float), np.asarray(b_first, dtype=float)
    if a.size < 2 or b.size < 2:
        raise ValueError(f"processes: {a.size} and {b.size} per set-up order; the interval needs at least 2 of each")
    df = a.size + b.size - 2
    pooled = (((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()) / df
    se = math.sqrt(pooled * (1 / a.size + 1 / b.size) / 4)
    estimate = (a.mean() + b.mean()) / 2
    quantile = float(student.ppf(1 - alpha, df))
    return AcrossProcesses(
        ratio=math.exp(estimate),
        low=math.exp(estimate - quantile * se),
        high=math.exp(estimate + quantile * se),
        processes=int(a.size + b.size),
        resolution=resolution(se, df, alpha, power, margin),
        process_ratios=tuple(math.exp(v) for v in np.concatenate([a, b])),
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    spec = json.load(sys.stdin) if args == ["-"] else json.loads(Path(args[0]).read_text())
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for row in measure_units(spec):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
