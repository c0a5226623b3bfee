"""Devices, CUDA marking, numerics settings and the order of the tests, shared by the tests."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import settings

from impls import STRATEGIES, Strategy

# Locally hypothesis draws new examples each run (that is how the known defects in impls/onehot.py were
# found); CI (CI=true) replays a fixed sequence so a submission's verdict does not depend on luck.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

CUDA_AVAILABLE = torch.cuda.is_available()

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.cuda, pytest.mark.skipif(not CUDA_AVAILABLE, reason="no CUDA device on this machine")],
)
DEVICES = ["cpu", CUDA]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def strict_float32():
    """Parity tests compare exactly, so they run with TF32 off; ``test_tf32`` turns it on explicitly."""
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, split the cores between the workers (torch's threads, and the ``OMP_NUM_THREADS`` of the
    processes tests start), unless ``OMP_NUM_THREADS`` is set: more busy threads than cores make OpenMP's threads
    wait for each other."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)


def _reuses_compiled_kernels(item: pytest.Item) -> bool:
    """Whether ``item`` runs a compiling strategy that reuses its output: its backward is its base strategy's
    (``compiled_reuse``'s is ``compiled``'s), so it finds those kernels in Inductor's cache once the base's twin
    test has compiled them, but compiles them again when both run at once on the two workers."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        strategy = STRATEGIES.get(value) if isinstance(value, str) else value
        if isinstance(strategy, Strategy) and strategy.compiles and strategy.reuses_output:
            return True
    return False


def _start_rank(item: pytest.Item) -> int:
    """0 for a ``slow(first=True)`` test, 1 for another ``slow`` one, 2 for a slow one that reuses the compiled
    kernels of another (``_reuses_compiled_kernels``), 3 for the rest."""
    marker = item.get_closest_marker("slow")
    if marker is None:
        return 3
    if marker.kwargs.get("first"):
        return 0
    return 2 if _reuses_compiled_kernels(item) else 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the slow tests first, the longest of them before the others (stable otherwise): with two workers, a
    long test that started last would leave one worker idle until it ends. A slow test that can reuse another's
    compiled kernels starts after the other slow ones."""
    items.sort(key=_start_rank)
