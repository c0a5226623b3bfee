"""What the README's `make bench` costs from a fresh clone: its set-up and run timed, the cost check.

Clones this repository's HEAD (the committed tree: uncommitted changes are not measured) into ``--workdir`` and runs
there, one after another and each timed, what a fresh machine runs: ``make venv cpp`` (the virtual environment,
torch's wheel first and then the project, and the cpp strategy's kernel built) and ``make bench PROFILE=...``. The
compile caches (``impls.toolchain.COMPILE_CACHE_VARIABLES``) are empty folders beside the clone; pip's and uv's
package caches are this machine's, as they are. A variable that would make the run another than the README's (a
selection, a regime, a plugin strategy) is refused; those that name the machine (threads, huge pages, host) stay, and
its name says so. Nothing else should run meanwhile; it warns where other work keeps the CPUs busy.

It shows each step's output as it comes, then prints the record's head, and with ``--out`` writes the record: its
first line the command, the machine, the commit and the date; then each step's exit status and minutes and, where
``make bench`` ran, the sum: the cost of the README's ``make bench`` on a fresh clone; then each step's output.
Exits 0, or the first failing step's status (make's own: 2 for any failure in its recipe).

    unfold-bench cost --out docs/cost-quick-amd.txt
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.allocator import MMAP_THRESHOLD_VARIABLE, REGIME_VARIABLE, TRIM_THRESHOLD_VARIABLE
from benchmarks.cells import GATE_CACHE_VARIABLE
from benchmarks.paired import OUTSIDE_VARIABLE
from benchmarks.process_guard import run_guarded
from benchmarks.runner import SELECTION_VARIABLE
from benchmarks.trees import ROOT, clone, git
from impls.plugins import VARIABLE as PLUGIN_VARIABLE
from impls.toolchain import COMPILE_CACHE_VARIABLES
from unfold_bench.common_args import (
    add_profile,
    command_parser,
    output_file,
    output_folder,
    warn_if_busy,
    with_folder_made,
)

SETUP, BENCH = "set-up", "make bench"
# what a fresh machine runs, in order: the set-up (which make bench would otherwise do first), then the README's command
STEPS = ((SETUP, ("make", "venv", "cpp")), (BENCH, ("make", "bench")))
# the Makefile's variables that make another run than the README's, and a plugin strategy: refused where set
REFUSED = ("BENCH", "REGIME", "THP", "RESUME", "RATIO_PROCESSES", "TORCH_SPEC", "VENV", "PYTHON", PLUGIN_VARIABLE)
UNSET = ("", "0")  # a flag of the Makefile's given as 0 is unset
# what a caller's shell or an outer make would carry into the clone's run: left out
LEFT_OUT = (
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    SELECTION_VARIABLE,
    GATE_CACHE_VARIABLE,
    OUTSIDE_VARIABLE,
    REGIME_VARIABLE,
    MMAP_THRESHOLD_VARIABLE,
    TRIM_THRESHOLD_VARIABLE,
)


@dataclass(frozen=True)
class TimedStep:
    """One step as it ran: its name, the command, its exit status, its wall seconds and its output."""

    name: str
    command: tuple[str, ...]
    status: int
    seconds: float
    output: str


def refused_variables(environ: Mapping[str, str]) -> list[str]:
    """``NAME=value`` of each of ``REFUSED`` set in ``environ`` (but to ``UNSET``)."""
    return [f"{name}={environ[name]}" for name in REFUSED if environ.get(name, "") not in UNSET]


def fresh_environment(caches: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` less ``LEFT_OUT`` and ``REFUSED``, with each compile cache an empty folder of ``caches`` (made)."""
    env = {key: value for key, value in environ.items() if key not in (*LEFT_OUT, *REFUSED)}
    for variable in COMPILE_CACHE_VARIABLES:
        path = caches / variable.lower()
        path.mkdir(parents=True, exist_ok=True)
        env[variable] = str(path)
    return env


