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
    empty = []
    for slot in slots(geometry):
        (inner,) = slot.inner
        covered = set(range(windows)[inner])
        assert slot.empty == (not covered), f"offset {slot.offset}: reads {sorted(covered)}, empty={slot.empty}"
        empty.append(slot.empty)
        for (border,) in slot.borders:
            assert not covered & set(range(windows)[border])
            covered |= set(range(windows)[border])
        assert covered == set(range(windows))
    assert True in empty and False in empty  # the geometry has both kinds, so the flag is checked both ways
    x = torch.randn(1, 1, 3)
    assert torch.equal(unfold_into(x, geometry), reference_unfold(x, kernel_size=3, dilation=4, padding=4))


def test_a_slot_is_empty_when_any_of_its_dims_reads_only_padding():
    # height 1, padding 2, kernel 3, dilation 2: one window, whose row offsets 0 and 2 read padding; every column
    # offset reads the input
    geometry = parse(torch.zeros(1, 1, 1, 4), kernel_size=(3, 2), dilation=(2, 1), padding=(2, 0), stride=1)
    for slot in slots(geometry):
        reads = [len(range(o)[inner]) for o, inner in zip(geometry.output_size, slot.inner)]
        assert slot.empty == (0 in reads), (slot.offset, reads, slot.empty)
    assert [slot.empty for slot in slots(geometry)] == [True, True, False, False, True, True]
