"""``cpp_huge_pages``: ``cpp``'s kernels with each fresh result advised into transparent huge pages.

The output forward and ``grad_input`` backward, from ``impls.huge_pages.RESULT_BYTES`` on, are advised with
``madvise(MADV_HUGEPAGE)`` before they are written, so they page-fault once per 2 MiB instead of once per 4 KiB
(``impls.huge_pages`` says why, and what it can cost). The benchmarks show ``cpp`` and ``cpp_huge_pages`` side by
side, so a user sees what the advice buys on their machine, and the findings judge this one against the floor of
its own allocation (``bounds.time_fresh_output_huge_pages``).
"""

from __future__ import annotations

import torch

from impls import huge_pages
from impls.cpp import MISSING_REQUIREMENT, unfold_into
from impls.geometry import Geometry
from impls.strategy import Strategy


def _cpp_huge_pages_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return unfold_into(input, geometry, advise_huge_pages=True)


unfold = Strategy(
    name="cpp_huge_pages",
    description=f"cpp's kernels, each fresh result of {huge_pages.RESULT_BYTES >> 20} MiB or more advised into "
    "transparent huge pages",
    spatial_dims=(1, 2, 3),
    devices=("cpu",),
    implementation=_cpp_huge_pages_unfold,
    builds_extension=True,
    missing_requirement=MISSING_REQUIREMENT,
    advises_huge_pages=True,
)
