"""How a call's time depends on the calls just before it: a strategy and the reference timed in four orders.

A call's time can depend on what ran before it (what its predecessor left in the caches, the memory it wrote), so
a timer that fixes an order measures that order. ``torch.utils.benchmark`` times a call after itself; the suite's
paired ratios time it in blocks A B B A (``benchmarks.replicates.measure_pair``). On inputs placed as a round of
the suite places them, with A the reference and B the strategy, this times:

- ``loop``: A A A ..., then B B B ...: each call after itself;
- ``alternating``: A B A B ...: each call after the other side's;
- ``blocks``: A B B A ...: the suite's order, B's first call after A, its second after B;
- ``paused``: B after an idle pause as long as A's call (its median over 3 calls made first, not recorded):
  whether B's time after A is what A's work left behind, or what any time away from B costs.

Each order is repeated untimed first, so that its steady state is what is timed. Per order it gives each position's
median time, the ratio B / A (``loop``, ``alternating``: the quotient of the medians; ``blocks``: the suite's own
statistic, the trimmed mean of the block log-ratios, exponentiated; ``paused`` has no A), the minor page faults
and the involuntary context switches per timed call. Run as a module (one process)::

    python -m benchmarks.call_context -   # spec on stdin: {"units": [...], "placements": P, "calls": N, ...}
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator, Mapping

PAUSE = "_"  # in a pattern: an idle pause as long as A's call, untimed
# each order's patterns, run in turn
ORDERS = {"loop": ("A", "B"), "alternating": ("AB",), "blocks": ("ABBA",), "paused": (f"{PAUSE}B",)}
RATIO_ORDERS = ("loop", "alternating", "blocks")  # the orders with both sides, so a ratio B / A
WARM_REPEATS = 3  # untimed repeats of each pattern before it is timed


def _position(pattern: str, index: int) -> str:
    """The call at ``index`` of a repeated ``pattern`` named by itself and the call before it (a loop: itself)."""
    side = pattern[index]
    if len(pattern) == 1:
        return side
    before = pattern[index - 1]
    return f"{side} after {'a pause' if before == PAUSE else before}"


def measure_orders(cells: tuple, which: str, calls: int, seed: int, templates: dict | None = None) -> dict:
    """One placement of ``cells`` (A, B), checked by the caller: per order, ``times`` (position -> median seconds),
    ``ratio`` (B over A; None for ``paused``), ``faults`` and ``switches`` (minor page faults and involuntary
    context switches per timed call, ``benchmarks.replicates``); each pattern
    repeated until it has ``calls`` timed calls of each of its sides."""
    from benchmarks.paired import timed_call
    from benchmarks.replicates import disturbances, fresh_workloads, trimmed_mean

    workloads, spacer = fresh_workloads(cells, seed, templates)
    pause = statistics.median(timed_call(workloads, 0, which) for _ in range(WARM_REPEATS))  # A's call, untimed
    found: dict[str, dict] = {}
    orders = list(ORDERS)
    random.Random(seed).shuffle(orders)
    for order in orders:
        times: dict[str, list[float]] = {}
        block_ratios = []
        faults = switches = 0
        for pattern in ORDERS[order]:
            repeats = max(1, calls // max(pattern.count("A"), pattern.count("B")))
            for repeat in range(WARM_REPEATS + repeats):
                before = disturbances()
                took = {}
                for index, side in enumerate(pattern):
                    if side == PAUSE:
                        time.sleep(pause)
                    else:
                        took[index] = timed_call(workloads, "AB".index(side), which)
                if repeat < WARM_REPEATS:
                    continue
                taken = disturbances().since(before)
                faults += taken.faults
                switches += taken.switches
                for index, seconds in took.items():
                    times.setdefault(_position(pattern, index), []).append(seconds)
                if pattern == "ABBA":
                    block_ratios.append((math.log(took[1] / took[0]) + math.log(took[2] / took[3])) / 2)
        medians = {position: statistics.median(values) for position, values in times.items()}
        if order == "blocks":
            ratio = math.exp(trimmed_mean(block_ratios))
        elif order not in RATIO_ORDERS:
            ratio = None
        else:
            b = [v for p, values in times.items() if p.startswith("B") for v in values]
            a = [v for p, values in times.items() if p.startswith("A") for v in values]
            ratio = statistics.median(b) / statistics.median(a)
        timed = sum(len(values) for values in times.values())
        found[order] = {"times": medians, "ratio": ratio, "faults": faults / timed, "switches": switches / timed}
    for workload in workloads:
        workload.reset()
    del workloads, spacer
    return found


def measure_units(spec: Mapping, strategies: Mapping | None = None) -> Iterator[dict]:
    """The rows of one process: per unit (``strategy``, ``config``, ``which``; A is ``reference``), after both
    sides' correctness check, one row per placement, or one row naming each side's problem (it does not run here,
    or computes a wrong result). ``strategies``: the registry to take both from (default ``impls.STRATEGIES``)."""
    from benchmarks.allocator import apply_regime_now
    from benchmarks.cells import Cell, check_cell, reference_for, use_exact_float32
    from benchmarks.profiles import DEFAULT_PROFILE, get_profile
    from impls import STRATEGIES

    apply_regime_now()  # before any input is allocated
    profile = get_profile(spec.get("profile", DEFAULT_PROFILE))
    registry = STRATEGIES if strategies is None else strategies
    seed = int(spec.get("seed", 0))
    templates: dict = {}
    verdicts: dict[tuple[str, str], object] = {}  # (strategy, config) -> the correctness check's Verdict
    references: dict[str, object] = {}  # config -> the reference's answers, the same for every strategy on it
    for unit in spec["units"]:
        key = f"{unit['strategy']}:{unit['config']}:{unit['which']}"
        names = (spec["reference"], unit["strategy"])
        cells = tuple(Cell.from_names(name, unit["config"], "cpu", profile, registry) for name in names)
        skipped = [f"{cell.strategy.name}: skipped: {why}" for cell in cells if (why := cell.skip_reason())]
        if skipped:
            yield {"key": key, "problem": "; ".join(skipped)}
            continue
        for cell in cells:
            if (cell.strategy.name, unit["config"]) not in verdicts:
                if unit["config"] not in references:
                    references[unit["config"]] = reference_for(cell)
                verdicts[(cell.strategy.name, unit["config"])] = check_cell(cell, references[unit["config"]])
        problems = [
            f"{cell.strategy.name}: {problem}"
            for cell in cells
            if (problem := verdicts[(cell.strategy.name, unit["config"])].problem(unit["which"] != "forward"))
        ]
        if problems:
            yield {"key": key, "problem": "; ".join(problems)}
            continue
        use_exact_float32("cpu")
        for placement in range(int(spec["placements"])):
            seed += 1
            orders = measure_orders(cells, unit["which"], int(spec["calls"]), seed, templates)
            yield {"key": key, "placement": placement, "orders": orders}


def main() -> None:
    spec = json.load(sys.stdin) if sys.argv[1:] == ["-"] else json.loads(open(sys.argv[1]).read())
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for row in measure_units(spec):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
