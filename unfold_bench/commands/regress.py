"""The CI regression gate: measure two revisions on this machine in one run and judge the change.

    unfold-bench regress BASE [HEAD] [--bench REGEX] [--mode paired|asv] [--processes K] [--callgrind CELL]

**paired** (the default): ``--processes`` replicate processes each import both revisions' ``impls`` side by side
and alternate their calls A B B A on freshly placed inputs (``benchmarks.paired``, ``benchmarks.replicates``); a
ratio's interval is Student's t across the processes, the unit of replication. Only the strategies whose files
differ between the revisions are measured (``benchmarks.impact``; ``--every-strategy`` for all).
**asv**: each revision in its own virtualenv, rounds interleaved, judged by ``reports.compare`` (resolves less).
``--callgrind`` adds a cell judged by its instruction count at each revision.

Exit status: 0 pass (nothing timed included, where no selected strategy's files differ); 1 a regression beyond its
threshold; 2 a failure (a benchmark failed at HEAD, HEAD stopped running every cell BASE ran so none was compared,
or the gate itself failed). Every default is ``reports.compare.Thresholds``'s (``--help`` shows them), except that
``--processes`` is this machine's recorded design where there is one (``benchmarks.gate_design``).

Details: docs/internals.md#unfold_benchcommandsregresspy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import traceback
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import pandas as pd

from benchmarks.allocator import FRESH_PAGES, get_regime, regime_environment
from benchmarks.paired import OUTSIDE_VARIABLE
from benchmarks.profiles import PROFILES, Profile, benchmark_regex
from benchmarks.runner import cell_name
from benchmarks.trees import ROOT, git, git_failure, revision_tree
from benchmarks.vocabulary import DEVICES, PASSES, timed_metric
from reports.compare import (
    P_THRESHOLD,
    Thresholds,
    callgrind_rows,
    compare,
    gate_decision,
    load_run,
    min_rounds,
    paired_table,
    resolution,
    smallest_p,
)
from reports.gate_report import format_paired, format_paired_resolution, format_resolution, format_table
from unfold_bench.common_args import (
    OptionGroup,
    add_bench,
    add_machine,
    add_mode,
    add_profile,
    add_regime,
    command_parser,
    finite_float,
    output_file,
    parse_telling_given,
    refuse_unkept_strategies,
    warn_if_busy,
)

WORK = ROOT / ".asv" / "regress"


def gate_config(source: Path = ROOT / "asv.conf.json") -> Path:
    """The project's asv configuration with absolute paths and its own results directory."""
    from asv.util import load_json

    config = load_json(str(source), js_comments=True)
    config.update(
        repo=str(ROOT),
        benchmark_dir=str(ROOT / config["benchmark_dir"]),
        env_dir=str(ROOT / config["env_dir"]),
        results_dir=str(WORK / "results"),
        html_dir=str(WORK / "html"),
        branches=["HEAD"],
    )
    path = WORK / "asv.conf.json"
    path.write_text(json.dumps(config, indent=4))
    return path


def _callgrind_cell(spec: str) -> str:
    """argparse type of ``--callgrind``: the spec, checked before any work (``benchmarks.instructions.parse_cell``)."""
    from benchmarks.instructions import parse_cell

    try:
        parse_cell(spec)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return spec


def checkout(revision: str, name: str, repo: Path = ROOT) -> AbstractContextManager[Path]:
    """``revision`` of the git repository ``repo`` (this one by default) checked out in a temporary git worktree
    ``.asv/regress/worktree-NAME``, removed afterwards (``benchmarks.trees``)."""
    return revision_tree(revision, WORK / f"worktree-{name}", repo)


