"""``gather_reuse``: ``gather`` writing into one output buffer kept between calls (``out=`` reuse).

**A call overwrites the previous call's result when both have the same shape, dtype and device**: the
strategy keeps the last output buffer and hands it out again. That is what a caller who unfolds the same
layer every step can do with ``impls.gather.unfold_into(input, geometry, out=buffer)``, and it is labelled
so because it breaks the contract's implicit promise of a fresh tensor. Autograd guards the rest: a
backward through a result that a later call has overwritten raises (``modified inplace``) instead of
computing a gradient from changed values; a backward before the next call is exact.

Why it is in the suite: a fresh output costs more than the unfold on CPU. A large block comes from the
kernel (glibc ``mmap``) and every page faults on first touch, which on the benchmark machines took longer
than copying the data (``bounds.time_fresh_output`` against ``time_fill``). Reuse removes that, and the
benchmarks show ``gather`` and ``gather_reuse`` side by side so a user sees what it buys. Memory: the
benchmarks charge the buffer to the strategy (``Strategy.reuses_output``), so its net peak reads like the
others'. One buffer is kept at a time (a call with another shape replaces it), so memory stays bounded.
"""

from __future__ import annotations

import torch

from impls.gather import unfold_into
from impls.geometry import Geometry
from impls.strategy import Strategy

_buffer: dict[tuple, torch.Tensor] = {}  # at most one entry: the last output buffer


def _reused_output(like: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    key = (geometry.output_shape, like.dtype, like.device)
    if key not in _buffer:
        _buffer.clear()  # drop the old buffer before allocating the new one
        _buffer[key] = like.new_empty(geometry.output_shape)
    return _buffer[key]


def _gather_reuse_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return unfold_into(input, geometry, out=_reused_output(input, geometry))


unfold = Strategy(
    name="gather_reuse",
    description="gather into one cached output buffer: a call OVERWRITES the previous same-shape result",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=_gather_reuse_unfold,
    reuses_output=True,
)
