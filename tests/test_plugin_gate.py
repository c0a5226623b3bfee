"""The correctness gate against plugins that break the suite's rules rather than the unfold's (``impls.plugins``,
``benchmarks.cells.gate``): each one fails its own cells with the reason, and every other cell gets its verdict."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from benchmarks.cells import Cell, check_cell, checked_in_isolation, gate
from benchmarks.configs import LayerConfig
from benchmarks.profiles import QUICK
from benchmarks.trees import ROOT
from impls import STRATEGIES
from impls.parity import problems
from impls.plugins import PICKLABLE, VARIABLE, load, wrap
from tests.helpers import OUTSIDE

EXAMPLE = next(c for c in QUICK.configs() if c.name == "example")
ONE_ELEMENT = LayerConfig("one-element", (2, 3, 5, 5), 1)  # its unfold is the input reshaped, which a view can be


class KeptOutput:
    """An unfold that keeps its first output and copies every later result into it, declaring nothing."""

    def __init__(self) -> None:
        self.kept: torch.Tensor | None = None

    def __call__(self, input, kernel_size, dilation=1, padding=0, stride=1) -> torch.Tensor:
        out = F.unfold(input, kernel_size, dilation, padding, stride)
        if self.kept is None or self.kept.shape != out.shape:
            self.kept = torch.empty_like(out.detach())
        return self.kept.copy_(out)  # in place, as autograd sees: the gradient flows through the copy


def flattened(input, kernel_size, dilation=1, padding=0, stride=1) -> torch.Tensor:
    """The spatial dims flattened: a one-element kernel's unfold in values and gradient, but a view of the input."""
    return input.flatten(2)


