"""Run the asv suite on this machine and print a summary: the entry point of `make bench`.

By default: the quick profile, timed in the warm regime (glibc as a user's process has it; ``--regime
fresh-pages`` times every output on first-touched memory, recorded as a machine of its own; see
``benchmarks/allocator.py``), on this machine's devices (without a GPU no CUDA cell is run: asv records each n/a
and the summary says why; with ``--commits`` asv skips each in its setup), in the current environment (asv's
``--python=same``), recorded under the current commit. The run is one asv run per config
(``benchmarks/runner.py``): each saves when it ends, a kill loses only the config in flight, and ``--resume``
carries on where a killed run stopped. asv's output goes to a log file; the terminal gets one line per config,
then a summary that fits a screen, and the full tables are written beside the site.

``--profile full`` runs the configs' real batch size; ``--thp`` runs with huge pages for PyTorch's CPU
allocations as a separately named machine; ``--commits RANGE`` lets asv build and benchmark each commit of a
git range in its own virtualenv instead (one asv run, not resumable).
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.allocator import get_regime, regime_environment
from benchmarks.cells import GATE_CACHE_VARIABLE, Cell, cached_verdict, device_unavailable, skip_reason_here
from benchmarks.kept_samples import CommitResults
from benchmarks.machine import THP_VARIABLE, register_machine
from benchmarks.process_guard import run_guarded
from benchmarks.profiles import PROFILES, benchmark_regex
from benchmarks.runner import Ledger, plan, plan_digest, run_chunks
from benchmarks.trees import ROOT, git, git_failure
from benchmarks.vocabulary import DEVICES
from impls.cpu_isa import isa_environment
from unfold_bench.common_args import (
    add_bench,
    add_commit,
    add_config,
    add_machine,
    add_profile,
    add_regime,
    command_parser,
    output_folder,
    strategy_refusal,
    warn_if_busy,
)

# What bench exits with when it ran nothing (a usage error, a selection of no cell): sysexits' EX_USAGE, so that
# make bench stops there instead of checking capabilities and rebuilding the site (2 is a failed cell)
NOTHING_RUN = 64
ASV_SELECTORS = ("NEW", "ALL", "EXISTING")  # what asv run takes besides a git range (and HASHFILE:<file>)


def _at_least_two(text: str) -> int:
    """argparse type of ``--ratio-processes``: a whole number of at least two, refused before any work. A paired
    ratio's interval is across processes: one gives none, and a pick cannot tell a tie without it."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"{value} processes: at least two, for an interval across processes")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("bench", __doc__)
    add_profile(parser)
    add_regime(parser)
    parser.add_argument("--thp", action="store_true", help=f"run with {THP_VARIABLE}=1 (a separately named machine)")
    add_machine(parser)
    add_bench(parser)
    parser.add_argument(
        "--ratio-processes",
        type=_at_least_two,
        help="replicate processes of the paired ratios, each an asv run of its own, at least 2 (default: the "
        "profile's; fewer is quicker and gives a wider interval)",
    )
    parser.add_argument("--resume", action="store_true", help="skip the configs a killed run of this commit finished")
    parser.add_argument("--commits", help="a git range (e.g. main~3..main) to build and benchmark commit by commit")
    add_config(parser)
    add_commit(parser)
    parser.add_argument(
        "--summaries",
        type=output_folder,
        default=str(ROOT / "reports" / "summaries"),
        help="where the run's text summary is written",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as refused:  # argparse's usage errors exit 2, which also means a failed cell
        raise SystemExit(NOTHING_RUN if refused.code == 2 else refused.code) from None
    if args.commits:
        given = [o for o, v in (("--resume", args.resume), ("--ratio-processes", args.ratio_processes)) if v]
        given += ["--commit"] if args.commit else []
        if given:
            print(f"unfold-bench bench: {', '.join(given)} cannot go with --commits {args.commits!r}", file=sys.stderr)
            return NOTHING_RUN
        if args.commits not in ASV_SELECTORS and not args.commits.startswith("HASHFILE:"):  # else asv's own
            try:
                found = git("rev-list", "--max-count=1", args.commits)
            except subprocess.CalledProcessError as error:
                found, why = "", git_failure(error)
            else:
                why = "it selects no commit"
            if not found:
                print(f"unfold-bench bench: --commits {args.commits!r}: {why}", file=sys.stderr)
                return NOTHING_RUN

    refused = strategy_refusal()
    if refused:
        print(f"unfold-bench bench: {refused}", file=sys.stderr)
        return NOTHING_RUN
    if args.thp:
        os.environ[THP_VARIABLE] = "1"  # here and in every asv subprocess
    regime = get_regime(args.regime)
    env = {**regime_environment(regime), "PYTHONUNBUFFERED": "1"}
    if env.get("PYTHONPATH"):  # asv drops PYTHONPATH in its processes and takes ASV_PYTHONPATH instead: a module a
        env.setdefault("ASV_PYTHONPATH", env["PYTHONPATH"])  # user names (impls.plugins) must import there too
    env.setdefault(GATE_CACHE_VARIABLE, str(ROOT / ".asv" / "gate"))
    if not args.commits:  # asv's own virtualenvs may hold another torch: their processes probe for themselves
        env.update(isa_environment())  # probed once here, not in each of the run's processes that reads it
    profile = PROFILES[args.profile]
    lacking = {device: why for device in DEVICES if (why := device_unavailable(device)) is not None}
    devices = [device for device in DEVICES if device not in lacking]
    chunks = None if args.commits else plan(profile, args.bench, args.ratio_processes, devices)
    if chunks == []:
        missing = "; ".join(f"{device}: {why}" for device, why in lacking.items())
        why = f" on this machine ({missing})" if lacking and plan(profile, args.bench, args.ratio_processes) else ""
        print(f"no {profile.name}-profile cell matches --bench {args.bench!r}{why}", file=sys.stderr)
        return NOTHING_RUN
    # asked before this run writes its own records (machine.json, catalogue.jsonl) beside the committed results
    uncommitted = not args.commits and args.commit is None and git("status", "--porcelain", "--untracked-files=no")
    warn_if_busy()
    info = register_machine(args.machine, regime.name, env)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_path = ROOT / ".asv" / "logs" / f"bench-{info['machine']}-{profile.name}-{stamp}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no .asv yet
    print(f"machine {info['machine']}: {info['device_names']}; torch {info['torch_version']}")
    from impls import PLUGIN_PROBLEMS, STRATEGIES
    from impls.plugins import describe, set_aside_count

    for line in describe(STRATEGIES, PLUGIN_PROBLEMS):
        print(line)
    print(f"timing regime: {regime.label}: {regime.description}")
    print(f"asv's output: {log_path}")
    from asv.config import Config

    from benchmarks.catalogue import write_catalogue

    results_dir = Path(args.config).resolve().parent / Config.load(args.config).results_dir  # as asv resolves it
    commit_recorded = None if args.commits else (args.commit or git("rev-parse", "HEAD"))
    write_catalogue(results_dir / info["machine"], commit_recorded)  # what the reports need of the registry

    asv = [sys.executable, "-m", "asv", "--config", args.config, "run", "--machine", info["machine"], "--show-stderr"]
    start = time.monotonic()
    if args.commits:
        commit = None
        with log_path.open("ab") as log:
            status = run_guarded([*asv, "-b", benchmark_regex(profile, args.bench), args.commits], env, ROOT, log)
    else:
        commit = args.commit or git("rev-parse", "HEAD")
        if uncommitted:
            print(f"warning: uncommitted changes; results are recorded under HEAD {commit[:8]} all the same")
        key = {
            "machine": info["machine"],
            "commit": commit,
            "python": sys.executable,
            "profile": profile.name,
            "bench": args.bench,
            "ratio_processes": str(args.ratio_processes or profile.ratio_processes),
            "results": str(results_dir),  # two runs of one commit into two results directories keep two ledgers
            "plan": plan_digest(chunks),
        }
        ledger = Ledger(ROOT / ".asv" / "progress", key)
        command = [*asv, "--python=same", "--set-commit-hash", commit]
        saved = CommitResults.of_this_interpreter(results_dir / info["machine"], commit)  # not another's file
        status = run_chunks(chunks, command, env, ROOT, log_path, ledger, args.resume, results=saved)
        from asv.results import get_filename

        from benchmarks.selections import record_if_finished

        results_file = Path(get_filename(info["machine"], commit, saved.environment)).name
        planned = [chunk.name for chunk in chunks]
        record_if_finished(
            results_dir / info["machine"], results_file, profile.name, args.bench, planned, ledger.finished(), status
        )
    print(f"benchmarks finished in {(time.monotonic() - start) / 60:.1f} min, asv exit status {status}")

    from reports.summary import print_summary

    skip_reason = functools.partial(skip_reason_here, profile=profile)

    def failure_reason(strategy: str, config: str, device: str, metric: str) -> str | None:
        """Why the correctness gate failed the cell, where it kept its verdict (an error or a timeout: asv's log)."""
        try:
            verdict = cached_verdict(Cell.from_names(strategy, config, device, profile), env[GATE_CACHE_VARIABLE])
        except KeyError:
            return None
        return None if verdict is None else verdict.problem(backward="backward" in metric)

    summaries = Path(args.summaries)
    print_summary(
        results_dir, info["machine"], profile.name, commit, skip_reason, summaries, args.bench, failure_reason
    )
    if PLUGIN_PROBLEMS:  # a plugin that could not be loaded counts as a failed cell: the others' results stand
        print(set_aside_count(PLUGIN_PROBLEMS))
        status = max(status, 2)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
