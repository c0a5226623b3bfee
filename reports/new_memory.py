"""The cells whose forward allocated less than its output: not the contract's new memory, so no figure of theirs counts.

``F.unfold`` returns new memory, and so must every strategy. One that returns a view of memory it did not allocate
times another operation: no copy is made and no memory is charged. The correctness gate refuses such an output
(``impls.parity.storage_problem``), but results kept from before it checked the output's storage may hold one (an
``as_strided`` that returned its input itself on a one-element, stride-1 kernel), and so may an outside strategy's.

A forward that allocates its output has a net peak (``track_net_peak_forward``) of at least the output's bytes,
:math:`O s`: the run's own analytic minimum (``bounds``' ``track_min_peak_forward``), or the catalogue's sizes
where the run recorded none above 0. Where it falls below that by more than a net peak's resolution, every figure
of the cell in that run (times, net peaks, paired ratios, compile times) is read as failed, with the reason. A
strategy that reuses its output is charged its buffer whatever the call did (``benchmarks.cells.charged_net_peak``),
so only the gate guards it. The results stay as asv wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from benchmarks.allocator import NET_PEAK_RESOLUTION
from benchmarks.traffic import Sizes
from benchmarks.vocabulary import tracked_peak_metric
from reports.analysis import RUN_KEYS
from reports.units import BYTES

FORWARD_PEAK = tracked_peak_metric("forward")
MINIMUM = FORWARD_PEAK.replace("net_peak", "min_peak")  # the bounds suite's analytic minimum: O s
CELL_KEYS = [*RUN_KEYS, "strategy", "config", "device"]  # one cell of one run


def _output_bytes(row, minima: Mapping[tuple, float], sizes: Mapping[tuple[str, str], Sizes]) -> float | None:
    """The output's bytes of ``row``'s cell: its run's analytic minimum where above 0, else the catalogue's."""
    minimum = minima.get((*(getattr(row, k) for k in RUN_KEYS), row.config, row.device))
    if minimum is not None and minimum > 0:
        return minimum
    config_sizes = sizes.get((row.profile, row.config))
    return None if config_sizes is None else config_sizes.output_numel * config_sizes.itemsize


def not_new_memory(table: pd.DataFrame, sizes: Mapping[tuple[str, str], Sizes]) -> pd.Series:
    """Per row of ``load_results``' ``table``: why its cell's figures do not count (its forward allocated less than
    its output, whose bytes come from the run's bounds or from ``sizes`` by (profile, config)), or None."""
    ok = table[table.status == "ok"]
    bounds = ok[(ok.suite == "bounds") & (ok.metric == MINIMUM)]
    minima = dict(zip(zip(*(bounds[k] for k in [*RUN_KEYS, "config", "device"])), bounds.value))
    flagged = {}
    for row in ok[ok.metric == FORWARD_PEAK].itertuples():
        output = _output_bytes(row, minima, sizes)
        if output is not None and row.value < output - NET_PEAK_RESOLUTION:
            flagged[tuple(getattr(row, k) for k in CELL_KEYS)] = (
                f"its forward allocated {BYTES.scaled(row.value):.2f} {BYTES.shown}, less than its output's "
                f"{BYTES.scaled(output):.2f} {BYTES.shown}: not new memory, as F.unfold's output is, so none of "
                "its figures counts"
            )
    problems = pd.Series(None, index=table.index, dtype=object)
    if flagged:
        cells = table[CELL_KEYS].merge(
            pd.DataFrame([(*key, why) for key, why in flagged.items()], columns=[*CELL_KEYS, "problem"]),
            on=CELL_KEYS,
            how="left",
        )
        problems = pd.Series(cells.problem.to_numpy(), index=table.index, dtype=object)
        problems = problems.where(problems.notna(), None)
    return problems
