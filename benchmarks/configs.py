"""The one table of layer configurations the suite benchmarks (and the tests check) every strategy on.

All-CNN-C on CIFAR-100 (DeepOBS ``cifar100_allcnnc``, batch size 256): unfold depends only on a layer's
*input* and kernel geometry, so each row is the input of one convolution layer. DeepOBS uses TensorFlow
'same' padding. For the stride-1 layers that is symmetric padding 1. For the stride-2 layers (conv3, conv6)
on even inputs TensorFlow pads 0 before and 1 after; the symmetric padding 1 used here gives the same
output size (and so the same amount of work and memory), with every window shifted by one pixel.
conv5 (input 192x16x16, stride 1) is included although it has conv6's input: its unfold (stride 1) differs
from conv6's (stride 2). conv9 (1x1 on 192x6x6) has exactly conv8's input and kernel, hence the same unfold, and is
not repeated.

The other rows make the suite's N-d and half-precision claims benchmarked, not only tested: ``example``
(unfoldNd's example configuration), a dilated layer, a 1-d layer (3-d tensor), a 3-d layer (5-d tensor), and
conv4 in bfloat16 and in float16 (conv4: the smallest stride-1 All-CNN-C layer with 96 channels, so the half
rows stay cheap; ``onehot`` refuses both dtypes on CPUs not recorded free of oneDNN's defects, see its
``known_defects``).

``LayerConfig.with_batch_size`` scales a row down (quick profiles, tests) without a second table. The table
imports no torch (the reports read it where only results are); a config's geometry, dtype and input do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from impls.geometry import Geometry


@dataclass(frozen=True)
class LayerConfig:
    """One unfold problem: input shape ``(N, C, *spatial)`` and kernel geometry."""

    name: str
    input_shape: tuple[int, ...]
    kernel_size: int | tuple[int, ...]
    stride: int | tuple[int, ...] = 1
    padding: int | tuple[int, ...] = 0
    dilation: int | tuple[int, ...] = 1
    dtype: str = "float32"
    source: str = ""

    @property
    def geometry(self) -> Geometry:
        from impls.geometry import Geometry

        return Geometry.from_shape(self.input_shape, self.kernel_size, self.dilation, self.padding, self.stride)

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.dtype)

    @property
    def spatial_dims(self) -> int:
        return len(self.input_shape) - 2

    @property
    def batch_size(self) -> int:
        return self.input_shape[0]

    def with_batch_size(self, batch_size: int) -> LayerConfig:
        """The same layer with batch size ``batch_size`` (name unchanged: the profile records the batch)."""
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be positive")
        return dataclasses.replace(self, input_shape=(batch_size, *self.input_shape[1:]))

    def unfold_kwargs(self) -> dict[str, int | tuple[int, ...]]:
        return {
            "kernel_size": self.kernel_size,
            "dilation": self.dilation,
            "padding": self.padding,
            "stride": self.stride,
        }

    def make_input(self, device: str | torch.device = "cpu", seed: int = 0) -> torch.Tensor:
        """A reproducible standard-normal input of this config's shape and dtype."""
        import torch

        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(self.input_shape, generator=generator, dtype=torch.float32)
        return x.to(device=device, dtype=self.torch_dtype)


_ALLCNNC = "DeepOBS cifar100_allcnnc"

CONFIGS: tuple[LayerConfig, ...] = (
    LayerConfig("example", (64, 3, 32, 32), 3, stride=2, padding=1, source="unfoldNd's example"),
    LayerConfig("allcnnc-conv1", (256, 3, 32, 32), 3, stride=1, padding=1, source=_ALLCNNC),
    LayerConfig("allcnnc-conv2", (256, 96, 32, 32), 3, stride=1, padding=1, source=_ALLCNNC),
    LayerConfig("allcnnc-conv3", (256, 96, 32, 32), 3, stride=2, padding=1, source=_ALLCNNC),
    LayerConfig("allcnnc-conv4", (256, 96, 16, 16), 3, stride=1, padding=1, source=_ALLCNNC),
    LayerConfig("allcnnc-conv5", (256, 192, 16, 16), 3, stride=1, padding=1, source=_ALLCNNC),
    LayerConfig("allcnnc-conv6", (256, 192, 16, 16), 3, stride=2, padding=1, source=_ALLCNNC),
    LayerConfig("allcnnc-conv7", (256, 192, 8, 8), 3, stride=1, padding=0, source=_ALLCNNC),
    LayerConfig("allcnnc-conv8", (256, 192, 6, 6), 1, stride=1, padding=0, source=_ALLCNNC),
    LayerConfig(
        "dilated-conv4",
        (256, 96, 16, 16),
        3,
        stride=1,
        padding=2,
        dilation=2,
        source="allcnnc-conv4's input with a dilation-2 kernel ('same' padding 2)",
    ),
    LayerConfig("seq1d-conv", (256, 96, 256), 5, stride=1, padding=2, source="a 1-d (sequence) layer"),
    LayerConfig("vol3d-conv", (16, 16, 16, 16, 16), 3, stride=1, padding=1, source="a 3-d (volumetric) layer"),
    LayerConfig("conv4-bfloat16", (256, 96, 16, 16), 3, 1, 1, dtype="bfloat16", source="allcnnc-conv4 in bfloat16"),
    LayerConfig("conv4-float16", (256, 96, 16, 16), 3, 1, 1, dtype="float16", source="allcnnc-conv4 in float16"),
)

CONFIGS_BY_NAME: dict[str, LayerConfig] = {c.name: c for c in CONFIGS}


def get_config(name: str) -> LayerConfig:
    """The config called ``name``; a ``KeyError`` listing the known names otherwise."""
    try:
        return CONFIGS_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown config {name!r}; known configs: {', '.join(CONFIGS_BY_NAME)}") from None


def configs(batch_size: int | None = None) -> list[LayerConfig]:
    """Every config, with its batch size capped at ``batch_size`` if given (never scaled up)."""
    if batch_size is None:
        return list(CONFIGS)
    return [c.with_batch_size(min(batch_size, c.batch_size)) for c in CONFIGS]
