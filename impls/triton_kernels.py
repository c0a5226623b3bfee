"""The Triton kernels of ``triton_gather`` (``impls.triton_gather`` explains them) and their launch.

Imported on the strategy's first call, not with the registry, so that a process that never calls it (every
benchmark and check process on a CPU) does not pay for importing triton; Triton reads ``TRITON_INTERPRET`` when
these kernels are decorated, so on that first call.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from impls.geometry import Geometry


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


def unfold_into(out: torch.Tensor, input: torch.Tensor, g: Geometry) -> None:
    """Write the unfold of a contiguous ``input`` into ``out`` (non-empty, of ``g.output_shape``), each entry once."""
    _launch(_unfold_kernel, g.num_patches, g, input, out)


def fold_into(grad_input: torch.Tensor, grad_output: torch.Tensor, g: Geometry) -> None:
    """Write the input gradient of a contiguous ``grad_output`` into ``grad_input`` (non-empty), each position
    gathered and stored once, accumulated in float32 (float64 for float64)."""
    accumulator = tl.float64 if grad_output.dtype == torch.float64 else tl.float32
    positions = g.input_numel // (g.batch_size * g.channels)
    _launch(_fold_kernel, positions, g, grad_output, grad_input, ACCUMULATOR=accumulator)
