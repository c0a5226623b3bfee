"""glibc's allocator in benchmark processes: the two timing regimes, and the pinned threshold net peaks need.

glibc ``malloc`` serves a block of at least ``M_MMAP_THRESHOLD`` bytes with a fresh ``mmap`` (its pages fault on
first touch) and a smaller one from its heap (its pages may be resident). By default the threshold is dynamic,
rising with each freed mmapped block up to 32 MiB, so what a call pays depends on what the process freed before.

Timing regimes (``REGIMES``): ``warm`` (the default), glibc's thresholds set where that adjustment ends (mmap at
32 MiB, trim at 64 MiB) when a process starts timing (``apply_regime_now``), as a process that has run a while has
them; ``fresh-pages``, the threshold pinned at 128 KiB from the start (or from ``enter_fresh_pages_now`` on, which
also takes the heap's free chunks out of use), so every timed call pays its output's first-touch faults. Net peaks
are measured with the threshold pinned in either regime (``pin_mmap_threshold_now``).

No torch import here (``enter_fresh_pages_now``'s, in a running process, aside): this must run before torch
allocates anything.

Details: docs/internals.md#benchmarksallocatorpy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

MMAP_THRESHOLD_VARIABLE = "MALLOC_MMAP_THRESHOLD_"
TRIM_THRESHOLD_VARIABLE = "MALLOC_TRIM_THRESHOLD_"
PINNED_MMAP_THRESHOLD = 128 * 1024  # glibc's initial (and minimum dynamic) value
# where glibc's dynamic adjustment ends on a 64-bit machine: the mmap threshold at DEFAULT_MMAP_THRESHOLD_MAX and
# the trim threshold at twice it (malloc.c sets both when it frees an mmapped block of that size)
WARM_MMAP_THRESHOLD = 32 * 1024 * 1024
WARM_TRIM_THRESHOLD = 2 * WARM_MMAP_THRESHOLD
DEFAULT_TRIM_THRESHOLD = 128 * 1024  # glibc's, where no regime sets it (the fresh-pages regime's)
# A net peak is resolved no finer: a smaller block comes from the heap, whose pages may already be resident (or
# whose growth is counted in whole chunks), so two net peaks, or a net peak and the analytic minimum, that differ
# by less say nothing.
NET_PEAK_RESOLUTION = PINNED_MMAP_THRESHOLD
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
_REEXECUTED = "UNFOLD_BENCH_ALLOCATOR_PINNED"
# set beside a regime's variables, naming the regime: they are the suite's, not the user's, and another regime
# replaces them
REGIME_VARIABLE = "UNFOLD_BENCH_REGIME"


@dataclass(frozen=True)
class Regime:
    """How the allocator behaves in the processes that time a run."""

    name: str
    label: str  # how charts, tables and recommendations name it
    machine_suffix: str  # appended to the machine name, so two regimes never share a results series
    description: str
    variables: tuple[tuple[str, str], ...]  # glibc's environment variables that make the regime


WARM = Regime(
    "warm",
    "warm allocator (a user's process)",
    "",
    f"glibc's mmap threshold at {WARM_MMAP_THRESHOLD} bytes and trim threshold at {WARM_TRIM_THRESHOLD}, where "
    "its dynamic adjustment ends, set when a process starts timing: each sample's output is freed before the next "
    "call, and an output below 32 MiB comes back from the heap already resident",
    (),  # set with mallopt when timing starts (apply_regime_now), not from the start: a process's heap before
    # then (torch's import, the inputs) is glibc's default, so net peaks pinned later repeat as in a default process
)
FRESH_PAGES = Regime(
    "fresh-pages",
    "fresh pages (every output first-touched)",
    "-freshpages",
    f"glibc's mmap threshold pinned at {PINNED_MMAP_THRESHOLD} bytes: every block over 128 KiB is new memory "
    "from the kernel, so every call pays its output's first-touch page faults",
    ((MMAP_THRESHOLD_VARIABLE, str(PINNED_MMAP_THRESHOLD)),),
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
    """How glibc's mmap threshold (and trim threshold, where set) is set in ``environ``: pinned, or dynamic."""
    value = environ.get(MMAP_THRESHOLD_VARIABLE)
    if value is None and environ.get(REGIME_VARIABLE) == WARM.name:
        return (
            f"mmap threshold set at {WARM_MMAP_THRESHOLD} bytes and trim threshold at {WARM_TRIM_THRESHOLD} bytes "
            "when timing starts (mallopt), dynamic before"
        )
    if value is None:
        return "mmap threshold dynamic (128 KiB to 32 MiB, depends on history)"
    trim = environ.get(TRIM_THRESHOLD_VARIABLE)
    if trim is None:
        return f"mmap threshold pinned at {value} bytes ({MMAP_THRESHOLD_VARIABLE})"
    return (
        f"mmap threshold set at {value} bytes ({MMAP_THRESHOLD_VARIABLE}), trim threshold at {trim} bytes "
        f"({TRIM_THRESHOLD_VARIABLE})"
    )


