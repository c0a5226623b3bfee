"""``compiled``: the unfold and its backward each written as one expression of views and pads, compiled by
``torch.compile`` (Inductor) into fused loops with affine indexing.

Forward: zero-pad, take windows with ``Tensor.unfold`` (a view ``(N, C, *O, *span)``), keep every ``d``-th element
of each span (dilation), move the kernel dims before the window dims and reshape to ``(N, C K, L)``. Inductor
fuses the pad into the copy as a masked load whose index is affine in the output's: one loop writes the output
once.

Backward: the gradient of the padded input is the sum over kernel offsets ``j`` of the slot
``grad_output[:, :, j]`` placed at ``j d``; the input gradient is its interior. Inductor fuses the sum, pads and
crop into one loop that gathers, for each input element, the K values of the windows that touch it (masked loads,
no atomics, no index tensors). At stride > 1 the innermost dim is summed one phase ``x mod s`` at a time
(``_strided_gradient_expression``).

``unfold_into(..., out=buffer)`` compiles a second forward that stores into ``buffer`` in place, for the
``compiled_reuse`` strategy. Details: docs/internals.md#implscompiledpy.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from impls.adjoint_pair import adjoint_pair, traced_or_transformed
from impls.geometry import Geometry
from impls.output_reuse import check_out
from impls.strategy import Strategy
from impls.toolchain import inductor_default_compiler, missing_compiler

# Enough graphs for every geometry, dtype and layout a test run produces; past it, fail instead of silently
# running the uncompiled code (which materialises K padded tensors in the backward).
_DYNAMO_CONFIG = {"recompile_limit": 256, "accumulated_recompile_limit": 4096, "fail_on_recompile_limit_hit": True}


def _spatial_pads(low: list[int], high: list[int]) -> list[int]:
    """``F.pad``'s argument (last dim first) for per-dim low and high pads."""
    return [q for lo, hi in zip(reversed(low), reversed(high)) for q in (lo, hi)]


def _unfold_expression(x: torch.Tensor, kernel: tuple, dilation: tuple, padding: tuple, stride: tuple) -> torch.Tensor:
    n = x.dim() - 2
    windows = F.pad(x, _spatial_pads(list(padding), list(padding)))
    for i in range(n):
        windows = windows.unfold(2 + i, dilation[i] * (kernel[i] - 1) + 1, stride[i])  # (.., O_i, .., span_i)
    every_dth = (slice(None),) * (2 + n) + tuple(slice(None, None, d) for d in dilation)
    kernel_first = windows[every_dth].permute(0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n))
    patches, rows = 1, x.shape[1]
    for size, k in zip(windows.shape[2 : 2 + n], kernel):
        patches, rows = patches * size, rows * k
    # The reshape copies, except for a one-element kernel, where it can be a view (of the padded input, in its
    # layout: channels_last input would give a non-contiguous output); contiguous() is a no-op otherwise. Every
    # size is given: with an empty batch a -1 would be ambiguous.
    return kernel_first.reshape(x.shape[0], rows, patches).contiguous()


def _gradient_expression(
    grad_slotted: torch.Tensor, kernel: tuple, dilation: tuple, padding: tuple, stride: tuple, spatial: tuple
) -> torch.Tensor:
    if any(step > 1 for step in stride):
        return _strided_gradient_expression(grad_slotted, kernel, dilation, padding, stride, spatial)
    n = len(kernel)
    padded = [size + 2 * p for size, p in zip(spatial, padding)]
    total = None
    for offset in itertools.product(*(range(k) for k in kernel)):
        slot = grad_slotted[(slice(None), slice(None), *offset)]
        low = [offset[i] * dilation[i] for i in range(n)]
        high = [padded[i] - low[i] - slot.shape[2 + i] for i in range(n)]
        placed = F.pad(slot, _spatial_pads(low, high))
        total = placed if total is None else total + placed
    interior = total[(slice(None), slice(None), *(slice(p, p + size) for p, size in zip(padding, spatial)))]
    return interior.contiguous()  # computed at the input's size directly, not as a view of a padded buffer


