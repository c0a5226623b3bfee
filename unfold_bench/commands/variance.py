"""Where the error of a paired ratio is (block, placement, process, run), and the design that resolves a target.

``unfold-bench variance --help`` gives the levels, the formulas and the options; docs/methodology.md ("Where the
error is") says how to read it. With ``--from-gate-runs`` it sizes the regression gate's processes from the gate's
own A/A runs (``benchmarks.gate_design``); a profile's ``ratio_processes`` comes from ``unfold-bench stability``'s
forecast instead.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.trees import ROOT, head_commit
from unfold_bench.common_args import (
    command_parser,
    finite_float,
    machine_argument,
    output_file,
    print_report,
    refuse_unkept_strategies,
    warn_if_busy,
    with_folder_made,
)

if TYPE_CHECKING:
    from reports.compare import Thresholds

# the cells the gate resolves worst, where its design is decided
GATE_HARDEST_CELLS = ("gather:allcnnc-conv2:forward", "cpp:allcnnc-conv2:forward", "compiled:allcnnc-conv3:forward")


def main(argv: list[str] | None = None) -> int:
    """Where the error of a paired ratio is (call, placement, process, run), and the design that resolves a target."""
    from benchmarks import variance as components
    from benchmarks.allocator import DEFAULT_REGIME, get_regime, regime_environment
    from benchmarks.paired_stats import ALPHA, POWER
    from benchmarks.profiles import DEFAULT_PROFILE
    from reports.compare import Thresholds
    from unfold_bench.common_args import OptionGroup, add_cells, add_regime, parse_cells, parse_telling_given

    defaults = Thresholds()
    parser = command_parser("variance", components.__doc__)
    measuring = parser.add_argument_group("measuring (not with --from-json or --from-gate-runs)")
    measurement = OptionGroup(measuring.add_argument)
    add_cells(measurement, default=GATE_HARDEST_CELLS)
    measurement.add_argument(
        "--against",
        default="self",
        help="side A: 'self' (a second import of the same code, the gate's A/A) or a strategy (%(default)s)",
    )
    measurement.add_argument("--runs", type=int, default=2, help="runs, one after another (%(default)d)")
    measurement.add_argument("--processes", type=int, default=6, help="processes per run, even (%(default)d)")
    measurement.add_argument("--rounds", type=int, default=4, help="placements per process (%(default)d)")
    measurement.add_argument("--blocks", type=int, default=32, help="blocks per round at most (%(default)d)")
    measurement.add_argument(
        "--round-seconds", type=finite_float, default=0.4, help="seconds per round at most (%(default)g)"
    )
    parser.add_argument("--target", type=finite_float, default=defaults.target, help="gate resolution (%(default)g)")
    add_regime(parser, default=None)
    parser.add_argument("--out", type=output_file, help="also write the report to this file")
    measurement.add_argument("--json", type=output_file, help="write every round's block log-ratios to this file")
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
        type=machine_argument,
        help="with --record: the machine the runs were made on (default: the one their validation text names, else "
        "this one); another than the text names is refused",
    )
    arguments = sys.argv[1:] if argv is None else list(argv)
    args, (measured,) = parse_telling_given(parser, arguments, measurement)
    if args.from_gate_runs is None and not args.from_json:  # a measurement without the strategy named
        refuse_unkept_strategies(parser)
    if args.regime is not None and (args.from_gate_runs is not None or args.from_json):
        parser.error(f"--regime {args.regime}: only for a measurement (the runs read back were timed in their own)")
    if measured and (args.from_gate_runs is not None or args.from_json):
        source = "--from-json" if args.from_json else "--from-gate-runs"
        parser.error(f"{measured[0]}: only for a measurement; {source} reports runs already made")
    if args.target <= 1:
        parser.error(f"--target {args.target}: a resolution is a slowdown factor above 1")
    if args.from_gate_runs is not None:
        return _size_gate(parser, args, defaults, "unfold-bench variance " + shlex.join(arguments))
    if args.record or args.machine:
        parser.error("--record and --machine size the gate from its runs: give --from-gate-runs DIR")
    if args.from_json and not Path(args.from_json).is_file():
        parser.error(f"--from-json {args.from_json}: no such file")
    if args.against != "self":
        from impls import STRATEGIES

        if args.against not in STRATEGIES:
            parser.error(f"--against {args.against!r}: 'self' or a strategy ({', '.join(STRATEGIES)})")
    for name in ("runs", "processes", "rounds", "blocks"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.rounds < 2:
        parser.error(f"--rounds {args.rounds}: the placements' level needs at least 2 rounds a process")
    if args.processes % 2 or args.processes < 4:
        parser.error(f"--processes {args.processes}: must be even and at least 4 (half per set-up order)")
    if args.round_seconds <= 0:
        parser.error(f"--round-seconds {args.round_seconds:g}: must be above 0 seconds")
    if args.from_json:
        try:
            saved = [json.loads(line) for line in Path(args.from_json).read_text().splitlines() if line.strip()]
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            parser.error(f"--from-json {args.from_json}: not the JSON lines that --json writes ({error})")
        wanted = {"command", "machine", "commit", "date"}
        if not saved or not isinstance(saved[0], dict) or not wanted <= set(saved[0]):
            parser.error(
                f"--from-json {args.from_json}: no header line with {', '.join(sorted(wanted))} (--json writes one)"
            )
        header, rows = saved[0], saved[1:]
    else:
        from benchmarks.machine import machine_name

        cells = parse_cells(args.cells, DEFAULT_PROFILE, parser)  # exits naming a bad one
        units = components.units_for(cells, args.against, str(ROOT))

        regime = get_regime(args.regime or DEFAULT_REGIME)
        header = {
            "machine": machine_name(regime.name),
            "commit": head_commit()[:8] or "unknown",
            "date": time.strftime("%Y-%m-%d"),
            "command": "unfold-bench variance " + " ".join(arguments),
            "regime": regime.label,
        }
        warn_if_busy()
        rows = components.measure(
            units,
            args.runs,
            args.processes,
            args.rounds,
            args.blocks,
            args.round_seconds,
            env=regime_environment(regime),
        )
    regime_label = header.get("regime", "regime not recorded")
    text = f"{header['command']}: {header['machine']}, commit {header['commit']}, {header['date']}, {regime_label}\n"
    text += components.report(rows, args.target, ALPHA, POWER, defaults.paired_margin)
    print_report(text, args.out)
    if args.json:
        with_folder_made(args.json).write_text("".join(json.dumps(r) + "\n" for r in [header, *rows]))
    return 0


def _validation_header(runs: Path) -> dict[str, str]:
    """The machine, commit and allocator setting that ``validate-gate --out FILE`` names on FILE's first line, for
    the tables it keeps beside it in FILE's stem + "-runs/" (empty where there is no such file)."""
    from benchmarks.gate_design import validation_first_line, validation_source

    return validation_source(validation_first_line(runs))


def _size_gate(parser: argparse.ArgumentParser, args: argparse.Namespace, defaults: Thresholds, command: str) -> int:
    """``variance --from-gate-runs``: the gate's design from its A/A tables, printed and, with --record, recorded
    (only from runs timed under the allocator setting the gate's regime has today)."""
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
    allocators = {h.get("allocator", "") for h in headers}  # "": runs from before validate-gate named it
    today = gate_design.allocator_of(DEFAULT_REGIME)  # the gate's regime
    if args.record and allocators != {today}:
        parser.error(
            f"--record: the runs in {named} were timed under the allocator setting "
            f"{' and '.join(repr(a or 'not named (older runs)') for a in sorted(allocators))}, not this machine's "
            f"gate's today ({today!r}): a design sized from them would not be used; size it from new runs"
        )
    if args.record and args.machine and next(iter(machines), args.machine) != args.machine:
        parser.error(f"--machine {args.machine}: the runs in {named} were made on {next(iter(machines))}")
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
        f"{command}: {len(tables)} A/A gate runs of "
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
            allocator=today,
        )
        path = gate_design.record(ROOT / "results", machine, design)
        print(f"recorded for {machine} in {path}: its gate now runs {k} processes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
