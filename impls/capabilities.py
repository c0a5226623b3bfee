"""What a strategy can do beyond a plain call: each capability checked against ``F.unfold`` on the same problem.

A maintainer replacing ``torch.nn.functional.unfold`` needs the replacement to work wherever it works: under
autograd to any order, under ``torch.func`` transforms (forward-mode AD, ``vmap``, per-sample gradients as
KFAC and BackPACK compute them), inside ``torch.compile``, on an empty batch, on channels_last and
non-contiguous input, in every dtype. ``check`` runs one capability on one strategy and says:

- ``works``: the result matches ``F.unfold``'s under the same transform (float64: values exact, derivatives
  within 1e-12 relative; other dtypes: ``impls.parity``'s bounds);
- ``declared defect: ...``: the strategy declares it cannot (``Strategy.empty_batch_defect``,
  ``Strategy.compile_defect``) and the check confirms that it still fails without the declaration; or it
  refuses the dtype for a ``KnownDefect`` (whose reproducer ``tests/test_caveats.py`` checks: a backend crash
  is not run here);
- ``unsupported: ...``: the strategy does not run on this device at all;
- ``fails: ...``: an undeclared failure, which the tests reject, or ``declared defect no longer seen``.

``matrix`` gives every strategy's row; the test suite checks every cell (``tests/test_capabilities.py``), and
``unfold-bench capabilities`` writes the matrix of this machine for the site.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping

import torch
import torch.nn.functional as F

from impls.geometry import parse
from impls.parity import mismatch
from impls.strategy import DEVICES, Strategy

SHAPE = (2, 3, 7, 7)  # the problem of the capability checks: stride 2, padding 1, a 3x3 kernel
KWARGS = {"kernel_size": 3, "padding": 1, "stride": 2}
WORKS = "works"


def _input(shape: tuple[int, ...] = SHAPE, dtype: torch.dtype = torch.float64, device: str = "cpu") -> torch.Tensor:
    """The checks' input, drawn on the CPU (the same values on every device) and moved to ``device``."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return x.to(device=device, dtype=dtype)


def _same(a: torch.Tensor, b: torch.Tensor) -> str | None:
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)}, expected {tuple(b.shape)}"
    if not torch.allclose(a, b, rtol=1e-12, atol=1e-12):
        return f"differs from F.unfold's by up to {(a - b).abs().max().item():.3g}"
    return None


Check = Callable[[Strategy, str], "str | None"]  # (strategy, device) -> the problem found, or None


def _under(transform: Callable[[Callable], Callable[[torch.Tensor], object]]) -> Check:
    """A check that ``transform(f)(x)`` agrees for the strategy and for ``F.unfold``."""

    def check(strategy: Strategy, device: str) -> str | None:
        x = _input(device=device)
        got = transform(lambda v: strategy(v, **KWARGS))(x)
        expected = transform(lambda v: F.unfold(v, **KWARGS))(x)
        for a, b in zip(
            got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)
        ):
            problem = _same(a, b)
            if problem is not None:
                return problem
        return None

    return check


