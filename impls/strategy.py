"""What a strategy is: an unfold implementation plus what it declares about itself.

A ``Strategy`` is called exactly like ``torch.nn.functional.unfold``
(``unfold(input, kernel_size, dilation=1, padding=0, stride=1)``). The call validates the arguments
once, for every strategy alike (``impls.geometry.parse``), checks that the strategy supports the input's
spatial dims and device, and only then hands the validated ``Geometry`` to the implementation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from impls.cpu_isa import onednn_isa
from impls.geometry import Geometry, IntOrTuple, parse

Implementation = Callable[[torch.Tensor, Geometry], torch.Tensor]
# A strategy's name is part of benchmark cells ("gather:allcnnc-conv2:forward", asv's "('gather', ...)"), of the
# gate's "strategy, config, device" and of the site's pages, so it holds none of their separators or markup
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
DEVICES: tuple[str, ...] = ("cpu", "cuda")  # the device types a strategy may declare (benchmarks.vocabulary too)


@dataclass(frozen=True)
class KnownDefect:
    """A device and dtype on which a strategy is wrong or crashes, so it refuses that input where the defect can be.

    ``effect`` is ``"wrong values"`` or ``"crash"`` (the process dies, e.g. a segfault in a backend).
    ``reproducer`` is ``(input_shape, unfold_kwargs, seed)``: a standard-normal input (``torch.Generator``
    seeded with ``seed``, cast to ``dtype``, in memory ``layout``) on which the raw implementation shows the
    effect. The tests run it (a crash in a subprocess) where it was seen and fail once it is gone, so the refusal
    is reconsidered when upstream fixes it.

    A CPU backend's defect can depend on the CPU: oneDNN dispatches by instruction set (``impls.cpu_isa``).
    ``seen_on`` lists the oneDNN ISAs on which the reproducer showed the effect on torch ``observed_on``, and
    ``not_seen_on`` those on which it ran exact. The input is refused at call time unless this CPU's ISA is in
    ``not_seen_on`` and torch is ``observed_on`` (``refuses``): where the defect was seen, and on every CPU or
    torch the record does not know, since a crash there would kill a whole run. The tests check the record on
    the CPU they run on: the effect must show on a ``seen_on`` ISA, the reproducer run exact (and the input be
    accepted) on a ``not_seen_on`` one, and an effect that shows on an ISA in neither list fails until the ISA
    is added to ``seen_on``.
    """

    device: str
    dtype: torch.dtype
    effect: str
    description: str
    reproducer: tuple[tuple[int, ...], dict, int]
    layout: str = "contiguous"  # or "channels_last": channels_last, or channels_last_3d for a 3-d input
    observed_on: str = "2.13.0"  # torch version the reproducer was verified on; refused on every version
    seen_on: tuple[str, ...] = ()  # oneDNN ISAs (``impls.cpu_isa.onednn_isa``) where the effect showed
    not_seen_on: tuple[str, ...] = ()  # oneDNN ISAs where the reproducer ran exact

    def __post_init__(self) -> None:
        if self.effect not in ("wrong values", "crash"):
            raise ValueError(f"effect={self.effect!r} must be 'wrong values' or 'crash'")
        if self.layout not in ("contiguous", "channels_last"):
            raise ValueError(f"layout={self.layout!r} must be 'contiguous' or 'channels_last'")
        both = set(self.seen_on) & set(self.not_seen_on)
        if both:
            raise ValueError(f"ISAs {sorted(both)} are in both seen_on and not_seen_on")

    def reproducer_input(self) -> torch.Tensor:
        """The reproducer's input: standard normal from its seed, in its dtype, on its device, in its layout."""
        shape, _, seed = self.reproducer
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(device=self.device, dtype=self.dtype)
        if self.layout == "channels_last":
            x = x.to(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
        return x

    def exempt_here(self) -> bool:
        """True when this machine is recorded free of the defect: a CPU defect, this torch, an ISA in ``not_seen_on``.

        Reads the ISA (a subprocess, once per process, unless the parent handed it down) only for a CPU defect with
        a ``not_seen_on`` record."""
        if self.device != "cpu" or not self.not_seen_on or torch.__version__.split("+")[0] != self.observed_on:
            return False
        return onednn_isa() in self.not_seen_on

    def refuses(self, device: str | torch.device, dtype: torch.dtype | None) -> bool:
        """Whether a strategy with this defect refuses ``dtype`` on ``device`` on this machine (see the class)."""
        return torch.device(device).type == self.device and dtype == self.dtype and not self.exempt_here()

    def refusal(self) -> str:
        """Why the input is refused here: the defect and, for a CPU defect, where it was seen and this CPU's ISA."""
        if self.device != "cpu":
            return self.description
        seen = f"seen on oneDNN ISA {', '.join(map(repr, self.seen_on))}" if self.seen_on else "seen on a CPU"
        return (
            f"{self.description} ({seen} with torch {self.observed_on}; this CPU's oneDNN ISA {onednn_isa()!r} "
            f"on torch {torch.__version__} is not recorded as free of it)"
        )


@dataclass(frozen=True)
class Strategy:
    """An unfold strategy with its registry metadata.

    Attributes:
        name: registry key, used in benchmark names and reports (``NAME``: letters, digits, "_", "." and "-").
        description: one line on what the strategy does.
        spatial_dims: the spatial dims (1, 2, 3) it supports.
        devices: the device types ("cpu", "cuda") it supports.
        implementation: ``(input, geometry) -> output``; only ever called with validated arguments.
        exact_with_nonfinite: False when an inf/NaN in the input changes other output entries
            (e.g. a convolution computes ``0 * inf = NaN``); tests check this claim both ways.
        exact_under_tf32: False when float32 on CUDA may be rounded to TF32 if PyTorch allows it
            (convolution- or matmul-based strategies); tests check it on a GPU.
        contiguous_on_channels_last: False when channels_last input gives a non-contiguous output (same values,
            e.g. a view of a convolution's channels_last result); tests check this claim both ways.
        known_defects: device/dtype combinations refused because the strategy is wrong there (on CPU: except on
            the oneDNN ISAs recorded free of the defect, ``KnownDefect.refuses``).
        reuses_output: True when the strategy returns the same buffer again for a later call of the same shape
            (so the later call overwrites the earlier result); the memory benchmarks charge it the buffer.
        compiles: True when the first call with a new shape compiles code (``torch.compile``, a Triton kernel):
            the benchmarks make an untimed call first and report the compile time as its own figure.
        missing_requirement: what this environment lacks for the strategy to run at all (an optional package),
            or None; such a strategy refuses every input, saying what to install.
        empty_batch_defect: why the strategy cannot unfold an empty batch (``N == 0``), which ``F.unfold``
            accepts, or None; such a strategy refuses it, and the tests check that the raw implementation
            still fails there (so the refusal goes when the defect does).
        compile_defect: why the strategy fails inside ``torch.compile(fullgraph=True)``, or None; checked both
            ways by the tests (``impls.capabilities``).
        builds_extension: True when the strategy's kernel is a C++ extension built (once, cached) on first use.
        origin: where an outside strategy comes from (its package and version, or the module it was named by;
            ``impls.plugins``), or None for this repository's own.
        advises_huge_pages: True when the strategy advises its fresh results (from a size its module states) into
            transparent huge pages before writing them (Linux ``madvise``), so they page-fault once per 2 MiB
            instead of once per 4 KiB; its floor is then ``time_fresh_output_huge_pages`` (``benchmarks.bounds``),
            not ``time_fresh_output``. Checked both ways by the tests.
    """

    name: str
    description: str
    spatial_dims: tuple[int, ...]
    devices: tuple[str, ...]
    implementation: Implementation
    exact_with_nonfinite: bool = True
    exact_under_tf32: bool = True
    contiguous_on_channels_last: bool = True
    known_defects: tuple[KnownDefect, ...] = ()
    reuses_output: bool = False
    compiles: bool = False
    builds_extension: bool = False
    origin: str | None = None
    missing_requirement: str | None = None
    empty_batch_defect: str | None = None
    compile_defect: str | None = None
    advises_huge_pages: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or NAME.fullmatch(self.name) is None:
            raise ValueError(
                f"Strategy name={self.name!r}: use letters, digits, '_', '.' and '-' (not first): the name is part of "
                "benchmark cells, the gate's table and the site's pages"
            )
        unknown = [d for d in self.devices if d not in DEVICES]
        if unknown or not self.devices:
            raise ValueError(f"Strategy {self.name!r}: devices={self.devices!r}: each must be one of {DEVICES}")

    @property
    def machinery(self) -> tuple[str, ...]:
        """What the strategy needs beyond PyTorch's eager operators: the reports' measure of simplicity, their
        tie-break between strategies whose times are a statistical tie."""
        needs = []
        if self.compiles:
            needs.append("torch.compile")
        if self.builds_extension:
            needs.append("a C++ extension")
        if self.reuses_output:
            needs.append("a reused output")
        if self.advises_huge_pages:
            needs.append("huge-page advice")
        return tuple(needs)

    def unsupported_reason(
        self, spatial_dims: int, device: str | torch.device, dtype: torch.dtype | None = None
    ) -> str | None:
        """Why this strategy cannot run ``spatial_dims``-d input on ``device`` (in ``dtype``), or None."""
        device_type = torch.device(device).type
        if self.missing_requirement is not None:
            return f"strategy {self.name!r} needs {self.missing_requirement}"
        if spatial_dims not in self.spatial_dims:
            return f"strategy {self.name!r} supports spatial dims {self.spatial_dims}, not {spatial_dims}"
        if device_type not in self.devices:
            return f"strategy {self.name!r} supports devices {self.devices}, not {device_type!r}"
        for defect in self.known_defects:
            if defect.refuses(device_type, dtype):
                return f"strategy {self.name!r} refuses {dtype} on {device_type}: {defect.refusal()}"
        return None

    def supports(self, spatial_dims: int, device: str | torch.device, dtype: torch.dtype | None = None) -> bool:
        return self.unsupported_reason(spatial_dims, device, dtype) is None

    def __call__(
        self,
        input: torch.Tensor,
        kernel_size: IntOrTuple,
        dilation: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        stride: IntOrTuple = 1,
    ) -> torch.Tensor:
        geometry = parse(input, kernel_size, dilation, padding, stride)
        reason = self.unsupported_reason(geometry.spatial_dims, input.device, input.dtype)
        if reason is None and geometry.batch_size == 0 and self.empty_batch_defect is not None:
            reason = f"strategy {self.name!r} refuses an empty batch (N == 0): {self.empty_batch_defect}"
        if reason is not None:
            raise ValueError(f"input (shape {tuple(input.shape)}, device {input.device}): {reason}")
        return self.implementation(input, geometry)