def _strided_gradient_expression(
    grad_slotted: torch.Tensor, kernel: tuple, dilation: tuple, padding: tuple, stride: tuple, spatial: tuple
) -> torch.Tensor:
    """The input gradient for a stride > 1: the outer spatial dims as for stride 1 (slots zero-inserted for the
    stride, placed, cropped), the innermost dim one phase at a time.

    Along the innermost dim, position ``x = m s + r`` (phase ``r`` in ``[0, s)``) is read through offset ``j``
    only if ``q = (r + p - j d) / s`` is an integer, and then by window ``o = m + q``. So phase ``r``'s gradient
    sums, over those offsets only, slot ``j`` shifted by ``q`` (zeros where ``m + q`` leaves ``[0, O)``):
    contiguous loads, where a zero-inserted innermost dim made every position load all K offsets through a
    mask with a halved index. The phases are stacked along a new last dim, which Inductor writes straight into
    the gradient's buffer: ``(..., M, s)`` is ``(..., M s)``, so interleaving costs no copy when the size is a
    multiple of ``s``.
    """
    n = len(kernel)
    windows = grad_slotted.shape[2 + n :]
    padded = [size + 2 * p for size, p in zip(spatial, padding)]
    per_phase = -(-spatial[-1] // stride[-1])  # M: ceil(size / stride) positions per innermost phase
    every = (slice(None), slice(None))
    phases = []
    for phase in range(stride[-1]):
        total = None
        for offset in itertools.product(*(range(k) for k in kernel)):
            shift = phase + padding[-1] - offset[-1] * dilation[-1]
            if shift % stride[-1]:
                continue  # this offset never reads this phase
            q = shift // stride[-1]
            first, last = max(0, -q), min(per_phase, windows[-1] - q)  # the phase's m that land on a window
            if first >= last:
                continue
            slot = grad_slotted[(*every, *offset, *(slice(None),) * (n - 1), slice(first + q, last + q))]
            slot = F.pad(slot, [first, per_phase - last])  # (N, C, *O_outer, M)
            for i in range(n - 1):
                if stride[i] > 1:  # put the windows stride[i] apart, zeros between
                    shape = list(slot.shape)
                    shape[2 + i] = (windows[i] - 1) * stride[i] + 1
                    slot = slot.new_zeros(shape).slice_scatter(slot, 2 + i, 0, None, stride[i])
            low = [offset[i] * dilation[i] for i in range(n - 1)]
            high = [padded[i] - low[i] - slot.shape[2 + i] for i in range(n - 1)]
            placed = F.pad(slot, [0, 0, *_spatial_pads(low, high)])
            total = placed if total is None else total + placed
        outer = [slice(p, p + size) for p, size in zip(padding[:-1], spatial[:-1])]
        if total is None:  # no offset reads this phase (a stride larger than the kernel's span)
            total = grad_slotted.new_zeros(*grad_slotted.shape[:2], *spatial[:-1], per_phase)
        else:
            total = total[(*every, *outer, slice(None))]
        phases.append(total)
    interleaved = torch.stack(phases, -1).reshape(*grad_slotted.shape[:2], *spatial[:-1], per_phase * stride[-1])
    return interleaved[..., : spatial[-1]].contiguous()


# Inductor stores a pointwise result with many reads or ops in a buffer of its own; the backward's sum of K
# placed slots is such a result, and storing it (at the padded size) would cost a write and a read more.
_INLINE_THE_SUM = {
    "realize_opcount_threshold": 4096,
    "realize_reads_threshold": 4096,
    "realize_acc_reads_threshold": 4096,
}


def _unfold_into_expression(
    x: torch.Tensor, out: torch.Tensor, kernel: tuple, dilation: tuple, padding: tuple, stride: tuple
) -> None:
    out.copy_(_unfold_expression(x, kernel, dilation, padding, stride))  # Inductor stores straight into out


_OPTIONS = {_gradient_expression: _INLINE_THE_SUM}


@functools.cache
def _compiled(expression: Callable) -> Callable:
    """``expression`` under ``torch.compile``, made on first use: wrapping it imports Dynamo,
    which a process that imports the registry but never calls this strategy need not pay."""
    return torch.compile(expression, fullgraph=True, dynamic=False, options=_OPTIONS.get(expression))


def _eager() -> bool:
    """Whether to run the expressions as they are: inside a caller's ``torch.compile`` (which compiles them into
    its own graph; a nested compile is refused) or under a ``torch.func`` transform (a ``jvp``'s tangent, which
    Dynamo cannot trace). Elsewhere, including inside ``vmap`` (``impls.adjoint_pair`` folds the mapped dim into
    the batch), the compiled kernels run."""
    return traced_or_transformed()


def _unfold(input: torch.Tensor, geometry: Geometry, out: torch.Tensor | None) -> torch.Tensor:
    g = geometry
    arguments = (g.kernel_size, g.dilation, g.padding, g.stride)
    if _eager():
        if out is None:
            return _unfold_expression(input, *arguments)
        _unfold_into_expression(input, out, *arguments)
        return out
    compiled = _compiled(_unfold_expression if out is None else _unfold_into_expression)
    with torch._dynamo.config.patch(_DYNAMO_CONFIG):
        if out is None:
            return compiled(input, *arguments)
        compiled(input, out, *arguments)
        return out


def _fold(grad_output: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    g = geometry
    slotted = grad_output.reshape(g.batch_size, g.channels, *g.kernel_size, *g.output_size)
    arguments = (g.kernel_size, g.dilation, g.padding, g.stride, g.spatial_size)
    if _eager():
        return _gradient_expression(slotted, *arguments)
    compiled = _compiled(_gradient_expression)
    with torch._dynamo.config.patch(_DYNAMO_CONFIG):
        return compiled(slotted, *arguments)


_CompiledUnfold = adjoint_pair("Compiled", _unfold, _fold)


def unfold_into(input: torch.Tensor, geometry: Geometry, out: torch.Tensor | None = None) -> torch.Tensor:
    """The compiled unfold (differentiable), written into ``out`` when given (``impls.output_reuse.check_out``
    says what it must be; it is overwritten)."""
    if out is not None:
        check_out(out, input, geometry)
    return _CompiledUnfold.apply(input, geometry, out)


def _compiled_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return unfold_into(input, geometry)


# Inductor builds its CPU kernels with a C++ compiler, by default g++ (not c++, as torch.utils.cpp_extension), and
# its CUDA kernels with Triton; a machine without the compiler is refused on both: one declaration, no GPU machine
# without a compiler seen yet.
MISSING_REQUIREMENT = missing_compiler("Inductor's CPU kernels", inductor_default_compiler())

unfold = Strategy(
    name="compiled",
    description="pad + unfold views forward, sum of placed slots backward, each fused into one loop by torch.compile",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=_compiled_unfold,
    compiles=True,
    missing_requirement=MISSING_REQUIREMENT,
)
