"""View semantics, stated as facts and proved.

``Tensor.unfold`` and ``torch.as_strided`` both return *views*: they share the input's storage and
writing through them changes the input (a claim that ``Tensor.unfold`` copies is wrong).
``torch.nn.functional.unfold`` returns new memory. Every strategy's output is new memory too, as the contract
says, including where a view could hold it: a one-element kernel, or windows that tile the input without
overlap (there ``as_strided`` once returned the input itself, reshaped).
"""

import pytest
import torch
import torch.nn.functional as F

from impls import STRATEGIES
from impls.parity import shares_storage


def test_tensor_unfold_is_a_view():
    x = torch.zeros(1, 1, 4, 4)
    windows = x.unfold(2, 3, 1).unfold(3, 3, 1)  # (1, 1, 2, 2, 3, 3), overlapping windows
    assert windows._base is x and shares_storage(windows, x)
    windows[0, 0, 1, 1, 0, 0] = 42.0  # window (1, 1), offset (0, 0) is x[1, 1]
    assert x[0, 0, 1, 1] == 42.0
    assert windows[0, 0, 0, 0, 1, 1] == 42.0  # the same element seen through another window


def test_as_strided_is_a_view():
    x = torch.zeros(1, 1, 4, 4)
    windows = x.as_strided((1, 1, 2, 2, 3, 3), (16, 16, 4, 1, 4, 1))
    assert windows._base is x and shares_storage(windows, x)
    windows[0, 0, 1, 0, 2, 2] = 7.0  # window (1, 0), offset (2, 2) is x[3, 2]
    assert x[0, 0, 3, 2] == 7.0


def test_F_unfold_returns_new_memory():
    x = torch.zeros(1, 1, 4, 4)
    out = F.unfold(x, 3)
    assert not shares_storage(out, x)
    out.fill_(1.0)
    assert x.abs().sum() == 0


# Where a reshape of the windows could be a view of the input: a one-element kernel (stride 1, no padding; with
# dilation too), one window covering the whole input, a kernel covering one whole dim; then a general case.
NEW_MEMORY_CASES = {
    "kernel-1": {"kernel_size": 1},
    "kernel-1-dilated": {"kernel_size": 1, "dilation": 3},
    "whole-input": {"kernel_size": 4},
    "whole-row": {"kernel_size": (1, 4)},
    "kernel-1-padded": {"kernel_size": 1, "padding": 1},
    "kernel-3": {"kernel_size": 3},
}


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", list(NEW_MEMORY_CASES))
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_strategy_output_is_new_contiguous_memory(name, case, layout):
    x = torch.zeros(2, 3, 4, 4)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    out = STRATEGIES[name](x, **NEW_MEMORY_CASES[case])
    assert not shares_storage(out, x)
    if layout == "contiguous" or STRATEGIES[name].contiguous_on_channels_last:
        assert out.is_contiguous()
    out.fill_(1.0)
    assert x.abs().sum() == 0


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_channels_last_contiguity_declaration_matches_behaviour(name):
    """``Strategy.contiguous_on_channels_last`` both ways, on a geometry with more than one window."""
    strategy = STRATEGIES[name]
    out = strategy(torch.randn(2, 3, 6, 5).to(memory_format=torch.channels_last), kernel_size=3, padding=1)
    assert out.is_contiguous() == strategy.contiguous_on_channels_last, (
        f"{name} declares contiguous_on_channels_last={strategy.contiguous_on_channels_last} but its output for "
        f"channels_last input is {'contiguous' if out.is_contiguous() else 'not contiguous'}"
    )


@pytest.mark.parametrize("spatial_dims", [1, 3])
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_one_element_kernel_output_is_new_memory_in_1d_and_3d(name, spatial_dims):
    x = torch.zeros(2, 3, *(4,) * spatial_dims)
    if STRATEGIES[name].unsupported_reason(spatial_dims, "cpu") is not None:
        pytest.skip(STRATEGIES[name].unsupported_reason(spatial_dims, "cpu"))
    out = STRATEGIES[name](x, kernel_size=1)
    assert not shares_storage(out, x) and out.is_contiguous()
