"""Two revisions' strategies timed in one process, their calls alternated: the regression gate's paired mode.

Each revision's ``impls`` is imported from its own checkout (``load_strategies``): the package is imported,
its registry kept, and ``impls*`` dropped from ``sys.modules`` before the next is imported, so both live side by
side (a function keeps its own module's globals). The harness (this ``benchmarks`` package, with the
correctness check and the inputs) is this working tree's for both.

One strategy on one config (``measure_cell``) in one process:

1. the correctness check (``benchmarks.cells.check_cell``) of each revision on the benchmark inputs; a revision
   that fails it is not timed;
2. each revision's compiling calls, then ``warmup_time`` seconds of untimed calls of each;
3. for forward and forward-backward: blocks of four calls A B B A, each call after both workloads' ``reset``
   (untimed: the previous outputs are dropped first, as in the asv suite), both revisions on the very same input
   tensors; a block gives one log-ratio, the mean of its two pairs', so the order within a pair cancels.
   Sampling stops when the cell's resolution (``benchmarks.paired_stats``) reaches its target or its budget is
   spent;
4. or, in a process of its own started with glibc's threshold pinned, each revision's net peak memory
   (``benchmarks.cells.charged_net_peak``).

``measure_in_processes`` runs each strategy and config in three such processes: two that time, one with each
revision first (two copies of the same code in one process are not alike, and which was set up first matters;
with as many blocks from each order that cancels), and one for memory.

The process times in the regime it was started in (``benchmarks.allocator``); the gate names it.

Run as a module it measures one strategy on one config and prints one JSON object per measurement::

    python -m benchmarks.paired BASE_TREE HEAD_TREE STRATEGY CONFIG [--kind time|memory] [--head-first] ...
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
ROOT = Path(__file__).resolve().parent.parent
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


def timed_call(workloads: tuple[Workload, Workload], side: int, which: str) -> float:
    """One call of ``which`` by one side, after both sides' previous outputs are dropped (untimed): no call
    allocates while another's output is alive, so the two sides' outputs take the same freed memory in turn."""
    for workload in workloads:
        workload.reset()
    call = getattr(workloads[side], which)
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def paired_log_ratios(
    workloads: tuple[Workload, Workload],
    which: str,
    budget: float,
    target: float,
    margin: float,
    limit: float = math.inf,
    blocks: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> np.ndarray:
    """One log-ratio, log(second workload's time / first's), per block of four calls A B B A: the mean of its two
    pairs' log-ratios, so that whatever the order within a pair does (the second call finds the first's data in
    cache, or its freed memory) cancels. Sampled until the resolution reaches ``target`` (after at least
    ``MIN_PAIRS`` blocks and ``MIN_SECONDS``) or ``budget`` seconds have passed (then at least ``MIN_PAIRS`` are
    taken); a cell that resolves no better than ``limit`` when its budget is spent gets a second budget once (a
    neighbour's burst of load passes). With ``blocks``, exactly that many are taken instead (the process's
    timeout bounds it)."""
    ratios: list[float] = []
    start = checked = clock()
    budgets = 1
    while True:
        a, b = timed_call(workloads, 0, which), timed_call(workloads, 1, which)
        b2, a2 = timed_call(workloads, 1, which), timed_call(workloads, 0, which)
        ratios.append((math.log(b / a) + math.log(b2 / a2)) / 2)
        now = clock()
        if blocks is not None:
            if len(ratios) >= blocks:
                break
            continue
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


def share_inputs(workload: Workload, like: Workload) -> None:
    """Make ``workload`` call on ``like``'s input tensors (the same memory, so neither side has better-placed data)."""
    workload.input, workload.leaf, workload.grad_output = like.input, like.leaf, like.grad_output


def _warm_up(workloads: tuple[Workload, Workload], seconds: float) -> None:
    for which in WHICH:
        end = time.monotonic() + seconds
        while True:
            for side in (0, 1):
                timed_call(workloads, side, which)
            if time.monotonic() > end:
                break
    for workload in workloads:
        workload.reset()


def measures(kind: str) -> tuple[str, ...]:
    """The measurements a process of ``kind`` ("time" or "memory") reports for one strategy on one config."""
    return tuple(f"time_{w}" for w in WHICH) if kind == "time" else tuple(f"net_peak_{w}" for w in WHICH)


