"""Every strategy measured on a user's own layers: the measuring half of ``unfold-bench advise``.

A layer is an unfold problem (``benchmarks.configs.LayerConfig``), given directly or collected from a model's
convolutions and ``torch.nn.Unfold`` modules by forward pre-hooks; layers of the same geometry are merged.

Each layer is measured in a process of its own (``measure_layer``, so a crash fails that layer only), started
with glibc's allocator as a user's process has it:

1. **correctness**: each strategy passes the check (``benchmarks.cells.check_cell``, the reference's answers
   computed once for all) or is listed with the reason; a first call compiles, and its time is reported;
2. **memory**, first where it can be (a death in a race keeps it): each strategy's net peak, the threshold pinned;
3. **time**, per timing regime (``benchmarks.allocator``), the warm one first (its thresholds set anew), then the
   fresh-pages one (entered as a process started in it has glibc): forward and forward-backward in a ``race``,
   rounds of one call per strategy with the order reversed every round, each strategy's per-round log-ratio to the
   baseline (``native`` where it runs the layer) a paired sample; its ratio is their Hodges-Lehmann estimate with a
   95% signed-rank interval (``benchmarks.paired_stats``), its time the ratio times the baseline's median.

Run as a module it measures one layer (JSON), printing progress lines and one JSON object per row::

    python -m benchmarks.advise LAYER_JSON [--budget S] [--regimes warm,fresh-pages] [--device cpu]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import torch

from benchmarks.allocator import (
    FRESH_PAGES,
    REGIMES,
    WARM,
    apply_regime_now,
    enter_fresh_pages_now,
    regime_environment,
    sets_warm_thresholds,
)
from benchmarks.cells import (
    Cell,
    Workload,
    charged_net_peak,
    check_cell,
    device_unavailable,
    reference_for,
    use_exact_float32,
)
from benchmarks.children import run_json_child
from benchmarks.configs import LayerConfig
from benchmarks.paired import measures, share_inputs, timed_call
from benchmarks.paired_stats import EARLY_ROUNDS, FAR_BEHIND, MIN_ROUNDS, PairedRatio, paired_ratio
from benchmarks.runner import PAIRED_REFERENCE
from benchmarks.vocabulary import DEVICES, PASSES, peak_metric
from impls import STRATEGIES, Strategy
from impls.geometry import SUPPORTED_DTYPES

BASELINE = PAIRED_REFERENCE  # the strategy every other is raced against, where it runs the layer
BUDGET = 3.0  # seconds of rounds per call (forward, forward-backward) and regime, at most, after MIN_ROUNDS
DTYPES = tuple(str(dtype).removeprefix("torch.") for dtype in SUPPORTED_DTYPES)


class AdviceError(ValueError):
    """Bad input to ``advise``: the message names the parameter and its value."""


@dataclass(frozen=True)
class Layer:
    """One geometry of the user's, how often it occurs and where."""

    config: LayerConfig
    count: int = 1
    names: tuple[str, ...] = ()


def _option_text(value: int | tuple) -> str:
    """An int or a tuple of ints as its command-line option is written (``3``, ``2,3,8,8``)."""
    return ",".join(map(str, value)) if isinstance(value, tuple | list) else str(value)


def layer_config(
    input_shape: tuple[int, ...],
    kernel_size: int | tuple[int, ...],
    stride: int | tuple = 1,
    padding: int | tuple = 0,
    dilation: int | tuple = 1,
    dtype: str = "float32",
    name: str = "layer",
) -> LayerConfig:
    """A validated layer; an ``AdviceError`` naming the parameter otherwise (a kernel larger than the padded
    input, a dim out of range, an unknown dtype)."""
    if dtype not in DTYPES:
        raise AdviceError(f"--dtype {dtype!r}: must be one of {', '.join(DTYPES)}")
    config = LayerConfig(name, tuple(input_shape), kernel_size, stride, padding, dilation, dtype, source="user")
    try:
        config.geometry  # noqa: B018 (validates)
    except (TypeError, ValueError) as error:
        given = {"input-shape": input_shape, "kernel-size": kernel_size, "stride": stride, "padding": padding}
        given["dilation"] = dilation
        layer = " ".join(f"--{option} {_option_text(value)}" for option, value in given.items())
        which = "the layer" if name == "layer" else f"layer {name} of the model, as"  # a model's: not typed
        raise AdviceError(f"{which} {layer}: {error}") from None
    return config


