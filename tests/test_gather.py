"""What the parity tests do not show about ``gather``: the slot arithmetic on edge cases (the registry-wide
tests check values and gradients; ``tests/test_reuse.py`` the ``out=`` path and the reusing variants)."""

from __future__ import annotations

import torch

from impls import parse
from impls.gather import unfold_into
from impls.reference import reference_unfold
from impls.windows import slots


def test_slots_cover_every_window_once_and_mark_all_padding_slots_empty():
    # width 3, padding 4, kernel 3, dilation 4: offset 0 reads only padding for every window but one, etc.
    geometry = parse(torch.zeros(1, 1, 3), kernel_size=3, dilation=4, padding=4, stride=1)
    (windows,) = geometry.output_size
    for slot in slots(geometry):
        (inner,) = slot.inner
        covered = set(range(windows)[inner])
        for (border,) in slot.borders:
            assert not covered & set(range(windows)[border])
            covered |= set(range(windows)[border])
        assert covered == set(range(windows)) or slot.empty
    x = torch.randn(1, 1, 3)
    assert torch.equal(unfold_into(x, geometry), reference_unfold(x, kernel_size=3, dilation=4, padding=4))
