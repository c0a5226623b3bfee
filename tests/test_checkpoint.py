"""A replicate that a kill cut off after asv saved it is taken back before it runs again (``benchmarks.checkpoint``)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from asv.results import Results

import benchmarks.runner as runner
from benchmarks.checkpoint import Checkpoint
from benchmarks.kept_samples import LOST_REPLICATES_SUFFIX, CommitResults, lost_path
from benchmarks.runner import Chunk, Ledger, run_chunks
from tests.test_kept_samples import CELLS, COMMIT, NAME, PARAMS, _replicate, _stored

FULL = "ratios.Full.track_ratio_forward"  # another run's benchmark in the same results file
OTHER_ENV = f"{COMMIT[:8]}-existing-py_y.json"
_SECOND_REPLICATE = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.test_kept_samples import _replicate
_replicate(Path({directory!r}), [1.1, None], append=True)
sys.exit({status})
"""


def _fake_asv(root: Path, status: int) -> list[str]:
    """An asv run of replicate 2 that saves gather's sample and cpp's failure, then exits with ``status``."""
    script = _SECOND_REPLICATE.format(root=str(Path(__file__).parents[1]), directory=str(root), status=status)
    return [sys.executable, "-c", script]


def _lost_lines(root: Path) -> list[dict]:
    paths = sorted((root / "m").glob(f"*{LOST_REPLICATES_SUFFIX}"))  # one file per results file
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def _full_samples(root: Path) -> list:
    results = Results.load(str(next((root / "m").glob(f"{COMMIT[:8]}-existing-py_x.json"))))
    return results.get_result_samples(FULL, PARAMS)


def _run(root: Path, tmp_path: Path, ledger: Ledger, resume: bool, status: int = 2) -> tuple[int, list[str]]:
    lines: list[str] = []
    chunk = Chunk("", CELLS, 2, 2)
    saved = CommitResults(root / "m", COMMIT)
    code = run_chunks(
        [chunk], _fake_asv(root, status), {}, tmp_path, tmp_path / "log", ledger, resume, lines.append, saved
    )
    return code, lines


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Results of replicate 1: gather 1.0, cpp 2.0."""
    directory = tmp_path / "results"
    _replicate(directory, [1.0, 2.0], append=False)
    return directory


class _RunKilledError(Exception):
    """A kill of the run, raised where the test cuts it off."""


def _killed(*args, **kwargs) -> None:
    raise _RunKilledError


def test_a_replicate_cut_off_before_it_was_recorded_is_taken_back_and_what_came_since_is_left(
    root, tmp_path, monkeypatch
):
    ledger = Ledger(tmp_path / "progress", {"test": "killed"})
    with monkeypatch.context() as patched:
        patched.setattr(Ledger, "record", _killed)
        with pytest.raises(_RunKilledError):
            _run(root, tmp_path, ledger, resume=False)
    assert _stored(root)[1] == [[1.0, 1.1], [2.0]] and len(_lost_lines(root)) == 1  # saved, kept, not recorded

    # since the kill: another run's cells in the same file, another environment's file, another commit's record
    _replicate(root, [5.0, 6.0], append=False, name=FULL)
    shutil.copy2(root / "m" / f"{COMMIT[:8]}-existing-py_x.json", root / "m" / OTHER_ENV)
    with lost_path(root / "m", "fedcba98-existing-py_x.json").open("a") as out:
        other = {"file": "fedcba98-existing-py_x.json", "benchmark": NAME, "params": ["'cpp'"], "replicate": 2}
        out.write(json.dumps({**other, "of": 2}) + "\n")

    status, lines = _run(root, tmp_path, ledger, resume=True)
    assert status == 2
    assert (
        lines[0] == "resume: ratios 2/2 was cut off after asv saved it: 1 of its cells put back as they were before it"
    )
    assert _stored(root)[1] == [[1.0, 1.1], [2.0]]  # appended once, not twice; cpp keeps replicate 1's sample
    assert sorted(line["file"][:8] for line in _lost_lines(root)) == sorted(["fedcba98", COMMIT[:8]])  # once
    assert _full_samples(root) == [[5.0], [6.0]] and (root / "m" / OTHER_ENV).exists()
    assert ledger.finished() == {"ratios 2/2"} and not Checkpoint.beside(ledger.path, None).directory.exists()


def test_a_kill_between_asvs_save_and_keeping_the_samples_loses_none_of_them(root, tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "progress", {"test": "kept"})
    with monkeypatch.context() as patched:
        patched.setattr(runner, "_keep_samples", _killed)
        with pytest.raises(_RunKilledError):
            _run(root, tmp_path, ledger, resume=False)
    assert _stored(root)[1] == [[1.0, 1.1], None]  # asv dropped cpp's sample of replicate 1
    status, lines = _run(root, tmp_path, ledger, resume=True)
    assert status == 2 and _stored(root)[1] == [[1.0, 1.1], [2.0]] and lines[0].startswith("resume: ratios 2/2")


def test_an_asv_run_that_dies_is_taken_back_at_once_and_a_file_it_left_cut_off_is_put_back_whole(root, tmp_path):
    ledger = Ledger(tmp_path / "progress", {"test": "died"})
    status, lines = _run(root, tmp_path, ledger, resume=False, status=137)
    assert status == 137 and lines[-1].startswith("ratios 2/2 was cut off") and _stored(root)[1] == [[1.0], [2.0]]
    assert not Checkpoint.beside(ledger.path, None).directory.exists()  # nothing to put back over what comes later

    saved = CommitResults(root / "m", COMMIT)
    checkpoint = Checkpoint.beside(ledger.path, saved)
    checkpoint.take("ratios 2/2")
    path = saved.paths()[0]
    path.write_text(path.read_text()[:100])  # asv writes in place: a kill mid-save leaves the file cut off
    assert checkpoint.put_back(CELLS, 2) == list(CELLS) and _stored(root)[1] == [[1.0], [2.0]]


def test_a_copy_of_a_finished_or_unplanned_replicate_is_dropped_unused(root, tmp_path):
    ledger = Ledger(tmp_path / "progress", {"test": "stale"})
    saved = CommitResults(root / "m", COMMIT)
    Checkpoint.beside(ledger.path, saved).take("ratios 2/2")
    ledger.record({"ratios 2/2"})
    _replicate(root, [1.3, 2.3], append=True)  # measured since, by a run that recorded it
    status, lines = _run(root, tmp_path, ledger, resume=True)
    assert status == 0 and lines == ["resume: 2 of 2 cells already measured for this commit, environment and regime"]
    assert _stored(root)[1] == [[1.0, 1.3], [2.0, 2.3]]
    assert not Checkpoint.beside(ledger.path, saved).directory.exists()

    other = Ledger(tmp_path / "progress", {"test": "another plan"})
    Checkpoint.beside(other.path, saved).take("ratios 2/5")
    _replicate(root, [1.4, 2.4], append=True)
    status, lines = _run(root, tmp_path, other, resume=True)
    assert status == 2 and not any(line.startswith("resume:") for line in lines)
    assert _stored(root)[1] == [[1.0, 1.3, 1.4, 1.1], [2.0, 2.3, 2.4]]