def count_with_callgrind(cells: list[str], revisions: list[str], profile: str) -> dict[str, list[int | None]]:
    """Instruction counts of each cell ("strategy:config:forward|forward_backward") of ``profile`` at each revision,
    each revision's impls checked out in a temporary git worktree; ``None`` where a count failed (its error is
    printed and the gate reports the cell as failed, it does not stop)."""
    from benchmarks.instructions import count_instructions

    counts: dict[str, list[int | None]] = {cell: [] for cell in cells}
    for revision in revisions:
        with checkout(revision, revision[:12]) as tree:
            for cell in cells:
                strategy, config, which = cell.split(":")
                print(f"callgrind: {cell} at {revision[:8]} ...", flush=True)
                try:
                    counts[cell].append(count_instructions(tree, strategy, config, which, profile))
                except RuntimeError as error:
                    print(f"callgrind: {cell} at {revision[:8]} FAILED: {error}", flush=True)
                    counts[cell].append(None)
    return counts


def selected_units(profile: Profile, strategies: Sequence[str], bench: str) -> list[tuple[str, str, str]]:
    """The (strategy, config, device) units of ``profile`` that ``bench`` selects (``unit_names``), of ``strategies``,
    on the devices this machine has."""
    from benchmarks.cells import device_unavailable

    devices = [d for d in DEVICES if device_unavailable(d) is None]
    return [
        (s, c.name, d)
        for c in profile.configs()
        for s in strategies
        for d in devices
        if any(re.search(bench, name) for name in unit_names(profile, s, c.name, d))
    ]


def unit_names(profile: Profile, strategy: str, config: str, device: str) -> list[str]:
    """The names ``--bench`` is matched against in paired mode: the unit's asv time cells, as the asv mode and
    ``make bench`` match them, and its short form ``strategy, config, device``."""
    unit = (strategy, config, device)
    cells = [cell_name("unfold", profile.class_name, timed_metric(which), unit) for which in PASSES]
    return [*cells, f"{strategy}, {config}, {device}"]


def run_paired(
    args: argparse.Namespace, base: str, head: str, thresholds: Thresholds
) -> tuple[pd.DataFrame, list[str], bool]:
    """The paired mode: both revisions checked out, every selected (strategy, config, device) of a strategy the change
    can touch (``benchmarks.impact``; every one with ``--every-strategy`` or another repository's ``--strategy``)
    measured in replicate processes (``benchmarks.paired``), progress printed as cells finish; the table and the raw
    measurements are written to ``.asv/regress/paired-BASE-HEAD.*``. Returns the table, the selected strategies left
    unmeasured because their files are identical at both revisions, and whether that was every one of them."""
    from benchmarks.cells import device_unavailable
    from benchmarks.impact import impact
    from benchmarks.paired import Design, load_strategies, measure_in_processes
    from reports.gate_report import format_paired_row

    regime = get_regime(args.regime)
    measurements: list[dict] = []
    with checkout(base, "base", args.repo) as base_tree, checkout(head, "head", args.repo) as head_tree:
        names: list[str] = []
        outside = os.environ.get(OUTSIDE_VARIABLE)
        loaded = f"--strategy {outside!r}" if outside else "impls"
        for tree in (base_tree, head_tree):
            try:
                names += [name for name in load_strategies(tree) if name not in names]
            except Exception as error:  # its processes report it as a failure at that revision
                print(f"paired: {loaded} does not load from {tree.name}: {type(error).__name__}: {error}", flush=True)
        if not names and outside:  # the user's module: its own error above says why, no traceback of the gate's
            raise GateStoppedError(f"{loaded} loads from neither revision (above)")
        if not names:
            raise RuntimeError("neither revision's impls imports")
        devices = [d for d in DEVICES if device_unavailable(d) is None]
        profile = PROFILES[args.profile]
        units = selected_units(profile, names, args.bench)
        if not units:  # before the impact analysis and any process: the selection is what is wrong
            print(
                f"paired: --bench {args.bench!r} selects no cell of the {profile.name} profile (strategies at either "
                f"revision: {', '.join(names)}; configs: {', '.join(c.name for c in profile.configs())}; devices "
                f"here: {', '.join(devices)})",
                flush=True,
            )
            return paired_table([], args.profile, thresholds), [], False
        identical: list[str] = []
        if not (args.every_strategy or os.environ.get(OUTSIDE_VARIABLE)):
            try:
                change = impact(base_tree, head_tree)
            except Exception as error:  # a revision whose impls does not import: its processes report it
                print(
                    f"paired: which strategies the change touches is unknown ({type(error).__name__}: {error}); "
                    "measuring every one",
                    flush=True,
                )
            else:
                selected = list(dict.fromkeys(s for s, _, _ in units))
                identical = [s for s in selected if not change.touches(s)]
                units = [unit for unit in units if change.touches(unit[0])]
                print(f"paired: {change.why}", flush=True)
                if identical:
                    print(
                        f"paired: not measured, their files identical at both revisions: {', '.join(identical)} "
                        f"({len(identical)} of {len(selected)} strategies; --every-strategy measures them too)",
                        flush=True,
                    )
        nothing_to_time = bool(identical) and not units  # every selected strategy identical
        design = Design(thresholds.processes, thresholds.process_rounds, thresholds.blocks, thresholds.round_seconds)
        if not nothing_to_time:
            print(
                f"paired: {len(units)} strategy-config units in {design.processes} processes (half with each "
                f"revision set up first), {design.rounds} input placements each, at most {design.blocks} blocks or "
                f"{design.round_seconds:g} s per placement; timed in the {regime.name} regime: {regime.label}",
                flush=True,
            )
            rows = measure_in_processes(
                base_tree,
                head_tree,
                units,
                args.profile,
                design,
                thresholds.paired_margin,
                regime_environment(regime),
                progress=lambda line: print(f"paired: {line}", flush=True),
            )
            for row in rows:
                measurements.append(row)
                print(format_paired_row(row), flush=True)
    table = paired_table(measurements, args.profile, thresholds)
    stem = WORK / f"paired-{base[:8]}-{head[:8]}"
    stem.with_suffix(".jsonl").write_text("".join(json.dumps(m) + "\n" for m in measurements))
    table.to_csv(stem.with_suffix(".csv"), index=False)
    print(f"paired report: {stem}.csv, raw measurements: {stem}.jsonl")
    return table, identical, nothing_to_time


