"""What the parity tests do not show about ``gather`` and ``gather_reuse``: the slot arithmetic on edge cases,
``out=`` validation, and that reuse really overwrites (the registry-wide tests check values and gradients)."""

from __future__ import annotations

import pytest
import torch

from impls import get_strategy, parse
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


SENTINEL = -7.0  # no unfold of the input below writes it: an out= touched before the check is told apart


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (torch.full((2, 27, 16), SENTINEL), "shape"),
        (torch.full((2, 27, 25), SENTINEL, dtype=torch.float64), "float32"),
        (torch.full((2, 25, 27), SENTINEL).transpose(1, 2), "contiguous=False"),
        (torch.full((2, 27, 25), SENTINEL, requires_grad=True), "must not require grad"),
    ],
)
def test_out_is_checked_before_any_work(out, message):
    x = torch.rand(2, 3, 5, 5)  # in [0, 1): never the sentinel
    with pytest.raises(ValueError, match=message):
        unfold_into(x, parse(x, kernel_size=3, padding=1), out=out)
    assert (out.detach() == SENTINEL).all()


def test_gather_reuse_overwrites_the_previous_result_and_keeps_one_buffer():
    reuse, fresh = get_strategy("gather_reuse"), get_strategy("gather")
    assert reuse.reuses_output and not fresh.reuses_output
    x, y = torch.randn(2, 3, 6, 6), torch.randn(2, 3, 6, 6)
    first = reuse(x, 3)
    second = reuse(y, 3)
    assert first.data_ptr() == second.data_ptr() and torch.equal(first, reference_unfold(y, kernel_size=3))
    other = reuse(torch.randn(1, 3, 6, 6), 3)  # another shape replaces the buffer
    assert other.data_ptr() != second.data_ptr()
    assert fresh(x, 3).data_ptr() != fresh(x, 3).data_ptr()


def test_gather_reuse_refuses_a_backward_through_an_overwritten_result():
    # The buffer is a view autograd tracks: once the next call has overwritten it, autograd raises rather than
    # let anyone differentiate through a result that no longer holds its values.
    reuse = get_strategy("gather_reuse")
    x = torch.randn(2, 3, 6, 6, requires_grad=True)
    out = reuse(x, 3, padding=1)
    reuse(torch.randn(2, 3, 6, 6), 3, padding=1)
    with pytest.raises(RuntimeError, match="modified inplace"):
        torch.autograd.grad(out, x, torch.randn_like(out))
