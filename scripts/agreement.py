"""Do the harness's times agree with an independent timer? The entry point of `make agreement`.

A few cells are timed twice in one run, in the same timing regime and with the same number of threads: by the
asv suite (``make bench``'s own cells, saved to a temporary results directory, not ``results/``), and by
``torch.utils.benchmark.Timer.blocked_autorange`` in as many processes per round as the harness gives each cell,
each calling every strategy directly in an order of its own (inputs made with the same seeds; for a strategy
that compiles, one untimed call first). It prints both
medians per cell and round, then per cell the ratio of the two timers' medians over the rounds, and each
timer's spread over its processes (slowest process over fastest). Processes differ from each other (on a
shared VM one process's median can differ from another's for the same code by more than the timers differ),
so a round proves little and the ratio is taken between medians over rounds. A ratio far from 1, beyond that
spread, means the harness measures something a user's process does not see. This is a check to run by hand,
not a test: both are timings on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.allocator import get_regime, regime_environment
from benchmarks.cells import Cell
from benchmarks.children import run_json_child
from benchmarks.profiles import PROFILES
from benchmarks.runner import scratch_config
from benchmarks.trees import ROOT
from benchmarks.vocabulary import PASSES
from unfold_bench.common_args import add_profile, add_regime

DEFAULT_CELLS = (
    "native:allcnnc-conv2:forward",
    "as_strided:allcnnc-conv2:forward",
    "gather:allcnnc-conv2:forward",
    "compiled:allcnnc-conv2:forward",
    "native:allcnnc-conv3:forward_backward",
    "compiled:allcnnc-conv3:forward_backward",
)

_TIMER = """
import json, sys, torch
from torch.utils.benchmark import Timer
from benchmarks.cells import Cell, Workload
from benchmarks.profiles import PROFILES
out = {}
for strategy, config, call in json.loads(sys.argv[1]):
    cell = Cell.from_names(strategy, config, "cpu", PROFILES[sys.argv[2]])
    w = Workload(cell, backward=True)
    f = cell.strategy
    stmt = "f(x, **kw)" if call == "forward" else "f(leaf, **kw).backward(g); leaf.grad = None"
    scope = {"f": f, "x": w.input, "leaf": w.leaf, "kw": w.kwargs, "g": w.grad_output}
    exec(stmt, scope)  # a strategy that compiles compiles here, untimed
    timer = Timer(stmt, globals=scope, num_threads=torch.get_num_threads())
    out[f"{strategy}:{config}:{call}"] = timer.blocked_autorange(min_run_time=0.3).median
