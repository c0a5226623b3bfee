"""Which strategy to ship for your own layers or model (ranked, measured here).

    unfold-bench advise --input-shape 64,128,56,56 --kernel-size 3 --stride 2 --padding 1
    unfold-bench advise --model torchvision.models.resnet18 --input-shape 32,3,224,224 --needs per-sample-gradients

For each geometry (given, or collected from the model's convolutions and ``nn.Unfold`` modules, merged and counted):
the correctness check of every strategy, its net peak memory, then its forward and forward-backward time in each
timing regime, raced against the baseline in rounds of one call each, the order reversed every round, with a
signed-rank interval (``benchmarks.advise``; over your own ``MALLOC_MMAP_THRESHOLD_`` the net peaks come last); then
a ranked table per geometry and a pick per layer and for the whole model by the site's rules and verdict,
statistical ties and their tie-break included (``reports.advice``). ``--json`` and ``--html`` write the report. Bad
input exits with status 2 and a message naming the parameter, before any measurement, and so does a ``--strategy``
that cannot be loaded; a strategy that fails on a
layer (its correctness check, an error while measured, the layer's process) is listed with the reason, the others
are judged, and the command exits with status 2 (one that fails while timed in one regime only is failed there and
judged in the other; a layer's process that dies in a race keeps the net peaks and the figures measured before);
else a plugin set aside (an installed entry point that cannot be loaded, or a name taken) makes it status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from unfold_bench.common_args import (
    command_parser,
    finite_float,
    output_file,
    refuse_unkept_strategies,
    warn_if_busy,
    with_folder_made,
)


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers separated by commas") from None
    return values


def _int_or_tuple(text: str) -> int | tuple[int, ...]:
    values = _ints(text)
    return values[0] if len(values) == 1 else values


def _needs(text: str) -> list[str]:
    from impls.capabilities import NEEDS

    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in NEEDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{','.join(unknown)}: unknown; known: {', '.join(NEEDS)}")
    return names


def _records() -> dict[str, dict]:
    """Each strategy's record (``benchmarks.catalogue``), as the site reads it."""
    from benchmarks.catalogue import strategy_record
    from impls import STRATEGIES

    return {name: strategy_record(strategy) for name, strategy in STRATEGIES.items()}


def _set_aside(needs: list[str], device: str) -> dict[str, str]:
    """The site's set-aside strategies (those that overwrite their result), and those lacking what is needed,
    from the capability checks on ``device``."""
    from impls import STRATEGIES
    from impls.capabilities import NEEDS, WORKS, check
    from reports.set_aside import set_aside

    aside = set_aside(_records())
    for need in needs:
        for name, strategy in STRATEGIES.items():
            cell = check(strategy, NEEDS[need], device)
            if cell != WORKS:
                aside.setdefault(name, f"no {need} ({cell})")
    return aside


GEOMETRY = {"stride": 1, "padding": 0, "dilation": 1}  # the options of one geometry, with F.unfold's defaults


