"""``compiled_reuse``: ``compiled`` writing into one output buffer kept between calls (``out=`` reuse).

**A call overwrites the previous call's result when both have the same shape, dtype and device** (see
``impls.output_reuse`` for why the suite carries reusing variants and how autograd guards them). The forward
is Inductor's fused loop of ``compiled`` storing straight into the kept buffer, so with the page faults of a
fresh output gone it shows how close Inductor's kernel comes to the ``copy_`` roofline; the
backward is ``compiled``'s. A caller can do the same with ``impls.compiled.unfold_into(input, geometry,
out=buffer)``.
"""

from __future__ import annotations

from impls.compiled import MISSING_REQUIREMENT, unfold_into
from impls.output_reuse import KeptBufferUnfold
from impls.strategy import Strategy

unfold = Strategy(
    name="compiled_reuse",
    description="compiled, storing into one cached output buffer: a call OVERWRITES the previous same-shape result",
    spatial_dims=(1, 2, 3),
    devices=("cpu", "cuda"),
    implementation=KeptBufferUnfold(unfold_into),
    reuses_output=True,
    compiles=True,
    missing_requirement=MISSING_REQUIREMENT,
)
