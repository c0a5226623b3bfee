"""Reference unfolds that the strategies are checked against. Not a registered strategy.

``reference_unfold`` is the contract itself: ``torch.nn.functional.unfold`` for 4-d input; for 3-d input
``loop_unfold``, an explicit loop over patches that uses none of the strategies under test: zero-pad by
copying into a zero tensor, then for each window position (row-major) cut the dilated patch out by basic
slicing and make it one column. It is slow (one Python iteration per patch) and obviously right; the tests
check it against ``F.unfold`` on 4-d input. For 5-d input the patch loop is too slow for the benchmark
harness's correctness gate (4096 patches per volume), so ``depth_sliced_unfold`` applies ``F.unfold`` to
each padded depth slice that a window reads and stacks the results in the contract's order; the tests check
it against ``loop_unfold``. Autograd through either gives the reference input gradient.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from impls.geometry import IntOrTuple, parse


def loop_unfold(
    input: torch.Tensor,
    kernel_size: IntOrTuple,
    dilation: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    stride: IntOrTuple = 1,
) -> torch.Tensor:
    """Unfold by an explicit loop over patches; works for 1, 2 and 3 spatial dims."""
    g = parse(input, kernel_size, dilation, padding, stride)
    padded = input.new_zeros((g.batch_size, g.channels, *g.padded_size))
    interior = tuple(slice(p, p + s) for p, s in zip(g.padding, g.spatial_size))
    padded[(slice(None), slice(None), *interior)] = input
    columns = []
    for position in itertools.product(*(range(o) for o in g.output_size)):
        window = (slice(o * s, o * s + span, d) for o, s, span, d in zip(position, g.stride, g.kernel_span, g.dilation))
        patch = padded[(slice(None), slice(None), *window)]
        columns.append(patch.reshape(g.batch_size, g.channels * g.kernel_numel))
    return torch.stack(columns, dim=2)


def depth_sliced_unfold(
    input: torch.Tensor,
    kernel_size: IntOrTuple,
    dilation: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    stride: IntOrTuple = 1,
) -> torch.Tensor:
    """Unfold 5-d input as ``F.unfold`` of depth slices: one 2-d unfold per (kernel depth, output depth).

    Output row ``c * K + i * (kh * kw) + j`` for channel ``c``, kernel depth offset ``i`` and in-plane offset
    ``j``; column ``d * (Oh * Ow) + l`` for output depth ``d`` and in-plane window ``l``: the contract's
    row-major orders.
    """
    g = parse(input, kernel_size, dilation, padding, stride)
    if g.spatial_dims != 3:
        raise ValueError(f"input.dim()={input.dim()}: depth_sliced_unfold needs 5-d input")
    padded = F.pad(input, tuple(p for p in reversed(g.padding) for _ in (0, 1)))
    in_plane = {"kernel_size": g.kernel_size[1:], "dilation": g.dilation[1:], "stride": g.stride[1:]}
    per_offset = []
    for i in range(g.kernel_size[0]):
        depths = [d * g.stride[0] + i * g.dilation[0] for d in range(g.output_size[0])]
        slices = [F.unfold(padded[:, :, z], **in_plane) for z in depths]  # each (N, C * kh * kw, Oh * Ow)
        per_offset.append(torch.stack(slices, dim=2))  # (N, C * kh * kw, Od, Oh * Ow)
    n, c = g.batch_size, g.channels
    stacked = torch.stack(per_offset, dim=1)  # (N, kd, C * kh * kw, Od, Oh * Ow)
    stacked = stacked.reshape(n, g.kernel_size[0], c, -1, g.num_patches).transpose(1, 2)
    return stacked.reshape(n, c * g.kernel_numel, g.num_patches)


def reference_unfold(
    input: torch.Tensor,
    kernel_size: IntOrTuple,
    dilation: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    stride: IntOrTuple = 1,
) -> torch.Tensor:
    """The contract's output: ``F.unfold`` (4-d), ``loop_unfold`` (3-d), ``depth_sliced_unfold`` (5-d)."""
    if isinstance(input, torch.Tensor) and input.dim() == 4:
        parse(input, kernel_size, dilation, padding, stride)
        return F.unfold(input, kernel_size, dilation=dilation, padding=padding, stride=stride)
    if isinstance(input, torch.Tensor) and input.dim() == 5:
        return depth_sliced_unfold(input, kernel_size, dilation, padding, stride)
    return loop_unfold(input, kernel_size, dilation, padding, stride)
