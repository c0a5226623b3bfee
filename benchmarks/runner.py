"""A benchmark run as a sequence of asv runs, one per config, each saved when it ends.

asv writes a results file only when its run ends, so a run killed at minute 35 would lose 35 minutes. The
run is therefore split into chunks, one per config (every suite's cells of that config), each its own
``asv run`` with ``--set-commit-hash``: asv merges each chunk's cells into the same results file. A kill
loses only the chunk in flight; with ``resume`` (``bench --resume``) ``run_chunks`` skips the chunks that a run
of the same commit, environment, profile, machine (so regime), selection, results directory and plan (the cells of
each chunk) already finished, recorded in a ledger beside asv's environments (``.asv/progress``). Each asv run is
guarded (``benchmarks.process_guard``): no process of it outlives the run. asv's own output goes to a log file; the
terminal gets one line per chunk.

The cells are the asv suites' own parameter grids (``SUITES`` x profile class x benchmark method x params),
selected by the same regular expression asv applies to ``name(param, ...)``.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import re
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.process_guard import run_guarded
from benchmarks.profiles import SUITES, Profile

if TYPE_CHECKING:  # the asv suites import this module: asv's results API only where a run is driven
    from benchmarks.checkpoint import Checkpoint
    from benchmarks.kept_samples import CommitResults

BENCHMARK_PREFIXES = ("time_", "track_", "peakmem_", "mem_")
# The asv -b expression of the running asv process: a suite's correctness gate (setup_cache) checks only the
# cells it selects, so a chunk, or make bench BENCH=..., does not check every strategy on every config.
SELECTION_VARIABLE = "UNFOLD_BENCH_SELECTION"


def cell_name(module_name: str, class_name: str, method: str, combo: tuple) -> str:
    """asv's name of one cell, ``module.Class.method(param, ...)``, which its ``-b`` expressions are matched against."""
    return f"{module_name}.{class_name}.{method}({', '.join(map(repr, combo))})"


@dataclass(frozen=True)
class Chunk:
    """Cells measured by one asv run: one config's figures, or one replicate of every selected paired ratio
    (``benchmarks.ratios``): each replicate is an asv run of its own, so its processes fork from a server of their
    own (a new layout of the interpreter's code and data, which every process forked from one server shares), and
    asv appends its samples to the earlier replicates' (``--append-samples``)."""

    config: str  # the config of a figures chunk; "" for a replicate, which covers every selected config
    cells: tuple[str, ...]  # asv's "name(param, ...)" of each selected cell
    replicate: int | None = None  # 1, 2, ...: which replicate of the paired ratios (None: a figures chunk)
    replicates: int | None = None

    @property
    def name(self) -> str:
        """How the ledger and the progress lines name it."""
        return self.config if self.replicate is None else f"ratios {self.replicate}/{self.replicates}"

    def arguments(self) -> list[str]:
        """The asv run options that select and sample these cells: a replicate records its samples, and every
        replicate after the first appends them to the earlier ones' (the first discards a previous run's)."""
        if self.replicate is None:
            return ["-b", self.regex()]
        keep = ["--record-samples"] + (["--append-samples"] if self.replicate > 1 else [])
        return [*keep, "-b", self.regex()]

    @property
    def benchmarks(self) -> set[str]:
        """asv's names of the benchmarks these cells belong to (``module.Class.method``)."""
        return {cell.split("(", 1)[0] for cell in self.cells}

    def regex(self) -> str:
        """An asv ``-b`` expression that selects exactly these cells."""
        return "^(?:" + "|".join(re.escape(cell) for cell in self.cells) + ")$"


def suite_cells(profile: Profile, suites: tuple[str, ...] = SUITES) -> list[tuple[str, dict[str, str]]]:
    """Every cell of ``profile`` in ``suites``: asv's ``name(param, ...)`` and the cell's params by name."""
    cells = []
    for module_name in suites:
        suite = getattr(importlib.import_module(f"benchmarks.{module_name}"), profile.class_name)
        methods = sorted(name for name in dir(suite) if name.startswith(BENCHMARK_PREFIXES))
        for method in methods:
            for combo in itertools.product(*suite.params):
                name = cell_name(module_name, profile.class_name, method, combo)
                cells.append((name, dict(zip(suite.param_names, combo))))
    return cells


PAIRED_SUITE = "ratios"  # every strategy over the reference, paired per process
FLOORS_SUITE = "floors"  # the reference over each write floor, paired per process (benchmarks.floors)
DIRECT_FLOORS_SUITE = "direct_floors"  # a strategy over each floor where the reference cannot run
# their cells run in several processes each, an asv run per replicate
PAIRED_SUITES = (PAIRED_SUITE, FLOORS_SUITE, DIRECT_FLOORS_SUITE)
PAIRED_REFERENCE = "native"  # the strategy the paired suite measures every other against