Problems = dict[str, str | None]  # per call (forward, forward_backward): why it cannot be timed, or None
SKIPPED = "skipped: "  # a problem that is no failure: the cell does not run here


def _checked_workloads(
    strategies: tuple[Mapping[str, Strategy], Mapping[str, Strategy]], strategy: str, layer: LayerConfig, device: str
) -> tuple[list[Workload | None], list[Problems]]:
    """Each side's workload (inputs shared, compiling calls made) and its problems per call (``None``: none), after
    the correctness check; a side that is skipped or computes a wrong output gets no workload."""
    workloads: list[Workload | None] = [None, None]
    problems: list[Problems] = [{}, {}]
    for side, registry in enumerate(strategies):
        cell = Cell(registry[strategy], layer, device)
        reason = cell.skip_reason()
        if reason is not None:
            problems[side] = {which: f"{SKIPPED}{reason}" for which in WHICH}
            continue
        verdict = check_cell(cell)
        problems[side] = {which: verdict.problem(backward=which != "forward") for which in WHICH}
    use_exact_float32(device)
    for side, registry in enumerate(strategies):
        if problems[side]["forward"] is None:
            workloads[side] = workload = Workload(Cell(registry[strategy], layer, device), backward=True)
            if side == 1 and workloads[0] is not None:
                share_inputs(workload, workloads[0])
            workload.compile()
    return workloads, problems


def measure_cell(
    strategies: tuple[Mapping[str, Strategy], Mapping[str, Strategy]],
    strategy: str,
    config: str,
    *,
    budget: float | None = None,
    target: float | None = None,
    kind: str = "time",
    profile_name: str = "quick",
    margin: float = 0.0,
    limit: float = math.inf,
    device: str = "cpu",
    head_first: bool = False,
    pairs: Mapping[str, int] | None = None,
) -> Iterator[dict]:
    """The ``kind`` ("time" or "memory") measurements of one strategy on one config at both revisions, as dicts
    (module docstring); a call that cannot be measured at a side is reported failed there, with the reason.

    A time row carries the log-ratios (head over base) of its pairs. ``head_first``: the head revision is
    checked, set up, warmed up and called first in each process-level step (its buffers are allocated first);
    ``pairs``: a fixed number of pairs per measurement instead of sampling to ``target``. ``budget`` and
    ``target`` (the gate's ``reports.compare.Thresholds``, passed by ``scripts/regress.py``) are required for time.
    """
    if kind == "time" and (budget is None or target is None):
        raise ValueError(f"measure_cell: kind 'time' needs budget and target, got {budget!r} and {target!r}")
    layer = profile_config(get_profile(profile_name), config)
    base = {"strategy": strategy, "config": config, "device": device}
    absent = [SIDES[i] for i, registry in enumerate(strategies) if strategy not in registry]
    if absent:  # a strategy added or removed by the change: nothing to compare
        for measure in measures(kind):
            yield {**base, "measure": measure, "failed_at": "", "absent_at": "both" if len(absent) == 2 else absent[0]}
        return
    order = (1, 0) if head_first else (0, 1)  # revision of the first and of the second workload
    workloads, problems = _checked_workloads((strategies[order[0]], strategies[order[1]]), strategy, layer, device)
    runnable = []
    for which, measure in zip(WHICH, measures(kind)):
        at = {order[side]: problems[side][which] for side in (0, 1)}  # revision -> its problem
        skipped = sorted(r for r, problem in at.items() if problem is not None and problem.startswith(SKIPPED))
        failed = sorted(r for r, problem in at.items() if problem is not None and r not in skipped)
        if not failed and not skipped:
            runnable.append((which, measure))
        elif failed:
            why = "; ".join(f"{SIDES[revision]}: {at[revision]}" for revision in failed)
            yield {
                **base,
                "measure": measure,
                "failed_at": "both" if len(failed) == 2 else SIDES[failed[0]],
                "error": why,
            }
        else:  # not supported here (no GPU, spatial dims, a refused dtype): nothing to compare
            yield {
                **base,
                "measure": measure,
                "failed_at": "",
                "skipped_at": "both" if len(skipped) == 2 else SIDES[skipped[0]],
                "error": "; ".join(f"{SIDES[r]}: {at[r]}" for r in skipped),
            }
    pair = (workloads[0], workloads[1])
    if kind == "memory":
        for which, measure in runnable:
            peaks = [charged_net_peak(w, backward=which != "forward") for w in pair]  # type: ignore[arg-type]
            yield {
                **base,
                "measure": measure,
                "failed_at": "",
                "before": peaks[order.index(0)],
                "after": peaks[order.index(1)],
            }
        return
    if runnable:
        _warm_up(pair, get_profile(profile_name).warmup_time)  # type: ignore[arg-type]
    for which, measure in runnable:
        fixed = None if pairs is None else pairs.get(which)
        if pairs is not None and not fixed:
            continue  # not measured in the first process: nothing to pair with
        started = time.monotonic()
        ratios = paired_log_ratios(pair, which, budget, target, margin, limit, fixed)  # type: ignore[arg-type]
        yield {
            **base,
            "measure": measure,
            "failed_at": "",
            "log_ratios": (-ratios if head_first else ratios).tolist(),
            "seconds": time.monotonic() - started,
        }


