"""Cells timed by ``torch.utils.benchmark``, in a loop and in the suite's paired order: ``make agreement``'s timer.

Per cell, in the process this runs in, on inputs made as the suite makes them (``benchmarks.cells.Workload``):

- **loop**: the strategy's call after itself, ``Timer.blocked_autorange``'s median;
- **blocks** (a strategy other than the reference): the statements A A and A B B A (A the reference, B the strategy,
  on the same inputs, the order of ``benchmarks.replicates.measure_pair``'s blocks), timed in short runs in the
  order A A, A B B A, A B B A, A A, ... so that a drift of A's time within the process falls on both alike. By the
  medians of the runs B's two calls take t(A B B A) - t(A A) and A's two t(A A), so B / A = (t(A B B A) - t(A A)) /
  t(A A). Unlike the suite it frees each output inside the timed statement, times one placement of the inputs a
  process, and charges B with any change in A's time after B (the suite charges that to A). An error e in either
  median moves the ratio r by about e (1 + r) / r of itself, so the fastest strategies' ratios are the noisiest; a
  ratio at or below zero (the noise beyond B's whole time) is not reported.

Run as a module, one process a sample::

    python -m benchmarks.independent_timer '[["cpp", "allcnnc-conv2", "forward"], ...]' quick

prints one JSON object: each cell's key (``strategy:config:call``) -> seconds, and ``BLOCKS`` + key -> B / A.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence

from benchmarks.runner import PAIRED_REFERENCE

BLOCKS = "blocks:"  # the key of a cell's ratio in the suite's order: BLOCKS + the cell's key
# a call of the function named f, as the statements make it (x, leaf, kw, g: the cell's inputs)
CALL = {"forward": "{f}(x, **kw)", "forward_backward": "{f}(leaf, **kw).backward(g); leaf.grad = None"}
LOOP_SECONDS = 0.3  # the loop's ``min_run_time``
INTERLEAVED = (6, 0.05)  # the suite's order: runs of each statement (even: A A first as often as last), seconds each


def statements(call: str) -> dict[str, str]:
    """The statements of a cell's ``call`` (forward, forward_backward) with the strategy ``f`` and the reference
    ``r``: ``loop``, ``f`` alone; ``pair``, A A; ``blocks``, the suite's order A B B A (A ``r``, B ``f``)."""
    a, b = (CALL[call].format(f=name) for name in ("r", "f"))
    return {"loop": b, "pair": f"{a}; {a}", "blocks": f"{a}; {b}; {b}; {a}"}


def suite_order_ratio(pair: Sequence[float], blocks: Sequence[float]) -> float:
    """The strategy's time over the reference's in the suite's order, from the run times of the statements A A
    (``pair``) and A B B A (``blocks``): by their medians, the strategy's two calls take ``blocks - pair``, the
    reference's two ``pair``."""
    return (statistics.median(blocks) - statistics.median(pair)) / statistics.median(pair)


def interleaved(runs: int) -> list[str]:
    """Which statement each of ``2 * runs`` short runs times: ``pair``, ``blocks``, ``blocks``, ``pair``, ..."""
    return [("pair", "blocks", "blocks", "pair")[i % 4] for i in range(2 * runs)]


def measure(cells: Sequence[Sequence[str]], profile_name: str) -> dict[str, float]:
    """Each of ``cells`` (strategy, config, call) timed in this process in the given order: its loop's seconds and,
    where the strategy is not the reference and the ratio is positive, its ratio in the suite's order."""
    import torch
    from torch.utils.benchmark import Timer

    from benchmarks.cells import Cell, Workload
    from benchmarks.profiles import PROFILES

    profile, threads = PROFILES[profile_name], torch.get_num_threads()
    found: dict[str, float] = {}
    for strategy, config, call in cells:
        cell = Cell.from_names(strategy, config, "cpu", profile)
        workload = Workload(cell, backward=True)
        scope = {"f": cell.strategy, "x": workload.input, "leaf": workload.leaf, "kw": workload.kwargs}
        scope["g"], timed, key = workload.grad_output, statements(call), f"{strategy}:{config}:{call}"
        exec(timed["loop"], scope)  # a strategy that compiles compiles here, untimed
        found[key] = (
            Timer(timed["loop"], globals=scope, num_threads=threads).blocked_autorange(min_run_time=LOOP_SECONDS).median
        )
        if strategy == PAIRED_REFERENCE:
            continue
        scope["r"] = Cell.from_names(PAIRED_REFERENCE, config, "cpu", profile).strategy
        runs: dict[str, list[float]] = {"pair": [], "blocks": []}
        for name in interleaved(INTERLEAVED[0]):  # each Timer's first, untimed run ends the other statement's order
            timer = Timer(timed[name], globals=scope, num_threads=threads)
            runs[name] += timer.blocked_autorange(min_run_time=INTERLEAVED[1]).times
        if (ratio := suite_order_ratio(runs["pair"], runs["blocks"])) > 0:
            found[BLOCKS + key] = ratio
    return found


def main(argv: Sequence[str] | None = None) -> None:
    from benchmarks.allocator import apply_regime_now

    apply_regime_now()  # before the inputs exist
    cells, profile_name = sys.argv[1:] if argv is None else argv
    print(json.dumps(measure(json.loads(cells), profile_name)))


if __name__ == "__main__":
    main()
