"""A replicate that appends is all or nothing: what a kill left of it is taken back before it runs again.

Each replicate of the paired ratios after the first appends one process's sample to each of its cells
(``benchmarks.runner``); the run records it finished only after asv saved it and the runner kept the samples of the
cells that failed in it (``benchmarks.kept_samples``). A kill in between would have a resume append it twice, and a
cell that failed in it lose its earlier samples. So the runner copies the run's results file before such a
replicate, and where it was cut off puts back its own cells, and drops its records of lost replicates, as they were
then: what other runs saved in the same file since stays as it is.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from asv.results import Results
from asv.util import UserError

from benchmarks.kept_samples import CommitResults, store_cells, stored_cell_name

_RECORD = "replicate.json"  # in the copy: which replicate it was taken before, and the files it holds


def _load(path: Path) -> Results | None:
    """The results in ``path``, or None where a save was cut off mid-write (asv writes its files in place)."""
    try:
        return Results.load(str(path))
    except (UserError, ValueError, KeyError):
        return None


@dataclass(frozen=True)
class Checkpoint:
    """The run's results files as they were before one appending replicate, kept in ``directory``."""

    directory: Path
    results: CommitResults

    @classmethod
    def beside(cls, ledger_path: Path, results: CommitResults) -> Checkpoint:
        """The checkpoint of the run whose ledger is ``ledger_path``."""
        return cls(ledger_path.with_suffix(".checkpoint"), results)

    def take(self, replicate: str) -> None:
        """Copy the files as they are now, as they were before ``replicate`` (a chunk's name)."""
        partial = self.directory.with_name(self.directory.name + ".tmp")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        files = self.results.paths()
        for path in files:
            shutil.copy2(path, partial / path.name)
        (partial / _RECORD).write_text(json.dumps({"replicate": replicate, "files": [p.name for p in files]}))
        self.discard()
        partial.rename(self.directory)  # a kill before this leaves no copy, and the replicate has not run yet

    def replicate(self) -> str | None:
        """The name of the replicate the copy was taken before; None without a copy."""
        record = self.directory / _RECORD
        return json.loads(record.read_text())["replicate"] if record.exists() else None

    def put_back(self, cells: tuple[str, ...], replicate: int) -> list[str]:
        """Make ``cells`` (asv's ``name(param, ...)``) what they were in the copy, and drop their records of having lost
        ``replicate``; a file whose save was cut off is put back whole. The cells that had changed."""
        record = json.loads((self.directory / _RECORD).read_text())
        wanted, changed = set(cells), []
        for name in record["files"]:
            target, copy = self.results.directory / name, self.directory / name
            if not copy.exists():
                continue
            now = _load(target) if target.exists() else None
            if now is None:
                _replace(target, copy)
                changed += [cell for cell in cells if cell not in changed]
                continue
            before = Results.load(str(copy))
            put = [_put_cell(now, before, benchmark, wanted) for benchmark in before.get_all_result_keys()]
            if any(put):
                _save(now, target, self.directory)
                changed += [cell for cells_put in put for cell in cells_put if cell not in changed]
        self.results.forget_lost(cells, replicate)
        return changed

    def discard(self) -> None:
        """Drop the copy: at once (a rename), so that a kill never leaves part of one to be put back."""
        dropped = self.directory.with_name(self.directory.name + ".dropped")
        shutil.rmtree(dropped, ignore_errors=True)
        if self.directory.exists():
            self.directory.rename(dropped)
            shutil.rmtree(dropped, ignore_errors=True)


def _put_cell(now: Results, before: Results, benchmark: str, wanted: set[str]) -> list[str]:
    """Give ``now``'s cells of ``benchmark`` that are ``wanted`` the value and samples they had ``before``, where the
    benchmark's code and params are the same in both; the cells that differed."""
    params = before.get_result_params(benchmark)
    if (
        not params
        or benchmark not in now.get_all_result_keys()
        or now.get_result_params(benchmark) != params
        or now.benchmark_version.get(benchmark) != before.benchmark_version.get(benchmark)
    ):
        return []
    combos = list(itertools.product(*params))
    values, samples = before.get_result_value(benchmark, params), before.get_result_samples(benchmark, params)
    now_values, now_samples = now.get_result_value(benchmark, params), now.get_result_samples(benchmark, params)
    selected = {
        j
        for j, combo in enumerate(combos)
        if stored_cell_name(benchmark, combo) in wanted
        and repr((values[j], samples[j])) != repr((now_values[j], now_samples[j]))  # NaN is not equal to itself
    }
    if not selected:
        return []
    numbers = [(stats or {}).get("number", 1) for stats in before.get_result_stats(benchmark, params)]
    version = before.benchmark_version.get(benchmark)
    cells = {j: (values[j], samples[j], numbers[j] if samples[j] is not None else None) for j in selected}
    store_cells(now, benchmark, version, params, cells)
    return [stored_cell_name(benchmark, combos[j]) for j in sorted(selected)]


def _replace(target: Path, source: Path) -> None:
    partial = target.with_suffix(".tmp")  # asv reads only *.json: a kill here leaves a file it ignores
    shutil.copy2(source, partial)
    partial.replace(target)


def _save(results: Results, target: Path, scratch_parent: Path) -> None:
    """Save ``results`` over ``target`` at once (asv's own save writes in place), by way of ``scratch_parent``."""
    with tempfile.TemporaryDirectory(dir=scratch_parent) as scratch:
        results.save(scratch)
        _replace(target, next(Path(scratch).rglob("*.json")))
