"""Run the asv suite on this machine and print a summary table: the entry point of `make bench`.

By default: the quick profile, on this machine's devices (CUDA cells are skipped without a GPU), in the
current environment (asv's ``--python=same``: no per-commit builds), results recorded under the current
commit. ``--profile full`` runs the configs' real batch size; ``--thp`` runs with huge pages for PyTorch's
CPU allocations as a separately named machine; ``--commits RANGE`` lets asv build and benchmark each commit
of a git range in its own virtualenv instead.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.allocator import pin_mmap_threshold  # noqa: E402

pin_mmap_threshold()  # before torch allocates: memory and time must not depend on the process's history

from benchmarks.machine import THP_VARIABLE  # noqa: E402
from benchmarks.profiles import PROFILES, benchmark_regex  # noqa: E402


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick", help="problem size (default quick)")
    parser.add_argument("--thp", action="store_true", help=f"run with {THP_VARIABLE}=1 (a separately named machine)")
    parser.add_argument("--machine", help="machine name to record (default: derived from host, CPU, GPU, variant)")
    parser.add_argument("--bench", default="", help="extra regex restricting the benchmarks (asv -b), e.g. conv2")
    parser.add_argument("--commits", help="a git range (e.g. main~3..main) to build and benchmark commit by commit")
    parser.add_argument("--config", default=str(ROOT / "asv.conf.json"), help="asv configuration file")
    args = parser.parse_args()

    if args.thp:
        os.environ[THP_VARIABLE] = "1"  # before torch is imported, here and in every asv subprocess
    from benchmarks.machine import register_machine  # imports torch: after the allocator setting is final

    info = register_machine(args.machine)

    profile = PROFILES[args.profile]
    pattern = benchmark_regex(profile, args.bench)
    command = [
        sys.executable,
        "-m",
        "asv",
        "--config",
        args.config,
        "run",
        "--machine",
        info["machine"],
        "--show-stderr",
        "-b",
        pattern,
    ]
    if args.commits:
        command += [args.commits]
    else:
        commit = _git("rev-parse", "HEAD")
        if _git("status", "--porcelain", "--untracked-files=no"):
            print(f"warning: uncommitted changes; results are recorded under HEAD {commit[:8]} all the same")
        command += ["--python=same", "--set-commit-hash", commit]
    print(f"machine {info['machine']}: {info['device_names']}; torch {info['torch_version']}; {info['allocator']}")
    print("$ " + " ".join(command), flush=True)
    status = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode

    from asv.config import Config

    from reports.summary import print_summary

    results_dir = Path(Config.load(args.config).results_dir)
    from benchmarks.cells import Cell

    def skip_reason(strategy: str, config: str, device: str) -> str | None:
        try:
            return Cell.from_names(strategy, config, device, profile).skip_reason()
        except KeyError:  # a strategy or config that this checkout no longer has
            return None

    print_summary(results_dir, info["machine"], profile.name, None if args.commits else commit, skip_reason)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
