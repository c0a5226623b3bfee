"""Rough ratios for issue 21's C++ route, in one process: cpp, compiled and native, forward and forward-backward,
against the fresh-output floor and copy_ (as benchmarks.bounds defines them), calls interleaved round-robin with
the order reversed every round; the figure is the median over rounds of each round's ratio.

python scripts/cpp_ratios.py [--batch 256] [--rounds 15] [--configs allcnnc-conv2,...] [--dtypes float32,bfloat16]
Timing regime: whatever the process was started with (glibc defaults: the suite's warm regime).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

import torch

from benchmarks.configs import get_config
from impls import STRATEGIES
from impls.parity import random_grad_output


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--configs", default="allcnnc-conv2,allcnnc-conv3,allcnnc-conv4,allcnnc-conv6,allcnnc-conv7")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--strategies", default="cpp,compiled,native")
    args = parser.parse_args()
    names = args.strategies.split(",")
    for config_name in args.configs.split(","):
        for dtype in args.dtypes.split(","):
            config = dataclasses.replace(get_config(config_name).with_batch_size(args.batch), dtype=dtype)
            print(json.dumps(measure(config, names, args.rounds)), flush=True)


def measure(config, names, rounds) -> dict:
    geometry = config.geometry
    x = config.make_input()
    leaf = x.detach().requires_grad_(True)
    grad_output = random_grad_output(geometry, x)
    shape, dtype = geometry.output_shape, x.dtype
    source, target = torch.ones(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)
    kwargs = config.unfold_kwargs()
    kept = {}

    def forward(s):
        def call():
            kept["r"] = s(x, **kwargs)

        return call

    def forward_backward(s):
        def call():
            out = s(leaf, **kwargs)
            out.backward(grad_output)
            kept["r"] = out

        return call

    def fresh():
        kept["r"] = torch.empty(shape, dtype=dtype).fill_(1)

    def copy():
        target.copy_(source)

    calls = {"fresh_output": fresh, "copy_": copy}
    for n in names:
        calls[f"{n}.fwd"] = forward(STRATEGIES[n])
        calls[f"{n}.fwdbwd"] = forward_backward(STRATEGIES[n])
    start = time.perf_counter()
    for call in calls.values():  # compile, build, first touch; and check cpp's forward once
        for _ in range(2):
            kept.clear()
            leaf.grad = None
            call()
    setup = time.perf_counter() - start
    assert torch.equal(STRATEGIES["cpp"](x, **kwargs), torch.nn.functional.unfold(x.float(), **kwargs).to(dtype))
    times = {k: [] for k in calls}
    order = list(calls)
    for r in range(rounds):
        for key in order if r % 2 == 0 else reversed(order):
            kept.clear()
            leaf.grad = None
            t = time.perf_counter()
            calls[key]()
            times[key].append(time.perf_counter() - t)
    kept.clear()

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    result = {
        "config": config.name,
        "dtype": config.dtype,
        "batch": config.batch_size,
        "rounds": rounds,
        "setup_s": round(setup, 1),
        "median_ms": {k: round(1e3 * statistics.median(v), 2) for k, v in times.items()},
    }
    for n in names:
        result[f"{n}.fwd/fresh"] = round(ratio(f"{n}.fwd", "fresh_output"), 3)
        result[f"{n}.fwd/copy"] = round(ratio(f"{n}.fwd", "copy_"), 3)
        result[f"{n}.fwdbwd/native"] = round(ratio(f"{n}.fwdbwd", "native.fwdbwd"), 3)
    return result


if __name__ == "__main__":
    main()
