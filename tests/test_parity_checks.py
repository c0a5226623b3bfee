"""The parity check itself can fail: it catches wrong values, wrong gradients and wrong shapes."""

import torch
import torch.nn.functional as F

from impls import parse
from impls.parity import gradient_excess, mismatch, random_grad_output, unfold_with_grad
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
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = X.to(dtype)
        grad_output = random_grad_output(parse(x, **KWARGS), x)
        _, grad = unfold_with_grad(reference_unfold, x, KWARGS, grad_output)
        assert gradient_excess(grad, x, KWARGS, grad_output) <= 0
