"""The gate's processes sized from its own A/A runs (``benchmarks.gate_design``): the variance read back from a
printed resolution is the gate's own pooled variance, the design is the fewest processes reaching the target, and
a recorded design is the one the gate runs with only at the rounds and blocks it was sized at."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from benchmarks import gate_design
from benchmarks.paired_stats import ALPHA, POWER
from benchmarks.replicates import across_processes
from reports.compare import Thresholds

VALIDATE = "unfold-bench validate-gate --aa 2 --injected 2 --out docs/gate-validation.txt"

MARGIN = Thresholds().paired_margin


def _gate_row(a_first: np.ndarray, b_first: np.ndarray, params: str, with_processes: bool) -> dict:
    """A time row of the paired gate's table, as ``across_processes`` judges these per-process log-ratios."""
    judged = across_processes(a_first, b_first, ALPHA, POWER, MARGIN)
    row = {
        "benchmark": "unfold.Quick.time_forward",
        "params": params,
        "unit": "seconds",
        "resolution": judged.resolution,
        "pairs": 64,
    }
    return {**row, "processes": judged.processes} if with_processes else row


def _pooled(a_first: np.ndarray, b_first: np.ndarray) -> float:
    """The within-order pooled variance of per-process log-ratios: what the gate's standard error is built from."""
    squares = ((a_first - a_first.mean()) ** 2).sum() + ((b_first - b_first.mean()) ** 2).sum()
    return float(squares / (a_first.size + b_first.size - 2))


