"""``triton_gather``: the unfold and its backward as two Triton kernels, each writing its result exactly once.

Both kernels see every problem as 3-d: 1-d and 2-d geometries get leading spatial dims of size 1 (kernel 1,
stride 1, no padding or dilation), and every size is a ``tl.constexpr``, so each geometry compiles to its own
kernel whose divisions are by constants and whose unused dims fold away.

Forward (``_unfold_kernel``): one program per ``(n, c)`` and block of ``BLOCK`` windows ``o``. For each of the
``K`` kernel offsets ``j`` (a loop unrolled at compile time), output entry ``(n, c K + j, o)`` is the input at
``i = o s - p + j d`` per dim, or 0 where ``i`` falls in the padding: one masked load, one store. The output is
written once and nothing else is allocated; the ``K`` loads of a program touch overlapping input, which stays
in cache.

Backward (``_fold_kernel``): one program per ``(n, c)`` and block of ``BLOCK`` input positions ``x``. The input
gradient at ``x`` is the sum, over the ``K`` kernel offsets ``j``, of ``grad_output[n, c K + j, o]`` at the one
window ``o = (x + p - j d) / s`` that reads ``x`` through ``j``, where that is an integer in ``[0, O)`` in every
dim. So each program gathers at most ``K`` values per position (a loop unrolled at compile time, masked loads)
and stores once: no atomics, no index tensor, no col2im, nothing of the output's size. It accumulates in
float32 (float64 for float64), which is within the parity bound of a sum in the gradient's own precision.

The two maps are each other's adjoint, so the backward of the fold is the unfold again: ``impls.adjoint_pair``
makes them two autograd Functions, which gives double backward, forward-mode AD and ``torch.func.vmap``.

Not yet run on a GPU: the kernels are checked on CPU under Triton's interpreter (where the strategy also declares
"cpu", so that the parity tests run it), and the registry keeps it unverified (tested, never benchmarked) until
the prepared GPU check passes (docs/strategies.md).

Layout: the kernels index a contiguous input (and output gradient); another layout is copied first.
Kernel size: the loop over offsets is unrolled, so a very large kernel (hundreds of offsets) compiles slowly.
"""

from __future__ import annotations

import contextlib
import os

import torch

from impls.adjoint_pair import adjoint_pair
from impls.geometry import Geometry
from impls.strategy import Strategy

try:
    import triton
    import triton.language as tl
except ImportError:  # optional: Linux wheels only
    triton = None
TRITON_INSTALLED = triton is not None
# Triton reads the variable when a kernel is decorated (import time); so does this module.
INTERPRETED = TRITON_INSTALLED and os.environ.get("TRITON_INTERPRET") == "1"

