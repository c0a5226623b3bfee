"""Whether this machine has the C++ compiler that a compiling strategy needs, checked without compiling.

``cpp`` builds its kernel with it (``torch.utils.cpp_extension``), and Inductor builds its CPU kernels with it
(``compiled``, ``compiled_reuse``); both read the compiler from ``CXX`` (default ``c++``). A strategy that lacks
it declares so (``Strategy.missing_requirement``): it refuses every input saying what to install, and the tests
and benchmarks skip it with that reason instead of failing.
"""

from __future__ import annotations

import os
import shutil


def missing_compiler(purpose: str) -> str | None:
    """What is missing to compile ``purpose`` (e.g. "its kernel"), or None when ``$CXX`` (or ``c++``) is found."""
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"a C++ compiler ({compiler!r} not found; set CXX or install g++) to build {purpose}"
    return None
