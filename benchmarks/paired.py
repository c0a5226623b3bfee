"""Two revisions' strategies timed in one process, their calls alternated: the regression gate's paired mode.

Each revision's ``impls`` is imported from its own checkout (``load_strategies``): the package is imported,
its registry kept, and ``impls*`` dropped from ``sys.modules`` before the next is imported, so both live side by
side (a function keeps its own module's globals). The harness (this ``benchmarks`` package, with the
correctness check and the inputs) is this working tree's for both.

One cell (``measure_cell``) in one process:

1. the correctness check (``benchmarks.cells.check_cell``) of each side on the benchmark inputs; a side that
   fails it is not timed;
2. each side's compiling calls, then ``warmup_time`` seconds of untimed calls of each;
3. for forward and forward-backward: calls in the order A B B A A B B A ..., each after its workload's
   ``reset`` (untimed: the previous output is dropped first, as in the asv suite), both sides on the very same
   input tensors; each pair of adjacent calls gives one log-ratio. Sampling stops when the cell's resolution
   (``benchmarks.paired_stats``) reaches ``target`` or its ``budget`` of seconds is spent;
4. net peak memory of each side (``benchmarks.cells.charged_net_peak``, glibc's threshold pinned from here on,
   so after the timing).

The process times in the regime it was started in (``benchmarks.allocator``); the gate names it.

Run as a module it measures one strategy on one config and prints one JSON object per measurement::

    python -m benchmarks.paired BASE_TREE HEAD_TREE STRATEGY CONFIG [--profile quick] [--budget S] [--target R]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np

from benchmarks.allocator import pinned_environment
from benchmarks.cells import Cell, Workload, charged_net_peak, check_cell, profile_config, use_exact_float32
from benchmarks.configs import LayerConfig
from benchmarks.paired_stats import MIN_PAIRS, paired_ratio
from benchmarks.profiles import PROFILES, get_profile
from impls import Strategy

SIDES = ("base", "head")
WHICH = ("forward", "forward_backward")
MAX_PAIRS = 2000  # the Walsh averages grow as the square of the pairs
MIN_SECONDS = 1.0  # a cell samples at least this long, so its pairs do not all come from one moment


def _is_impls(module_name: str) -> bool:
    return module_name == "impls" or module_name.startswith("impls.")


def load_strategies(tree: Path) -> dict[str, Strategy]:
    """The registry of the ``impls`` package in the checkout ``tree``; the modules already imported under the
    name ``impls`` are back in place afterwards, so a second checkout can be loaded beside the first."""
    tree = Path(tree).resolve()
    saved = {name: module for name, module in sys.modules.items() if _is_impls(name)}
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(tree))
    try:
        registry = importlib.import_module("impls.registry")
        found = Path(registry.__file__).resolve().parent
        if found != tree / "impls":  # timing other code than the revision's would make the verdict a lie
            raise ImportError(f"imported impls from {found}, not from {tree / 'impls'}")
        return dict(registry.STRATEGIES)
    finally:
        sys.path.remove(str(tree))
        for name in [name for name in sys.modules if _is_impls(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _timed(workloads: tuple[Workload, Workload], side: int, which: str) -> float:
    """One call of ``which`` by one side, after both sides' previous outputs are dropped (untimed): no call
    allocates while another's output is alive, so the two sides' outputs take the same freed memory in turn."""
    for workload in workloads:
        workload.reset()
    call = getattr(workloads[side], which)
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _order() -> Iterator[tuple[int, int]]:
    """Which side goes first in each pair: A B, B A, A B, ... (so neither always follows the other)."""
    while True:
        yield 0, 1
        yield 1, 0


def paired_log_ratios(workloads: tuple[Workload, Workload], which: str, budget: float, target: float,
                      margin: float, limit: float = math.inf, clock: Callable[[], float] = time.monotonic
                      ) -> np.ndarray:  # fmt: skip
    """log(head time / base time) of adjacent calls, sampled until the resolution reaches ``target`` (after at
    least ``MIN_PAIRS`` pairs and ``MIN_SECONDS``) or ``budget`` seconds have passed (then at least ``MIN_PAIRS``
    are taken). A cell that resolves no better than ``limit`` when its budget is spent gets a second budget once
    (a neighbour's burst of load passes)."""
    ratios: list[float] = []
    start = checked = clock()
    budgets = 1
    for first, second in _order():
        times = [0.0, 0.0]
        times[first] = _timed(workloads, first, which)
        times[second] = _timed(workloads, second, which)
        ratios.append(math.log(times[1] / times[0]))
        now = clock()
        if len(ratios) >= MAX_PAIRS:
            break
        if len(ratios) >= MIN_PAIRS and now - start > budget * budgets:
            if budgets == 2 or paired_ratio(ratios, margin).resolution <= limit:
                break
            budgets = 2
        if len(ratios) >= MIN_PAIRS and now - start > MIN_SECONDS and now - checked > 0.25:  # O(n^2 log n)
            checked = now
            if paired_ratio(ratios, margin).resolution <= target:
                break
    workloads[0].reset()
    workloads[1].reset()
    return np.asarray(ratios)


def _share_inputs(workload: Workload, like: Workload) -> None:
    """Make ``workload`` call on ``like``'s input tensors (the same memory, so neither side has better-placed data)."""
    workload.input, workload.leaf, workload.grad_output = like.input, like.leaf, like.grad_output


def _warm_up(workloads: tuple[Workload, Workload], seconds: float) -> None:
    for which in WHICH:
        end = time.monotonic() + seconds
        while True:
            for side in (0, 1):
                _timed(workloads, side, which)
            if time.monotonic() > end:
                break
    for workload in workloads:
        workload.reset()


def measures(kind: str) -> tuple[str, ...]:
    """The measurements a process of ``kind`` ("time" or "memory") reports for one strategy on one config."""
    return tuple(f"time_{w}" for w in WHICH) if kind == "time" else tuple(f"net_peak_{w}" for w in WHICH)


Problems = dict[str, str | None]  # per call (forward, forward_backward): why it cannot be timed, or None


def _checked_workloads(strategies: tuple[Mapping[str, Strategy], Mapping[str, Strategy]], strategy: str,
                       layer: LayerConfig, device: str) -> tuple[list[Workload | None], list[Problems]]:  # fmt: skip
    """Each side's workload (inputs shared, compiling calls made) and its problems per call (``None``: none), after
    the correctness check; a side that is skipped or computes a wrong output gets no workload."""
    workloads: list[Workload | None] = [None, None]
    problems: list[Problems] = [{}, {}]
    for side, registry in enumerate(strategies):
        cell = Cell(registry[strategy], layer, device)
        reason = cell.skip_reason()
        if reason is not None:
            problems[side] = {which: f"skipped: {reason}" for which in WHICH}
            continue
        verdict = check_cell(cell)
        problems[side] = {which: verdict.problem(backward=which != "forward") for which in WHICH}
    use_exact_float32(device)
    for side, registry in enumerate(strategies):
        if problems[side]["forward"] is None:
            workloads[side] = workload = Workload(Cell(registry[strategy], layer, device), backward=True)
            if side == 1 and workloads[0] is not None:
                _share_inputs(workload, workloads[0])
            workload.compile()
    return workloads, problems


def measure_cell(strategies: tuple[Mapping[str, Strategy], Mapping[str, Strategy]], strategy: str, config: str,
                 kind: str = "time", profile_name: str = "quick", budget: float = 12.0, target: float = 1.08,
                 margin: float = 0.0, limit: float = math.inf, device: str = "cpu") -> Iterator[dict]:  # fmt: skip
    """The ``kind`` ("time" or "memory") measurements of one strategy on one config at both revisions, as dicts
    (module docstring); a call that cannot be measured at a side is reported failed there, with the reason."""
    layer = profile_config(get_profile(profile_name), config)
    base = {"strategy": strategy, "config": config, "device": device}
    absent = [SIDES[i] for i, registry in enumerate(strategies) if strategy not in registry]
    if absent:  # a strategy added or removed by the change: nothing to compare
        for measure in measures(kind):
            yield {**base, "measure": measure, "failed_at": "", "absent_at": "both" if len(absent) == 2 else absent[0]}
        return
    workloads, problems = _checked_workloads(strategies, strategy, layer, device)
    runnable = []
    for which, measure in zip(WHICH, measures(kind)):
        failed = [side for side in (0, 1) if problems[side][which] is not None]
        if not failed:
            runnable.append((which, measure))
            continue
        why = "; ".join(f"{SIDES[side]}: {problems[side][which]}" for side in failed)
        yield {**base, "measure": measure, "failed_at": "both" if len(failed) == 2 else SIDES[failed[0]], "error": why}
    pair = (workloads[0], workloads[1])
    if kind == "memory":
        for which, measure in runnable:
            before, after = (charged_net_peak(w, backward=which != "forward") for w in pair)  # type: ignore[arg-type]
            yield {**base, "measure": measure, "failed_at": "", "before": before, "after": after}
        return
    if runnable:
        _warm_up(pair, get_profile(profile_name).warmup_time)  # type: ignore[arg-type]
    for which, measure in runnable:
        started = time.monotonic()
        ratios = paired_log_ratios(pair, which, budget, target, margin, limit)  # type: ignore[arg-type]
        result = paired_ratio(ratios, margin)
        yield {**base, "measure": measure, "failed_at": "", "ratio": result.ratio, "low": result.low,
               "high": result.high, "pairs": result.pairs, "resolution": result.resolution,
               "seconds": time.monotonic() - started}  # fmt: skip


def measure_in_processes(base_tree: Path, head_tree: Path, units: list[tuple[str, str, str]], profile: str,
                         budget: float, target: float, margin: float, limit: float, env: Mapping[str, str],
                         timeout: float = 600.0) -> Iterator[dict]:  # fmt: skip
    """``measure_cell`` of each (strategy, config, device) in ``units``, its times in a process started with
    ``env`` (the timing regime's environment) and its net peaks in another started with glibc's mmap threshold
    pinned (``benchmarks.allocator``: a net peak then does not depend on what the process did before). A crash or
    a hang fails that process's cells only: its unreported measurements come back failed at both revisions
    (which one killed the process is unknown)."""
    root = Path(__file__).resolve().parent.parent
    for strategy, config, device in units:
        for kind, environment in (("time", dict(env)), ("memory", pinned_environment(env))):
            command = [sys.executable, "-m", "benchmarks.paired", str(base_tree), str(head_tree), strategy, config,
                       "--kind", kind, "--device", device, "--profile", profile, "--budget", str(budget),
                       "--target", str(target), "--margin", str(margin), "--limit", str(limit)]  # fmt: skip
            try:
                done = subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True,
                                      timeout=timeout)  # fmt: skip
                why = f"the measuring process exited with status {done.returncode}: {done.stderr.strip()[-1500:]}"
                stdout = done.stdout
            except subprocess.TimeoutExpired as expired:
                why = f"the measuring process took longer than {timeout:.0f} s and was killed"
                stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
            seen = set()
            for line in stdout.splitlines():
                if line.startswith("{"):
                    row = json.loads(line)
                    seen.add(row["measure"])
                    yield row
            for measure in measures(kind):
                if measure not in seen:
                    yield {"strategy": strategy, "config": config, "device": device, "measure": measure,
                           "failed_at": "both", "error": why}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_tree", type=Path)
    parser.add_argument("head_tree", type=Path)
    parser.add_argument("strategy")
    parser.add_argument("config")
    parser.add_argument("--kind", choices=("time", "memory"), default="time")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--budget", type=float, default=12.0, help="seconds of pairs per time cell at most")
    parser.add_argument("--target", type=float, default=1.08, help="stop sampling at this resolution")
    parser.add_argument("--margin", type=float, default=0.0, help="slowdown a change must clear")
    parser.add_argument("--limit", type=float, default=math.inf, help="a second budget below this resolution")
    args = parser.parse_args(argv)
    strategies = (load_strategies(args.base_tree), load_strategies(args.head_tree))
    rows = measure_cell(strategies, args.strategy, args.config, args.kind, args.profile, args.budget, args.target,
                        args.margin, args.limit, args.device)  # fmt: skip
    for row in rows:
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
