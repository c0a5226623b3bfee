"""Reference unfolds that the strategies are checked against. Not a registered strategy.

``reference_unfold`` is the contract itself: ``torch.nn.functional.unfold`` for 4-d input, and for 3-d and
5-d input ``loop_unfold``, an explicit loop over patches that uses none of the strategies under test:
zero-pad by copying into a zero tensor, then for each window position (row-major) cut the dilated patch out
by basic slicing and make it one column. It is slow (one Python iteration per patch) and obviously right;
the tests also check it against ``F.unfold`` on 4-d input, so the 3-d and 5-d reference is trusted for
the same reason. Autograd through it (slicing and ``stack``) gives the reference input gradient.
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


def reference_unfold(
    input: torch.Tensor,
    kernel_size: IntOrTuple,
    dilation: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    stride: IntOrTuple = 1,
) -> torch.Tensor:
    """The contract's output: ``F.unfold`` for 4-d input, ``loop_unfold`` for 3-d and 5-d input."""
    if isinstance(input, torch.Tensor) and input.dim() == 4:
        parse(input, kernel_size, dilation, padding, stride)
        return F.unfold(input, kernel_size, dilation=dilation, padding=padding, stride=stride)
    return loop_unfold(input, kernel_size, dilation, padding, stride)
