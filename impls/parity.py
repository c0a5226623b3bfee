"""What "matches the reference" means, for the tests and for the benchmark harness's correctness gate.

Forward: bit-exact. Every strategy only moves values, so any difference is a bug (or a declared caveat,
see ``Strategy.exact_with_nonfinite`` / ``exact_under_tf32``).

Backward: each input entry's gradient is a sum of at most K = prod(kernel_size) entries of
``grad_output``, and strategies legitimately sum in different orders. Any summation order in precision
``eps`` has error at most ``(K - 1) * eps * S`` (first order), where ``S`` is the sum of the absolute values
of the summed terms, plus the final rounding ``eps * |exact|``. The exact gradient and ``S`` (the backward
of ``|grad_output|``) are computed in float64 through the reference, so the bound is the worst case of
correct floating-point summation, not a tolerance tuned until tests pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property

import torch

from impls.geometry import Geometry, parse
from impls.reference import reference_unfold

UnfoldFn = Callable[..., torch.Tensor]


def unfold_with_grad(
    fn: UnfoldFn, x: torch.Tensor, kwargs: Mapping, grad_output: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run ``fn`` on a leaf copy of ``x``; return the output and, if ``grad_output`` is given, the input gradient."""
    leaf = x.detach().requires_grad_(grad_output is not None)
    out = fn(leaf, **kwargs)
    if grad_output is None:
        return out.detach(), None
    (grad,) = torch.autograd.grad(out, leaf, grad_output)
    return out.detach(), grad


def random_grad_output(geometry: Geometry, like: torch.Tensor, seed: int = 1) -> torch.Tensor:
    """A fixed standard-normal ``grad_output`` (not ones: a sum's stride-0 gradient flatters backwards)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(geometry.output_shape, generator=generator).to(device=like.device, dtype=like.dtype)


class Reference:
    """The reference's answers for one input and geometry, computed once and shared by every strategy checked on
    them: the expected output, the fixed ``grad_output``, and in float64 the exact input gradient and the
    gradient of ``|grad_output|`` (the summed magnitudes ``S`` of the bound)."""

    def __init__(self, x: torch.Tensor, kwargs: Mapping) -> None:
        self.x, self.kwargs = x.detach(), dict(kwargs)

    @cached_property
    def expected(self) -> torch.Tensor:
        return reference_unfold(self.x, **self.kwargs)

    @cached_property
    def grad_output(self) -> torch.Tensor:
        return random_grad_output(parse(self.x, **self.kwargs), self.x)

    @cached_property
    def exact_and_magnitude(self) -> tuple[torch.Tensor, torch.Tensor]:
        x64, go64 = self.x.double(), self.grad_output.double()
        _, exact = unfold_with_grad(reference_unfold, x64, self.kwargs, go64)
        _, magnitude = unfold_with_grad(reference_unfold, x64, self.kwargs, go64.abs())
        return exact, magnitude

    def gradient_excess(self, grad: torch.Tensor) -> float:
        """How far ``grad`` exceeds the summation error bound at its worst entry (<= 0 means within it)."""
        eps = torch.finfo(grad.dtype).eps
        exact, magnitude = self.exact_and_magnitude
        bound = parse(self.x, **self.kwargs).kernel_numel * eps * magnitude + eps * exact.abs()
        excess = (grad.double() - exact).abs() - bound
        return excess.max().item() if excess.numel() else 0.0  # an empty batch has no entry to exceed it


def gradient_excess(grad: torch.Tensor, x: torch.Tensor, kwargs: Mapping, grad_output: torch.Tensor) -> float:
    """How far ``grad`` (the input gradient for ``grad_output``) exceeds the summation error bound at its worst
    entry (<= 0 means within it)."""
    reference = Reference(x, kwargs)
    reference.grad_output = grad_output
    return reference.gradient_excess(grad)


def problems(
    fn: UnfoldFn, x: torch.Tensor, kwargs: Mapping, *, backward: bool = True, reference: Reference | None = None
) -> tuple[str | None, str | None]:
    """Why ``fn``'s output, and why its input gradient (if ``backward``), do not match the reference (None: they do).

    The benchmark harness gates forward figures on the first and forward-backward figures on both. ``reference``:
    the reference's answers for this ``x`` and ``kwargs``, when several strategies are checked on them.
    """
    reference = Reference(x, kwargs) if reference is None else reference
    expected = reference.expected
    leaf = x.detach().requires_grad_(backward)
    out = fn(leaf, **kwargs)
    if out.shape != expected.shape or out.dtype != expected.dtype or out.device != expected.device:
        wrong_output = (
            f"output is {tuple(out.shape)} {out.dtype} on {out.device}, "
            f"expected {tuple(expected.shape)} {expected.dtype} on {expected.device}"
        )
        return wrong_output, "not checked: the output is wrong" if backward else None
    differing = (out.detach() != expected).sum().item()
    del expected
    forward_problem = f"{differing} of {out.numel()} output entries differ from the reference" if differing else None
    if not backward:
        return forward_problem, None
    (grad,) = torch.autograd.grad(out, leaf, reference.grad_output)
    del out
    excess = reference.gradient_excess(grad)
    gradient_problem = f"input gradient exceeds the summation error bound by {excess:.3g}" if excess > 0 else None
    return forward_problem, gradient_problem


def mismatch(fn: UnfoldFn, x: torch.Tensor, kwargs: Mapping, *, backward: bool = True) -> str | None:
    """Why ``fn`` does not match the reference on ``x`` (values, and gradients if ``backward``), or None."""
    forward_problem, gradient_problem = problems(fn, x, kwargs, backward=backward)
    return forward_problem or gradient_problem
