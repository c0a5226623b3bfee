"""The benchmark harness, without timing anything: discovery, every quick cell, failure isolation, results.

Nothing here asserts a duration. The asv tests run asv itself (``--python=same``, this environment) on the
real suite's definitions and on a fixture suite of faulty strategies (``tests/fixtures/asv_suite``).
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from asv_runner.discovery import disc_benchmarks

from benchmarks import bounds, compile_time, unfold
from benchmarks.cells import Cell, Verdict, WrongResultError, gate, profile_config
from benchmarks.configs import CONFIGS, get_config
from benchmarks.memory import cpu_peak_supported, net_peak_bytes
from benchmarks.profiles import FULL, PROFILES, QUICK, benchmark_regex
from benchmarks.runner import SELECTION_VARIABLE
from benchmarks.traffic import Sizes, analytic_minimum_bytes
from benchmarks.trees import ROOT
from benchmarks.vocabulary import DEVICES
from impls import STRATEGIES
from reports.results import load_results
from tests.test_parity_configs import TEST_BATCH_SIZE

FIXTURE_SUITE = ROOT / "tests" / "fixtures" / "asv_suite"
MIB = 2**20
HAS_CUDA = torch.cuda.is_available()


def test_asv_discovers_every_strategy_config_and_device_for_each_profile():
    names = {b.name: b for b in disc_benchmarks(str(ROOT / "benchmarks"))}
    for profile in PROFILES.values():
        cls = profile.class_name
        expected_cells = [list(STRATEGIES), [c.name for c in profile.configs()], list(DEVICES)]
        for metric in ("time_forward", "time_forward_backward", "track_net_peak_forward"):
            benchmark = names[f"unfold.{cls}.{metric}"]
            assert [list(p) for p in benchmark.params] == [[repr(v) for v in values] for values in expected_cells]
        for metric in ("time_copy", "time_fill", "time_fresh_output", "track_min_peak_forward_backward"):
            benchmark = names[f"bounds.{cls}.{metric}"]
            assert [list(p) for p in benchmark.params] == [[repr(v) for v in values] for values in expected_cells[1:]]
    assert names["unfold.Full.track_net_peak_forward"].unit == "bytes"
    compiling = [name for name, strategy in STRATEGIES.items() if strategy.compiles]
    assert compiling  # the suite has a compiled strategy, so the compile-time suite is not empty
    assert [c.name for c in FULL.configs()] == [c.name for c in CONFIGS]  # the full profile has every config
    for profile in PROFILES.values():
        benchmark = names[f"compile_time.{profile.class_name}.track_compile_seconds"]
        params = [list(p) for p in benchmark.params]
        assert params[:2] == [[repr(v) for v in compiling], [repr(v) for v in profile.compile_time_config_names()]]
        assert benchmark.unit == "seconds"


@pytest.mark.slow
def test_asv_check_passes():
    completed = subprocess.run(
        [sys.executable, "-m", "asv", "check", "--python=same"], cwd=ROOT, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "No problems found" in completed.stdout


def test_profile_regex_selects_one_profile_and_narrows_by_cell():
    quick = benchmark_regex(QUICK)

    assert re.search(quick, "unfold.Quick.time_forward('native', 'allcnnc-conv2', 'cpu')")
    assert re.search(quick, "bounds.Quick.time_copy('allcnnc-conv2', 'cpu')")
    assert re.search(quick, "compile_time.Quick.track_compile_seconds('compiled', 'example', 'cpu')")
    assert not re.search(quick, "unfold.Full.time_forward('native', 'allcnnc-conv2', 'cpu')")
    narrow = benchmark_regex(FULL, "conv2")
    assert re.search(narrow, "unfold.Full.time_forward('native', 'allcnnc-conv2', 'cpu')")
    assert not re.search(narrow, "unfold.Full.time_forward('native', 'allcnnc-conv3', 'cpu')")
    assert not re.search(narrow, "unfold.Quick.time_forward('native', 'allcnnc-conv2', 'cpu')")


@pytest.mark.slow
def test_compile_time_is_measured_cold_and_the_timed_suite_compiles_in_setup():
    suite = compile_time.Quick()
    suite.setup("compiled", "example", "cpu")
    seconds = suite.track_compile_seconds("compiled", "example", "cpu")
    assert seconds > 0
    if not HAS_CUDA:  # skipped, not failed, where there is no GPU
        with pytest.raises(NotImplementedError, match="CUDA"):
            suite.setup("compiled", "example", "cuda")
    # the timed suite compiles in setup: its timed calls compile nothing
    from torch._dynamo.utils import counters

    cell = ("compiled", "example", "cpu")
    timed, verdicts = unfold.Quick(), {cell: Verdict()}
    torch._dynamo.reset()  # else setup would find the graphs track_compile_seconds compiled, and compile nothing
    cold = counters["stats"]["unique_graphs"]
    timed.setup(verdicts, *cell)
    graphs = counters["stats"]["unique_graphs"]
    assert graphs > cold  # setup compiled
    timed.time_forward(verdicts, *cell)
    timed.time_forward_backward(verdicts, *cell)
    assert counters["stats"]["unique_graphs"] == graphs


def _call_every_benchmark(suite: object, setup_args: tuple, params: tuple) -> dict[str, object]:
    figures = {}
    for name in sorted(dir(suite)):
        if name.startswith(("time_", "track_")):
            suite.setup(*setup_args, *params)
            figures[name] = getattr(suite, name)(*setup_args, *params)
    return figures


# The quick profile's cells (its strategies, configs and devices, so its skip reasons) at the parity tests' batch
# size: the same code paths for a quarter of the work, and the compiled strategies' kernels are those the parity
# tests compile (Inductor's on-disk cache). make bench runs them at the profile's own size.
AT_TEST_SIZE = dataclasses.replace(QUICK, name="quick-at-test-size", batch_cap=TEST_BATCH_SIZE)


class _QuickUnfoldAtTestSize(unfold.Quick):
    profile = AT_TEST_SIZE


class _QuickBoundsAtTestSize(bounds.Quick):
    profile = AT_TEST_SIZE


@pytest.mark.slow(first=True)
def test_every_quick_cell_runs_or_skips_for_a_stated_reason():
    suite = _QuickUnfoldAtTestSize()
    assert suite.params == unfold.Quick.params
    verdicts = suite.setup_cache()
    ran, skipped = [], {}
    # Each net peak first collects garbage (benchmarks.memory.release_free_heap), and in a test worker that walks
    # every object earlier tests and cells left (compiled graphs, hypothesis' state): a fifth of a second per peak.
    # Frozen before each cell, those are skipped, and the collection walks what the cell made, as in asv's process
    # per benchmark.
    try:
        for params in itertools.product(*suite.params):
            gc.collect()
            gc.freeze()
            try:
                figures = _call_every_benchmark(suite, (verdicts,), params)
            except NotImplementedError as skip:
                assert str(skip), f"{params} skipped without a reason"
                skipped[params] = str(skip)
                continue
            for name, figure in figures.items():
                if name.startswith("track_"):
                    assert isinstance(figure, int) and figure >= 0, (params, name, figure)
            ran.append(params)
    finally:
        gc.unfreeze()
    for strategy, config, device in itertools.product(*suite.params):
        cell = Cell.from_names(strategy, config, device, QUICK)
        reason = cell.skip_reason()
        if reason is None:
            assert (strategy, config, device) in ran
        else:
            assert skipped[(strategy, config, device)] == reason
    if not HAS_CUDA:
        assert all(skipped[p] == "no CUDA device on this machine" for p in skipped if p[2] == "cuda")
    assert skipped[("native", "vol3d-conv", "cpu")].startswith("strategy 'native' supports spatial dims (1, 2)")

    bounds_suite = _QuickBoundsAtTestSize()
    assert bounds_suite.params == bounds.Quick.params
    for params in itertools.product(*bounds_suite.params):
        try:
            figures = _call_every_benchmark(bounds_suite, (), params)
        except NotImplementedError as skip:
            assert params[1] == "cuda" and not HAS_CUDA, (params, skip)
            continue
        config = profile_config(AT_TEST_SIZE, params[0])
        output, input = _unfold_bytes_by_hand(config)
        assert figures["track_min_peak_forward"] == output
        assert figures["track_min_peak_forward_backward"] == 2 * output + input  # + grad_output and grad_input


def _unfold_bytes_by_hand(config) -> tuple[int, int]:
    """(output bytes, input bytes) of ``config``'s unfold, from its shape and arguments by the textbook formula."""
    n, c, *spatial = config.input_shape
    dims = len(spatial)

    def each(value) -> tuple[int, ...]:
        return tuple(value) if isinstance(value, tuple | list) else (value,) * dims

    kernel, stride, padding = each(config.kernel_size), each(config.stride), each(config.padding)
    dilation = each(config.dilation)
    windows = math.prod(
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, k, s, p, d in zip(spatial, kernel, stride, padding, dilation)
    )
    itemsize = torch.empty(0, dtype=getattr(torch, config.dtype)).element_size()
    return n * c * math.prod(kernel) * windows * itemsize, n * c * math.prod(spatial) * itemsize


