"""Two revisions of the strategies in one process: the regression gate's measurements.

Each revision's ``impls`` is imported from its own checkout (``load_strategies``): the package is imported,
its registry kept, and ``impls*`` dropped from ``sys.modules`` before the next is imported, so both live side by
side (a function keeps its own module's globals). The harness (this ``benchmarks`` package, with the
correctness check and the inputs) is this working tree's for both.

- **Time** (``measure_time``): ``Design.processes`` replicate processes (``benchmarks.replicates``), each
  measuring every selected cell, half of them with the head revision set up first: in each, per cell, both
  revisions' correctness check, then rounds of fresh input placements, each of blocks of four calls A B B A on
  the same inputs. A cell's verdict comes from its per-process log-ratios, with Student's t across the processes:
  the spread between processes (where the code and the buffers landed) is what decides whether a change is seen,
  so it is measured, not assumed away.
- **Memory** (``measure_cell``): in one more process started with glibc's threshold pinned, each revision's net
  peak of every cell (``benchmarks.cells.charged_net_peak``).

Both time in the regime the processes were started in (``benchmarks.allocator``); the gate names it. Run as a
module it measures the net peaks of the cells named and prints one JSON object per measurement::

    python -m benchmarks.paired BASE_TREE HEAD_TREE STRATEGY:CONFIG[:DEVICE] ... [--profile quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmarks.allocator import pinned_environment
from benchmarks.cells import Cell, Workload, charged_net_peak, check_cell, profile_config, use_exact_float32
from benchmarks.children import run_json_child
from benchmarks.configs import LayerConfig
from benchmarks.profiles import DEFAULT_PROFILE, PROFILES, get_profile
from benchmarks.replicates import ABSENT, SKIPPED, Unit, across_processes, process_estimate, run_process
from benchmarks.trees import import_from, package_from
from benchmarks.vocabulary import PASSES, peak_metric, timed_metric
from impls import Strategy

SIDES = ("base", "head")


OUTSIDE_VARIABLE = "UNFOLD_BENCH_GATE_STRATEGY"  # module:attribute: gate that strategy of another repository


def load_outside(tree: Path, spec: str) -> dict[str, Strategy]:
    """The strategy ``spec`` (``module:attribute``) of another repository's checkout ``tree`` (its ``src/`` layout
    or its root), as ``impls.plugins`` takes it; the modules of its top-level package already imported are back
    in place afterwards, so the other revision's can be loaded beside it."""
    from impls.plugins import as_strategy

    tree = Path(tree).resolve()
    module_name, _, attribute = spec.partition(":")
    roots = [path for path in (tree / "src", tree) if path.is_dir()]
    with package_from(module_name.split(".")[0], roots):
        target: object = import_from(module_name, roots)
        for part in attribute.split("."):
            target = getattr(target, part)
        strategy = as_strategy(attribute.rsplit(".", 1)[-1], target, f"{module_name} at {tree.name}")
        return {strategy.name: strategy}


def load_strategies(tree: Path) -> dict[str, Strategy]:
    """The registry of the ``impls`` package in the checkout ``tree``, or, when ``$UNFOLD_BENCH_GATE_STRATEGY``
    names one, that strategy of another repository's checkout (``load_outside``); the modules already imported under
    the name ``impls`` are back in place afterwards, so a second checkout can be loaded beside the first."""
    spec = os.environ.get(OUTSIDE_VARIABLE)
    if spec:
        return load_outside(tree, spec)
    tree = Path(tree).resolve()
    with package_from("impls", [tree]):
        return dict(import_from("impls.registry", [tree]).STRATEGIES)


def timed_call(workloads: tuple[Workload, Workload], side: int, which: str) -> float:
    """One call of ``which`` by one side, after both sides' previous outputs are dropped (untimed): no call
    allocates while another's output is alive, so the two sides' outputs take the same freed memory in turn."""
    for workload in workloads:
        workload.reset()
    call = getattr(workloads[side], which)
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def share_inputs(workload: Workload, like: Workload) -> None:
    """Make ``workload`` call on ``like``'s input tensors (the same memory, so neither side has better-placed data)."""
    workload.input, workload.leaf, workload.grad_output = like.input, like.leaf, like.grad_output


