"""Writing an unfold into a buffer the caller keeps: the ``out=`` check and the one-buffer cache that the
``*_reuse`` strategies share.

Why reuse at all: on CPU a fresh output can cost more than the unfold. A large block comes from the kernel
(glibc ``mmap``) and every page faults on first touch, which costs more than writing the same bytes into
resident memory (the benchmarks measure both: ``bounds.time_fresh_output`` against ``time_fill``). A caller
who unfolds the same layer every step can keep the output and overwrite it.

What it costs: **a call overwrites the previous call's result of the same shape, dtype and device**, so a
reusing strategy is a labelled variant (``Strategy.reuses_output``), never a drop-in: the reports never
recommend it, and the memory benchmarks charge it the buffer it keeps. Autograd guards the rest: the
forward writes into the buffer as an in-place operation autograd sees, so a backward through a result a
later call has overwritten raises (``modified inplace``) instead of using changed values.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from impls.adjoint_pair import traced_or_transformed
from impls.geometry import Geometry


def check_out(out: torch.Tensor, input: torch.Tensor, geometry: Geometry) -> None:
    """Raise ``ValueError`` naming ``out``'s shape, dtype, device and layout unless it can hold the unfold of
    ``input``: contiguous, ``geometry.output_shape``, the input's dtype and device, not requiring grad."""
    expected = (tuple(geometry.output_shape), input.dtype, input.device)
    if (tuple(out.shape), out.dtype, out.device) != expected or not out.is_contiguous():
        raise ValueError(
            f"out (shape {tuple(out.shape)}, {out.dtype}, {out.device}, contiguous={out.is_contiguous()}) "
            f"must be a contiguous {expected[1]} tensor of shape {expected[0]} on {expected[2]}"
        )
    if out.requires_grad:
        raise ValueError("out must not require grad: it is overwritten")


def _transformed(like: torch.Tensor) -> bool:
    """Whether ``like`` is seen through a ``torch.func`` transform or a ``torch.compile`` trace (or is a wrapper
    that outlived its transform)."""
    return traced_or_transformed() or torch._C._functorch.is_functorch_wrapped_tensor(like)


class OutputCache:
    """At most one output buffer, handed out again for every call of the same shape, dtype and device.

    A call with another key drops the old buffer before allocating the new one, so memory stays bounded by
    one output. Inside a ``torch.func`` transform or a ``torch.compile`` trace the call gets a fresh buffer and
    the cache is left alone: there ``like`` is a wrapper or a fake tensor without storage of its own, which,
    kept, would outlive the transform and break the next call (a graph input needs a data pointer).
    """

    def __init__(self) -> None:
        self._buffer: dict[tuple, torch.Tensor] = {}

    def get(self, like: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        if _transformed(like):
            return like.new_empty(geometry.output_shape)
        key = (tuple(geometry.output_shape), like.dtype, like.device)
        if key not in self._buffer:
            self._buffer.clear()
            self._buffer[key] = like.new_empty(geometry.output_shape)
        return self._buffer[key]


class KeptBufferUnfold:
    """A reusing strategy's implementation: ``unfold_into(input, geometry, out=buffer)`` with the one buffer of
    an ``OutputCache`` of its own (allocated by the first call of a shape).

    A class, not a closure, so that a strategy pickles (the correctness gate sends cells to a child process): it
    pickles as ``unfold_into`` alone, and the copy starts with an empty cache of its own."""

    def __init__(self, unfold_into: Callable[..., torch.Tensor]) -> None:
        self.unfold_into = unfold_into
        self.outputs = OutputCache()

    def __call__(self, input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        return self.unfold_into(input, geometry, out=self.outputs.get(input, geometry))

    def __reduce__(self) -> tuple:
        return (KeptBufferUnfold, (self.unfold_into,))
