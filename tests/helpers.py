"""Test-side wrapper of ``impls.parity``: assert instead of describe."""

from __future__ import annotations

import pytest
import torch

from impls.parity import mismatch
from impls.strategy import Strategy


def assert_matches_reference(fn, x: torch.Tensor, kwargs: dict, *, backward: bool = True) -> None:
    problem = mismatch(fn, x, kwargs, backward=backward)
    assert problem is None, f"{getattr(fn, 'name', fn)}: {problem}"


def skip_unless_supported(strategy: Strategy, spatial_dims: int, device: str) -> None:
    """Skip the test, saying why, when ``strategy`` cannot run ``spatial_dims``-d input on ``device``."""
    reason = strategy.unsupported_reason(spatial_dims, device)
    if reason is not None:
        pytest.skip(reason)