def measures(kind: str) -> tuple[str, ...]:
    """The measurements a process of ``kind`` ("time" or "memory") reports for one strategy on one config."""
    return tuple(map(timed_metric, PASSES)) if kind == "time" else tuple(map(peak_metric, PASSES))


Problems = dict[str, str | None]  # per call (forward, forward_backward): why it cannot be timed, or None


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
            problems[side] = {which: f"{SKIPPED}{reason}" for which in PASSES}
            continue
        verdict = check_cell(cell)
        problems[side] = {which: verdict.problem(backward=which != "forward") for which in PASSES}
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
    profile_name: str = DEFAULT_PROFILE,
    device: str = "cpu",
) -> Iterator[dict]:
    """The net peaks of one strategy on one config at both revisions, as dicts (``before``: base, ``after``:
    head); a call that cannot be measured at a side is reported failed there, with the reason."""
    layer = profile_config(get_profile(profile_name), config)
    base = {"strategy": strategy, "config": config, "device": device}
    absent = [SIDES[i] for i, registry in enumerate(strategies) if strategy not in registry]
    if absent:  # a strategy added or removed by the change: nothing to compare
        for measure in measures("memory"):
            yield {**base, "measure": measure, "failed_at": "", "absent_at": "both" if len(absent) == 2 else absent[0]}
        return
    workloads, problems = _checked_workloads(strategies, strategy, layer, device)
    for which, measure in zip(PASSES, measures("memory")):
        at = {side: problems[side][which] for side in (0, 1)}
        skipped = sorted(r for r, problem in at.items() if problem is not None and problem.startswith(SKIPPED))
        failed = sorted(r for r, problem in at.items() if problem is not None and r not in skipped)
        if failed:
            why = "; ".join(f"{SIDES[side]}: {at[side]}" for side in failed)
            yield {
                **base,
                "measure": measure,
                "failed_at": "both" if len(failed) == 2 else SIDES[failed[0]],
                "error": why,
            }
        elif skipped:  # not supported here (no GPU, spatial dims, a refused dtype): nothing to compare
            why = "; ".join(f"{SIDES[side]}: {at[side]}" for side in skipped)
            yield {
                **base,
                "measure": measure,
                "failed_at": "",
                "skipped_at": "both" if len(skipped) == 2 else SIDES[skipped[0]],
                "error": why,
            }
        else:
            peaks = [charged_net_peak(w, backward=which != "forward") for w in workloads]  # type: ignore[arg-type]
            yield {**base, "measure": measure, "failed_at": "", "before": peaks[0], "after": peaks[1]}


def _run_child(command: list[str], env: Mapping[str, str], timeout: float) -> tuple[list[dict], str]:
    """The JSON rows a measuring process printed, and why it ended if it failed (else "")."""
    rows, why = run_json_child(command, None, env, timeout)
    return rows, f"the measuring process {why}" if why else ""


@dataclass(frozen=True)
class Design:
    """How much the gate measures per time cell: ``processes`` replicate processes (half with each revision set up
    first), ``rounds`` placements in each, at most ``blocks`` blocks or ``round_seconds`` per round."""

    processes: int
    rounds: int
    blocks: int
    round_seconds: float


def _time_units(base_tree: Path, head_tree: Path, units: list[tuple[str, str, str]]) -> dict[str, Unit]:
    """The replicate units (``benchmarks.replicates``) of the gate: each strategy's base (side A) against its head
    (side B), per config, device and call, keyed "strategy, config, device, call"."""
    return {
        f"{strategy}, {config}, {device}, {which}": {
            "key": f"{strategy}, {config}, {device}, {which}",
            "sides": [{"tree": str(base_tree), "strategy": strategy}, {"tree": str(head_tree), "strategy": strategy}],
            "config": config,
            "which": which,
            "device": device,
        }
        for strategy, config, device in units
        for which in PASSES
    }