class WritesIntoItsInputOnTheSecondCall:
    """The right output every time, but the second call zeroes its input (behind autograd's back)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, input, kernel_size, dilation=1, padding=0, stride=1) -> torch.Tensor:
        self.calls += 1
        out = F.unfold(input, kernel_size, dilation, padding, stride)
        if self.calls == 2:
            input.detach().zero_()
        return out


def test_a_plugin_that_returns_a_kept_buffer_without_declaring_it_fails_the_gate_saying_so():
    """Its values and gradient are right, but every call overwrites the previous result: not a drop-in."""
    verdict = check_cell(Cell(wrap("kept_output", KeptOutput(), "test"), EXAMPLE, "cpu"))
    problem = verdict.problem(backward=False)
    assert "a second call returned the same buffer as the first, which was still alive" in problem, verdict
    assert "does not declare reuses_output=True" in problem


def test_a_plugin_that_returns_a_view_of_its_input_fails_the_gate_saying_so():
    x = ONE_ELEMENT.make_input("cpu", seed=0)
    assert problems(flattened, x, ONE_ELEMENT.unfold_kwargs()) == (None, None)  # values and gradient match
    verdict = check_cell(Cell(wrap("flattened", flattened, "test"), ONE_ELEMENT, "cpu"))
    assert "its output shares memory with its input (a view of it)" in verdict.problem(backward=False), verdict


def test_a_strategy_that_declares_a_reused_output_and_returns_new_memory_fails_the_gate_saying_so():
    """The memory benchmarks would charge it a buffer it does not keep."""
    claims_reuse = replace(STRATEGIES["gather"], name="claims_reuse", reuses_output=True)
    problem = check_cell(Cell(claims_reuse, EXAMPLE, "cpu")).problem(backward=False)
    assert "it declares reuses_output=True, but a second call returned new memory" in problem


def test_a_strategy_that_writes_into_its_input_on_the_gates_second_call_fails_and_the_input_is_restored():
    x = EXAMPLE.make_input("cpu", seed=0)
    original = x.clone()
    forward, gradient = problems(WritesIntoItsInputOnTheSecondCall(), x, EXAMPLE.unfold_kwargs(), reuses_output=False)
    assert forward is not None and forward.startswith("it modified its input in place"), forward
    assert gradient == "not checked: the input was modified"
    assert torch.equal(x, original)
    assert problems(STRATEGIES["native"], x, EXAMPLE.unfold_kwargs(), reuses_output=False) == (None, None)


def test_a_plugin_whose_implementation_does_not_pickle_is_set_aside_when_loaded_saying_why(outside_path):
    found, problems = load("outside_misbehaving:unpicklable,outside_unfold:outside_unfold")
    assert set(found) == {"outside_unfold"}
    assert PICKLABLE in problems["unpicklable"], problems


def test_a_cell_that_does_not_pickle_fails_alone_and_the_others_are_checked(outside_path):
    """A strategy built by hand (not through ``load``) around a lambda: the gate cannot hand it to its checking
    process, so its cell gets an error verdict saying why, and the cells beside it (before and after it in the
    checking order) get theirs."""
    import outside_misbehaving

    unpicklable = wrap("unpicklable", outside_misbehaving.unpicklable, "test")
    cells = [Cell(STRATEGIES["native"], EXAMPLE, "cpu"), Cell(unpicklable, EXAMPLE, "cpu")]
    cells.append(Cell(STRATEGIES["gather"], EXAMPLE, "cpu"))
    verdicts = gate(cells, cache=None)
    assert PICKLABLE in verdicts[("unpicklable", "example", "cpu")].problem(backward=False)
    assert verdicts[("native", "example", "cpu")].problem(backward=True) is None
    assert verdicts[("gather", "example", "cpu")].problem(backward=True) is None


def test_a_plugin_that_writes_into_its_input_fails_and_the_next_strategy_gets_the_input_unmodified(outside_path):
    """Every strategy of a config is checked on the same input: one that zeroes it (after computing the right
    output) fails, and the strategies checked after it on that input still match the reference."""
    found, problems = load("outside_misbehaving:mutates_input")
    assert problems == {}
    cells = [Cell(found["mutates_input"], EXAMPLE, "cpu"), Cell(STRATEGIES["native"], EXAMPLE, "cpu")]
    cells.append(Cell(STRATEGIES["gather"], EXAMPLE, "cpu"))
    verdicts = gate(cells, cache=None)
    assert "modified its input in place" in verdicts[("mutates_input", "example", "cpu")].problem(backward=False)
    assert verdicts[("native", "example", "cpu")].problem(backward=True) is None
    assert verdicts[("gather", "example", "cpu")].problem(backward=True) is None


def test_problems_restores_an_input_the_strategy_wrote_into_and_says_so(outside_path):
    import outside_misbehaving

    x = EXAMPLE.make_input("cpu", seed=0)
    original = x.clone()
    forward, gradient = problems(outside_misbehaving.mutates_input, x, EXAMPLE.unfold_kwargs())
    assert forward.startswith("it modified its input in place") and f"of {x.numel()} input entries" in forward
    assert gradient == "not checked: the input was modified"
    assert torch.equal(x, original)
    assert problems(STRATEGIES["native"], x, EXAMPLE.unfold_kwargs()) == (None, None)


def test_a_kept_verdict_is_missed_when_a_helper_module_of_the_plugin_changes(tmp_path, monkeypatch, request):
    """The key of a kept verdict covers every module of the plugin's top-level package, not only the one named, and
    for a top-level module the modules beside it (which it may import, as ``outside_bad`` imports
    ``outside_unfold``)."""
    from benchmarks.cells import _verdict_file

    package = tmp_path / "helped_unfold"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_helper.py").write_text((OUTSIDE / "outside_unfold.py").read_text())
    (package / "api.py").write_text(
        "from helped_unfold._helper import outside_unfold\n\n\n"
        "def helped(input, kernel_size, dilation=1, padding=0, stride=1):\n"
        "    return outside_unfold(input, kernel_size, dilation, padding, stride)\n"
    )
    beside = tmp_path / "beside"
    beside.mkdir()
    (beside / "outside_unfold.py").write_text((OUTSIDE / "outside_unfold.py").read_text())
    (beside / "outside_bad.py").write_text((OUTSIDE / "outside_bad.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(beside))
    for name in [n for n in sys.modules if n.startswith(("outside_", "helped_unfold"))]:
        monkeypatch.delitem(sys.modules, name)
    request.addfinalizer(lambda: [sys.modules.pop(n) for n in list(sys.modules) if n.startswith("helped_unfold")])
    found, problems = load("helped_unfold.api:helped,outside_bad:wrong_values")
    assert problems == {}
    for name, helper in [("helped", package / "_helper.py"), ("wrong_values", beside / "outside_unfold.py")]:
        cell = Cell(found[name], EXAMPLE, "cpu")
        before = _verdict_file(cell, tmp_path)
        assert _verdict_file(cell, tmp_path) == before  # the same code: the same key
        helper.write_text(helper.read_text() + "\n# a change in a helper\n")
        assert _verdict_file(cell, tmp_path) != before, name


def test_a_kept_verdict_is_missed_when_a_helper_package_beside_a_top_level_plugin_module_changes(
    tmp_path, monkeypatch, request
):
    """A top-level module named with ``--strategy`` may import helper packages from its folder (one with
    ``__init__.py``, a namespace folder): the key of a kept verdict covers each one's source files, those not yet
    imported among them, and not a package of that folder the plugin does not import (the folder may be a home
    directory)."""
    from benchmarks.cells import _verdict_file

    folder = tmp_path / "folder"
    (folder / "helper_pkg").mkdir(parents=True)
    (folder / "helper_pkg" / "__init__.py").write_text("")
    (folder / "helper_pkg" / "core.py").write_text((OUTSIDE / "outside_unfold.py").read_text())
    (folder / "helper_pkg" / "lazy.py").write_text("LATER = 1\n")  # what the plugin might import on its first call
    (folder / "ns_helpers").mkdir()
    (folder / "ns_helpers" / "deep.py").write_text("FLIP = False\n")
    (folder / "unrelated").mkdir()
    (folder / "unrelated" / "__init__.py").write_text("")
    (folder / "top_plugin.py").write_text(
        "import ns_helpers.deep\nfrom helper_pkg.core import outside_unfold\n\n\n"
        "def helped(input, kernel_size, dilation=1, padding=0, stride=1):\n"
        "    out = outside_unfold(input, kernel_size, dilation, padding, stride)\n"
        "    return out.flip(-1) if ns_helpers.deep.FLIP else out\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    names = ("top_plugin", "helper_pkg", "ns_helpers", "unrelated")
    request.addfinalizer(lambda: [sys.modules.pop(n) for n in list(sys.modules) if n.startswith(names)])
    import unrelated  # noqa: F401  (imported from the same folder by someone else)

    found, problems = load("top_plugin:helped")
    assert problems == {}
    cell = Cell(found["helped"], EXAMPLE, "cpu")
    for helper, counts in [
        (folder / "helper_pkg" / "core.py", True),
        (folder / "helper_pkg" / "lazy.py", True),
        (folder / "ns_helpers" / "deep.py", True),
        (folder / "unrelated" / "__init__.py", False),
    ]:
        before = _verdict_file(cell, tmp_path)
        helper.write_text(helper.read_text() + "\n# a change in a helper\n")
        assert (_verdict_file(cell, tmp_path) != before) == counts, helper


def test_the_key_of_a_kept_verdict_covers_how_the_gate_makes_the_input_and_the_reference(outside_path):
    """The reference and the comparison are hashed with ``impls``, the check with this suite's ``benchmarks.cells``,
    and the input's making (``LayerConfig.make_input``) with ``benchmarks.configs``, for the project's strategies and
    a plugin's."""
    from benchmarks.cells import _checked_code

    found, _ = load("outside_unfold:outside_unfold")
    expected = [ROOT / "impls" / "reference.py", ROOT / "impls" / "parity.py"]
    expected += [ROOT / "benchmarks" / "configs.py", ROOT / "benchmarks" / "cells.py"]
    for strategy in (STRATEGIES["native"], found["outside_unfold"]):
        code = _checked_code(Cell(strategy, EXAMPLE, "cpu"))
        assert {str(path.resolve()) for path in expected} <= set(code), strategy.name


