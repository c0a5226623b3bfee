"""Which instruction set PyTorch's CPU convolution backend (oneDNN) dispatches to on this machine.

oneDNN picks its kernels by the CPU's instruction set, so the same float16 or bfloat16 convolution may run
different code on two machines, and a backend defect (``KnownDefect``) can show on one machine
and not on the next with the same torch. oneDNN names its choice only in its verbose log, so this runs one
tiny depthwise convolution (the kind ``onehot`` runs, which PyTorch sends to oneDNN) in a subprocess with
``ONEDNN_VERBOSE=1`` and reads the ``isa:`` field, e.g. ``"Intel AVX-512 with Intel DL Boost and bfloat16
support"`` (oneDNN's wording, on AMD CPUs too). The probe inherits the environment, so ``ONEDNN_MAX_CPU_ISA``
caps it as it caps the process. ``KnownDefect.refuses`` reads it at call time, once per process, and only for
an input that a CPU defect's record could exempt. A process that starts many others in its own environment (a
benchmark run) probes once and hands the answer down in ``ISA_VARIABLE`` (``isa_environment``), so that each
child does not spend seconds starting an interpreter to ask again.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import torch

ISA_VARIABLE = "UNFOLD_BENCH_ONEDNN_ISA"  # the parent's answer ("" for none); read instead of probing
_PROBE = "import torch\ntorch.nn.functional.conv2d(torch.ones(1, 2, 5, 5), torch.ones(2, 1, 3, 3), groups=2)\n"


@functools.cache
def onednn_isa() -> str | None:
    """oneDNN's ISA on this CPU (its verbose ``isa:`` field), or None when oneDNN is absent or says nothing."""
    if ISA_VARIABLE in os.environ:  # probed by the process that started this one, in the same environment
        return os.environ[ISA_VARIABLE] or None
    if not torch.backends.mkldnn.is_available():
        return None
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "DNNL_VERBOSE": "1"}
    try:
        result = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in result.stdout.splitlines():
        for field in line.split(","):
            if field.startswith("isa:"):
                return field.removeprefix("isa:").strip()
    return None


def isa_environment() -> dict[str, str]:
    """The variable that hands this process's answer to the processes it starts in the same environment."""
    return {ISA_VARIABLE: onednn_isa() or ""}
