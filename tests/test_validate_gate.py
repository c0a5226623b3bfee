"""The gate's validation: A/A and injected runs alternate, each run is judged, and a validation stopped part way
has written what it finished (the gate's own runs replaced by tables made here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from unfold_bench.commands import validate_gate

BASE, SAME, INJECTED = "b" * 40, "a" * 40, "c" * 40
CONFIG = "allcnnc-conv3"


def _row(strategy: str, metric: str, verdict: str, ratio: float) -> dict:
    unit = "seconds" if metric.startswith("time") else "bytes"
    return {
        "benchmark": f"unfold.Quick.{metric}",
        "params": f"{strategy}, {CONFIG}, cpu",
        "unit": unit,
        "verdict": verdict,
        "ratio": ratio,
        "low": ratio * 0.98,
        "high": ratio * 1.02,
        "resolution": 1.08,
        "pairs": 16,
    }


def _table(head: str, miss_cpp: bool) -> pd.DataFrame:
    """One run's table: native unchanged; at the injected head, the injected cells flagged (cpp's missed if
    ``miss_cpp``)."""
    rows = [_row("native", "time_forward", "unchanged", 1.0)]
    if head == INJECTED:
        for strategy, metric in sorted(validate_gate.EVERY.injected):
            missed = miss_cpp and strategy == "cpp"
            rows.append(_row(strategy, metric, "unchanged" if missed else "regression", 1.03 if missed else 1.1))
    return pd.DataFrame(rows)


def _validate(
    tmp_path, monkeypatch, aa: int, injected: int, outcome, *options: str, commands: list | None = None
) -> tuple[list[str], Path, int | None]:
    """Run the validation with ``outcome(n, head)`` in place of the gate's n-th run (1-based): it returns the exit
    status, or raises to stop the validation. Returns the heads run, the text file and the validation's status
    (None where it was stopped); each gate command is appended to ``commands``."""
    clone = tmp_path / "work" / "clone"
    heads: list[str] = []

    def gate(command: list[str], cwd) -> subprocess.CompletedProcess:
        if commands is not None:
            commands.append(command)
        head = command[-1]
        heads.append(head)
        status = outcome(len(heads), head)
        report = clone / ".asv" / "regress" / f"paired-{BASE[:8]}-{head[:8]}.csv"
        report.parent.mkdir(parents=True, exist_ok=True)
        _table(head, miss_cpp=len(heads) == 2).to_csv(report, index=False)
        return subprocess.CompletedProcess(command, status, "wall-clock resolution: test\n", "")

    monkeypatch.setattr(validate_gate, "make_clone", lambda workdir, injection: (clone, BASE, SAME, INJECTED))
    monkeypatch.setattr(validate_gate, "_run", gate)
    out = tmp_path / "docs" / "gate-validation.txt"
    argv = ["validate_gate.py", "--aa", str(aa), "--injected", str(injected), "--bench", CONFIG, *options]
    monkeypatch.setattr(sys, "argv", [*argv, "--workdir", str(tmp_path / "work"), "--out", str(out)])
    try:
        status = validate_gate.main()
    except KeyboardInterrupt:
        status = None
    return heads, out, status


def test_runs_alternate_and_a_stopped_validation_keeps_the_runs_it_finished(tmp_path, monkeypatch):
    def outcome(n: int, head: str) -> int:
        if n == 4:  # the machine is taken back during the fourth run
            raise KeyboardInterrupt
        return int(head == INJECTED)

    heads, out, status = _validate(tmp_path, monkeypatch, 3, 3, outcome)
    assert status is None
    assert heads == [SAME, INJECTED, SAME, INJECTED]
    text = out.read_text()
    assert "3 A/A and 3 injected runs planned" in text
    assert "finished: 2 of 3 A/A runs (0 failed) and 1 of 3 injected runs (0 failed)" in text
    assert "injected run 1: exit 1" in text and "missed [('cpp', 'allcnnc-conv3', 'time_forward')]" in text
    assert "injected: 0 of 1 runs flagged every injected cell" in text
    assert "gather's forward caught on every config in 1 of 1" in text
    assert "cpp's forward caught on every config in 0 of 1" in text
    assert "(every cell of an A/A run, every other strategy's cell of an injected run): 0 flagged of 3" in text
    tables = sorted(p.name for p in (out.parent / "gate-validation-runs").iterdir())
    assert tables == ["AA-1.csv", "AA-2.csv", "injected-1.csv"]
    assert not list(out.parent.glob(".*"))  # nothing written aside is left behind
    promise = "resolving 1.10x: 2 of 3 caught (67%); not resolving 1.10x: 0 of 0 caught"
    assert promise in text
    assert promise in validate_gate.rejudge([out.parent / "gate-validation-runs"], 0.05, 0.05)[-1]


def test_several_validations_are_judged_together_and_the_text_names_its_command(tmp_path, monkeypatch, capsys):
    def outcome(n: int, head: str) -> int:
        if n == 4:
            raise KeyboardInterrupt
        return int(head == INJECTED)

    _, out, _ = _validate(tmp_path, monkeypatch, 3, 3, outcome)
    runs = out.parent / "gate-validation-runs"
    again = tmp_path / "again-runs"
    again.mkdir()
    for table in runs.iterdir():  # a second sitting of the same runs
        (again / table.name).write_bytes(table.read_bytes())
    text = tmp_path / "together.txt"
    assert validate_gate.main(["--rejudge", str(runs), str(again), "--out", str(text)]) == 0
    lines = text.read_text().splitlines()
    assert lines[0] == f"unfold-bench validate-gate --rejudge {runs} {again} --out {text}"
    assert (
        "0 of 6 time cells of unchanged code flagged; the slowed forwards all caught in 0 of 2 injected runs"
        in (lines[1])
    )
    assert f"  {again.name}/injected-1: resolution median 1.080x, worst 1.080x" in lines
    assert "resolving 1.10x: 4 of 6 caught (67%)" in lines[-1]
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as refused:
        validate_gate.main(["--rejudge", str(runs), str(tmp_path / "empty")])
    assert refused.value.code == 2
    assert f"--rejudge {tmp_path / 'empty'}: no saved tables" in capsys.readouterr().err


def test_a_run_whose_gate_failed_counts_as_caught_nothing_and_the_rest_run_on(tmp_path, monkeypatch):
    heads, out, status = _validate(tmp_path, monkeypatch, 3, 1, lambda n, head: 2 if n == 2 else 0)
    assert heads == [SAME, INJECTED, SAME, SAME]  # the injected runs run out first, the A/A runs go on
    text = out.read_text()
    assert status == 1
    assert "injected run 1: exit 2 (the gate failed; this run caught nothing)" in text
    assert "finished: 3 of 3 A/A runs (0 failed) and 1 of 1 injected runs (1 failed)" in text
    assert "injected: 0 of 1 runs flagged every injected cell" in text
    assert "gather's forward caught on every config in 0 of 1" in text


def test_the_asv_mode_counts_an_injected_run_that_flagged_nothing_as_a_miss(tmp_path, monkeypatch):
    """The asv mode's table holds only the rows it flagged, so the configs to catch come from the selection."""
    clone = tmp_path / "work" / "clone"

    def gate(command: list[str], cwd) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(command, 0, "nothing changed\n", "")

    monkeypatch.setattr(validate_gate, "make_clone", lambda workdir, injection: (clone, BASE, SAME, INJECTED))
    monkeypatch.setattr(validate_gate, "_run", gate)
    out = tmp_path / "gate-validation.txt"
    argv = ["validate_gate.py", "--aa", "0", "--injected", "1", "--mode", "asv", "--bench", "allcnnc-conv2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--workdir", str(tmp_path / "work"), "--out", str(out)])
    assert validate_gate.main() == 0
    text = out.read_text()
    assert "('cpp', 'allcnnc-conv2', 'time_forward')" in text.split("missed")[1]
    assert "injected: 0 of 1 runs flagged every injected cell" in text
    assert "0 flagged (the asv mode prints only those)" in text


def test_the_gate_runs_at_the_processes_given_and_the_text_says_how_many(tmp_path, monkeypatch):
    commands: list[list[str]] = []
    _validate(
        tmp_path, monkeypatch, 1, 1, lambda n, head: int(head == INJECTED), "--processes", "12", commands=commands
    )
    assert len(commands) == 2 and all(c[c.index("--processes") + 1] == "12" for c in commands)
    text = (tmp_path / "docs" / "gate-validation.txt").read_text()
    assert "--processes 12" in text.splitlines()[0] and "processes: 12, as given by --processes" in text
