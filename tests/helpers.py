"""Test-side wrapper of ``impls.parity``: assert instead of describe."""

from __future__ import annotations

import torch

from impls.parity import mismatch


def assert_matches_reference(fn, x: torch.Tensor, kwargs: dict, *, backward: bool = True) -> None:
    problem = mismatch(fn, x, kwargs, backward=backward)
    assert problem is None, f"{getattr(fn, 'name', fn)}: {problem}"
