"""``unfold-bench``: the project's command; ``unfold-bench advise`` says which strategy to ship for your layers.

    unfold-bench advise --input-shape 64,128,56,56 --kernel-size 3 --stride 2 --padding 1
    unfold-bench advise --model torchvision.models.resnet18 --input-shape 32,3,224,224 --needs per-sample-gradients

For each geometry (given, or collected from the model's convolutions and ``nn.Unfold`` modules, merged and
counted): the correctness check of every strategy, then its forward and forward-backward time in each timing
regime, raced against the baseline in rounds of one call each, the order reversed every round, with a signed-rank
interval (``benchmarks.advise``), and its net peak memory; then a ranked table per geometry and a pick per layer
and for the whole model under the site's rules (``reports.advice``). ``--json`` and ``--html`` write the report.
Bad input exits with status 2 and a message naming the parameter.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.trees import ROOT, head_commit
from unfold_bench.common_args import print_report

if TYPE_CHECKING:
    from reports.compare import Thresholds

VARIABLE = "UNFOLD_BENCH_STRATEGIES"  # impls.plugins.VARIABLE, not imported: importing impls loads the registry


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


def _set_aside(needs: list[str], device: str) -> dict[str, str]:
    """The site's set-aside strategies (those that overwrite their result), and those lacking what is needed,
    from the capability checks on ``device``."""
    from benchmarks.catalogue import strategy_record
    from impls import STRATEGIES
    from impls.capabilities import NEEDS, WORKS, check
    from reports.set_aside import set_aside

    aside = set_aside({name: strategy_record(strategy) for name, strategy in STRATEGIES.items()})
    for need in needs:
        for name, strategy in STRATEGIES.items():
            cell = check(strategy, NEEDS[need], device)
            if cell != WORKS:
                aside.setdefault(name, f"no {need} ({cell})")
    return aside


def advise(argv: list[str]) -> int:
    """Which strategy to ship for your own layers or model (ranked, measured here)."""
    from benchmarks.advise import (
        BUDGET,
        MIN_ROUNDS,
        AdviceError,
        Layer,
        check_device,
        layer_config,
        measure_layer,
        model_layers,
    )
    from benchmarks.allocator import REGIMES
    from unfold_bench.common_args import add_regime

    parser = argparse.ArgumentParser(
        prog="unfold-bench advise", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--input-shape", type=_ints, required=True, help="N,C,*spatial (of the model's input)")
    parser.add_argument("--kernel-size", type=_int_or_tuple, help="int or comma-separated per spatial dim")
    parser.add_argument("--stride", type=_int_or_tuple, default=1)
    parser.add_argument("--padding", type=_int_or_tuple, default=0)
    parser.add_argument("--dilation", type=_int_or_tuple, default=1)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", help="an importable nn.Module factory, e.g. torchvision.models.resnet18")
    parser.add_argument("--needs", type=_needs, default=[], help="capabilities the strategy must have, e.g. vmap")
    parser.add_argument(
        "--budget",
        type=float,
        default=BUDGET,
        help=f"seconds of timing rounds per call and regime, at most, after the first {MIN_ROUNDS} "
        f"(default {BUDGET:g})",
    )
    add_regime(parser, default="both", also=("both",))
    parser.add_argument("--json", help="write the report as JSON here")
    parser.add_argument("--html", help="write a self-contained page here")
    args = parser.parse_args(argv)
    if (args.model is None) == (args.kernel_size is None):
        parser.error("give either --kernel-size (one geometry) or --model (its layers), not both or neither")
    if args.budget <= 0:
        parser.error(f"--budget {args.budget}: must be above 0 seconds")
    try:
        check_device(args.device)
        if args.model:
            print(f"collecting the layers of {args.model} on input {args.input_shape} ...", flush=True)
            layers, notes = model_layers(args.model, args.input_shape, args.dtype)
            for note in notes:
                print(f"note: {note}")
        else:
            config = layer_config(
                args.input_shape, args.kernel_size, args.stride, args.padding, args.dilation, args.dtype
            )
            layers = [Layer(config)]
    except AdviceError as error:
        print(f"unfold-bench advise: error: {error}", file=sys.stderr)
        return 2
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

    report = advice(layers, measured, regimes, set_aside)
    report["seconds"] = time.monotonic() - started
    print(format_text(report))
    print(f"measured in {report['seconds'] / 60:.1f} min")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1, default=str)
    if args.html:
        write_html(report, args.html)
    if PLUGIN_PROBLEMS:  # as bench does: the others were measured, a strategy you named was not
        print(set_aside_count(PLUGIN_PROBLEMS))
        return 1
    return 0


def variance(argv: list[str]) -> int:
    """Where the error of a paired ratio is (call, placement, process, run), and the design that resolves a target."""
    from benchmarks import variance as components
    from benchmarks.paired_stats import ALPHA, POWER
    from reports.compare import Thresholds

    defaults = Thresholds()
    parser = argparse.ArgumentParser(
        prog="unfold-bench variance",
        description=components.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--cells",
        default="gather:allcnnc-conv2:forward,cpp:allcnnc-conv2:forward,compiled:allcnnc-conv3:forward",
        help="comma-separated STRATEGY:CONFIG:forward|forward_backward (default: %(default)s)",
    )
    parser.add_argument(
        "--against",
        default="self",
        help="side A: 'self' (a second import of the same code, the gate's A/A) or a strategy",
    )
    parser.add_argument("--runs", type=int, default=2, help="runs, one after another (%(default)d)")
    parser.add_argument("--processes", type=int, default=6, help="processes per run, even (%(default)d)")
    parser.add_argument("--rounds", type=int, default=4, help="placements per process (%(default)d)")
    parser.add_argument("--blocks", type=int, default=32, help="blocks per round at most (%(default)d)")
    parser.add_argument("--round-seconds", type=float, default=0.4, help="seconds per round at most (%(default)g)")
    parser.add_argument("--target", type=float, default=defaults.target, help="gate resolution (%(default)g)")
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--json", help="write every round's block log-ratios to this file")
    parser.add_argument("--from-json", help="report the rounds saved by an earlier --json instead of measuring")
    sizing = parser.add_argument_group(
        "sizing the gate from its own A/A runs (benchmarks/gate_design.py), instead of measuring"
    )
    sizing.add_argument(
        "--from-gate-runs",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="the tables of A/A gate runs of one machine (DIR/AA-*.csv, as `validate-gate --out` keeps them; several "
        "DIRs pool their runs): the resolution of each number of processes, and the fewest whose median time cell "
        "resolves --target",
    )
    sizing.add_argument(
        "--measured-processes",
        type=int,
        default=defaults.processes,
        help="the processes of runs whose tables lack that column (%(default)d, the gate's default)",
    )
    sizing.add_argument(
        "--record",
        action="store_true",
        help="record that design for the runs' machine (results/<machine>/gate-design.jsonl): its gate then runs "
        "with it, at the default profile, regime, placements, blocks and round seconds that validate-gate runs it at",
    )
    sizing.add_argument(
        "--machine",
        help="with --record: the machine the runs were made on (default: the one their validation text names, else "
        "this one); another than the text names is refused",
    )
    args = parser.parse_args(argv)
    if args.from_gate_runs is not None:
        return _size_gate(parser, args, defaults)
    if args.record or args.machine:
        parser.error("--record and --machine size the gate from its runs: give --from-gate-runs DIR")
    for name in ("runs", "processes", "rounds", "blocks"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.processes % 2 or args.processes < 4:
        parser.error(f"--processes {args.processes}: must be even and at least 4 (half per set-up order)")
    try:
        units = components.units_for(args.cells.split(","), args.against, str(ROOT))
    except ValueError as error:
        parser.error(f"--cells {args.cells!r}: {error}")
    if args.from_json:
        saved = [json.loads(line) for line in Path(args.from_json).read_text().splitlines() if line.strip()]
        header, rows = saved[0], saved[1:]
    else:
        from benchmarks.machine import machine_name

        header = {
            "machine": machine_name(),
            "commit": head_commit()[:8] or "unknown",
            "date": time.strftime("%Y-%m-%d"),
            "command": "unfold-bench variance " + " ".join(argv),
        }
        rows = components.measure(units, args.runs, args.processes, args.rounds, args.blocks, args.round_seconds)
    text = f"{header['command']}: {header['machine']}, commit {header['commit']}, {header['date']}\n"
    text += components.report(rows, args.target, ALPHA, POWER, defaults.paired_margin)
    print_report(text, args.out)
    if args.json:
        Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in [header, *rows]))
    return 0


def _validation_header(runs: Path) -> dict[str, str]:
    """The machine and commit that ``validate-gate --out FILE`` names on FILE's first line, for the tables it keeps
    beside it in FILE's stem + "-runs/" (empty where there is no such file)."""
    from benchmarks.gate_design import validation_source

    text = runs.with_name(runs.name.removesuffix("-runs") + ".txt")
    first = text.read_text().split("\n", 1)[0] if runs.name.endswith("-runs") and text.exists() else ""
    return validation_source(first)