def _run_child(command: list[str], env: Mapping[str, str], timeout: float) -> tuple[list[dict], str]:
    """The JSON rows a measuring process printed, and why it ended if it failed (else "")."""
    try:
        done = subprocess.run(command, cwd=ROOT, env=dict(env), capture_output=True, text=True, timeout=timeout)
        why = (
            ""
            if done.returncode == 0
            else f"the measuring process exited with status {done.returncode}: {done.stderr.strip()[-1500:]}"
        )
        stdout = done.stdout
    except subprocess.TimeoutExpired as expired:
        why = f"the measuring process took longer than {timeout:.0f} s and was killed"
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")], why


def process_target(target: float, margin: float, processes: int = 2) -> float:
    """The resolution at which one of ``processes`` stops sampling so that their pooled pairs, as many from each,
    resolve ``target``: the standard error shrinks with the square root of the pairs."""
    return (1 + margin) * (target / (1 + margin)) ** math.sqrt(processes)


def measure_in_processes(
    base_tree: Path,
    head_tree: Path,
    units: list[tuple[str, str, str]],
    profile: str,
    budget: float,
    target: float,
    margin: float,
    limit: float,
    env: Mapping[str, str],
    timeout: float = 600.0,
) -> Iterator[dict]:
    """The measurements of each (strategy, config, device) in ``units``, each from processes of its own, so a
    crash or a hang fails that unit's cells only (its unreported measurements come back failed at an
    ``unknown`` revision: which one killed the process cannot be told).

    Time: two processes started with ``env`` (the timing regime's environment), one with the base revision
    first, one with the head first (``measure_cell``'s ``head_first``), as many pairs from each: two copies of
    the same code in one process are not alike (their buffers and kernels sit at different addresses, and the
    first allocated differs from the second), and swapping the order turns that process effect into noise the
    pooled interval sees. The first samples to ``process_target`` within half the ``budget``; the second takes
    as many pairs. Memory: a third process, started with glibc's mmap threshold pinned, so a net peak does not
    depend on what the process did before (``benchmarks.allocator``).
    """
    arguments = ["--profile", profile, "--margin", str(margin), "--limit", str(limit)]
    for strategy, config, device in units:
        cell = {"strategy": strategy, "config": config, "device": device}
        common = [
            sys.executable,
            "-m",
            "benchmarks.paired",
            str(base_tree),
            str(head_tree),
            strategy,
            config,
            "--device",
            device,
            *arguments,
        ]
        sampling = ["--budget", str(budget / 2), "--target", str(process_target(target, margin))]
        first, why = _run_child([*common, *sampling], env, timeout)
        first_rows = {row["measure"]: row for row in first}
        counts = {m.removeprefix("time_"): len(r["log_ratios"]) for m, r in first_rows.items() if "log_ratios" in r}
        second: list[dict] = []
        if counts:
            fixed = ",".join(f"{which}={n}" for which, n in counts.items())
            second, why_second = _run_child([*common, *sampling, "--head-first", "--pairs", fixed], env, timeout)
            why = why or why_second
        second_rows = {row["measure"]: row for row in second}
        for measure in measures("time"):
            row = first_rows.get(measure)
            if row is None:
                yield {**cell, "measure": measure, "failed_at": "unknown", "error": why}
            elif "log_ratios" not in row:
                yield row  # failed at a revision, or absent
            elif "log_ratios" not in second_rows.get(measure, {}):
                yield second_rows.get(measure) or {**cell, "measure": measure, "failed_at": "unknown", "error": why}
            else:
                yield _pooled(row, second_rows[measure], margin)
        memory, why = _run_child([*common, "--kind", "memory"], pinned_environment(env), timeout)
        seen = {row["measure"] for row in memory}
        yield from memory
        for measure in measures("memory"):
            if measure not in seen:
                yield {**cell, "measure": measure, "failed_at": "unknown", "error": why}