def _problem_row(cell: dict, problems: Mapping[str, str]) -> dict:
    """A time row for a cell one or both of whose sides (A: base, B: head) cannot be timed."""
    at = {"A": "base", "B": "head"}
    absent = sorted(at[s] for s, why in problems.items() if why == ABSENT)
    skipped = sorted(at[s] for s, why in problems.items() if why.startswith(SKIPPED))
    failed = sorted(at[s] for s, why in problems.items() if why != ABSENT and not why.startswith(SKIPPED))
    both = {"base", "head"}
    why = "; ".join(f"{at[s]}: {w}" for s, w in sorted(problems.items()))
    if failed:
        return {**cell, "failed_at": "both" if set(failed) == both else failed[0], "error": why}
    if absent:
        return {**cell, "failed_at": "", "absent_at": "both" if set(absent) == both else absent[0]}
    return {**cell, "failed_at": "", "skipped_at": "both" if set(skipped) == both else skipped[0], "error": why}


# A measuring process's timeout (``timeout``, for a hang) grows by this much a unit it is handed beyond it: a large
# selection (the full profile's batch, every strategy, cold compiles) must not be cut off as a hang and its cell in
# flight failed, nor a hang in CI's subset wait much past ``timeout`` (its units take about a second and a compile)
UNIT_SECONDS = 15.0


def measure_time(
    base_tree: Path,
    head_tree: Path,
    units: list[tuple[str, str, str]],
    profile: str,
    design: Design,
    margin: float,
    env: Mapping[str, str],
    timeout: float = 900.0,
    progress: Callable[[str], None] = lambda line: None,
) -> Iterator[dict]:
    """The time rows of every (strategy, config, device) in ``units``, forward and forward-backward, from
    ``design.processes`` replicate processes that each measure every unit (``benchmarks.replicates``), half of
    them with the head revision set up first. A cell's ratio, interval and resolution come from its per-process
    estimates across the processes (``benchmarks.replicates.across_processes``): the process, not the call, is the
    unit of replication. A process that dies is restarted on the units after the one in flight, which fails; one
    that dies after reporting every unit (at exit) loses nothing."""
    cells = _time_units(base_tree, head_tree, units)
    estimates: dict[str, tuple[list[float], list[float]]] = {key: ([], []) for key in cells}
    blocks = dict.fromkeys(cells, 0)
    problems: dict[str, dict[str, str]] = {}
    started = time.monotonic()
    for process in range(design.processes):
        head_first = process % 2 == 1
        pending = [key for key in cells if key not in problems]
        while pending:
            spec = {
                "units": [cells[key] for key in pending],
                "rounds": design.rounds,
                "blocks": design.blocks,
                "round_seconds": design.round_seconds,
                "b_first": head_first,
                "seed": 1000 * process,
                "profile": profile,
            }
            rows, why = run_process(spec, env, max(timeout, UNIT_SECONDS * len(pending)))
            complete = set()
            for key in pending:
                mine = [row for row in rows if row["key"] == key]
                if any("problems" in row for row in mine):
                    problems[key] = next(row["problems"] for row in mine if "problems" in row)
                    complete.add(key)
                elif len(mine) == design.rounds:
                    estimates[key][head_first].append(process_estimate(mine)[key])
                    blocks[key] += sum(len(row["log_ratios"]) for row in mine)
                    complete.add(key)
            if not why:
                break
            if complete == set(pending):  # it died after reporting every cell (at exit, say): its figures stand
                progress(f"process {process + 1}/{design.processes}: {why} after it reported every cell")
                break
            in_flight = next(key for key in pending if key not in complete)
            problems[in_flight] = {"A": f"unknown: the replicate process {why}"}
            pending = pending[pending.index(in_flight) + 1 :]
        progress(
            f"process {process + 1}/{design.processes} ({'head' if head_first else 'base'} set up first): "
            f"{time.monotonic() - started:.0f} s so far"
        )
    for key, (a_first, b_first) in estimates.items():
        strategy, config, device, which = key.split(", ")
        cell = {"strategy": strategy, "config": config, "device": device, "measure": timed_metric(which)}
        if key in problems:
            found = problems[key]
            if set(found) == {"A"} and found["A"].startswith("unknown: "):
                yield {**cell, "failed_at": "unknown", "error": found["A"].removeprefix("unknown: ")}
            else:
                yield _problem_row(cell, found)
            continue
        if len(a_first) < 2 or len(b_first) < 2:
            why = f"{len(a_first)} and {len(b_first)} processes measured it, per set-up order (2 of each needed)"
            yield {**cell, "failed_at": "unknown", "error": why}
            continue
        result = across_processes(a_first, b_first, margin=margin)
        yield {
            **cell,
            "failed_at": "",
            "ratio": result.ratio,
            "low": result.low,
            "high": result.high,
            "pairs": blocks[key],
            "processes": result.processes,
            "resolution": result.resolution,
            "process_ratios": list(result.process_ratios),
            "seconds": time.monotonic() - started,
        }