print(json.dumps(out))
"""


EVERY_STRATEGY_CONFIGS = ("allcnnc-conv2", "allcnnc-conv3")  # --cells every: each strategy on these, both calls


def _parse_cells(text: str, profile_name: str) -> list[tuple[str, str, str]]:
    if text == "every":
        from impls import STRATEGIES

        profile = PROFILES[profile_name]
        return [
            (name, config, call)
            for config in EVERY_STRATEGY_CONFIGS
            for name in STRATEGIES
            for call in PASSES
            if Cell.from_names(name, config, "cpu", profile).skip_reason() is None
        ]
    cells = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) != 3 or parts[2] not in PASSES:
            raise SystemExit(f"--cells: {item!r} is not STRATEGY:CONFIG:CALL with CALL one of {PASSES}")
        try:
            reason = Cell.from_names(parts[0], parts[1], "cpu", PROFILES[profile_name]).skip_reason()
        except KeyError as error:
            raise SystemExit(f"--cells: {item!r}: {error.args[0]}") from None
        if reason is not None:
            raise SystemExit(f"--cells: {item!r} does not run here: {reason}")
        cells.append((parts[0], parts[1], parts[2]))
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--cells",
        default=",".join(DEFAULT_CELLS),
        help=f"STRATEGY:CONFIG:CALL,... (CPU), or 'every': each strategy on {', '.join(EVERY_STRATEGY_CONFIGS)}",
    )
    add_profile(parser)
    add_regime(parser)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both timers (default 5)")
    parser.add_argument("--out", help="also write the table to this file (e.g. docs/agreement-warm.txt)")
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit(f"--rounds {args.rounds}: must be at least 1")
    cells = _parse_cells(args.cells, args.profile)
    regime = get_regime(args.regime)
    env = {**regime_environment(regime), "PYTHONPATH": str(ROOT)}
    profile = PROFILES[args.profile]

    from benchmarks.machine import machine_name, register_machine

    machine = register_machine(f"agreement-{regime.name}", regime.name, env)["machine"]
    keys = [f"{s}:{c}:{call}" for s, c, call in cells]
    by_harness: dict[str, list[float]] = {key: [] for key in keys}
    by_timer: dict[str, list[float]] = {key: [] for key in keys}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"timing regime: {regime.label}; {len(cells)} cells, {args.rounds} rounds of harness then Timer", flush=True)
    for round_ in range(1, args.rounds + 1):
        harness = _time_by_harness(cells, profile.class_name, machine, commit, env)
        independent = _time_by_timer(cells, profile.name, env, profile.rounds)
        for key in keys:
            for found, kept in ((harness, by_harness), (independent, by_timer)):
                if key in found:
                    kept[key].append(found[key])
        print(
            f"round {round_} (harness/Timer): "
            + ", ".join(
                f"{k} {harness.get(k, math.nan) * 1e3:.3g}/{independent.get(k, math.nan) * 1e3:.3g} ms" for k in keys
            ),
            flush=True,
        )
    lines = [
        f"make agreement: machine {machine_name(regime.name)}, commit {commit[:8]}, {time.strftime('%Y-%m-%d')}",
        f"{profile.name} profile, CPU, {regime.label}, {args.rounds} rounds",
        f"ratio: the harness's median over the rounds / torch.utils.benchmark's median over the rounds (each round, "
        f"{profile.rounds} processes",
        "per cell for each timer: asv's rounds, and as many Timer processes); spread: a timer's slowest round over its",
        "fastest",
        "",
        f"{'cell':<42} {'harness ms':>10} {'Timer ms':>9} {'ratio':>6} {'harness spread':>15} {'Timer spread':>13}",
    ]
    for key in keys:
        h, t = by_harness[key], by_timer[key]
        if not h or not t:
            lines.append(f"{key:<42} {'failed':>10}")
            continue
        ratio = statistics.median(h) / statistics.median(t)
        lines.append(
            f"{key:<42} {statistics.median(h) * 1e3:>10.3g} {statistics.median(t) * 1e3:>9.3g} {ratio:>6.2f} "
            f"{max(h) / min(h):>15.2f} {max(t) / min(t):>13.2f}"
        )
    print("\n" + "\n".join(lines))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")
        print(f"written to {args.out}")
    return 0


def _time_by_harness(
    cells: list[tuple[str, str, str]], class_name: str, machine: str, commit: str, env: dict
) -> dict[str, float]:
    """The asv suite's medians of ``cells``, saved to a scratch results directory."""
    from reports.results import load_results

    names = "|".join(rf"unfold\.{class_name}\.time_{call}\('{s}', '{c}', 'cpu'\)" for s, c, call in cells)
    with tempfile.TemporaryDirectory() as scratch:
        config = str(scratch_config(Path(scratch), ROOT))
        command = [
            sys.executable,
            "-m",
            "asv",
            "--config",
            config,
            "run",
            "--python=same",
            "--set-commit-hash",
            commit,
            "--machine",
            machine,
            "-b",
            f"^(?:{names})$",
        ]
        subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
        table = load_results(Path(scratch) / "results")
    return {f"{r.strategy}:{r.config}:{r.metric[5:]}": r.value for r in table.itertuples() if r.status == "ok"}


def _time_by_timer(cells: list[tuple[str, str, str]], profile_name: str, env: dict, processes: int) -> dict[str, float]:
    """``torch.utils.benchmark``'s figure of each of ``cells``: the median over ``processes`` processes (as many as
    the harness gives each cell: the profile's ``rounds``), each timing every cell in an order of its own."""
    import random

    found: dict[str, list[float]] = {}
    for _ in range(processes):
        order = random.sample(cells, len(cells))
        rows, why = run_json_child([sys.executable, "-c", _TIMER, json.dumps(order), profile_name], None, env, 1800)
        if why or not rows:
            raise RuntimeError(f"torch.utils.benchmark's process: {why or 'printed no figure'}")
        for key, value in rows[-1].items():
            found.setdefault(key, []).append(value)
    return {key: statistics.median(values) for key, values in found.items()}


if __name__ == "__main__":
    raise SystemExit(main())
