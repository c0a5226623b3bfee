"""``triton_gather``: the unfold and its backward as two Triton kernels, each writing its result exactly once.

Forward (``_unfold_kernel``): one program per ``(n, c)`` and block of windows ``o``; for each of the ``K`` kernel
offsets ``j``, output entry ``(n, c K + j, o)`` is the input at ``i = o s - p + j d`` per dim, or 0 where ``i``
falls in the padding: one masked load, one store, nothing else allocated.

Backward (``_fold_kernel``): one program per ``(n, c)`` and block of input positions ``x``; the input gradient at
``x`` is the sum over the offsets ``j`` of ``grad_output[n, c K + j, o]`` at the one window
``o = (x + p - j d) / s`` that reads ``x`` through ``j``, where that is an integer in ``[0, O)`` in every dim: at
most ``K`` masked loads and one store per position, no atomics, no index tensor, accumulated in float32 (float64
for float64). The two maps are each other's adjoint, so ``impls.adjoint_pair`` makes them autograd Functions
(double backward, forward-mode AD, ``torch.func.vmap``).

Not yet run on a GPU: checked on CPU under Triton's interpreter, and kept unverified by the registry until the
prepared GPU check passes (docs/strategies.md). Details: docs/internals.md#implstriton_gatherpy.
"""

from __future__ import annotations

import importlib.util
import os

import torch

from impls.adjoint_pair import adjoint_pair
from impls.geometry import Geometry
from impls.strategy import Strategy

# Optional (Linux wheels only), and imported on the first call (``impls.triton_kernels``), not here.
TRITON_INSTALLED = importlib.util.find_spec("triton") is not None
# Triton reads the variable when a kernel is decorated, on the first call; this module reads it for the devices.
INTERPRETED = TRITON_INSTALLED and os.environ.get("TRITON_INTERPRET") == "1"


def _unfold(input: torch.Tensor, g: Geometry) -> torch.Tensor:
    out = input.new_empty(g.output_shape)
    if out.numel() == 0:
        return out
    from impls import triton_kernels

    triton_kernels.unfold_into(out, input.contiguous(), g)
    return out


def _fold(grad_output: torch.Tensor, g: Geometry) -> torch.Tensor:
    grad_input = grad_output.new_empty(g.input_shape)
    if grad_input.numel() == 0:
        return grad_input
    if grad_output.numel() == 0:  # no windows (cannot happen for a valid geometry, kept for safety)
        return grad_input.zero_()
    from impls import triton_kernels

    triton_kernels.fold_into(grad_input, grad_output.contiguous(), g)
    return grad_input


def _unfold_fresh(input: torch.Tensor, g: Geometry, out: torch.Tensor | None) -> torch.Tensor:
    return _unfold(input, g)  # this strategy never writes into a caller's buffer (``out`` is always None)


_TritonUnfold = adjoint_pair("Triton", _unfold_fresh, _fold)


def _triton_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return _TritonUnfold.apply(input, geometry, None)


unfold = Strategy(
    name="triton_gather",
    description="Triton kernels: masked-load forward, per-input-position gather backward (no atomics)",
    spatial_dims=(1, 2, 3),
    # CUDA only; under Triton's interpreter the kernels run on CPU tensors, which is how CI checks them.
    devices=("cuda", "cpu") if INTERPRETED else ("cuda",),
    implementation=_triton_unfold,
    compiles=True,
    missing_requirement=None if TRITON_INSTALLED else "the triton package (pip install triton; Linux only)",
)
