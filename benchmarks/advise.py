"""Every strategy measured on a user's own layers: the measuring half of ``unfold-bench advise``.

A layer is an unfold problem (``benchmarks.configs.LayerConfig``): given directly, or collected from a model by
forward pre-hooks on its convolutions (``torch.nn.Conv1d``/``2d``/``3d``) and ``torch.nn.Unfold`` modules, run
once on zeros of the given input shape; layers with the same geometry are merged and counted.

Each layer is measured in processes of its own (``measure_layer``), so a crash fails that layer only:

- **time**, once per timing regime (``benchmarks.allocator``): each strategy passes the correctness check
  (``benchmarks.cells.check_cell``) or is listed with the reason; then each is timed against a baseline
  (``native`` where it runs the layer) in blocks of four calls A B B A on the same inputs
  (``benchmarks.paired.paired_log_ratios``), which gives its ratio to the baseline with an interval
  (``benchmarks.paired_stats``); the baseline's own median time turns ratios into times;
- **memory**, in a process started with glibc's threshold pinned: each strategy's net peak
  (``benchmarks.cells.charged_net_peak``).

Run as a module it measures one layer (given as JSON) and prints one JSON object per strategy::

    python -m benchmarks.advise LAYER_JSON --kind time|memory [--budget S]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch

from benchmarks.allocator import REGIMES, pinned_environment, regime_environment
from benchmarks.cells import Cell, Workload, charged_net_peak, check_cell, device_unavailable, use_exact_float32
from benchmarks.configs import LayerConfig
from benchmarks.paired import ROOT, WHICH, paired_log_ratios, share_inputs, timed_call
from benchmarks.paired_stats import paired_ratio
from impls import STRATEGIES, Strategy
from impls.geometry import SUPPORTED_DTYPES

BASELINE = "native"
DTYPES = tuple(str(dtype).removeprefix("torch.") for dtype in SUPPORTED_DTYPES)


class AdviceError(ValueError):
    """Bad input to ``advise``: the message names the parameter and its value."""


@dataclass(frozen=True)
class Layer:
    """One geometry of the user's, how often it occurs and where."""

    config: LayerConfig
    count: int = 1
    names: tuple[str, ...] = ()


def layer_config(input_shape: tuple[int, ...], kernel_size: int | tuple[int, ...], stride: int | tuple = 1,
                 padding: int | tuple = 0, dilation: int | tuple = 1, dtype: str = "float32",
                 name: str = "layer") -> LayerConfig:  # fmt: skip
    """A validated layer; an ``AdviceError`` naming the parameter otherwise (a kernel larger than the padded
    input, a dim out of range, an unknown dtype)."""
    if dtype not in DTYPES:
        raise AdviceError(f"--dtype {dtype!r}: must be one of {', '.join(DTYPES)}")
    config = LayerConfig(name, tuple(input_shape), kernel_size, stride, padding, dilation, dtype, source="user")
    try:
        config.geometry  # noqa: B018 (validates)
    except (TypeError, ValueError) as error:
        raise AdviceError(f"--input-shape {','.join(map(str, input_shape))}: {error}") from None
    return config


def check_device(device: str) -> None:
    """An ``AdviceError`` when ``device`` is not there."""
    if device not in ("cpu", "cuda"):
        raise AdviceError(f"--device {device!r}: must be cpu or cuda")
    reason = device_unavailable(device)
    if reason is not None:
        raise AdviceError(f"--device {device!r}: {reason}")


def _factory(path: str) -> Callable[[], torch.nn.Module]:
    module_name, _, attribute = path.rpartition(".")
    try:
        module = importlib.import_module(module_name) if module_name else None
        factory = getattr(module, attribute)
    except (ImportError, AttributeError, ValueError) as error:
        raise AdviceError(f"--model {path!r}: cannot import it ({type(error).__name__}: {error})") from None
    if not callable(factory):
        raise AdviceError(f"--model {path!r}: not callable")
    return factory


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
            if isinstance(module, torch.nn.Unfold):
                key = (shape, module.kernel_size, module.stride, module.padding, module.dilation)
            else:
                spatial = len(shape) - 2
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


