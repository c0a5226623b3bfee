"""Net peak memory of one call: the most memory in use during the call minus what was in use before it.

asv's ``peakmem_*`` is the whole process's maximum resident set size, interpreter, torch and inputs
included, so a call's own allocations are lost in that baseline. The suite reports this net figure instead.

CPU: the kernel's resident-set high-water mark (``VmHWM`` in ``/proc/self/status``) is reset to the current
resident set by writing ``5`` to ``/proc/self/clear_refs`` (Linux >= 4.0). Before the reset, garbage is
collected and glibc is asked to return free heap pages to the kernel (``malloc_trim``), so that memory freed
by earlier work is not silently reused and under-counted. The figure is ``VmHWM`` after the call minus
``VmRSS`` before it: every page the call touched, including its outputs and autograd buffers, that was not
resident before. Pages of shared libraries touched for the first time also count, which is why the harness
makes one untimed warm-up call first.

CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus ``memory_allocated``
before the call: bytes handed out by PyTorch's caching allocator (not the cache's reserved memory).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{_STATUS} has no {field} line")
    return int(match.group(1))


def cpu_peak_supported() -> str | None:
    """Why net CPU peak memory cannot be measured here (not Linux, or no resettable high-water mark), or None."""
    if not _STATUS.exists() or not _CLEAR_REFS.exists():
        return "net CPU peak memory needs Linux's /proc/self/status and /proc/self/clear_refs"
    return None


def release_free_heap() -> None:
    """Collect garbage and hand glibc's free heap pages back to the kernel, so RSS counts live memory only."""
    gc.collect()
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    libc = ctypes.CDLL(libc_name)
    if hasattr(libc, "malloc_trim"):  # glibc; other C libraries return memory on their own terms
        libc.malloc_trim(0)


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
    release_free_heap()
    before_kib = _status_kib("VmRSS")
    _CLEAR_REFS.write_text("5")
    result = call()
    peak_kib = _status_kib("VmHWM")
    del result
    return (peak_kib - before_kib) * 1024
