"""An unfold and its adjoint as two ``torch.autograd.Function``s that compose with ``torch.func`` transforms.

The unfold :math:`U` is linear in its input, and its gradient is the adjoint :math:`U^\\top` (the fold, col2im).
So each Function's backward is the other Function, and its forward-mode derivative is itself:

.. math::
    \\frac{\\partial\\, U x}{\\partial x}\\,\\dot x = U \\dot x, \\qquad
    \\nabla_x \\langle g, U x \\rangle = U^\\top g, \\qquad
    \\nabla_g \\langle U^\\top g, v \\rangle = U v,

which gives first- and higher-order gradients (double backward), forward-mode AD (``jvp``) and their mixtures.
``vmap`` folds the mapped dim into the batch: a vmapped input ``(B, N, C, *S)`` is unfolded as ``(B N, C, *S)``
and the output viewed back as ``(B, N, C K, L)``; per-sample gradients (``vmap(grad(f))``) then need nothing
more. Both Functions use ``setup_context``, which ``torch.func`` requires.

A strategy supplies the two computations (``unfold(input, geometry, out)``, writing into ``out`` when given,
and ``fold(grad_output, geometry)``); ``gather``, ``compiled``, ``cpp`` and ``triton_gather`` build their Functions
here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from impls.geometry import Geometry

Unfold = Callable[[torch.Tensor, Geometry, "torch.Tensor | None"], torch.Tensor]
Fold = Callable[[torch.Tensor, Geometry], torch.Tensor]


def traced_or_transformed() -> bool:
    """Whether the call runs inside a ``torch.compile`` trace or under a ``torch.func`` transform, where tensors
    are fake or wrapped: no storage of their own to keep, and no nested compile."""
    return torch.compiler.is_compiling() or torch._C._functorch.peek_interpreter_stack() is not None


def _merged(geometry: Geometry, batch: int) -> Geometry:
    """The geometry of ``batch`` problems stacked along the batch dim."""
    return dataclasses.replace(geometry, input_shape=(batch * geometry.batch_size, *geometry.input_shape[1:]))


def adjoint_pair(name: str, unfold: Unfold, fold: Fold) -> type[torch.autograd.Function]:
    """The unfold Function of a strategy (``Function.apply(input, geometry, out)``), with its fold as its
    backward; see the module docstring."""

    class UnfoldFunction(torch.autograd.Function):
        @staticmethod
        def forward(input: torch.Tensor, geometry: Geometry, out: torch.Tensor | None) -> torch.Tensor:
            return unfold(input, geometry, out)

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
            ctx.geometry = inputs[1]

        @staticmethod
        def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
            if not ctx.needs_input_grad[0]:
                return None, None, None
            return FoldFunction.apply(grad_output, ctx.geometry), None, None

        @staticmethod
        def jvp(ctx: Any, input_tangent: torch.Tensor | None, *_: Any) -> torch.Tensor | None:
            return None if input_tangent is None else unfold(input_tangent, ctx.geometry, None)

        @staticmethod
        def vmap(
            info: Any, in_dims: tuple, input: torch.Tensor, geometry: Geometry, out: torch.Tensor | None
        ) -> tuple[torch.Tensor, int | None]:
            if in_dims[0] is None:  # only something else is mapped: one problem, shared
                return UnfoldFunction.apply(input, geometry, None), None
            stacked = input.movedim(in_dims[0], 0)
            merged = UnfoldFunction.apply(stacked.flatten(0, 1), _merged(geometry, info.batch_size), None)
            return merged.unflatten(0, (info.batch_size, geometry.batch_size)), 0

    class FoldFunction(torch.autograd.Function):
        @staticmethod
        def forward(grad_output: torch.Tensor, geometry: Geometry) -> torch.Tensor:
            return fold(grad_output, geometry)

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
            ctx.geometry = inputs[1]

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None]:
            if not ctx.needs_input_grad[0]:
                return None, None
            return UnfoldFunction.apply(grad, ctx.geometry, None), None

        @staticmethod
        def jvp(ctx: Any, tangent: torch.Tensor | None, *_: Any) -> torch.Tensor | None:
            return None if tangent is None else fold(tangent, ctx.geometry)

        @staticmethod
        def vmap(
            info: Any, in_dims: tuple, grad_output: torch.Tensor, geometry: Geometry
        ) -> tuple[torch.Tensor, int | None]:
            if in_dims[0] is None:
                return FoldFunction.apply(grad_output, geometry), None
            stacked = grad_output.movedim(in_dims[0], 0)
            merged = FoldFunction.apply(stacked.flatten(0, 1), _merged(geometry, info.batch_size))
            return merged.unflatten(0, (info.batch_size, geometry.batch_size)), 0

    UnfoldFunction.__name__ = UnfoldFunction.__qualname__ = f"{name}Unfold"
    FoldFunction.__name__ = FoldFunction.__qualname__ = f"{name}Fold"
    return UnfoldFunction
