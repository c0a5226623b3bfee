"""``as_strided``: a zero-copy sliding-window view, then one copy into the contract's layout.

After zero-padding (a copy of the input, skipped when padding is 0), the view

    windows[n, c, o_1..o_n, j_1..j_n] = padded[n, c, o_1 s_1 + j_1 d_1, ..., o_n s_n + j_n d_n]

is built with ``torch.as_strided``: shape ``(N, C, *O, *k)``, strides ``(t_N, t_C, *(t_i s_i), *(t_i d_i))``
where ``t`` are the padded tensor's own strides (so non-contiguous and channels_last input need no copy
either). Windows overlap, so the view shares memory and costs nothing. Permuting it to
``(N, C, *k, *O)`` and copying it once in that order (``clone`` in contiguous format, then a free ``view`` to
``(N, C*K, L)``) writes the output. The copy is explicit: where the windows tile the input in order (a
one-element kernel with stride 1, or one window covering the whole input) a ``reshape`` would return the input
itself, so writing into the result would write the input, unlike ``F.unfold``.

Backward goes through autograd's generic ``as_strided`` backward, which must handle overlapping windows
in any geometry and so works on the whole underlying storage rather than on the unfold's structure: it
zero-fills a buffer the size of that storage and ``index_add_``s the output gradient into it through an int64
index with one entry per output element, then reads the input's gradient out of it. So its temporaries
exceed the output's size, where a backward that knows the unfold's structure (``gather``) needs only the
input-sized gradient.
"""

import torch

from impls.geometry import Geometry, pad_spatial
from impls.strategy import Strategy


def _as_strided_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    g = geometry
    padded = pad_spatial(input, g.padding)
    t_batch, t_channel, *t_spatial = padded.stride()
    windows = padded.as_strided(
        size=(g.batch_size, g.channels, *g.output_size, *g.kernel_size),
        stride=(
            t_batch,
            t_channel,
            *(t * s for t, s in zip(t_spatial, g.stride)),
            *(t * d for t, d in zip(t_spatial, g.dilation)),
        ),
    )  # storage_offset defaults to padded's own: the input's, when there is no padding and it is a view
    n = g.spatial_dims
    kernel_first = windows.permute(0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n))
    return kernel_first.clone(memory_format=torch.contiguous_format).view(g.output_shape)


unfold = Strategy(
    name="as_strided",
    description="torch.as_strided sliding-window view, materialised by one copy",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=_as_strided_unfold,
)
