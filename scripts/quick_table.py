"""Print a correctness-and-timing table of every strategy on every config at a small batch size."""

from __future__ import annotations

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from benchmarks.table import format_table, run_table  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=8, help="cap on every config's batch size (default 8)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--min-run-time", type=float, default=0.2, help="seconds per timing (default 0.2)")
    args = parser.parse_args()
    if args.batch_size < 1:
        parser.error(f"--batch-size {args.batch_size}: must be positive")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device on this machine")
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, device {args.device}, batch size <= {args.batch_size}"
    )
    cells = run_table(args.batch_size, args.device, args.min_run_time)
    print()
    print(format_table(cells))
    bad = [c for c in cells if c.status.startswith(("WRONG", "error"))]
    for c in bad:
        print(f"{c.config} / {c.strategy}: {c.status}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
