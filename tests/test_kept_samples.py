"""A cell that fails in one replicate keeps the samples of the replicates before it (``benchmarks.kept_samples``)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from asv.results import Results
from asv.runner import BenchmarkResult

from benchmarks.kept_samples import CommitResults
from benchmarks.runner import Chunk, Ledger, run_chunks
from reports.results import load_lost_replicates, load_results

COMMIT = "0123456789abcdef0123456789abcdef01234567"
NAME = "ratios.Quick.track_ratio_forward"
PARAMS = [["'gather'", "'cpp'"], ["'example'"], ["'cpu'"]]
CELLS = tuple(f"{NAME}({strategy}, 'example', 'cpu')" for strategy in PARAMS[0])


def _replicate(
    directory: Path, samples: list[float | None], append: bool, version: str = "v1", name: str = NAME
) -> None:
    """One asv run's replicate as asv stores it: a sample per cell, None where the cell failed."""
    path = directory / "m" / f"{COMMIT[:8]}-existing-py_x.json"
    results = (
        Results.load(str(path))
        if path.exists()
        else Results({"machine": "m"}, {}, COMMIT, 0, "3.11", "existing-py_x", {})
    )
    result = BenchmarkResult(
        result=samples,
        samples=[None if s is None else [s] for s in samples],
        number=[None if s is None else 1 for s in samples],
        errcode=0 if None not in samples else 1,
        stderr="",
        profile=None,
    )
    benchmark = {"name": name, "version": version, "params": PARAMS}
    results.add_result(benchmark, result, record_samples=True, append_samples=append)
    path.parent.mkdir(parents=True, exist_ok=True)
    results.save(str(directory))


def _stored(directory: Path) -> tuple[list, list]:
    results = Results.load(str(directory / "m" / f"{COMMIT[:8]}-existing-py_x.json"))
    return results.get_result_value(NAME, PARAMS), results.get_result_samples(NAME, PARAMS)


def test_asv_drops_a_failed_cells_earlier_samples_and_they_are_stored_again(tmp_path):
    saved = CommitResults(tmp_path / "m", COMMIT)
    _replicate(tmp_path, [1.0, 2.0], append=False)
    _replicate(tmp_path, [1.2, 2.4], append=True)
    kept = saved.snapshot({NAME})
    _replicate(tmp_path, [1.1, None], append=True)  # cpp fails in the third replicate
    assert _stored(tmp_path) == ([1.1, None], [[1.0, 1.2, 1.1], None])  # asv's own behaviour: cpp's two are gone
    assert saved.restore(kept) == [CELLS[1]]
    values, samples = _stored(tmp_path)
    assert samples == [[1.0, 1.2, 1.1], [2.0, 2.4]] and values[0] == 1.1 and values[1] == 2.2  # the medians
    _replicate(tmp_path, [1.0, 2.2], append=True)  # a later replicate appends to what was kept
    assert _stored(tmp_path)[1] == [[1.0, 1.2, 1.1, 1.0], [2.0, 2.4, 2.2]]
    assert saved.restore(saved.snapshot({NAME})) == []  # nothing failed since: nothing stored again


def test_a_cell_that_never_ran_or_was_skipped_is_not_given_samples(tmp_path):
    saved = CommitResults(tmp_path / "m", COMMIT)
    _replicate(tmp_path, [None, 2.0], append=False)  # gather fails from the first replicate on
    kept = saved.snapshot({NAME})
    _replicate(tmp_path, [None, float("nan")], append=True)  # and cpp is skipped (asv's n/a) in the second
    assert saved.restore(kept) == []
    values, samples = _stored(tmp_path)
    assert values[0] is None and samples == [None, None]
    assert saved.snapshot({"ratios.Quick.track_ratio_forward_backward"}) == {}  # a benchmark with no results


