"""The C++ compilers the compiling strategies run and the CPU they build for, read without compiling.

``cpp`` builds its kernel with ``torch.utils.cpp_extension``, which runs ``CXX`` (default ``c++``,
``extension_compiler``); Inductor builds its CPU kernels (``compiled``, ``compiled_reuse``) with the first compiler
of ``torch._inductor.config.cpp.cxx`` that it can run (``CXX`` as it was when that config was imported, default
``g++``; ``inductor_compiler`` takes the first found on PATH). A strategy that lacks its compiler declares so
(``Strategy.missing_requirement``): it refuses every input saying what to install, and the tests and benchmarks skip
it with that reason instead of failing. What a build made depends on the compiler's binary (``compiler_identity``)
and, built for this CPU (``-march=native``), on the CPU's instruction-set flags (``cpu_flags``): the kernel's build
key (``impls.cpp.KEY``) takes both, and the gate's key of a compiling strategy's verdict takes Inductor's compiler
and its options set in the environment (``inductor_settings``).
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path


def extension_compiler() -> str:
    """The compiler ``torch.utils.cpp_extension`` runs: ``$CXX``, else ``c++`` (its ``get_cxx_compiler``)."""
    return os.environ.get("CXX", "c++")


def inductor_default_compiler() -> str:
    """The compiler Inductor's configuration names by default (``torch._inductor.config.cpp.cxx``'s last entry):
    ``$CXX``, else ``g++`` (``clang++`` on macOS), read without importing Inductor."""
    return os.environ.get("CXX", "clang++" if sys.platform == "darwin" else "g++")


def inductor_compiler() -> str:
    """The compiler Inductor's CPU backend runs (``cpp_builder.get_cpp_compiler``): the first name in
    ``torch._inductor.config.cpp.cxx`` found on PATH, else the first name there. Its ``None`` entry (a gcc that
    Inductor downloads from conda, only with ``TORCH_INDUCTOR_INSTALL_GXX``) is passed over. Importing Inductor's
    config imports Dynamo: seconds, once per process."""
    import torch._inductor.config as inductor

    search = inductor.cpp.cxx if isinstance(inductor.cpp.cxx, (list, tuple)) else (inductor.cpp.cxx,)
    names = [name for name in search if name is not None]
    return next((name for name in names if shutil.which(name)), names[0] if names else "")


INDUCTOR_PREFIXES = ("TORCHINDUCTOR_", "TORCH_INDUCTOR_")  # the environment variables Inductor's config reads
# ... of which these only say where Inductor keeps what it built, or with how many workers it builds: not what.
# Torch sets TORCHINDUCTOR_CACHE_DIR itself on its first compile, so a key that took it would change within a process.
INDUCTOR_BOOKKEEPING = ("CACHE", "COMPILE_THREADS")
# where compiled code is kept between processes: Inductor's kernels, Triton's (Inductor's GPU kernels and the triton
# strategies'), cpp's extension (impls.cpp); a folder of one's own in each compiles from scratch
COMPILE_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "UNFOLD_BENCH_EXTENSIONS_DIR")


def inductor_settings(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Inductor's options set in the environment (``TORCHINDUCTOR_CPP_MARCH``, ``TORCHINDUCTOR_MAX_AUTOTUNE``,
    ``TORCH_INDUCTOR_INSTALL_GXX``, ...), which its config reads when imported and which change the kernels it
    generates or the compiler it builds them with; those that name only its caches or its number of compile workers
    are left out."""
    return {
        name: value
        for name, value in sorted(environ.items())
        if name.startswith(INDUCTOR_PREFIXES) and not any(word in name for word in INDUCTOR_BOOKKEEPING)
    }


def compiler_identity(name: str) -> str:
    """The compiler ``name`` (as a build runs it) found on PATH and resolved through its links, with its binary's
    size and modification time, so that another compiler, another version installed beside it, or one upgraded in
    place has another identity; ``name`` alone where it is not found (its strategy then refuses,
    ``missing_compiler``)."""
    found = shutil.which(name)
    if not found:
        return name
    path = Path(found).resolve()
    try:
        binary = path.stat()
    except OSError:  # removed since it was found
        return str(path)
    return f"{path} {binary.st_size} {binary.st_mtime_ns}"


@functools.cache
def cpu_flags() -> str:
    """The CPU's instruction-set flags (Linux's ``/proc/cpuinfo``; elsewhere the processor's name), sorted."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return platform.processor() or platform.machine()


def missing_compiler(purpose: str, compiler: str | None = None) -> str | None:
    """What is missing to compile ``purpose`` (e.g. "its kernel"), or None when ``compiler`` (default:
    ``extension_compiler``) is found."""
    compiler = extension_compiler() if compiler is None else compiler
    if shutil.which(compiler) is None:
        return f"a C++ compiler ({compiler!r} not found; set CXX or install g++) to build {purpose}"
    return None