def _pooled(first: dict, second: dict, margin: float) -> dict:
    """One time row from the two processes' pairs, as many from each (the second may have been cut short)."""
    n = min(len(first["log_ratios"]), len(second["log_ratios"]))
    if n < MIN_PAIRS:
        return {key: value for key, value in first.items() if key != "log_ratios"} | {
            "failed_at": "unknown",
            "error": f"the second process took {n} blocks, fewer than {MIN_PAIRS}",
        }
    processes = [np.asarray(first["log_ratios"][:n]), np.asarray(second["log_ratios"][:n])]
    result = paired_ratio(np.concatenate(processes), margin)
    return {key: value for key, value in first.items() if key != "log_ratios"} | {
        "ratio": result.ratio,
        "low": result.low,
        "high": result.high,
        "pairs": result.pairs,
        "resolution": result.resolution,
        "seconds": first["seconds"] + second["seconds"],
        "process_ratios": [paired_ratio(d, margin).ratio for d in processes],
    }


def _fixed_pairs(text: str) -> dict[str, int]:
    """``--pairs forward=N,forward_backward=M`` as a dict."""
    pairs = {}
    for item in filter(None, text.split(",")):
        which, _, count = item.partition("=")
        if which not in WHICH or not count.isdigit():
            raise argparse.ArgumentTypeError(f"--pairs {text!r}: expected forward=N,forward_backward=M")
        pairs[which] = int(count)
    return pairs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_tree", type=Path)
    parser.add_argument("head_tree", type=Path)
    parser.add_argument("strategy")
    parser.add_argument("config")
    parser.add_argument("--kind", choices=("time", "memory"), default="time")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--budget", type=float, help="seconds of pairs per time cell at most (time: required)")
    parser.add_argument("--target", type=float, help="stop sampling at this resolution (time: required)")
    parser.add_argument("--margin", type=float, default=0.0, help="slowdown a change must clear")
    parser.add_argument("--limit", type=float, default=math.inf, help="a second budget below this resolution")
    parser.add_argument("--head-first", action="store_true", help="load, set up and call the head revision first")
    parser.add_argument("--pairs", type=_fixed_pairs, help="fixed pairs: forward=N,forward_backward=M")
    args = parser.parse_args(argv)
    if args.kind == "time" and (args.budget is None or args.target is None):
        parser.error("--kind time needs --budget and --target (scripts/regress.py passes the gate's Thresholds)")
    sides = (1, 0) if args.head_first else (0, 1)  # load in the order they are set up
    loaded: dict[int, dict[str, Strategy]] = {}
    errors: dict[int, str] = {}
    for side in sides:
        try:
            loaded[side] = load_strategies((args.base_tree, args.head_tree)[side])
        except Exception as error:  # a revision whose impls does not import fails there, not at both
            errors[side] = f"{SIDES[side]}: its impls does not import ({type(error).__name__}: {error})"
    if errors:
        at = "both" if len(errors) == 2 else SIDES[next(iter(errors))]
        for measure in measures(args.kind):
            row = {"strategy": args.strategy, "config": args.config, "device": args.device, "measure": measure}
            print(json.dumps({**row, "failed_at": at, "error": "; ".join(errors.values())}), flush=True)
        return
    strategies = (loaded[0], loaded[1])
    rows = measure_cell(
        strategies,
        args.strategy,
        args.config,
        budget=args.budget,
        target=args.target,
        kind=args.kind,
        profile_name=args.profile,
        margin=args.margin,
        limit=args.limit,
        device=args.device,
        head_first=args.head_first,
        pairs=args.pairs,
    )
    for row in rows:
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
