"""Where one cell's memory goes, with memory_profiler: line-by-line increments and a timeline.

Two views of one forward-backward call (inputs made first, so they are the baseline):

- **line by line** (``memory_profiler.LineProfiler``): the resident set after each line of the strategy's
  implementation and of the driver (forward, materialise ``grad_output``, backward), so the padding copy,
  the output and the backward's buffers show up as the increments of the lines that make them;
- **timeline** (``memory_profiler.memory_usage``): the resident set sampled every ``interval`` seconds
  while the call runs, printed as a small text chart with its peak, net of the baseline.

Both read the process's resident set (RSS) as ``benchmarks.memory`` does on CPU. memory_profiler is imported
lazily: asv imports this module during discovery, also in environments without it.
"""

from __future__ import annotations

import io
from typing import Any

from benchmarks.allocator import NET_PEAK_RESOLUTION, mmap_threshold_setting
from benchmarks.cells import Cell, Workload, use_exact_float32
from benchmarks.machine import machine_name
from benchmarks.memory import release_free_heap
from benchmarks.trees import head_commit
from benchmarks.vocabulary import MIB

DECIMALS = 1  # of memory_profiler's MiB figures


def _driver(workload: Workload) -> Any:
    out = workload.cell.strategy(workload.leaf, **workload.kwargs)
    grad_output = workload.grad_output.clone()
    out.backward(grad_output)
    return out, grad_output


def line_by_line(workload: Workload) -> str:
    """memory_profiler's line-by-line report of the implementation and the driver, as text."""
    from memory_profiler import LineProfiler, show_results

    profiler = LineProfiler()
    profiler.add_function(workload.cell.strategy.implementation)
    profiler.add_function(_driver)
    release_free_heap()
    result = profiler(_driver)(workload)
    del result
    workload.reset()
    stream = io.StringIO()
    show_results(profiler, stream=stream, precision=DECIMALS)
    return stream.getvalue()


def timeline(workload: Workload, interval: float = 0.005, width: int = 60, height: int = 12) -> str:
    """The resident set over one forward-backward call, sampled by memory_profiler, as a text chart."""
    from memory_profiler import memory_usage

    release_free_heap()
    baseline = memory_usage(-1, interval=interval, timeout=interval * 4)
    base = min(baseline)
    samples, _ = memory_usage((_keep, (workload,), {}), interval=interval, timestamps=True, retval=True)
    workload.reset()
    net = [(mib - base, t) for mib, t in samples]
    start, end = net[0][1], net[-1][1]
    peak = max(m for m, _ in net)
    columns = [0.0] * width
    for mib, t in net:
        column = min(width - 1, int((t - start) / max(end - start, 1e-9) * width))
        columns[column] = max(columns[column], mib)
    lines = [f"net resident memory over {end - start:.3f} s ({len(net)} samples), peak {peak:.1f} MiB above baseline"]
    for row in range(height, 0, -1):
        level = peak * row / height
        lines.append(f"{level:>9.1f} MiB |" + "".join("#" if c >= level - 1e-9 else " " for c in columns))
    lines.append(" " * 14 + "+" + "-" * width)
    lines.append(" " * 15 + f"0 s{'':>{width - 12}}{end - start:.3f} s")
    return "\n".join(lines)


def _keep(workload: Workload) -> None:
    workload.result = _driver(workload)


def profile_cell(cell: Cell, interval: float = 0.005) -> str:
    """Both reports for ``cell``, as text."""
    use_exact_float32(cell.device)
    workload = Workload(cell, backward=True)
    workload.forward_backward_fresh_grad()  # warm-up: lazy initialisation, first-touched library pages
    workload.reset()
    geometry = cell.config.geometry
    item = cell.config.torch_dtype.itemsize
    header = (
        f"{cell.strategy.name} on {cell.config.name} {tuple(cell.config.input_shape)} ({cell.device}): "
        f"input {geometry.input_numel * item / MIB:.1f} MiB, output {geometry.output_numel * item / MIB:.1f} MiB\n"
        f"machine {machine_name()}, commit {head_commit()[:8] or 'unknown'}; glibc: {mmap_threshold_setting()}; "
        f"the figures are the process's resident memory, to {10**-DECIMALS:g} MiB; a difference within "
        f"{NET_PEAK_RESOLUTION // 1024} KiB is within the allocator's own resolution"
    )
    return "\n\n".join([header, line_by_line(workload), timeline(workload, interval)])
