"""``onehot``: the unfoldNd package's one-hot-kernel grouped convolution.

unfoldNd builds a weight of shape ``(C*K, 1, *k)`` in which filter ``c*K + j`` is 1 at kernel offset ``j``
and 0 elsewhere, and runs ``convNd(input, weight, groups=C)`` with the unfold's stride, padding and
dilation. Output channel ``c*K + j`` at position ``o`` is then ``input[c, o*s + j*d]``: exactly the unfold,
reshaped (a view) to ``(N, C*K, L)``. It is what people ship because it works for 1, 2 and 3 spatial dims
on any device with a convolution.

Costs: K multiply-adds per output element instead of one copy, whatever workspace the convolution
backend allocates, and the backward of a convolution (a transposed convolution for the input gradient).
Its caveats (``0 * inf = NaN`` for non-finite input, TF32 rounding on GPUs, oneDNN's half-precision defects
on some CPUs, a non-contiguous view for channels_last input) are declared below, checked by the tests and
explained in docs/strategies.md.
"""

import torch
from unfoldNd import unfoldNd

from impls.geometry import Geometry
from impls.strategy import KnownDefect, Strategy

# The AMD EPYC VM's oneDNN ISA: float16's reproducer runs exact there, and both bfloat16 defects show (torch 2.13.0).
# float16's crash and a contiguous form of bfloat16's misplacement were first seen on an Intel Xeon VM before
# impls.cpu_isa existed, so that CPU's ISA is not in the record.
_AVX512_BF16 = "Intel AVX-512 with Intel DL Boost and bfloat16 support"
# An Intel Xeon VM with AMX (torch 2.13.0): all three reproducers show the defect there.
_AVX10_AMX = "Intel AVX10.1 and Intel AMX with bfloat16 and 8-bit integer support"
# The crash's reproducer, in float16 (contiguous) and bfloat16 (channels_last): a dilated, padded kernel over a
# size-1 spatial dim.
_DILATED_PADDED_OVER_A_SIZE_1_DIM = ((2, 3, 4, 1), {"kernel_size": (3, 1), "dilation": 2, "padding": 1, "stride": 2}, 0)


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
    contiguous_on_channels_last=False,
    empty_batch_defect="unfoldNd reshapes the convolution's output to (N, C K, -1), which is ambiguous for N == 0 "
    "(RuntimeError: cannot reshape tensor of 0 elements)",
    compile_defect="Inductor cannot lower unfoldNd's grouped convolution with its one-hot weight "
    "(LoweringException: GuardOnDataDependentSymNode, torch 2.13)",
    known_defects=(
        KnownDefect(
            device="cpu",
            dtype=torch.float16,
            effect="crash",
            description="oneDNN's float16 convolution segfaults on some dilated, padded geometries",
            reproducer=_DILATED_PADDED_OVER_A_SIZE_1_DIM,
            seen_on=(_AVX10_AMX,),
            not_seen_on=(_AVX512_BF16,),
        ),
        KnownDefect(
            device="cpu",
            dtype=torch.bfloat16,
            effect="crash",
            description="oneDNN's bfloat16 convolution segfaults on some dilated, padded geometries",
            reproducer=_DILATED_PADDED_OVER_A_SIZE_1_DIM,
            layout="channels_last",
            seen_on=(_AVX512_BF16, _AVX10_AMX),
        ),
        KnownDefect(
            device="cpu",
            dtype=torch.bfloat16,
            effect="wrong values",
            description="oneDNN's bfloat16 depthwise convolution misplaces values for some strided geometries",
            reproducer=((2, 3, 1, 1, 2), {"kernel_size": (2, 1, 2), "padding": (1, 0, 1)}, 0),
            layout="channels_last",
            seen_on=(_AVX512_BF16, _AVX10_AMX),
        ),
    ),
)
