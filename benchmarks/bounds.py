"""asv suite: what the memory system allows for each config, so every figure can be read as a multiple.

Per profile class (``Quick`` / ``Full``), params config x device:

- ``time_copy``: ``dst.copy_(src)`` with both of the output's size and already resident (reads and
  writes the output's bytes once: the roofline of an unfold that reads its input once and writes its output).
- ``time_fill``: ``dst.fill_(1)`` into a resident output-sized buffer (writes only): no forward can be faster.
- ``time_fresh_output``: allocate an output-sized tensor and write it once: the floor of every strategy that
  returns a new tensor, in the run's timing regime (``benchmarks.allocator``). In the fresh-pages regime, and
  for an output over glibc's largest mmap threshold in either, the allocation comes from the kernel and every
  page faults on first touch; the gap to ``time_fill`` is then what reusing an output would save.
- ``time_fresh_output_huge_pages``: the same with the output advised into transparent huge pages before it is
  written (``impls.huge_pages``): the floor of a strategy that advises its results so (``advises_huge_pages``).
- ``track_net_peak_fresh_output``: the net peak of that call, measured like the strategies' (it should equal
  the output's size: a check of the memory measurement itself).
- ``track_min_peak_forward`` / ``track_min_peak_forward_backward``: the analytic minimum (forward: the
  output; forward-backward: also ``grad_output`` and ``grad_input``), in bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from benchmarks.allocator import apply_regime_now, pin_mmap_threshold_now
from benchmarks.cell_suite import config_device_params
from benchmarks.cells import device_unavailable, profile_config, synchronize
from benchmarks.memory import net_peak_bytes
from benchmarks.profiles import FULL, QUICK, Profile, SampledByProfile
from benchmarks.traffic import Sizes, analytic_minimum_bytes
from impls import huge_pages


class _BoundsSuite(SampledByProfile):
    profile: Profile
    param_names = ("config", "device")
    unit = "bytes"  # only used by the track_* benchmarks

    def setup(self, config: str, device: str) -> None:
        reason = device_unavailable(device)
        if reason is not None:
            raise NotImplementedError(reason)
        apply_regime_now()  # before anything is allocated (benchmarks.allocator)
        self.config = profile_config(self.profile, config)
        self.device = device
        self.shape = self.config.geometry.output_shape
        self.dtype = self.config.torch_dtype
        self.source = torch.ones(self.shape, dtype=self.dtype, device=device)
        self.target = torch.zeros(self.shape, dtype=self.dtype, device=device)
        self.result = None
        synchronize(device)

    def _fresh_output(self, advise: Callable[[torch.Tensor], None] = lambda fresh: None) -> torch.Tensor:
        out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
        advise(out)
        out.fill_(1)
        synchronize(self.device)
        return out

    def time_copy(self, config: str, device: str) -> None:
        self.target.copy_(self.source)
        synchronize(device)

    def time_fill(self, config: str, device: str) -> None:
        self.target.fill_(1)
        synchronize(device)

    def time_fresh_output(self, config: str, device: str) -> None:
        self.result = self._fresh_output()  # kept until the next setup: freeing it is not timed

    def time_fresh_output_huge_pages(self, config: str, device: str) -> None:
        self.result = self._fresh_output(huge_pages.advise)

    def track_net_peak_fresh_output(self, config: str, device: str) -> int:
        pin_mmap_threshold_now()  # as for the strategies' net peaks
        self._fresh_output()  # warm-up, as for the strategies
        return net_peak_bytes(self._fresh_output, device)

    def track_min_peak_forward(self, config: str, device: str) -> int:
        return analytic_minimum_bytes(Sizes.of(self.config), backward=False)

    def track_min_peak_forward_backward(self, config: str, device: str) -> int:
        return analytic_minimum_bytes(Sizes.of(self.config), backward=True)


class Quick(_BoundsSuite):
    """The quick profile's bounds (batch size capped at 8)."""

    profile = QUICK
    params = config_device_params(QUICK)


class Full(_BoundsSuite):
    """The full profile's bounds (the configs' real batch size)."""

    profile = FULL
    params = config_device_params(FULL)
