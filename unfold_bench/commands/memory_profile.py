"""Show where one strategy's memory goes on one config: memory_profiler's line-by-line increments and timeline.

Example: ``unfold-bench memprofile as_strided allcnnc-conv2 --profile full``
(or ``make memprofile STRATEGY=as_strided CONFIG=allcnnc-conv2 PROFILE=full``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from benchmarks.allocator import pin_mmap_threshold
from unfold_bench.common_args import command_parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    # re-executes this command, not the process's own command line, pinned (unless it started so): before torch
    # allocates anything
    pin_mmap_threshold(["-m", __spec__.name, *arguments])
    from benchmarks.cells import Cell
    from benchmarks.configs import CONFIGS_BY_NAME
    from benchmarks.memory_timeline import profile_cell
    from benchmarks.profiles import PROFILES
    from impls import STRATEGIES
    from unfold_bench.common_args import add_device, add_profile, finite_float

    parser = command_parser("memprofile", __doc__)
    parser.add_argument(
        "strategy", metavar="STRATEGY", choices=list(STRATEGIES), help=f"one of: {', '.join(STRATEGIES)}"
    )
    parser.add_argument(
        "config", metavar="CONFIG", choices=list(CONFIGS_BY_NAME), help=f"one of: {', '.join(CONFIGS_BY_NAME)}"
    )
    add_profile(parser)
    add_device(parser, ("cpu",), why="memory_profiler measures host memory")
    parser.add_argument(
        "--interval", type=finite_float, default=0.005, help="timeline sampling interval in seconds (%(default)g)"
    )
    args = parser.parse_args(arguments)
    if args.interval <= 0:
        parser.error(f"--interval {args.interval}: must be positive")
    cell = Cell.from_names(args.strategy, args.config, args.device, PROFILES[args.profile])
    reason = cell.skip_reason()
    if reason is not None:
        parser.error(reason)
    print(profile_cell(cell, args.interval))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
