"""glibc's allocator in benchmark processes: the two timing regimes, and the pinned threshold net peaks need.

glibc ``malloc`` serves a block of at least ``M_MMAP_THRESHOLD`` bytes with a fresh ``mmap`` (its pages fault on
first touch) and a smaller one from its heap (its pages may be resident). The threshold is dynamic, rising to the
size of each freed mmapped block up to 32 MiB, so what a call pays depends on what the process freed before.

Timing regimes (``REGIMES``): ``warm`` (the default), the allocator as a user's process has it; ``fresh-pages``,
the threshold pinned at 128 KiB, so every timed call pays its output's first-touch page faults. Net peaks are
measured with the threshold pinned in either regime (``pin_mmap_threshold_now``), so that they repeat.

No torch import here: this must run before torch allocates anything.

Details: docs/internals.md#benchmarksallocatorpy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass

MMAP_THRESHOLD_VARIABLE = "MALLOC_MMAP_THRESHOLD_"
PINNED_MMAP_THRESHOLD = 128 * 1024  # glibc's initial (and minimum dynamic) value
# A net peak is resolved no finer: a smaller block comes from the heap, whose pages may already be resident (or
# whose growth is counted in whole chunks), so two net peaks, or a net peak and the analytic minimum, that differ
# by less say nothing.
NET_PEAK_RESOLUTION = PINNED_MMAP_THRESHOLD
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
_REEXECUTED = "UNFOLD_BENCH_ALLOCATOR_PINNED"


@dataclass(frozen=True)
class Regime:
    """How the allocator behaves in the processes that time a run."""

    name: str
    label: str  # how charts, tables and recommendations name it
    machine_suffix: str  # appended to the machine name, so two regimes never share a results series
    description: str


WARM = Regime(
    "warm",
    "warm allocator (a user's process)",
    "",
    "glibc's defaults, nothing pinned: each sample's output is freed before the next call, and an output "
    "below glibc's dynamic mmap threshold (up to 32 MiB) comes back from the heap already resident",
)
FRESH_PAGES = Regime(
    "fresh-pages",
    "fresh pages (every output first-touched)",
    "-freshpages",
    f"glibc's mmap threshold pinned at {PINNED_MMAP_THRESHOLD} bytes: every block over 128 KiB is new memory "
    "from the kernel, so every call pays its output's first-touch page faults",
)
REGIMES: dict[str, Regime] = {r.name: r for r in (WARM, FRESH_PAGES)}
DEFAULT_REGIME = WARM.name


def get_regime(name: str) -> Regime:
    """The regime called ``name``; a ``ValueError`` naming the known ones otherwise."""
    try:
        return REGIMES[name]
    except KeyError:
        raise ValueError(f"regime={name!r}: must be one of {', '.join(REGIMES)}") from None


def regime_of_machine(machine: str) -> Regime:
    """The regime whose results are recorded under ``machine`` (its name ends with the regime's suffix)."""
    for regime in REGIMES.values():
        if regime.machine_suffix and machine.endswith(regime.machine_suffix):
            return regime
    return WARM


def mmap_threshold_setting(environ: Mapping[str, str] = os.environ) -> str:
    """How glibc's mmap threshold is set in ``environ``: pinned at N bytes, or dynamic."""
    value = environ.get(MMAP_THRESHOLD_VARIABLE)
    if value is None:
        return "mmap threshold dynamic (128 KiB to 32 MiB, depends on history)"
    return f"mmap threshold pinned at {value} bytes ({MMAP_THRESHOLD_VARIABLE})"


def pinned_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """A copy of ``environ`` with the threshold pinned (a value the user already set is kept)."""
    return {MMAP_THRESHOLD_VARIABLE: str(PINNED_MMAP_THRESHOLD), **environ}


def regime_environment(regime: Regime, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment for the processes that time in ``regime`` (a threshold the user set is kept in both)."""
    environment = {k: v for k, v in environ.items() if k != _REEXECUTED}
    return pinned_environment(environment) if regime is FRESH_PAGES else environment


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library, loaded once (``find_library`` starts a process on Linux: not something to do per call)."""
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def pin_mmap_threshold_now() -> bool:
    """Pin the threshold in this running process (``mallopt``; it also switches the dynamic adjustment off).

    Blocks freed into the heap before the call stay there; the memory benchmarks hand free heap pages back to
    the kernel before they measure (``benchmarks.memory``), so a reuse of such a block is counted as the new
    memory it is. Returns False where the C library has no ``mallopt`` (not glibc).
    """
    c = libc()
    if c is None or not hasattr(c, "mallopt"):
        return False
    return bool(c.mallopt(_M_MMAP_THRESHOLD, PINNED_MMAP_THRESHOLD))


def pin_mmap_threshold(argv: Sequence[str] | None = None) -> None:
    """Re-execute this Python process with the threshold pinned, unless it already started with it set.

    For entry points that time in the fresh-pages regime only (the memory profile).
    Call it first thing, before torch is imported. ``argv``, the arguments after the interpreter, defaults to
    the ones this process was started with (``sys.orig_argv``, so interpreter options and ``-m``/``-c``
    survive; ``sys.argv`` has lost them).
    """
    if MMAP_THRESHOLD_VARIABLE in os.environ:
        return
    if os.environ.get(_REEXECUTED):  # the variable was dropped on the way: do not loop
        raise RuntimeError(f"{MMAP_THRESHOLD_VARIABLE} did not survive re-execution")
    environment = {**pinned_environment(), _REEXECUTED: "1"}
    arguments = list(sys.orig_argv[1:] if argv is None else argv)
    os.execve(sys.executable, [sys.executable, *arguments], environment)


def main(command: Sequence[str], environ: MutableMapping[str, str] = os.environ) -> None:
    """``python -m benchmarks.allocator COMMAND ARGS...``: run COMMAND with the threshold pinned."""
    if not command:
        raise SystemExit("usage: python -m benchmarks.allocator COMMAND [ARGS...]")
    os.execvpe(command[0], list(command), pinned_environment(environ))


if __name__ == "__main__":
    main(sys.argv[1:])