def _median_time(workload: Workload, which: str, seconds: float) -> float:
    times: list[float] = []
    end = time.monotonic() + seconds
    while len(times) < 5 or time.monotonic() < end:
        times.append(timed_call((workload, workload), 0, which))
    workload.reset()
    return statistics.median(times)


def measure(config: LayerConfig, kind: str, budget: float, device: str = "cpu",
            strategies: Mapping[str, Strategy] = STRATEGIES) -> Iterator[dict]:  # fmt: skip
    """One row per strategy: its problem (why it cannot run the layer) or its measurements (module docstring)."""
    use_exact_float32(device)
    workloads: dict[str, Workload] = {}
    compiled: dict[str, float] = {}
    for name, strategy in strategies.items():
        cell = Cell(strategy, config, device)
        started = time.monotonic()
        problem = cell.skip_reason() or check_cell(cell).problem(backward=True)  # a first call compiles here
        if problem is not None:
            yield {"strategy": name, "problem": problem}
            continue
        workloads[name] = Workload(cell, backward=True)
        workloads[name].compile()
        compiled[name] = time.monotonic() - started if strategy.compiles else 0.0
    if not workloads:
        return
    baseline = BASELINE if BASELINE in workloads else next(iter(workloads))
    for name, workload in workloads.items():
        if name != baseline:
            share_inputs(workload, workloads[baseline])
    if kind == "memory":
        for name, workload in workloads.items():
            yield {"strategy": name, **{f"net_peak_{w}": charged_net_peak(workload, w != "forward") for w in WHICH}}
        return
    row = {name: {"strategy": name, "baseline": baseline, "compile_seconds": compiled[name]} for name in workloads}
    for which in WHICH:
        for workload in workloads.values():  # untimed: lazy set-up, and the allocator's state, as in the suite
            _median_time(workload, which, 0.1)
        base_time = _median_time(workloads[baseline], which, 0.3)
        for name, workload in workloads.items():
            if name == baseline:
                ratio, low, high, resolution = 1.0, 1.0, 1.0, 1.0
            else:
                result = paired_ratio(paired_log_ratios((workloads[baseline], workload), which, budget, 1.05, 0.0))
                ratio, low, high, resolution = result.ratio, result.low, result.high, result.resolution
            row[name].update({f"time_{which}": ratio * base_time, f"ratio_{which}": ratio, f"low_{which}": low,
                              f"high_{which}": high, f"resolution_{which}": resolution})  # fmt: skip
    yield from row.values()


def measure_layer(config: LayerConfig, budget: float, device: str = "cpu", timeout: float = 900.0,
                  progress: Callable[[str], None] = print) -> dict[str, dict]:  # fmt: skip
    """Each strategy's measurements of ``config`` in every timing regime and its net peaks, from processes of
    their own: ``{"time:<regime>": {strategy: row}, "memory": {strategy: row}}``; a process that fails leaves
    its strategies with the reason as their problem."""
    layer = json.dumps(dataclasses.asdict(config))
    runs = [(f"time:{name}", "time", regime_environment(regime)) for name, regime in REGIMES.items()]
    runs.append(("memory", "memory", pinned_environment()))
    found: dict[str, dict] = {}
    for key, kind, env in runs:
        started = time.monotonic()
        command = [sys.executable, "-m", "benchmarks.advise", layer, "--kind", kind, "--budget", str(budget),
                   "--device", device]  # fmt: skip
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            why = "" if done.returncode == 0 else f"the measuring process failed: {done.stderr.strip()[-800:]}"
        except subprocess.TimeoutExpired:
            rows, why = [], f"the measuring process took longer than {timeout:.0f} s"
        found[key] = {row["strategy"]: row for row in rows}
        for name in STRATEGIES:
            if why and name not in found[key]:
                found[key][name] = {"strategy": name, "problem": why}
        progress(f"  {config.name}: {kind} ({key.partition(':')[2] or 'pinned'}) in {time.monotonic() - started:.0f} s")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("layer", help="a LayerConfig as JSON")
    parser.add_argument("--kind", choices=("time", "memory"), default="time")
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    fields = json.loads(args.layer)
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    for row in measure(LayerConfig(**fields), args.kind, args.budget, args.device):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
