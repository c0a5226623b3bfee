r"""How much of the machine's CPUs other work takes just before this process measures (Linux's ``/proc/stat``).

A measurement shares the CPUs with whatever else runs: another benchmark, a build, a browser, or on a VM the
hypervisor's other guests (``steal``). Over a short window in which this process sleeps, the CPUs' busy time is
other work's:

.. math::

    \text{busy} = n_\text{cpu} \cdot \frac{\Delta(\text{user} + \text{nice} + \text{system} + \text{irq} +
    \text{softirq} + \text{steal})}{\Delta(\text{all})}

in CPUs' worth (0 on an idle machine, up to the CPU count). A strategy of many short parallel regions waits at each
for a thread that another process has descheduled, so its time moves most (``unfold-bench variance``'s ``sw/blk``).
The commands that measure warn where other work takes at least ``BUSY_CPUS`` of a CPU before they start.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

STAT = Path("/proc/stat")
BUSY_CPUS = 0.25  # other work's CPUs' worth from which a command warns before it measures
SAMPLE_SECONDS = 0.2  # /proc/stat counts in ticks of 10 ms: on 2 CPUs, a resolution of 0.05 CPU


def _cpu_times() -> tuple[int, int] | None:
    """The machine's busy and total CPU time so far, in clock ticks (``/proc/stat``'s first line); None where it is not
    readable (not Linux)."""
    try:
        fields = [int(v) for v in STAT.read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def other_load(seconds: float = SAMPLE_SECONDS) -> float | None:
    """The CPUs' worth of time other work took over ``seconds`` of this process sleeping; None where the machine does
    not say (no ``/proc/stat``)."""
    before = _cpu_times()
    time.sleep(seconds)
    after = _cpu_times()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (os.cpu_count() or 1) * (after[0] - before[0]) / (after[1] - before[1])


def busy_warning(load: float | None, cpus: int | None = None) -> str | None:
    """What a command says before it measures where other work took ``load`` CPUs' worth (``other_load``), at least
    ``BUSY_CPUS``; None below, or where the load is unknown."""
    if load is None or load < BUSY_CPUS:
        return None
    cpus = cpus or os.cpu_count() or 1
    return (
        f"warning: other work kept {load:.1f} of this machine's {cpus} CPUs busy just now: what is measured while it "
        "runs is slower and moves more between runs, a strategy of many parallel regions most (stop it, or measure "
        "later)"
    )
