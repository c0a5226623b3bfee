"""The regression gate's paired mode: the signed-rank statistic (``advise`` races with it), the verdicts, two
revisions loaded side by side, and the net-peak process. The time across processes is ``tests/test_replicates.py``'s.

The statistic is tested on draws from fixed noise models with fixed seeds (its false-alarm rate and what its
resolution promises), the processes on strategies made here whose behaviour is known by construction.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.allocator import pinned_environment
from benchmarks.paired import Design, load_strategies, measure_cell, measure_in_processes
from benchmarks.paired_stats import MIN_PAIRS, _exact_count, paired_ratio
from benchmarks.trees import ROOT
from impls import STRATEGIES, Geometry
from impls.strategy import Strategy
from reports.compare import Thresholds, gate_decision, paired_table, paired_verdict
from reports.gate_report import format_paired
from tests.helpers import RUN_REGRESS_MAIN

NATIVE = STRATEGIES["native"]


def _draws(n: int, shift: float, noise: float, rng: np.random.Generator) -> np.ndarray:
    """Paired log-ratios with heavy tails: mostly normal, one in ten from a 5x wider distribution."""
    wide = rng.random(n) < 0.1
    return shift + rng.normal(0, noise, n) * np.where(wide, 5.0, 1.0)


def test_the_interval_misses_no_change_at_the_rate_it_claims():
    rng = np.random.default_rng(0)
    trials, alpha = 4000, 0.05
    above = sum(paired_ratio(_draws(40, 0.0, 0.1, rng), alpha=alpha).low > 1 for _ in range(trials))
    assert abs(above / trials - alpha) < 0.015, above / trials


def test_a_slowdown_of_the_stated_resolution_is_caught_about_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    margin, noise, n = 0.02, 0.08, 60
    stated = np.median([paired_ratio(_draws(n, 0.0, noise, rng), margin).resolution for _ in range(200)])
    caught = [paired_ratio(_draws(n, math.log(stated), noise, rng), margin).low > 1 + margin for _ in range(1000)]
    assert 0.9 <= np.mean(caught) <= 0.99, (stated, np.mean(caught))


def test_the_ratio_is_head_over_base_and_robust_to_one_wild_pair():
    d = [math.log(1.2)] * 30 + [math.log(50.0)]
    result = paired_ratio(d)
    assert result.ratio == pytest.approx(1.2) and result.low == pytest.approx(1.2) and result.pairs == 31


def test_too_few_pairs_is_refused_naming_the_count():
    with pytest.raises(ValueError, match=f"{MIN_PAIRS - 1} pairs"):
        paired_ratio([0.0] * (MIN_PAIRS - 1))


def test_few_pairs_take_the_exact_signed_rank_tail_of_the_published_tables():
    # two-sided 5% critical values of the Wilcoxon signed-rank statistic, n = 6 to 15 (Hollander & Wolfe, A.4)
    assert [_exact_count(n, 0.025) for n in range(6, 16)] == [0, 2, 3, 5, 8, 10, 13, 17, 21, 25]
    six = paired_ratio([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], alpha=0.025, min_pairs=6)
    assert (six.low, six.high) == pytest.approx((math.exp(0.1), math.exp(0.6)))  # n = 6: the extreme Walsh averages
    with pytest.raises(ValueError, match="no signed-rank interval"):
        paired_ratio([0.1] * 5, alpha=0.025, min_pairs=5)  # 2^-5 > 0.025


@pytest.mark.parametrize(
    "low, high, resolution, verdict",
    [
        (1.03, 1.2, 1.1, "regression"),
        (1.01, 1.2, 1.1, "unchanged"),
        (0.8, 0.97, 1.1, "improvement"),
        (0.9, 1.1, 1.3, "unresolved"),
        (0.99, 1.01, 1.05, "unchanged"),
    ],
)
def test_paired_verdicts_read_the_whole_interval_against_the_margin(low, high, resolution, verdict):
    assert paired_verdict(low, high, resolution, Thresholds(paired_margin=0.02, resolution_limit=1.25)) == verdict


def _row(strategy: str, measure: str, **fields) -> dict:
    return {"strategy": strategy, "config": "example", "device": "cpu", "measure": measure, "failed_at": "", **fields}


def test_the_paired_table_fails_closed_and_prints_every_time_cell():
    time_cell = {"ratio": 1.0, "low": 0.98, "high": 1.02, "resolution": 1.05, "pairs": 100, "seconds": 1.0}
    measurements = [
        _row("a", "time_forward", **time_cell),
        _row("a", "net_peak_forward", before=100 * 2**20, after=160 * 2**20),
        _row("b", "time_forward", failed_at="head", error="head: wrong output"),
        _row("c", "time_forward", absent_at="base"),
    ]
    table = paired_table(measurements, "quick")
    assert list(table.verdict) == ["unchanged", "regression", "failed", "new"]
    assert gate_decision(table)[0] == 2  # a failure at head outranks the memory regression
    assert gate_decision(table[table.verdict != "failed"])[0] == 1
    assert gate_decision(table.iloc[[0, 3]])[0] == 0
    printed = format_paired(table)
    assert "[0.980, 1.020]" in printed and "1.050x" in printed and "head: wrong output" in printed


def _copy_of_impls(tree: Path, description: str) -> Path:
    shutil.copytree(ROOT / "impls", tree / "impls", ignore=shutil.ignore_patterns("__pycache__"))
    native = tree / "impls" / "native.py"
    native.write_text(native.read_text().replace('description="torch.nn', f'description="{description} torch.nn'))
    return tree


def test_two_checkouts_load_side_by_side_and_the_harness_keeps_its_own(tmp_path):
    import impls

    base = load_strategies(_copy_of_impls(tmp_path / "a", "A"))
    head = load_strategies(_copy_of_impls(tmp_path / "b", "B"))
    assert base["native"].description.startswith("A ") and head["native"].description.startswith("B ")
    assert Path(base["native"].implementation.__globals__["__file__"]).is_relative_to(tmp_path / "a")
    assert Path(head["native"].implementation.__globals__["__file__"]).is_relative_to(tmp_path / "b")
    assert sys.modules["impls"] is impls and sys.modules["impls.native"].unfold is NATIVE
    with pytest.raises(ImportError):
        load_strategies(tmp_path / "nowhere")


def _measured(base: Strategy, head: Strategy) -> dict[str, dict]:
    return {row["measure"]: row for row in measure_cell(({"s": base}, {"s": head}), "s", "example")}


def test_a_wrong_side_is_not_measured_and_a_missing_strategy_is_new_not_failed():
    def wrong(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        return NATIVE.implementation(input, geometry).flip(-1)

    rows = _measured(NATIVE, Strategy("s", "wrong", (1, 2), ("cpu",), wrong))
    assert rows["net_peak_forward"]["failed_at"] == "head" and "wrong output" in rows["net_peak_forward"]["error"]
    assert rows["net_peak_forward_backward"]["failed_at"] == "head"
    absent = list(measure_cell(({}, {"s": NATIVE}), "s", "example"))
    assert [row["absent_at"] for row in absent] == ["base", "base"]


AA_SHARE_OF_FLOOR = 4  # the same call's net peaks must agree to a quarter of the gate's memory floor


@pytest.mark.slow
def test_net_peaks_of_the_same_code_agree_in_their_pinned_process():
    """As the gate measures them: in a process of their own, started with glibc's threshold pinned. A resident
    set moves in whole pages, and the interpreter's own small allocations land on a new page now and then, so the
    same call's two net peaks differ by a few pages (most often none, seen up to a few on a loaded machine). The
    gate ignores a difference below its floor (``Thresholds.memory_floor_bytes``); this checks that A/A noise stays
    a quarter of it or less, so that the floor keeps its margin."""
    command = [sys.executable, "-m", "benchmarks.paired", str(ROOT), str(ROOT), "native:example"]
    done = subprocess.run(command, cwd=ROOT, env=pinned_environment(), capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["measure"] for row in rows] == ["net_peak_forward", "net_peak_forward_backward"]
    slack = Thresholds().memory_floor_bytes // AA_SHARE_OF_FLOOR
    seen = [(row["measure"], row["before"], row["after"]) for row in rows]
    assert all(row["before"] > 0 and abs(row["before"] - row["after"]) <= slack for row in rows), (slack, seen)


@pytest.mark.slow
def test_a_process_that_dies_fails_its_cells_only():
    units = [("native", "no-such-config", "cpu"), ("nonexistent", "example", "cpu")]
    rows = list(measure_in_processes(ROOT, ROOT, units, "quick", Design(4, 1, 4, 0.01), 0.02, env={"PATH": ""}))
    died = [r for r in rows if r["strategy"] == "native"]
    assert {r["measure"] for r in died} == {
        "time_forward",
        "time_forward_backward",
        "net_peak_forward",
        "net_peak_forward_backward",
    }
    assert all(r["failed_at"] == "unknown" and "no-such-config" in r["error"] for r in died)
    assert all(r["absent_at"] == "both" for r in rows if r["strategy"] == "nonexistent")


def test_a_process_that_dies_after_reporting_every_cell_loses_nothing(monkeypatch):
    """A replicate process that reports every unit and then dies (at exit, or its timer firing in teardown): its
    figures stand, no cell fails, and the gate goes on. Its timeout grew with the units it was handed."""
    import benchmarks.paired as paired_module

    timeouts = []

    def died_at_exit(spec, env=None, timeout=900.0):
        timeouts.append(timeout)
        rows = [{"key": u["key"], "log_ratios": [0.01, 0.02, 0.0, 0.01]} for u in spec["units"] for _ in range(2)]
        return rows, "died of signal SIGSEGV"

    monkeypatch.setattr(paired_module, "run_process", died_at_exit)
    notes = []
    design = Design(4, 2, 4, 0.01)
    rows = list(
        paired_module.measure_time(
            ROOT, ROOT, [("native", "example", "cpu")], "quick", design, 0.02, {}, 10, notes.append
        )
    )
    assert len(rows) == 2 and all(not r["failed_at"] and r["processes"] == 4 for r in rows), rows
    assert sum("after it reported every cell" in note for note in notes) == 4
    assert timeouts == [2 * paired_module.UNIT_SECONDS] * 4  # two units (the passes): a hang's limit grows with them


def test_a_revision_whose_impls_does_not_import_fails_there_and_not_at_both(tmp_path):
    """A broken base that the head fixes: each unit says the base's impls does not import (the gate reads that as
    fixed), and the head's side is still checked."""
    from benchmarks.paired import _problem_row
    from benchmarks.replicates import measure_units

    (tmp_path / "impls").mkdir()
    (tmp_path / "impls" / "__init__.py").write_text("raise ImportError('a broken revision')\n")
    unit = {"key": "k", "config": "example", "which": "forward", "device": "cpu"}
    unit["sides"] = [{"tree": str(tmp_path), "strategy": "native"}, {"tree": str(ROOT), "strategy": "native"}]
    spec = {"units": [unit], "rounds": 1, "blocks": 4, "round_seconds": 0.01, "profile": "quick"}
    (row,) = measure_units(spec)
    assert row["problems"] == {"A": "its impls does not import (ImportError: a broken revision)"}
    cell = {"strategy": "native", "config": "example", "device": "cpu", "measure": "time_forward"}
    measured = _problem_row(cell, row["problems"])  # as measure_time reports it
    assert measured["failed_at"] == "base"
    assert gate_decision(paired_table([measured], "quick"))[0] == 0


