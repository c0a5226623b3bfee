"""A cell that fails in one replicate keeps the samples of the others, and which replicate it lost is recorded.

Each replicate of the paired ratios is an asv run that appends one process's sample to every cell
(``benchmarks.runner``). Where a cell fails in a replicate (an error, a timeout, a killed process), asv stores the
failure in place of the cell's result and drops the samples it had (``asv.results.Results.add_result``), so the
earlier replicates' processes would be lost and the cell would read as measured by the later ones alone. The
runner therefore reads the samples before each appending replicate and, where a cell failed in it, stores them
again. A sample's position then no longer names its replicate, so each replicate a cell lost is written to
``<results file stem>.lost-replicates.jsonl`` beside the results file (asv reads only ``*.json`` there; one file
per results file, so that laying one run's results over another's never replaces another commit's records): the
reports name the cell and do not line its samples up with other cells' by replicate (``reports.results``,
``reports.analysis``). A first replicate discards a cell's earlier samples, and with them its records.
"""

from __future__ import annotations

import datetime
import itertools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from asv.environment import get_env_name
from asv.results import Results
from asv.runner import BenchmarkResult

from benchmarks.records import append_records, beside_results, read_records, write_records

LOST_REPLICATES_SUFFIX = ".lost-replicates.jsonl"


def lost_path(directory: Path, results_file: str) -> Path:
    """Where the lost replicates of ``directory/results_file`` (asv's results file of a commit and environment) go."""
    return beside_results(directory, results_file, LOST_REPLICATES_SUFFIX)


@dataclass(frozen=True)
class KeptCell:
    """One benchmark's recorded samples per parameter combination, asv's ``number`` for each, and the version of the
    benchmark's code that took them."""

    version: str
    params: list
    samples: list[list[float] | None]
    numbers: list[int | None]


Snapshot = dict[str, dict[str, KeptCell]]  # results file name -> benchmark name -> its samples


def stored_cell_name(benchmark: str, combo: tuple[str, ...]) -> str:
    return f"{benchmark}({', '.join(combo)})"  # asv's cell name: its params as stored, each a repr


def store_cells(
    results: Results, name: str, version: str, params: list, cells: dict[int, tuple[float | None, list | None, int]]
) -> None:
    """Set ``cells`` of benchmark ``name`` in ``results`` (each index of its params' product: a value, its samples and
    asv's number) through asv's own API, which recomputes a value and its stats from the samples and stores a value
    of None as a failure; its other cells stay as they are."""
    size = len(list(itertools.product(*params)))

    def column(k: int) -> list:
        return [cells[j][k] if j in cells else None for j in range(size)]

    result = BenchmarkResult(
        result=column(0),
        samples=column(1),
        number=column(2),
        errcode=0,
        stderr=results.stderr.get(name, ""),
        profile=None,
    )
    started = results.started_at.get(name)
    results.add_result(
        {"name": name, "version": version, "params": params},
        result,
        started_at=None if started is None else datetime.datetime.fromtimestamp(started / 1000, datetime.timezone.utc),
        duration=results.duration.get(name),
        record_samples=True,
        selected_idx=set(cells),
    )


@dataclass(frozen=True)
class CommitResults:
    """The results files of one commit on one machine, into which asv merges every chunk: the file of one asv
    environment, or of every environment where none is named."""

    directory: Path  # <results_dir>/<machine>
    commit: str
    environment: str = ""  # asv's name of the environment the run measures in (the results file's suffix)

    @classmethod
    def of_this_interpreter(cls, directory: Path, commit: str) -> CommitResults:
        """The file that ``asv run --python=same`` from this interpreter saves in: asv names that environment
        after the interpreter's path (``asv.environment.ExistingEnvironment``)."""
        return cls(directory, commit, get_env_name("existing", os.path.abspath(sys.executable), {}, {}))

    def paths(self) -> list[Path]:
        return sorted(self.directory.glob(f"{self.commit[:8]}-{self.environment or '*'}.json"))

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
                numbers = [(s or {}).get("number", 1) for s in results.get_result_stats(name, params)]
                version = results.benchmark_version.get(name)
                kept.setdefault(path.name, {})[name] = KeptCell(version, params, samples, numbers)
        return kept

    def failed(self, cells: tuple[str, ...]) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
        """Per results file, each of ``cells`` (asv's ``name(param, ...)``) that it records as failed (result None):
        its benchmark and params as stored."""
        wanted, found = set(cells), {}
        for path in self.paths():
            results = Results.load(str(path))
            for name in results.get_all_result_keys():
                params = results.get_result_params(name)
                combos = list(itertools.product(*params)) if params else []
                values = results.get_result_value(name, params) if params else []
                failed = [
                    (name, c) for c, v in zip(combos, values) if v is None and stored_cell_name(name, c) in wanted
                ]
                if failed:
                    found.setdefault(path.name, []).extend(failed)
        return found

    def restore(self, kept: Snapshot) -> list[str]:
        """Store again the samples of every cell that had some in ``kept`` and has failed since (asv's result None),
        where the benchmark's code is the version that took them; asv's ``name(param, ...)`` of each."""
        restored = []
        for path in self.paths():
            if path.name not in kept:
                continue
            results = Results.load(str(path))
            changed = False
            for name, cell in kept[path.name].items():
                if name not in results.get_all_result_keys() or results.get_result_params(name) != cell.params:
                    continue
                if results.benchmark_version.get(name) != cell.version:
                    continue  # asv discarded the old samples itself: they timed other code
                values = results.get_result_value(name, cell.params)
                lost = {j for j, (value, old) in enumerate(zip(values, cell.samples)) if value is None and old}
                if not lost:
                    continue
                # the failed entries get their old samples back; asv recomputes their value and stats from them
                cells = {j: (min(cell.samples[j]), cell.samples[j], cell.numbers[j]) for j in lost}
                store_cells(results, name, cell.version, cell.params, cells)
                combos = list(itertools.product(*cell.params))
                restored += [stored_cell_name(name, combos[j]) for j in sorted(lost)]
                changed = True
            if changed:
                results.save(str(self.directory.parent))
        return restored

    def record_lost(self, failed: dict[str, list[tuple[str, tuple[str, ...]]]], replicate: int, of: int) -> None:
        """Append that each ``failed`` cell (``failed``'s shape) lost replicate ``replicate`` of ``of``."""
        for file, cells in failed.items():
            append_records(
                lost_path(self.directory, file),
                (
                    {"file": file, "benchmark": name, "params": list(combo), "replicate": replicate, "of": of}
                    for name, combo in cells
                ),
            )

    def forget_lost(self, cells: tuple[str, ...], replicate: int | None = None) -> None:
        """Drop the records of ``cells`` in this commit's files (a first replicate discards their samples), or only
        those of their losing ``replicate`` (a replicate taken back, ``benchmarks.checkpoint``)."""
        wanted = set(cells)
        for path in sorted(self.directory.glob(f"{self.commit[:8]}-{self.environment or '*'}{LOST_REPLICATES_SUFFIX}")):
            records = read_records(path)
            kept = [
                record
                for record in records
                if not (
                    stored_cell_name(record["benchmark"], tuple(record["params"])) in wanted
                    and replicate in (None, record["replicate"])
                )
            ]
            if len(kept) != len(records):
                write_records(path, kept)
