"""``benchmarks.independent_timer``: its statements call the reference and the strategy in the suite's order, its
arithmetic, and what one process reports (no timing is judged: a figure only has to exist and be a time)."""

from __future__ import annotations

import math

from benchmarks import independent_timer
from benchmarks.profiles import QUICK


def test_the_statements_call_the_reference_and_the_strategy_as_the_suites_blocks_do():
    calls = []
    scope = {"f": lambda x, **kw: calls.append("f"), "r": lambda x, **kw: calls.append("r"), "x": 1.0, "kw": {}}
    timed = independent_timer.statements("forward")
    for name, expected in (("loop", ["f"]), ("pair", ["r", "r"]), ("blocks", ["r", "f", "f", "r"])):
        calls.clear()
        exec(timed[name], scope)
        assert calls == expected, name
    assert independent_timer.statements("forward_backward")["blocks"].count(".backward(g); leaf.grad = None") == 4


def test_the_ratio_in_the_suites_order_is_the_strategys_share_of_the_difference_by_medians():
    # A A's runs take 2.0 at the median, A B B A's 3.0: the strategy's two calls take 1.0 against the reference's 2.0
    assert independent_timer.suite_order_ratio(pair=[1.9, 2.0, 9.0], blocks=[3.0, 2.9, 3.1]) == 0.5


def test_the_two_statements_run_in_turn_each_first_as_often_as_last():
    order = independent_timer.interleaved(4)
    assert order == ["pair", "blocks", "blocks", "pair"] * 2
    assert order.count("pair") == order.count("blocks") == 4


def test_one_process_reports_each_cells_loop_and_a_strategys_ratio_in_the_suites_order():
    cells = [("gather", "example", "forward"), ("native", "example", "forward_backward")]
    found = independent_timer.measure(cells, QUICK.name)
    assert set(found) <= {"gather:example:forward", "native:example:forward_backward", "blocks:gather:example:forward"}
    assert {"gather:example:forward", "native:example:forward_backward"} <= set(found)
    assert all(math.isfinite(seconds) and seconds > 0 for seconds in found.values())
    assert not any(key.startswith(independent_timer.BLOCKS + "native") for key in found)  # no ratio to itself