# Paired settings unfold-bench regress must refuse before any work (exit status 2), and what its message must name
PAIRED_REFUSALS = [
    (["--processes", "5"], "--processes 5"),
    (["--processes", "2"], "--processes 2"),
    (["--blocks", "0"], "--blocks 0"),
    (["--round-seconds", "0"], "--round-seconds 0"),
    (["--bench", "conv2("], "--bench"),
    (["--margin", "-0.1"], "--margin -0.1"),
    (["--resolution-limit", "0.9"], "--resolution-limit 0.9"),
    (["--margin", "nan"], "--margin: 'nan' is not a finite number"),
    (["--resolution-limit", "inf"], "--resolution-limit: 'inf' is not a finite number"),
    (["--memory-threshold", "-0.1"], "--memory-threshold -0.1"),
    (["--instruction-threshold", "x"], "--instruction-threshold: 'x' is not a number"),
    (["--strategy", "m:f", "--callgrind", "native:allcnnc-conv1:forward"], "--callgrind: counts the instructions"),
]


@pytest.mark.slow
def test_regress_refuses_bad_paired_settings_before_any_work():
    # every command line through the script's main in one process (tests/test_bench_tools.py)
    arguments = json.dumps([arguments for arguments, _ in PAIRED_REFUSALS])
    run = subprocess.run(
        [sys.executable, "-c", RUN_REGRESS_MAIN, arguments], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    results = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(results) == len(PAIRED_REFUSALS), run.stdout
    for (arguments, named), (status, stderr) in zip(PAIRED_REFUSALS, results):
        assert status == 2 and named in stderr, (arguments, status, stderr)


def test_a_cell_skipped_at_both_revisions_is_left_out_and_one_skipped_at_head_is_not_a_failure_beside_others():
    half = dataclasses.replace(NATIVE, spatial_dims=(1,))  # cannot run the 2-d example config
    rows = _measured(half, half)
    assert rows["net_peak_forward"]["skipped_at"] == "both" and not rows["net_peak_forward"]["failed_at"]
    rows = list(_measured(NATIVE, half).values())
    assert rows[0]["skipped_at"] == "head"
    table = paired_table(rows, "quick")
    assert set(table.verdict) == {"not measured"}
    status, why = gate_decision(table)  # nothing compared: the change made the strategy refuse every input
    assert status == 2 and "no longer runs" in why, why
    compared = {"strategy": "cpp", "config": "example", "device": "cpu", "measure": "time_forward", "failed_at": ""}
    compared |= {"ratio": 1.0, "low": 0.98, "high": 1.02, "resolution": 1.06, "pairs": 300}
    assert gate_decision(paired_table([*rows, compared], "quick")) == (0, "PASS")
    both = paired_table(list(_measured(half, half).values()), "quick")
    assert both.empty


def test_a_process_that_died_fails_closed():
    cell = {"strategy": "s", "config": "c", "device": "cpu", "measure": "time_forward"}
    died = paired_table([{**cell, "failed_at": "unknown", "error": "killed"}], "quick")
    assert died.verdict[0] == "failed (revision unknown)" and gate_decision(died)[0] == 2


def test_a_module_is_imported_from_the_tree_named_or_refused(tmp_path):
    """A package and a single-file module of another tree load inside ``package_from`` and leave no trace; a
    name that resolves outside the roots given (here, this repository's own ``benchmarks``) is refused."""
    from benchmarks.trees import import_from, package_from

    (tmp_path / "their_pkg").mkdir()
    (tmp_path / "their_pkg" / "__init__.py").write_text("WHO = 'package'\n")
    (tmp_path / "their_mod.py").write_text("WHO = 'module'\n")
    with package_from("their_pkg", [tmp_path]):
        assert import_from("their_pkg", [tmp_path]).WHO == "package"
    with package_from("their_mod", [tmp_path]):
        assert import_from("their_mod", [tmp_path]).WHO == "module"
    assert "their_pkg" not in sys.modules and "their_mod" not in sys.modules
    import benchmarks

    with package_from("benchmarks", [tmp_path]), pytest.raises(ImportError, match="not from"):
        import_from("benchmarks.trees", [tmp_path])
    assert sys.modules["benchmarks"] is benchmarks