def test_a_kept_verdict_is_missed_when_the_making_of_the_input_changes(tmp_path, monkeypatch):
    """``LayerConfig.make_input`` (``benchmarks.configs``) makes every cell's input: a change to it misses."""
    from benchmarks import configs
    from benchmarks.cells import _verdict_file

    copy = tmp_path / "configs.py"
    copy.write_text(Path(configs.__file__).read_text())
    monkeypatch.setattr(configs, "__file__", str(copy))  # the file read for the key: a copy to change
    cell = Cell(STRATEGIES["native"], EXAMPLE, "cpu")
    before = _verdict_file(cell, tmp_path)
    copy.write_text(copy.read_text().replace("torch.randn(", "torch.rand("))
    assert _verdict_file(cell, tmp_path) != before


def test_the_key_of_a_kept_verdict_covers_the_cpp_kernels_source():
    from benchmarks.cells import _code_of

    assert str((ROOT / "impls" / "csrc" / "unfold_cpu.cpp").resolve()) in _code_of("impls.cpp")


def test_a_kept_verdict_of_the_cpp_kernel_is_missed_when_its_compile_flags_change(tmp_path, monkeypatch):
    """The flags (``UNFOLD_BENCH_CPP_CFLAGS``: ``-ffast-math`` changes results) are part of the kernel's build key,
    and the key of a kept verdict of a strategy that builds the kernel covers that; native's does not depend on it."""
    from benchmarks.cells import _verdict_file
    from impls import cpp

    cells = [Cell(STRATEGIES[name], EXAMPLE, "cpu") for name in ("cpp", "cpp_reuse", "native")]
    before = [_verdict_file(cell, tmp_path) for cell in cells]
    monkeypatch.setattr(cpp, "CFLAGS", (*cpp.CFLAGS, "-ffast-math"))
    monkeypatch.setattr(cpp, "KEY", cpp._build_key())
    after = [_verdict_file(cell, tmp_path) for cell in cells]
    assert after[0] != before[0] and after[1] != before[1] and after[2] == before[2]


