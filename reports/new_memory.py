"""The cells whose forward allocated less than its output: not the contract's new memory, so no figure of theirs counts.

``F.unfold`` returns new memory, and so must every strategy. One that returns a view of memory it did not allocate
times another operation: no copy is made and no memory is charged. The correctness gate refuses such an output
today (``impls.parity.storage_problem``); before b15e30d it did not, and ``as_strided`` returned its input itself on
a one-element, stride-1 kernel (allcnnc-conv8), in runs whose results stay in ``results/``.

The forward's net peak (``track_net_peak_forward``) charges every byte a call allocates and keeps, a reused output
buffer included (``benchmarks.memory``), so a forward that allocated its output has a net peak of at least the
output's bytes, :math:`O s` (``benchmarks.traffic.Sizes``). Where it falls below that by more than a net peak's
resolution, the output is not new memory, and every figure of the cell in that run (its times, net peaks and paired
ratios) is read as failed, with the reason. The results stay as asv wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from benchmarks.allocator import NET_PEAK_RESOLUTION
from benchmarks.traffic import Sizes
from benchmarks.vocabulary import tracked_peak_metric
from reports.units import BYTES

FORWARD_PEAK = tracked_peak_metric("forward")
CELL_KEYS = ["machine", "env", "commit", "profile", "strategy", "config", "device"]  # one cell of one run


def not_new_memory(table: pd.DataFrame, sizes: Mapping[tuple[str, str], Sizes]) -> pd.Series:
    """Per row of ``load_results``' ``table``: why its cell's figures do not count (its forward allocated less than
    its output, ``sizes`` by (profile, config) giving the output's bytes), or None."""
    problems = pd.Series(None, index=table.index, dtype=object)
    peaks = table[(table.metric == FORWARD_PEAK) & (table.status == "ok")]
    flagged = {}
    for row in peaks.itertuples():
        config_sizes = sizes.get((row.profile, row.config))
        if config_sizes is None:
            continue
        output = config_sizes.output_numel * config_sizes.itemsize
        if row.value < output - NET_PEAK_RESOLUTION:
            key = tuple(getattr(row, k) for k in CELL_KEYS)
            flagged[key] = (
                f"its forward allocated {BYTES.scaled(row.value):.2f} {BYTES.shown}, less than its output's "
                f"{BYTES.scaled(output):.2f} {BYTES.shown}: not new memory, as F.unfold's output is, so none of "
                "its figures counts"
            )
    if flagged:
        keys = pd.Series(list(zip(*(table[k] for k in CELL_KEYS))), index=table.index)
        problems = keys.map(lambda key: flagged.get(key))
    return problems
