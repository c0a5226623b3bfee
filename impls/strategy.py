"""What a strategy is: an unfold implementation plus what it declares about itself.

A ``Strategy`` is called exactly like ``torch.nn.functional.unfold``
(``unfold(input, kernel_size, dilation=1, padding=0, stride=1)``). The call validates the arguments
once, for every strategy alike (``impls.geometry.parse``), checks that the strategy supports the input's
spatial dims and device, and only then hands the validated ``Geometry`` to the implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from impls.geometry import Geometry, IntOrTuple, parse

Implementation = Callable[[torch.Tensor, Geometry], torch.Tensor]


@dataclass(frozen=True)
class Strategy:
    """An unfold strategy with its registry metadata.

    Attributes:
        name: registry key, used in benchmark names and reports.
        description: one line on what the strategy does.
        spatial_dims: the spatial dims (1, 2, 3) it supports.
        devices: the device types ("cpu", "cuda") it supports.
        implementation: ``(input, geometry) -> output``; only ever called with validated arguments.
        exact_with_nonfinite: False when an inf/NaN in the input changes other output entries
            (e.g. a convolution computes ``0 * inf = NaN``); tests check this claim both ways.
        exact_under_tf32: False when float32 on CUDA may be rounded to TF32 if PyTorch allows it
            (convolution- or matmul-based strategies); tests check it on a GPU.
    """

    name: str
    description: str
    spatial_dims: tuple[int, ...]
    devices: tuple[str, ...]
    implementation: Implementation
    exact_with_nonfinite: bool = True
    exact_under_tf32: bool = True

    def unsupported_reason(self, spatial_dims: int, device: str | torch.device) -> str | None:
        """Why this strategy cannot run ``spatial_dims``-d input on ``device``, or None if it can."""
        device_type = torch.device(device).type
        if spatial_dims not in self.spatial_dims:
            return f"strategy {self.name!r} supports spatial dims {self.spatial_dims}, not {spatial_dims}"
        if device_type not in self.devices:
            return f"strategy {self.name!r} supports devices {self.devices}, not {device_type!r}"
        return None

    def supports(self, spatial_dims: int, device: str | torch.device) -> bool:
        return self.unsupported_reason(spatial_dims, device) is None

    def __call__(
        self,
        input: torch.Tensor,
        kernel_size: IntOrTuple,
        dilation: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        stride: IntOrTuple = 1,
    ) -> torch.Tensor:
        geometry = parse(input, kernel_size, dilation, padding, stride)
        reason = self.unsupported_reason(geometry.spatial_dims, input.device)
        if reason is not None:
            raise ValueError(f"input (shape {tuple(input.shape)}, device {input.device}): {reason}")
        return self.implementation(input, geometry)