def main(argv: list[str] | None = None) -> int:
    """Which strategy to ship for your own layers or model (ranked, measured here)."""
    from benchmarks.advise import (
        BUDGET,
        DTYPES,
        MIN_ROUNDS,
        AdviceError,
        Layer,
        check_device,
        layer_config,
        measure_layer,
        model_layers,
    )
    from benchmarks.allocator import REGIMES
    from unfold_bench.common_args import add_device, add_regime

    parser = command_parser("advise", __doc__)
    parser.add_argument("--input-shape", type=_ints, required=True, help="N,C,*spatial (of the model's input)")
    parser.add_argument(
        "--kernel-size", type=_int_or_tuple, help="one geometry's kernel: an int, or one per spatial dim (3,3)"
    )
    for option, default in GEOMETRY.items():
        parser.add_argument(
            f"--{option}",
            type=_int_or_tuple,
            help=f"with --kernel-size: an int or one per spatial dim (default {default})",
        )
    parser.add_argument("--dtype", default="float32", help=f"one of {', '.join(DTYPES)} (default float32)")
    add_device(parser, why="the device type to measure the strategies on")
    parser.add_argument("--model", help="an importable nn.Module factory, e.g. torchvision.models.resnet18")
    parser.add_argument("--needs", type=_needs, default=[], help="capabilities the strategy must have, e.g. vmap")
    parser.add_argument(
        "--budget",
        type=finite_float,
        default=BUDGET,
        help=f"seconds of timing rounds per call and regime, at most, after the first {MIN_ROUNDS} "
        f"(default {BUDGET:g})",
    )
    add_regime(parser, default="both", also=("both",))
    parser.add_argument("--json", type=output_file, help="write the report as JSON here")
    parser.add_argument("--html", type=output_file, help="write a self-contained page here")
    args = parser.parse_args(argv)
    if (args.model is None) == (args.kernel_size is None):
        parser.error("give either --kernel-size (one geometry) or --model (its layers), not both or neither")
    given = [option for option in GEOMETRY if getattr(args, option) is not None]
    if args.model and given:
        value = getattr(args, given[0])
        text = ",".join(map(str, value)) if isinstance(value, tuple) else value
        parser.error(f"--{given[0]} {text}: a model's layers have their own; give it with --kernel-size")
    geometry = {
        option: default if getattr(args, option) is None else getattr(args, option)
        for option, default in GEOMETRY.items()
    }
    if args.budget <= 0:
        parser.error(f"--budget {args.budget}: must be above 0 seconds")
    refuse_unkept_strategies(parser)
    if args.input_shape and args.input_shape[0] == 0:
        shape = ",".join(map(str, args.input_shape))
        parser.error(f"--input-shape {shape}: a batch of 0 has no work to time; give the batch size you train with")
    try:
        check_device(args.device)
        if args.model:
            print(f"collecting the layers of {args.model} on input {args.input_shape} ...", flush=True)
            layers, notes = model_layers(args.model, args.input_shape, args.dtype)
            for note in notes:
                print(f"note: {note}")
        else:
            config = layer_config(args.input_shape, args.kernel_size, **geometry, dtype=args.dtype)
            layers = [Layer(config)]
    except AdviceError as error:
        print(f"unfold-bench advise: error: {error}", file=sys.stderr)
        return 2
    warn_if_busy()
    from impls import PLUGIN_PROBLEMS, STRATEGIES
    from impls.plugins import describe, set_aside_count

    for line in describe(STRATEGIES, PLUGIN_PROBLEMS):
        print(line, flush=True)
    set_aside = _set_aside(args.needs, args.device)
    regimes = list(REGIMES) if args.regime == "both" else [args.regime]
    print(f"{len(layers)} geometries ({sum(layer.count for layer in layers)} layers)", flush=True)
    started = time.monotonic()
    measured = []
    for index, layer in enumerate(layers):
        print(
            f"[{index + 1}/{len(layers)}] {layer.config.name}: input {layer.config.input_shape}, kernel "
            f"{layer.config.kernel_size}, stride {layer.config.stride} (x{layer.count})",
            flush=True,
        )
        layer_started = time.monotonic()
        measured.append(measure_layer(layer.config, args.budget, regimes, args.device, set_aside))
        print(f"  {layer.config.name}: measured in {time.monotonic() - layer_started:.0f} s", flush=True)
    from reports.advice import advice, format_text, write_html
    from reports.set_aside import complexity

    report = advice(layers, measured, regimes, set_aside, complexity(_records()))
    report["seconds"] = time.monotonic() - started
    print(format_text(report))
    print(f"measured in {report['seconds'] / 60:.1f} min")
    if args.json:
        with_folder_made(args.json).write_text(json.dumps(report, indent=1, default=str))
    if args.html:
        write_html(report, str(with_folder_made(args.html)))
    if PLUGIN_PROBLEMS:  # as bench does: the others were measured, a strategy you named was not
        print(set_aside_count(PLUGIN_PROBLEMS))
    if report["failed"]:  # judged without them: the picks stand, but a strategy failed on your layer
        print(f"failed on a layer: {len(report['failed'])} (listed above): exit status 2")
        return 2
    return 1 if PLUGIN_PROBLEMS else 0


if __name__ == "__main__":
    raise SystemExit(main())
