"""A few of ``unfold-bench mutation-check``'s mutations, so the suite keeps failing where its subjects break.

The whole check (every mutation, with ``--baseline``) is ``make mutation-check``; this runs the quick ones, each
pytest run in a temporary copy of the working tree.
"""

from __future__ import annotations

import pytest

from benchmarks.trees import ROOT
from unfold_bench.commands import mutation_check

# one of each kind of subject: a kernel's values, a gradient's precision, the gate's verdict, a pick, the timer
QUICK = (
    "gather-padding-slots-never-marked-empty",
    "gather-backward-scaled-by-1.002-in-bfloat16",
    "gate-verdict-ignores-its-margin",
    "pick-by-the-arithmetic-mean",
    "timer-starts-after-the-call",
)


@pytest.fixture(scope="module")
def copy():
    with mutation_check.project_copy() as path:
        yield path


@pytest.mark.slow
def test_quick_mutations_are_caught(copy):
    mutations = [m for m in mutation_check.MUTATIONS if m.name in QUICK]
    assert len(mutations) == len(QUICK)
    said: list[str] = []
    caught, bad = mutation_check.check(mutations, baseline=False, copy=copy, say=said.append)
    assert (caught, bad) == (len(QUICK), 0), "\n".join(said)


def test_a_mutation_whose_text_is_gone_is_reported_stale_and_the_copy_is_left_intact(copy):
    stale = mutation_check.Mutation("stale", "impls/gather.py", "no such text", "", ("tests/test_gather.py",), "why")
    said: list[str] = []
    assert mutation_check.check([stale], baseline=False, copy=copy, say=said.append) == (0, 1)
    assert said[0].startswith("STALE     stale: impls/gather.py holds the text to replace 0 times")
    for name in ("impls/gather.py", "impls/windows.py", "impls/onehot.py"):
        assert (copy / name).read_text() == (ROOT / name).read_text()


def test_every_mutation_names_the_figure_it_would_corrupt():
    assert all(m.figure for m in mutation_check.MUTATIONS), [m.name for m in mutation_check.MUTATIONS if not m.figure]


def test_every_mutation_finds_its_text_once_in_the_source_as_it_is():
    """A reformatted or renamed subject leaves a mutation stale, a blind spot ``make mutation-check`` only reports
    when it is run; here every change to the source is checked against every mutation."""
    counts = {m.name: (ROOT / m.path).read_text().count(m.old) for m in mutation_check.MUTATIONS}
    assert {name: count for name, count in counts.items() if count != 1} == {}
