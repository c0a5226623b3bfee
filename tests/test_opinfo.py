"""PyTorch's own OpInfo samples of ``nn.functional.unfold`` against every strategy.

``torch.testing._internal.common_methods_invocations`` holds the samples PyTorch tests ``F.unfold`` with (kernel,
dilation, padding and stride as ints and tuples, an empty batch); each runs contiguous and as a strided view. Every
strategy must match ``F.unfold`` on them as on our own problems (``impls.parity``: values exact, gradients within
the summation bound) or refuse them with the reason it declares. A strategy that compiles runs a float64 subset
(every sixteenth geometry, contiguous and strided, an empty batch among them): each geometry and layout compiles kernels
of its own, and compiling them all took minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest
import torch

from impls import TESTED_STRATEGIES
from impls.parity import mismatch

pytestmark = pytest.mark.slow  # a process of its own for the samples, and many of them
DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
# Importing PyTorch's test utilities freezes torch.backends' flags for the whole process, which other tests of a
# worker set directly: the samples' geometries are read in a child process, and the inputs made here.
_LIST_SAMPLES = """
import json, torch
from torch.testing._internal.common_methods_invocations import op_db
(unfold,) = [op for op in op_db if op.name == "nn.functional.unfold"]
names = ("kernel_size", "dilation", "padding", "stride")
print(json.dumps([[list(s.input.shape), {**dict(zip(names, s.args)), **s.kwargs}]
                  for s in unfold.sample_inputs("cpu", torch.float64)]))
"""


@cache
def _geometries() -> list[tuple[tuple[int, ...], dict]]:
    pytest.importorskip("expecttest")  # what torch.testing._internal needs beyond torch
    done = subprocess.run([sys.executable, "-c", _LIST_SAMPLES], capture_output=True, text=True, check=True)
    return [(tuple(shape), kwargs) for shape, kwargs in json.loads(done.stdout.strip().splitlines()[-1])]


def _samples(dtype: torch.dtype) -> list[tuple[torch.Tensor, dict]]:
    """(input, kwargs) of every sample, contiguous and as a strided view (every other element of a wider tensor)."""
    found = []
    for index, (shape, kwargs) in enumerate(_geometries()):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(index), dtype=torch.float64).to(dtype)
        wide = torch.zeros(*shape[:-1], 2 * shape[-1], dtype=dtype)
        wide[..., ::2] = x
        found += [(x, kwargs), (wide[..., ::2], kwargs)]
    return found


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(TESTED_STRATEGIES))
def test_every_opinfo_sample_matches_or_is_refused_with_the_declared_reason(name, dtype):
    strategy = TESTED_STRATEGIES[name]
    reason = strategy.unsupported_reason(2, "cpu", dtype)
    if reason is not None:
        pytest.skip(reason)
    if strategy.compiles and dtype != torch.float64:
        pytest.skip("a strategy that compiles runs float64 samples only (module docstring)")
    samples = _samples(dtype)
    assert len(samples) > 20 and any(not x.is_contiguous() for x, _ in samples)
    if strategy.compiles:  # every sixteenth geometry, contiguous and strided (module docstring)
        samples = [sample for i, sample in enumerate(samples) if i % 32 in (0, 1)]
        assert any(x.shape[0] == 0 for x, _ in samples)
    for x, kwargs in samples:
        if x.shape[0] == 0 and strategy.empty_batch_defect is not None:
            with pytest.raises(ValueError, match="empty batch"):
                strategy(x, **kwargs)
            continue
        problem = mismatch(strategy, x, kwargs, backward=True)
        assert problem is None, f"{name} on {tuple(x.shape)} {kwargs}: {problem}"
