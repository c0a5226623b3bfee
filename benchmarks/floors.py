"""asv suite: the reference's forward time over each write floor, paired inside every process.

Per profile class (``Quick`` / ``Full``), params config x device, unit ``ratio``:

- ``track_ratio_native_over_copy``: one process times ``native``'s forward and ``copy_`` between two resident
  tensors of the output's size (the roofline of ``benchmarks.bounds.time_copy``), interleaved in blocks A B B A over
  ``Profile.placements`` placements (``benchmarks.ratios.process_ratio``), and gives ``t_native / t_copy``.
- ``track_ratio_native_over_fill``: the same against ``fill_`` of a resident output-sized tensor (the write-only
  floor of ``benchmarks.bounds.time_fill``).
- ``track_ratio_native_forward_backward_over_copy``: ``native``'s forward-backward against the same ``copy_`` (the
  floor a forward-backward's ``x copy_`` is over).

A strategy's time over a floor is then its paired ratio to native times native's over that floor, same pass:

    t_s / t_floor = (t_s / t_native) * (t_native / t_floor),

two factors each measured inside processes (``benchmarks.intervals.chained_ratio``), where a quotient of the medians of
``time_forward`` and ``time_fill`` compares processes whose memory differs. Each replicate is an asv run of its own,
as for the suite ``ratios`` (``benchmarks.runner.plan``). ``setup`` raises ``NotImplementedError`` (asv: "n/a")
where the reference does not run (``native`` has no 3-d unfold) and on a device this machine lacks.
"""

from __future__ import annotations

import random

import torch

from benchmarks.cell_suite import config_device_params
from benchmarks.cells import Cell, device_unavailable, profile_config, use_exact_float32
from benchmarks.profiles import FULL, QUICK, Profile, SampledByProfile
from benchmarks.ratios import REFERENCE, process_ratio
from benchmarks.vocabulary import COPY_FLOOR, DEVICES, FILL_FLOOR
from impls import STRATEGIES, Strategy
from impls.geometry import Geometry

_RESIDENT: dict[tuple, torch.Tensor] = {}  # the floors' tensors, made on first use and kept for the process


def _resident(geometry: Geometry, like: torch.Tensor, role: str) -> torch.Tensor:
    key = (role, geometry.output_shape, like.dtype, like.device)
    if key not in _RESIDENT:
        _RESIDENT[key] = torch.ones(geometry.output_shape, dtype=like.dtype, device=like.device)
    return _RESIDENT[key]


def _copy(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return _resident(geometry, input, "target").copy_(_resident(geometry, input, "source"))


def _fill(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return _resident(geometry, input, "target").fill_(1)


def _floor(name: str, implementation, what: str) -> Strategy:
    """A floor in a strategy's clothes, so that the paired measurement times it as it times a strategy: it writes a
    resident tensor of the output's size and returns it (its values are not an unfold; it is never checked)."""
    return Strategy(name, what, (1, 2, 3), DEVICES, implementation, reuses_output=True)


FLOORS = {
    COPY_FLOOR: _floor("copy_", _copy, "copy_ between two resident output-sized tensors"),
    FILL_FLOOR: _floor("fill_", _fill, "fill_ of a resident output-sized tensor"),
}


def over_floor(cell: Cell, which: str, bound: str, profile: Profile, seed: int) -> dict:
    """One asv sample: ``cell``'s ``which`` over one call of the floor ``bound`` on its config and device, paired in
    this process (``benchmarks.ratios.process_ratio``)."""
    floor = Cell(FLOORS[bound], cell.config, cell.device)
    return {"samples": [process_ratio((floor, cell), ("forward", which), profile, seed)], "number": 1}


class _FloorSuite(SampledByProfile):
    profile: Profile
    param_names = ("config", "device")
    unit = "ratio"

    def setup(self, config: str, device: str) -> None:
        reason = device_unavailable(device)
        if reason is not None:
            raise NotImplementedError(reason)
        self.native = Cell(STRATEGIES[REFERENCE], profile_config(self.profile, config), device)
        reason = self.native.skip_reason()
        if reason is not None:
            raise NotImplementedError(f"no reference: {reason}")
        use_exact_float32(device)
        self.seed = random.SystemRandom().randrange(1 << 30)

    def _native_over(self, which: str, bound: str) -> dict:
        """One sample: native's ``which`` over one call of the floor ``bound``, paired in this process."""
        return over_floor(self.native, which, bound, self.profile, self.seed)

    def track_ratio_native_over_copy(self, config: str, device: str) -> dict:
        return self._native_over("forward", COPY_FLOOR)

    def track_ratio_native_over_fill(self, config: str, device: str) -> dict:
        return self._native_over("forward", FILL_FLOOR)

    def track_ratio_native_forward_backward_over_copy(self, config: str, device: str) -> dict:
        return self._native_over("forward_backward", COPY_FLOOR)


class Quick(_FloorSuite):
    """The quick profile's paired floors."""

    profile = QUICK
    params = config_device_params(QUICK)


class Full(_FloorSuite):
    """The full profile's paired floors."""

    profile = FULL
    params = config_device_params(FULL)
