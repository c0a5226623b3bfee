"""The parity check itself can fail: it catches wrong values, wrong gradients and wrong shapes."""

import pytest
import torch
import torch.nn.functional as F

from impls import parse
from impls.gather import sum_slots
from impls.parity import Reference, gradient_excess, mismatch, random_grad_output, unfold_with_grad, window_counts
from impls.reference import reference_unfold

X = torch.randn(2, 3, 6, 6)
KWARGS = {"kernel_size": 3, "padding": 1, "stride": 1}


def test_correct_function_passes():
    assert mismatch(F.unfold, X, KWARGS) is None


def test_one_wrong_value_is_caught():
    def off_by_one_entry(x, **kw):
        out = F.unfold(x, **kw).clone()
        out[0, 0, 0] += 1e-6
        return out

    assert "1 of" in mismatch(off_by_one_entry, X, KWARGS)


def test_wrong_element_order_is_caught():
    def transposed_kernel(x, **kw):  # same values, kernel offsets in column-major order
        n, ck, length = F.unfold(x, **kw).shape
        return F.unfold(x, **kw).view(n, 3, 3, 3, length).transpose(2, 3).reshape(n, ck, length)

    assert "differ" in mismatch(transposed_kernel, X, KWARGS)


def test_wrong_shape_is_caught():
    assert "output is" in mismatch(lambda x, **kw: F.unfold(x, **kw)[:, :-1], X, KWARGS)


def test_slightly_wrong_gradient_is_caught_but_forward_only_check_passes():
    class ScaledBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, grad):
            return grad * (1 + 1e-4)

    def wrong_grad(x, **kw):
        return F.unfold(ScaledBackward.apply(x), **kw)

    assert "gradient" in mismatch(wrong_grad, X, KWARGS)
    assert mismatch(wrong_grad, X, KWARGS, backward=False) is None


def test_bound_holds_for_the_reference_in_every_dtype():
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        x = X.to(dtype)
        grad_output = random_grad_output(parse(x, **KWARGS), x)
        _, grad = unfold_with_grad(reference_unfold, x, KWARGS, grad_output)
        assert gradient_excess(grad, x, KWARGS, grad_output) <= 0


def test_window_counts_are_the_number_of_windows_reading_each_entry():
    kwargs = {"kernel_size": (2, 3), "dilation": (1, 2), "padding": (1, 0), "stride": (1, 2)}
    x = torch.zeros(2, 3, 4, 7)
    marked = torch.arange(1, x.numel() + 1, dtype=torch.float64).view(x.shape)  # 0 is the padding
    columns = reference_unfold(marked, **kwargs).flatten().long()
    assert (columns == 0).any()  # some windows read padding, which is no term
    brute = torch.bincount(columns, minlength=x.numel() + 1)[1:].view(x.shape).double()
    assert brute.min() < brute.max()  # entries at the borders are read by fewer windows
    assert torch.equal(window_counts(x, kwargs), brute)


def test_an_entry_read_by_one_window_must_be_exact():
    kwargs = {"kernel_size": 2, "stride": 2}  # no overlap: every gradient entry is a single term
    x = torch.randn(1, 2, 4, 4)
    grad_output = random_grad_output(parse(x, **kwargs), x)
    _, grad = unfold_with_grad(reference_unfold, x, kwargs, grad_output)
    assert gradient_excess(grad, x, kwargs, grad_output) <= 0
    grad[0, 1, 3, 3] = torch.nextafter(grad[0, 1, 3, 3], torch.tensor(float("inf")))  # one unit in the last place
    assert gradient_excess(grad, x, kwargs, grad_output) > 0


def test_bound_holds_for_summation_in_the_dtype_and_for_a_wider_sum_rounded_once():
    for kwargs in (KWARGS, {"kernel_size": 3, "dilation": 2, "padding": 2}, {"kernel_size": (3, 3), "stride": 1}):
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            x = torch.randn(4, 5, 9, 9).to(dtype)
            grad_output = random_grad_output(parse(x, **kwargs), x, seed=3)
            in_dtype = sum_slots(grad_output, parse(x, **kwargs))
            wide = torch.float64 if dtype == torch.float32 else torch.float32
            rounded_once = sum_slots(grad_output.to(wide), parse(x, **kwargs)).to(dtype)
            assert gradient_excess(in_dtype, x, kwargs, grad_output) <= 0, (kwargs, dtype)
            assert gradient_excess(rounded_once, x, kwargs, grad_output) <= 0, (kwargs, dtype)


def _scaled_backward_in(dtype: torch.dtype, scale: float):
    class ScaledBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, grad):
            return (grad.float() * scale).to(grad.dtype) if grad.dtype == dtype else grad

    return lambda x, **kw: F.unfold(ScaledBackward.apply(x), **kw)


def test_a_gradient_scaled_in_bfloat16_only_is_caught_and_float32_is_untouched():
    x = torch.randn(2, 96, 16, 16)  # conv4's geometry at batch 2
    for scale in (1.06, 1.002):  # caught by the bound; inside the bound, caught by the exact integer sums
        wrong = _scaled_backward_in(torch.bfloat16, scale)
        assert "gradient" in mismatch(wrong, x.bfloat16(), KWARGS)
        assert mismatch(wrong, x, KWARGS) is None


def test_half_precision_gradient_is_checked_exactly_on_integer_sums():
    x = torch.randn(2, 3, 6, 6, dtype=torch.bfloat16)
    reference = Reference(x, KWARGS)
    integers = reference.integer_grad_output
    assert torch.equal(integers, integers.round()) and integers.abs().max() > 1
    assert window_counts(x, KWARGS).max() * integers.abs().max() <= 2**8  # every partial sum exact in bfloat16
    _, grad = unfold_with_grad(reference_unfold, x, KWARGS, integers)
    assert reference.integer_problem(grad) is None
    grad[0, 0, 2, 2] += 1
    assert "1 of 216 input gradient entries differ" in reference.integer_problem(grad)


def test_the_first_bfloat16_value_past_the_bound_fails_and_the_last_within_passes():
    x = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(0)).bfloat16()
    reference = Reference(x, KWARGS)
    exact, magnitude = reference.exact_and_magnitude
    bound = reference.bound(torch.bfloat16)
    entry = (0, 0, 2, 2)  # read by all 9 windows of the 3x3 kernel
    assert reference.counts[entry] == 9
    u, v = 2**-8, 2**-53
    assert bound[entry].item() == pytest.approx((8 * u / (1 - 8 * u) + 8 * v) * magnitude[entry].item(), rel=1e-12)
    _, grad = unfold_with_grad(reference_unfold, x, KWARGS, reference.grad_output)
    sign = 1 if exact[entry] >= 0 else -1
    assert sign * grad[entry] > 0
    bits = grad.view(torch.int16)  # for a value of one sign, the next bit pattern is the next value away from 0
    within = grad.clone()
    while True:
        past = within.clone()
        past.view(torch.int16)[entry] += 1
        if sign * (past[entry].double() - exact[entry]) > bound[entry]:
            break
        within = past
    assert bits[entry] != within.view(torch.int16)[entry]  # the bound spans several bfloat16 values here
    assert reference.gradient_excess(within) <= 0 < reference.gradient_excess(past)
