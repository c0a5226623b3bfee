"""A cell that fails in one replicate keeps the samples of the replicates before it (``benchmarks.kept_samples``)."""

from __future__ import annotations

import sys
from pathlib import Path

from asv.results import Results
from asv.runner import BenchmarkResult

from benchmarks.kept_samples import CommitResults
from benchmarks.runner import Chunk, Ledger, run_chunks

COMMIT = "0123456789abcdef0123456789abcdef01234567"
NAME = "ratios.Quick.track_ratio_forward"
PARAMS = [["'gather'", "'cpp'"], ["'example'"], ["'cpu'"]]
CELLS = tuple(f"{NAME}({strategy}, 'example', 'cpu')" for strategy in PARAMS[0])


def _replicate(directory: Path, samples: list[float | None], append: bool) -> None:
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
    benchmark = {"name": NAME, "version": "v1", "params": PARAMS}
    results.add_result(benchmark, result, record_samples=True, append_samples=append)
    path.parent.mkdir(parents=True, exist_ok=True)
    results.save(str(directory))


def _stored(directory: Path) -> tuple[list, list]:
    results = Results.load(str(next((directory / "m").glob("*.json"))))
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


_FAILING_REPLICATE = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_kept_samples import _replicate
_replicate(Path({directory!r}), [1.1, None], append=True)
sys.exit(2)  # as asv exits when a benchmark failed
"""


def test_the_runner_keeps_the_samples_of_a_cell_that_fails_in_an_appending_replicate(tmp_path):
    _replicate(tmp_path, [1.0, 2.0], append=False)
    fake_asv = [
        sys.executable,
        "-c",
        _FAILING_REPLICATE.format(tests=str(Path(__file__).parent), directory=str(tmp_path)),
    ]
    lines: list[str] = []
    ledger = Ledger(tmp_path / "progress", {"test": "kept"})
    saved = CommitResults(tmp_path / "m", COMMIT)
    first, second = (Chunk("", CELLS, replicate, 2) for replicate in (1, 2))

    status = run_chunks([second], fake_asv, {}, tmp_path, tmp_path / "log", ledger, False, lines.append, saved)
    assert status == 2 and _stored(tmp_path)[1] == [[1.0, 1.1], [2.0]]
    assert lines[-1] == f"  failed in ratios 2/2, kept with the samples of the replicates before it: {CELLS[1]}"

    lines.clear()  # the first replicate discards an earlier run's samples: nothing of them is kept
    _replicate(tmp_path, [1.0, 2.0], append=False)
    status = run_chunks([first], fake_asv, {}, tmp_path, tmp_path / "log", ledger, False, lines.append, saved)
    assert status == 2 and _stored(tmp_path)[1] == [[1.0, 1.1], None] and not lines[-1].startswith("  failed")
