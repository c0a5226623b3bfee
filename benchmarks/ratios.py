"""asv suite: each strategy's time as a multiple of the reference's, measured paired inside every process.

Per profile class (``Quick`` / ``Full``), params strategy x config x device, unit ``ratio``:

- ``track_ratio_forward`` / ``track_ratio_forward_backward``: one process times the strategy and the
  reference (``native``) on the same inputs, interleaved in blocks A B B A, over ``Profile.placements``
  placements of the inputs (``benchmarks.replicates.measure_pair``: fresh memory behind a random spacer each),
  and gives its ratio ``t_strategy / t_native`` as one sample. Which side is set up first is drawn per process.

A ratio taken this way is not the quotient of two medians from different processes: the placement and the
process's code layout, which move one strategy against another (``docs/variance-x-native.txt``), act on both sides
of every block alike. The process is the unit of replication, and since every process asv forks from one server
shares that server's layout, each of ``Profile.ratio_processes`` replicates is an asv run of its own
(``benchmarks.runner.plan``), appending its sample (``--append-samples``). A benchmark that returns
``{"samples": [...], "number": 1}`` is stored as a timing is: asv keeps the samples and records their median and
its 99% interval (``asv.results.Results.add_result``); the reports use the samples (``reports.results``).

``setup`` raises ``NotImplementedError`` (asv: "n/a") for the reference itself, for a cell that does not run
here, and where the reference does not run (``native`` has no 3-d unfold); a cell whose strategy or reference
failed the correctness gate raises ``WrongResultError``.
"""

from __future__ import annotations

import math
import random

from benchmarks.cell_suite import CellSuite, suite_params
from benchmarks.cells import Cell, WrongResultError, use_exact_float32
from benchmarks.profiles import FULL, QUICK, Profile
from benchmarks.replicates import measure_pair, trimmed_mean
from benchmarks.runner import PAIRED_REFERENCE

REFERENCE = PAIRED_REFERENCE


def process_ratio(cells: tuple[Cell, Cell], which: str | tuple[str, str], profile: Profile, seed: int) -> float:
    """``cells[1]``'s time over ``cells[0]``'s for ``which`` (the call both make, or each one's), measured paired in
    this process: the mean over ``profile.placements`` placements of each placement's trimmed mean block log-ratio,
    exponentiated. ``seed`` draws the placements and which side is set up first."""
    passes = (which, which) if isinstance(which, str) else which
    flip = seed % 2 == 1
    ordered, passes = ((cells[1], cells[0]), passes[::-1]) if flip else (cells, passes)
    rounds = measure_pair(
        ordered,
        passes,
        profile.placements,
        profile.blocks,
        profile.placement_seconds,
        seed,
        warmup_blocks=profile.warmup_blocks,
        warmup_seconds=profile.placement_seconds,
    )
    log_ratio = sum(trimmed_mean(r["log_ratios"]) for r in rounds) / profile.placements
    return math.exp(-log_ratio if flip else log_ratio)


def gate_problems(verdicts: dict, cells: list[Cell]) -> dict[bool, str]:
    """Why ``cells``' figures cannot count, per pass (``backward`` False: the forward, True: the forward-backward),
    from the correctness gate's ``verdicts``; raises ``WrongResultError`` (in ``setup``: the cell fails) where a
    cell's forward is wrong or unchecked, since then neither pass counts."""
    problems: dict[bool, str] = {}
    for backward in (False, True):
        for cell in cells:
            verdict = verdicts.get(cell.key)
            problem = "not checked" if verdict is None else verdict.problem(backward=backward)
            if problem is not None:
                problems.setdefault(backward, f"{'/'.join(cell.key)}: {problem}")
    if False in problems:
        raise WrongResultError(problems[False])
    return problems


class _RatioSuite(CellSuite):
    unit = "ratio"
    reference = REFERENCE

    def _gate(self) -> dict:
        """The unfold suite's gate over the selected cells and their reference (``benchmarks.unfold``); its verdicts
        are cached per cell (``benchmarks.cells.gate``), so a cell the unfold suite checked is not checked again."""
        from benchmarks.cells import gate

        selected = self._selected()
        references = [(self.reference, config, device) for _, config, device in selected]
        names = dict.fromkeys([*selected, *references])
        return gate([Cell.from_names(*key, self.profile, self.strategies) for key in names], progress=print)

    def setup(self, verdicts: dict, strategy: str, config: str, device: str) -> None:
        if strategy == self.reference:
            raise NotImplementedError(f"{strategy} is the reference")
        cells = [
            Cell.from_names(name, config, device, self.profile, self.strategies) for name in (self.reference, strategy)
        ]
        for cell in cells:
            reason = cell.skip_reason()
            if reason is not None:
                raise NotImplementedError(reason if cell.strategy.name == strategy else f"no reference: {reason}")
        self.problems = gate_problems(verdicts, cells)
        use_exact_float32(device)
        self.cells = (cells[0], cells[1])
        self.seed = random.SystemRandom().randrange(1 << 30)

    def _ratio(self, which: str) -> dict:
        backward = which != "forward"
        if backward in self.problems:
            raise WrongResultError(self.problems[backward])
        return {"samples": [process_ratio(self.cells, which, self.profile, self.seed)], "number": 1}

    def track_ratio_forward(self, verdicts: dict, strategy: str, config: str, device: str) -> dict:
        return self._ratio("forward")

    def track_ratio_forward_backward(self, verdicts: dict, strategy: str, config: str, device: str) -> dict:
        return self._ratio("forward_backward")


class Quick(_RatioSuite):
    """The quick profile's paired ratios."""

    profile = QUICK
    params = suite_params(QUICK)

    def setup_cache(self) -> dict:  # defined per class: asv keys the cache by source line
        return self._gate()

    setup_cache.timeout = QUICK.gate_timeout


class Full(_RatioSuite):
    """The full profile's paired ratios."""

    profile = FULL
    params = suite_params(FULL)

    def setup_cache(self) -> dict:  # defined per class: asv keys the cache by source line
        return self._gate()

    setup_cache.timeout = FULL.gate_timeout
