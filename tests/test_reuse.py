"""The ``out=`` path and the reusing strategies (``Strategy.reuses_output``): a bad buffer is refused before
anything is written, a reusing strategy really overwrites its previous result and keeps one buffer, a fresh
one never does, the correctness gate holds each strategy to its declaration, and autograd refuses a backward
through an overwritten result."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from benchmarks.cells import Cell, check_cell
from benchmarks.configs import LayerConfig
from impls import STRATEGIES, compiled, cpp, gather, parse
from impls.parity import shares_storage
from impls.reference import reference_unfold

SENTINEL = -7.0  # no unfold of the input below writes it: an out= touched before the check is told apart
WRITERS = {"gather": gather.unfold_into, "compiled": compiled.unfold_into}
if cpp.MISSING_REQUIREMENT is None:  # the C++ kernel's unfold_out
    WRITERS["cpp"] = cpp.unfold_into
REUSING = [name for name, strategy in STRATEGIES.items() if strategy.reuses_output]


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize(
    ("out", "message"),
    [
        (torch.full((2, 27, 16), SENTINEL), "shape"),
        (torch.full((2, 27, 25), SENTINEL, dtype=torch.float64), "float32"),
        (torch.full((2, 25, 27), SENTINEL).transpose(1, 2), "contiguous=False"),
        (torch.full((2, 27, 25), SENTINEL, requires_grad=True), "must not require grad"),
    ],
)
def test_out_is_checked_before_any_work(writer, out, message):
    x = torch.rand(2, 3, 5, 5)  # in [0, 1): never the sentinel
    with pytest.raises(ValueError, match=message):
        WRITERS[writer](x, parse(x, kernel_size=3, padding=1), out=out)
    assert (out.detach() == SENTINEL).all()


@pytest.mark.parametrize("writer", list(WRITERS))
def test_out_receives_the_exact_unfold_and_is_returned(writer):
    x = torch.randn(2, 3, 7, 6)
    kwargs = {"kernel_size": (3, 2), "dilation": (2, 1), "padding": (1, 0), "stride": (1, 2)}
    geometry = parse(x, **kwargs)
    out = torch.full(geometry.output_shape, SENTINEL)
    result = WRITERS[writer](x, geometry, out=out)
    assert result.data_ptr() == out.data_ptr() and torch.equal(out, reference_unfold(x, **kwargs))


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_a_strategy_reuses_its_output_exactly_when_it_declares_so(name):
    strategy = STRATEGIES[name]
    x, y = torch.randn(2, 3, 6, 6), torch.randn(2, 3, 6, 6)
    first = strategy(x, 3)
    second = strategy(y, 3)
    assert torch.equal(second, reference_unfold(y, kernel_size=3))
    assert shares_storage(first, second) == strategy.reuses_output, (
        f"{name} declares reuses_output={strategy.reuses_output}"
    )
    if strategy.reuses_output:
        assert torch.equal(first, second)  # the first result now holds the second call's values
        other = strategy(torch.randn(1, 3, 6, 6), 3)  # another shape replaces the one buffer
        assert other.data_ptr() != second.data_ptr()


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_the_gate_passes_a_strategy_as_declared_and_fails_it_under_the_other_declaration(name):
    """The gate checks the output's memory against ``reuses_output``: every strategy passes as it is declared, values
    and gradient included (a reuser's second call comes after its backward), and fails with the claim flipped."""
    config = LayerConfig("small", (2, 3, 6, 6), 3, padding=1)
    cell = Cell(STRATEGIES[name], config, "cpu")
    if cell.skip_reason() is not None:
        pytest.skip(cell.skip_reason())
    assert check_cell(cell).problem(backward=True) is None
    flipped = replace(cell.strategy, reuses_output=not cell.strategy.reuses_output)
    problem = check_cell(Cell(flipped, config, "cpu")).problem(backward=False)
    assert problem is not None and "reuses_output=True" in problem, problem


@pytest.mark.parametrize("name", REUSING)
def test_a_backward_through_an_overwritten_result_is_refused(name):
    # The buffer is written in place, as autograd sees: once the next call has overwritten it, autograd raises
    # rather than let anyone differentiate through a result that no longer holds its values.
    reuse = STRATEGIES[name]
    x = torch.randn(2, 3, 6, 6, requires_grad=True)
    out = reuse(x, 3, padding=1)
    reuse(torch.randn(2, 3, 6, 6), 3, padding=1)
    with pytest.raises(RuntimeError, match="modified inplace"):
        torch.autograd.grad(out, x, torch.randn_like(out))


@pytest.mark.parametrize("name", REUSING)
def test_a_backward_before_the_next_call_is_exact(name):
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64, requires_grad=True)
    grad_output = torch.randn(2, 27, 36, dtype=torch.float64)
    (mine,) = torch.autograd.grad(STRATEGIES[name](x, 3, padding=1), x, grad_output)
    (expected,) = torch.autograd.grad(torch.nn.functional.unfold(x, 3, padding=1), x, grad_output)
    assert torch.allclose(mine, expected, rtol=0, atol=1e-12)


TRANSFORMS = {
    "jvp": lambda f, x: torch.func.jvp(f, (x,), (torch.ones_like(x),)),
    "vmap": lambda f, x: torch.func.vmap(f)(torch.stack([x, 2 * x])),
    "torch.compile": lambda f, x: torch.compile(f, fullgraph=True, dynamic=False)(x),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("name", REUSING)
def test_a_transform_leaves_no_buffer_behind(name, transform):
    # Inside a transform the input is a wrapper or a fake tensor; a buffer made from it and kept would outlive
    # the transform (a jvp's kept buffer made the next torch.compile fail: a graph input needs a data pointer).
    kwargs = {"kernel_size": 3, "padding": 1, "stride": 2}
    x = torch.randn(2, 3, 7, 7, dtype=torch.float64)
    expected = torch.nn.functional.unfold(x, **kwargs)

    def unfold(v: torch.Tensor) -> torch.Tensor:
        return STRATEGIES[name](v, **kwargs)

    STRATEGIES[name](torch.randn(1, 3, 7, 7), **kwargs)  # another shape: no buffer of this shape is kept
    TRANSFORMS[transform](unfold, x)
    torch.compiler.reset()
    assert torch.equal(torch.compile(unfold, fullgraph=True, dynamic=False)(x), expected)
    first, second = unfold(x), unfold(x)
    assert torch.equal(second, expected) and first.data_ptr() == second.data_ptr()