def _run_asv(
    tmp_path: Path, benchmark_dir: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, Path]:
    results = tmp_path / "results"
    conf = {
        "version": 1,
        "project": "unfold-bench-fixture",
        "repo": str(ROOT),
        "branches": ["HEAD"],  # whatever is checked out (CI may be on a detached HEAD)
        "dvcs": "git",
        "environment_type": "virtualenv",
        "benchmark_dir": str(benchmark_dir),
        "results_dir": str(results),
        "env_dir": str(tmp_path / "env"),
        "html_dir": str(tmp_path / "html"),
        "launch_method": "forkserver",
    }
    conf_path = tmp_path / "asv.conf.json"
    conf_path.write_text(json.dumps(conf))
    env = {**os.environ, **(env or {}), "HOME": str(tmp_path)}  # asv's machine file lives in $HOME
    asv = [sys.executable, "-m", "asv", "--config", str(conf_path)]
    subprocess.run([*asv, "machine", "--yes", "--machine", "fixture-machine"], env=env, check=True, capture_output=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    command = [*asv, "run", "--python=same", "--set-commit-hash", commit.stdout.strip(), "--machine", "fixture-machine"]
    completed = subprocess.run([*command, "--show-stderr", *extra], env=env, capture_output=True, text=True)
    return completed, results


@pytest.mark.slow
def test_a_failing_or_killed_cell_fails_alone_and_the_results_are_written(tmp_path):
    completed, results = _run_asv(tmp_path, FIXTURE_SUITE)
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0, "asv must report the failed cells"
    assert list((results / "fixture-machine").glob("*.json")), output  # results written despite failures

    table = load_results(results)
    assert set(table.suite) == {"faulty"}
    status = table.set_index(["strategy", "config", "device", "metric"])["status"].to_dict()
    metrics = sorted(set(table.metric))
    assert metrics == [
        "time_forward",
        "time_forward_backward",
        "track_net_peak_forward",
        "track_net_peak_forward_backward",
    ]
    for metric in metrics:
        assert status[("native", "example", "cpu", metric)] == "ok", output
        # one call per sample, the previous output dropped by the setup before it (asv's number = 1)
        assert status[("needs_previous_output_freed", "example", "cpu", metric)] == "ok", output
        for strategy in ("wrong", "oom_when_timed", "killed_when_timed", "killed_in_gate"):
            assert status[(strategy, "example", "cpu", metric)] == "failed", (strategy, metric, output)
        assert status[("native", "vol3d-conv", "cpu", metric)] == "skipped"  # native has no 3-d
        if not HAS_CUDA:
            assert status[("native", "example", "cuda", metric)] == "skipped"
    ok = table[table.status == "ok"]
    assert (ok.value > 0).all()
    assert table[table.status != "ok"].value.isna().all()  # never a number for a failed or skipped cell
    assert "wrong on example (cpu): wrong output:" in output and "entries differ from the reference" in output
    assert "the checking process died: signal SIGKILL" in output
    assert "injected: out of memory while benchmarking" in output


@pytest.mark.slow(first=True)
def test_a_quick_asv_run_of_the_real_suite_completes_with_cuda_skipped(tmp_path):
    cells = r"^unfold\.Quick\..*\('native', 'example', '(cpu|cuda)'\)"
    # as make bench runs asv: the gate is told the selection, and checks only those cells
    completed, results = _run_asv(tmp_path, ROOT / "benchmarks", "-b", cells, env={SELECTION_VARIABLE: cells})
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    table = load_results(results)
    table = table[(table.strategy == "native") & (table.config == "example")]  # the rest was not selected
    assert len(table) == 4 * 2 and set(table.metric) == {
        n for n in dir(unfold.Quick) if n.startswith(("time_", "track_"))
    }
    assert (table[table.device == "cpu"].status == "ok").all(), output
    assert (table[table.device == "cuda"].status == ("ok" if HAS_CUDA else "skipped")).all(), output


def test_the_gate_checks_only_the_cells_the_run_selects(monkeypatch):
    monkeypatch.setenv(SELECTION_VARIABLE, r"\('native', 'example', 'cpu'\)$")  # what asv -b is given
    suite = _QuickUnfoldAtTestSize()
    verdicts = suite._gate()
    assert list(verdicts) == [("native", "example", "cpu")] and verdicts[("native", "example", "cpu")] == Verdict()
    suite.setup(verdicts, "native", "example", "cpu")  # selected and checked: set up as usual
    with pytest.raises(WrongResultError, match=r"gather on example \(cpu\): not checked"):
        suite.setup(verdicts, "gather", "example", "cpu")  # a cell asv was not told to run is never timed unchecked


@pytest.mark.slow
def test_gate_survives_a_killed_check_and_goes_on_with_the_next_cells():
    from tests.fixtures.asv_suite.faulty import FAULTY_STRATEGIES, TINY

    names = ["wrong", "killed_in_gate", "native", "killed_in_gate", "native"]
    configs = ["example", "example", "example", "allcnnc-conv8", "allcnnc-conv8"]
    cells = [Cell.from_names(n, c, "cpu", TINY, FAULTY_STRATEGIES) for n, c in zip(names, configs)]
    verdicts = gate(cells)
    assert list(verdicts) == [cell.key for cell in cells]
    problems = [verdicts[cell.key].problem(backward=True) for cell in cells]
    assert problems[0].startswith("wrong output")
    assert "SIGKILL" in problems[1] and "SIGKILL" in problems[3]
    assert problems[2] is None and problems[4] is None  # checked in a new process after each kill


_GATE_WITH_ANOTHER_PROJECT_COPY = """
import sys

if __name__ == "__main__":  # not re-run when the checking process imports this file as its parent's main
    sys.path.insert(0, sys.argv[1])  # the copy comes first: impls is imported from there ...
    import impls

    sys.path.append(sys.argv[2])  # ... and the suite from the working tree, which holds its own impls
    from benchmarks.cells import Cell, gate
    from benchmarks.profiles import QUICK

    verdict = gate([Cell.from_names("native", "example", "cpu", QUICK)])[("native", "example", "cpu")]
    print(impls.__file__, verdict.problem(backward=False), sep="\\n")
"""


@pytest.mark.slow
def test_gate_checks_the_project_that_is_timed_not_the_working_tree(tmp_path):
    # make bench-commits: asv times a past commit's impls (installed in its environment) with the suite
    # of the working tree, beside which lies another impls. The gate must check the code that is timed.
    copy = tmp_path / "commit"
    shutil.copytree(ROOT / "impls", copy / "impls", ignore=shutil.ignore_patterns("__pycache__"))
    native = copy / "impls" / "native.py"
    wrong = "def _off_by_flip(input, geometry):\n    return _native_unfold(input, geometry).flip(-1)\n\n\n"
    wrong += "unfold = Strategy("
    source = native.read_text().replace("unfold = Strategy(", wrong).replace("=_native_unfold", "=_off_by_flip")
    native.write_text(source)
    script = tmp_path / "gate.py"
    script.write_text(_GATE_WITH_ANOTHER_PROJECT_COPY)
    run = subprocess.run(
        [sys.executable, str(script), str(copy), str(ROOT)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert run.returncode == 0, run.stderr
    imported_from, problem = run.stdout.strip().splitlines()
    assert imported_from == str(copy / "impls" / "__init__.py")
    assert problem.startswith("wrong output"), problem


@pytest.mark.skipif(cpu_peak_supported() is not None, reason=str(cpu_peak_supported()))
def test_net_peak_counts_what_a_call_allocates_and_not_what_existed():
    existing = torch.ones(32 * MIB // 4)  # resident before the call: not counted
    peak = net_peak_bytes(lambda: torch.ones(64 * MIB // 4), "cpu")
    page = 4096
    # a 64 MiB block is always mmapped (over glibc's largest dynamic threshold): its pages and the block's header. The
    # resident set also holds file-backed pages (libraries), which the kernel may reclaim during the call when the
    # machine is loaded (seen: 61 pages under the whole test suite), so the bound is 1 MiB, not the page.
    slack = MIB
    assert abs(peak - 64 * MIB) <= slack, peak
    # a view allocates no tensor memory; the interpreter may map one of its 1 MiB object arenas anew (3.10+)
    assert net_peak_bytes(lambda: existing.view(-1), "cpu") <= MIB + 2 * page
    transient = net_peak_bytes(lambda: torch.ones(64 * MIB // 4).sum(), "cpu")  # freed before the call returns
    assert transient >= 64 * MIB - slack  # the peak is what was in use during the call, not at its end


def test_analytic_minimum():
    conv2 = Sizes.of(get_config("allcnnc-conv2"))
    assert analytic_minimum_bytes(conv2, backward=False) == 864 * MIB  # 256 x 864 x 1024 float32
    assert analytic_minimum_bytes(conv2, backward=True) == (2 * 864 + 96) * MIB
    conv8 = Sizes.of(get_config("allcnnc-conv8"))  # 1x1 kernel, stride 1: a reshape, but the contract is new memory
    output_bytes = conv8.output_numel * 4
    assert output_bytes == conv8.input_numel * 4 == 256 * 192 * 36 * 4
    assert analytic_minimum_bytes(conv8, backward=False) == output_bytes
    assert analytic_minimum_bytes(conv8, backward=True) == 3 * output_bytes
    half = Sizes.of(get_config("conv4-bfloat16"))  # two bytes an element
    assert analytic_minimum_bytes(half, backward=False) == 2 * get_config("allcnnc-conv4").geometry.output_numel
