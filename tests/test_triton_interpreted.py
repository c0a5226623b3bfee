"""The Triton kernels checked without a GPU: the suite's own parity tests, run under Triton's interpreter.

With ``TRITON_INTERPRET=1`` Triton runs each program instance of a kernel on CPU tensors through NumPy, and
``impls.triton_gather`` then declares "cpu", so the parity tests (every config, at batch 1: the kernels flatten
batch and channels into one program index; random problems drawn across dims, dtypes and layouts), the
validation, int64-indexing and non-finite tests and a double-backward check run it there. Triton reads the
variable when the kernels are decorated (import time), hence a pytest process of its own.

Left out: ``test_gradcheck_float64`` (one interpreted launch per output entry: minutes), which the
configs' gradient check against the float64 reference covers for a linear map; it runs in full on a GPU.
Not checked here at all: the compiled GPU code itself (code generation, the GPU's integer arithmetic,
timing), which only a run on a GPU machine checks (``pytest -m cuda``).

The interpreter truncates a float32 to bfloat16 cast, where compiled Triton rounds to nearest even (its documented
default for a float downcast, and what the GPU does): a bfloat16 gradient summed in float32 then misses the
parity bound by a rounding. The interpreted process loads this module as a plugin, which makes the interpreter
round as compiled Triton does (``_round_bfloat16_casts_to_nearest_even``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from benchmarks.configs import configs
from benchmarks.trees import ROOT
from impls.triton_gather import TRITON_INSTALLED

MODULES = ["test_parity_configs", "test_parity_random", "test_validation", "test_caveats", "test_gradcheck"]
SELECTION = "triton_gather and cpu and not gradcheck_float64"
PLUGIN = "tests.test_triton_interpreted"  # this module, for its pytest_configure


@pytest.mark.skipif(not TRITON_INSTALLED, reason="triton is not installed (the test extra installs it on Linux)")
@pytest.mark.slow(first=True)
def test_triton_gather_passes_the_parity_tests_under_the_interpreter(tmp_path):
    report = tmp_path / "interpreted.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        PLUGIN,
        "-k",
        SELECTION,
        f"--junitxml={report}",
        *(f"tests/{m}.py" for m in MODULES),
    ]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]

    cases = ET.parse(report).getroot().iter("testcase")
    outcomes = {f"{c.get('classname')}::{c.get('name')}": [e.tag for e in c] for c in cases}
    not_passed = {name: tags for name, tags in outcomes.items() if tags}
    assert not not_passed, f"skipped or failed under the interpreter: {not_passed}"
    for module in MODULES:
        assert any(f".{module}::" in name for name in outcomes), f"no test of {module} ran under the interpreter"
    for config in configs(batch_size=2):
        assert any(name.endswith(f"[cpu-triton_gather-{config.name}]") for name in outcomes), config.name


def _round_bfloat16_casts_to_nearest_even() -> None:
    """Make Triton's interpreter round a float32 to bfloat16 cast to nearest even, as compiled Triton does."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    truncating = interpreter.InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar != tl.float32 or dst_type.scalar != tl.bfloat16:
            return truncating(self, src, dst_type)
        bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32)
        rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16  # ties to even; infinities stay
        quiet_nan = (bits >> 16) | 0x40
        data = np.where(np.isnan(src.data), quiet_nan, rounded).astype(np.uint16)
        return interpreter.TensorHandle(data, tl.bfloat16)

    interpreter.InterpreterBuilder.cast_impl = cast_impl


def pytest_configure(config: pytest.Config) -> None:
    """As the interpreted process's plugin (``-p``): bfloat16 casts rounded as compiled Triton rounds them."""
    if os.environ.get("TRITON_INTERPRET") == "1" and TRITON_INSTALLED:
        _round_bfloat16_casts_to_nearest_even()
