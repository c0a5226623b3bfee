"""Huge-page advice (``impls.huge_pages``): which memory is advised, checked in the kernel's own record of the
mapping (``VmFlags`` ``hg`` in ``/proc/self/smaps``), for the bound's helper and both ways for every strategy's
``advises_huge_pages``."""

from __future__ import annotations

import os

import pytest
import torch

from impls import TESTED_STRATEGIES, huge_pages
from impls.huge_pages import HUGE_PAGE_BYTES, RESULT_BYTES, interior

pytestmark = [
    pytest.mark.skipif(huge_pages.thp_mode() is None, reason="this kernel has no transparent huge pages"),
    pytest.mark.skipif(
        os.environ.get("THP_MEM_ALLOC_ENABLE") == "1",
        reason="THP_MEM_ALLOC_ENABLE=1: PyTorch advises every CPU allocation, so advice cannot be told apart",
    ),
]

# An input whose 1x1 unfold (and gradient) is RESULT_BYTES or more: float32, 36 x 512 x 512 = 36 MiB.
BIG = (1, 36, 512, 512)


def advised(tensor: torch.Tensor) -> bool:
    """Whether the mapping holding the start of the tensor's aligned interior is advised into huge pages."""
    begin, end = interior(tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
    assert end > begin, "the tensor spans no whole huge page"
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                low, high = (int(bound, 16) for bound in head.split("-"))
                inside = low <= begin < high
            elif inside and head == "VmFlags:":
                return "hg" in line.split()[1:]
    raise AssertionError(f"no mapping holds address {begin:#x}")


def test_interior_is_the_whole_huge_pages_inside_a_range_worked_by_hand():
    assert interior(1, 3 * HUGE_PAGE_BYTES) == (HUGE_PAGE_BYTES, 3 * HUGE_PAGE_BYTES)
    assert interior(HUGE_PAGE_BYTES, 2 * HUGE_PAGE_BYTES) == (HUGE_PAGE_BYTES, 3 * HUGE_PAGE_BYTES)
    begin, end = interior(5, HUGE_PAGE_BYTES)  # no whole huge page inside
    assert end <= begin


def test_the_bounds_helper_advises_a_result_of_the_size_and_nothing_smaller():
    fresh = torch.empty(RESULT_BYTES // 4, dtype=torch.float32)
    huge_pages.advise(fresh)
    assert advised(fresh)
    small = torch.empty(RESULT_BYTES // 4 - 1024, dtype=torch.float32)  # below the size: maybe heap memory
    huge_pages.advise(small)
    assert not advised(small)
    assert not advised(torch.empty(RESULT_BYTES // 4, dtype=torch.float32))  # not advised: not flagged


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if s.compiles else n for n, s in TESTED_STRATEGIES.items()],
)
def test_a_strategy_advises_huge_pages_exactly_when_it_declares_so(name):
    strategy = TESTED_STRATEGIES[name]
    reason = strategy.unsupported_reason(2, "cpu", torch.float32)
    if reason is not None:
        pytest.skip(reason)
    x = torch.ones(BIG, requires_grad=True)
    out = strategy(x, kernel_size=1)
    assert out.untyped_storage().nbytes() >= RESULT_BYTES
    assert advised(out) == strategy.advises_huge_pages, "forward"
    if strategy.advises_huge_pages:  # the gradient is a fresh result too
        (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
        assert advised(grad), "backward"
