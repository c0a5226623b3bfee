"""How a call's time depends on the call before it: each strategy against the reference in four orders.

    unfold-bench context [--cells every] [--processes 3] [--placements 2] [--calls 30] [--out docs/call-context.txt]

Every timer fixes an order of calls: ``torch.utils.benchmark`` times a call after itself, the suite's paired ratios
in blocks A B B A. Where a call's time depends on its predecessor, the two read different figures, and neither is
wrong. In fresh processes (``benchmarks.call_context``), per cell and placement of the inputs, the strategy (B) and
the reference (A) are timed in a loop each, alternating, B after an idle pause as long as A's call, and in the
suite's blocks; the table gives B's median time per position, B / A per order with both sides, each as the
geometric mean over every process and placement with its range, and the minor page faults and involuntary context
switches per call of the blocks, both sides' calls together (the median placement's and the most of any).
A check to run by hand, not a test: timings on a shared machine. docs/methodology.md says how to read it.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import textwrap
import time
from collections.abc import Sequence

from benchmarks.allocator import get_regime, regime_environment
from benchmarks.call_context import RATIO_ORDERS
from benchmarks.children import run_json_child
from benchmarks.runner import PAIRED_REFERENCE
from benchmarks.trees import ROOT, head_commit
from impls.plugins import specs as plugin_specs
from unfold_bench.common_args import (
    add_cells,
    add_profile,
    add_regime,
    command_parser,
    output_file,
    parse_cells,
    print_report,
    refuse_unkept_strategies,
    warn_if_busy,
)

WIDTH = 133  # the table's width, which the prose above it wraps to
# B's times: loop, alternating, paused, blocks
POSITIONS = ("B", "B after A", "B after a pause", "blocks B after A", "blocks B after B")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


def b_times(orders: dict) -> dict[str, float]:
    """B's median seconds of one placement per column of ``POSITIONS``."""
    return {
        "B": orders["loop"]["times"]["B"],
        "B after A": orders["alternating"]["times"]["B after A"],
        "B after a pause": orders["paused"]["times"]["B after a pause"],
        "blocks B after A": orders["blocks"]["times"]["B after A"],
        "blocks B after B": orders["blocks"]["times"]["B after B"],
    }


def geometric(values: list[float]) -> str:
    """The geometric mean of ``values`` with their range, to one precision, e.g. ``0.251 (0.223-0.287)``."""
    mean = statistics.geometric_mean(values)
    return f"{mean:.3g} ({min(values):.3g}-{max(values):.3g})"


def table(rows: list[dict], keys: list[str]) -> list[str]:
    """One line per cell: B's median ms per position (the median over placements) and B / A per order."""
    header = f"{'cell':<42}" + "".join(f"{name:>9}" for name in ("loop", "after A", "paused", "1st", "2nd"))
    header += "".join(f"{order:>24}" for order in RATIO_ORDERS) + f"{'faults':>14}{'switches':>14}"
    lines = [header]
    for key in keys:
        mine = [row for row in rows if row["key"] == key]
        problem = next((row["problem"] for row in mine if "problem" in row), None)
        placements = [row["orders"] for row in mine if "orders" in row]
        if problem or not placements:
            lines.append(f"{key:<42} {problem or 'failed: no placement measured'}")
            continue
        times = [b_times(orders) for orders in placements]
        line = f"{key:<42}" + "".join(
            f"{statistics.median(t[position] for t in times) * 1e3:>9.3g}" for position in POSITIONS
        )
        line += "".join(f"{geometric([orders[o]['ratio'] for orders in placements]):>24}" for o in RATIO_ORDERS)
        faults = [orders["blocks"]["faults"] for orders in placements]
        line += f"{f'{statistics.median(faults):.0f} ({max(faults):.0f})':>14}"
        switches = [orders["blocks"]["switches"] for orders in placements]
        line += f"{f'{statistics.median(switches):.1f} ({max(switches):.1f})':>14}"
        lines.append(line)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("context", __doc__)
    add_cells(parser)
    add_profile(parser)
    add_regime(parser)
    parser.add_argument("--processes", type=positive, default=3, help="fresh processes (default 3)")
    parser.add_argument("--placements", type=positive, default=2, help="input placements per process (default 2)")
    parser.add_argument("--calls", type=positive, default=30, help="timed calls per side, order, placement (30)")
    parser.add_argument(
        "--out", type=output_file, help="also write the table to this file (e.g. docs/call-context.txt)"
    )
    arguments = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(arguments)
    refuse_unkept_strategies(parser)
    cells = [cell for cell in parse_cells(args.cells, args.profile, parser) if cell[0] != PAIRED_REFERENCE]
    if not cells:
        parser.error(f"--cells: every cell is the reference ({PAIRED_REFERENCE}); name a strategy to compare")
    regime = get_regime(args.regime)
    env = {**regime_environment(regime), "PYTHONPATH": str(ROOT)}
    keys = [":".join(cell) for cell in cells]
    units = [{"strategy": s, "config": c, "which": w} for s, c, w in cells]
    warn_if_busy()
    rows: list[dict] = []
    for process in range(args.processes):
        spec = {
            "units": units,
            "reference": PAIRED_REFERENCE,
            "placements": args.placements,
            "calls": args.calls,
            "seed": 1000 * process,
            "profile": args.profile,
        }
        found, why = run_json_child([sys.executable, "-m", "benchmarks.call_context", "-"], spec, env, 3600)
        rows += found
        print(f"process {process + 1}/{args.processes}: {len(found)} rows{f'; it {why}' if why else ''}", flush=True)
    from benchmarks.machine import machine_name

    plugins = "".join(f"--strategy {spec} " for spec in plugin_specs())
    lines = [
        f"unfold-bench {plugins}context {shlex.join(arguments)}: machine {machine_name(regime.name)}, commit "
        f"{head_commit()[:8]}, {time.strftime('%Y-%m-%d')}",
        f"{args.profile} profile, CPU, {regime.label}, {args.processes} processes x {args.placements} placements, "
        f"{args.calls} timed calls per side and order",
        "",
        *textwrap.wrap(
            f"A: {PAIRED_REFERENCE}, B: the strategy. B's median ms (the median over the placements) in a loop of "
            "its own calls, alternating with A (each call after A's), after an idle pause as long as A's call "
            "(paused), and in the suite's blocks A B B A (1st: after A, 2nd: after B). Then B / A per order: "
            f"{', '.join(RATIO_ORDERS)} (the suite's statistic), each the "
            "geometric mean over the placements of every process, with their range. Last, the blocks' minor page "
            "faults per call, over A's and B's calls together, for the median placement (and the most of any "
            "placement): a call whose output lands on fresh pages takes one per 4 KiB page, which adds to its time; "
            "then their involuntary context switches per call in the same way: other work that took a CPU",
            WIDTH,
        ),
        "",
        *table(rows, keys),
    ]
    print_report("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