def run_asv(
    args: argparse.Namespace, base: str, head: str, machine: str, thresholds: Thresholds
) -> tuple[pd.DataFrame, int, str]:
    """The asv mode: ``asv continuous`` with interleaved rounds (fresh-pages regime), then ``reports.compare``;
    (table, asv's exit status, the resolution line)."""
    shutil.rmtree(WORK / "results" / machine, ignore_errors=True)  # no stale cells from an earlier gate run
    config = gate_config()
    pattern = benchmark_regex(PROFILES[args.profile], args.bench, suites=("unfold",))  # the strategies' cells
    command = [
        sys.executable,
        "-m",
        "asv",
        "--config",
        str(config),
        "continuous",
        "--interleave-rounds",
        "-a",
        f"rounds={thresholds.rounds}",
        "-a",
        f"repeat={thresholds.repeat}",
        "--machine",
        machine,
        "--show-stderr",
        "-b",
        pattern,
        base,
        head,
    ]
    print(
        f"asv: significant by asv's Mann-Whitney U test on {thresholds.rounds} round medians a side; timed in the "
        f"{FRESH_PAGES.name} regime: {FRESH_PAGES.label}",
        flush=True,
    )
    print("$ " + " ".join(command), flush=True)
    environment = {**regime_environment(FRESH_PAGES), "PYTHONUNBUFFERED": "1"}
    asv_status = subprocess.run(command, cwd=ROOT, env=environment).returncode
    results_dir = str(WORK / "results")
    try:
        before, after = load_run(results_dir, machine, base), load_run(results_dir, machine, head)
    except LookupError as error:
        print(f"\nGATE ERROR: asv produced no comparable results (asv exit status {asv_status}): {error}")
        return pd.DataFrame(), 2, ""
    table = compare(before, after, thresholds, rounds=thresholds.rounds, repeat=thresholds.repeat)
    power = resolution(before, after, thresholds.rounds, thresholds)
    line = format_resolution(power)
    if args.all_rows and not power.empty:
        line += "\n" + power.to_string(index=False, float_format=lambda v: f"{v:.3g}")
    return table, asv_status, line