def test_every_benchmark_that_failed_in_a_replicate_is_found_and_stored_again(tmp_path):
    saved, backward = CommitResults(tmp_path / "m", COMMIT), "ratios.Quick.track_ratio_forward_backward"
    for name in (NAME, backward):
        _replicate(tmp_path, [1.0, 2.0], append=False, name=name)
    kept = saved.snapshot({NAME, backward})
    for name in (NAME, backward):  # cpp times out in both of its benchmarks
        _replicate(tmp_path, [1.1, None], append=True, name=name)
    cells = (*CELLS, *(cell.replace(NAME, backward) for cell in CELLS))
    failed = saved.failed(cells)
    assert sorted(name for name, _ in failed[f"{COMMIT[:8]}-existing-py_x.json"]) == [NAME, backward]
    assert sorted(saved.restore(kept)) == sorted([CELLS[1], CELLS[1].replace(NAME, backward)])


def test_samples_of_code_that_has_changed_since_are_not_stored_again(tmp_path):
    saved = CommitResults(tmp_path / "m", COMMIT)
    _replicate(tmp_path, [1.0, 2.0], append=False)
    kept = saved.snapshot({NAME})
    _replicate(tmp_path, [1.1, None], append=True, version="v2")  # asv itself drops samples of another version
    assert saved.restore(kept) == [] and _stored(tmp_path)[1] == [[1.1], None]


_FAILING_REPLICATE = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_kept_samples import _replicate
_replicate(Path({directory!r}), [1.1, None], append="--append-samples" in sys.argv)
sys.exit(2)  # as asv exits when a benchmark failed
"""


def test_the_runner_keeps_the_samples_of_a_cell_that_fails_and_records_the_replicate_it_lost(tmp_path):
    root = tmp_path / "results"
    _replicate(root, [1.0, 2.0], append=False)
    (root / "m" / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    script = _FAILING_REPLICATE.format(tests=str(Path(__file__).parent), directory=str(root))
    fake_asv = [sys.executable, "-c", script]
    lines: list[str] = []
    ledger = Ledger(tmp_path / "progress", {"test": "kept"})
    saved = CommitResults(root / "m", COMMIT)
    first, second = (Chunk("", CELLS, replicate, 2) for replicate in (1, 2))
    key = ("m", f"{COMMIT[:8]}-existing-py_x.json", NAME, ("cpp", "example", "cpu"))

    status = run_chunks([second], fake_asv, {}, tmp_path, tmp_path / "log", ledger, False, lines.append, saved)
    assert status == 2 and _stored(root)[1] == [[1.0, 1.1], [2.0]]
    assert lines[-1] == f"  failed in ratios 2/2, kept with the samples of the replicates before it: {CELLS[1]}"
    assert load_lost_replicates(root) == {key: (2,)}  # its one sample is replicate 1's, not 2's

    lines.clear()  # a first replicate discards an earlier run's samples, and what they lost
    status = run_chunks([first], fake_asv, {}, tmp_path, tmp_path / "log", ledger, False, lines.append, saved)
    assert status == 2 and _stored(root)[1] == [[1.1], None] and not lines[-1].startswith("  failed")
    assert load_lost_replicates(root) == {key: (1,)}
    listed = {NAME: {"name": NAME, "param_names": ["strategy", "config", "device"], "params": PARAMS, "unit": "ratio"}}
    (root / "benchmarks.json").write_text(json.dumps(listed))
    table = load_results(root, run_levels={}).set_index("strategy")
    assert table.loc["cpp", "lost_replicates"] == (1,) and table.loc["gather", "lost_replicates"] == ()
    saved.forget_lost(CELLS)
    assert load_lost_replicates(root) == {}


def test_a_run_named_by_its_environment_reads_only_its_own_results_file(tmp_path):
    _replicate(tmp_path, [None, 2.0], append=False)
    ours = tmp_path / "m" / f"{COMMIT[:8]}-existing-py_x.json"
    shutil.copy2(ours, ours.with_name(f"{COMMIT[:8]}-existing-py_y.json"))  # another environment: gather failed
    _replicate(tmp_path, [1.0, 2.0], append=False)
    every_environment = CommitResults(tmp_path / "m", COMMIT)
    assert list(every_environment.failed(CELLS)) == [f"{COMMIT[:8]}-existing-py_y.json"]
    assert CommitResults(tmp_path / "m", COMMIT, "existing-py_x").failed(CELLS) == {}
