"""The CI regression gate: benchmark two revisions on this machine in one run and judge the change.

    python scripts/regress.py BASE [HEAD] [--bench REGEX] [--time-threshold 0.10] [--memory-threshold 0.05]

asv builds each revision's project into its own virtualenv (``.asv/env``, shared with ``make bench-commits``)
and runs the strategies' benchmarks of both, **interleaving the rounds** (``asv continuous
--interleave-rounds``: BASE, HEAD, BASE, HEAD, ...), so a drift of the machine during the run hits both
alike. Each round is one process per cell and revision with a fixed number of samples, so that
``reports.compare`` can test per-round medians (8 rounds a side by default). Results go to
``.asv/regress/results`` (never mixed with the committed ones). Then ``reports.compare`` judges every cell
(see its docstring) and a table of what changed is printed.

Exit status: 0 pass; 1 a statistically significant regression beyond a threshold; 2 a benchmark (or an
instruction count) failed at HEAD, asv reported a failed benchmark, or no benchmark cell was compared
(``reports.compare.gate_decision``). ``asv continuous`` exits 2 and prints no comparison when a benchmark
fails, and ``asv compare`` always exits 0, so neither judges a change; asv's status is used only to fail
closed on a failure, which may be a round lost at HEAD that left no trace in the results.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.allocator import pin_mmap_threshold  # noqa: E402

pin_mmap_threshold()  # before torch allocates: memory and time must not depend on the process's history

import pandas as pd  # noqa: E402

from benchmarks.profiles import PROFILES, benchmark_regex  # noqa: E402
from reports.compare import (  # noqa: E402
    P_THRESHOLD,
    Thresholds,
    callgrind_rows,
    compare,
    format_resolution,
    format_table,
    gate_decision,
    load_run,
    min_rounds,
    resolution,
    smallest_p,
)

WORK = ROOT / ".asv" / "regress"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def gate_config(source: Path = ROOT / "asv.conf.json") -> Path:
    """The project's asv configuration with absolute paths and its own results directory."""
    from asv.util import load_json

    config = load_json(str(source), js_comments=True)
    config.update(
        repo=str(ROOT),
        benchmark_dir=str(ROOT / config["benchmark_dir"]),
        env_dir=str(ROOT / config["env_dir"]),
        results_dir=str(WORK / "results"),
        html_dir=str(WORK / "html"),
        branches=["HEAD"],
    )
    path = WORK / "asv.conf.json"
    path.write_text(json.dumps(config, indent=4))
    return path


def _callgrind_cell(spec: str) -> str:
    """argparse type of ``--callgrind``: the spec, checked before any work (``benchmarks.instructions.parse_cell``)."""
    from benchmarks.instructions import parse_cell

    try:
        parse_cell(spec)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return spec


