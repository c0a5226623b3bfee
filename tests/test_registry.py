"""The registry is the single list of strategies, and its metadata is well-formed."""

import dataclasses
import importlib

import pytest
import torch

from benchmarks.cells import all_cells
from benchmarks.profiles import PROFILES
from impls import SPATIAL_DIMS, STRATEGIES, TESTED_STRATEGIES, UNVERIFIED, Strategy, get_strategy, strategy_names


def test_registry_is_nonempty_and_names_are_keys():
    assert STRATEGIES
    for name, strategy in TESTED_STRATEGIES.items():
        assert isinstance(strategy, Strategy)
        assert strategy.name == name
        assert strategy.description.strip()
        assert strategy.spatial_dims and set(strategy.spatial_dims) <= set(SPATIAL_DIMS)
        assert strategy.devices and set(strategy.devices) <= {"cpu", "cuda"}
    assert strategy_names() == list(STRATEGIES)


def test_the_issue_subjects_are_registered():
    assert {"native", "onehot", "as_strided", "tiling"} <= set(STRATEGIES)


@pytest.mark.parametrize("name", [name for name, s in TESTED_STRATEGIES.items() if s.origin is None])
def test_each_strategy_module_exposes_its_registry_entry_as_unfold(name):  # impls' own: a plugin lives elsewhere
    module = importlib.import_module(f"impls.{name}")
    assert module.unfold is TESTED_STRATEGIES[name]


def test_unverified_strategies_are_tested_but_never_benchmarked():
    assert set(UNVERIFIED).isdisjoint(STRATEGIES)
    assert set(UNVERIFIED) <= set(TESTED_STRATEGIES)
    benchmarked = {cell.strategy.name for profile in PROFILES.values() for cell in all_cells(profile)}
    assert benchmarked == set(STRATEGIES)
    for name in UNVERIFIED:
        with pytest.raises(KeyError):
            get_strategy(name)


def test_a_missing_requirement_refuses_every_input_naming_it():
    needs = dataclasses.replace(STRATEGIES["native"], missing_requirement="the example package")
    assert not needs.supports(2, "cpu")
    with pytest.raises(ValueError, match="needs the example package"):
        needs(torch.zeros(1, 1, 3, 3), 2)


def test_unknown_name_lists_known_ones():
    with pytest.raises(KeyError) as info:
        get_strategy("im2col_magic")
    message = str(info.value)
    assert "im2col_magic" in message
    for name in STRATEGIES:
        assert name in message


def test_without_a_cxx_compiler_the_compiling_strategies_refuse_saying_so():
    # Inductor builds its CPU kernels with $CXX, as cpp builds its kernel: without one they are skipped, not failed
    import subprocess
    import sys

    code = (
        "import torch; from impls import STRATEGIES\n"
        "for name in ('compiled', 'compiled_reuse', 'cpp', 'cpp_reuse', 'cpp_huge_pages', 'gather'):\n"
        "    print(name, STRATEGIES[name].unsupported_reason(2, 'cpu', torch.float32))\n"
    )
    env = {**__import__("os").environ, "CXX": "no-such-compiler"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    reasons = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    for name in ("compiled", "compiled_reuse", "cpp", "cpp_reuse", "cpp_huge_pages"):
        assert "'no-such-compiler' not found" in reasons[name], reasons
    assert reasons["gather"] == "None"


def test_the_compiled_strategies_need_inductors_compiler_g_plus_plus_not_c_plus_plus(tmp_path):
    """Inductor's CPU backend runs ``$CXX``, else ``g++`` (its configuration's default), where ``cpp`` runs
    ``$CXX``, else ``c++``: on a PATH with ``c++`` alone, ``compiled`` refuses naming ``g++`` and ``cpp`` is not
    refused for want of a compiler."""
    import os
    import shutil
    import subprocess
    import sys

    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip("no c++ on this machine")
    (tmp_path / "c++").symlink_to(compiler)
    code = (
        "import torch; from impls import STRATEGIES\n"
        "for name in ('compiled', 'compiled_reuse', 'cpp'):\n"
        "    print(name, STRATEGIES[name].unsupported_reason(2, 'cpu', torch.float32))\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "CXX"}
    env["PATH"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    reasons = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    for name in ("compiled", "compiled_reuse"):
        assert "'g++' not found" in reasons[name], reasons
    assert "compiler" not in reasons["cpp"], reasons
