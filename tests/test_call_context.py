"""The call-order check (``benchmarks.call_context``, ``unfold-bench context``): on strategies made here whose cost
or correctness is known by construction."""

from __future__ import annotations

import time
import types

import pytest
import torch

from benchmarks.call_context import ORDERS, RATIO_ORDERS, _position, measure_orders, measure_units
from benchmarks.cells import Cell, profile_config
from benchmarks.profiles import get_profile
from impls import STRATEGIES, Geometry
from impls.strategy import Strategy
from tests.helpers import slower_native
from unfold_bench.commands import context

NATIVE = STRATEGIES["native"]
EXAMPLE = profile_config(get_profile("quick"), "example")


def test_a_position_is_named_by_the_call_and_the_one_before_it_in_the_repeated_pattern():
    assert [_position("A", 0), _position("B", 0)] == ["A", "B"]
    assert [_position("AB", i) for i in range(2)] == ["A after B", "B after A"]
    assert [_position("ABBA", i) for i in range(4)] == ["A after A", "B after A", "B after B", "A after B"]
    assert _position("_B", 1) == "B after a pause"


def test_every_order_gives_the_second_over_the_first_and_times_every_position():
    cells = (Cell(NATIVE, EXAMPLE, "cpu"), Cell(slower_native(4.0), EXAMPLE, "cpu"))
    # 10 blocks A B B A, so that the trimmed mean drops the block whose A was preempted (3 blocks keep it: 1.8x once
    # under load, against 4x by construction)
    found = measure_orders(cells, "forward", calls=20, seed=1)
    assert set(found) == set(ORDERS)
    assert set(found["loop"]["times"]) == {"A", "B"}
    assert set(found["alternating"]["times"]) == {"A after B", "B after A"}
    assert set(found["blocks"]["times"]) == {"A after A", "B after A", "B after B", "A after B"}
    assert set(found["paused"]["times"]) == {"B after a pause"} and found["paused"]["ratio"] is None
    for order in RATIO_ORDERS:  # four times as slow by construction: far above 1 in every order, never below
        assert found[order]["ratio"] > 2, (order, found[order])
    for order in ORDERS:
        assert found[order]["faults"] >= 0 and found[order]["switches"] >= 0
    assert found["paused"]["times"]["B after a pause"] > 2 * found["loop"]["times"]["A"]  # after a pause too


def test_a_side_that_does_not_run_or_computes_a_wrong_result_is_named_and_nothing_is_timed():
    def wrong(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        return NATIVE.implementation(input, geometry) + 1

    registry = {"native": NATIVE, "wrong": Strategy("wrong", "native plus one", (1, 2), ("cpu",), wrong)}
    units = [
        {"strategy": "wrong", "config": "example", "which": "forward"},
        {"strategy": "wrong", "config": "vol3d-conv", "which": "forward"},
    ]
    spec = {"units": units, "reference": "native", "placements": 1, "calls": 2, "profile": "quick"}
    rows = list(measure_units(spec, registry))
    assert [row["key"] for row in rows] == ["wrong:example:forward", "wrong:vol3d-conv:forward"]
    assert rows[0]["problem"].startswith("wrong: wrong output") and "orders" not in rows[0]
    assert "native: skipped: " in rows[1]["problem"] and "wrong: skipped: " in rows[1]["problem"]


def test_the_table_gives_bs_times_and_each_orders_ratio_with_its_range_or_the_problem():
    def orders(ratio: float) -> dict:
        times = {"A": 1.0, "B": 0.5, "A after B": 1.0, "B after A": 0.6, "A after A": 1.0, "B after B": 0.8}
        times["B after a pause"] = 0.7
        faults = 7168.0 if ratio == 1.0 else 2.0
        counts = {"faults": faults, "switches": 31.5 if ratio == 1.0 else 4.0}
        found = {order: {"times": times, "ratio": ratio, **counts} for order in RATIO_ORDERS}
        return {**found, "paused": {"times": times, "ratio": None, **counts}}

    rows = [
        {"key": "s:example:forward", "placement": 0, "orders": orders(0.25)},
        {"key": "s:example:forward", "placement": 1, "orders": orders(1.0)},
        {"key": "s:example:forward", "placement": 2, "orders": orders(0.25)},
        {"key": "t:example:forward", "problem": "t: wrong output: off by one"},
    ]
    header, measured, failed, missing = context.table(rows, ["s:example:forward", "t:example:forward", "u:x:forward"])
    assert header.split()[:6] == ["cell", "loop", "after", "A", "paused", "1st"]
    assert header.split()[7:10] == list(RATIO_ORDERS)  # a ratio per order with both sides: none for paused
    assert measured.split()[1:6] == ["500", "600", "700", "600", "800"]  # ms: the median over the placements
    assert measured.count("0.397 (0.25-1)") == len(RATIO_ORDERS)  # the geometric mean of 0.25, 0.25, 1, and range
    assert header.split()[-2:] == ["faults", "switches"]
    # the blocks' faults, then involuntary switches, per call: the median placement's, the most of any
    assert measured.split()[-4:] == ["2", "(7168)", "4.0", "(31.5)"]
    assert failed.endswith("t: wrong output: off by one") and "no placement measured" in missing


def test_the_command_refuses_a_selection_of_the_reference_alone(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["unfold-bench context", "--cells", "native:example:forward"])
    with pytest.raises(SystemExit) as exit:
        context.main()
    assert exit.value.code == 2 and "every cell is the reference" in capsys.readouterr().err


def test_each_paused_call_follows_one_pause_as_long_as_the_references_call_and_outside_its_timing(monkeypatch):
    from benchmarks import call_context, paired

    pauses, clock = [], [0.0]

    def perf_counter() -> float:  # the timed calls' clock: each call reads half a millisecond
        clock[0] += 0.0005
        return clock[0]

    def pause(seconds: float) -> None:  # recorded, and an hour passes on the calls' clock
        pauses.append(seconds)
        clock[0] += 3600.0

    monkeypatch.setattr(paired, "time", types.SimpleNamespace(perf_counter=perf_counter, monotonic=time.monotonic))
    monkeypatch.setattr(call_context, "time", types.SimpleNamespace(sleep=pause))
    cells = (Cell(NATIVE, EXAMPLE, "cpu"), Cell(slower_native(4.0), EXAMPLE, "cpu"))
    found = measure_orders(cells, "forward", calls=4, seed=1)
    assert len(pauses) == 4 + call_context.WARM_REPEATS  # one before every paused call, the untimed ones included
    assert pauses == [pytest.approx(0.0005)] * len(pauses)  # A's median call, measured once per placement
    assert found["paused"]["times"]["B after a pause"] == pytest.approx(0.0005)  # the pause is not in the timing
