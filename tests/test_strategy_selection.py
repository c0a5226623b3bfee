"""``pytest --strategy NAME`` (``make test-strategy``) selects one strategy's tests, and not those of a strategy
whose name starts with it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.trees import ROOT
from tests.conftest import strategies_named


def test_a_test_name_names_the_longest_strategy_at_each_place():
    assert strategies_named("test_gather_reuse_keeps_its_buffer") == {"gather_reuse"}
    assert strategies_named("test_gather_matches_gather_reuse") == {"gather", "gather_reuse"}
    assert strategies_named("test_cpp_huge_pages_advises") == {"cpp_huge_pages"}
    assert strategies_named("test_gathered_output") == set()  # a word, not a prefix
    assert strategies_named("test_triton_gather_index") == {"triton_gather"}  # an unverified one too


def _collected(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_strategy_option_keeps_its_parametrised_tests_and_not_a_longer_namesakes():
    collected = _collected("--strategy", "gather", "tests/test_reuse.py", "tests/test_gather.py")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert any("test_gather.py::" in i for i in ids)  # its own module
    assert any("test_reuse.py::" in i and "[gather]" in i for i in ids)  # parametrised with it
    assert not any("gather_reuse" in i for i in ids), ids  # -k gather would have kept these


def test_an_unknown_strategy_is_refused_naming_it():
    collected = _collected("--strategy", "nosuch", "tests/test_strategy_selection.py")
    assert collected.returncode != 0 and "--strategy 'nosuch': not a tested strategy" in collected.stderr