def plan(
    profile: Profile, narrow: str = "", ratio_processes: int | None = None, devices: Collection[str] | None = None
) -> list[Chunk]:
    """The run's chunks holding the cells ``narrow`` (a regex) selects on ``devices`` (default: every device):
    each config's figures, in the config table's order, then ``ratio_processes`` (default
    ``profile.ratio_processes``) replicates of the paired ratios and floors (the reference's own ratio is not
    measured: asv's n/a). A cell left out is not run at all: asv records it n/a, as it records one that its
    ``setup`` skips, without forking a process to find out."""
    if ratio_processes is not None and ratio_processes < 1:
        raise ValueError(f"ratio_processes={ratio_processes!r}: at least one process")
    pattern = re.compile(narrow)
    selected = [
        (name, params)
        for name, params in suite_cells(profile)
        if pattern.search(name) and (devices is None or params.get("device", "") in devices)
    ]
    chunks = []
    for config in profile.configs():
        figures = tuple(
            name
            for name, params in selected
            if params["config"] == config.name and not name.startswith(tuple(f"{s}." for s in PAIRED_SUITES))
        )
        chunks += [Chunk(config.name, figures)] if figures else []
    paired = tuple(
        name
        for name, params in selected
        if name.startswith(tuple(f"{s}." for s in PAIRED_SUITES)) and params.get("strategy") != PAIRED_REFERENCE
    )
    if paired:
        count = profile.ratio_processes if ratio_processes is None else ratio_processes
        chunks += [Chunk("", paired, replicate, count) for replicate in range(1, count + 1)]
    return chunks


def plan_digest(chunks: Sequence[Chunk]) -> str:
    """A digest of ``chunks``' names and cells, for a ledger's key: a resume skips only the chunks of the same plan,
    so one whose cells changed since (another strategy registered, a config added) starts afresh."""
    plan_text = json.dumps([[chunk.name, list(chunk.cells)] for chunk in chunks])
    return hashlib.sha256(plan_text.encode()).hexdigest()[:16]


class Ledger:
    """The chunks a run has finished, kept on disk under a key naming everything the figures depend on."""

    def __init__(self, directory: Path, key: Mapping[str, str]) -> None:
        digest = hashlib.sha256(json.dumps(dict(key), sort_keys=True).encode()).hexdigest()[:16]
        self.path = directory / f"{digest}.json"
        self.key = dict(key)

    def finished(self) -> set[str]:
        if not self.path.exists():
            return set()
        return set(json.loads(self.path.read_text())["finished"])

    def record(self, finished: set[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps({**self.key, "finished": sorted(finished)}, indent=1))
        partial.replace(self.path)  # atomic: a kill leaves the old ledger or the new one

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def scratch_config(directory: Path, root: Path) -> Path:
    """A copy of ``root``'s asv configuration, written to ``directory``, that saves results in its ``results``
    folder (a check's, or a test's, that must not touch ``results/``); its paths are absolute."""
    results_dir = directory / "results"
    from asv.util import load_json

    config = load_json(str(root / "asv.conf.json"), js_comments=True)
    config.update(
        repo=str(root),
        benchmark_dir=str(root / "benchmarks"),
        env_dir=str(root / ".asv" / "env"),
        results_dir=str(results_dir),
        html_dir=str(results_dir / "html"),
    )
    path = directory / "asv.conf.json"
    path.write_text(json.dumps(config))
    return path


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}:{seconds:02d}"


def remaining_seconds(measured: list[tuple[Chunk, float]], remaining: list[Chunk]) -> float:
    """How long the ``remaining`` chunks should take, from the ``measured`` ones (each with its seconds): a replicate
    of the paired ratios takes about as long as the replicates before it, a config's figures its cells at the rate of
    the configs before it; a kind not yet measured is costed at the rate, per cell, of every chunk measured so far."""
    if not measured:
        return 0.0

    def rate(chunks: list[tuple[Chunk, float]]) -> float:
        return sum(seconds for _, seconds in chunks) / max(1, sum(len(chunk.cells) for chunk, _ in chunks))

    overall = rate(measured)
    replicates = [(chunk, seconds) for chunk, seconds in measured if chunk.replicate is not None]
    figures = rate([(chunk, seconds) for chunk, seconds in measured if chunk.replicate is None] or measured)
    total = 0.0
    for chunk in remaining:
        if chunk.replicate is None:
            total += figures * len(chunk.cells)
        elif replicates:
            total += sum(seconds for _, seconds in replicates) / len(replicates)
        else:
            total += overall * len(chunk.cells)
    return total


