"""What "matches the reference" means, for the tests and for the benchmark harness's correctness gate.

Forward: bit-exact. Every strategy only moves values, so any difference is a bug (or a declared caveat,
see ``Strategy.exact_with_nonfinite`` / ``exact_under_tf32``).

Backward: the input gradient at entry ``i`` is the sum ``s_i`` of the ``k_i`` entries of ``grad_output`` at the
windows that read ``i``, and strategies sum in different orders and precisions. With ``u`` the dtype's unit
roundoff (``finfo.eps / 2``), ``v = 2**-53`` the float64 reference's, ``S_i`` the sum of the terms' absolute values
and ``gamma_n(u) = n u / (1 - n u)``, the bound, the worst case of any order in storage or wider precision, is

    |grad_i - reference_i| <= (gamma_{k_i - 1}(u) + gamma_{k_i - 1}(v)) S_i / (1 - gamma_{k_i - 1}(v)),

0 where ``k_i <= 1``. For float16 and bfloat16 the gradient is also checked bit-exact on an integer-valued
``grad_output`` whose partial sums the dtype represents exactly.

Memory, where asked (``problems(reuses_output=...)``): the output is new memory, not the input's, and a second
call, made while the first output is alive (so the allocator cannot hand its block back), returns the same
buffer exactly when the strategy declares ``Strategy.reuses_output``.

Details: docs/internals.md#implsparitypy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextlib import suppress
from functools import cached_property

import torch

from impls.geometry import Geometry, parse
from impls.reference import reference_unfold

UnfoldFn = Callable[..., torch.Tensor]
HALF_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)


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


def gamma(n: torch.Tensor, unit_roundoff: float) -> torch.Tensor:
    """Higham's ``gamma_n = n u / (1 - n u)`` for each count ``n`` (infinite where ``n u >= 1``)."""
    nu = n * unit_roundoff
    return torch.where(nu < 1, nu / (1 - nu), torch.inf)


def window_counts(x: torch.Tensor, kwargs: Mapping) -> torch.Tensor:
    """How many windows read each entry of ``x`` (float64, ``x``'s shape): the number of terms of its gradient."""
    one = torch.zeros((1, 1, *x.shape[2:]), dtype=torch.float64, device=x.device)
    ones = torch.ones(parse(one, **kwargs).output_shape, dtype=torch.float64, device=x.device)
    _, counts = unfold_with_grad(reference_unfold, one, kwargs, ones)
    return counts.expand(x.shape)


def significand_bits(dtype: torch.dtype) -> int:
    """Bits of the significand, the implicit one included: every integer up to ``2**bits`` is exact in ``dtype``."""
    return round(-math.log2(torch.finfo(dtype).eps)) + 1


class Reference:
    """The reference's answers for one input and geometry, computed once and shared by every strategy checked on
    them: the expected output, the fixed ``grad_output``, and in float64 the exact input gradient, the gradient
    of ``|grad_output|`` (the summed magnitudes ``S`` of the bound) and each entry's number of terms."""

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

    @cached_property
    def counts(self) -> torch.Tensor:
        return window_counts(self.x, self.kwargs)

    def bound(self, dtype: torch.dtype) -> torch.Tensor:
        """The largest ``|grad - exact|`` a correct summation in ``dtype`` can give, per entry (module docstring)."""
        _, magnitude = self.exact_and_magnitude
        terms = (self.counts - 1).clamp(min=0)
        u, v = torch.finfo(dtype).eps / 2, torch.finfo(torch.float64).eps / 2
        reference_error = gamma(terms, v)
        return (gamma(terms, u) + reference_error) * magnitude / (1 - reference_error)

    def gradient_excess(self, grad: torch.Tensor) -> float:
        """How far ``grad`` exceeds the summation error bound at its worst entry (<= 0 means within it)."""
        exact, _ = self.exact_and_magnitude
        excess = (grad.double() - exact).abs() - self.bound(grad.dtype)
        return excess.max().item() if excess.numel() else 0.0  # an empty batch has no entry to exceed it

    @cached_property
    def integer_grad_output(self) -> torch.Tensor | None:
        """A ``grad_output`` of integers whose every partial sum is exact in the input's dtype, or None when a
        window count is too large for that (``2**p`` terms of 1 already reach the last exact integer)."""
        most = int(self.counts.max().item()) if self.counts.numel() else 0
        largest = 2 ** significand_bits(self.x.dtype) // max(most, 1)
        if largest < 1:
            return None
        generator = torch.Generator().manual_seed(2)
        shape = parse(self.x, **self.kwargs).output_shape
        values = torch.randint(-largest, largest + 1, shape, generator=generator, dtype=torch.int64)
        return values.to(device=self.x.device, dtype=self.x.dtype)

    @cached_property
    def integer_exact(self) -> torch.Tensor:
        """The input gradient for ``integer_grad_output``, in float64 (exact: integers below ``2**53``)."""
        _, exact = unfold_with_grad(reference_unfold, self.x.double(), self.kwargs, self.integer_grad_output.double())
        return exact

    def integer_problem(self, grad: torch.Tensor) -> str | None:
        """Why ``grad``, the input gradient for ``integer_grad_output``, is not exactly the sum (None: it is)."""
        differing = (grad.double() != self.integer_exact).sum().item()
        if not differing:
            return None
        return (
            f"{differing} of {grad.numel()} input gradient entries differ from the exact sum for an integer-valued "
            f"grad_output (exact in {str(grad.dtype).removeprefix('torch.')} in any summation order)"
        )


