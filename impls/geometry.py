"""The geometry of an N-d unfold and the one validation every strategy shares.

For an input of shape ``(N, C, S_1, ..., S_n)`` with ``n`` in {1, 2, 3} spatial dims, kernel ``k``,
dilation ``d``, padding ``p`` and stride ``s`` (each an n-tuple), the number of windows along dim ``i`` is

    O_i = floor((S_i + 2 p_i - d_i (k_i - 1) - 1) / s_i) + 1

and the unfolded output has shape ``(N, C * K, L)`` with ``K = prod(k_i)`` and ``L = prod(O_i)``.
Row ``c * K + flat(j_1, ..., j_n)`` and column ``flat(o_1, ..., o_n)`` (row-major flattening) hold
``padded_input[n, c, o_1 s_1 + j_1 d_1, ..., o_n s_n + j_n d_n]``: for a 4-d input exactly what
``torch.nn.functional.unfold`` returns.

``parse`` checks everything before any work is done, so every strategy rejects bad input with the same
error naming the parameter and its value. As ``F.unfold``, it accepts an empty batch (``N == 0``, an output
``(0, C K, L)``) and refuses an empty channel or spatial dim; a strategy that cannot do ``N == 0`` declares
it (``Strategy.empty_batch_defect``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch

IntOrTuple = int | Sequence[int]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
SPATIAL_DIMS: tuple[int, ...] = (1, 2, 3)
# Arguments are ints in PyTorch's convolution/unfold APIs; past int32 the strided index arithmetic of the
# strategies (stride * element stride, start + stride * (O - 1)) can overflow int64.
MAX_ARGUMENT = 2**31 - 1


def _as_tuple(name: str, value: IntOrTuple, spatial_dims: int, minimum: int) -> tuple[int, ...]:
    """Normalise an int-or-tuple argument to an ``spatial_dims``-tuple, checking type, length and range."""

    def is_int(v: object) -> bool:
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    if is_int(value):
        values = (int(value),) * spatial_dims
    elif isinstance(value, (tuple, list, torch.Size)) and all(is_int(v) for v in value):
        values = tuple(int(v) for v in value)
        if len(values) != spatial_dims:
            raise ValueError(
                f"{name}={value!r} has {len(values)} entries but the input has {spatial_dims} spatial dim(s)"
            )
    else:
        raise TypeError(f"{name} must be an int or a tuple of ints, got {value!r} ({type(value).__name__})")
    if any(v < minimum for v in values):
        bound = "positive" if minimum == 1 else "non-negative"
        raise ValueError(f"{name}={value!r} must be {bound}")
    if any(v > MAX_ARGUMENT for v in values):
        raise ValueError(f"{name}={value!r} exceeds {MAX_ARGUMENT}, the largest value index arithmetic allows")
    return values


@dataclass(frozen=True)
class Geometry:
    """A validated unfold problem: input shape and n-tuples of kernel, dilation, padding, stride."""

    input_shape: tuple[int, ...]
    kernel_size: tuple[int, ...]
    dilation: tuple[int, ...]
    padding: tuple[int, ...]
    stride: tuple[int, ...]

    @classmethod
    def from_shape(
        cls,
        input_shape: Sequence[int],
        kernel_size: IntOrTuple,
        dilation: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        stride: IntOrTuple = 1,
    ) -> Geometry:
        """Validate the shape and arguments (everything but the tensor itself) and build the geometry."""
        shape = tuple(int(s) for s in input_shape)
        spatial_dims = len(shape) - 2
        if spatial_dims not in SPATIAL_DIMS:
            raise ValueError(
                f"input must be 3-d, 4-d or 5-d (N, C, *spatial), got a {len(shape)}-d tensor of shape {shape}"
            )
        if any(s < 0 for s in shape):
            raise ValueError(f"input shape {shape} has a negative dim")
        if shape[1] == 0:  # as F.unfold: "possibly 0 batch size and other non-zero dimensions"
            raise ValueError(f"input has an empty channel dim, shape {shape}; it must be >= 1")
        if any(s == 0 for s in shape[2:]):
            raise ValueError(f"input has an empty spatial dim, shape {shape}")
        geometry = cls(
            input_shape=shape,
            kernel_size=_as_tuple("kernel_size", kernel_size, spatial_dims, minimum=1),
            dilation=_as_tuple("dilation", dilation, spatial_dims, minimum=1),
            padding=_as_tuple("padding", padding, spatial_dims, minimum=0),
            stride=_as_tuple("stride", stride, spatial_dims, minimum=1),
        )
        for i, (span, padded) in enumerate(zip(geometry.kernel_span, geometry.padded_size)):
            if span > padded:
                raise ValueError(
                    f"kernel_size={kernel_size!r} with dilation={dilation!r} spans {span} elements along spatial "
                    f"dim {i}, more than the padded input's {padded} (input size {shape[2 + i]}, "
                    f"padding={padding!r})"
                )
        if geometry.output_numel >= 2**62:
            raise ValueError(
                f"kernel_size={kernel_size!r}, padding={padding!r}, stride={stride!r} on input {shape} give an "
                f"output of {geometry.output_numel} elements, beyond what int64 indexing can address"
            )
        return geometry

    @property
    def spatial_dims(self) -> int:
        return len(self.input_shape) - 2

    @property
    def batch_size(self) -> int:
        return self.input_shape[0]

    @property
    def channels(self) -> int:
        return self.input_shape[1]

    @property
    def spatial_size(self) -> tuple[int, ...]:
        return self.input_shape[2:]

    @property
    def padded_size(self) -> tuple[int, ...]:
        return tuple(s + 2 * p for s, p in zip(self.spatial_size, self.padding))

    @property
    def kernel_span(self) -> tuple[int, ...]:
        """Extent of one dilated window along each spatial dim: ``d (k - 1) + 1``."""
        return tuple(d * (k - 1) + 1 for k, d in zip(self.kernel_size, self.dilation))

    @property
    def output_size(self) -> tuple[int, ...]:
        """Number of windows ``O_i`` along each spatial dim."""
        return tuple((p - span) // s + 1 for p, span, s in zip(self.padded_size, self.kernel_span, self.stride))

    @property
    def kernel_numel(self) -> int:
        return math.prod(self.kernel_size)

    @property
    def num_patches(self) -> int:
        return math.prod(self.output_size)

    @property
    def output_shape(self) -> tuple[int, int, int]:
        return (self.batch_size, self.channels * self.kernel_numel, self.num_patches)

    @property
    def output_numel(self) -> int:
        return math.prod(self.output_shape)

    @property
    def input_numel(self) -> int:
        return math.prod(self.input_shape)


def parse(
    input: object,
    kernel_size: IntOrTuple,
    dilation: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    stride: IntOrTuple = 1,
) -> Geometry:
    """Validate a call of the unfold contract and return its geometry; raise before any work is done."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
    if input.dtype not in SUPPORTED_DTYPES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise TypeError(f"input.dtype={input.dtype} is not supported; supported: {names}")
    if input.layout != torch.strided:  # sparse or mkldnn: each strategy would fail differently, deep inside torch
        raise TypeError(f"input.layout={input.layout} is not supported; only dense (torch.strided) input is")
    return Geometry.from_shape(input.shape, kernel_size, dilation, padding, stride)


def pad_spatial(input: torch.Tensor, padding: tuple[int, ...]) -> torch.Tensor:
    """Zero-pad the spatial dims (a new tensor); return the input itself when there is no padding."""
    if not any(padding):
        return input
    # F.pad takes (last_left, last_right, second_last_left, ...).
    pads = [p for p in reversed(padding) for _ in range(2)]
    return torch.nn.functional.pad(input, pads)
