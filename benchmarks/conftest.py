"""pytest-benchmark's matrix, generated from the same registry, config table and devices as the asv suite.

``make bench-pytest`` (``pytest benchmarks/ --benchmark-only`` started through ``benchmarks.allocator``, so that
it times in a regime) runs every cell of the profile named by ``UNFOLD_BENCH_PROFILE`` (default ``quick``). No
pytest import at module level: asv imports every module of ``benchmarks/`` during discovery, also in per-commit
environments that have no pytest.
"""

from __future__ import annotations

import itertools
import os

from benchmarks.profiles import DEFAULT_PROFILE, get_profile
from benchmarks.vocabulary import DEVICES
from impls import STRATEGIES

PROFILE_VARIABLE = "UNFOLD_BENCH_PROFILE"


def pytest_configure(config) -> None:  # config: pytest.Config; a bad profile is a usage error, before collection
    name = os.environ.get(PROFILE_VARIABLE, DEFAULT_PROFILE)
    try:
        get_profile(name)
    except KeyError as error:
        import pytest

        raise pytest.UsageError(f"{PROFILE_VARIABLE}={name}: {error.args[0]}") from None


def pytest_generate_tests(metafunc) -> None:  # metafunc: pytest.Metafunc (pytest is not imported here)
    if "cell_names" in metafunc.fixturenames:
        profile = get_profile(os.environ.get(PROFILE_VARIABLE, DEFAULT_PROFILE))
        names = list(itertools.product(STRATEGIES, [c.name for c in profile.configs()], DEVICES))
        metafunc.parametrize("cell_names", names, ids=["-".join(n) for n in names])
        metafunc.parametrize("profile", [profile], ids=[profile.name])