def run_shown(command: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[int, str]:
    """``command``'s exit status (128 + n where signal n ended it) and output, which is shown as it comes; run so that
    no process of it outlives this one (``benchmarks.process_guard``)."""
    read_end, write_end = os.pipe()
    lines: list[bytes] = []

    def show() -> None:
        with os.fdopen(read_end, "rb") as output:
            for line in output:
                sys.stdout.write(line.decode(errors="replace"))
                sys.stdout.flush()
                lines.append(line)

    shower = threading.Thread(target=show, daemon=True)
    shower.start()
    with os.fdopen(write_end, "wb") as output:
        status = run_guarded(list(command), env, cwd, output)
    shower.join()
    return (128 - status if status < 0 else status), b"".join(lines).decode(errors="replace")


def run_steps(
    clone_dir: Path, profile: str, env: Mapping[str, str], steps: Sequence[tuple[str, Sequence[str]]] = STEPS
) -> list[TimedStep]:
    """``steps`` in ``clone_dir``, one after another, each timed, ``make``'s with ``PROFILE=profile``; stops after the
    first that fails."""
    done: list[TimedStep] = []
    for name, command in steps:
        if done and done[-1].status != 0:
            break
        command = (*command, f"PROFILE={profile}") if command[0] == "make" else tuple(command)
        start = time.monotonic()
        status, output = run_shown(command, env, clone_dir)
        done.append(TimedStep(name, command, status, time.monotonic() - start, output))
        print(f"{name}: exit {status} in {done[-1].seconds / 60:.1f} min", flush=True)
    return done


def summary(steps: list[TimedStep], provenance: str) -> str:
    """The record's head: ``provenance``, each step's status and minutes, and their sum where ``make bench`` ran."""
    lines = [provenance]
    for step in steps:
        lines.append(f"{step.name} ({' '.join(step.command)}): exit {step.status} in {step.seconds / 60:.1f} min")
    total = sum(step.seconds for step in steps) / 60
    if steps and steps[-1].name == BENCH and all(step.status == 0 for step in steps[:-1]):
        failed = "" if steps[-1].status == 0 else f" (make bench exited {steps[-1].status}: see its output)"
        lines.append(f"fresh clone to the end of make bench: {total:.1f} min{failed}")
    else:
        failed = next((step.name for step in steps if step.status != 0), "a step")
        lines.append(f"stopped: {failed} failed after {total:.1f} min; make bench did not run, no cost measured")
    return "\n".join(lines)


def report(steps: list[TimedStep], provenance: str) -> str:
    """The record: its head (``summary``), then each step's output."""
    lines = [summary(steps, provenance)]
    for step in steps:
        lines += ["", f"## {step.name} ({' '.join(step.command)})", step.output.rstrip()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("cost", __doc__)
    add_profile(parser)
    parser.add_argument(
        "--workdir",
        type=output_folder,
        help="where the clone and its empty caches are made and kept, a new or empty folder (default: a temporary "
        "folder, removed afterwards)",
    )
    parser.add_argument("--out", type=output_file, help="also write the record to this file")
    args = parser.parse_args(argv)
    if args.workdir and Path(args.workdir).is_dir() and any(Path(args.workdir).iterdir()):
        parser.error(f"--workdir {args.workdir}: not empty (the clone is made in a new or empty folder)")
    refused = refused_variables(os.environ)
    if refused:
        parser.error(
            f"{', '.join(refused)}: the cost check measures the README's make bench (every cell, the registry's "
            "strategies, the default regime and set-up); unset them"
        )
    commit = git("rev-parse", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no"):
        print(f"warning: uncommitted changes are not measured; the clone is of HEAD {commit[:8]}", flush=True)
    from benchmarks.machine import machine_name

    provenance = f"unfold-bench cost --profile {args.profile}: {machine_name()}, commit {commit[:8]}, "
    provenance += time.strftime("%Y-%m-%d")
    warn_if_busy()
    with tempfile.TemporaryDirectory(prefix="unfold-bench-cost-") as scratch:
        workdir = Path(args.workdir).absolute() if args.workdir else Path(scratch)
        clone(ROOT, workdir / "clone")
        git("checkout", "--quiet", "--detach", commit, repo=workdir / "clone")
        env = fresh_environment(workdir / "caches", os.environ)
        steps = run_steps(workdir / "clone", args.profile, env)
    print(summary(steps, provenance), flush=True)  # the steps' output was shown as it came
    if args.workdir:
        print(f"the clone, its environment and its results stay in {workdir}")
    if args.out:
        with_folder_made(args.out).write_text(report(steps, provenance) + "\n")
        print(f"written to {args.out}")
    return next((step.status for step in steps if step.status != 0), 0)