def _size_gate(parser: argparse.ArgumentParser, args: argparse.Namespace, defaults: Thresholds) -> int:
    """``variance --from-gate-runs``: the gate's design from its A/A tables, printed and, with --record, recorded."""
    import pandas as pd

    from benchmarks import gate_design
    from benchmarks.allocator import DEFAULT_REGIME
    from benchmarks.machine import machine_name
    from benchmarks.paired_stats import ALPHA, POWER
    from benchmarks.profiles import DEFAULT_PROFILE

    folders: list[Path] = args.from_gate_runs
    tables = [t for folder in folders for t in sorted(folder.glob("AA-*.csv"))]
    named = " ".join(str(f) for f in folders)
    if not tables:
        parser.error(f"--from-gate-runs {named!r}: no A/A table (AA-*.csv) there")
    if args.measured_processes < 4 or args.measured_processes % 2:
        parser.error(f"--measured-processes {args.measured_processes}: must be even and at least 4")
    headers = [_validation_header(folder) for folder in folders]
    machines = {h["machine"] for h in headers if h}
    if len(machines) > 1:
        parser.error(f"--from-gate-runs {named!r}: runs of several machines ({', '.join(sorted(machines))})")
    commits = ",".join(dict.fromkeys(h.get("commit", "unknown") for h in headers))
    margin, slowdown = defaults.paired_margin, 1 + defaults.time
    try:
        cells = gate_design.measured_cells([pd.read_csv(t) for t in tables], args.measured_processes)
        variances = gate_design.cell_variances(cells, ALPHA, POWER, margin)
    except ValueError as error:
        parser.error(f"--from-gate-runs {named!r}: {error}")
    measured = int(cells.processes.median())
    runs_of = next(iter(machines), None)
    table = gate_design.designs(variances, ALPHA, POWER, margin, slowdown, args.target)
    lines = [
        f"unfold-bench variance --from-gate-runs {named}: {len(tables)} A/A gate runs of "
        f"{runs_of or 'an unnamed machine'} at commit {commits}, {len(variances)} time cells, {measured} processes "
        "a run (the median)",
        f"Each cell's per-process variance read back from its printed resolution, pooled over the runs; the "
        f"resolution of each number of processes (one-sided alpha {ALPHA:g}, power {POWER:g}, margin {margin:g}), "
        f"and its time against the measured runs'.",
        "",
        gate_design.report(table, measured, args.target, slowdown),
        "",
    ]
    k = gate_design.fewest(table, args.target)
    if k is not None:
        median = float(table.loc[table.processes == k, "median"].iloc[0])
        lines.append(
            f"design: {k} processes, the fewest whose median time cell resolves {args.target:g}x ({median:.3f}x)"
        )
    else:
        lines.append(
            f"no number of processes up to {gate_design.MAX_PROCESSES} resolves {args.target:g}x at the median"
        )
    text = "\n".join(lines)
    print_report(text, args.out)
    if k is None:
        return 1
    if args.record:
        machine = args.machine or runs_of or machine_name()
        if runs_of not in (None, machine):
            parser.error(f"--machine {machine}: the runs in {named} were made on {runs_of}")
        design = gate_design.GateDesign(
            processes=k,
            profile=DEFAULT_PROFILE,  # what validate-gate runs the gate at
            regime=DEFAULT_REGIME,
            rounds=defaults.process_rounds,
            blocks=defaults.blocks,
            round_seconds=defaults.round_seconds,
            target=args.target,
            median_resolution=median,
            cells=len(variances),
            runs=len(tables),
            source=named,
            commit=commits,
            date=time.strftime("%Y-%m-%d"),
        )
        path = gate_design.record(ROOT / "results", machine, design)
        print(f"recorded for {machine} in {path}: its gate now runs {k} processes")
    return 0