def measure_in_processes(
    base_tree: Path,
    head_tree: Path,
    units: list[tuple[str, str, str]],
    profile: str,
    design: Design,
    margin: float,
    env: Mapping[str, str] | None,
    timeout: float = 900.0,
    progress: Callable[[str], None] = lambda line: None,
) -> Iterator[dict]:
    """Time (``measure_time``), then memory: every (strategy, config, device) in one process started with glibc's
    mmap threshold pinned, so a net peak does not depend on what the process did before
    (``benchmarks.allocator``); a process that dies is restarted on the cells after the one in flight, which
    fails."""
    yield from measure_time(base_tree, head_tree, units, profile, design, margin, env, timeout, progress)
    pending = list(units)
    while pending:
        command = [sys.executable, "-m", "benchmarks.paired", str(base_tree), str(head_tree), "--profile", profile]
        command += [":".join(unit) for unit in pending]
        limit = max(timeout, UNIT_SECONDS * len(pending))
        rows, why = _run_child(command, pinned_environment() if env is None else pinned_environment(env), limit)
        yield from rows
        seen = {(row["strategy"], row["config"], row["device"], row["measure"]) for row in rows}
        done = [unit for unit in pending if all((*unit, m) in seen for m in measures("memory"))]
        if not why or len(done) == len(pending):
            break
        in_flight = next(unit for unit in pending if unit not in done)
        cell = dict(zip(("strategy", "config", "device"), in_flight))
        for measure in measures("memory"):
            if (*in_flight, measure) not in seen:
                yield {**cell, "measure": measure, "failed_at": "unknown", "error": why}
        pending = pending[pending.index(in_flight) + 1 :]


def _cell(text: str) -> tuple[str, str, str]:
    """``STRATEGY:CONFIG[:DEVICE]`` as a tuple (device ``cpu`` by default)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"{text!r}: expected STRATEGY:CONFIG[:DEVICE]")
    return (parts[0], parts[1], parts[2] if len(parts) == 3 else "cpu")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_tree", type=Path)
    parser.add_argument("head_tree", type=Path)
    parser.add_argument("cells", nargs="+", type=_cell, metavar="STRATEGY:CONFIG[:DEVICE]")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=DEFAULT_PROFILE)
    args = parser.parse_args(argv)
    loaded: dict[int, dict[str, Strategy]] = {}
    errors: dict[int, str] = {}
    for side in (0, 1):
        try:
            loaded[side] = load_strategies((args.base_tree, args.head_tree)[side])
        except Exception as error:  # a revision whose impls does not import fails there, not at both
            errors[side] = f"{SIDES[side]}: its impls does not import ({type(error).__name__}: {error})"
    for strategy, config, device in args.cells:
        if errors:
            at = "both" if len(errors) == 2 else SIDES[next(iter(errors))]
            for measure in measures("memory"):
                row = {"strategy": strategy, "config": config, "device": device, "measure": measure}
                print(json.dumps({**row, "failed_at": at, "error": "; ".join(errors.values())}), flush=True)
            continue
        for row in measure_cell((loaded[0], loaded[1]), strategy, config, profile_name=args.profile, device=device):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