def _weights(device: torch.device) -> torch.Tensor:
    return torch.randn(27, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(device)


def _per_sample(f: Callable) -> Callable:
    """Per-sample gradients of a linear layer's loss, as KFAC and BackPACK compute them."""

    def run(x: torch.Tensor) -> torch.Tensor:
        w = _weights(x.device)
        return torch.func.vmap(torch.func.grad(lambda xi: (f(xi.unsqueeze(0)).transpose(1, 2) @ w).square().sum()))(x)

    return run


def _double_backward(f: Callable) -> Callable:
    def second(x: torch.Tensor) -> torch.Tensor:
        x = x.detach().requires_grad_(True)
        (first,) = torch.autograd.grad(f(x).square().sum(), x, create_graph=True)
        (again,) = torch.autograd.grad(first.square().sum(), x)
        return again

    return second


def _jvp(f: Callable) -> Callable:
    return lambda x: torch.func.jvp(f, (x,), (_input(x.shape, device=x.device) + 1,))


def _vmap(f: Callable) -> Callable:
    return lambda x: torch.func.vmap(f)(torch.stack([x, 2 * x, x + 1]))


def _compiled(f: Callable) -> Callable:
    def run(x: torch.Tensor) -> object:
        # Every strategy's check compiles the same lambda (``_under``): without a reset, the strategies checked
        # in one process would count as recompiles of it, and Dynamo's recompile limit would fail the later ones.
        torch.compiler.reset()
        return torch.compile(f, fullgraph=True, dynamic=False)(x)

    return run


def _empty_batch(strategy: Strategy, device: str) -> str | None:
    x = _input((0, *SHAPE[1:]), device=device).requires_grad_(True)
    out = strategy.implementation(x, parse(x, **KWARGS))  # the raw implementation: a declaration must still hold
    out.backward(torch.ones_like(out))
    return _same(out, F.unfold(x.detach(), **KWARGS)) or _same(x.grad, torch.zeros_like(x))


def _layout(make: Callable[[torch.Tensor], torch.Tensor]) -> Check:
    return lambda strategy, device: mismatch(
        strategy, make(_input(dtype=torch.float32, device=device)), KWARGS, backward=True
    )


def _dtype(dtype: torch.dtype) -> Check:
    return lambda strategy, device: mismatch(strategy, _input(dtype=dtype, device=device), KWARGS, backward=True)


CHECKS: dict[str, Check] = {
    "gradient": _under(lambda f: lambda x: torch.func.grad(lambda v: f(v).square().sum())(x)),
    "double backward": _under(_double_backward),
    "forward-mode AD (jvp)": _under(_jvp),
    "vmap": _under(_vmap),
    "per-sample gradients": _under(_per_sample),
    "torch.compile(fullgraph)": _under(_compiled),
    "empty batch (N=0)": _empty_batch,
    "channels_last": _layout(lambda x: x.contiguous(memory_format=torch.channels_last)),
    "non-contiguous": _layout(lambda x: torch.cat([x, x], dim=-1)[..., ::2]),
    **{
        f"dtype {str(d).removeprefix('torch.')}": _dtype(d)
        for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    },
}
CAPABILITIES: tuple[str, ...] = tuple(CHECKS)
# what a user names on the command line (``unfold-bench advise --needs vmap,forward-ad``) -> the capability
NEEDS: dict[str, str] = {
    "gradient": "gradient",
    "double-backward": "double backward",
    "forward-ad": "forward-mode AD (jvp)",
    "vmap": "vmap",
    "per-sample-gradients": "per-sample gradients",
    "torch-compile": "torch.compile(fullgraph)",
    "empty-batch": "empty batch (N=0)",
    "channels-last": "channels_last",
    "non-contiguous": "non-contiguous",
}


def declared(strategy: Strategy, capability: str) -> str | None:
    """The defect ``strategy`` declares for ``capability``, or None."""
    return {"empty batch (N=0)": strategy.empty_batch_defect, "torch.compile(fullgraph)": strategy.compile_defect}.get(
        capability
    )


@contextlib.contextmanager
def _exact_float32() -> Iterator[None]:
    """TF32 off for the block, as the benchmarks have it (``benchmarks.cells.use_exact_float32``): a strategy that
    convolves would otherwise round float32 on a GPU (declared by ``Strategy.exact_under_tf32`` and checked by
    ``tests/test_caveats.py``), and the check is of what it computes exactly."""
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def check(strategy: Strategy, capability: str, device: str = "cpu") -> str:
    """One cell of the matrix (module docstring); on a device that is not here, ``unverified``."""
    if device != "cpu" and not (device == "cuda" and torch.cuda.is_available()):
        return f"unverified: no {device} device on this machine"
    dtype = torch.float64 if not capability.startswith("dtype ") else getattr(torch, capability.split()[-1])
    for known in strategy.known_defects:
        if known.refuses(device, dtype):
            return f"declared defect: {known.refusal()} (reproducer checked by tests/test_caveats.py)"
    reason = strategy.unsupported_reason(2, device, dtype)
    if reason is not None:
        return f"unsupported: {reason}"
    defect = declared(strategy, capability)
    unrefused = dataclasses.replace(strategy, empty_batch_defect=None, compile_defect=None)
    try:
        with _exact_float32():
            problem = CHECKS[capability](unrefused, device)
    except Exception as error:  # a failing capability is a finding, reported as a cell
        problem = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"
    if defect is not None:
        return f"declared defect: {defect}" if problem is not None else "fails: declared defect no longer seen"
    return WORKS if problem is None else f"fails: {problem}"


def matrix(
    strategies: Mapping[str, Strategy], devices: tuple[str, ...] = DEVICES
) -> dict[str, dict[str, dict[str, str]]]:
    """Every capability of every strategy on each of ``devices``: ``{device: {strategy: {capability: cell}}}``."""
    unknown = [d for d in devices if d not in DEVICES]
    if unknown or not devices:
        raise ValueError(f"devices={devices!r}: each must be one of {DEVICES}")
    return {d: {name: {c: check(s, c, d) for c in CAPABILITIES} for name, s in strategies.items()} for d in devices}