def count_with_callgrind(cells: list[str], revisions: list[str]) -> dict[str, list[int | None]]:
    """Instruction counts of each cell ("strategy:config:forward|forward_backward") at each revision, each
    revision's impls checked out in a temporary git worktree; ``None`` where a count failed (its error is
    printed and the gate reports the cell as failed, it does not stop)."""
    from benchmarks.instructions import count_instructions

    counts: dict[str, list[int | None]] = {cell: [] for cell in cells}
    for revision in revisions:
        tree = WORK / f"worktree-{revision[:12]}"
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
        _git("worktree", "add", "--detach", str(tree), revision)
        try:
            for cell in cells:
                strategy, config, which = cell.split(":")
                print(f"callgrind: {cell} at {revision[:8]} ...", flush=True)
                try:
                    counts[cell].append(count_instructions(tree, strategy, config, which))
                except RuntimeError as error:
                    print(f"callgrind: {cell} at {revision[:8]} FAILED: {error}", flush=True)
                    counts[cell].append(None)
        finally:
            _git("worktree", "remove", "--force", str(tree))
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", help="the revision to compare against (e.g. origin/main)")
    parser.add_argument("head", nargs="?", default="HEAD", help="the revision under test (default HEAD)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--bench", default="", help="extra regex restricting the cells, e.g. 'conv2' or 'tiling'")
    parser.add_argument("--time-threshold", type=float, default=0.10, help="relative slowdown that fails (0.10)")
    parser.add_argument("--memory-threshold", type=float, default=0.05, help="relative growth that fails (0.05)")
    parser.add_argument("--instruction-threshold", type=float, default=0.02, help="callgrind growth that fails")
    parser.add_argument(
        "--rounds",
        type=int,
        default=8,
        help="interleaved rounds (processes) a side; 7+ reach p < 0.002",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="samples per round (fixed, so that each round's median is known)"
    )
    parser.add_argument("--machine", help="machine name to record (default: derived, as for make bench)")
    parser.add_argument("--all-rows", action="store_true", help="print unchanged cells too")
    parser.add_argument(
        "--callgrind",
        action="append",
        default=[],
        type=_callgrind_cell,
        metavar="STRATEGY:CONFIG:forward|forward_backward",
        help="also judge this cell by its instruction count (deterministic; minutes per cell); repeatable",
    )
    args = parser.parse_args()
    if args.rounds < min_rounds():
        parser.error(
            f"--rounds {args.rounds}: the Mann-Whitney U test on {args.rounds} round medians a side cannot reach "
            f"p < {P_THRESHOLD} (smallest p {smallest_p(args.rounds, args.rounds):.3g}); use at least {min_rounds()}"
        )
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: need at least 1 sample per round")

    base, head = _git("rev-parse", args.base), _git("rev-parse", args.head)
    from benchmarks.machine import register_machine

    info = register_machine(args.machine)
    machine = info["machine"]
    WORK.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(WORK / "results" / machine, ignore_errors=True)  # no stale cells from an earlier gate run
    config = gate_config()
    pattern = benchmark_regex(PROFILES[args.profile], args.bench, suites=("unfold",))  # the strategies' cells
    command = [sys.executable, "-m", "asv", "--config", str(config), "continuous", "--interleave-rounds",
               "-a", f"rounds={args.rounds}", "-a", f"repeat={args.repeat}", "--machine", machine,
               "--show-stderr", "-b", pattern, base, head]  # fmt: skip
    print(f"gate: {base[:8]} (base) vs {head[:8]} (head) on {machine}; thresholds: time +{args.time_threshold:.0%}"
          f" (significant by asv's Mann-Whitney U test on {args.rounds} round medians a side), memory"
          f" +{args.memory_threshold:.0%}; {info['allocator']}", flush=True)  # fmt: skip
    print("$ " + " ".join(command), flush=True)
    asv_status = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode

    results_dir = str(WORK / "results")
    try:
        before, after = load_run(results_dir, machine, base), load_run(results_dir, machine, head)
    except LookupError as error:
        print(f"\nGATE ERROR: asv produced no comparable results (asv exit status {asv_status}): {error}")
        return 2
    thresholds = Thresholds(args.time_threshold, args.memory_threshold, instructions=args.instruction_threshold)
    table = compare(before, after, thresholds, rounds=args.rounds, repeat=args.repeat)
    if args.callgrind:
        counts = count_with_callgrind(args.callgrind, [base, head])
        counted = callgrind_rows({c.replace(":", ", "): tuple(v) for c, v in counts.items()}, thresholds)
        table = pd.concat([table, counted], ignore_index=True)
    print(f"\nGate: {len(table)} cells compared, {base[:8]} -> {head[:8]}")
    print(format_table(table, only_changed=not args.all_rows))
    power = resolution(before, after, args.rounds, thresholds)
    print(format_resolution(power))
    if args.all_rows and not power.empty:
        print(power.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    status, verdict = gate_decision(table, asv_status)
    counts = table.verdict.value_counts().to_dict()
    print(f"\nasv continuous exit status: {asv_status}")
    print(f"{verdict} ({', '.join(f'{n} {v}' for v, n in sorted(counts.items()))})")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
