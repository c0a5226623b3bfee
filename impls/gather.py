"""``gather``: K slot copies forward, and a backward of its own that sums K slices instead of col2im.

Viewed as ``(N, C, *k, *O)``, the output's slot for kernel offset ``j`` is one strided slice of the
unpadded input with zero borders (``impls.windows``), so the forward writes the output once, slot by slot,
with no padded copy of the input (``tiling`` and ``as_strided`` pad first).

The backward is the transpose of that: the input gradient at ``x`` is the sum, over the kernel offsets
``j`` whose windows touch ``x``, of ``grad_output[j, o]`` at the one window ``o = (x + p - j d) / s`` (when
it is an integer in ``[0, O)``). For each offset that is one strided slice of ``grad_output`` added into
one strided slice of a zeroed input gradient: ``grad_input[..., x_lo::s] += grad_output[:, :, j, o_lo:o_hi]``.
So every input entry gathers exactly the values of the windows that touch it, K vectorised passes over
the input gradient, with no atomics, no index tensor (``as_strided``'s generic backward builds an int64
index of the whole storage), no ``CopySlices`` copies of the whole gradient (``tiling``: K output-sized
copies) and no col2im. Memory: the output forward; ``grad_input`` backward, nothing output-sized.

The forward and the backward are a pair of ``torch.autograd.Function``s (``impls.adjoint_pair``), so double
backward, forward-mode AD and ``torch.func.vmap`` work; the forward can also write into a caller's buffer
(``unfold_into``), which the ``gather_reuse`` strategy uses.
"""

from __future__ import annotations

import torch

from impls.adjoint_pair import adjoint_pair
from impls.geometry import Geometry
from impls.output_reuse import check_out
from impls.strategy import Strategy
from impls.windows import slots


def slotted_shape(geometry: Geometry) -> tuple[int, ...]:
    """The output's shape with the kernel and window dims apart: ``(N, C, *k, *O)`` (a view of the output)."""
    g = geometry
    return (g.batch_size, g.channels, *g.kernel_size, *g.output_size)


def copy_slots(input: torch.Tensor, geometry: Geometry, out: torch.Tensor) -> torch.Tensor:
    """Write the unfold of ``input`` into ``out`` (a contiguous tensor of ``geometry.output_shape``); return it."""
    every = (slice(None), slice(None))
    slotted = out.view(slotted_shape(geometry))
    for slot in slots(geometry):
        target = slotted[(*every, *slot.offset)]
        if slot.empty:
            target.zero_()
            continue
        target[(*every, *slot.inner)].copy_(input[(*every, *slot.source)])
        for border in slot.borders:
            target[(*every, *border)].zero_()
    return out


def sum_slots(grad_output: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    """The input gradient: for each kernel offset, its slice of ``grad_output`` added where its windows read."""
    every = (slice(None), slice(None))
    slotted = grad_output.reshape(slotted_shape(geometry))
    grad_input = grad_output.new_zeros(geometry.input_shape)
    for slot in slots(geometry):
        if not slot.empty:
            grad_input[(*every, *slot.source)].add_(slotted[(*every, *slot.offset, *slot.inner)])
    return grad_input


def _copy_slots_into(input: torch.Tensor, geometry: Geometry, out: torch.Tensor | None) -> torch.Tensor:
    return copy_slots(input, geometry, input.new_empty(geometry.output_shape) if out is None else out)


_GatherUnfold = adjoint_pair("Gather", _copy_slots_into, sum_slots)


def unfold_into(input: torch.Tensor, geometry: Geometry, out: torch.Tensor | None = None) -> torch.Tensor:
    """The unfold (differentiable), written into ``out`` when given: contiguous, ``geometry.output_shape``,
    input's dtype and device, and not needed by anything else (it is overwritten)."""
    if out is not None:
        check_out(out, input, geometry)
    return _GatherUnfold.apply(input, geometry, out)


def _gather_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return unfold_into(input, geometry)


unfold = Strategy(
    name="gather",
    description="K strided slot copies forward (no padded copy); own backward adds K slices into grad_input",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=_gather_unfold,
)