def check_device(device: str) -> None:
    """An ``AdviceError`` when ``device`` is not there."""
    if device not in DEVICES:
        raise AdviceError(f"--device {device!r}: must be cpu or cuda")
    reason = device_unavailable(device)
    if reason is not None:
        raise AdviceError(f"--device {device!r}: {reason}")


def _factory(path: str) -> Callable[[], torch.nn.Module]:
    module_name, _, attribute = path.rpartition(".")
    try:
        module = importlib.import_module(module_name) if module_name else None
        factory = getattr(module, attribute)
    except Exception as error:  # whatever importing it raises (a missing operator, a syntax error): the user's module
        raise AdviceError(f"--model {path!r}: cannot import it ({type(error).__name__}: {error})") from None
    if not callable(factory):
        raise AdviceError(f"--model {path!r}: not callable")
    return factory


def _per_dim(value: int | tuple[int, ...], spatial: int) -> tuple[int, ...]:
    """An ``nn.Unfold`` parameter per spatial dim, as a convolution holds it, so that both merge by geometry."""
    return tuple(value) if isinstance(value, tuple | list) else (value,) * spatial


def _padding(module: torch.nn.Module, spatial: int) -> tuple[int, ...] | None:
    """The symmetric zero padding of a convolution, or None when it has none that unfold can express."""
    padding = module.padding
    if padding == "valid":
        return (0,) * spatial
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(module.kernel_size, module.dilation)]
        return None if any(t % 2 for t in totals) else tuple(t // 2 for t in totals)
    return tuple(padding)


def model_layers(path: str, input_shape: tuple[int, ...], dtype: str = "float32") -> tuple[list[Layer], list[str]]:
    """The unfold problems of the model ``path`` (an importable factory, e.g. ``torchvision.models.resnet18``) on
    an input of ``input_shape``: its convolutions' and ``nn.Unfold``s' inputs, merged and counted, and a note per
    layer that cannot be expressed as an unfold (asymmetric 'same' padding)."""
    factory = _factory(path)
    try:
        model = factory()
    except Exception as error:
        raise AdviceError(f"--model {path!r}: calling it failed ({type(error).__name__}: {error})") from None
    if not isinstance(model, torch.nn.Module):
        raise AdviceError(f"--model {path!r}: returned a {type(model).__name__}, not a torch.nn.Module")
    found: dict[tuple, list[str]] = {}
    notes: list[str] = []

    def hook(name: str) -> Callable:
        def record(module: torch.nn.Module, inputs: tuple) -> None:
            shape = tuple(inputs[0].shape)
            spatial = len(shape) - 2
            if isinstance(module, torch.nn.Unfold):
                parts = (module.kernel_size, module.stride, module.padding, module.dilation)
                key = (shape, *(_per_dim(part, spatial) for part in parts))
            else:
                padding = _padding(module, spatial)
                if padding is None:
                    notes.append(f"{name}: 'same' padding with an odd total is asymmetric; not an unfold, left out")
                    return
                if module.padding_mode != "zeros":  # the convolution pads the input itself first
                    shape = (*shape[:2], *(s + 2 * p for s, p in zip(shape[2:], padding)))
                    padding = (0,) * spatial
                key = (shape, tuple(module.kernel_size), tuple(module.stride), padding, tuple(module.dilation))
            found.setdefault(key, []).append(name)

        return record

    kinds = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Unfold)
    handles = [m.register_forward_pre_hook(hook(n)) for n, m in model.named_modules() if isinstance(m, kinds)]
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(input_shape))
    except Exception as error:
        raise AdviceError(
            f"--model {path!r} with --input-shape {','.join(map(str, input_shape))}: its forward failed "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        ) from None
    finally:
        for handle in handles:
            handle.remove()
    if not found:
        raise AdviceError(f"--model {path!r}: no convolution or nn.Unfold ran on --input-shape {input_shape}")
    layers = []
    for index, ((shape, kernel, stride, padding, dilation), names) in enumerate(found.items()):
        config = layer_config(shape, kernel, stride, padding, dilation, dtype, name=f"layer{index + 1}")
        layers.append(Layer(config, len(names), tuple(names)))
    return layers, notes


CONFIDENCE = 0.95  # of each ratio's interval (two-sided): a ranking, not a gate
TARGET = 1.05  # a strategy is timed until its interval is within this factor of its ratio, or it is out of the race


