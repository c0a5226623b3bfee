"""The bytes an unfold must move and hold: the floors its time and memory are set against.

With ``I`` the input's elements, ``O`` the output's and ``s`` the item size in bytes, an ideal unfold

    moves   (I + O) s         forward: reads the input once, writes the output once
            2 (I + O) s       forward and backward: also reads grad_output, writes grad_input
    holds   O s               forward: its output, new memory (``F.unfold``'s contract, never a view)
            (2 O + I) s       forward and backward: also grad_output and grad_input

and the ``copy_`` roofline moves ``2 O s`` (an output-sized tensor read and another written). A moved amount
over a time is an achieved bandwidth, to set beside ``copy_``'s. A one-element kernel with stride 1 and no padding
(allcnnc-conv8) is no exception: its unfold is a reshape of the input, but the output is still new memory. This
module imports no torch: the bench records each config's ``Sizes`` (``benchmarks.catalogue``) for the reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.configs import LayerConfig


@dataclass(frozen=True)
class Sizes:
    """What the floors of one config depend on."""

    input_numel: int
    output_numel: int
    itemsize: int  # bytes per element
    output_size: tuple[int, ...] = ()  # windows along each spatial dim

    @classmethod
    def of(cls, config: LayerConfig) -> Sizes:
        geometry = config.geometry
        return cls(
            geometry.input_numel, geometry.output_numel, config.torch_dtype.itemsize, tuple(geometry.output_size)
        )


def minimum_bytes_moved(sizes: Sizes, backward: bool) -> int:
    """``(I + O) s``, twice that with the backward: the least traffic of an unfold."""
    once = (sizes.input_numel + sizes.output_numel) * sizes.itemsize
    return 2 * once if backward else once


def copy_bytes_moved(sizes: Sizes) -> int:
    """``2 O s``: the traffic of the ``copy_`` roofline."""
    return 2 * sizes.output_numel * sizes.itemsize


def analytic_minimum_bytes(sizes: Sizes, backward: bool) -> int:
    """``O s``, with the backward ``(2 O + I) s``: the least memory a call can hold at its peak.

    (Older committed results record less for allcnnc-conv8: ``as_strided`` returned a view of the input there
    then, and this minimum allowed it.)"""
    if not backward:
        return sizes.output_numel * sizes.itemsize
    return (2 * sizes.output_numel + sizes.input_numel) * sizes.itemsize
