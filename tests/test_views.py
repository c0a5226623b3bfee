"""View semantics, stated as facts and proved.

``Tensor.unfold`` and ``torch.as_strided`` both return *views*: they share the input's storage and
writing through them changes the input (a claim that ``Tensor.unfold`` copies is wrong).
``torch.nn.functional.unfold`` returns new memory. Every strategy's output is new memory too: the
contract layout ``(N, C*K, L)`` repeats overlapping entries, which no strided view of the input can hold.
"""

import pytest
import torch
import torch.nn.functional as F

from impls import STRATEGIES


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


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


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_strategy_output_is_new_memory(name):
    x = torch.zeros(1, 1, 4, 4)
    out = STRATEGIES[name](x, 3)
    assert not shares_storage(out, x)
    out.fill_(1.0)
    assert x.abs().sum() == 0