@dataclass
class Race:
    """Each strategy's time in every round it ran (the baseline runs in every round), and those that left the
    race far behind the leader."""

    baseline: str
    times: dict[str, list[float]]
    far_behind: set[str] = dataclasses.field(default_factory=set)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)  # strategy -> the error its call raised

    def ratio(self, name: str) -> PairedRatio:
        """The strategy's ratio to the baseline: its interval from the signed-rank statistics of its per-round
        log-ratios; for one that left far behind, before ``MIN_ROUNDS``, the range of those (no resolution)."""
        if name == self.baseline:
            return PairedRatio(1.0, 1.0, 1.0, len(self.times[name]), 1.0)
        d = [math.log(t / b) for t, b in zip(self.times[name], self.times[self.baseline])]
        if len(d) >= MIN_ROUNDS:
            return paired_ratio(d, alpha=(1 - CONFIDENCE) / 2, min_pairs=MIN_ROUNDS)
        return PairedRatio(math.exp(statistics.median(d)), math.exp(min(d)), math.exp(max(d)), len(d), math.nan)


def race(
    workloads: Mapping[str, Workload],
    baseline: str,
    which: str,
    budget: float,
    target: float = TARGET,
    set_aside: Collection[str] = (),
    clock: Callable[[], float] = time.monotonic,
) -> Race:
    """Time ``which`` of every workload in rounds: each round calls each strategy still racing once, the baseline
    always, in the registry's order and the next round in the reverse order (so each position's bias cancels in
    pairs of rounds), every output dropped before the next call. A strategy's per-round log-ratio to the
    baseline is its paired sample. A strategy leaves the race after ``EARLY_ROUNDS`` if its fastest call took
    over ``FAR_BEHIND`` times the leader's slowest (it is no contender, whatever the noise); after
    ``MIN_ROUNDS`` once its ratio is resolved to ``target``, or its interval lies wholly above the leader's;
    the race ends when none is left or ``budget`` seconds have passed. The leader is the fastest so far of the
    strategies not ``set_aside`` (those the advice will not pick), so every contender for the pick is resolved. A
    strategy whose call raises leaves the race with its error (``Race.failed``) and the others go on; the
    baseline's error is raised (it fails the layer's process)."""
    names = list(workloads)
    leaders = [name for name in names if name not in set_aside] or names
    calls = tuple(workloads.values())
    found = Race(baseline, {name: [] for name in names})
    racing = [name for name in names if name != baseline]
    rounds, start = 0, clock()
    while racing or rounds < MIN_ROUNDS:
        order = [baseline, *racing]
        for name in reversed(order) if rounds % 2 else order:
            try:
                found.times[name].append(timed_call(calls, names.index(name), which))
            except Exception as error:
                if name == baseline:
                    raise
                found.failed[name] = f"{type(error).__name__}: {error}"
                racing.remove(name)
        rounds += 1
        live = [name for name in leaders if name not in found.failed and name not in found.far_behind] or [baseline]
        if rounds >= EARLY_ROUNDS:
            leader = min(live, key=lambda name: statistics.median(found.times[name]))
            limit = FAR_BEHIND * max(found.times[leader])
            found.far_behind.update(name for name in racing if min(found.times[name]) > limit)
            racing = [name for name in racing if name not in found.far_behind]
        if rounds < MIN_ROUNDS:
            continue
        if clock() - start > budget:
            break
        out = found.far_behind | set(found.failed)
        ratios = {name: found.ratio(name) for name in names if name not in out}
        leader_high = min(r.high for name, r in ratios.items() if name in live)
        racing = [n for n in racing if ratios[n].high / ratios[n].low > target**2 and ratios[n].low <= leader_high]
    for workload in calls:
        workload.reset()
    return found


