"""Test-side wrapper of ``impls.parity``: assert instead of describe."""

from __future__ import annotations

import time

import pytest
import torch

from benchmarks.trees import ROOT
from impls.parity import mismatch
from impls.strategy import Strategy

OUTSIDE = ROOT / "tests" / "fixtures" / "outside"  # strategies from outside the project (test fixtures)


def assert_matches_reference(fn, x: torch.Tensor, kwargs: dict, *, backward: bool = True) -> None:
    problem = mismatch(fn, x, kwargs, backward=backward)
    assert problem is None, f"{getattr(fn, 'name', fn)}: {problem}"


def slower_native(factor: float) -> Strategy:
    """native, spinning after each call for ``factor - 1`` times the call's time: ``factor`` times as slow."""
    from impls import STRATEGIES, Geometry

    native = STRATEGIES["native"]

    def slower(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        start = time.perf_counter()
        out = native.implementation(input, geometry)
        end = time.perf_counter()
        end += (factor - 1) * (end - start)
        while time.perf_counter() < end:
            pass
        return out

    return Strategy("s", "native, slowed", (1, 2), ("cpu",), slower)


def skip_unless_supported(strategy: Strategy, spatial_dims: int, device: str) -> None:
    """Skip the test, saying why, when ``strategy`` cannot run ``spatial_dims``-d input on ``device``."""
    reason = strategy.unsupported_reason(spatial_dims, device)
    if reason is not None:
        pytest.skip(reason)


# unfold-bench regress's main on each command line of a JSON list (argv[1]) in one process, printing [status,
# stderr] per line: its checks are argparse's, before any work, so one process serves many refusals.
RUN_REGRESS_MAIN = """
import contextlib, io, json, sys
from unfold_bench.commands.regress import main
for arguments in json.loads(sys.argv[1]):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            status = main(["HEAD", *arguments])
        except SystemExit as exit:
            status = exit.code
    print(json.dumps([status, stderr.getvalue()]), flush=True)
"""
