"""Which strategies a change can touch (``benchmarks.impact``), and the gate measuring only those."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.impact import impact, strategy_files
from benchmarks.trees import ROOT
from reports.compare import PAIRED_COLUMNS, gate_decision
from reports.gate_report import markdown

# A package shaped like impls: a registry of strategies, each module exposing ``unfold``
FILES = {
    name: textwrap.dedent(text)
    for name, text in {
        "impls/__init__.py": "",
        "impls/strategy.py": """
        from dataclasses import dataclass
        from typing import Callable

        @dataclass(frozen=True)
        class Strategy:
            name: str
            implementation: Callable
    """,
        "impls/shared.py": "def helper(x):\n    return x\n",
        "impls/only_b.py": "def helper(x):\n    return x\n",
        "impls/late.py": "def helper(x):\n    return x\n",
        "impls/unused.py": "X = 1\n",
        "impls/csrc/kernel.cpp": "// a kernel\n",
        "impls/a.py": """
        from impls.shared import helper
        from impls.strategy import Strategy

        def _a(x):
            return helper(x)

        unfold = Strategy("a", _a)
    """,
        "impls/b.py": """
        from . import only_b
        from .strategy import Strategy

        SOURCE = "csrc/kernel.cpp"

        def _b(x):
            from impls.late import helper  # imported inside the function: still one of b's files
            return only_b.helper(helper(x))

        unfold = Strategy("b", _b)
    """,
        "impls/c.py": """
        import math

        from impls.strategy import Strategy

        unfold = Strategy("c", math.sqrt)  # an implementation whose source is not in the tree
    """,
        "impls/registry.py": """
        from impls import a, b, c

        STRATEGIES = {s.name: s for s in (a.unfold, b.unfold, c.unfold)}
    """,
    }.items()
}


def _tree(path: Path, edits: dict[str, str | None] | None = None) -> Path:
    for name, text in {**FILES, **(edits or {})}.items():
        if text is None:
            continue
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return _tree(tmp_path / "base")


def _affected(base: Path, tmp_path: Path, edits: dict[str, str | None]) -> frozenset[str] | None:
    return impact(base, _tree(tmp_path / "head", edits)).affected


def test_a_strategys_files_are_its_module_and_what_it_imports(base):
    files = strategy_files(base)
    assert files["a"] == {"impls/a.py", "impls/shared.py", "impls/strategy.py"}
    assert files["b"] == {"impls/b.py", "impls/only_b.py", "impls/late.py", "impls/strategy.py"}
    assert files["c"] is None  # its implementation's source cannot be told: any change touches it


@pytest.mark.parametrize(
    ("edited", "affected"),
    [
        ("impls/a.py", {"a", "c"}),
        ("impls/shared.py", {"a", "c"}),
        ("impls/only_b.py", {"b", "c"}),
        ("impls/late.py", {"b", "c"}),
        ("impls/csrc/kernel.cpp", None),  # not Python: whoever reads it, every strategy is touched
        ("impls/strategy.py", {"a", "b", "c"}),
        ("impls/registry.py", None),
        ("impls/__init__.py", None),
        ("impls/unused.py", None),
    ],
)
def test_an_edit_touches_the_strategies_whose_files_it_changes_and_a_shared_file_touches_all(
    base, tmp_path, edited, affected
):
    text = (base / edited).read_text() + "\n# an edit\n" if not edited.endswith(".cpp") else "// edited\n"
    assert _affected(base, tmp_path, {edited: text}) == (None if affected is None else frozenset(affected))


def test_identical_trees_touch_nothing_and_bytecode_is_not_a_change(base, tmp_path):
    head = _tree(tmp_path / "head")
    (head / "impls" / "__pycache__").mkdir()
    (head / "impls" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    change = impact(base, head)
    assert change.affected == {"c"} and change.changed == ()  # c, whose files cannot be told, always is
    assert not change.touches("a")


def test_an_added_file_counts_as_a_change(base, tmp_path):
    head = _tree(tmp_path / "head", {"impls/new_helper.py": "Y = 2\n"})
    change = impact(base, head)
    assert change.changed == ("impls/new_helper.py",) and change.affected is None  # no strategy's file: all


def test_a_strategy_renamed_in_its_own_module_is_touched_under_both_names(base, tmp_path):
    head = _tree(tmp_path / "head", {"impls/b.py": FILES["impls/b.py"].replace('Strategy("b"', 'Strategy("b2"')})
    change = impact(base, head)
    assert change.changed == ("impls/b.py",) and change.affected == {"b", "b2", "c"}
    assert change.touches("b") and change.touches("b2") and not change.touches("a")


def test_a_strategy_no_analysis_saw_is_always_touched(base, tmp_path):
    change = impact(base, _tree(tmp_path / "head", {"impls/a.py": FILES["impls/a.py"] + "\n# an edit\n"}))
    assert change.touches("outside_unfold") and not change.touches("b")


@pytest.mark.parametrize(
    "reach",
    [
        "import impls.shared\n\nX = impls.shared.helper",  # binds the bare package name: any attribute chain
        "import importlib\n\nX = importlib.import_module('impls.only_b')",
        "X = __import__('impls.only_b')",
        "from impls import *",
    ],
)
def test_a_module_that_reaches_others_by_name_makes_its_strategy_always_touched(base, tmp_path, reach):
    edits = {"impls/a.py": FILES["impls/a.py"].replace("from impls.shared import helper", reach + "\nhelper = abs")}
    base = _tree(tmp_path / "reach-base", edits)
    assert strategy_files(base)["a"] is None
    head = _tree(tmp_path / "reach-head", {**edits, "impls/only_b.py": FILES["impls/only_b.py"] + "\n# an edit\n"})
    assert impact(base, head).affected == {"a", "b", "c"}


def test_a_subpackages_init_is_a_file_of_the_modules_imported_through_it(base, tmp_path):
    edits = {
        "impls/kern/__init__.py": "SETTING = 1\n",
        "impls/kern/fast.py": "def helper(x):\n    return x\n",
        "impls/a.py": FILES["impls/a.py"].replace(
            "from impls.shared import helper", "from impls.kern.fast import helper"
        ),
    }
    tree = _tree(tmp_path / "sub", edits)
    assert {"impls/kern/__init__.py", "impls/kern/fast.py"} <= strategy_files(tree)["a"]
    head = _tree(tmp_path / "sub-head", {**edits, "impls/kern/__init__.py": "SETTING = 2\n"})
    assert impact(tree, head).affected == {"a", "c"}


def test_a_strategy_no_module_defines_is_always_touched(base, tmp_path):
    registry = FILES["impls/registry.py"] + (
        "\nfrom impls.strategy import Strategy  # noqa: E402\n\nSTRATEGIES['d'] = Strategy('d', a._a)\n"
    )
    tree = _tree(tmp_path / "undefined", {"impls/registry.py": registry})
    assert strategy_files(tree)["d"] is None and strategy_files(tree)["a"] is not None


def test_the_real_registry_strategies_are_told_apart():
    files = strategy_files(ROOT)
    assert "impls/gather.py" in files["gather"] and "impls/gather.py" not in files["native"]
    assert "impls/cpp.py" in files["cpp_huge_pages"] and "impls/cpp.py" not in files["gather"]
    built_in = [name for name in files if (ROOT / "impls" / f"{name}.py").is_file()]
    assert len(built_in) >= 10 and all(files[name] and f"impls/{name}.py" in files[name] for name in built_in)


def _empty_table() -> pd.DataFrame:
    return pd.DataFrame([], columns=PAIRED_COLUMNS)


def test_nothing_timed_passes_only_when_every_selected_strategy_was_identical():
    assert gate_decision(_empty_table())[0] == 2  # nothing compared otherwise (all skipped, say): not a pass
    status, why = gate_decision(_empty_table(), nothing_to_time=True)
    assert status == 0 and "identical" in why
    record = {"verdict": why, "base": "a" * 40, "head": "b" * 40, "cells": [], "identical": ["gather", "cpp"]}
    assert "Not measured, their files identical at both revisions: gather, cpp" in markdown(record)


@pytest.mark.slow
def test_the_gate_passes_without_timing_when_no_file_of_impls_differs(tmp_path):
    """Both revisions the same commit: no file of impls differs, so no measuring process starts. A selection of no
    cell fails with its --bench named, and a gate that stops before a verdict leaves none of an earlier run."""
    verdict = tmp_path / "verdict.json"
    command = [sys.executable, "-m", "unfold_bench.cli", "regress", "HEAD", "HEAD", "--bench", "allcnnc-conv3"]
    ran = subprocess.run(
        [*command, "--verdict-file", str(verdict)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    record = json.loads(verdict.read_text())
    assert record["status"] == 0 and record["cells"] == [] and "native" in record["identical"]
    assert "no file of impls/ differs" in ran.stdout and "nothing timed" in ran.stdout
    # a selection of no cell is named as such, before any process; the verdict file says the gate failed, not the
    # earlier run's PASS
    ran = subprocess.run(
        [*command[:-1], "no-such-cell", "--verdict-file", str(verdict)], cwd=ROOT, capture_output=True, text=True
    )
    assert ran.returncode == 2 and "--bench 'no-such-cell' selects no cell of the quick profile" in ran.stdout
    assert "identical" not in ran.stdout  # the impact analysis did not run
    assert json.loads(verdict.read_text())["status"] == 2
    # a gate that stops before its verdict (here: a revision git does not know) leaves no earlier verdict behind
    verdict.write_text(json.dumps({"status": 0, "verdict": "PASS", "cells": []}))
    command = [sys.executable, "-m", "unfold_bench.cli", "regress", "no-such-revision", "--verdict-file", str(verdict)]
    ran = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert ran.returncode == 2 and "no-such-revision" in ran.stderr
    record = json.loads(verdict.read_text())
    assert record["status"] == 2 and record["verdict"].startswith("GATE ERROR: the gate refused its arguments")
    verdict.write_text(json.dumps({"status": 0, "verdict": "PASS", "cells": []}))  # and an option argparse refuses
    ran = subprocess.run([*command[:-3], "HEAD", "--margin", "nan", "--verdict-file", str(verdict)], cwd=ROOT)
    assert ran.returncode == 2 and json.loads(verdict.read_text())["verdict"].startswith("GATE ERROR: the gate refused")


def test_a_gate_that_stops_while_registering_its_machine_leaves_no_earlier_verdict(tmp_path, monkeypatch, capsys):
    """The record that the gate stopped is written once the revisions resolve, before the machine's record and the
    gate's design are read: either can fail, and a job must not read an earlier run's PASS then."""
    from benchmarks import machine
    from unfold_bench.commands import regress

    def unreadable(*args, **kwargs):
        raise OSError("~/.asv-machine.json: unreadable")

    monkeypatch.setattr(machine, "register_machine", unreadable)
    verdict = tmp_path / "verdict.json"
    verdict.write_text(json.dumps({"status": 0, "verdict": "PASS", "cells": []}))
    assert regress.main(["HEAD", "HEAD", "--verdict-file", str(verdict)]) == 2
    record = json.loads(verdict.read_text())
    assert record["status"] == 2 and record["verdict"] == regress.STOPPED


@pytest.mark.parametrize("strategy", [None, "gather"])
def test_the_validations_commits_touch_what_they_claim(tmp_path, strategy):
    """validate-gate's A/A commit times every strategy by default, and the strategy and those importing it with
    --strategy; its injected commit touches the slowed ones."""
    from benchmarks.trees import revision_tree
    from unfold_bench.commands.validate_gate import EVERY, make_clone, one_strategy

    injection = EVERY if strategy is None else one_strategy(strategy)
    clone, base, same, injected = make_clone(tmp_path, injection)
    with (
        revision_tree(base, tmp_path / "base", clone) as base_tree,
        revision_tree(same, tmp_path / "same", clone) as same_tree,
        revision_tree(injected, tmp_path / "injected", clone) as injected_tree,
    ):
        aa, slowed = impact(base_tree, same_tree), impact(base_tree, injected_tree)
    assert aa.changed == (injection.aa_file,)
    assert not slowed.touches("native") and not slowed.touches("tiling")
    if strategy is None:
        assert aa.affected is None
        assert slowed.affected is not None and {*EVERY.slowed, *EVERY.hungrier} <= slowed.affected
    else:
        assert aa.affected == slowed.affected == {"gather", "gather_reuse"}
        assert slowed.changed == ("impls/gather.py",)