def users_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``environ`` without what the suite set: a regime's variables (where ``REGIME_VARIABLE`` names the regime and
    they still hold its values) and the re-execution marker. A value the user set stays."""
    regime = REGIMES.get(environ.get(REGIME_VARIABLE, ""))
    ours = {_REEXECUTED, REGIME_VARIABLE}
    if regime is not None:
        ours |= {name for name, value in regime.variables if environ.get(name) == value}
    return {k: v for k, v in environ.items() if k not in ours}


def regime_environment(regime: Regime, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment for the processes that time in ``regime``: its variables, except where the user set one
    (the user's value is kept), and ``REGIME_VARIABLE``; another regime's variables in ``environ`` are dropped."""
    environment = users_environment(environ)
    return {**dict(regime.variables), **environment, REGIME_VARIABLE: regime.name}


def pinned_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of a process whose threshold is pinned from its start (the fresh-pages regime's)."""
    return regime_environment(FRESH_PAGES, environ)


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library, loaded once (``find_library`` starts a process on Linux: not something to do per call)."""
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


_M_TRIM_THRESHOLD = -1  # mallopt's parameter number (malloc.h)
_applied: list[str] = []  # the regime this process has applied, once


def _mallopt(parameter: int, value: int) -> bool:
    """glibc's ``mallopt(parameter, value)`` in this process; False where the C library has none (not glibc)."""
    c = libc()
    return c is not None and hasattr(c, "mallopt") and bool(c.mallopt(parameter, value))


def sets_warm_thresholds(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``apply_regime_now`` sets the warm regime's thresholds when next called in this process: it was started
    in the warm regime (``REGIME_VARIABLE``), without a ``MALLOC_MMAP_THRESHOLD_`` of the user's (which stays), and
    has not had them set yet. Then they replace a pin made before (``pin_mmap_threshold_now``)."""
    return not _applied and environ.get(REGIME_VARIABLE) == WARM.name and MMAP_THRESHOLD_VARIABLE not in environ


def apply_regime_now(environ: Mapping[str, str] = os.environ) -> bool:
    """Set glibc's thresholds as the regime this process was started in (``REGIME_VARIABLE``) times with: for the warm
    regime, mmap at 32 MiB and trim at 64 MiB (``mallopt``; it also switches the dynamic adjustment off). Call it
    where timing starts, before the timed inputs and outputs are allocated; once per process, cheap after. Returns
    whether it set them now (``sets_warm_thresholds``): another regime is set from the start."""
    if not sets_warm_thresholds(environ):
        return False  # applied; another regime (set from the start); or the user's own threshold
    _mallopt(_M_MMAP_THRESHOLD, WARM_MMAP_THRESHOLD)
    _mallopt(_M_TRIM_THRESHOLD, WARM_TRIM_THRESHOLD)
    _applied.append(WARM.name)
    return True


def pin_mmap_threshold_now() -> bool:
    """Pin the threshold in this running process (``mallopt``; it also switches the dynamic adjustment off).

    Blocks freed into the heap before the call stay there; the memory benchmarks hand free heap pages back to
    the kernel before they measure (``benchmarks.memory``), so a reuse of such a block is counted as the new
    memory it is. Returns False where the C library has no ``mallopt`` (not glibc).
    """
    return _mallopt(_M_MMAP_THRESHOLD, PINNED_MMAP_THRESHOLD)


# glibc's struct mallinfo2 (size_t fields) and, before glibc 2.33, struct mallinfo (int fields), in order (malloc.h)
_MALLINFO_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
_held_chunks: list[int] = []  # free heap chunks taken for good (enter_fresh_pages_now)


def _mallinfo() -> Callable[[], ctypes.Structure] | None:
    """glibc's ``mallinfo2`` (or ``mallinfo`` before glibc 2.33): the main arena's counts now (``hblks``: blocks
    served from ``mmap``; ``fordblks``: free bytes); None where the C library has neither."""
    c = libc()
    for name, field in (("mallinfo2", ctypes.c_size_t), ("mallinfo", ctypes.c_int)):
        if c is not None and hasattr(c, name):
            fields = [(part, field) for part in _MALLINFO_FIELDS]
            return ctypes.CFUNCTYPE(type(name, (ctypes.Structure,), {"_fields_": fields}))((name, c))
    return None


def _take_free_heap_chunks() -> None:
    """Take, and keep for good, every free heap chunk that could serve a block over the pinned threshold: blocks of
    the threshold's size are taken while glibc serves them from the heap (its count of mmapped blocks stays), and the
    first it serves from ``mmap`` is freed. Their pages, handed back to the kernel before, stay untouched. At most
    the free bytes' worth are taken: where ``mmap`` is off (``MALLOC_MMAP_MAX_=0``) every block grows the heap."""
    c, mallinfo = libc(), _mallinfo()
    if c is None or mallinfo is None:
        return
    malloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)(("malloc", c))
    free = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(("free", c))
    for _ in range(mallinfo().fordblks // PINNED_MMAP_THRESHOLD + 1):
        before = mallinfo().hblks
        block = malloc(PINNED_MMAP_THRESHOLD)
        if not block:
            return
        if mallinfo().hblks > before:
            free(block)
            return
        _held_chunks.append(block)


def enter_fresh_pages_now() -> bool:
    """Time in the fresh-pages regime from here on in a running process, as one started in it would: the mmap
    threshold pinned, the trim threshold at glibc's default (the warm regime raises it), the free heap handed back
    to the kernel (``benchmarks.memory.release_free_heap``) and its free chunks over the threshold taken for good.
    glibc serves a block from a free heap chunk large enough before it considers ``mmap``, whatever the threshold,
    and the warm regime leaves such chunks (its outputs, freed, at the heap's top or below blocks still in use):
    left there, they would serve every output from resident pages after the first. Returns False where the C
    library has no ``mallopt`` (not glibc). Unlike a process started in the regime, it pins over a user's own
    thresholds."""
    from benchmarks.memory import release_free_heap  # imports torch: a running process has it already

    if not pin_mmap_threshold_now():
        return False
    _mallopt(_M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
    release_free_heap()
    _take_free_heap_chunks()
    return True


def pin_mmap_threshold(argv: Sequence[str] | None = None) -> None:
    """Re-execute this Python process with the threshold pinned, unless it already started with it set.

    For entry points that time in the fresh-pages regime only (the memory profile).
    Call it first thing, before torch is imported. ``argv``, the arguments after the interpreter, defaults to
    the ones this process was started with (``sys.orig_argv``, so interpreter options and ``-m``/``-c``
    survive; ``sys.argv`` has lost them).
    """
    if os.environ.get(MMAP_THRESHOLD_VARIABLE) == pinned_environment()[MMAP_THRESHOLD_VARIABLE]:
        return  # started pinned (or with the user's own threshold)
    if os.environ.get(_REEXECUTED):  # the variable was dropped on the way: do not loop
        raise RuntimeError(f"{MMAP_THRESHOLD_VARIABLE} did not survive re-execution")
    environment = {**pinned_environment(), _REEXECUTED: "1"}
    arguments = list(sys.orig_argv[1:] if argv is None else argv)
    os.execve(sys.executable, [sys.executable, *arguments], environment)


def main(arguments: Sequence[str], environ: MutableMapping[str, str] = os.environ) -> None:
    """``python -m benchmarks.allocator [--regime NAME] COMMAND ARGS...``: run COMMAND in a regime's environment
    (``regime_environment``; default the fresh-pages regime, whose threshold is pinned from the start)."""
    arguments = list(arguments)
    regime = FRESH_PAGES
    if arguments[:1] == ["--regime"]:
        if len(arguments) < 2:
            raise SystemExit("--regime: expected a regime's name")
        try:
            regime = get_regime(arguments[1])
        except ValueError as error:
            raise SystemExit(str(error)) from None
        arguments = arguments[2:]
    if not arguments:
        raise SystemExit("usage: python -m benchmarks.allocator [--regime NAME] COMMAND [ARGS...]")
    os.execvpe(arguments[0], arguments, regime_environment(regime, environ))


if __name__ == "__main__":
    main(sys.argv[1:])