@pytest.mark.parametrize("processes", [6, 8, 16])
def test_the_variance_read_back_from_a_resolution_is_the_gates_pooled_variance(processes):
    rng = np.random.default_rng(processes)
    a, b = rng.normal(0, 0.03, processes // 2), rng.normal(0.01, 0.03, processes // 2)
    row = _gate_row(a, b, "gather, allcnnc-conv3, cpu", with_processes=True)
    variance = gate_design.process_variance(row["resolution"], processes, ALPHA, POWER, MARGIN)
    assert variance == pytest.approx(_pooled(a, b), rel=1e-9)
    assert gate_design.resolution_at(variance, processes, ALPHA, POWER, MARGIN) == pytest.approx(row["resolution"])


def test_runs_are_pooled_per_cell_each_at_its_own_processes_and_a_row_without_them_at_the_stated_count():
    rng = np.random.default_rng(0)
    draws = {run: (rng.normal(0, 0.02, 3), rng.normal(0, 0.02, 3)) for run in range(3)}  # 6 processes a run
    tables = [
        pd.DataFrame([_gate_row(a, b, "cpp, allcnnc-conv2, cpu", with_processes=run != 1)])
        for run, (a, b) in draws.items()
    ]
    read_back = pd.read_csv(io.StringIO(pd.concat(tables).to_csv(index=False)))  # run 1's count is NaN there
    expected = np.mean([_pooled(a, b) for a, b in draws.values()])  # equal degrees of freedom: the plain mean
    for given in (tables, [read_back]):  # a table without the column, and a row with NaN
        cells = gate_design.measured_cells(given, 6)
        assert cells.processes.tolist() == [6, 6, 6]
        variances = gate_design.cell_variances(cells, ALPHA, POWER, MARGIN)
        assert variances.tolist() == pytest.approx([expected], rel=1e-9)
    assert gate_design.measured_cells([read_back], 8).processes.tolist() == [6, 8, 6]  # only the row without a count
    with pytest.raises(ValueError, match="no time cell"):
        gate_design.measured_cells([tables[0].assign(pairs=0)], 8)
    with pytest.raises(ValueError, match="another margin"):
        gate_design.process_variance(1.02, 8, ALPHA, POWER, MARGIN)


def test_runs_with_more_processes_weigh_more():
    cells = pd.DataFrame(
        {
            "benchmark": ["t", "t"],
            "params": ["p", "p"],
            "processes": [4, 12],
            "resolution": [
                gate_design.resolution_at(0.001, 4, ALPHA, POWER, MARGIN),
                gate_design.resolution_at(0.003, 12, ALPHA, POWER, MARGIN),
            ],
        }
    )
    pooled = gate_design.cell_variances(cells, ALPHA, POWER, MARGIN)
    assert pooled.tolist() == pytest.approx([(2 * 0.001 + 10 * 0.003) / 12])


def test_the_design_is_the_fewest_processes_whose_median_cell_resolves_the_target():
    variances = pd.Series([0.0001, 0.0004, 0.0025])  # per-process sd 1%, 2% and 5%
    table = gate_design.designs(variances, ALPHA, POWER, MARGIN, 1.10, 1.08)
    k = gate_design.fewest(table, 1.08)
    assert k is not None
    median = gate_design.resolution_at(0.0004, k, ALPHA, POWER, MARGIN)  # the middle cell decides
    assert median <= 1.08 < gate_design.resolution_at(0.0004, k - 2, ALPHA, POWER, MARGIN)
    assert table.set_index("processes").loc[k, "median"] == pytest.approx(median)
    assert gate_design.fewest(table, 1.0) is None  # the margin alone is 1.05x


def _design(processes: int, profile: str = "quick", allocator: str | None = None) -> gate_design.GateDesign:
    defaults = Thresholds()
    return gate_design.GateDesign(
        processes, profile, "warm", defaults.process_rounds, defaults.blocks, defaults.round_seconds,
        1.08, 1.079, 44, 7, "runs", "abc", "2026-11-28",
        gate_design.allocator_of("warm") if allocator is None else allocator,
    )  # fmt: skip


def test_a_recorded_design_is_in_force_only_at_what_it_was_sized_at(tmp_path):
    defaults = Thresholds()
    sized = ("quick", "warm", defaults.process_rounds, defaults.blocks, defaults.round_seconds)
    assert gate_design.recorded(tmp_path, "box") is None
    assert gate_design.processes_for(tmp_path, "box", *sized, 8)[0] == 8
    gate_design.record(tmp_path, "box", _design(12))
    gate_design.record(tmp_path, "box", _design(16))
    assert gate_design.recorded(tmp_path, "box") == _design(16)  # the last record is in force
    assert gate_design.recorded(tmp_path, "other") is None
    assert gate_design.processes_for(tmp_path, "other", *sized, 8)[0] == 8
    processes, why = gate_design.processes_for(tmp_path, "box", *sized, 8)
    assert processes == 16 and "1.079x" in why
    for other in (("full", *sized[1:]), (*sized[:2], sized[2] + 1, *sized[3:]), (*sized[:4], 0.5)):
        processes, why = gate_design.processes_for(tmp_path, "box", *other, 8)
        assert processes == 8 and "not this run's" in why


def test_a_design_sized_under_another_allocator_setting_is_not_in_force(tmp_path):
    """The regime's allocator setting is part of what a design was sized at; a record from before the field (no
    ``allocator``) reads as sized under an unrecorded one."""
    defaults = Thresholds()
    sized = ("quick", "warm", defaults.process_rounds, defaults.blocks, defaults.round_seconds)
    gate_design.record(tmp_path, "box", _design(16, allocator="glibc malloc, mmap threshold dynamic"))
    processes, why = gate_design.processes_for(tmp_path, "box", *sized, 8)
    assert processes == 8 and "mmap threshold dynamic, not this run's" in why
    legacy = {k: v for k, v in dataclasses.asdict(_design(16)).items() if k != "allocator"}
    (tmp_path / "box" / gate_design.GATE_DESIGN_FILE).write_text(json.dumps(legacy) + "\n")
    assert gate_design.recorded(tmp_path, "box").allocator == ""
    processes, why = gate_design.processes_for(tmp_path, "box", *sized, 8)
    assert processes == 8 and "not recorded" in why
    gate_design.record(tmp_path, "box", _design(16))
    assert gate_design.processes_for(tmp_path, "box", *sized, 8)[0] == 16


def test_a_record_that_is_not_a_design_is_refused_naming_its_file(tmp_path):
    gate_design.record(tmp_path, "box", _design(7))
    with pytest.raises(ValueError, match="gate-design.jsonl: processes 7"):
        gate_design.recorded(tmp_path, "box")
    (tmp_path / "box" / gate_design.GATE_DESIGN_FILE).write_text('{"processes": 8}\n')
    with pytest.raises(ValueError, match="not a gate design"):
        gate_design.recorded(tmp_path, "box")


def test_variance_from_gate_runs_records_the_design_it_prints_for_the_machine_the_runs_name(
    tmp_path, monkeypatch, capsys
):
    from unfold_bench.commands import variance

    rng = np.random.default_rng(1)
    runs = tmp_path / "validation-runs"
    runs.mkdir()
    header = gate_design.validation_header(VALIDATE, "box", "0123abcd", "2026-11-28", gate_design.allocator_of("warm"))
    (tmp_path / "validation.txt").write_text(header + " ...\n")
    for run in range(3):
        rows = [
            _gate_row(rng.normal(0, sd, 4), rng.normal(0, sd, 4), f"s{i}, c, cpu", with_processes=True)
            for i, sd in enumerate((0.005, 0.01, 0.03))
        ]
        pd.DataFrame(rows).to_csv(runs / f"AA-{run + 1}.csv", index=False)
    pd.DataFrame([{**rows[0], "resolution": 9.0}]).to_csv(runs / "injected-1.csv", index=False)  # not A/A: unread
    monkeypatch.setattr(variance, "ROOT", tmp_path)
    out = tmp_path / "design.txt"
    assert variance.main(["--from-gate-runs", str(runs), "--record", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.read_text().strip() in printed and "of box at commit 0123abcd" in printed
    design = gate_design.recorded(tmp_path / "results", "box")
    assert design is not None and (design.runs, design.cells, design.commit) == (3, 3, "0123abcd")
    assert design.allocator == gate_design.allocator_of("warm")  # what the gate's regime sets today
    defaults = Thresholds()
    assert (design.rounds, design.blocks, design.round_seconds) == (
        defaults.process_rounds,
        defaults.blocks,
        defaults.round_seconds,
    )
    assert f"design: {design.processes} processes" in printed and f"{design.processes / 8:5.2f}x" in printed
    with pytest.raises(SystemExit):
        variance.main(["--from-gate-runs", str(runs), "--record", "--machine", "elsewhere"])
    assert "were made on box" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        variance.main(["--from-gate-runs", str(tmp_path / "results")])
    assert "no A/A table" in capsys.readouterr().err
    more = tmp_path / "again-runs"
    shutil.copytree(runs, more)
    (tmp_path / "again.txt").write_text(header.replace("0123abcd", "4567cdef") + " ...\n")
    assert variance.main(["--from-gate-runs", str(runs), str(more), "--record"]) == 0  # two validations pooled
    pooled = gate_design.recorded(tmp_path / "results", "box")
    assert pooled is not None and (pooled.runs, pooled.commit) == (6, "0123abcd,4567cdef")
    assert pooled.processes == design.processes  # the same runs twice: the same variances
    # the first line of the validations committed before validate-gate named the allocator setting: printed, but
    # never recorded (a design sized from them would not be used)
    (tmp_path / "again.txt").write_text("make regress-validate: machine box, commit 4567cdef, 2026-11-29; ...\n")
    assert variance.main(["--from-gate-runs", str(runs), str(more)]) == 0
    with pytest.raises(SystemExit):
        variance.main(["--from-gate-runs", str(runs), str(more), "--record"])
    assert "'not named (older runs)'" in capsys.readouterr().err
    (tmp_path / "again.txt").write_text("make regress-validate: machine other, commit 4567cdef, 2026-11-29; ...\n")
    with pytest.raises(SystemExit):
        variance.main(["--from-gate-runs", str(runs), str(more)])
    assert "runs of several machines (box, other)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        variance.main(["--record"])
    assert "give --from-gate-runs" in capsys.readouterr().err


def test_a_validations_first_line_names_its_machine_commit_and_allocator_and_a_line_without_them_names_none():
    allocator = "CPU: default; glibc malloc, mmap threshold set at 33554432 bytes (mallopt), dynamic before"
    line = gate_design.validation_header(VALIDATE, "vm-a.b", "0123abcd", "2026-11-28", allocator) + " 2 A/A runs"
    assert line.startswith(VALIDATE + ": ")
    assert gate_design.validation_source(line) == {"machine": "vm-a.b", "commit": "0123abcd", "allocator": allocator}
    older = "unfold-bench validate-gate: machine vm-a.b, commit 0123abcd, 2026-11-28; 2 A/A runs"
    assert gate_design.validation_source(older) == {"machine": "vm-a.b", "commit": "0123abcd"}
    assert gate_design.validation_source("processes: 16, as given by --processes") == {}
