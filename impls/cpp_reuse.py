"""``cpp_reuse``: ``cpp`` writing into one output buffer kept between calls (``out=`` reuse).

**A call overwrites the previous call's result when both have the same shape, dtype and device** (see
``impls.output_reuse`` for why the suite carries reusing variants and how autograd guards them). The forward is
``cpp``'s kernel storing into memory it touched before, so beside ``cpp`` it shows what a fresh output costs and
how close the kernel itself comes to the ``copy_`` roofline; the backward is ``cpp``'s. A caller can do the same
with ``impls.cpp.unfold_into(input, geometry, out=buffer)``.
"""

from __future__ import annotations

from impls.cpp import MISSING_REQUIREMENT, unfold_into
from impls.output_reuse import KeptBufferUnfold
from impls.strategy import Strategy

unfold = Strategy(
    name="cpp_reuse",
    description="cpp into one cached output buffer: a call OVERWRITES the previous same-shape result",
    spatial_dims=(1, 2, 3),
    devices=("cpu",),
    implementation=KeptBufferUnfold(unfold_into),
    builds_extension=True,
    missing_requirement=MISSING_REQUIREMENT,
    reuses_output=True,
)
