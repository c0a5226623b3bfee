"""Print again the summary that ends `make bench`, for any run in the results: one machine, profile and commit.

The summary is read from the results (``reports.summary``, which times nothing), under the reports' rules of this
checkout: a run made earlier is shown as the site now shows it. asv records a skipped cell as "n/a" alone; the
reason is named where the run is this machine's, in either timing regime (``benchmarks.cells``), and said to be
unrecorded otherwise.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from benchmarks.trees import ROOT
from unfold_bench.common_args import add_profile, command_parser, machine_argument, output_folder


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("summary", __doc__)
    parser.add_argument("--results", type=Path, default=ROOT / "results", help="asv results directory (%(default)s)")
    parser.add_argument(
        "--machine",
        type=machine_argument,
        help="the run's machine (default: this machine's name, as make bench names it in the warm regime)",
    )
    add_profile(parser)
    parser.add_argument(
        "--commit", help="the run's commit, or a prefix of it (default: that machine's newest with results)"
    )
    parser.add_argument(
        "--summaries",
        type=output_folder,
        default=str(ROOT / "reports" / "summaries"),
        help="where every cell's figures and ratios are written, as make bench writes them (%(default)s)",
    )
    args = parser.parse_args(argv)
    machines = sorted(p.parent.name for p in args.results.glob("*/machine.json"))
    if not machines:
        parser.error(f"--results {args.results}: no asv results there (no <machine>/machine.json)")
    from benchmarks.machine import machine_name
    from reports.analysis import other_regime_machines

    here = machine_name()
    machine = args.machine or here
    this_machine = {here, *other_regime_machines(here)}  # this host's runs in every timing regime
    if machine not in machines:
        parser.error(f"--machine {machine}: no results of it in {args.results} (machines: {', '.join(machines)})")
    commit = None
    if args.commit is not None:
        from asv.results import iter_results_for_machine

        commits = {r.commit_hash for r in iter_results_for_machine(str(args.results), machine)}
        found = {c for c in commits if c.startswith(args.commit)}
        if len(found) != 1:
            known = sorted(c[:8] for c in commits)
            why = "no run" if not found else f"{len(found)} runs ({', '.join(sorted(found))})"
            parser.error(f"--commit {args.commit}: {why} of {machine} (commits: {', '.join(known)})")
        (commit,) = found

    from benchmarks.cells import skip_reason_here
    from benchmarks.profiles import PROFILES
    from reports.summary import print_summary

    profile = PROFILES[args.profile]

    skip_reason = functools.partial(skip_reason_here, profile=profile)

    found = print_summary(
        args.results, machine, args.profile, commit, skip_reason if machine in this_machine else None, args.summaries
    )
    return 0 if found else 2


if __name__ == "__main__":
    raise SystemExit(main())
