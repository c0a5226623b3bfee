"""The references agree: the patch loop with F.unfold on 4-d input, the depth-sliced 5-d unfold with the loop."""

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.reference import depth_sliced_unfold, loop_unfold, reference_unfold


@settings(max_examples=80, deadline=None)
@given(
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    padding=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    extra=st.tuples(st.integers(0, 4), st.integers(0, 4)),
    batch=st.integers(1, 2),
    channels=st.integers(1, 3),
)
def test_loop_reference_equals_F_unfold_on_4d(kernel, dilation, padding, stride, extra, batch, channels):
    size = [max(1, d * (k - 1) + 1 - 2 * p) + e for k, d, p, e in zip(kernel, dilation, padding, extra)]
    x = torch.randn(batch, channels, *size, dtype=torch.float64, requires_grad=True)
    kwargs = {"kernel_size": kernel, "dilation": dilation, "padding": padding, "stride": stride}
    expected = F.unfold(x, **kwargs)
    got = loop_unfold(x, **kwargs)
    assert got.equal(expected)
    grad_output = torch.randn_like(expected)
    (expected_grad,) = torch.autograd.grad(expected, x, grad_output)
    (got_grad,) = torch.autograd.grad(got, x, grad_output)
    torch.testing.assert_close(got_grad, expected_grad)


def test_loop_reference_1d_is_the_2d_unfold_of_a_height_one_image():
    x = torch.randn(2, 3, 11)
    expected = F.unfold(x.unsqueeze(2), (1, 3), dilation=(1, 2), padding=(0, 1), stride=(1, 2))
    assert loop_unfold(x, 3, dilation=2, padding=1, stride=2).equal(expected)


def test_loop_reference_3d_by_hand():
    """A 1x1x2x2x2 input holding 1..8, kernel 2."""
    x = torch.arange(1.0, 9.0).reshape(1, 1, 2, 2, 2)
    assert loop_unfold(x, 2).flatten().tolist() == list(range(1, 9))  # one patch, voxels in row-major order
    padded = loop_unfold(x, 2, padding=1, stride=2)  # 8 patches, each holding one voxel
    assert padded.shape == (1, 8, 8)
    assert padded[0, :, 0].tolist() == [0.0] * 7 + [1.0]  # first patch: voxel 1 at the last offset
    assert padded[0, :, 7].tolist() == [8.0] + [0.0] * 7  # last patch: voxel 8 at the first offset


def test_reference_dispatch():
    x4 = torch.randn(1, 2, 5, 5)
    assert reference_unfold(x4, 3).equal(F.unfold(x4, 3))
    x5 = torch.randn(1, 2, 3, 3, 3)
    assert reference_unfold(x5, 2).equal(depth_sliced_unfold(x5, 2))
    x3 = torch.randn(1, 2, 5)
    assert reference_unfold(x3, 2).equal(loop_unfold(x3, 2))


@settings(max_examples=60, deadline=None)
@given(
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2)),
    padding=st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    extra=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
    channels=st.integers(1, 3),
)
def test_depth_sliced_reference_equals_the_loop_on_5d(kernel, dilation, padding, stride, extra, channels):
    size = [max(1, d * (k - 1) + 1 - 2 * p) + e for k, d, p, e in zip(kernel, dilation, padding, extra)]
    x = torch.randn(2, channels, *size, dtype=torch.float64, requires_grad=True)
    kwargs = {"kernel_size": kernel, "dilation": dilation, "padding": padding, "stride": stride}
    expected = loop_unfold(x, **kwargs)
    got = depth_sliced_unfold(x, **kwargs)
    assert got.equal(expected)
    grad_output = torch.randn_like(expected)
    (expected_grad,) = torch.autograd.grad(expected, x, grad_output)
    (got_grad,) = torch.autograd.grad(got, x, grad_output)
    torch.testing.assert_close(got_grad, expected_grad)
