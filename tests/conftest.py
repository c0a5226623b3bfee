"""Devices, CUDA marking, numerics settings and the order of the tests, shared by the tests."""

from __future__ import annotations

import os
import sys

import pytest
import torch
from hypothesis import settings

from impls import PLUGIN_PROBLEMS, STRATEGIES, TESTED_STRATEGIES, Strategy
from tests.helpers import OUTSIDE

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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--strategy",
        metavar="NAME",
        help="run only the tests of one strategy: those parametrised with it, its own module (tests/test_NAME.py) "
        "and those whose function names it as a word (gather does not select gather_reuse's)",
    )


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


def strategies_named(text: str) -> set[str]:
    """The strategies that ``text`` (a test function's name) names as whole words between underscores, the longest
    name at each place: ``test_gather_reuse_keeps`` names ``gather_reuse``, not ``gather``."""
    padded, named = f"_{text}_", set()
    for name in sorted(TESTED_STRATEGIES, key=len, reverse=True):
        if f"_{name}_" in padded:
            named.add(name)
            padded = padded.replace(f"_{name}_", "_|_")
    return named


def strategies_of(item: pytest.Item) -> set[str]:
    """The strategies a test is about: its parameters' (a name or a ``Strategy``), its module's (``test_NAME.py``)
    and those its function's name names (``strategies_named``)."""
    named = strategies_named(getattr(item, "originalname", item.name))
    for value in getattr(getattr(item, "callspec", None), "params", {}).values():
        if isinstance(value, Strategy):
            named.add(value.name)
        elif isinstance(value, str) and value in TESTED_STRATEGIES:
            named.add(value)
    module = item.path.stem.removeprefix("test_")
    return named | ({module} if module in TESTED_STRATEGIES else set())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--strategy NAME``, only that strategy's tests (``strategies_of``; an unknown name is refused). Then the
    slow tests first, the longest of them before the others (stable otherwise): with two workers, a long test that
    started last would leave one worker idle until it ends. A slow test that can reuse another's compiled kernels
    starts after the other slow ones."""
    name = config.getoption("--strategy")
    if name is not None:
        if name in PLUGIN_PROBLEMS and name not in TESTED_STRATEGIES:  # named, but set aside: say why
            raise pytest.UsageError(f"--strategy {name!r}: the plugin was set aside: {PLUGIN_PROBLEMS[name]}")
        if name not in TESTED_STRATEGIES:
            raise pytest.UsageError(f"--strategy {name!r}: not a tested strategy ({', '.join(TESTED_STRATEGIES)})")
        kept = [item for item in items if name in strategies_of(item)]
        config.hook.pytest_deselected(items=[item for item in items if name not in strategies_of(item)])
        items[:] = kept
    items.sort(key=_start_rank)


@pytest.fixture
def outside_path(monkeypatch):
    """The outside strategies' folder first on sys.path, and none of its modules imported yet."""
    monkeypatch.syspath_prepend(str(OUTSIDE))
    for name in [n for n in sys.modules if n.startswith("outside_")]:
        monkeypatch.delitem(sys.modules, name)
