"""asv suite: what compiling costs, for the strategies that compile (``Strategy.compiles``).

``track_compile_seconds`` is the wall time of the first forward-backward call of a fresh process with Dynamo's
state reset and Inductor's caches off (``force_disable_caches``): what a user pays once per shape, dtype and
layout on a machine that never compiled it (Triton's on-disk kernel cache, from which a Triton strategy's
kernels would otherwise be loaded, points at an empty directory). It includes that one call, whose own time the
timed suite measures, so the call's share of the figure can be read there. The timed benchmarks
(``benchmarks.unfold``) make their compiling calls in setup, so their figures are the compiled code alone. Params
are the compiling strategies x the profile's compile-time configs (one in the quick profile, every config in the
full) x devices, identical on every machine; a CUDA cell without a GPU is skipped in setup (``unfold-bench bench``
does not plan it there). The correctness gate is not run here:
a compile time is a cost, not a figure that a wrong answer could flatter, and the timed suite gates the same
cells.
"""

from __future__ import annotations

import os
import tempfile
import time
from unittest import mock

from benchmarks.cells import Cell, Workload, synchronize, use_exact_float32
from benchmarks.profiles import FULL, QUICK, Profile
from benchmarks.vocabulary import DEVICES
from impls import STRATEGIES

COMPILING = [name for name, strategy in STRATEGIES.items() if strategy.compiles]


class _CompileTimeSuite:
    profile: Profile
    params: list[list[str]]
    param_names = ("strategy", "config", "device")
    unit = "seconds"

    def setup(self, strategy: str, config: str, device: str) -> None:
        cell = Cell.from_names(strategy, config, device, self.profile)
        reason = cell.skip_reason()
        if reason is not None:
            raise NotImplementedError(reason)
        use_exact_float32(device)
        self.workload = Workload(cell, backward=True)

    def track_compile_seconds(self, strategy: str, config: str, device: str) -> float:
        import torch._dynamo
        import torch._inductor.config

        torch._dynamo.reset()
        with (
            tempfile.TemporaryDirectory() as empty,
            mock.patch.dict(os.environ, {"TRITON_CACHE_DIR": empty}),  # Triton reads it when it compiles
            torch._inductor.config.patch(force_disable_caches=True),
        ):
            start = time.perf_counter()
            self.workload.forward_backward()
            synchronize(device)
            return time.perf_counter() - start


def _params(profile: Profile) -> list[list[str]]:
    return [COMPILING, profile.compile_time_config_names(), list(DEVICES)]


class Quick(_CompileTimeSuite):
    """Compile time at the quick profile's shapes."""

    profile = QUICK
    params = _params(QUICK)
    rounds, timeout = 1, QUICK.timeout * 5


class Full(_CompileTimeSuite):
    """Compile time at the full profile's shapes."""

    profile = FULL
    params = _params(FULL)
    rounds, timeout = 1, FULL.timeout