def test_a_kept_verdict_is_found_under_the_same_aten_cpu_capability_and_missed_under_another(tmp_path, monkeypatch):
    """ATen runs the strategies' and the reference's CPU kernels for its capability (``ATEN_CPU_CAPABILITY``): a
    verdict kept under one is reused under the same and missed under another."""
    from benchmarks.cells import Verdict, _verdict_file, cached_verdict

    cell = Cell(STRATEGIES["native"], EXAMPLE, "cpu")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    _verdict_file(cell, tmp_path).write_bytes(pickle.dumps(Verdict(error="kept under AVX2")))
    assert cached_verdict(cell, tmp_path) == Verdict(error="kept under AVX2")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    assert cached_verdict(cell, tmp_path) is None


@pytest.mark.parametrize("reader", ["ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "cpu flags"])
def test_a_kept_verdict_is_found_under_the_same_onednn_isa_and_missed_under_another(tmp_path, monkeypatch, reader):
    """oneDNN runs ``onehot``'s convolution with the kernels of the ISA it picks by the CPU's flags, capped by
    ``ONEDNN_MAX_CPU_ISA`` (or ``DNNL_MAX_CPU_ISA``): a verdict kept under one CPU and cap is reused under the same
    and missed under another."""
    import benchmarks.cells
    from benchmarks.cells import Verdict, _verdict_file, cached_verdict

    def read_as(value: str) -> None:
        if reader == "cpu flags":
            monkeypatch.setattr(benchmarks.cells, "cpu_flags", lambda: value, raising=False)  # read there
        else:
            monkeypatch.setenv(reader, value)

    cell = Cell(STRATEGIES["onehot"], EXAMPLE, "cpu")
    read_as("avx2")
    _verdict_file(cell, tmp_path).write_bytes(pickle.dumps(Verdict(error="kept under avx2")))
    assert cached_verdict(cell, tmp_path) == Verdict(error="kept under avx2")
    read_as("avx512_core_amx")
    assert cached_verdict(cell, tmp_path) is None


@pytest.mark.skipif(STRATEGIES["compiled"].missing_requirement is not None, reason="no C++ compiler")
def test_a_kept_verdict_of_a_compiling_strategy_is_found_under_the_same_inductor_compiler_and_missed_under_another(
    tmp_path, monkeypatch
):
    """Inductor builds ``compiled``'s CPU kernels with the first compiler of ``torch._inductor.config.cpp.cxx`` that
    it finds (``CXX`` as it was when that config was imported): a verdict kept under one is reused under the same,
    whatever ``CXX`` says now, and missed under another; ``native``, which compiles nothing, keeps its verdict."""
    import torch._inductor.config

    from benchmarks.cells import Verdict, _verdict_file, cached_verdict

    original = torch._inductor.config.cpp.cxx
    first, second = tmp_path / "g++-12", tmp_path / "g++-13"
    for compiler in (first, second):
        compiler.write_text(f"#!/bin/sh\n# {compiler.name}\n")
        compiler.chmod(0o755)
    cells = [Cell(STRATEGIES[name], EXAMPLE, "cpu") for name in ("compiled", "native")]
    kept = [Verdict(error=f"{cell.strategy.name}, kept under {first.name}") for cell in cells]
    # Inductor's config.patch, not monkeypatch: monkeypatch's undo deletes a config entry, and every later test of
    # this worker that compiles then fails
    with torch._inductor.config.patch({"cpp.cxx": (None, str(first))}):
        for cell, verdict in zip(cells, kept):
            _verdict_file(cell, tmp_path).write_bytes(pickle.dumps(verdict))
        monkeypatch.setenv("CXX", str(second))  # read by Inductor's config when imported, not after
        assert [cached_verdict(cell, tmp_path) for cell in cells] == kept
    with torch._inductor.config.patch({"cpp.cxx": (None, str(second))}):
        assert [cached_verdict(cell, tmp_path) for cell in cells] == [None, kept[1]]
    assert torch._inductor.config.cpp.cxx == original


def test_a_kept_verdict_of_a_compiling_strategy_is_missed_under_other_inductor_options_but_not_another_cache(
    tmp_path, monkeypatch
):
    """Inductor's options set in the environment change what it generates (``TORCHINDUCTOR_CPP_MARCH``) or the
    compiler it builds with (``TORCH_INDUCTOR_INSTALL_GXX``): a compiling strategy's verdict kept without them is
    missed under them, on the CPU and on CUDA; where Inductor keeps what it built is not such an option; ``native``,
    which compiles nothing, keeps its verdict under all of them."""
    from benchmarks.cells import _verdict_file

    for name in [name for name in os.environ if name.startswith(("TORCHINDUCTOR_", "TORCH_INDUCTOR_"))]:
        monkeypatch.delenv(name)
    cells = [Cell(STRATEGIES[name], EXAMPLE, device) for name in ("compiled", "native") for device in ("cpu", "cuda")]
    before = [_verdict_file(cell, tmp_path) for cell in cells]
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")
    assert [_verdict_file(cell, tmp_path) for cell in cells] == before
    for option, value in [("TORCHINDUCTOR_CPP_MARCH", "x86-64-v2"), ("TORCH_INDUCTOR_INSTALL_GXX", "1")]:
        with monkeypatch.context() as patched:
            patched.setenv(option, value)
            after = [_verdict_file(cell, tmp_path) for cell in cells]
        assert [a != b for a, b in zip(after, before)] == [True, True, False, False], option


@pytest.mark.slow
def test_a_process_started_in_this_environment_keeps_verdicts_under_this_ones_key_and_one_capped_to_default_not(
    tmp_path,
):
    """The bench command's process reads the verdicts that asv's process (started in its environment) kept: both
    compute one key. A process started with ``ATEN_CPU_CAPABILITY=default`` runs other kernels on a CPU with vector
    ones, and keeps its verdicts under another key."""
    from benchmarks.cells import _verdict_file

    code = (
        "import sys; from pathlib import Path; from benchmarks.cells import Cell, _verdict_file; "
        "from benchmarks.profiles import QUICK; "
        "print(_verdict_file(Cell.from_names('native', 'example', 'cpu', QUICK), Path(sys.argv[1])))"
    )
    here = _verdict_file(Cell(STRATEGIES["native"], EXAMPLE, "cpu"), tmp_path)
    keys = {}
    for name, capability in [("same", {}), ("default", {"ATEN_CPU_CAPABILITY": "default"})]:
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            cwd=ROOT,
            env={**os.environ, **capability},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        keys[name] = Path(done.stdout.splitlines()[-1])
    assert keys["same"] == here
    vector_kernels = torch.backends.cpu.get_cpu_capability() != "DEFAULT"
    assert (keys["default"] != here) == vector_kernels


def test_a_kept_verdict_is_missed_when_tritons_version_changes(tmp_path, monkeypatch):
    """Triton compiles kernels (``triton_gather``'s, Inductor's on CUDA): the key of a kept verdict covers the version
    of the Triton installed first on the path, read without importing it."""
    from benchmarks.cells import _verdict_file

    cell = Cell(STRATEGIES["native"], EXAMPLE, "cpu")
    keys = []
    for version in ("0.1", "0.2"):  # each a Triton distribution as pip leaves it, first on the path in turn
        site = tmp_path / version
        (site / "triton").mkdir(parents=True)
        (site / "triton" / "__init__.py").write_text("")
        info = site / f"triton-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: triton\nVersion: {version}\n")
        (info / "top_level.txt").write_text("triton\n")
        monkeypatch.syspath_prepend(str(site))
        keys.append(_verdict_file(cell, tmp_path))
    assert keys[0] != keys[1]


@pytest.mark.slow
def test_a_plugin_that_never_returns_fails_its_cells_after_the_deadline_and_the_others_are_checked(outside_path):
    """The hanging cell's checking process is killed at the deadline (short here; a profile's per-cell timeout by
    default), the cells after it are checked in a new one, and the same strategy's cells on other configs are not
    checked again (each would wait out the deadline). The deadline leaves room for the cell checked after the kill
    (a new process, the reference's answers) on a loaded machine."""
    found, problems = load("outside_misbehaving:hangs")
    assert problems == {}
    conv2 = next(c for c in QUICK.configs() if c.name == "allcnnc-conv2")
    cells = [Cell(found["hangs"], EXAMPLE, "cpu"), Cell(STRATEGIES["native"], EXAMPLE, "cpu")]
    cells += [Cell(found["hangs"], conv2, "cpu")]
    verdicts = gate(cells, cache=None, deadline=10)
    # checked config by config: allcnnc-conv2 first
    late = verdicts[("hangs", "allcnnc-conv2", "cpu")].problem(backward=False)
    assert "its check did not finish within 10 s" in late
    not_checked = "not checked: its check on allcnnc-conv2 did not finish within 10 s"
    assert not_checked in verdicts[("hangs", "example", "cpu")].problem(backward=False)
    assert verdicts[("native", "example", "cpu")].problem(backward=True) is None


@pytest.mark.slow
def test_a_strategy_late_on_the_cpu_is_not_checked_on_cuda_and_a_process_that_never_starts_fails_every_cell(
    outside_path, monkeypatch
):
    """A CUDA cell is checked in the benchmark's process, with no deadline: one of a strategy that ran out of time
    on the CPU is not checked at all. A checking process that does not start in time gives each of its cells the
    reason, not the first alone."""
    from benchmarks import cells as cells_module

    found, _ = load("outside_misbehaving:hangs")
    late = list(checked_in_isolation([Cell(found["hangs"], EXAMPLE, "cuda"), Cell(found["hangs"], EXAMPLE, "cpu")], 2))
    assert [verdict.error for _, verdict in late][-1] == "not checked: its check on example did not finish within 2 s"
    monkeypatch.setattr(cells_module, "START_SECONDS", 0.001)
    cells = [Cell(STRATEGIES[name], EXAMPLE, "cpu") for name in ("native", "gather")]
    errors = [verdict.error for _, verdict in checked_in_isolation(cells, 60)]
    assert errors == ["the checking process did not start within 0.001 s"] * 2


@pytest.mark.slow
def test_a_cell_whose_module_is_not_the_one_timed_fails_alone(monkeypatch):
    """The checking process checks each cell's own modules against the files the benchmarks import: a strategy
    whose module it imports from elsewhere fails, and the others are checked."""
    from benchmarks import cells as cells_module

    module_file = cells_module._module_file
    monkeypatch.setattr(
        cells_module, "_module_file", lambda name: "/elsewhere.py" if name == "impls.gather" else module_file(name)
    )
    verdicts = gate([Cell(STRATEGIES[name], EXAMPLE, "cpu") for name in ("native", "gather")], cache=None)
    assert "imported impls.gather from" in verdicts[("gather", "example", "cpu")].problem(backward=False)
    assert verdicts[("native", "example", "cpu")].problem(backward=True) is None


def test_the_deadline_is_the_per_cell_timeout_of_the_profile_the_cells_are_sized_for():
    from benchmarks.cells import check_deadline
    from benchmarks.profiles import FULL

    for profile in (QUICK, FULL):
        cells = [Cell.from_names("native", config.name, "cpu", profile) for config in profile.configs()]
        assert check_deadline(cells) == profile.timeout, profile.name


def test_a_plugin_with_the_right_output_and_no_autograd_graph_keeps_its_forward_verdict(outside_path):
    """No gradient is a gradient problem, as a wrong one is: the forward figures stand."""
    found, problems = load("outside_misbehaving:no_graph")
    assert problems == {}
    verdict = gate([Cell(found["no_graph"], EXAMPLE, "cpu")], cache=None)[("no_graph", "example", "cpu")]
    assert verdict.error is None and verdict.problem(backward=False) is None
    assert "its output has no autograd graph" in verdict.problem(backward=True)


def test_an_output_whose_graph_does_not_reach_the_input_is_a_gradient_problem(outside_path):
    import outside_unfold

    def elsewhere(input, kernel_size, dilation=1, padding=0, stride=1):  # a graph from another leaf
        return outside_unfold.outside_unfold(input.detach().requires_grad_(), kernel_size, dilation, padding, stride)

    x = EXAMPLE.make_input("cpu", seed=0)
    forward, gradient = problems(elsewhere, x, EXAMPLE.unfold_kwargs())
    assert forward is None and "does not reach the input" in gradient


@pytest.mark.slow
def test_test_strategy_names_why_a_plugin_of_that_name_was_set_aside():
    """``make test-strategy NAME=...`` for a plugin that could not be loaded says why, not only that the name is
    not a tested strategy."""
    env = {**os.environ, VARIABLE: "outside_bad:not_callable", "PYTHONPATH": str(OUTSIDE)}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    command += ["--strategy", "not_callable", "tests/test_strategy_selection.py"]
    ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode != 0
    assert "the plugin was set aside" in ran.stderr and "neither a Strategy nor a callable" in ran.stderr, ran.stderr
