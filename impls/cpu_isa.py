"""Which instruction set PyTorch's CPU convolution backend (oneDNN) dispatches to on this machine.

oneDNN picks its kernels by the CPU's instruction set, so the same float16 or bfloat16 convolution may run
different code on two machines, and a backend defect (``KnownDefect``) can show on one machine
and not on the next with the same torch. oneDNN names its choice only in its verbose log, so this runs one
tiny depthwise convolution (the kind ``onehot`` runs, which PyTorch sends to oneDNN) in a subprocess with
``ONEDNN_VERBOSE=1`` and reads the ``isa:`` field, e.g. ``"Intel AVX-512 with Intel DL Boost and bfloat16
support"`` (oneDNN's wording, on AMD CPUs too). The probe inherits the environment, so ``ONEDNN_MAX_CPU_ISA``
caps it as it caps the process. ``KnownDefect.refuses`` reads it at call time, once per process, and only for
an input that a CPU defect's record could exempt. A process that starts many others in its own environment (a
benchmark run) probes once and hands the answer down in ``ISA_VARIABLE`` (``isa_environment``), with the torch
and the cap it was probed under: a child under the same ones takes it instead of spending seconds starting an
interpreter to ask again; any other child probes.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import torch

ISA_VARIABLE = "UNFOLD_BENCH_ONEDNN_ISA"  # a parent's answer and what it was probed under (JSON; see isa_environment)
CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # oneDNN's caps on the ISA it dispatches to
_PROBE = "import torch\ntorch.nn.functional.conv2d(torch.ones(1, 2, 5, 5), torch.ones(2, 1, 3, 3), groups=2)\n"


@functools.cache
def onednn_isa() -> str | None:
    """oneDNN's ISA on this CPU (its verbose ``isa:`` field), or None when oneDNN is absent or says nothing."""
    handed_down = _handed_down()
    if handed_down is not None:
        return handed_down.get("isa")
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


def probed_under() -> dict[str, str]:
    """What the probe's answer depends on besides the CPU: this torch and oneDNN's caps in this environment."""
    return {"torch": torch.__version__, **{name: os.environ.get(name, "") for name in CAP_VARIABLES}}


def _handed_down() -> dict | None:
    """The record in ``ISA_VARIABLE`` (its ``isa`` may be None), if it was probed under what this process runs
    under; None when there is none, it is malformed, or it was probed under another torch or cap."""
    try:
        record = json.loads(os.environ.get(ISA_VARIABLE, ""))
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("under") == probed_under() else None


def isa_environment() -> dict[str, str]:
    """The variable that hands this process's answer, and what it was probed under, to the processes it starts."""
    return {ISA_VARIABLE: json.dumps({"isa": onednn_isa(), "under": probed_under()})}