if TRITON_INSTALLED:

    @triton.jit
    def _unfold_kernel(
        x_ptr,
        out_ptr,
        S0: tl.constexpr,
        S1: tl.constexpr,
        S2: tl.constexpr,  # input spatial size
        K0: tl.constexpr,
        K1: tl.constexpr,
        K2: tl.constexpr,  # kernel size
        D0: tl.constexpr,
        D1: tl.constexpr,
        D2: tl.constexpr,  # dilation
        P0: tl.constexpr,
        P1: tl.constexpr,
        P2: tl.constexpr,  # padding
        T0: tl.constexpr,
        T1: tl.constexpr,
        T2: tl.constexpr,  # stride
        O0: tl.constexpr,
        O1: tl.constexpr,
        O2: tl.constexpr,  # windows per dim
        INDEX: tl.constexpr,
        BLOCKS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        nc = tl.program_id(0) // BLOCKS  # program ids: (n, c) times BLOCKS blocks of windows
        o = (tl.program_id(0) % BLOCKS) * BLOCK + tl.arange(0, BLOCK).to(INDEX)
        in_row = o < O0 * O1 * O2
        corner0 = (o // (O1 * O2)) * T0 - P0  # the window's first input position per dim (may be padding)
        corner1 = ((o // O2) % O1) * T1 - P1
        corner2 = (o % O2) * T2 - P2
        source = x_ptr + nc.to(tl.int64) * (S0 * S1 * S2)
        rows = out_ptr + nc.to(tl.int64) * (K0 * K1 * K2 * O0 * O1 * O2)
        for j0 in tl.static_range(K0):
            i0 = corner0 + j0 * D0
            inside0 = in_row & (i0 >= 0) & (i0 < S0)
            for j1 in tl.static_range(K1):
                i1 = corner1 + j1 * D1
                inside1 = inside0 & (i1 >= 0) & (i1 < S1)
                for j2 in tl.static_range(K2):
                    i2 = corner2 + j2 * D2
                    inside = inside1 & (i2 >= 0) & (i2 < S2)
                    values = tl.load(source + (i0 * S1 + i1) * S2 + i2, mask=inside, other=0)
                    offset = (j0 * K1 + j1) * K2 + j2
                    tl.store(rows + offset * (O0 * O1 * O2) + o, values, mask=in_row)

    @triton.jit
    def _fold_kernel(
        g_ptr,
        out_ptr,
        S0: tl.constexpr,
        S1: tl.constexpr,
        S2: tl.constexpr,
        K0: tl.constexpr,
        K1: tl.constexpr,
        K2: tl.constexpr,
        D0: tl.constexpr,
        D1: tl.constexpr,
        D2: tl.constexpr,
        P0: tl.constexpr,
        P1: tl.constexpr,
        P2: tl.constexpr,
        T0: tl.constexpr,
        T1: tl.constexpr,
        T2: tl.constexpr,
        O0: tl.constexpr,
        O1: tl.constexpr,
        O2: tl.constexpr,
        ACCUMULATOR: tl.constexpr,
        INDEX: tl.constexpr,
        BLOCKS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        nc = tl.program_id(0) // BLOCKS  # program ids: (n, c) times BLOCKS blocks of input positions
        x = (tl.program_id(0) % BLOCKS) * BLOCK + tl.arange(0, BLOCK).to(INDEX)
        in_row = x < S0 * S1 * S2
        x0 = x // (S1 * S2)
        x1 = (x // S2) % S1
        x2 = x % S2
        rows = g_ptr + nc.to(tl.int64) * (K0 * K1 * K2 * O0 * O1 * O2)
        total = tl.zeros([BLOCK], dtype=ACCUMULATOR)
        for j0 in tl.static_range(K0):
            t0 = x0 + P0 - j0 * D0  # o0 * T0 when window o0 reads x0 through offset j0
            hit0 = (t0 >= 0) & (t0 % T0 == 0) & (t0 < O0 * T0)
            for j1 in tl.static_range(K1):
                t1 = x1 + P1 - j1 * D1
                hit1 = hit0 & (t1 >= 0) & (t1 % T1 == 0) & (t1 < O1 * T1)
                for j2 in tl.static_range(K2):
                    t2 = x2 + P2 - j2 * D2
                    hit = in_row & hit1 & (t2 >= 0) & (t2 % T2 == 0) & (t2 < O2 * T2)
                    window = ((t0 // T0) * O1 + t1 // T1) * O2 + t2 // T2
                    offset = (j0 * K1 + j1) * K2 + j2
                    value = tl.load(rows + offset * (O0 * O1 * O2) + window, mask=hit, other=0)
                    total += value.to(ACCUMULATOR)
        destination = out_ptr + nc.to(tl.int64) * (S0 * S1 * S2) + x
        tl.store(destination, total.to(out_ptr.dtype.element_ty), mask=in_row)


def _as_3d(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
    return (fill,) * (3 - len(values)) + tuple(values)


def _geometry_args(g: Geometry) -> tuple[int, ...]:
    """The kernels' 18 geometry constants: spatial size, kernel, dilation, padding, stride, windows; all 3-d."""
    return (
        *_as_3d(g.spatial_size, 1),
        *_as_3d(g.kernel_size, 1),
        *_as_3d(g.dilation, 1),
        *_as_3d(g.padding, 0),
        *_as_3d(g.stride, 1),
        *_as_3d(g.output_size, 1),
    )


def _launch(kernel, length: int, g: Geometry, *tensors: torch.Tensor, **constants) -> None:
    """Run ``kernel`` over ``(n, c)`` x blocks of ``length`` positions, all on axis 0 of the grid (up to 2**31 - 1
    programs; axis 1 would stop at 65535 blocks), on the tensors' GPU (Triton launches on the current one).

    Block: a power of two covering ``length``, 16 to 1024 elements, with 1 to 8 warps (untuned first guesses).
    Index arithmetic is int32 unless a position, offset or bound of the geometry can reach 2**31 (huge
    padding, stride or dilation, or a huge row), where it is int64 (slower on a GPU, so not the default).
    """
    block = min(1024, max(16, triton.next_power_of_2(length)))
    blocks = triton.cdiv(length, block)
    extents = [
        size + stride * windows + pad + kernel * dilation
        for size, stride, windows, pad, kernel, dilation in zip(
            g.spatial_size, g.stride, g.output_size, g.padding, g.kernel_size, g.dilation
        )
    ]
    wide = max(*extents, g.input_numel // (g.batch_size * g.channels), g.num_patches, blocks * block) >= 2**31 - 1
    device = torch.cuda.device(tensors[0].device) if tensors[0].is_cuda else contextlib.nullcontext()
    with device:
        kernel[(g.batch_size * g.channels * blocks,)](
            *tensors,
            *_geometry_args(g),
            **constants,
            INDEX=tl.int64 if wide else tl.int32,
            BLOCKS=blocks,
            BLOCK=block,
            num_warps=max(1, min(8, block // 128)),
        )


def _unfold(input: torch.Tensor, g: Geometry) -> torch.Tensor:
    out = input.new_empty(g.output_shape)
    if out.numel() == 0:
        return out
    _launch(_unfold_kernel, g.num_patches, g, input.contiguous(), out)
    return out


def _fold(grad_output: torch.Tensor, g: Geometry) -> torch.Tensor:
    grad_input = grad_output.new_empty(g.input_shape)
    if grad_input.numel() == 0:
        return grad_input
    if grad_output.numel() == 0:  # no windows (cannot happen for a valid geometry, kept for safety)
        return grad_input.zero_()
    accumulator = tl.float64 if grad_output.dtype == torch.float64 else tl.float32
    positions = g.input_numel // (g.batch_size * g.channels)
    _launch(_fold_kernel, positions, g, grad_output.contiguous(), grad_input, ACCUMULATOR=accumulator)
    return grad_input


def _unfold_fresh(input: torch.Tensor, g: Geometry, out: torch.Tensor | None) -> torch.Tensor:
    return _unfold(input, g)  # this strategy never writes into a caller's buffer (``out`` is always None)


_TritonUnfold = adjoint_pair("Triton", _unfold_fresh, _fold)


def _triton_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return _TritonUnfold.apply(input, geometry, None)


unfold = Strategy(
    name="triton_gather",
    description="Triton kernels: masked-load forward, per-input-position gather backward (no atomics)",
    spatial_dims=(1, 2, 3),
    # CUDA only; under Triton's interpreter the kernels run on CPU tensors, which is how CI checks them.
    devices=("cuda", "cpu") if INTERPRETED else ("cuda",),
    implementation=_triton_unfold,
    compiles=True,
    missing_requirement=None if TRITON_INSTALLED else "the triton package (pip install triton; Linux only)",
)
