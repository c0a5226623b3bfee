"""Ratios with the process and the placement as levels (``benchmarks.replicates``) and their variance components
(``benchmarks.variance``): the statistics on draws from models with known levels and fixed seeds, the rounds on
strategies made here whose cost or behaviour is known by construction."""

from __future__ import annotations

import math
import weakref

import numpy as np
import pytest
import torch

from benchmarks.cells import Cell, profile_config
from benchmarks.paired import Design, measure_time
from benchmarks.paired_stats import ALPHA, POWER
from benchmarks.profiles import get_profile
from benchmarks.replicates import (
    across_processes,
    measure_pair,
    measure_units,
    process_estimate,
    resolution,
    trimmed_mean,
)
from benchmarks.trees import ROOT
from benchmarks.variance import Components, components, design, faulted_share, preemption, report
from impls import STRATEGIES, Geometry
from impls.strategy import Strategy
from reports.compare import Thresholds, paired_table
from tests.helpers import slower_native

NATIVE = STRATEGIES["native"]
EXAMPLE = profile_config(get_profile("quick"), "example")


def _processes(rng: np.random.Generator, k: int, shift: float, order: float, spread: float) -> tuple[list, list]:
    """Per-process log-ratios of ``k`` processes, half per set-up order: a true ``shift``, an order effect of
    +-``order`` and normal process noise of ``spread``."""
    a = shift + order + rng.normal(0, spread, k // 2)
    b = shift - order + rng.normal(0, spread, k // 2)
    return list(a), list(b)


def test_across_processes_misses_no_change_at_the_shipped_rate_whatever_the_order_effect():
    # the shipped one-sided alpha (0.001), 8 processes as the gate's default: the false-alarm rate of the upper bound
    rng = np.random.default_rng(0)
    trials = 20000
    above = sum(across_processes(*_processes(rng, 8, 0.0, 0.08, 0.04), ALPHA, POWER).low > 1 for _ in range(trials))
    assert above / trials < 3 * ALPHA, above / trials  # 20 expected; 60 would be three times the stated rate
    above = sum(across_processes(*_processes(rng, 8, 0.0, 0.0, 0.04), 0.05, POWER).low > 1 for _ in range(4000))
    assert abs(above / 4000 - 0.05) < 0.012, above / 4000  # exact at a rate a few thousand trials resolve


def test_a_slowdown_of_the_stated_resolution_is_caught_at_the_stated_power():
    rng = np.random.default_rng(1)
    margin, spread, k = 0.05, 0.03, 8
    stated = np.median(
        [across_processes(*_processes(rng, k, 0, 0.05, spread), ALPHA, POWER, margin).resolution for _ in range(400)]
    )
    caught = [
        across_processes(*_processes(rng, k, math.log(stated), 0.05, spread), ALPHA, POWER, margin).low > 1 + margin
        for _ in range(2000)
    ]
    assert 0.85 <= np.mean(caught) <= 0.99, (stated, np.mean(caught))


def test_the_order_effect_cancels_and_too_few_processes_are_refused():
    result = across_processes([0.1, 0.12], [-0.1, -0.12], ALPHA, POWER)
    assert result.ratio == pytest.approx(1.0) and result.processes == 4
    assert result.process_ratios == pytest.approx(tuple(math.exp(v) for v in (0.1, 0.12, -0.1, -0.12)))
    with pytest.raises(ValueError, match="1 and 2 per set-up order"):
        across_processes([0.1], [0.1, 0.2], ALPHA, POWER)


def test_a_process_is_the_mean_of_its_rounds_trimmed_means():
    rows = [{"key": "k", "log_ratios": [0.0] * 9 + [5.0]}, {"key": "k", "log_ratios": [0.2] * 10}]
    assert trimmed_mean([0.0] * 9 + [5.0]) == 0.0  # one wild block in ten is cut
    assert process_estimate(rows) == {"k": pytest.approx(0.1)}


def _rows(rng: np.random.Generator, sd: dict[str, float], runs=3, processes=8, rounds=6, blocks=30) -> list[dict]:
    rows = []
    for run in range(runs):
        u = rng.normal(0, sd["run"])
        for process in range(processes):
            b_first = process % 2 == 1
            p = u + rng.normal(0, sd["process"]) + (0.07 if b_first else -0.07)  # an order effect too
            for round_ in range(rounds):
                r = p + rng.normal(0, sd["round"])
                rows.append(
                    {
                        "key": "k",
                        "run": run,
                        "process": process,
                        "b_first": b_first,
                        "round": round_,
                        "log_ratios": list(r + rng.normal(0, sd["block"], blocks)),
                        "seconds": 0.5,
                        "setup_seconds": 0.1,
                        **({"process_seconds": 3.0} if round_ == 0 else {}),
                    }
                )
    return rows


def test_the_components_recover_the_levels_a_model_was_drawn_with():
    # block noise large enough that a round mean's share of it (0.15^2 / 30) is most of the placement level's
    sd = {"block": 0.15, "round": 0.03, "process": 0.04, "run": 0.02}
    estimates = [components(_rows(np.random.default_rng(seed), sd, runs=6)) for seed in range(30)]
    for level in ("block", "round", "process", "run"):
        mean = np.mean([getattr(c, level) for c in estimates])
        assert mean == pytest.approx(sd[level] ** 2, rel=0.35 if level == "run" else 0.2), level
    one = estimates[0]
    assert (one.process_seconds, one.round_seconds) == (3.0, 0.1)
    assert one.block_seconds == pytest.approx(0.4 / 30)
    assert one.blocks_per_round == 30


def test_the_report_gives_the_share_of_blocks_that_took_a_page_fault():
    rows = _rows(np.random.default_rng(1), {"block": 0.05, "round": 0.01, "process": 0.01, "run": 0.0}, runs=1)
    for i, row in enumerate(rows):  # one round in four put its outputs on fresh pages in every block
        row["minor_faults"] = [1728 if i % 4 == 0 else 0] * len(row["log_ratios"])
    assert faulted_share(rows) == "25%"
    assert faulted_share([{"log_ratios": [0.1]}]) == "n/a"  # rows recorded before the count
    text = report(rows, target=1.1, alpha=ALPHA, power=POWER, margin=0.0)
    header, line = (next(t for t in text.splitlines() if t.startswith(start)) for start in ("unit ", "k "))
    assert header.split().index("faulted") == line.split().index("25%")  # the column under its heading


def test_the_report_gives_the_switches_a_block_and_whether_the_preempted_blocks_are_the_slow_ones():
    rows = _rows(np.random.default_rng(2), {"block": 0.05, "round": 0.01, "process": 0.01, "run": 0.0}, runs=1)
    rng = np.random.default_rng(3)
    for row in rows:  # rounds that read slow are preempted more, which a correlation within rounds must not see
        offset = int(1000 * (1 + np.mean(row["log_ratios"])))
        row["involuntary_switches"] = [offset + int(rng.integers(10, 20)) for _ in row["log_ratios"]]
    unrelated = preemption(rows)
    assert unrelated[0] == f"{np.mean([s for r in rows for s in r['involuntary_switches']]):.3g}"
    assert abs(float(unrelated[1])) < 0.2
    for row in rows:  # B slowed in proportion to the switches above its round's usual
        usual = np.median(row["involuntary_switches"])
        row["log_ratios"] = [r + 0.02 * (s - usual) for r, s in zip(row["log_ratios"], row["involuntary_switches"])]
    assert float(preemption(rows)[1]) > 0.5
    text = report(rows, target=1.1, alpha=ALPHA, power=POWER, margin=0.0)
    header, line = (next(t for t in text.splitlines() if t.startswith(start)) for start in ("unit ", "k "))
    assert line.split()[header.split().index("rho(sw)")] == preemption(rows)[1]  # the column under its heading
    assert preemption([{"log_ratios": [0.1, 0.2]}]) == ("n/a", "n/a")  # rows recorded before the count
    assert preemption([{"log_ratios": [0.1, 0.2], "involuntary_switches": [3, 3]}]) == ("3", "n/a")


def test_a_design_is_costed_and_resolved_by_hand():
    c = Components(
        block=0.04,
        round=0.0009,
        process=0.0016,
        run=0.0,
        blocks_per_round=30,
        process_seconds=3.0,
        round_seconds=0.1,
        block_seconds=0.01,
    )
    d = design(c, processes=8, rounds=2, blocks=20, alpha=0.001, power=0.95, margin=0.05)
    se = math.sqrt((0.0016 + 0.0009 / 2 + 0.04 / 40) / 8)
    assert d.standard_error == pytest.approx(se)
    assert d.resolution == resolution(se, 6, 0.001, 0.95, 0.05)
    assert d.seconds == pytest.approx(8 * (3.0 + 2 * (0.1 + 20 * 0.01)))


def test_a_shift_of_the_stated_resolution_is_caught_at_the_stated_power_by_the_t_test():
    # a one-sided t test at 6 degrees of freedom (critical value 5.208 at 0.001, from the published tables) on a
    # shift of log(resolution) / se standard errors, simulated: it rejects 95% of the time
    rng = np.random.default_rng(2)
    shift = math.log(resolution(1.0, 6, 0.001, 0.95))
    t = (rng.normal(shift, 1.0, 200_000)) / np.sqrt(rng.chisquare(6, 200_000) / 6)
    assert np.mean(t > 5.208) == pytest.approx(0.95, abs=0.005)
    assert resolution(1.0, 6, 0.001, 0.95, margin=0.05) == pytest.approx(1.05 * math.exp(shift))


def test_a_round_gives_the_second_over_the_first_and_each_round_places_the_inputs_anew():
    alive: list[weakref.ref] = []
    inputs: list[int] = []

    def careful(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        if any(ref() is not None for ref in alive):
            raise AssertionError("called while an earlier output is alive")
        inputs.append(input.data_ptr())
        out = NATIVE.implementation(input, geometry)
        alive.append(weakref.ref(out))
        return out

    plain = Strategy("s", "native, careful", (1, 2), ("cpu",), careful)
    cells = (Cell(plain, EXAMPLE, "cpu"), Cell(slower_native(4.0), EXAMPLE, "cpu"))
    rounds = list(measure_pair(cells, "forward", rounds=3, blocks=8, round_seconds=0.05, seed=1))
    assert [r["round"] for r in rounds] == [0, 1, 2] and all(len(r["log_ratios"]) >= 4 for r in rounds)
    for counted in ("minor_faults", "involuntary_switches"):  # one count a block
        assert all(len(r[counted]) == len(r["log_ratios"]) and min(r[counted]) >= 0 for r in rounds), counted
    assert all(np.median(r["log_ratios"]) > math.log(2) for r in rounds)  # four times as slow: far above 1
    assert len(set(inputs)) == 3  # one input per round, at an address of its own, shared within the round


@pytest.mark.slow
def test_units_name_each_sides_problem_and_the_ratio_is_b_over_a_whichever_is_set_up_first():
    tree = str(ROOT)
    unit = {"config": "example", "which": "forward", "device": "cpu"}
    spec = {"rounds": 1, "blocks": 4, "round_seconds": 0.01, "profile": "quick"}
    units = [
        {**unit, "key": "absent", "sides": [{"tree": tree, "strategy": "native"}, {"tree": tree, "strategy": "nope"}]},
        {
            **unit,
            "key": "3d",
            "config": "vol3d-conv",
            "sides": [{"tree": tree, "strategy": "native"}, {"tree": tree, "strategy": "native", "copy": 1}],
        },
        {
            **unit,
            "key": "aa",
            "sides": [{"tree": tree, "strategy": "native"}, {"tree": tree, "strategy": "native", "copy": 1}],
        },
    ]
    for b_first in (False, True):
        rows = {row["key"]: row for row in measure_units({**spec, "units": units, "b_first": b_first})}
        assert rows["absent"]["problems"] == {"B": "absent"}
        assert set(rows["3d"]["problems"]) == {"A", "B"} and rows["3d"]["problems"]["A"].startswith("skipped: ")
        assert len(rows["aa"]["log_ratios"]) >= 4


@pytest.mark.slow
def test_the_gate_across_processes_fails_a_dying_cell_alone_and_judges_the_rest(tmp_path):
    units = [("native", "no-such-config", "cpu"), ("native", "example", "cpu"), ("nonexistent", "example", "cpu")]
    rows = list(measure_time(ROOT, ROOT, units, "quick", Design(4, 1, 4, 0.01), 0.05, env=None))
    by_cell = {(r["strategy"], r["config"], r["measure"]): r for r in rows}
    died = by_cell[("native", "no-such-config", "time_forward")]
    assert died["failed_at"] == "unknown" and "no-such-config" in died["error"]
    measured = by_cell[("native", "example", "time_forward")]
    assert measured["processes"] == 4 and measured["low"] <= measured["ratio"] <= measured["high"]
    assert by_cell[("nonexistent", "example", "time_forward")]["absent_at"] == "both"
    table = paired_table(rows, "quick", Thresholds())
    assert set(table.verdict) >= {"failed (revision unknown)"}
    judged = table[table.params == "native, example, cpu"]
    assert judged.processes.tolist() == [4, 4]  # what gate_design reads a run's processes from


@pytest.mark.parametrize(
    ("warmup_blocks", "warmup_seconds", "made"), [(2, None, 2), (6, None, 6), (6, 600.0, 6), (6, 0.0, 1)]
)
def test_a_round_makes_its_untimed_blocks_before_the_blocks_it_times_until_their_seconds_pass(
    warmup_blocks, warmup_seconds, made
):
    # the profiles bound a placement's warm-up by the seconds its timed blocks aim for (at least one block): a slow
    # call's first block has paid what the later ones would, and each would cost as long as a timed one
    counted: list[int] = []

    def counting(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        counted.append(1)
        return NATIVE.implementation(input, geometry)

    cells = (
        Cell(NATIVE, EXAMPLE, "cpu"),
        Cell(Strategy("s", "native, counted", (1, 2), ("cpu",), counting), EXAMPLE, "cpu"),
    )
    (round_,) = measure_pair(
        cells,
        "forward",
        rounds=1,
        blocks=4,
        round_seconds=0.0,
        warmup_blocks=warmup_blocks,
        warmup_seconds=warmup_seconds,
    )
    assert len(round_["log_ratios"]) == 4 and len(counted) == made + 2 * 4  # one call a warm-up block
    assert round_["warmup_made"] == made


@pytest.mark.parametrize("regime", ["warm", "fresh-pages"])
def test_the_variance_command_measures_in_the_regime_it_is_given_and_says_which(monkeypatch, tmp_path, regime):
    # its processes time in a regime's allocator, as the gate's do, not in whatever the caller's shell had
    import benchmarks.variance as variance_module
    from benchmarks.allocator import REGIME_VARIABLE, get_regime, regime_environment
    from unfold_bench.commands import variance

    started_with = []

    def run_process(spec, env=None, timeout=900.0):
        started_with.append(env)
        rows = [
            {
                "key": unit["key"],
                "round": r,
                "log_ratios": [0.01 * r, -0.01 * r] * 4,
                "minor_faults": [0] * 8,
                "seconds": 0.1,
                "setup_seconds": 0.01,
            }
            for unit in spec["units"]
            for r in range(spec["rounds"])
        ]
        return rows, ""

    monkeypatch.setattr(variance_module, "run_process", run_process)
    out = tmp_path / "variance.txt"
    arguments = ["--cells", "gather:example:forward", "--runs", "1", "--processes", "4", "--regime", regime]
    assert variance.main([*arguments, "--out", str(out)]) == 0
    expected = regime_environment(get_regime(regime))
    assert len(started_with) == 4
    assert all(env == expected for env in started_with) and expected[REGIME_VARIABLE] == regime
    assert get_regime(regime).label in out.read_text().splitlines()[0]


def test_the_variance_command_refuses_a_regime_for_runs_it_only_reads_back(tmp_path, capsys):
    from unfold_bench.commands import variance

    saved = tmp_path / "rounds.jsonl"
    saved.write_text("{}\n")
    with pytest.raises(SystemExit):
        variance.main(["--from-json", str(saved), "--regime", "fresh-pages"])
    assert "--regime fresh-pages: only for a measurement" in capsys.readouterr().err


def test_the_variance_command_reads_its_cells_as_every_command_does_and_refuses_a_bad_one_before_any_work(
    monkeypatch, capsys, tmp_path
):
    from benchmarks import variance as variance_module
    from unfold_bench.commands import variance

    monkeypatch.setattr(variance_module, "run_process", lambda *a, **k: pytest.fail("measured a refused cell"))
    for cell in ("nosuch:allcnnc-conv2:forward", "gather:allcnnc-conv2:sideways"):
        with pytest.raises(SystemExit) as exit:
            variance.main(["--cells", cell, "--runs", "1", "--processes", "4"])
        assert exit.value.code == 2 and "--cells: " in capsys.readouterr().err
    foreign = tmp_path / "foreign.jsonl"
    for text in ("not json\n", '{"cells": 1}\n'):  # not JSON lines, or no header --json would write
        foreign.write_text(text)
        with pytest.raises(SystemExit) as exit:
            variance.main(["--from-json", str(foreign)])
        assert exit.value.code == 2 and f"--from-json {foreign}: " in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit:  # one placement a process: the placements' level cannot be estimated
        variance.main(["--cells", "gather:example:forward", "--rounds", "1", "--processes", "4"])
    assert exit.value.code == 2 and "--rounds 1: the placements' level needs" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["variance-components", "variance-x-native"])
def test_the_committed_variance_reports_are_what_the_command_prints_from_their_saved_rounds(name, tmp_path):
    """A figure or a sentence of method in docs that the code no longer produces fails here."""
    from unfold_bench.commands import variance

    again = tmp_path / f"{name}.txt"
    assert variance.main(["--from-json", str(ROOT / "docs" / f"{name}.jsonl"), "--out", str(again)]) == 0
    assert again.read_text() == (ROOT / "docs" / f"{name}.txt").read_text()