def _keep_samples(results: CommitResults, chunk: Chunk, kept: dict, status: int) -> list[str]:
    """After ``chunk``'s asv run: a first replicate's cells forget the replicates an earlier run lost (it discarded
    their samples); where a cell failed in a replicate, its earlier samples are stored again and the replicate it
    lost recorded (``benchmarks.kept_samples``). The cells stored again, by asv's name."""
    if chunk.replicate is None:
        return []
    if chunk.replicate == 1:
        results.forget_lost(chunk.cells)
    if not status:
        return []
    failed = results.failed(chunk.cells)
    restored = results.restore(kept) if kept else []
    results.record_lost(failed, chunk.replicate, chunk.replicates or chunk.replicate)
    return restored


def _take_back(checkpoint: Checkpoint, chunks: list[Chunk], finished: set[str]) -> str | None:
    """Put back the cells of the replicate that ``checkpoint`` was taken before, if it is one of ``chunks`` and not
    ``finished``: what a kill left of it. What was put back, to print; None where nothing was."""
    name = checkpoint.replicate()
    cut_off = next((c for c in chunks if c.name == name and c.name not in finished and c.replicate), None)
    changed = checkpoint.put_back(cut_off.cells, cut_off.replicate) if cut_off else []
    if not changed:
        return None
    return f"{name} was cut off after asv saved it: {len(changed)} of its cells put back as they were before it"


def run_chunks(
    chunks: list[Chunk],
    asv_command: list[str],
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    ledger: Ledger,
    resume: bool,
    print_line: Callable[[str], None] = print,
    results: CommitResults | None = None,
) -> int:
    """Run ``asv_command -b <chunk>`` for each chunk not yet finished; the worst asv exit status (0, or 2 when a
    benchmark failed; a failed cell is a result like any other and its chunk counts as finished). Given the
    ``results`` the chunks are saved in, a cell that fails in a replicate keeps the samples the replicates before it
    recorded, and the replicate it lost is recorded (``benchmarks.kept_samples``); an appending replicate that a kill
    cut off after asv saved it is undone before it runs again (``benchmarks.checkpoint``)."""
    checkpoint = None
    if results is not None:
        from benchmarks.checkpoint import Checkpoint

        checkpoint = Checkpoint.beside(ledger.path, results)
    finished = ledger.finished() if resume else set()
    if not resume:
        ledger.clear()
    if checkpoint is not None:
        taken_back = _take_back(checkpoint, chunks, finished) if resume else None
        if taken_back:
            print_line(f"resume: {taken_back}")
        checkpoint.discard()
    total = sum(len(c.cells) for c in chunks)
    skipped = sum(len(c.cells) for c in chunks if c.name in finished)
    if skipped:
        print_line(f"resume: {skipped} of {total} cells already measured for this commit, environment and regime")
    done = skipped
    start, worst = time.monotonic(), 0
    measured: list[tuple[Chunk, float]] = []
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        for index, chunk in enumerate(chunks, 1):
            if chunk.name in finished:
                continue
            log.write(f"\n### chunk {chunk.name}: {len(chunk.cells)} cells\n".encode())
            log.flush()
            selection = {SELECTION_VARIABLE: chunk.regex()}
            chunk_started = time.monotonic()
            appends = checkpoint is not None and chunk.replicate is not None and chunk.replicate > 1
            if appends:
                checkpoint.take(chunk.name)
            kept = results.snapshot(chunk.benchmarks) if appends else {}
            status = run_guarded([*asv_command, *chunk.arguments()], {**env, **selection}, cwd, log)
            if status not in (0, 2):  # asv itself failed, or was killed: an appending replicate is taken back
                print_line(f"asv exited with status {status} on {chunk.name}; see {log_path}")
                if appends:
                    taken_back = _take_back(checkpoint, [chunk], finished)
                    if taken_back:
                        print_line(taken_back)
                    checkpoint.discard()
                return status
            worst = max(worst, status)
            restored = _keep_samples(results, chunk, kept, status) if results is not None else []
            finished.add(chunk.name)
            ledger.record(finished)
            if appends:
                checkpoint.discard()
            done += len(chunk.cells)
            elapsed = time.monotonic() - start
            measured.append((chunk, time.monotonic() - chunk_started))
            eta = remaining_seconds(measured, [c for c in chunks[index:] if c.name not in finished])
            note = " (a cell failed)" if status else ""
            print_line(
                f"[{index:>2}/{len(chunks)}] {chunk.name:<19} {done:>4}/{total} cells, "
                f"{_clock(elapsed)} elapsed, ETA {_clock(eta)}{note}"
            )
            if restored:
                kept_line = f"  failed in {chunk.name}, kept with the samples of the replicates before it"
                print_line(f"{kept_line}: {', '.join(restored)}")
            sys.stdout.flush()
    return worst