def gradient_excess(grad: torch.Tensor, x: torch.Tensor, kwargs: Mapping, grad_output: torch.Tensor) -> float:
    """How far ``grad`` (the input gradient for ``grad_output``) exceeds the summation error bound at its worst
    entry (<= 0 means within it)."""
    reference = Reference(x, kwargs)
    reference.grad_output = grad_output
    return reference.gradient_excess(grad)


def changed_entries(x: torch.Tensor, before: torch.Tensor) -> int:
    """How many entries of ``x`` differ from ``before``, a copy of it taken earlier (a NaN kept as NaN is unchanged)."""
    same = (x == before) | (x.isnan() & before.isnan()) if x.is_floating_point() else x == before
    return int((~same).sum().item())


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` live in the same memory block (one is a view of the other, or both of a third)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def storage_problem(
    fn: UnfoldFn, x: torch.Tensor, kwargs: Mapping, first: torch.Tensor, reuses_output: bool
) -> str | None:
    """Why ``first``, ``fn``'s output for ``x``, is not the memory an unfold returns (None: it is).

    Unfold returns new memory, never the input's. ``fn`` is called once more on ``x`` while ``first`` is alive,
    so the allocator cannot hand ``first``'s block back by chance: the two outputs share memory exactly when
    ``fn`` keeps a buffer and returns it again, which it must do if and only if it declares ``reuses_output``.
    An output without bytes has no memory to share.
    """
    if first.untyped_storage().nbytes() == 0:
        return None
    if shares_storage(first, x):
        return "its output shares memory with its input (a view of it), where unfold returns new memory"
    second = fn(x, **kwargs)
    if shares_storage(second, x):
        return "its second call's output shares memory with its input (a view of it), where unfold returns new memory"
    kept = shares_storage(second, first)
    del second
    if kept and not reuses_output:
        return (
            "a second call returned the same buffer as the first, which was still alive (a kept output, overwritten "
            "by every call), but the strategy does not declare reuses_output=True"
        )
    if reuses_output and not kept:
        return (
            "it declares reuses_output=True, but a second call returned new memory instead of the first call's buffer"
        )
    return None


def problems(
    fn: UnfoldFn,
    x: torch.Tensor,
    kwargs: Mapping,
    *,
    backward: bool = True,
    reference: Reference | None = None,
    reuses_output: bool | None = None,
) -> tuple[str | None, str | None]:
    """Why ``fn``'s output, and why its input gradient (if ``backward``), do not match the reference (None: they do).

    The benchmark harness gates forward figures on the first and forward-backward figures on both. ``reference``:
    the reference's answers for this ``x`` and ``kwargs``, when several strategies are checked on them.
    ``reuses_output``: what ``fn`` declares (``Strategy.reuses_output``), to check its output's memory against
    (``storage_problem``, one more call, only when the values match); None: not checked.

    ``fn`` gets ``x`` itself (its layout is part of what is checked). A copy taken before the call tells whether
    ``fn`` wrote into it: that is a forward problem, and ``x`` is restored from the copy at once, before the
    reference computes anything more from it, so the next strategy checked on ``x`` gets it unmodified.
    """
    reference = Reference(x, kwargs) if reference is None else reference
    expected = reference.expected
    before = x.detach().clone()

    def modified() -> str | None:
        changed = changed_entries(x.detach(), before)
        if not changed:
            return None
        with torch.no_grad():
            x.detach().copy_(before)
        return f"it modified its input in place ({changed} of {x.numel()} input entries changed)"

    try:
        return _problems(fn, x, kwargs, backward, reuses_output, reference, expected, modified)
    except BaseException:
        with suppress(Exception):  # restored for whatever is checked next on x; the first error is the one raised
            modified()
        raise


def _problems(
    fn: UnfoldFn,
    x: torch.Tensor,
    kwargs: Mapping,
    backward: bool,
    reuses_output: bool | None,
    reference: Reference,
    expected: torch.Tensor,
    modified: Callable[[], str | None],
) -> tuple[str | None, str | None]:
    """``problems``' checks; ``modified()`` says whether ``fn`` wrote into ``x`` since the copy, restoring it."""
    leaf = x.detach().requires_grad_(backward)
    out = fn(leaf, **kwargs)
    written = modified()
    if written is not None:
        return written, "not checked: the input was modified" if backward else None
    if out.shape != expected.shape or out.dtype != expected.dtype or out.device != expected.device:
        wrong_output = (
            f"output is {tuple(out.shape)} {out.dtype} on {out.device}, "
            f"expected {tuple(expected.shape)} {expected.dtype} on {expected.device}"
        )
        return wrong_output, "not checked: the output is wrong" if backward else None
    differing = (out.detach() != expected).sum().item()
    del expected
    forward_problem = f"{differing} of {out.numel()} output entries differ from the reference" if differing else None
    grad, gradient_problem = None, None
    if backward:
        grad, gradient_problem = _input_gradient(out, leaf, reference)
        written = modified()  # by the backward: before the second call and the reference's exact gradient read x
        if written is not None:
            grad, gradient_problem = None, written
    if forward_problem is None and reuses_output is not None:  # after the backward: a reuser's call overwrites out
        forward_problem = storage_problem(fn, leaf, kwargs, out.detach(), reuses_output)
        written = modified()
        if written is not None:
            return written, "not checked: the input was modified" if backward else None
    del out
    if grad is None:
        return forward_problem, gradient_problem
    excess = reference.gradient_excess(grad)
    excess_problem = f"input gradient exceeds the summation error bound by {excess:.3g}" if excess > 0 else None
    return forward_problem, excess_problem or gradient_problem


def _input_gradient(
    out: torch.Tensor, leaf: torch.Tensor, reference: Reference
) -> tuple[torch.Tensor | None, str | None]:
    """The input gradient of ``out`` for the reference's ``grad_output`` (None where none flows back), and why it
    is wrong where that is known without the bound: no gradient, or a half-precision one that misses the exact
    integer sums."""
    if not out.requires_grad:  # a gradient problem: the forward figures stand, as for a wrong gradient
        return None, "its output has no autograd graph: no gradient flows back to the input"
    integer_grad_output = reference.integer_grad_output if leaf.dtype in HALF_DTYPES else None
    retain = integer_grad_output is not None
    (grad,) = torch.autograd.grad(out, leaf, reference.grad_output, retain_graph=retain, allow_unused=True)
    if grad is None:
        return None, "its output's autograd graph does not reach the input: no gradient flows back to it"
    if integer_grad_output is None:
        return grad, None
    (integer_grad,) = torch.autograd.grad(out, leaf, integer_grad_output)
    return grad, reference.integer_problem(integer_grad)


def mismatch(fn: UnfoldFn, x: torch.Tensor, kwargs: Mapping, *, backward: bool = True) -> str | None:
    """Why ``fn`` does not match the reference on ``x`` (values, and gradients if ``backward``), or None."""
    forward_problem, gradient_problem = problems(fn, x, kwargs, backward=backward)
    return forward_problem or gradient_problem
