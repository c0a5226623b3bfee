"""``cpp``: a hand-written CPU kernel (a C++ extension, ``impls/csrc/unfold_cpu.cpp``) for the unfold and its adjoint.

Built with ``torch.utils.cpp_extension.load`` the first time the strategy is called, never on import; without a
C++ compiler or ninja the strategy refuses every input (``Strategy.missing_requirement``).

Forward: OpenMP over the ``N C`` planes; each plane's ``K L`` outputs are written row by row as bit copies (every
dtype exact), from the unpadded input with zeros where a window reads padding.

Backward: the adjoint (fold, col2im) as a gather over input rows: each input entry sums the ``grad_output``
entries of the windows that read it, in float accumulators for float16 and bfloat16, rounded once at the end
(within ``impls.parity``'s bound). No atomics, no index tensor, nothing output-sized.

The kernels are PyTorch operators with fake implementations, so the adjoint pair traces inside ``torch.compile``.

Details: docs/internals.md#implscpppy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

import torch

from impls import huge_pages
from impls.adjoint_pair import adjoint_pair
from impls.geometry import Geometry
from impls.output_reuse import check_out
from impls.strategy import Strategy
from impls.toolchain import compiler_identity, cpu_flags, extension_compiler, missing_compiler

SOURCE = Path(__file__).parent / "csrc" / "unfold_cpu.cpp"
# UNFOLD_BENCH_CPP_CFLAGS replaces them (part of the build's key), e.g. "-O3 -march=x86-64-v3" to run the
# portable loops on an AVX-512 machine.
CFLAGS = tuple((os.environ.get("UNFOLD_BENCH_CPP_CFLAGS") or "-O3 -march=native").split())
# at::parallel_for is a header template whose OpenMP region exists only where the extension itself is compiled with
# OpenMP: without this flag it runs every plane on one thread. The runtime it links (libgomp.so.1) is the one torch
# has already loaded (torch/lib bundles it under that name), so there is one thread pool, torch's.
OPENMP_FLAGS = ("-fopenmp",) if torch.backends.openmp.is_available() else ()


def _build_key() -> str:
    """What the built kernel depends on: its source, the compiler (``compiler_identity``) and its flags, torch, and
    the CPU (its instruction-set flags: a ``-march=native`` build is never loaded on another CPU)."""
    digest = hashlib.sha256()
    for part in (
        SOURCE.read_bytes(),
        compiler_identity(extension_compiler()).encode(),
        " ".join(CFLAGS + OPENMP_FLAGS).encode(),
        f"{huge_pages.RESULT_BYTES} {huge_pages.HUGE_PAGE_BYTES}".encode(),
        torch.__version__.encode(),
        cpu_flags().encode(),
    ):
        digest.update(part)
        digest.update(b"\0")
    return digest.hexdigest()[:12]


KEY = _build_key()
NAMESPACE = f"unfold_bench_cpp_{KEY}"


def build_directory() -> Path:
    root = os.environ.get("UNFOLD_BENCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "unfold-bench" / "extensions"
    return Path(root) / NAMESPACE


def _ninja_on_path() -> bool:
    """Whether ``ninja`` (which ``torch.utils.cpp_extension`` runs by name) is on PATH; the PyPI package's binary,
    installed in a venv that is not activated, is put there."""
    if shutil.which("ninja") is not None:
        return True
    try:
        import ninja  # the PyPI package: its binary lives in the venv's bin/, off PATH unless activated
    except ImportError:
        return False
    os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])
    return shutil.which("ninja") is not None


def _missing_requirement() -> str | None:
    """What this machine lacks to build the kernel (checked cheaply, without building), or None."""
    missing = missing_compiler("its kernel")
    if missing is not None:
        return missing
    if not _ninja_on_path():
        return "ninja (pip install ninja) to build its kernel"
    return None


MISSING_REQUIREMENT = _missing_requirement()
_lock = threading.Lock()
_ops = None


def ops():
    """The built operators (``torch.ops.<NAMESPACE>``), built or loaded from the cache on first use."""
    global _ops
    if _ops is not None:
        return _ops
    with _lock:
        if _ops is None:
            if MISSING_REQUIREMENT is not None:
                raise RuntimeError(f"the cpp strategy needs {MISSING_REQUIREMENT}")
            from torch.utils.cpp_extension import load

            directory = build_directory()
            directory.mkdir(parents=True, exist_ok=True)
            built = directory / f"{NAMESPACE}.so"
            if built.exists() and not (directory / "lock").exists():
                # The key names the source's bytes, the flags, torch and the CPU, not the source's path: a copy of
                # the same source elsewhere (the gate's worktrees) loads this build instead of having ninja rebuild
                # it for the new path.
                torch.ops.load_library(str(built))
                _register_fakes()
                _ops = getattr(torch.ops, NAMESPACE)
                return _ops
            load(
                name=NAMESPACE,
                sources=[str(SOURCE)],
                extra_cflags=[
                    *CFLAGS,
                    *OPENMP_FLAGS,
                    f"-DUNFOLD_NAMESPACE={NAMESPACE}",
                    f"-DUNFOLD_HUGE_PAGE_RESULT_BYTES={huge_pages.RESULT_BYTES}",
                    f"-DUNFOLD_HUGE_PAGE_BYTES={huge_pages.HUGE_PAGE_BYTES}",
                ],
                extra_ldflags=list(OPENMP_FLAGS),
                build_directory=str(directory),
                is_python_module=False,
                verbose=bool(os.environ.get("UNFOLD_BENCH_VERBOSE_BUILD")),
            )
            _register_fakes()
            _ops = getattr(torch.ops, NAMESPACE)
    return _ops


def _output_shape(shape, kernel, dilation, padding, stride) -> list[int]:
    rows, patches = shape[1], 1
    for size, k, d, p, s in zip(shape[2:], kernel, dilation, padding, stride):
        rows *= k
        patches *= (size + 2 * p - d * (k - 1) - 1) // s + 1
    return [shape[0], rows, patches]


def _register_fakes() -> None:
    @torch.library.register_fake(f"{NAMESPACE}::unfold")
    def _(input, kernel_size, dilation, padding, stride, huge_pages):
        return input.new_empty(_output_shape(input.shape, kernel_size, dilation, padding, stride))

    @torch.library.register_fake(f"{NAMESPACE}::unfold_out")
    def _(input, kernel_size, dilation, padding, stride, out):
        return None

    @torch.library.register_fake(f"{NAMESPACE}::fold")
    def _(grad_output, input_shape, kernel_size, dilation, padding, stride, huge_pages):
        return grad_output.new_empty(input_shape)


def _arguments(g: Geometry) -> tuple:
    return (list(g.kernel_size), list(g.dilation), list(g.padding), list(g.stride))


def _pair(advise_huge_pages: bool) -> type[torch.autograd.Function]:
    """The kernels as an adjoint pair, their fresh results advised into huge pages or not."""

    def unfold(input: torch.Tensor, geometry: Geometry, out: torch.Tensor | None) -> torch.Tensor:
        if out is None:
            return ops().unfold(input, *_arguments(geometry), advise_huge_pages)
        ops().unfold_out(input, *_arguments(geometry), out)
        torch.autograd.graph.increment_version(out)  # an operator of an extension leaves the version counter as it is
        return out

    def fold(grad_output: torch.Tensor, geometry: Geometry) -> torch.Tensor:
        return ops().fold(grad_output, list(geometry.input_shape), *_arguments(geometry), advise_huge_pages)

    return adjoint_pair("CppHugePages" if advise_huge_pages else "Cpp", unfold, fold)


_PAIRS = {False: _pair(False), True: _pair(True)}


def unfold_into(
    input: torch.Tensor, geometry: Geometry, out: torch.Tensor | None = None, advise_huge_pages: bool = False
) -> torch.Tensor:
    """The unfold (differentiable), written into ``out`` when given (``impls.output_reuse.check_out``); with
    ``advise_huge_pages`` its fresh results are advised into huge pages (``impls.huge_pages``)."""
    if out is not None:
        check_out(out, input, geometry)
    return _PAIRS[advise_huge_pages].apply(input, geometry, out)


def _cpp_unfold(input: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    return unfold_into(input, geometry)


unfold = Strategy(
    name="cpp",
    description="hand-written C++ kernels: OpenMP over (n, c) planes, vectorised row copies (deinterleaving for "
    "stride 2) forward, a gather of each input row's windows backward",
    spatial_dims=(1, 2, 3),
    devices=("cpu",),
    implementation=_cpp_unfold,
    builds_extension=True,
    missing_requirement=MISSING_REQUIREMENT,
)


def build() -> float:
    """Build the kernel now (or load it from the cache); the seconds it took. ``unfold-bench build-cpp`` calls it for
    ``make cpp`` (before ``make test``, ``bench`` and ``advise``), so that no test or benchmark pays the build."""
    import time

    start = time.perf_counter()
    ops()
    return time.perf_counter() - start