def measure(
    config: LayerConfig,
    budget: float,
    regimes: Sequence[str] = tuple(REGIMES),
    device: str = "cpu",
    set_aside: Collection[str] = (),
    strategies: Mapping[str, Strategy] = STRATEGIES,
    progress: Callable[[str], None] = lambda line: None,
) -> Iterator[dict]:
    """Rows of the layer's measurements (module docstring), in a process started in the warm regime, each yielded as
    soon as it is measured: per strategy its problem (why it cannot run the layer) or its compile time; per strategy its
    net peaks (the threshold pinned); per regime and strategy its times and ratios to the baseline with intervals. The
    net peaks come before the races, so that a process that dies in one keeps them, unless the pin they leave would
    outlast into the warm regime: it sets its thresholds anew (``apply_regime_now``), but not over a threshold of the
    user's; then they come after the races, only for the strategies that ran every call of some regime. A strategy that
    fails gets a problem row marked ``failed``, the others are measured on: one that fails its check or its set-up is
    not measured further (a row for every regime); one whose call raises while timed gets that regime's row (``regime``
    named), is not timed further in it, and is timed in the other regime; one whose net peak measurement raises gets the
    ``memory`` row, which holds for every regime (a net peak is measured once, the threshold pinned, whatever the
    regime)."""
    use_exact_float32(device)
    workloads: dict[str, Workload] = {}
    reference = None
    for name, strategy in strategies.items():
        cell = Cell(strategy, config, device)
        started = time.monotonic()
        problem = cell.skip_reason()
        if problem is not None:
            yield {"strategy": name, "problem": problem}
            continue
        reference = reference_for(cell) if reference is None else reference
        problem = check_cell(cell, reference).problem(backward=True)  # a first call compiles here
        if problem is None:
            try:
                workloads[name] = Workload(cell, backward=True)
                workloads[name].compile()
            except Exception as error:
                workloads.pop(name, None)
                problem = f"its set-up for timing raised {type(error).__name__}: {error}"
        if problem is not None:
            yield {"strategy": name, "problem": problem, "failed": True}
            continue
        seconds = time.monotonic() - started
        progress(f"checked {name} in {seconds:.1f} s")
        yield {"strategy": name, "compile_seconds": seconds if strategy.compiles else 0.0}
    del reference
    if not workloads:
        return
    baseline = BASELINE if BASELINE in workloads else next(iter(workloads))
    for name, workload in workloads.items():
        if name != baseline:
            share_inputs(workload, workloads[baseline])
    peaks_first = WARM.name not in regimes or sets_warm_thresholds()  # then the warm regime undoes their pin
    if peaks_first:  # no call has run with the threshold pinned yet: each has its warm-up call
        yield from _net_peaks(workloads, warm_up=workloads, progress=progress)
    completed: dict[str, set[str]] = {}  # per regime timed, the strategies that ran every call of it
    for regime in REGIMES:  # warm first: its thresholds are set once a process, the fresh-pages pin for good
        if regime not in regimes:
            continue
        if regime == FRESH_PAGES.name and not enter_fresh_pages_now():
            raise RuntimeError("cannot pin glibc's mmap threshold here (no mallopt): no fresh-pages regime")
        if regime == WARM.name:
            apply_regime_now()
        timed = dict(workloads)  # those that have not failed in this regime
        for which in PASSES:
            started = time.monotonic()
            failed = {}
            for name, workload in timed.items():  # untimed: lazy set-up, the allocator's state, as in the suite
                try:
                    timed_call((workload,), 0, which)
                except Exception as error:
                    if name == baseline:
                        raise
                    failed[name] = f"{type(error).__name__}: {error}"
            racing = {name: workload for name, workload in timed.items() if name not in failed}
            found = race(racing, baseline, which, budget, set_aside=set_aside)
            failed.update(found.failed)
            for name, error in failed.items():  # failed in this regime only: timed in the other, judged there
                problem = f"failed while timed ({regime}, {which}): {error}"
                yield {"strategy": name, "regime": regime, "problem": problem, "failed": True}
                del timed[name]
            base_time = statistics.median(found.times[baseline])
            for name in timed:
                result = found.ratio(name)
                yield {
                    "strategy": name,
                    "regime": regime,
                    "which": which,
                    "time": result.ratio * base_time,
                    "ratio": result.ratio,
                    "low": result.low,
                    "high": result.high,
                    "rounds": result.pairs,
                    "far_behind": name in found.far_behind,
                    "baseline": baseline,
                }
            rounds = len(found.times[baseline])
            progress(f"{regime} {which}: {rounds} rounds in {time.monotonic() - started:.1f} s")
        completed[regime] = set(timed)
    if not peaks_first:  # only those judged in some regime; no warm-up where all their calls ran pinned
        judged = {name: w for name, w in workloads.items() if any(name in names for names in completed.values())}
        fresh = completed.get(FRESH_PAGES.name, set())
        yield from _net_peaks(judged, warm_up=[name for name in judged if name not in fresh], progress=progress)


