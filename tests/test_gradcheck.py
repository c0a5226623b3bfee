"""``torch.autograd.gradcheck`` in float64 on small shapes: every strategy's backward is its forward's adjoint."""

import pytest
import torch

from impls import TESTED_STRATEGIES
from tests.helpers import skip_unless_supported

GEOMETRIES = {
    1: [
        ((2, 2, 7), {"kernel_size": 3, "padding": 1, "stride": 2, "dilation": 1}),
        ((1, 3, 8), {"kernel_size": 2, "padding": 0, "stride": 1, "dilation": 3}),
    ],
    2: [
        ((2, 2, 5, 4), {"kernel_size": (3, 2), "padding": (1, 0), "stride": (1, 2), "dilation": 1}),
        ((1, 2, 6, 6), {"kernel_size": 2, "padding": 2, "stride": 3, "dilation": 2}),
    ],
    3: [
        ((1, 2, 4, 3, 4), {"kernel_size": (2, 3, 2), "padding": (0, 1, 1), "stride": (2, 1, 1), "dilation": 1}),
        ((1, 1, 5, 5, 5), {"kernel_size": 2, "padding": 1, "stride": 2, "dilation": 2}),
    ],
}
CASES = [
    (name, shape, kwargs)
    for name, strategy in TESTED_STRATEGIES.items()
    for dims in strategy.spatial_dims
    for shape, kwargs in GEOMETRIES[dims]
]


@pytest.mark.parametrize("name,shape,kwargs", CASES)
def test_gradcheck_float64(name, shape, kwargs, device):
    strategy = TESTED_STRATEGIES[name]
    skip_unless_supported(strategy, len(shape) - 2, device)
    x = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)
    if strategy.reuses_output:  # gradcheck keeps earlier outputs, which the next call overwrites: copy them
        assert torch.autograd.gradcheck(lambda t: strategy(t, **kwargs).clone(), (x,))
    else:
        assert torch.autograd.gradcheck(lambda t: strategy(t, **kwargs), (x,))


def test_triton_gather_double_backward_is_its_unfold(device):
    """``triton_gather``'s backward is a function of its own (the fold), whose backward is the unfold again."""
    strategy = TESTED_STRATEGIES["triton_gather"]
    skip_unless_supported(strategy, 2, device)
    x = torch.randn(1, 2, 5, 4, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda t: strategy(t, (3, 2), padding=1, stride=(2, 1)), (x,), fast_mode=True)
