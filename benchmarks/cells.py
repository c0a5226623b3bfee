"""The harness's cells, independent of asv: one strategy on one config on one device, at one profile's size.

asv (``benchmarks/unfold.py``, ``benchmarks/bounds.py``), pytest-benchmark (``benchmarks/test_matrix.py``)
and the memory_profiler script all take their cells from here, so the matrix is the registry x the config
table x ``DEVICES`` everywhere.

A cell is either runnable or skipped with a stated reason (a CUDA cell without a GPU, which ``unfold-bench
bench`` does not plan there; a strategy that does not support the config's spatial dims). A runnable cell's
figures only count if the correctness gate passed (``gate``): the output bit-exact, new memory unless the
strategy declares it reuses its output, and the input gradient within the summation bound (``impls.parity``),
checked once per profile on the very inputs the benchmarks use, outside any timed region.

Timed calls keep their results alive (``Workload.result``) until ``Workload.reset`` runs in the next setup,
so freeing an output is not timed, while allocating it (and, on CPU, faulting its pages in) is:
every strategy that returns a fresh tensor pays that, and ``bounds`` measures what it costs on its own.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from benchmarks.allocator import pin_mmap_threshold_now
from benchmarks.configs import LayerConfig, configs
from benchmarks.memory import net_peak_bytes
from benchmarks.profiles import PROFILES, Profile
from benchmarks.vocabulary import DEVICES
from impls import STRATEGIES, Strategy
from impls.cpu_isa import probed_under
from impls.parity import Reference, problems, random_grad_output
from impls.plugins import PICKLABLE
from impls.toolchain import compiler_identity, cpu_flags, inductor_compiler, inductor_settings

INPUT_SEED = 0  # the grad_output seed is impls.parity.random_grad_output's default
GATE_CACHE_VARIABLE = "UNFOLD_BENCH_GATE_CACHE"  # a directory: verdicts kept there are reused (see gate)

CellKey = tuple[str, str, str]  # (strategy, config, device)
# Seconds a checking process may take to start (import torch and the strategies' modules, unpickle the cells): a few
# seconds are usual, many times that on a loaded machine
START_SECONDS = 120.0
EXIT_SECONDS = 10.0  # a checking process that sent every verdict and has not exited by then is killed
_STARTED = "started"  # what a checking process sends once it has started


def device_unavailable(device: str) -> str | None:
    """Why ``device`` cannot be used on this machine, or None."""
    if device not in DEVICES:
        raise ValueError(f"device={device!r} must be one of {DEVICES}")
    if device == "cuda" and not torch.cuda.is_available():
        return "no CUDA device on this machine"
    return None


def use_exact_float32(device: str) -> None:
    """No TF32 on CUDA: a convolution-based strategy would otherwise not compute the exact unfold."""
    if device == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def profile_config(profile: Profile, config_name: str) -> LayerConfig:
    """``config_name`` at ``profile``'s size (any config of the table: results of a profile that covered more
    configs than it does now are read at the same size)."""
    for config in configs(batch_size=profile.batch_cap):
        if config.name == config_name:
            return config
    raise KeyError(f"unknown config {config_name!r}")


@dataclass(frozen=True)
class Cell:
    strategy: Strategy
    config: LayerConfig
    device: str

    @classmethod
    def from_names(
        cls, strategy: str, config: str, device: str, profile: Profile, strategies: Mapping[str, Strategy] = STRATEGIES
    ) -> Cell:
        if strategy not in strategies:
            raise KeyError(f"unknown strategy {strategy!r}; known strategies: {', '.join(strategies)}")
        return cls(strategies[strategy], profile_config(profile, config), device)

    @property
    def key(self) -> CellKey:
        return (self.strategy.name, self.config.name, self.device)

    def skip_reason(self) -> str | None:
        """Why this cell does not run here (stated in asv's "n/a"), or None."""
        return device_unavailable(self.device) or self.strategy.unsupported_reason(
            self.config.spatial_dims, self.device, self.config.torch_dtype
        )


def skip_reason_here(strategy: str, config: str, device: str, profile: Profile) -> str | None:
    """Why a cell named by its strategy, config and device does not run on this machine, or None (also for a name
    this checkout no longer has): what the summary says of asv's "n/a"."""
    try:
        return Cell.from_names(strategy, config, device, profile).skip_reason()
    except KeyError:
        return None


@dataclass(frozen=True)
class Verdict:
    """The correctness gate's finding for one cell; ``None`` fields mean "matches the reference"."""

    forward_problem: str | None = None
    gradient_problem: str | None = None
    error: str | None = None  # the gate itself raised (e.g. out of memory)

    def problem(self, backward: bool) -> str | None:
        if self.error is not None:
            return f"the correctness gate failed: {self.error}"
        if self.forward_problem is not None:
            return f"wrong output: {self.forward_problem}"
        if backward and self.gradient_problem is not None:
            return f"wrong input gradient: {self.gradient_problem}"
        return None


def reference_for(cell: Cell) -> Reference:
    """The reference's answers on ``cell``'s benchmark input (the same for every strategy on its config and device)."""
    return Reference(cell.config.make_input(cell.device, seed=INPUT_SEED), cell.config.unfold_kwargs())


class WrongResultError(AssertionError):
    """A strategy failed the correctness gate: its figures must not count."""


def check_cell(cell: Cell, reference: Reference | None = None) -> Verdict:
    """Run the correctness gate on ``cell``'s benchmark inputs; exceptions become the verdict's ``error``.
    ``reference``: the reference's answers on those inputs (``reference_for``), shared by the cells of a config.

    Besides values and gradients, the output's memory is checked against what the strategy declares
    (``Strategy.reuses_output``, ``impls.parity.storage_problem``): new memory, not a view of the input, and
    the same buffer again on a second call exactly when the strategy reuses its output."""
    use_exact_float32(cell.device)
    try:
        reference = reference_for(cell) if reference is None else reference
        kwargs = cell.config.unfold_kwargs()
        reuses_output = cell.strategy.reuses_output
        forward_problem, gradient_problem = problems(
            cell.strategy, reference.x, kwargs, reference=reference, reuses_output=reuses_output
        )
        return Verdict(forward_problem, gradient_problem)
    except Exception as error:  # one cell's failure (e.g. out of memory) must not stop the others
        return Verdict(error=f"{type(error).__name__}: {error}")
    finally:
        if cell.device == "cuda":
            torch.cuda.empty_cache()


def _module_file(module_name: str) -> str | None:
    """The resolved file an imported module was loaded from (None for built-in or path-less modules)."""
    path = getattr(sys.modules.get(module_name), "__file__", None)
    return None if path is None else str(Path(path).resolve())


def _import_root(module_name: str) -> str | None:
    """The sys.path entry from which ``module_name`` was imported (None for built-in or path-less modules)."""
    path = _module_file(module_name)
    if path is None:
        return None
    root = Path(path).parent
    for _ in range(module_name.count(".") + (Path(path).name == "__init__.py")):
        root = root.parent
    return str(root)


def _modules_of(cells: list[Cell]) -> list[str]:
    """The modules a checking process imports to check ``cells``: the strategies' (the project's ``impls``
    first) and this one."""
    implementations = [c.strategy.implementation for c in cells]
    called = [getattr(i, "function", i) for i in implementations]  # an outside strategy's own function (impls.plugins)
    strategy_modules = [m.__module__ for m in [*(c.strategy for c in cells), *implementations, *called]]
    return list(dict.fromkeys(["impls", *strategy_modules, __name__]))


@contextmanager
def _import_path_of(module_names: list[str]) -> Iterator[None]:
    """Within the block, sys.path starts with the directories ``module_names`` were imported from, in order.

    A checking process takes sys.path from its parent when it starts. asv imports the suite without putting
    its directory on sys.path, and when it benchmarks a past commit (``make bench-commits``) the project
    (``impls``) comes from that commit's environment while the working tree beside ``benchmarks/`` holds
    another ``impls``: the gate must check the code that is timed, so the project's directory comes first.
    """
    roots = list(dict.fromkeys(root for root in map(_import_root, module_names) if root is not None))
    saved = sys.path[:]
    sys.path[:] = roots + [entry for entry in saved if entry not in roots]
    try:
        yield
    finally:
        sys.path[:] = saved


def _check_in_child(expected_files: dict[str, str | None], pickled_cells: list[bytes], connection: Any) -> None:
    cells: list[Cell | Verdict] = []
    for pickled in pickled_cells:  # one by one: a cell that cannot be unpickled here fails alone
        try:
            cells.append(pickle.loads(pickled))
        except Exception as error:
            why = f"{type(error).__name__}: {error}"
            cells.append(Verdict(error=f"the checking process could not unpickle the cell: {why}"))
    connection.send(_STARTED)  # the cells' deadlines start now, not while torch and the strategies are imported
    elsewhere = {  # checking other code than the benchmarks time would make the gate a lie
        name: f"the checking process imported {name} from {found}, not {expected}"
        for name, expected in expected_files.items()
        if (found := _module_file(name)) != expected
    }
    shared: dict[tuple[str, str], Reference] = {}
    for cell in cells:  # grouped by config (checked_in_isolation): one config's reference answers at a time
        if isinstance(cell, Verdict):
            connection.send(cell)
            continue
        wrong = [elsewhere[name] for name in _modules_of([cell]) if name in elsewhere]  # this cell's code only
        if wrong:
            connection.send(Verdict(error=wrong[0]))
            continue
        key = (cell.config.name, cell.device)
        if key not in shared:
            shared.clear()  # before the next is made: the answers hold an output-sized tensor
            with suppress(Exception):  # e.g. out of memory: check_cell then tries again and says so in the verdict
                shared[key] = reference_for(cell)  # lazy: its answers are computed by the first check, in its try
        connection.send(check_cell(cell, shared.get(key)))  # one verdict per cell as soon as it is known


def _death_verdict(exitcode: int | None) -> Verdict:
    how = (
        f"signal {signal.Signals(-exitcode).name}" if exitcode is not None and exitcode < 0 else f"exit code {exitcode}"
    )
    hint = " (SIGKILL: probably the out-of-memory killer)" if exitcode == -signal.SIGKILL else ""
    return Verdict(error=f"the checking process died: {how}{hint}")


def _unpicklable(cell: Cell) -> str | None:
    """Why ``cell`` cannot be handed to a checking process (its strategy does not pickle), or None."""
    try:
        pickle.dumps(cell)
    except Exception as error:  # PicklingError, AttributeError ("Can't pickle local object"), TypeError, ...
        return f"strategy {cell.strategy.name!r}: {PICKLABLE} ({type(error).__name__}: {error})"
    return None


def _late(deadline: float) -> str:
    """The error of a cell whose check did not finish within ``deadline`` seconds."""
    return f"its check did not finish within {deadline:g} s (the checking process was killed)"


def _check_in_one_child(cells: list[Cell], deadline: float) -> Iterator[Verdict]:
    """Verdicts of ``cells`` (each one picklable), in order, from one checking process; it stops after the
    verdict of a cell whose check killed the process (which is then that cell's death verdict) or took longer than
    ``deadline`` seconds (the process is killed, and that cell's verdict is ``_late``)."""
    # forkserver, not fork: a process that has run a parallel torch op holds an OpenMP thread pool, and a
    # child forked from it hangs in its first parallel op. Nothing is preloaded into the server: Python 3.11's
    # server does not take the parent's sys.path, so it could import another copy of the project.
    context = multiprocessing.get_context("forkserver")
    receiver, sender = context.Pipe(duplex=False)
    modules = _modules_of(cells)
    expected_files = {name: _module_file(name) for name in modules}
    child = context.Process(target=_check_in_child, args=(expected_files, [pickle.dumps(c) for c in cells], sender))
    with _import_path_of(modules):  # the child takes its sys.path from here
        child.start()
    sender.close()
    try:
        for i in range(len(cells) + 1):  # the start, then one verdict per cell
            if not receiver.poll(deadline if i else START_SECONDS):
                child.kill()
                if not i:  # no cell was reached: each gets the reason (a plugin whose import hangs, say)
                    not_started = Verdict(error=f"the checking process did not start within {START_SECONDS:g} s")
                    yield from [not_started] * len(cells)
                    return
                yield Verdict(error=_late(deadline))
                return
            try:
                message = receiver.recv()
            except EOFError:  # the child died before sending this cell's verdict
                child.join()
                yield _death_verdict(child.exitcode)
                return
            if i:
                yield message
    finally:
        receiver.close()
        child.join(EXIT_SECONDS)  # a child held at its exit (a plugin's thread) is not waited for forever
        if child.is_alive():
            child.kill()
            child.join()


def check_deadline(cells: list[Cell]) -> float:
    """Seconds the check of one of ``cells`` may take in a checking process: the ``timeout`` of the profile whose
    sizes their configs have (the shortest where several fit, or none does), which is what asv lets the cell's whole
    benchmark process take. That process makes the checked calls several times over (an untimed warm-up, then
    ``repeat``'s least number of samples), so a check that takes longer is of a cell asv would fail anyway."""
    fitting = []
    for profile in PROFILES.values():
        table = {config.name: config for config in configs(batch_size=profile.batch_cap)}
        if all(table.get(cell.config.name) == cell.config for cell in cells):
            fitting.append(profile)
    return min(profile.timeout for profile in fitting or PROFILES.values())


def checked_in_isolation(cells: list[Cell], deadline: float | None = None) -> Iterator[tuple[Cell, Verdict]]:
    """``check_cell`` for each of ``cells``, CPU cells first and in a child process, so a kill (the kernel's
    out-of-memory killer, a segfault) or a hang fails the gate of the cell being checked only.

    All CPU cells share one checking process (each new process pays about half a second of first-call
    set-up in torch); when one dies, or its check takes longer than ``deadline`` seconds (default
    ``check_deadline``) and it is killed, the cells after it go on in a new one. A strategy whose check ran out of
    time is not checked again on another config: each would wait out the deadline, which, over a profile's configs,
    is more than the whole gate may take (``Profile.gate_timeout``). A cell whose strategy does not pickle (a
    lambda or a closure) cannot be handed to that process: it gets an error verdict saying so, and the others are
    checked. CUDA cells are checked in-process, with no deadline: CUDA's out-of-memory is an exception that
    ``check_cell`` catches, and a CUDA context does not survive into a forked child; a strategy that ran out of
    time on the CPU is not checked there either. The project's C++ kernel, which its ``cpp`` strategies build on
    first use, is built here first (``impls.cpp.build``, what ``make cpp`` does): a build killed at a deadline
    would leave its lock behind, and every later call would wait on it.
    """
    deadline = check_deadline(cells) if deadline is None else deadline
    if any(cell.strategy.builds_extension and cell.strategy.origin is None for cell in cells):  # the project's own
        from impls import cpp

        with suppress(Exception):  # no compiler: each check then fails with the reason, as the call does
            cpp.build()
    isolated = "forkserver" in multiprocessing.get_all_start_methods()
    # grouped by config (a stable sort), so the strategies on one config share the reference's answers
    on_cpu = sorted((cell for cell in cells if isolated and cell.device == "cpu"), key=lambda c: c.config.name)
    in_process = [cell for cell in cells if cell not in on_cpu]
    pending = []
    for cell in on_cpu:
        why = _unpicklable(cell)
        if why is None:
            pending.append(cell)
        else:
            yield cell, Verdict(error=why)
    out_of_time: list[Cell] = []
    while pending:
        checked, late = 0, None
        for cell, verdict in zip(pending, _check_in_one_child(pending, deadline)):
            checked += 1
            late = cell if verdict.error == _late(deadline) else None
            yield cell, verdict
        pending = pending[checked:]
        if late is not None:
            out_of_time.append(late)
            for cell in [c for c in pending if c.strategy.name == late.strategy.name]:
                yield cell, Verdict(error=_not_checked(late, deadline))
            pending = [c for c in pending if c.strategy.name != late.strategy.name]
    late_strategies = {cell.strategy.name: cell for cell in out_of_time}
    for cell in in_process:
        late = late_strategies.get(cell.strategy.name)
        yield cell, check_cell(cell) if late is None else Verdict(error=_not_checked(late, deadline))


def _not_checked(late: Cell, deadline: float) -> str:
    """The error of a cell whose strategy's check ran out of time on ``late``'s config."""
    return f"not checked: its check on {late.config.name} did not finish within {deadline:g} s"


def _verdict_file(cell: Cell, directory: Path) -> Path:
    """Where ``cell``'s verdict is kept: named by a hash of everything it depends on (the checked code,
    ``_checked_code``, and how it is built, ``_builds``; torch's version and the CPU kernels ATen and oneDNN
    dispatch to, ``_cpu_capability`` and ``_onednn_isa``; the cell and its config's size), so a change to any of
    them misses."""
    code = _checked_code(cell)
    identity = [torch.__version__, _cpu_capability(), _onednn_isa(), _builds(cell), cell.key, asdict(cell.config)]
    digest = hashlib.sha256(json.dumps(identity, default=str).encode())
    for key in sorted(code):
        digest.update(key.encode() + b"\0" + code[key])
    return directory / f"{'-'.join(cell.key)}-{digest.hexdigest()[:20]}.pickle"


def _cpu_capability() -> str:
    """The vector instruction set whose CPU kernels ATen dispatches to (``ATEN_CPU_CAPABILITY`` caps it: default,
    avx2, avx512, ...): the strategies' and the reference's code on the CPU, so a verdict under one is no evidence
    under another. Not the thread count: it splits the same code's work, the forward is checked bit for bit and the
    gradient against a bound that holds for any summation order."""
    return torch.backends.cpu.get_cpu_capability()


def _onednn_isa() -> dict[str, str]:
    """What picks the instruction set whose kernels oneDNN runs (ATen's CPU convolutions, ``onehot``'s among them,
    and half-precision matmuls), besides torch's version: the CPU's instruction-set flags
    (``impls.toolchain.cpu_flags``) and oneDNN's caps in this environment (``ONEDNN_MAX_CPU_ISA``, ...:
    ``impls.cpu_isa.probed_under``).

    Not the ISA itself (``impls.cpu_isa.onednn_isa``): reading it takes a subprocess in every process that was not
    handed it, and what it is read from is cheap and the same in each process of a run. Every cell's key takes
    it: oneDNN's known defects differ by ISA, and a strategy from outside declares nothing of what it runs."""
    return {"cpu": cpu_flags(), **probed_under()}


# The gate's own modules, hashed file by file: the check (this one) and the making of its input
# (LayerConfig.make_input: asdict hashes a config's fields, not its code). The reference and the comparison
# (impls.reference, impls.parity) are hashed with the impls package.
GATE_MODULES = (__name__, LayerConfig.__module__)


def _checked_code(cell: Cell) -> dict[str, bytes]:
    """The code ``cell``'s verdict depends on, by path (``_code_of``): every source file of the top-level package of
    each module the check imports (``impls``, with the reference; a plugin's own), and the files of
    ``GATE_MODULES``."""
    modules = _modules_of([cell])
    one_per_package = {name.split(".")[0]: name for name in modules if name not in GATE_MODULES}  # the same files each
    code: dict[str, bytes] = {}
    for name in [*one_per_package.values(), *GATE_MODULES]:
        code |= _code_of(name)
    return code


def _builds(cell: Cell) -> dict[str, str]:
    """What builds ``cell``'s checked code besides its sources and torch, for a verdict's key: the build key of the
    project's C++ kernel (``impls.cpp.KEY``, which hashes its compiler and compile flags, ``UNFOLD_BENCH_CPP_CFLAGS``
    among them) for a strategy that builds an extension; the C++ compiler Inductor builds CPU kernels with
    (``impls.toolchain.inductor_compiler``, its ``compiler_identity``) for a CPU cell of a strategy that compiles,
    and Inductor's options set in the environment (``impls.toolchain.inductor_settings``) for any of its cells; and
    Triton's version where Triton is installed (``_triton``)."""
    builds = {}
    if cell.strategy.builds_extension:
        from impls import cpp

        builds["impls.cpp"] = cpp.KEY
    if cell.strategy.compiles:
        builds["inductor's settings"] = json.dumps(inductor_settings())
    if cell.strategy.compiles and cell.device == "cpu":  # on CUDA Inductor's kernels are Triton's (below)
        builds["inductor's compiler"] = compiler_identity(inductor_compiler())
    triton = _triton()
    if triton is not None:
        builds["triton"] = triton
    return builds


def _triton() -> str | None:
    """The distributions and versions that provide Triton on this ``sys.path`` (read without importing it), or None
    where it is not importable.

    Triton compiles ``triton_gather``'s kernels and Inductor's on CUDA, and a plain callable from outside declares
    nothing of what it runs, so every verdict's key takes it."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec
        return None
    if spec is None:
        return None
    versions = []
    for name in sorted(set(_packages(tuple(sys.path)).get("triton", []))):
        with suppress(metadata.PackageNotFoundError):
            versions.append(f"{name} {metadata.version(name)}")
    return ", ".join(versions) or f"triton from {spec.origin}"


# What a change to a strategy's code can be in: Python, and a kernel's sources or build (impls/csrc)
SOURCE_SUFFIXES = (".py", ".pyi", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".cu", ".cuh", ".so", ".pyd")


def _code_files(module_name: str) -> list[str]:
    """The source files of ``module_name``'s top-level package: every one of its folders (a plugin's helper modules,
    ``impls/csrc``'s kernel); for a top-level module that is not a package (a module named with ``--strategy``), it,
    the modules beside it, which it may import as helpers, and the helper packages it imports from its folder
    (``_helpers_beside``). For a module of ``GATE_MODULES``, its file alone."""
    path = _module_file(module_name)
    if module_name in GATE_MODULES:
        return [] if path is None else [path]
    top = sys.modules.get(module_name.split(".")[0])
    folders = [Path(p).resolve() for p in getattr(top, "__path__", [])]  # a package's (a namespace one's: several)
    if folders:
        return sorted(_source_files(folders))
    top_file = _module_file(module_name.split(".")[0])
    if top_file is None:
        return []
    directory = Path(top_file).parent
    beside = {str(f.resolve()) for f in directory.glob("*.py")}
    helpers = _helpers_beside(module_name.split(".")[0], directory)
    modules = {str(path) for path in helpers if path.is_file()}
    return sorted(beside | modules | _source_files([path for path in helpers if path.is_dir()]))


def _source_files(folders: list[Path]) -> set[str]:
    """The source files (``SOURCE_SUFFIXES``) in ``folders`` and every folder below them."""
    found = (f for folder in folders for f in folder.rglob("*") if f.suffix in SOURCE_SUFFIXES)
    return {str(f) for f in found if "__pycache__" not in f.parts and f.is_file()}


def _helpers_beside(module_name: str, directory: Path) -> set[Path]:
    """The helpers imported from ``directory`` that the top-level module ``module_name`` reaches, each a package's
    folder or a module's file: a module or package bound in its namespace, or one that defines a name bound there,
    and so on from each such module of ``directory``.

    Only what it reaches, not every module imported from ``directory`` (which may be a home directory, or the
    project's, whose packages one process imports and another does not: the key would differ between them)."""
    seen, reached = set(), []
    pending = [module_name]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        module = sys.modules.get(name)
        if module is None or str(directory) not in _import_roots(name):
            continue
        reached.append(module)
        for value in list(vars(module).values()):
            if isinstance(value, ModuleType):
                pending.append(value.__name__)
                continue
            with suppress(Exception):  # an object whose attributes raise
                owner = getattr(value, "__module__", None)
                if isinstance(owner, str):
                    pending.append(owner)
    helpers = set()
    for module in reached:
        if module.__name__ == module_name:
            continue
        if "." in module.__name__ or hasattr(module, "__path__"):
            helpers.add(directory / module.__name__.split(".")[0])
        else:
            helpers.add(Path(module.__file__).resolve())
    return helpers


def _import_roots(module_name: str) -> set[str]:
    """The ``sys.path`` entries from which ``module_name`` was imported: its file's (``_import_root``), or a namespace
    package's, one for each of its folders."""
    root = _import_root(module_name)
    if root is not None:
        return {root}
    roots = set()
    with suppress(Exception):  # a module with an odd __path__
        for folder in getattr(sys.modules.get(module_name), "__path__", None) or []:
            roots.add(str(Path(folder).resolve().parents[module_name.count(".")]))
    return roots


def _code_of(module_name: str) -> dict[str, bytes]:
    """What the code of ``module_name`` is, for a verdict's key: its source files' contents (``_code_files``) by
    path; or, where it was installed from a distribution (not editable), that distribution's ``RECORD``, which holds
    every installed file's hash (torch's files are too many to read for each cell)."""
    record = _installed_record(module_name) if module_name not in GATE_MODULES else None
    if record is not None:
        return {f"distribution RECORD of {module_name.split('.')[0]}": record}
    return {path: Path(path).read_bytes() for path in _code_files(module_name)}


def _installed_record(module_name: str) -> bytes | None:
    """The ``RECORD`` of the installed distribution that lists ``module_name``'s file, or None."""
    path = _module_file(module_name)
    if path is None:
        return None
    for name in _packages(tuple(sys.path)).get(module_name.split(".")[0], []):
        with suppress(Exception):  # a distribution without RECORD or files: the files are read instead
            distribution = metadata.distribution(name)
            root = Path(distribution.locate_file("")).resolve()
            if Path(path).is_relative_to(root) and Path(path).relative_to(root).as_posix() in _listed(
                name, distribution.version, str(root)
            ):
                record = distribution.read_text("RECORD")
                if record:
                    return record.encode()
    return None


@functools.lru_cache(maxsize=4)
def _packages(path: tuple[str, ...]) -> Mapping[str, list[str]]:
    """``importlib.metadata.packages_distributions()`` for this ``sys.path`` (once: it reads every distribution)."""
    return metadata.packages_distributions()


@functools.lru_cache(maxsize=64)
def _listed(name: str, version: str, root: str) -> frozenset[str]:
    """The files distribution ``name`` ``version`` installed under ``root``, relative to it (once: torch's are
    thousands)."""
    return frozenset(str(f) for f in metadata.distribution(name).files or ())


def cached_verdict(cell: Cell, cache: str | Path | None = None) -> Verdict | None:
    """``cell``'s verdict kept by ``gate`` in ``cache`` (default: ``$UNFOLD_BENCH_GATE_CACHE``) for the same code and
    cell, or None (none kept, or no cache)."""
    cache = cache or os.environ.get(GATE_CACHE_VARIABLE)
    if not cache or cell.skip_reason() is not None:
        return None
    path = _verdict_file(cell, Path(cache))
    return pickle.loads(path.read_bytes()) if path.exists() else None


def gate(
    cells: list[Cell],
    progress: Callable[[str], None] | None = None,
    cache: str | Path | None = None,
    deadline: float | None = None,
) -> dict[CellKey, Verdict]:
    """The correctness verdict of every runnable cell in ``cells`` (skipped cells are left out); a cell's check in a
    checking process may take ``deadline`` seconds (default ``check_deadline``: ``checked_in_isolation``).

    With ``cache`` (a directory; default: ``$UNFOLD_BENCH_GATE_CACHE`` if set), a verdict found there for the
    same code and cell is reused and a new one is kept, so a run split into several asv runs, or resumed
    after a kill, checks each cell once.
    """
    cache = cache or os.environ.get(GATE_CACHE_VARIABLE)
    directory = Path(cache) if cache else None
    runnable = [cell for cell in cells if cell.skip_reason() is None]
    verdicts, files = {}, {}
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        for cell in runnable:
            files[cell.key] = _verdict_file(cell, directory)
            if files[cell.key].exists():
                verdicts[cell.key] = pickle.loads(files[cell.key].read_bytes())
    unchecked = [cell for cell in runnable if cell.key not in verdicts]
    for cell, verdict in checked_in_isolation(unchecked, deadline):
        verdicts[cell.key] = verdict
        if cell.key in files and verdict.error is None:  # an error (out of memory, a kill) may not recur
            files[cell.key].write_bytes(pickle.dumps(verdict))
        if progress is not None:
            progress(f"gate {'/'.join(cell.key)}: {verdict.problem(backward=True) or 'matches the reference'}")
    return {cell.key: verdicts[cell.key] for cell in runnable}


def warm_compiler() -> None:
    """Compile and run a one-element unfold, so that this process has made every lazy import and one-off set-up
    of Dynamo and Inductor (the CPU's vector ISA, probed by building test programs in subprocesses; the hashes
    of torch's and Triton's sources; code templates) and holds no thread more than before.

    A benchmark process forked from one that called this loads its graphs from Inductor's on-disk cache in a
    fraction of the time. The kernel is serial (one element), so no OpenMP thread pool exists to be forked: a
    child forked from a process that ran a parallel op would hang in its first one. Worker pools are off in
    this process (``compile_threads = 1``); ``Workload.compile`` does the same in the children.
    """
    import torch._inductor.config
    import torch.nn.functional as F

    torch._inductor.config.compile_threads = 1
    one = torch.compile(lambda x: F.pad(x, [1, 1]).unfold(-1, 3, 1).reshape(1, -1).contiguous(), fullgraph=True)
    one(torch.ones(1, 1, 1))


def all_cells(profile: Profile, strategies: Mapping[str, Strategy] = STRATEGIES) -> list[Cell]:
    """The full matrix: every strategy x every config x every device, at ``profile``'s size."""
    return [Cell(s, c, d) for c in profile.configs() for s in strategies.values() for d in DEVICES]


class Workload:
    """The inputs of one cell, made once per process with fixed seeds, and the calls the benchmarks time."""

    def __init__(self, cell: Cell, backward: bool) -> None:
        self.cell = cell
        self.kwargs = cell.config.unfold_kwargs()
        self.input = cell.config.make_input(cell.device, seed=INPUT_SEED)
        self.leaf = self.input.detach().requires_grad_(True)
        self.grad_output = random_grad_output(cell.config.geometry, self.input) if backward else None
        self.result: Any = None
        self.compiled = False
        synchronize(cell.device)

    @classmethod
    def on(cls, cell: Cell, input: torch.Tensor, grad_output: torch.Tensor) -> Workload:
        """A workload of ``cell`` calling on the given input and ``grad_output`` (already where they should be)."""
        workload = cls.__new__(cls)
        workload.cell, workload.kwargs = cell, cell.config.unfold_kwargs()
        workload.input, workload.grad_output = input, grad_output
        workload.leaf = input.detach().requires_grad_(True)
        workload.result, workload.compiled = None, False
        return workload

    def compile(self) -> None:
        """Make the calls that compile (a strategy that compiles: once per process, untimed)."""
        if self.cell.strategy.compiles and not self.compiled:
            import torch._inductor.config

            torch._inductor.config.compile_threads = 1  # no worker pool: the graphs come from the on-disk cache
            self.forward()
            self.forward_backward()
            self.reset()
        self.compiled = True

    def reset(self) -> None:
        """Drop the previous call's results (outside the timed region) so every call starts alike."""
        self.result = None
        self.leaf.grad = None
        synchronize(self.cell.device)

    def forward(self) -> None:
        self.result = self.cell.strategy(self.input, **self.kwargs)
        synchronize(self.cell.device)

    def forward_backward(self) -> None:
        out = self.cell.strategy(self.leaf, **self.kwargs)
        out.backward(self.grad_output)
        self.result = out
        synchronize(self.cell.device)

    def forward_backward_fresh_grad(self) -> None:
        """Forward-backward with ``grad_output`` materialised inside the call, as a next layer would produce it.

        The memory benchmarks use this so that the measured net peak includes ``grad_output``, like the
        analytic minimum it is read against.
        """
        out = self.cell.strategy(self.leaf, **self.kwargs)
        grad_output = self.grad_output.clone()
        out.backward(grad_output)
        self.result = (out, grad_output)
        synchronize(self.cell.device)


def charged_net_peak(workload: Workload, backward: bool, warm_up: bool = True) -> int:
    """Net peak bytes of one call (forward, or forward-backward with ``grad_output`` made inside the call), after
    one untimed warm-up call (lazy initialisation, first-touched library pages; not needed when the same call
    already ran with the threshold pinned), with glibc's mmap threshold pinned from here on
    (``benchmarks.allocator``); a strategy that keeps its output buffer between calls
    (``Strategy.reuses_output``) is charged that buffer on top, since it was allocated before the call."""
    pin_mmap_threshold_now()
    call = workload.forward_backward_fresh_grad if backward else workload.forward
    if warm_up:
        call()
    workload.reset()
    peak = net_peak_bytes(call, workload.cell.device)
    workload.reset()
    strategy, config = workload.cell.strategy, workload.cell.config
    if strategy.reuses_output:
        peak += config.geometry.output_numel * config.torch_dtype.itemsize
    return peak