COMMANDS = {"advise": advise, "variance": variance}
# The suite's other commands, each a script of its own (``scripts/``) run with the rest of the command line: its
# ``--help`` is the reference. The make targets call the same scripts.
SCRIPTS = {
    "bench": "bench.py",
    "report": "report.py",
    "regress": "regress.py",
    "validate-gate": "validate_gate.py",
    "capabilities": "capabilities.py",
    "agreement": "agreement.py",
    "context": "context.py",
    "memprofile": "memory_profile.py",
    "build-cpp": "build_cpp.py",
    "gpu-check": "gpu_check.py",
    "mutation-check": "mutation_check.py",
    "stability": "stability.py",
}


def _summary(script: str) -> str:
    """The first line of a script's docstring (read, not imported: the scripts import torch)."""
    import ast

    doc = ast.get_docstring(ast.parse((ROOT / "scripts" / script).read_text())) or ""
    return doc.splitlines()[0] if doc else ""


def _usage() -> str:
    lines = ["usage: unfold-bench [--strategy MODULE:ATTRIBUTE ...] COMMAND [--help | options]", "", "commands:"]
    lines += [f"  {name:<15}{(COMMANDS[name].__doc__ or '').splitlines()[0]}" for name in COMMANDS]
    lines += [f"  {name:<15}{_summary(script)}" for name, script in SCRIPTS.items()]
    lines += [
        "",
        "--strategy MODULE:ATTRIBUTE (repeatable) adds your own unfold, a callable with F.unfold's signature or a",
        "Strategy, to every command and every process it starts (docs/your-own-unfold.md).",
    ]
    return "\n".join(lines)


