"""``compiled``: the unfold and its backward each written as one gather, compiled by ``torch.compile`` (Inductor).

Forward: ``out[n, c, j, o] = x[n, c, o s + j d - p]`` where that position is inside the input, else 0. Per
spatial dim a small table of shape ``(k, O)`` holds the positions (clamped) and whether they are inside;
indexing the input with the tables, broadcast over the dims, and zeroing the outside entries gives
``(N, C, k_1, O_1, ..., k_n, O_n)``, permuted and reshaped to the contract's ``(N, C K, L)``.

Backward: the input gradient at ``x`` gathers, for each kernel offset ``j``, the one window that reads
``x`` with that offset, ``o = (x + p - j d) / s`` when that is an integer in ``[0, O)``: per dim a table of
shape ``(k, S)`` holds ``o`` (clamped) and whether it is valid; indexing ``grad_output`` viewed as
``(N, C, *k, *O)`` with them, zeroing the invalid entries and summing over the kernel dims gives the
gradient. No atomics, and the only index tensors are the per-dim tables (``k`` by ``O`` or ``S``
entries), never one of the output's size.

Eagerly, both would materialise a K-fold tensor; Inductor fuses each into one loop nest (C++ with OpenMP on
CPU, Triton on CUDA) that reads each needed value once and writes the result once. Compilation happens on
the first call with a new shape, dtype or layout (seconds to tens of seconds on CPU); Dynamo's automatic
dynamic shapes then compile a shape-generic kernel, so a run over many geometries compiles a handful of
times, and a benchmark process, which sees one geometry, gets a static kernel. Set ``compiles=True`` in the
registry, so the benchmarks make one untimed call first and report the compile time on its own.

The tables depend only on the geometry and device: they are built once (``functools.lru_cache``).
"""

from __future__ import annotations

import functools

import torch

from impls.geometry import Geometry
from impls.strategy import Strategy

# Enough graphs for every rank x dtype x layout a test run produces; past it, fail instead of silently
# running the uncompiled (K-fold materialising) code.
_DYNAMO_CONFIG = {"recompile_limit": 64, "accumulated_recompile_limit": 512, "fail_on_recompile_limit_hit": True}


def _broadcast(table: torch.Tensor, dim: int, spatial_dims: int) -> torch.Tensor:
    """Place a ``(k, M)`` table at dims ``(2 dim, 2 dim + 1)`` of a ``2 * spatial_dims``-d broadcast shape."""
    shape = [1] * (2 * spatial_dims)
    shape[2 * dim], shape[2 * dim + 1] = table.shape
    return table.reshape(shape)


@functools.lru_cache(maxsize=64)
def _tables(geometry: Geometry, device: torch.device) -> tuple[tuple[torch.Tensor, ...], ...]:
    """Forward positions and masks (``(k, O)`` per dim); backward kernel offsets (``(k, 1)``), windows and
    masks (``(k, S)`` per dim); each placed for broadcasting."""
    g, n = geometry, geometry.spatial_dims
    positions, inside, offsets, windows, valid = [], [], [], [], []
    for dim in range(n):
        size, k, d, p, s, o_count = (
            g.spatial_size[dim], g.kernel_size[dim], g.dilation[dim], g.padding[dim], g.stride[dim], g.output_size[dim]
        )  # fmt: skip
        j = torch.arange(k, device=device)[:, None]
        read = torch.arange(o_count, device=device)[None, :] * s + j * d - p  # (k, O): position window o reads
        positions.append(_broadcast(read.clamp(0, size - 1), dim, n))
        inside.append(_broadcast((read >= 0) & (read < size), dim, n))
        shifted = torch.arange(size, device=device)[None, :] + p - j * d  # (k, S): o * s for the window reading x
        window = torch.div(shifted, s, rounding_mode="floor")
        hit = (shifted >= 0) & (shifted % s == 0) & (window < o_count)
        offsets.append(_broadcast(j, dim, n))
        windows.append(_broadcast(window.clamp(0, o_count - 1), dim, n))
        valid.append(_broadcast(hit, dim, n))
    return tuple(positions), tuple(inside), tuple(offsets), tuple(windows), tuple(valid)


def _gather_forward(x: torch.Tensor, positions: tuple, inside: tuple) -> torch.Tensor:
    n = len(positions)
    gathered = x[(slice(None), slice(None), *positions)]  # (N, C, k_1, O_1, ..., k_n, O_n)
    mask = functools.reduce(torch.logical_and, inside)
    gathered = torch.where(mask, gathered, torch.zeros((), dtype=x.dtype, device=x.device))
    kernel_first = gathered.permute(0, 1, *range(2, 2 + 2 * n, 2), *range(3, 3 + 2 * n, 2))
    patches = 1
    for i in range(n):
        patches = patches * positions[i].shape[2 * i + 1]
    return kernel_first.reshape(x.shape[0], -1, patches)


def _gather_backward(grad_slotted: torch.Tensor, offsets: tuple, windows: tuple, valid: tuple) -> torch.Tensor:
    n = len(windows)
    index = (slice(None), slice(None), *offsets, *windows)
    gathered = grad_slotted[index]  # (N, C, k_1, S_1, ..., k_n, S_n)
    mask = functools.reduce(torch.logical_and, valid)
    gathered = torch.where(mask, gathered, torch.zeros((), dtype=gathered.dtype, device=gathered.device))
    return gathered.sum(dim=tuple(range(2, 2 + 2 * n, 2)))


_compiled_forward = torch.compile(_gather_forward, fullgraph=True)
_compiled_backward = torch.compile(_gather_backward, fullgraph=True)


class _CompiledUnfold(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        ctx.geometry = geometry
        positions, inside, *_ = _tables(geometry, input.device)
        with torch._dynamo.config.patch(_DYNAMO_CONFIG):
            return _compiled_forward(input, positions, inside)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, None]:
        if not ctx.needs_input_grad[0]:
            return None, None
        g = ctx.geometry
        _, _, offsets, windows, valid = _tables(g, grad_output.device)
        slotted = grad_output.reshape(g.batch_size, g.channels, *g.kernel_size, *g.output_size)
        with torch._dynamo.config.patch(_DYNAMO_CONFIG):
            return _compiled_backward(slotted, offsets, windows, valid), None


def _compiled_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return _CompiledUnfold.apply(input, geometry)


unfold = Strategy(
    name="compiled",
    description="one gather forward and one gather-sum backward, each fused into one kernel by torch.compile",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=_compiled_unfold,
    compiles=True,
)