def run_gate(argv: Sequence[str] | None = None) -> int:
    defaults = Thresholds()
    parser = command_parser("regress", __doc__)
    parser.add_argument("base", help="the revision to compare against (e.g. origin/main)")
    parser.add_argument("head", nargs="?", default="HEAD", help="the revision under test (default HEAD)")
    add_mode(parser)
    add_profile(parser)
    add_bench(parser)
    parser.add_argument(
        "--repo",
        type=Path,
        default=ROOT,
        help="the git repository whose revisions are compared (default: this one); with --strategy, your own",
    )
    parser.add_argument(
        "--strategy",
        dest="outside",
        help="MODULE:ATTRIBUTE: gate that unfold of --repo (a callable with F.unfold's signature, or a Strategy), "
        "loaded from each revision's tree (its src/ or its root), instead of this repository's impls",
    )
    parser.add_argument(
        "--memory-threshold",
        type=finite_float,
        default=defaults.memory,
        help="relative growth that fails (%(default)g)",
    )
    parser.add_argument(
        "--instruction-threshold",
        type=finite_float,
        default=defaults.instructions,
        help="callgrind growth that fails (%(default)g)",
    )
    paired = OptionGroup(parser.add_argument_group("paired mode").add_argument)
    paired.add_argument(
        "--processes",
        type=int,
        help="replicate processes, even: half set up each revision first (default: this machine's recorded design, "
        f"results/<machine>/gate-design.jsonl from `unfold-bench variance --from-gate-runs --record`, else "
        f"{defaults.processes})",
    )
    paired.add_argument(
        "--rounds-per-process",
        dest="process_rounds",
        type=int,
        default=defaults.process_rounds,
        help="fresh input placements per process (%(default)d)",
    )
    paired.add_argument(
        "--blocks", type=int, default=defaults.blocks, help="blocks A B B A per placement at most (%(default)d)"
    )
    paired.add_argument(
        "--round-seconds",
        type=finite_float,
        default=defaults.round_seconds,
        help="seconds of blocks per placement at most (%(default)g)",
    )
    paired.add_argument(
        "--every-strategy",
        action="store_true",
        help="measure every selected strategy, also those whose files are identical at both revisions (by default "
        "only the strategies the change can touch are measured: benchmarks.impact)",
    )
    paired.add_argument(
        "--margin",
        type=finite_float,
        default=defaults.paired_margin,
        help="slowdown the whole interval must clear to fail (%(default)g)",
    )
    paired.add_argument(
        "--resolution-limit",
        type=finite_float,
        default=defaults.resolution_limit,
        help="a time cell that resolves no better is reported unresolved (%(default)g)",
    )
    add_regime(paired)
    processes = OptionGroup(parser.add_argument_group("asv mode").add_argument)
    processes.add_argument(
        "--time-threshold", type=finite_float, default=defaults.time, help="relative slowdown that fails (%(default)g)"
    )
    processes.add_argument(
        "--rounds",
        type=int,
        default=defaults.rounds,
        help=f"interleaved rounds (processes) a side (%(default)d); {min_rounds()}+ reach p < {P_THRESHOLD}",
    )
    processes.add_argument("--repeat", type=int, default=defaults.repeat, help="samples per round, fixed (%(default)d)")
    add_machine(parser)
    parser.add_argument(
        "--verdict-file",
        type=output_file,  # checked where given; its folder, or the default's, is made when the gate starts
        help=f"where the verdict and every cell are written as JSON ({WORK / 'verdict.json'}); under GitHub "
        "Actions the job summary gets the table and each flagged cell an ::error annotation",
    )
    parser.add_argument("--all-rows", action="store_true", help="print unchanged cells too")
    parser.add_argument(
        "--callgrind",
        action="append",
        default=[],
        type=_callgrind_cell,
        metavar="STRATEGY:CONFIG:forward|forward_backward",
        help="also judge this cell by its instruction count (deterministic; minutes per cell); repeatable",
    )
    args, given = parse_telling_given(parser, argv, paired, processes)
    refuse_unkept_strategies(parser)
    for named, mode in zip(given, ("paired", "asv")):  # an option the other mode reads changes nothing
        if args.mode != mode and named:
            parser.error(f"{named[0]}: an option of --mode {mode}, which this run (--mode {args.mode}) does not read")
    if args.mode == "asv" and args.rounds < 1:
        parser.error(
            f"--rounds {args.rounds}: a number of rounds a side, at least {min_rounds()} to reach p < {P_THRESHOLD}"
        )
    if args.mode == "asv" and args.rounds < min_rounds():
        parser.error(
            f"--rounds {args.rounds}: the Mann-Whitney U test on {args.rounds} round medians a side cannot reach "
            f"p < {P_THRESHOLD} (smallest p {smallest_p(args.rounds, args.rounds):.3g}); use at least {min_rounds()}"
        )
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: need at least 1 sample per round")
    if args.processes is not None and (args.processes < 4 or args.processes % 2):
        parser.error(f"--processes {args.processes}: must be even and at least 4 (two per set-up order)")
    for name, value in (("--rounds-per-process", args.process_rounds), ("--blocks", args.blocks)):
        if value < 1:
            parser.error(f"{name} {value}: must be at least 1")
    if args.round_seconds <= 0:
        parser.error(f"--round-seconds {args.round_seconds}: must be above 0 seconds")
    if args.resolution_limit <= 1:
        parser.error(f"--resolution-limit {args.resolution_limit}: a resolution is a slowdown factor, so above 1")
    for name, value in (
        ("--margin", args.margin),
        ("--memory-threshold", args.memory_threshold),
        ("--instruction-threshold", args.instruction_threshold),
        ("--time-threshold", args.time_threshold),
    ):
        if value < 0:
            parser.error(f"{name} {value:g}: must be at least 0 (a relative growth)")
    try:
        re.compile(args.bench)
    except re.error as error:
        parser.error(f"--bench {args.bench!r}: not a regular expression ({error})")

    args.repo = args.repo.resolve()
    if not args.repo.is_dir():
        parser.error(f"--repo {str(args.repo)!r}: {'not a folder' if args.repo.exists() else 'no such folder'}")
    if args.outside is not None:
        if ":" not in args.outside:
            parser.error(f"--strategy {args.outside!r}: expected MODULE:ATTRIBUTE")
        if args.mode != "paired":
            parser.error("--strategy: another repository's unfold is gated in the paired mode only")
        if args.callgrind:
            parser.error("--callgrind: counts the instructions of this repository's strategies, not with --strategy")
        os.environ[OUTSIDE_VARIABLE] = args.outside  # this process and every one it starts load it from the trees
    elif args.repo != ROOT.resolve():
        parser.error(f"--repo {str(args.repo)!r}: give the unfold to gate there with --strategy MODULE:ATTRIBUTE")
    try:
        base, head = git("rev-parse", args.base, repo=args.repo), git("rev-parse", args.head, repo=args.repo)
    except subprocess.CalledProcessError as error:
        parser.error(f"revisions {args.base!r}, {args.head!r} in {args.repo}: {git_failure(error)}")
    from reports.gate_report import publish, verdict_record

    warn_if_busy()
    # The work starts: a gate that stops without a verdict (the machine's record or the gate's design unreadable,
    # a crash, asv saving nothing) leaves this record, not an earlier run's verdict, for a job that reads the file
    verdict_file = Path(args.verdict_file or WORK / "verdict.json")
    publish(verdict_record(pd.DataFrame(), 2, STOPPED, base, head, {"mode": args.mode}), verdict_file, {})
    from benchmarks.machine import register_machine

    regime = FRESH_PAGES if args.mode == "asv" else get_regime(args.regime)  # the asv mode times in fresh pages
    info = register_machine(args.machine, regime.name, regime_environment(regime))  # as make bench names it
    machine = info["machine"]
    if args.processes is None:
        args.processes = defaults.processes
        if args.mode == "paired":
            from benchmarks import gate_design

            args.processes, why = gate_design.processes_for(
                ROOT / "results",
                machine,
                args.profile,
                regime.name,
                args.process_rounds,
                args.blocks,
                args.round_seconds,
                defaults.processes,
            )
            print(f"paired: {args.processes} processes, {why}", flush=True)
    WORK.mkdir(parents=True, exist_ok=True)
    thresholds = Thresholds(
        args.time_threshold,
        args.memory_threshold,
        instructions=args.instruction_threshold,
        paired_margin=args.margin,
        resolution_limit=args.resolution_limit,
        processes=args.processes,
        process_rounds=args.process_rounds,
        blocks=args.blocks,
        round_seconds=args.round_seconds,
        rounds=args.rounds,
        repeat=args.repeat,
    )
    print(
        f"gate ({args.mode} mode): {base[:8]} (base) vs {head[:8]} (head) on {machine}; memory +"
        f"{args.memory_threshold:.0%}",
        flush=True,
    )
    identical: list[str] = []
    nothing_to_time = False
    if args.mode == "paired":
        (table, identical, nothing_to_time), asv_status = run_paired(args, base, head, thresholds), 0
        power = format_paired_resolution(table)
    else:
        table, asv_status, power = run_asv(args, base, head, machine, thresholds)
        if table.empty and asv_status == 2:
            failed = "FAIL: asv saved no comparable results (its output above says why)"
            publish(verdict_record(table, 2, failed, base, head, {"mode": args.mode}), verdict_file)
            return 2
    if args.callgrind:
        counts = count_with_callgrind(args.callgrind, [base, head], args.profile)
        counted = callgrind_rows({c.replace(":", ", "): tuple(v) for c, v in counts.items()}, thresholds)
        table = pd.concat([table, counted], ignore_index=True)
    print(f"\nGate: {len(table)} cells compared, {base[:8]} -> {head[:8]}")
    if args.mode == "paired":
        print(format_paired(table, all_rows=True))
        if (table["mode"] == "callgrind").any():
            print(format_table(table[table["mode"] == "callgrind"], only_changed=False))
    else:
        print(format_table(table, only_changed=not args.all_rows))
    print(power)
    status, verdict = gate_decision(table, asv_status, nothing_to_time)
    counts = table.verdict.value_counts().to_dict()
    if args.mode == "asv":
        print(f"\nasv continuous exit status: {asv_status}")
    print(f"{verdict} ({', '.join(f'{n} {v}' for v, n in sorted(counts.items()))})" if counts else verdict)
    extra = {
        "mode": args.mode,
        "profile": args.profile,
        "machine": machine,
        "resolution_line": power,
        "identical": identical,
    }
    publish(verdict_record(table, status, verdict, base, head, extra), verdict_file)
    return status


