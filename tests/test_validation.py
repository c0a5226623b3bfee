"""Bad input is rejected by every strategy alike, before any work, naming the parameter and its value."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from impls import SPATIAL_DIMS, TESTED_STRATEGIES
from impls.reference import loop_unfold, reference_unfold
from impls.strategy import Strategy
from tests.helpers import skip_unless_supported

X4 = torch.zeros(2, 3, 5, 5)

# (id, input, kwargs, error type, words the message must contain)
BAD_CALLS = [
    ("not-a-tensor", [[1.0, 2.0]], {"kernel_size": 1}, TypeError, ["input", "list"]),
    ("rank-2", torch.zeros(3, 5), {"kernel_size": 1}, ValueError, ["input", "2-d", "(3, 5)"]),
    ("rank-6", torch.zeros(1, 1, 2, 2, 2, 2), {"kernel_size": 1}, ValueError, ["input", "6-d"]),
    ("int-dtype", torch.zeros(2, 3, 5, 5, dtype=torch.int64), {"kernel_size": 1}, TypeError, ["input.dtype", "int64"]),
    ("bool-dtype", torch.zeros(2, 3, 5, 5, dtype=torch.bool), {"kernel_size": 1}, TypeError, ["input.dtype", "bool"]),
    ("complex", torch.zeros(2, 3, 5, 5, dtype=torch.complex64), {"kernel_size": 1}, TypeError, ["input.dtype"]),
    ("sparse", torch.zeros(2, 3, 5, 5).to_sparse(), {"kernel_size": 1}, TypeError, ["input.layout", "sparse_coo"]),
    ("kernel-0", X4, {"kernel_size": 0}, ValueError, ["kernel_size=0", "positive"]),
    ("kernel-neg", X4, {"kernel_size": (3, -1)}, ValueError, ["kernel_size=(3, -1)"]),
    ("stride-0", X4, {"kernel_size": 3, "stride": 0}, ValueError, ["stride=0"]),
    ("dilation-0", X4, {"kernel_size": 3, "dilation": (1, 0)}, ValueError, ["dilation=(1, 0)"]),
    ("padding-neg", X4, {"kernel_size": 3, "padding": -1}, ValueError, ["padding=-1", "non-negative"]),
    ("kernel-float", X4, {"kernel_size": 3.0}, TypeError, ["kernel_size", "3.0"]),
    ("kernel-bool", X4, {"kernel_size": True}, TypeError, ["kernel_size", "True"]),
    ("stride-str", X4, {"kernel_size": 3, "stride": "2"}, TypeError, ["stride", "'2'"]),
    ("kernel-len", X4, {"kernel_size": (3, 3, 3)}, ValueError, ["kernel_size=(3, 3, 3)", "2 spatial"]),
    ("padding-len", X4, {"kernel_size": 3, "padding": (1,)}, ValueError, ["padding=(1,)", "2 spatial"]),
    ("kernel-too-big", X4, {"kernel_size": 6}, ValueError, ["kernel_size=6", "padded input"]),
    ("dilated-too-big", X4, {"kernel_size": 3, "dilation": 3}, ValueError, ["dilation=3", "spans 7"]),
    ("stride-huge", X4, {"kernel_size": 3, "stride": 2**61}, ValueError, ["stride=2305843009213693952", "exceeds"]),
    ("padding-huge", X4, {"kernel_size": 3, "padding": 2**40}, ValueError, ["padding=1099511627776"]),
    ("output-overflow", X4, {"kernel_size": 1, "padding": 2**30}, ValueError, ["padding=1073741824", "int64"]),
    ("empty-channels", torch.zeros(2, 0, 5, 5), {"kernel_size": 3}, ValueError, ["input", "channel"]),
    ("empty-spatial", torch.zeros(2, 3, 0, 5), {"kernel_size": 1}, ValueError, ["input", "spatial"]),
]


def _call_and_check(fn, args, kwargs, error, words):
    with pytest.raises(error) as info:
        fn(args, **kwargs)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in error message {message!r}"


def _spy(strategy: Strategy) -> tuple[Strategy, list]:
    """``strategy`` with an implementation that records its calls instead of working, and the record."""
    calls = []
    return dataclasses.replace(strategy, implementation=lambda *a: calls.append(a)), calls


# The check is ``Strategy.__call__`` (``impls.geometry.parse``, then the strategy's support), shared by every
# strategy: each bad call is checked once, through a strategy that supports every spatial dim and device.
@pytest.mark.parametrize("case", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_the_shared_check_rejects_bad_input_before_any_work(case):
    _, args, kwargs, error, words = case
    spy, calls = _spy(Strategy("any", "supports everything", SPATIAL_DIMS, ("cpu", "cuda"), reference_unfold))
    _call_and_check(spy, args, kwargs, error, words)
    assert calls == [], "the implementation ran before validation failed"


# One bad input and one bad geometry: enough to show that a strategy's call is the shared check.
SMOKE_CALLS = [c for c in BAD_CALLS if c[0] in ("not-a-tensor", "kernel-too-big")]


@pytest.mark.parametrize("name", list(TESTED_STRATEGIES))
def test_every_strategy_runs_the_shared_check_before_its_code(name):
    strategy = TESTED_STRATEGIES[name]
    spy, calls = _spy(strategy)
    for _, args, kwargs, error, words in SMOKE_CALLS:
        _call_and_check(spy, args, kwargs, error, words)
        assert calls == [], f"{name}'s implementation ran before validation failed"
        _call_and_check(strategy, args, kwargs, error, words)


@pytest.mark.parametrize("fn", [reference_unfold, loop_unfold])
@pytest.mark.parametrize("case", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_reference_rejects_bad_input_alike(fn, case):
    _, args, kwargs, error, words = case
    _call_and_check(fn, args, kwargs, error, words)


UNSUPPORTED_DIMS = [
    (name, dims) for name, s in TESTED_STRATEGIES.items() for dims in SPATIAL_DIMS if dims not in s.spatial_dims
]


@pytest.mark.parametrize("name,dims", UNSUPPORTED_DIMS)
def test_unsupported_spatial_dims_are_refused_by_name(name, dims):
    x = torch.zeros(2, 3, *([4] * dims))
    with pytest.raises(ValueError) as info:
        TESTED_STRATEGIES[name](x, 3)
    assert name in str(info.value) and "spatial dims" in str(info.value) and "input" in str(info.value)


@pytest.mark.parametrize("name", list(TESTED_STRATEGIES))
def test_unsupported_device_is_refused_by_name(name):
    if TESTED_STRATEGIES[name].missing_requirement:
        pytest.skip(f"{name} refuses every input here: it needs {TESTED_STRATEGIES[name].missing_requirement}")
    cuda_only = dataclasses.replace(TESTED_STRATEGIES[name], devices=("cuda",))
    with pytest.raises(ValueError, match=r"devices \('cuda',\), not 'cpu'"):
        cuda_only(torch.zeros(2, 3, 5, 5), 3)
    with pytest.raises(ValueError, match="'meta'"):
        TESTED_STRATEGIES[name](torch.zeros(2, 3, 5, 5, device="meta"), 3)


@pytest.mark.parametrize("name", list(TESTED_STRATEGIES))
def test_tuple_list_and_int_arguments_are_equivalent(name, device):
    s = TESTED_STRATEGIES[name]
    skip_unless_supported(s, 2, device)
    x = torch.randn(2, 3, 6, 7, device=device)
    as_int = s(x, 3, dilation=1, padding=1, stride=2)
    assert as_int.equal(s(x, (3, 3), dilation=(1, 1), padding=(1, 1), stride=(2, 2)))
    assert as_int.equal(s(x, [3, 3], dilation=[1, 1], padding=[1, 1], stride=[2, 2]))
    assert as_int.equal(s(x, torch.Size([3, 3]), dilation=np.int64(1), padding=(np.int32(1), 1), stride=2))


@pytest.mark.parametrize("name", list(TESTED_STRATEGIES))
def test_large_valid_stride_gives_one_window(name, device):
    """A stride far beyond the input is valid (one window per dim) and must not overflow any strategy."""
    skip_unless_supported(TESTED_STRATEGIES[name], 2, device)
    x = torch.randn(2, 3, 5, 5, device=device)
    expected = reference_unfold(x, 3, stride=2**31 - 1)
    assert TESTED_STRATEGIES[name](x, 3, stride=2**31 - 1).equal(expected)


def test_triton_gather_index_arithmetic_past_int32(device):
    """Positions and bounds of 2**31 and more (huge padding, stride, dilation) switch the Triton kernels to
    int64 indexing; worked by hand, since the reference would materialise the padding."""
    strategy = TESTED_STRATEGIES["triton_gather"]
    skip_unless_supported(strategy, 1, device)
    # 1x1 kernel, 2**31 - 4 zeros each side, stride 2**30: windows start at 0, 2**30, 2**31 (input 4), 3 * 2**30
    x = torch.arange(8.0, device=device).reshape(1, 1, 8).requires_grad_()
    out = strategy(x, 1, padding=2**31 - 4, stride=2**30)
    assert out.tolist() == [[[0.0, 0.0, 4.0, 0.0]]]
    (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
    assert grad.tolist() == [[[0.0] * 4 + [1.0] + [0.0] * 3]]
    # kernel 3 dilated by 2**30 with padding 2**30: only the middle offset reads the input, window o reads x[o]
    x = torch.tensor([[[1.0, 2.0, 3.0]]], device=device, requires_grad=True)
    out = strategy(x, 3, dilation=2**30, padding=2**30)
    assert out.tolist() == [[[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]]
    (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
    assert grad.tolist() == [[[1.0, 1.0, 1.0]]]
