"""``onehot``: the unfoldNd package's one-hot-kernel grouped convolution.

unfoldNd builds a weight of shape ``(C*K, 1, *k)`` in which filter ``c*K + j`` is 1 at kernel offset ``j``
and 0 elsewhere, and runs ``convNd(input, weight, groups=C)`` with the unfold's stride, padding and
dilation. Output channel ``c*K + j`` at position ``o`` is then ``input[c, o*s + j*d]``: exactly the unfold,
reshaped (a view) to ``(N, C*K, L)``. It is what people ship because it works for 1, 2 and 3 spatial dims
on any device with a convolution.

Costs: K multiply-adds per output element instead of one copy, whatever workspace the convolution
backend allocates, and the backward of a convolution (a transposed convolution for the input gradient).
Caveats, declared below and checked by the tests: ``0 * inf = NaN``, so a non-finite input entry turns
the other entries of the windows that contain it into NaN; and on GPUs where PyTorch allows TF32 for
cuDNN convolutions (``torch.backends.cudnn.allow_tf32``, on by default) float32 input is rounded to
TF32's 10-bit mantissa, so the result is not the exact unfold.
"""

import torch
from unfoldNd import unfoldNd

from impls.geometry import Geometry
from impls.strategy import Strategy


def _onehot_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    g = geometry
    return unfoldNd(input, g.kernel_size, dilation=g.dilation, padding=g.padding, stride=g.stride)


unfold = Strategy(
    name="onehot",
    description="unfoldNd package: grouped convolution with a one-hot kernel",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=_onehot_unfold,
    exact_with_nonfinite=False,
    exact_under_tf32=False,
)
