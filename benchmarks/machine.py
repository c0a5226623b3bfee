"""What this machine is, for asv's machine file: asv records it with every result.

asv's machine fields (machine, os, arch, cpu, num_cpu, ram) have no place for a GPU, the torch build or the
allocator, yet figures depend on all three. asv copies any extra keys of a machine entry into the
``params`` of every result it saves, so they are added there: ``device_names`` (CPU model and GPU model, or
"GPU: none"), ``torch_version``, ``torch_threads``, ``allocator``, ``timing_regime`` (``benchmarks.allocator``). The
machine *name* carries the GPU, the huge-page variant, a thread count set by the environment and the timing regime
too, so results from different set-ups never share a directory or a chart line.

The name starts with the host name, except where ``UNFOLD_BENCH_HOST`` says otherwise: a hosted CI runner
(GitHub Actions) is a fresh VM with a new host name on every job, so without a stable label each run of the
publish workflow would be a machine of its own and no result would ever have a predecessor to compare with.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from pathlib import Path

import torch

from benchmarks.allocator import DEFAULT_REGIME, PINNED_MMAP_THRESHOLD, get_regime, mmap_threshold_setting

THP_VARIABLE = "THP_MEM_ALLOC_ENABLE"
HOST_VARIABLE = "UNFOLD_BENCH_HOST"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # torch's intra-op thread count, where set


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_model() -> str | None:
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0)


def allocator_setting(environ: dict[str, str] | None = None) -> str:
    """How PyTorch allocates in a process started with ``environ`` (default: this one's): the CPU allocator's
    huge-page setting, preloads or glibc's mmap threshold (``benchmarks.allocator``), and the CUDA allocator
    config."""
    environ = dict(os.environ if environ is None else environ)
    thp = environ.get(THP_VARIABLE, "0") == "1"
    parts = [
        f"CPU: {'transparent huge pages (' + THP_VARIABLE + '=1)' if thp else 'default (' + THP_VARIABLE + ' unset)'}"
    ]
    preload = environ.get("LD_PRELOAD")
    parts.append(f"LD_PRELOAD={preload}" if preload else f"glibc malloc, {mmap_threshold_setting(environ)}")
    if torch.cuda.is_available():
        parts.append(f"CUDA: PYTORCH_CUDA_ALLOC_CONF={environ.get('PYTORCH_CUDA_ALLOC_CONF', '(default)')}")
    return "; ".join(parts)


def _slug(text: str) -> str:
    text = re.sub(r"\((R|TM)\)|CPU|Processor|@.*$|NVIDIA|GeForce", "", text, flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def machine_name(regime: str = DEFAULT_REGIME) -> str:
    """A name that says what measured: host (or ``UNFOLD_BENCH_HOST``), CPU model and cores, GPU model,
    ``-thp`` for the huge-page variant, ``-<n>threads`` where the environment sets torch's thread count
    (``THREAD_VARIABLES``: a strategy of many small parallel regions and one of few move apart with it) and the
    timing regime's suffix (none for the default, ``warm``)."""
    host = os.environ.get(HOST_VARIABLE) or socket.gethostname()
    parts = [_slug(host)[:24] or "host", _slug(cpu_model())[:32], f"{os.cpu_count()}cpu"]
    gpu = gpu_model()
    parts.append(_slug(gpu) if gpu else "nogpu")
    if os.environ.get(THP_VARIABLE) == "1":
        parts.append("thp")
    if any(os.environ.get(variable) for variable in THREAD_VARIABLES):
        parts.append(f"{torch.get_num_threads()}threads")
    return "-".join(parts) + get_regime(regime).machine_suffix


def machine_info(
    name: str | None = None, regime: str = DEFAULT_REGIME, environ: dict[str, str] | None = None
) -> dict[str, str]:
    """The asv machine entry for this machine (asv's fields plus the extra keys described above), for results
    timed in ``regime`` by processes started with ``environ`` (default: this one's)."""
    gpu = gpu_model()
    try:
        ram = str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024)  # asv records KiB
    except (ValueError, OSError):
        ram = ""
    return {
        "machine": name or machine_name(regime),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": cpu_model(),
        "num_cpu": str(os.cpu_count()),
        "ram": ram,
        "device_names": f"CPU: {cpu_model()}; GPU: {gpu or 'none'}",
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "torch_threads": str(torch.get_num_threads()),
        "allocator": f"{allocator_setting(environ)}; net peaks: mmap threshold pinned at {PINNED_MMAP_THRESHOLD} bytes",
        "timing_regime": get_regime(regime).name,
    }


def register_machine(
    name: str | None = None, regime: str = DEFAULT_REGIME, environ: dict[str, str] | None = None
) -> dict[str, str]:
    """Write this machine's entry to asv's machine file (``~/.asv-machine.json``) and return it."""
    from asv.machine import MachineCollection

    info = machine_info(name, regime, environ)
    MachineCollection.save(info["machine"], info)  # asv copies every key into each result's params
    return info
