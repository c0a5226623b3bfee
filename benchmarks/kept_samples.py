"""A cell that fails in one replicate keeps the samples that the replicates before it recorded.

Each replicate of the paired ratios is an asv run that appends one process's sample to every cell
(``benchmarks.runner``). Where a cell fails in a replicate (an error, a timeout, a killed process), asv stores the
failure in place of the cell's result and drops the samples it had (``asv.results.Results.add_result``), so the
earlier replicates' processes would be lost and the cell would read as measured by the later ones alone. The
runner therefore reads the samples before each appending replicate and, where a cell failed in it, stores them
again: the cell keeps the processes it had, fewer than the run's other cells, which the summary names
(``reports.summary``) and which the picks' per-replicate score notices (``reports.analysis.Replicates``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from asv.results import Results
from asv.runner import BenchmarkResult


@dataclass(frozen=True)
class KeptCell:
    """One benchmark's recorded samples per parameter combination, and asv's ``number`` for each."""

    params: list
    samples: list[list[float] | None]
    numbers: list[int | None]


Snapshot = dict[str, dict[str, KeptCell]]  # results file name -> benchmark name -> its samples


@dataclass(frozen=True)
class CommitResults:
    """The results files of one commit on one machine (one per environment), into which asv merges every chunk."""

    directory: Path  # <results_dir>/<machine>
    commit: str

    def paths(self) -> list[Path]:
        return sorted(self.directory.glob(f"{self.commit[:8]}-*.json"))

    def snapshot(self, benchmarks: set[str]) -> Snapshot:
        """The samples that ``benchmarks`` (asv's names, without params) have recorded so far."""
        kept: Snapshot = {}
        for path in self.paths():
            results = Results.load(str(path))
            for name in benchmarks & set(results.get_all_result_keys()):
                params = results.get_result_params(name)
                samples = results.get_result_samples(name, params)
                if not params or not any(samples):
                    continue
                stats = results.get_result_stats(name, params)
                numbers = [(s or {}).get("number", 1) for s in stats]
                kept.setdefault(path.name, {})[name] = KeptCell(params, samples, numbers)
        return kept

    def restore(self, kept: Snapshot) -> list[str]:
        """Store again the samples of every cell that had some in ``kept`` and has failed since (asv's result None);
        asv's ``name(param, ...)`` of each, in its file's order."""
        restored = []
        for path in self.paths():
            if path.name not in kept:
                continue
            results = Results.load(str(path))
            changed = False
            for name, cell in kept[path.name].items():
                if name not in results.get_all_result_keys() or results.get_result_params(name) != cell.params:
                    continue
                values = results.get_result_value(name, cell.params)
                lost = {j for j, (value, old) in enumerate(zip(values, cell.samples)) if value is None and old}
                if not lost:
                    continue
                # the failed entries get their old samples back; asv recomputes their value and stats from them
                result = BenchmarkResult(
                    result=[min(old) if j in lost else None for j, old in enumerate(cell.samples)],
                    samples=[old if j in lost else None for j, old in enumerate(cell.samples)],
                    number=[number if j in lost else None for j, number in enumerate(cell.numbers)],
                    errcode=0,
                    stderr=results.stderr.get(name, ""),
                    profile=None,
                )
                benchmark = {"name": name, "version": results.benchmark_version[name], "params": cell.params}
                duration = results.duration.get(name)
                results.add_result(benchmark, result, duration=duration, record_samples=True, selected_idx=lost)
                combos = list(itertools.product(*cell.params))
                restored += [f"{name}({', '.join(combos[j])})" for j in sorted(lost)]
                changed = True
            if changed:
                results.save(str(self.directory.parent))
        return restored