def outside_strategies(argv: list[str]) -> list[str]:
    """``argv`` without its leading ``--strategy MODULE:ATTRIBUTE`` options, which are added to
    ``$UNFOLD_BENCH_STRATEGIES`` (``impls.plugins``) before anything imports the registry."""
    import os

    specs = []
    while argv and (argv[0] == "--strategy" or argv[0].startswith("--strategy=")):
        if argv[0] == "--strategy":
            if len(argv) < 2:
                raise SystemExit("unfold-bench: error: --strategy needs MODULE:ATTRIBUTE")
            specs.append(argv[1])
            argv = argv[2:]
        else:
            specs.append(argv[0].split("=", 1)[1])
            argv = argv[1:]
    for spec in specs:
        if ":" not in spec:
            raise SystemExit(f"unfold-bench: error: --strategy {spec!r}: expected MODULE:ATTRIBUTE")
    if specs:
        os.environ[VARIABLE] = ",".join([*filter(None, os.environ.get(VARIABLE, "").split(",")), *specs])
    return argv


def _run_script(command: str, argv: list[str]) -> int:
    """Run ``command``'s script as ``__main__`` with ``argv``, its usage lines saying ``unfold-bench COMMAND``
    (``runpy.run_path`` would put the script's path in ``sys.argv[0]``, where argparse takes its name from)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("__main__", ROOT / "scripts" / SCRIPTS[command])
    module = importlib.util.module_from_spec(spec)
    saved_argv, saved_main = sys.argv, sys.modules["__main__"]
    sys.argv, sys.modules["__main__"] = [f"unfold-bench {command}", *argv], module
    try:
        spec.loader.exec_module(module)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        sys.argv, sys.modules["__main__"] = saved_argv, saved_main
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = outside_strategies(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    if argv and argv[0] in SCRIPTS:
        return _run_script(argv[0], argv[1:])
    print(_usage(), file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
    return 0 if argv and argv[0] in ("-h", "--help") else 2


if __name__ == "__main__":
    raise SystemExit(main())
