"""``tiling``: allocate the output once, then one strided copy per kernel offset.

The output is allocated as ``(N, C, *k, *O)``. For each kernel offset ``j = (j_1, ..., j_n)`` the padded
input's slice ``padded[:, :, j_1 d_1 :: s_1, ..., j_n d_n :: s_n]`` (cut to ``O_i`` entries) is exactly the
block ``out[:, :, j_1, ..., j_n]``, so K copies of ``N*C*L`` elements each fill the whole output; it is
then viewed (no copy) as ``(N, C*K, L)``. Padding is a zero-padded copy of the input (skipped when 0).

Backward is what autograd makes of K in-place slot writes: each records a ``CopySlices`` node, and each
node's backward copies the *whole* output-sized gradient before taking its slot's part (then scatters
that part into an input-sized zero tensor). Backward therefore moves and allocates about K times the output's
bytes (K nodes, each an output-sized copy), which makes this strategy's backward slow although its forward
only copies.
"""

import itertools

import torch

from impls.geometry import Geometry, pad_spatial
from impls.strategy import Strategy


def _tiling_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    g = geometry
    padded = pad_spatial(input, g.padding)
    out = padded.new_empty((g.batch_size, g.channels, *g.kernel_size, *g.output_size))
    for offset in itertools.product(*(range(k) for k in g.kernel_size)):
        window_slice = tuple(
            slice(j * d, j * d + s * (o - 1) + 1, s) for j, d, s, o in zip(offset, g.dilation, g.stride, g.output_size)
        )
        out[(slice(None), slice(None), *offset)] = padded[(slice(None), slice(None), *window_slice)]
    return out.view(g.output_shape)


unfold = Strategy(
    name="tiling",
    description="one strided slice copy per kernel offset into a preallocated output",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=_tiling_unfold,
)
