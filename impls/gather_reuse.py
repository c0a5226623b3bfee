"""``gather_reuse``: ``gather`` writing into one output buffer kept between calls (``out=`` reuse).

**A call overwrites the previous call's result when both have the same shape, dtype and device** (see
``impls.output_reuse`` for why the suite carries reusing variants and how autograd guards them). A caller
who unfolds the same layer every step can do the same with ``impls.gather.unfold_into(input, geometry,
out=buffer)``. The benchmarks show ``gather`` and ``gather_reuse`` side by side so a user sees what reuse buys.
"""

from __future__ import annotations

from impls.gather import unfold_into
from impls.output_reuse import KeptBufferUnfold
from impls.strategy import Strategy

unfold = Strategy(
    name="gather_reuse",
    description="gather into one cached output buffer: a call OVERWRITES the previous same-shape result",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=KeptBufferUnfold(unfold_into),
    reuses_output=True,
)
