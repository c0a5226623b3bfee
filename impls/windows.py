"""Where each kernel offset's slot of the output meets the unpadded input: the index arithmetic of the slot copies.

For kernel offset ``j`` along a spatial dim (input size ``S``, padding ``p``, dilation ``d``, stride ``s``,
``O`` windows), window ``o`` reads input position ``x = o s + j d - p``. It is inside the input when
``0 <= x <= S - 1``, that is for ``o`` in ``[o_lo, o_hi)`` with

    o_lo = max(0, ceil((p - j d) / s)),    o_hi = min(O, floor((S - 1 + p - j d) / s) + 1),

and those windows read ``x = x_lo, x_lo + s, ...`` from ``x_lo = o_lo s + j d - p``. Windows outside that range
read padding (zeros). So slot ``j`` of the output, ``out[:, :, j_1..j_n, :, ..., :]`` viewed as
``(N, C, *k, *O)``, is one strided slice of the *unpadded* input plus zero borders, and no padded copy of
the input is ever needed: the forward copies K slices, the backward adds K slices of ``grad_output`` into
the input gradient. Computed once per geometry (a few integers per offset).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import torch

from impls.geometry import Geometry


@dataclass(frozen=True)
class Slot:
    """One kernel offset: which windows read the input (``inner``), which input they read, the zero borders."""

    offset: tuple[int, ...]
    inner: tuple[slice, ...]  # per spatial dim: the windows o_lo:o_hi of the slot that read the input
    source: tuple[slice, ...]  # per spatial dim: the input positions they read (start:stop:stride)
    borders: tuple[tuple[slice, ...], ...]  # spatial index tuples of the windows that read padding
    empty: bool  # no window of this offset reads the input (all padding)


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _dim_range(size: int, padding: int, dilation: int, stride: int, windows: int, j: int) -> tuple[int, int]:
    """``[o_lo, o_hi)``: the windows of kernel offset ``j`` that read the input (empty when ``o_hi == o_lo``)."""
    shift = j * dilation - padding  # the input position window 0 reads
    lo = max(0, _ceil_div(-shift, stride))
    hi = min(windows, (size - 1 - shift) // stride + 1)  # floor division, also for negative numerators
    return lo, max(lo, hi)


def slots(geometry: Geometry) -> tuple[Slot, ...]:
    """The K slots of ``geometry`` in the contract's row order (kernel offsets row-major), computed once per
    geometry; under ``torch.compile`` computed while tracing (constants of the graph), where Dynamo would trace
    through the cache anyway and warn that it does."""
    return _slots(geometry) if torch.compiler.is_compiling() else _cached_slots(geometry)


def _slots(geometry: Geometry) -> tuple[Slot, ...]:
    g = geometry
    result = []
    for offset in itertools.product(*(range(k) for k in g.kernel_size)):
        inner, source, borders = [], [], []
        empty = False
        for dim, j in enumerate(offset):
            size, pad, dil, step, windows = (
                g.spatial_size[dim],
                g.padding[dim],
                g.dilation[dim],
                g.stride[dim],
                g.output_size[dim],
            )
            lo, hi = _dim_range(size, pad, dil, step, windows, j)
            empty = empty or hi == lo
            start = lo * step + j * dil - pad
            inner.append(slice(lo, hi))
            source.append(slice(start, start + step * (hi - lo - 1) + 1 if hi > lo else start, step))
            full = [slice(None)] * g.spatial_dims
            if lo > 0:
                borders.append(tuple(full[:dim] + [slice(0, lo)] + full[dim + 1 :]))
            if hi < windows:
                borders.append(tuple(full[:dim] + [slice(hi, windows)] + full[dim + 1 :]))
        result.append(Slot(offset, tuple(inner), tuple(source), tuple(borders), empty))
    return tuple(result)


_cached_slots = lru_cache(maxsize=256)(_slots)
