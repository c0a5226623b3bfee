"""Pin glibc's mmap threshold for every benchmark process, so that memory and time do not depend on history.

glibc ``malloc`` serves a block of at least ``M_MMAP_THRESHOLD`` bytes (128 KiB at start) with a fresh
``mmap``, whose pages fault on first touch, and a smaller one from its heap, whose pages may already be
resident. The threshold is *dynamic*: each time an mmapped block is freed it rises to that block's size,
up to 32 MiB. So whether a 20 MiB unfold output, or a backward's temporary, costs fresh pages depends on
what the process freed before. Measured on ``tiling``, ``allcnnc-conv2``, quick profile, four calls in one
process: forward-backward net peak 211, 231, 248, 242 MiB; the same with the threshold pinned: 118, 117,
117, 117 MiB. It also changed which cells page-fault, so the quick profile's times were noisy and did not
scale to the full profile (whose outputs, above 32 MiB, always come from ``mmap``).

Setting ``MALLOC_MMAP_THRESHOLD_`` in the environment pins the threshold when a process starts (it also
switches the dynamic adjustment off); ``mallopt`` later, once the heap holds freed blocks, does not undo
their reuse. The entry points (``scripts/bench.py``, ``scripts/regress.py``, ``scripts/memory_profile.py``)
therefore re-execute themselves with it set, and asv's benchmark processes inherit it;
``python -m benchmarks.allocator COMMAND...`` runs any other command (``make bench-pytest``) under it. The
pinned value is glibc's own starting value, 128 KiB, so every large block is fresh memory from the kernel,
as on a first call: the figures include first-touch page faults rather than hide them. A value already set
by the user is respected and recorded (``benchmarks.machine.allocator_setting``).

No torch import here: this must run before torch allocates anything.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence

MMAP_THRESHOLD_VARIABLE = "MALLOC_MMAP_THRESHOLD_"
PINNED_MMAP_THRESHOLD = 128 * 1024  # glibc's initial (and minimum dynamic) value
_REEXECUTED = "UNFOLD_BENCH_ALLOCATOR_PINNED"


def mmap_threshold_setting(environ: MutableMapping[str, str] = os.environ) -> str:
    """How glibc's mmap threshold is set in ``environ``: pinned at N bytes, or dynamic."""
    value = environ.get(MMAP_THRESHOLD_VARIABLE)
    if value is None:
        return "mmap threshold dynamic (128 KiB to 32 MiB, depends on history)"
    return f"mmap threshold pinned at {value} bytes ({MMAP_THRESHOLD_VARIABLE})"


def pinned_environment(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """A copy of ``environ`` with the threshold pinned (a value the user already set is kept)."""
    return {MMAP_THRESHOLD_VARIABLE: str(PINNED_MMAP_THRESHOLD), **environ}


def pin_mmap_threshold(argv: Sequence[str] | None = None) -> None:
    """Re-execute this Python process with the threshold pinned, unless it already started with it set.

    Call it first thing in an entry point, before torch is imported. ``argv``, the arguments after the
    interpreter, defaults to the ones this process was started with (``sys.orig_argv``, so interpreter
    options and ``-m``/``-c`` survive; ``sys.argv`` has lost them).
    """
    if MMAP_THRESHOLD_VARIABLE in os.environ:
        return
    if os.environ.get(_REEXECUTED):  # the variable was dropped on the way: do not loop
        raise RuntimeError(f"{MMAP_THRESHOLD_VARIABLE} did not survive re-execution")
    environment = {**pinned_environment(), _REEXECUTED: "1"}
    arguments = list(sys.orig_argv[1:] if argv is None else argv)
    os.execve(sys.executable, [sys.executable, *arguments], environment)


def main(command: Sequence[str]) -> None:
    """``python -m benchmarks.allocator COMMAND ARGS...``: run COMMAND with the threshold pinned."""
    if not command:
        raise SystemExit("usage: python -m benchmarks.allocator COMMAND [ARGS...]")
    os.execvpe(command[0], list(command), pinned_environment())


if __name__ == "__main__":
    main(sys.argv[1:])
