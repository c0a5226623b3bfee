"""Instruction counts of one cell under callgrind: the regression gate's deterministic CPU mode.

Wall-clock time on a shared machine moves between runs with where each process landed; the number of
instructions a call executes, counted by valgrind's callgrind through ``torch.utils.benchmark.Timer.
collect_callgrind``, barely moves. It is slow (valgrind runs the interpreter too: minutes per
measurement), so the gate uses it only for the cells it is told to (``unfold-bench regress --callgrind``).

``count_instructions`` measures in a child process whose ``impls`` comes from a given directory (a checkout
of the revision under test) and whose harness comes from this working tree, and checks that it imported
the ``impls`` it was asked to: counting other code than the revision's would make the verdict a lie.
One thread, so that the count does not depend on scheduling.

Run as a script it prints the count of one cell: ``python -m benchmarks.instructions IMPLS_ROOT STRATEGY
CONFIG forward|forward_backward [PROFILE]``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from benchmarks.children import run_json_child
from benchmarks.profiles import DEFAULT_PROFILE
from benchmarks.trees import ROOT, impls_of
from benchmarks.vocabulary import split_cell

CALLS = 5  # calls per measurement; the count is per call


def parse_cell(spec: str) -> tuple[str, str, str]:
    """``STRATEGY:CONFIG:forward|forward_backward`` as (strategy, config, which), checked against the registry
    and the config table so that a misspelt cell fails before minutes of counting; a ``ValueError`` naming
    the spec otherwise."""
    from benchmarks.configs import CONFIGS_BY_NAME
    from impls.registry import STRATEGIES

    strategy, config, which = split_cell(spec)
    for value, known, what in ((strategy, STRATEGIES, "strategy"), (config, CONFIGS_BY_NAME, "config")):
        if value not in known:
            raise ValueError(f"cell {spec!r}: unknown {what} {value!r}; known: {', '.join(known)}")
    return strategy, config, which


def _measure(strategy: str, config: str, which: str, profile: str) -> int:
    import torch
    from torch.utils.benchmark import Timer

    setup = (
        "import torch\n"
        "torch.set_num_threads(1)\n"
        "from benchmarks.cells import Cell, Workload\n"
        "from benchmarks.profiles import get_profile\n"
        f"cell = Cell.from_names({strategy!r}, {config!r}, 'cpu', get_profile({profile!r}))\n"
        f"workload = Workload(cell, backward={which == 'forward_backward'})\n"
        f"workload.{which}()\n"
    )
    torch.set_num_threads(1)
    timer = Timer(stmt=f"workload.{which}()", setup=setup, num_threads=1)
    stats = timer.collect_callgrind(number=CALLS, collect_baseline=False)
    return int(stats.counts(denoise=True) / CALLS)


def count_instructions(impls_root: Path, strategy: str, config: str, which: str, profile: str = DEFAULT_PROFILE) -> int:
    """Instructions per call of ``strategy`` on ``config`` (``which``: forward or forward_backward), with the
    ``impls`` package found in ``impls_root``."""
    with impls_of(impls_root) as shadow:  # only impls from the revision: the harness is this working tree's
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(shadow), str(ROOT)]),
            # torch's callgrind wrapper runs "python" from PATH: make it this interpreter
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
        command = [sys.executable, "-m", "benchmarks.instructions", str(shadow), strategy, config, which, profile]
        rows, why = run_json_child(command, None, env, timeout=3600, cwd=shadow)  # not ROOT: the revision's impls
    if why:
        raise RuntimeError(f"callgrind measurement failed: the measuring process {why}")
    try:
        return int(rows[-1]["instructions"])
    except (IndexError, KeyError, TypeError, ValueError) as error:
        raise RuntimeError(f"callgrind measurement printed no count ({error!r}): {rows}") from None


def main() -> None:
    impls_root, strategy, config, which, *rest = sys.argv[1:]
    import impls

    imported = Path(impls.__file__).resolve().parent
    expected = (Path(impls_root) / "impls").resolve()
    if imported != expected:
        raise SystemExit(f"imported impls from {imported}, not {expected}")
    count = _measure(strategy, config, which, rest[0] if rest else DEFAULT_PROFILE)
    print(json.dumps({"instructions": count}))


if __name__ == "__main__":
    main()