class GateStoppedError(Exception):
    """The gate cannot go on, for the reason its message gives: nothing of the gate failed, so no traceback."""


STOPPED = "GATE ERROR: the gate stopped before a verdict (its output says why)"
REFUSED = "GATE ERROR: the gate refused its arguments (its output says why)"


def _record_refusal(argv: Sequence[str] | None) -> None:
    """Where a refused gate (exit status 2 before any work) was given ``--verdict-file``, a record saying so there, so
    that a job reading the file finds no earlier run's verdict; the default file is left alone, as a refusal does
    no work (its exit status is the verdict)."""
    from reports.gate_report import publish, verdict_record

    given = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # as the command's own parser
    given.add_argument("--verdict-file")
    known, _ = given.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    if known.verdict_file:
        record = verdict_record(pd.DataFrame(), 2, REFUSED, "", "", {})
        try:
            publish(record, Path(known.verdict_file), {})
        except OSError:  # the refusal may be of that very path
            pass


def main(argv: Sequence[str] | None = None) -> int:
    """``run_gate``, with any error of the gate itself an exit status of 2 (never 1, which means a regression)."""
    try:
        return run_gate(argv)
    except SystemExit as exit:
        if exit.code == 2:  # argparse's refusal
            _record_refusal(argv)
        raise
    except GateStoppedError as stop:
        print(f"GATE ERROR: {stop}; no verdict")
        return 2
    except Exception:
        traceback.print_exc()
        print("GATE ERROR: the gate itself failed (above); no verdict")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
