"""Net peak memory of one call: the most memory in use during the call minus what was in use before it.

asv's ``peakmem_*`` is the whole process's maximum resident set size, interpreter, torch and inputs
included, so a call's own allocations are lost in that baseline. The suite reports this net figure instead.

CPU: the kernel's resident-set high-water mark (``VmHWM`` in ``/proc/self/status``) is reset to the current
resident set by writing ``5`` to ``/proc/self/clear_refs`` (Linux >= 4.0). Before the reset, garbage is
collected and glibc is asked to return free heap pages to the kernel (``malloc_trim``), so that memory freed
by earlier work is not silently reused and under-counted. The figure is ``VmHWM`` after the call minus
``VmRSS`` before it: every page the call touched, including its outputs and autograd buffers, that was not
resident before. Pages of shared libraries touched for the first time also count, which is why the harness
makes one untimed warm-up call first. The counters are read through file descriptors opened once, into one
buffer allocated once, with patterns compiled once, so that reading them touches no new page of its own: a
page touched by the reading itself would count in the figure on some calls and not on others.

CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus ``memory_allocated``
before the call: bytes handed out by PyTorch's caching allocator (not the cache's reserved memory).
"""

from __future__ import annotations

import functools
import gc
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.allocator import libc

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_FIELDS = {field: re.compile(rf"^{field}:\s+(\d+) kB".encode(), re.MULTILINE) for field in ("VmRSS", "VmHWM")}


class _ProcCounters:
    """This process's resident-set counters, read and reset without allocating: ``/proc/self/status`` is read
    into a buffer made once, and ``/proc/self/clear_refs`` is written through a descriptor opened once."""

    def __init__(self) -> None:
        self._status = os.open(_STATUS, os.O_RDONLY | os.O_CLOEXEC)
        self._clear_refs = os.open(_CLEAR_REFS, os.O_WRONLY | os.O_CLOEXEC)
        self._buffer = bytearray(64 * 1024)
        self._view = memoryview(self._buffer)

    def kib(self, field: str) -> int:
        """The value of ``field`` ("VmRSS" or "VmHWM") in KiB."""
        size = os.preadv(self._status, [self._buffer], 0)
        match = _FIELDS[field].search(self._view[:size])
        if match is None:
            raise RuntimeError(f"{_STATUS} has no {field} line")
        return int(match.group(1))

    def reset_high_water_mark(self) -> None:
        """Set ``VmHWM`` to the current ``VmRSS``."""
        os.pwrite(self._clear_refs, b"5", 0)


@functools.cache
def _proc_counters() -> _ProcCounters:
    return _ProcCounters()


def cpu_peak_supported() -> str | None:
    """Why net CPU peak memory cannot be measured here (not Linux, or no resettable high-water mark), or None."""
    if not _STATUS.exists() or not _CLEAR_REFS.exists():
        return "net CPU peak memory needs Linux's /proc/self/status and /proc/self/clear_refs"
    return None


def release_free_heap() -> None:
    """Collect garbage and hand glibc's free heap pages back to the kernel, so RSS counts live memory only."""
    gc.collect()
    c = libc()
    if c is not None and hasattr(c, "malloc_trim"):  # glibc; other C libraries return memory on their own terms
        c.malloc_trim(0)


def net_peak_bytes(call: Callable[[], Any], device: str) -> int:
    """Run ``call()`` once and return its net peak memory in bytes on ``device`` ("cpu" or "cuda").

    The call's return value is kept alive until the peak is read, as a caller holding the result would.
    """
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        gc.collect()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        result = call()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        del result
        return peak
    reason = cpu_peak_supported()
    if reason is not None:
        raise NotImplementedError(reason)
    counters = _proc_counters()
    release_free_heap()
    before_kib = counters.kib("VmRSS")
    counters.reset_high_water_mark()
    result = call()
    peak_kib = counters.kib("VmHWM")
    del result
    return (peak_kib - before_kib) * 1024
