"""What the README's `make bench` costs on a fresh machine: its wall time from a fresh clone, the cost check.

Clones this repository's HEAD (the committed tree: uncommitted changes are not measured) into ``--workdir`` and runs
there, one after another and each timed, what a fresh machine runs: ``make venv cpp`` (the virtual environment,
torch's wheel first and then the project, and the cpp strategy's kernel built) and ``make bench PROFILE=...``,
with Inductor's and the C++ extension's caches in empty folders of the clone. The environment is the caller's less
what would make it another run than the README's (a selection, a plugin strategy, an outer make's flags, another
import path). Nothing else should run meanwhile; it warns where other work keeps the CPUs busy.

It shows each step's output as it comes, then prints the record's head, and with ``--out`` writes the record: its
first line the command, the machine, the commit and the date; then each step's exit status and minutes and their sum,
the cost of the README's ``make bench`` on a fresh clone; then each step's output, in which ``make bench`` gives each
chunk's elapsed time and the benchmarks' minutes. A step that fails ends the run; the record says so and the command
exits with its status.

    unfold-bench cost --out docs/cost-quick-amd.txt
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.trees import ROOT, clone, git
from unfold_bench.common_args import (
    add_profile,
    command_parser,
    output_file,
    output_folder,
    warn_if_busy,
    with_folder_made,
)

# what a fresh machine runs, in order: the set-up (which make bench would otherwise do first), then the README's command
STEPS = (("set-up", ("make", "venv", "cpp")), ("make bench", ("make", "bench")))
# the caches a fresh machine starts without, each an empty folder of the clone
CACHES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "UNFOLD_BENCH_EXTENSIONS_DIR": "extensions"}
# what would make the run another than the README's: an outer make's flags and selection, a plugin strategy, another
# import path or virtual environment
LEFT_OUT = (
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
    "BENCH",
    "UNFOLD_BENCH_SELECTION",
    "UNFOLD_BENCH_STRATEGIES",
    "PYTHONPATH",
    "VIRTUAL_ENV",
)


@dataclass(frozen=True)
class Step:
    """One timed step: its name, the command, its exit status, its wall seconds and its output."""

    name: str
    command: tuple[str, ...]
    status: int
    seconds: float
    output: str


def fresh_environment(clone_dir: Path, environ: dict[str, str]) -> dict[str, str]:
    """``environ`` less ``LEFT_OUT``, with each of ``CACHES`` an empty folder of ``clone_dir`` (made here)."""
    env = {key: value for key, value in environ.items() if key not in LEFT_OUT}
    for variable, folder in CACHES.items():
        path = clone_dir / ".cost-caches" / folder
        path.mkdir(parents=True, exist_ok=True)
        env[variable] = str(path)
    return env


def run_steps(
    clone_dir: Path, profile: str, env: dict[str, str], steps: Sequence[tuple[str, Sequence[str]]] = STEPS
) -> list[Step]:
    """``steps`` in ``clone_dir``, one after another, each timed, ``make``'s with ``PROFILE=profile``; stops after
    the first that fails."""
    done = []
    for name, command in steps:
        command = (*command, f"PROFILE={profile}") if command[0] == "make" else tuple(command)
        start = time.monotonic()
        with subprocess.Popen(
            command, cwd=clone_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process:
            output = []
            for line in process.stdout:  # shown as it comes (make bench's chunks say how far it is) and kept
                print(line, end="", flush=True)
                output.append(line)
        done.append(Step(name, command, process.returncode, time.monotonic() - start, "".join(output)))
        print(f"{name}: exit {process.returncode} in {done[-1].seconds / 60:.1f} min", flush=True)
        if process.returncode != 0:
            break
    return done


def summary(steps: list[Step], provenance: str, planned: int = len(STEPS)) -> str:
    """The record's head: ``provenance``, each step's status and minutes, and their sum where every step finished."""
    lines = [provenance]
    for step in steps:
        lines.append(f"{step.name} ({' '.join(step.command)}): exit {step.status} in {step.seconds / 60:.1f} min")
    total = sum(step.seconds for step in steps) / 60
    if len(steps) == planned and all(step.status == 0 for step in steps):
        lines.append(f"fresh clone to the end of make bench: {total:.1f} min")
    else:
        failed = next((step.name for step in steps if step.status != 0), "a step")
        lines.append(f"stopped: {failed} failed after {total:.1f} min; no cost measured")
    return "\n".join(lines)


def report(steps: list[Step], provenance: str, planned: int = len(STEPS)) -> str:
    """The record: its head (``summary``), then each step's output."""
    lines = [summary(steps, provenance, planned)]
    for step in steps:
        lines += ["", f"## {step.name} ({' '.join(step.command)})", step.output.rstrip()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("cost", __doc__)
    add_profile(parser)
    parser.add_argument(
        "--workdir",
        type=output_folder,
        help="where the clone is made, emptied first (default: a temporary folder, removed afterwards)",
    )
    parser.add_argument("--out", type=output_file, help="also write the record to this file")
    args = parser.parse_args(argv)
    if shutil.which("make") is None:
        parser.error("make: not found on the PATH (the README's commands are make targets)")
    commit = git("rev-parse", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no"):
        print(f"warning: uncommitted changes are not measured; the clone is of HEAD {commit[:8]}", flush=True)
    from benchmarks.machine import machine_name

    command = f"unfold-bench cost --profile {args.profile}"
    provenance = f"{command}: {machine_name()}, commit {commit[:8]}, {time.strftime('%Y-%m-%d')}"
    warn_if_busy()
    with tempfile.TemporaryDirectory(prefix="unfold-bench-cost-") as scratch:
        workdir = Path(args.workdir).absolute() if args.workdir else Path(scratch)
        clone_dir = workdir / "clone"
        shutil.rmtree(clone_dir, ignore_errors=True)
        workdir.mkdir(parents=True, exist_ok=True)
        clone(ROOT, clone_dir)
        git("checkout", "--quiet", "--detach", commit, repo=clone_dir)
        steps = run_steps(clone_dir, args.profile, fresh_environment(clone_dir, dict(os.environ)))
    print(summary(steps, provenance), flush=True)  # the steps' output was shown as it came
    if args.out:
        with_folder_made(args.out).write_text(report(steps, provenance) + "\n")
        print(f"written to {args.out}")
    return next((step.status for step in steps if step.status != 0), 0)
