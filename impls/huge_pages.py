"""Transparent huge pages for a fresh result: one page fault per 2 MiB of it instead of one per 4 KiB.

The first touch of a fresh page costs a page fault (the kernel zeroes and maps the page); for a result of many
MiB those faults take most of the time of allocating and writing it. Advised with ``madvise(MADV_HUGEPAGE)``
before its first touch, each aligned 2 MiB of a range is backed by one huge page where the kernel's THP mode is
``madvise`` or ``always``: 512 times fewer faults for the same zeroing.

Only a block of ``RESULT_BYTES`` or more (glibc's largest mmap threshold on 64-bit) is advised, so it is always a
mapping of its own and the advice never reaches heap memory the process reuses; only its 2 MiB-aligned interior is
advised. The advice is a hint, and it can cost (compaction stalls, a VM's free page reporting), so it is a
strategy of its own, ``cpp_huge_pages``, measured beside ``cpp``. ``advise`` is the call for a Python tensor.

Details: docs/internals.md#implshuge_pagespy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from pathlib import Path

import torch

RESULT_BYTES = 32 << 20  # the least size of a result that is advised (the module docstring)
HUGE_PAGE_BYTES = 2 << 20  # x86-64's and arm64's (4 KiB base pages) transparent huge page
_MADV_HUGEPAGE = 14  # <sys/mman.h> on Linux
_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_mode() -> str | None:
    """The kernel's THP mode (``always``, ``madvise`` or ``never``), or None without THP (or off Linux)."""
    try:
        text = _THP_MODE.read_text()
    except OSError:
        return None
    chosen = [word.strip("[]") for word in text.split() if word.startswith("[")]
    return chosen[0] if chosen else None


def interior(address: int, nbytes: int) -> tuple[int, int]:
    """The huge-page-aligned ``[begin, end)`` inside ``[address, address + nbytes)`` (empty when ``end <= begin``)."""
    begin = -(-address // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    end = (address + nbytes) // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
    return begin, end


@functools.cache
def _madvise():
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.madvise.restype = ctypes.c_int
    return libc.madvise


def advise(fresh: torch.Tensor) -> None:
    """Advise the memory of ``fresh`` (a CPU tensor not yet written) into huge pages, if it has ``RESULT_BYTES``
    or more; a hint, so a refusal is ignored."""
    madvise = _madvise()
    nbytes = fresh.untyped_storage().nbytes()
    if madvise is None or fresh.device.type != "cpu" or nbytes < RESULT_BYTES:
        return
    begin, end = interior(fresh.untyped_storage().data_ptr(), nbytes)
    if end > begin:
        madvise(begin, end - begin, _MADV_HUGEPAGE)
