"""The cpp strategy's build: its parallel regions run on torch's OpenMP threads, from torch's one OpenMP runtime
(its parity is checked with every other strategy's, in the parity tests)."""

from __future__ import annotations

import os

import pytest
import torch

from impls import cpp

pytestmark = pytest.mark.skipif(cpp.MISSING_REQUIREMENT is not None, reason=f"cpp needs {cpp.MISSING_REQUIREMENT}")


@pytest.mark.skipif(not torch.backends.openmp.is_available(), reason="this torch build has no OpenMP")
def test_the_kernels_run_on_torchs_threads():
    # at::parallel_for is a header template: compiled without OpenMP it runs every plane on one thread
    saved = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            assert cpp.ops().parallel_threads() == threads
    finally:
        torch.set_num_threads(saved)


@pytest.mark.skipif(not torch.backends.openmp.is_available(), reason="this torch build has no OpenMP")
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_one_openmp_runtime_is_loaded():
    # the extension links libgomp.so.1 by name, which is torch's own copy once torch is imported: one thread pool
    cpp.ops()
    with open("/proc/self/maps") as maps:
        runtimes = {line.split()[-1] for line in maps if "gomp" in line.rsplit("/", 1)[-1]}
    assert len(runtimes) <= 1, runtimes
