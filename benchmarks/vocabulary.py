"""The measurement's words, defined once: passes, devices, the write floors, metric names and cell specs.

Importing this module imports no torch, so the reports (which run where only results are) use the same words as
the benchmarks that wrote them. (No function here starts with ``time_``: asv would take it for a benchmark in
every suite module that imports it.)
"""

from __future__ import annotations

PASSES: tuple[str, ...] = ("forward", "forward_backward")  # a call: the forward alone, or forward and backward
DEVICES: tuple[str, ...] = ("cpu", "cuda")  # the device types a cell runs on (impls.strategy.DEVICES; a test ties them)
QUICK_PROFILE, FULL_PROFILE = "quick", "full"  # the profiles' names (benchmarks.profiles: what each runs)
MIB = 2**20  # bytes in a MiB, the unit memory is shown in
# The write floors of the suite ``bounds`` (``benchmarks.bounds``), by their asv benchmark names
COPY_FLOOR = "time_copy"  # copy_ between two resident output-sized tensors: the roofline
FILL_FLOOR = "time_fill"  # fill_ of a resident output-sized tensor: no forward can be faster
FRESH_OUTPUT_FLOOR = "time_fresh_output"  # allocate an output and write it once, page faults included
HUGE_PAGE_FLOOR = "time_fresh_output_huge_pages"  # the same, the output advised into transparent huge pages
# (pass, write floor of the suite ``bounds``) -> the metric of the suite ``floors`` that holds native's time for that
# pass over the floor's, paired per process (``benchmarks.floors``)
FLOOR_RATIOS: dict[tuple[str, str], str] = {
    ("forward", COPY_FLOOR): "track_ratio_native_over_copy",
    ("forward", FILL_FLOOR): "track_ratio_native_over_fill",
    ("forward_backward", COPY_FLOOR): "track_ratio_native_forward_backward_over_copy",
}
# The same (pass, write floor) -> the metric of the suite ``direct_floors`` that holds a strategy's time for that pass
# over the floor's, paired per process, on a config the reference cannot run (``benchmarks.direct_floors``)
DIRECT_FLOOR_RATIOS: dict[tuple[str, str], str] = {
    ("forward", COPY_FLOOR): "track_ratio_forward_over_copy",
    ("forward", FILL_FLOOR): "track_ratio_forward_over_fill",
    ("forward_backward", COPY_FLOOR): "track_ratio_forward_backward_over_copy",
}


def timed_metric(which: str) -> str:
    """The asv metric that times pass ``which``: ``time_forward`` or ``time_forward_backward``."""
    return f"time_{which}"


def peak_metric(which: str) -> str:
    """The measure that holds pass ``which``'s net peak memory: ``net_peak_forward`` or ``..._backward`` (asv's
    benchmark is ``tracked_peak_metric``)."""
    return f"net_peak_{which}"


def tracked_peak_metric(which: str) -> str:
    """The asv benchmark that records pass ``which``'s net peak: ``track_net_peak_forward`` or ``..._backward``."""
    return f"track_{peak_metric(which)}"


def min_peak_metric(which: str) -> str:
    """The asv benchmark that records pass ``which``'s analytic minimum peak (suite ``bounds``)."""
    return f"track_min_peak_{which}"


def pass_label(which: str) -> str:
    """How a report names pass ``which``: "forward" or "forward-backward"."""
    return which.replace("_", "-")


def measure_of(benchmark: str) -> str:
    """What an asv benchmark (``suite.Class.name``) measures, as a report's cell names it: ``forward`` for
    ``unfold.Quick.time_forward``, ``net_peak_forward`` for ``...track_net_peak_forward``."""
    return benchmark.rsplit(".", 1)[-1].removeprefix("time_").removeprefix("track_")


TIMED_PASSES: dict[str, str] = {timed_metric(which): which for which in PASSES}  # "time_forward" -> "forward"


def split_cell(spec: str) -> tuple[str, str, str]:
    """A cell named ``STRATEGY:CONFIG:PASS`` on the command line, as (strategy, config, pass); a ``ValueError``
    naming ``spec`` where it is not one."""
    parts = spec.split(":")
    if len(parts) != 3:
        raise ValueError(f"cell {spec!r}: expected STRATEGY:CONFIG:{'|'.join(PASSES)}")
    if parts[2] not in PASSES:
        raise ValueError(f"cell {spec!r}: unknown pass {parts[2]!r}; known: {', '.join(PASSES)}")
    return parts[0], parts[1], parts[2]
