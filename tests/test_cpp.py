"""The cpp strategy's build: its parallel regions run on torch's OpenMP threads, from torch's one OpenMP runtime;
and the kernel's paths chosen by geometry and dtype, each on a problem that takes it and one beside it that must not
(its parity on the configs and random problems is checked with every other strategy's, in the parity tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from impls import cpp, get_strategy
from impls.geometry import Geometry
from impls.reference import reference_unfold
from impls.toolchain import compiler_identity, extension_compiler
from tests.helpers import assert_matches_reference

pytestmark = pytest.mark.skipif(cpp.MISSING_REQUIREMENT is not None, reason=f"cpp needs {cpp.MISSING_REQUIREMENT}")


@pytest.mark.skipif(not torch.backends.openmp.is_available(), reason="this torch build has no OpenMP")
def test_the_kernels_run_on_torchs_threads():
    # at::parallel_for is a header template: compiled without OpenMP it runs every plane on one thread
    saved = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            assert cpp.ops().parallel_threads() == threads
    finally:
        torch.set_num_threads(saved)


@pytest.mark.skipif(not torch.backends.openmp.is_available(), reason="this torch build has no OpenMP")
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_one_openmp_runtime_is_loaded():
    # the extension links libgomp.so.1 by name, which is torch's own copy once torch is imported: one thread pool
    cpp.ops()
    with open("/proc/self/maps") as maps:
        runtimes = {line.split()[-1] for line in maps if "gomp" in line.rsplit("/", 1)[-1]}
    assert len(runtimes) <= 1, runtimes


# (shape, kwargs): 2-d planes that fit the padded-plane path (AVX-512, rows of one register; the input rows copied in
# as many registers as they need), and 3-d inputs of depth 1 beside them, which take it only when they have one window
# along the depth: padded along it they have more (the path once wrote the first and left the others unwritten).
PLANE_PATH_PROBLEMS = [
    ((2, 3, 6, 6), {"kernel_size": 3, "padding": 1}),
    ((2, 3, 7, 9), {"kernel_size": 3, "padding": 1, "stride": 2}),
    ((1, 2, 1, 6, 6), {"kernel_size": (1, 3, 3), "padding": (0, 1, 1)}),
    ((1, 1, 1, 1, 1), {"kernel_size": 1, "padding": (1, 0, 0)}),
    ((1, 2, 1, 6, 6), {"kernel_size": (1, 3, 3), "padding": 1}),
    ((2, 2, 1, 5, 7), {"kernel_size": (1, 3, 3), "padding": (2, 1, 1), "stride": (1, 1, 2)}),
    ((2, 3, 7, 25), {"kernel_size": 3, "padding": 1, "stride": 2}),  # input rows over one float32 register
    ((1, 2, 5, 40), {"kernel_size": 3, "padding": 1, "stride": 2}),  # and over one float16 register
]


@pytest.mark.parametrize("name", ["cpp", "cpp_huge_pages"])
@pytest.mark.parametrize("shape,kwargs", PLANE_PATH_PROBLEMS, ids=[f"{s}-{k}" for s, k in PLANE_PATH_PROBLEMS])
def test_small_planes_and_depth_one_volumes_match_the_reference(name, shape, kwargs):
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
        assert_matches_reference(get_strategy(name), x, kwargs)


# A pointwise problem (kernel 1, stride 1, no padding) copies whole planes, a run of planes that lie one after another
# in memory at once: a contiguous input (one run per thread), every other channel (runs of one), 1-d, 3-d and dilated
# ones; beside them channels_last input, whose planes are not contiguous, and kernel-1 problems that are not pointwise.
def _random(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)), dtype=torch.float64)


POINTWISE_PROBLEMS = {  # the input in float64, made again per dtype so that the layout is the one named
    "contiguous": (lambda: _random(3, 4, 5, 7), {"kernel_size": 1}),
    "dilated": (lambda: _random(3, 4, 5, 7), {"kernel_size": 1, "dilation": 3}),
    "every other channel": (lambda: _random(3, 8, 5, 7)[:, ::2], {"kernel_size": 1}),
    "1-d": (lambda: _random(2, 3, 9), {"kernel_size": 1}),
    "3-d": (lambda: _random(2, 3, 2, 3, 4), {"kernel_size": 1}),
    "channels_last": (lambda: _random(3, 4, 5, 7).contiguous(memory_format=torch.channels_last), {"kernel_size": 1}),
    "padded": (lambda: _random(3, 4, 5, 7), {"kernel_size": 1, "padding": 1}),
    "strided": (lambda: _random(3, 4, 5, 7), {"kernel_size": 1, "stride": 2}),
}


@pytest.mark.parametrize("case", list(POINTWISE_PROBLEMS))
def test_pointwise_problems_copy_planes_of_any_layout(case):
    make, kwargs = POINTWISE_PROBLEMS[case]
    for dtype in (torch.float64, torch.float16):
        x = make()
        half = torch.empty_strided(x.shape, x.stride(), dtype=dtype).copy_(x) if dtype != x.dtype else x
        assert half.stride() == x.stride()
        assert_matches_reference(get_strategy("cpp"), half, kwargs)


# A result whose pages are fresh (here above glibc's largest mmap threshold, 32 MiB, so always mmap'd) is faulted in
# by each thread for its part before the thread writes it; a result in pages already there (a caller's buffer written
# before) is not. Both must hold the exact values, forward and backward, on two threads. (Faulting in first changes
# no value, only the time, which the benchmarks measure: this checks the path's values, not that it is taken.)
def test_results_in_fresh_pages_and_in_a_written_buffer_are_exact():
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        x = _random(18, 64, 32, 32).float()  # output 18 x 576 x 1024 floats: 40.5 MiB
        kwargs = {"kernel_size": 3, "padding": 1}
        assert_matches_reference(get_strategy("cpp"), x, kwargs)
        geometry = Geometry.from_shape(tuple(x.shape), **kwargs)
        out = torch.zeros(geometry.output_shape)
        assert torch.equal(cpp.unfold_into(x, geometry, out=out), reference_unfold(x, **kwargs))
    finally:
        torch.set_num_threads(saved)


def test_pointwise_backward_reads_grad_output_by_its_strides():
    # grad_output's rows every other one of a larger tensor (row stride 2 L, batch stride 2 C L): its planes are
    # contiguous, so the copy path takes them, at their strides; an innermost stride of 2 takes the row loop
    x = _random(3, 4, 5, 7)
    geometry = Geometry.from_shape(tuple(x.shape), kernel_size=1)
    wide = _random(3, 8, 35)
    for grad_output in (wide[:, ::2], torch.empty(3, 4, 70, dtype=torch.float64)[..., ::2].copy_(wide[:, ::2])):
        folded = cpp.ops().fold(grad_output, list(x.shape), *cpp._arguments(geometry), False)
        assert torch.equal(folded, grad_output.reshape(x.shape))


# float16's backward converts rows in vectors of 8 (F16C) with a scalar tail; rows of 5, 8, 13 and 17 elements at
# strides 1 and 2 take the vector loop, the tail, or both, on both of store's paths (direct, and interleaved first).
# grad_output holds multiples of 2**-8 below 8 in magnitude: exact in float16, and so are their float32 sums, which
# need up to 15 significant bits: the gradient must then be the exact sum rounded once to nearest even, bit for bit.
@pytest.mark.parametrize("width", [5, 8, 13, 17])
@pytest.mark.parametrize("stride", [1, 2])
def test_float16_gradient_rows_of_every_length_are_the_exact_sums_rounded_to_nearest(width, stride):
    kwargs = {"kernel_size": 3, "padding": 1, "stride": stride}
    generator = torch.Generator().manual_seed(width)
    x = torch.randn(2, 3, 4, 2 * width, generator=generator).to(torch.float16)
    assert_matches_reference(get_strategy("cpp"), x, kwargs)
    exact = x.double().requires_grad_()
    out = reference_unfold(exact, **kwargs)
    grad_output = torch.randint(-2047, 2048, out.shape, generator=generator).double() / 256
    out.backward(grad_output)
    half = x.clone().requires_grad_()
    get_strategy("cpp")(half, **kwargs).backward(grad_output.half())
    assert torch.equal(half.grad, exact.grad.half())


# At stride 1 along a contiguous innermost dim the backward sums a plane that fits L1 there (window rows of 16 floats
# or more: 20, and 17 in 3-d), or, with AVX-512, a row of window rows shorter than that in registers (9), or of two
# registers where the plane does not fit (30 wide, 200 rows), or copies a pointwise problem's planes; with
# grad_output's innermost stride 2 it runs the row loop. All must add each entry's terms in the same order, so they
# give the same bits.
SUMMING_PATH_PROBLEMS = [
    ((2, 3, 5, 9), {"kernel_size": 3, "padding": 1}),
    ((2, 2, 6, 20), {"kernel_size": 3, "padding": 2, "dilation": 2}),
    ((1, 2, 3, 5, 17), {"kernel_size": 3, "padding": 1}),
    ((1, 2, 200, 30), {"kernel_size": 3, "padding": 1}),
    ((2, 3, 5, 7), {"kernel_size": 1}),  # pointwise: one term per entry, copied
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,kwargs", SUMMING_PATH_PROBLEMS)
def test_every_backward_summing_path_gives_the_row_loops_bits(dtype, shape, kwargs):
    geometry = Geometry.from_shape(shape, **kwargs)
    generator = torch.Generator().manual_seed(1)
    grad_output = torch.randn(geometry.output_shape, generator=generator).to(dtype)
    strided = torch.empty(*geometry.output_shape[:-1], 2 * geometry.output_shape[-1], dtype=dtype)[..., ::2]
    strided.copy_(grad_output)  # the same values, innermost stride 2: the row loop
    arguments = (list(shape), *cpp._arguments(geometry), False)
    fast, row_loop = cpp.ops().fold(grad_output, *arguments), cpp.ops().fold(strided, *arguments)
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    assert torch.equal(fast.view(bits), row_loop.view(bits))


def test_another_compiler_is_another_build(tmp_path, monkeypatch):
    """The kernel's build key (its cache folder, and the key of its kept verdicts) covers the compiler that builds
    it: ``CXX`` naming another compiler gives another key; a link to the same compiler gives the same one."""
    import shutil

    compiler = shutil.which(os.environ.get("CXX", "c++"))
    if compiler is None:
        pytest.skip("no C++ compiler")
    default = cpp._build_key()
    same, other = tmp_path / "same-c++", tmp_path / "other-c++"
    same.symlink_to(Path(compiler).resolve())
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    keys = {}
    for path in (same, other):
        monkeypatch.setenv("CXX", str(path))
        keys[path.name] = cpp._build_key()
    assert keys["same-c++"] == default and keys["other-c++"] != default


def test_a_compiler_upgraded_in_place_is_another_build(tmp_path, monkeypatch):
    """The same compiler path holding another binary (another size, or another modification time) gives another
    build key; the same binary, the same key; a compiler that is not found, its name, without failing."""
    compiler = tmp_path / "c++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    old = cpp._build_key()
    assert cpp._build_key() == old
    compiler.write_text("#!/bin/sh\n# a newer version\n")
    bigger = cpp._build_key()
    stat = compiler.stat()
    os.utime(compiler, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    touched = cpp._build_key()
    assert len({old, bigger, touched}) == 3
    monkeypatch.setenv("CXX", str(tmp_path / "missing-c++"))
    assert compiler_identity(extension_compiler()) == str(tmp_path / "missing-c++")