def _net_peaks(
    workloads: Mapping[str, Workload], warm_up: Collection[str], progress: Callable[[str], None]
) -> Iterator[dict]:
    """Each strategy's net peaks, forward and forward-backward (``charged_net_peak``, the threshold pinned, after
    a warm-up call for those in ``warm_up``), a row per strategy as soon as it is measured; one whose measurement
    raises gets a ``memory`` problem row instead, which holds for every regime."""
    started = time.monotonic()
    for name, workload in workloads.items():
        try:
            peaks = {peak_metric(w): charged_net_peak(workload, w != "forward", name in warm_up) for w in PASSES}
        except Exception as error:  # one net peak for every regime: a failure here holds in each of them
            problem = f"failed while its net peak was measured: {type(error).__name__}: {error}"
            yield {"strategy": name, "regime": "memory", "problem": problem, "failed": True}
            continue
        yield {"strategy": name, "regime": "memory", **peaks}
    progress(f"net peaks in {time.monotonic() - started:.1f} s")


SETUP_SECONDS = 900.0  # a layer's process, besides its races: every strategy's check and first compile, net peaks


def layer_timeout(budget: float, regimes: Sequence[str]) -> float:
    """Seconds a layer's process may take: ``SETUP_SECONDS``, plus twice the races' budget (a race of slow calls
    runs its first ``MIN_ROUNDS`` rounds whatever the budget, and ends with the round in flight), per pass and
    regime."""
    return SETUP_SECONDS + 2 * budget * len(PASSES) * len(regimes)


def measure_layer(
    config: LayerConfig,
    budget: float,
    regimes: Sequence[str] = tuple(REGIMES),
    device: str = "cpu",
    set_aside: Collection[str] = (),
    timeout: float | None = None,
    progress: Callable[[str], None] = print,
) -> dict[str, dict]:
    """The layer's measurements from a process of its own (a crash fails this layer only), started with the
    allocator as a user's process has it: ``{"time:<regime>": {strategy: row}, "memory": {strategy: row}}``,
    rows keyed as ``reports.advice`` reads them; a strategy that failed while timed has its problem, marked
    ``failed``, in that regime's table only, one whose net peak failed in ``memory`` only (``reports.advice``
    applies it to every regime); a failed process leaves its strategies the reason as problem, marked ``failed``,
    wherever they were not measured. ``timeout`` (default ``layer_timeout``): seconds the process may take."""
    timeout = layer_timeout(budget, regimes) if timeout is None else timeout
    command = [
        sys.executable,
        "-m",
        "benchmarks.advise",
        json.dumps(dataclasses.asdict(config)),
        "--budget",
        str(budget),
        "--device",
        device,
        "--regimes",
        ",".join(regimes),
        "--set-aside",
        ",".join(set_aside),
    ]
    rows, why = run_json_child(
        command, None, regime_environment(WARM), timeout, lambda line: progress(f"  {config.name}: {line}")
    )
    if why:
        why = f"the measuring process {why}"
    found: dict[str, dict] = {f"time:{regime}": {} for regime in regimes}
    found["memory"] = {}
    compile_seconds = {}
    for row in rows:
        name = row["strategy"]
        if "problem" in row:  # one regime's (named), the net peak's ("memory": every regime's), or all
            problem = {"strategy": name, "problem": row["problem"], "failed": row.get("failed", False)}
            regime = row.get("regime")
            keys = list(found) if regime is None else ["memory" if regime == "memory" else f"time:{regime}"]
            for key in keys:
                found[key][name] = dict(problem)  # in place of what that regime had timed before it failed
        elif "compile_seconds" in row:
            compile_seconds[name] = row["compile_seconds"]
        elif row["regime"] == "memory":
            found["memory"][name] = row
        else:
            first = {"strategy": name, "baseline": row["baseline"], "compile_seconds": compile_seconds[name]}
            mine = found[f"time:{row['regime']}"].setdefault(name, first)
            which = row["which"]
            parts = ("time", "ratio", "low", "high", "rounds", "far_behind")
            mine.update({f"{part}_{which}": row[part] for part in parts})
    for key, table in found.items():
        wanted = measures("memory" if key == "memory" else "time")
        for name in STRATEGIES:
            row = table.get(name, {})
            if why and "problem" not in row and not set(wanted) <= set(row):
                table[name] = {"strategy": name, "problem": why, "failed": True}
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("layer", help="a LayerConfig as JSON")
    parser.add_argument("--budget", type=float, default=BUDGET)  # the command checked it (finite_float)
    parser.add_argument("--regimes", default=",".join(REGIMES))
    parser.add_argument("--set-aside", default="", help="strategies the advice will not pick (never the leader)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    fields = json.loads(args.layer)
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    progress = partial(print, flush=True)
    set_aside = [name for name in args.set_aside.split(",") if name]
    for row in measure(
        LayerConfig(**fields), args.budget, args.regimes.split(","), args.device, set_aside, progress=progress
    ):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
