"""``native``: PyTorch's own ``torch.nn.functional.unfold`` (im2col).

One kernel writes the output ``(N, C*K, L)`` directly from the input, treating out-of-range positions as
zero padding, so no padded copy is made. Backward is ``col2im`` (``F.fold``), which sums the gradient of
overlapping windows into a fresh input-sized buffer. ``F.unfold`` only takes 4-d input: a 1-d problem
``(N, C, W)`` is viewed (no copy) as ``(N, C, 1, W)`` with a ``1 x k`` kernel, which yields the same rows
in the same order. 3-d (5-d tensor) input is not supported.
"""

import torch
import torch.nn.functional as F

from impls.geometry import Geometry
from impls.strategy import Strategy


def _native_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    g = geometry
    if g.spatial_dims == 1:
        return F.unfold(
            input.unsqueeze(2),
            kernel_size=(1, *g.kernel_size),
            dilation=(1, *g.dilation),
            padding=(0, *g.padding),
            stride=(1, *g.stride),
        )
    return F.unfold(input, g.kernel_size, dilation=g.dilation, padding=g.padding, stride=g.stride)


unfold = Strategy(
    name="native",
    description="torch.nn.functional.unfold (im2col kernel; 1-d viewed as 2-d)",
    spatial_dims=(1, 2),
    devices=("cpu", "cuda"),
    implementation=_native_unfold,
)
