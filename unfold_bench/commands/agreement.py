"""Do the harness's times agree with an independent timer? The entry point of `make agreement`.

A few cells are timed in one run, in the same timing regime and with the same number of threads, in several
rounds: by the asv suite (``make bench``'s own cells, saved to a temporary results directory, not ``results/``,
under a machine ``agreement-<regime>`` that it registers in asv's machine file, ``~/.asv-machine.json``),
and by ``torch.utils.benchmark`` in processes of its own (``benchmarks.independent_timer``), each calling every
strategy directly in an order of its own (inputs made with the same seeds; for a strategy that compiles, one
untimed call first). Three figures are compared:

- **times**: the harness's median of a cell (asv's ``rounds`` processes) against the Timer's median over as many
  processes, each over the rounds: their ratio, each timer's spread (slowest round over fastest) and whether the
  two ranges over the rounds overlap; how often one round's figure agrees with another round's, between the
  timers and within each (a timer that does not agree with itself from round to round bounds the agreement);
- **paired ratios to native** (what the picks rank by): the harness's ``ratios`` suite (``Profile.ratio_processes``
  replicate processes a round, ``native`` and the strategy on the same inputs in blocks A B B A) against, in each
  Timer process, the strategy's loop over ``native``'s, and (third) its ratio in the suite's order from the
  statements A A and A B B A; geometric means and 95% intervals over every process of every round, and overlap.
Each table ends with how many cells agree when each figure is taken over k of the rounds, k = 1 .. rounds.
Processes differ (on a shared VM one process's median can differ from another's by more than the timers differ),
so one round proves little. A check to run by hand, not a test: both are timings on a shared machine.
"""

from __future__ import annotations

import itertools
import json
import math
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from benchmarks.allocator import get_regime, regime_environment
from benchmarks.children import run_json_child
from benchmarks.independent_timer import BLOCKS
from benchmarks.intervals import process_interval
from benchmarks.profiles import PROFILES, Profile
from benchmarks.runner import PAIRED_REFERENCE, PAIRED_SUITE, Chunk, cell_name, scratch_config
from benchmarks.trees import ROOT, head_commit
from impls.plugins import specs as plugin_specs
from reports.units import format_ratio_interval
from unfold_bench.common_args import (
    add_cells,
    add_profile,
    add_regime,
    command_parser,
    output_file,
    parse_cells,
    print_report,
    refuse_unkept_strategies,
    warn_if_busy,
)

WIDTH = 115  # the tables' width, which the prose above them wraps to
WITHIN = 0.10  # two figures agree when their ratio lies between 1 / (1 + WITHIN) and 1 + WITHIN


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("agreement", __doc__)
    add_cells(parser)
    add_profile(parser)
    add_regime(parser)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both timers (default 5)")
    parser.add_argument(
        "--out", type=output_file, help="also write the table to this file (e.g. docs/agreement-warm.txt)"
    )
    arguments = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(arguments)
    refuse_unkept_strategies(parser)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: must be at least 1")
    cells = parse_cells(args.cells, args.profile, parser)
    regime = get_regime(args.regime)
    env = {**regime_environment(regime), "PYTHONPATH": str(ROOT)}
    profile = PROFILES[args.profile]

    warn_if_busy()
    from benchmarks.machine import machine_name, register_machine

    machine = register_machine(f"agreement-{regime.name}", regime.name, env)["machine"]
    keys = [f"{s}:{c}:{call}" for s, c, call in cells]
    paired_keys = [key for key in keys if reference_key(key) is not None]
    # the Timer times each paired cell's reference in its processes too, for the ratio
    partners = [tuple(r.split(":")) for r in dict.fromkeys(map(reference_key, paired_keys)) if r not in keys]
    timed = cells + partners
    processes = max(profile.rounds, profile.ratio_processes)
    by_harness: dict[str, list[float]] = {key: [] for key in keys}
    by_timer: dict[str, list[float]] = {key: [] for key in keys}
    harness_rounds: dict[str, list[list[float]]] = {key: [] for key in keys}  # per round: its figure, or none
    timer_rounds: dict[str, list[list[float]]] = {key: [] for key in keys}
    harness_ratios: dict[str, list[list[float]]] = {key: [] for key in paired_keys}  # per round, its processes'
    timer_paired: dict[str, list[list[float]]] = {key: [] for key in paired_keys}
    timer_blocks: dict[str, list[list[float]]] = {key: [] for key in paired_keys}  # the suite's order
    commit = head_commit()
    print(
        f"timing regime: {regime.label}; {len(cells)} cells, {args.rounds} rounds of the harness (asv: "
        f"{profile.rounds} processes a cell, {profile.ratio_processes} replicates of the paired ratios) then "
        f"{processes} Timer processes",
        flush=True,
    )
    for round_ in range(1, args.rounds + 1):
        try:
            harness, ratios = _time_by_harness(cells, profile, machine, commit, env)
        except HarnessError as error:
            print(f"unfold-bench agreement: the harness's round {round_} failed: {error}", file=sys.stderr)
            return 2
        rows = _time_by_timer(timed, profile.name, env, processes)
        independent = {
            key: statistics.median(found)
            for key in keys
            if (found := [row[key] for row in rows[: profile.rounds] if key in row])
        }
        for key in keys:
            for found, kept, per_round in (
                (harness, by_harness, harness_rounds),
                (independent, by_timer, timer_rounds),
            ):
                if key in found:
                    kept[key].append(found[key])
                per_round[key].append([found[key]] if key in found else [])
        for key in paired_keys:
            harness_ratios[key].append(ratios.get(key, []))
            timer_paired[key].append(timer_ratios(rows, key))
            timer_blocks[key].append(blocks_ratios(rows, key))
        print(
            f"round {round_} (harness/Timer): "
            + ", ".join(
                f"{k} {harness.get(k, math.nan) * 1e3:.3g}/{independent.get(k, math.nan) * 1e3:.3g} ms" for k in keys
            ),
            flush=True,
        )
    plugins = "".join(f"--strategy {spec} " for spec in plugin_specs())
    lines = [
        f"unfold-bench {plugins}agreement {shlex.join(arguments)}: machine {machine_name(regime.name)}, commit "
        f"{commit[:8]}, {time.strftime('%Y-%m-%d')}",
        f"{profile.name} profile, CPU, {regime.label}, {args.rounds} rounds",
        "",
        *textwrap.wrap(
            f"Times: each timer's median per round ({profile.rounds} processes a cell: asv's rounds, and as many Timer "
            "processes); harness ms and Timer ms: the median over the rounds; ratio: harness over Timer; spread: a "
            "timer's slowest round over its fastest; overlap: whether the two ranges over the rounds overlap. Last, "
            "how often one round's figure agrees with another's: the harness's with the Timer's, and each timer's with "
            "its own (the agreement its own spread allows), and how many cells agree when each figure is taken over "
            "k of the rounds (where the misses are each timer's spread between processes, the count rises with k; "
            "where the two measure different things, more processes do not close the gap)",
            WIDTH,
        ),
        "",
        f"{'cell':<46} {'harness ms':>10} {'Timer ms':>9} {'ratio':>6} {'spread h':>8} {'spread T':>8} {'overlap':>8}",
    ]
    lines += table_lines(keys, by_harness, by_timer, time_line, 10, "ranges")
    lines.append(round_agreement(keys, by_harness, by_timer))
    lines += by_rounds(keys, harness_rounds, timer_rounds, statistics.median, (profile.rounds, profile.rounds))
    if paired_keys:
        tables = (
            (
                f"Paired ratios to {PAIRED_REFERENCE}: the harness's suite ratios ({profile.ratio_processes} replicate "
                f"processes a round, blocks A B B A) and, in each of {processes} Timer processes a round, the "
                f"strategy's time over {PAIRED_REFERENCE}'s, each in a loop of its own; each side's geometric mean "
                "over every process of every round with its 95% interval (n: processes); ratio: harness over Timer; "
                "overlap: whether the intervals overlap. Last, how "
                "many cells agree when each side is taken over k of the rounds' processes",
                "Timer x native",
                timer_paired,
            ),
            (
                f"Paired ratios in the suite's order: the same harness figures against, in each Timer process, the "
                f"strategy's time over {PAIRED_REFERENCE}'s from the statements A A and A B B A ({PAIRED_REFERENCE} "
                "A, the strategy B, on the same inputs, timed in turn): (t(ABBA) - t(AA)) / t(AA). It charges B with "
                f"any change in {PAIRED_REFERENCE}'s time after B, frees each output inside the statement and times "
                "one placement a process, by the medians of the runs (n: processes whose ratio came out above zero). "
                "Where this agrees and the loop's above does not, the call order most likely separates the two",
                "Timer ABBA x native",
                timer_blocks,
            ),
        )
        for heading, column, timer_side in tables:
            lines += paired_table(
                heading, column, paired_keys, harness_ratios, timer_side, (profile.ratio_processes, processes)
            )
    print_report("\n".join(lines), args.out)
    return 0


def paired_table(
    heading: str,
    column: str,
    keys: list[str],
    harness: Mapping[str, list[list[float]]],
    timer: Mapping[str, list[list[float]]],
    processes: tuple[int, int],
) -> list[str]:
    """A table of paired ratios: ``heading`` wrapped, a row per cell of ``keys`` with the harness's and the Timer's
    (``column``) geometric means over every process of every round (``harness[key]``, ``timer[key]``: per round, its
    processes' ratios), and the count over k rounds (``processes``: each side's processes a round)."""
    harness_flat, timer_flat = (
        {key: [v for found in side[key] for v in found] for key in keys} for side in (harness, timer)
    )
    return [
        "",
        *textwrap.wrap(heading, WIDTH),
        "",
        f"{'cell':<46} {'harness x native':>20} {'n':>3} {column:>20} {'n':>3} {'ratio':>6} {'overlap':>8}",
        *table_lines(keys, harness_flat, timer_flat, ratio_line, 20, "intervals"),
        *by_rounds(keys, harness, timer, statistics.geometric_mean, processes),
    ]


def table_lines(
    keys: list[str],
    harness: Mapping[str, list[float]],
    timer: Mapping[str, list[float]],
    line_of: Callable[[str, list[float], list[float]], tuple[str, bool, str]],
    width: int,
    overlapping: str,
) -> list[str]:
    """One table's rows, each ``line_of(key, harness[key], timer[key])`` ("failed" where either timer has no figure),
    and a last line counting the cells within ``WITHIN`` and those whose ``overlapping`` (ranges, intervals)
    overlap."""
    lines, judged = [], []
    for key in keys:
        if not harness[key] or not timer[key]:
            lines.append(f"{key:<46} {'failed':>{width}}")
            continue
        line, close, overlap = line_of(key, harness[key], timer[key])
        lines.append(line)
        judged.append((close, overlap == "yes"))
    within, overlaps = sum(c for c, _ in judged), sum(o for _, o in judged)
    lines.append(f"within {WITHIN:.0%}: {within} of {len(judged)}; {overlapping} overlap: {overlaps} of {len(judged)}")
    return lines


def within(ratio: float) -> bool:
    """Whether two figures whose ratio is ``ratio`` agree: within ``WITHIN`` either way."""
    return abs(math.log(ratio)) <= math.log(1 + WITHIN)


def round_agreement(keys: list[str], harness: Mapping[str, list[float]], timer: Mapping[str, list[float]]) -> str:
    """How often one round's figure of a cell lies ``within`` another round's, over the cells both timers measured:
    the harness's against the Timer's (every pair of rounds), and each timer's against its own other rounds. A timer
    that does not agree with itself from round to round bounds how often the two can agree, so this tells a
    difference between the timers from the spread of one."""
    pairs = {"harness vs Timer": [], "harness vs harness": [], "Timer vs Timer": []}
    for key in keys:
        h, t = harness[key], timer[key]
        if h and t:
            pairs["harness vs Timer"] += [within(a / b) for a, b in itertools.product(h, t)]
            pairs["harness vs harness"] += [within(a / b) for a, b in itertools.combinations(h, 2)]
            pairs["Timer vs Timer"] += [within(a / b) for a, b in itertools.combinations(t, 2)]
    found = [f"{label} {sum(c)} of {len(c)} ({sum(c) / len(c):.0%})" for label, c in pairs.items() if c]
    return f"one round against another, within {WITHIN:.0%}: " + ("; ".join(found) if found else "no pair of rounds")


def by_rounds(
    keys: list[str],
    harness: Mapping[str, list[list[float]]],
    timer: Mapping[str, list[list[float]]],
    pool: Callable[[Sequence[float]], float],
    processes: tuple[int, int],
) -> list[str]:
    """How agreement grows with the processes behind each figure: for k = 1 .. R rounds, how many cells'
    figures, each ``pool`` of the samples of k rounds (both timers the same rounds), agree ``within``; the mean over
    every choice of k of the R rounds, with the fewest and the most. ``harness[key]`` and ``timer[key]`` hold each
    round's samples in the order of the rounds (empty where that timer has none); only cells that both timers
    measured in every round count. ``processes``: each timer's processes a round."""
    rounds = max((len(found) for found in (*harness.values(), *timer.values())), default=0)
    full = [
        key for key in keys if len(harness[key]) == len(timer[key]) == rounds and all(harness[key]) and all(timer[key])
    ]
    if not full:
        return ["by rounds: no cell measured by both timers in every round"]
    lines = [f"cells within {WITHIN:.0%} with each figure over k of the {rounds} rounds (mean over the choices of k):"]
    for k in range(1, rounds + 1):
        counts = [
            sum(
                within(
                    pool([v for i in chosen for v in harness[key][i]])
                    / pool([v for i in chosen for v in timer[key][i]])
                )
                for key in full
            )
            for chosen in itertools.combinations(range(rounds), k)
        ]
        choices = f"{len(counts)} choice{'s' if len(counts) > 1 else ''}"
        lines.append(
            f"  k={k} ({k * processes[0]} harness / {k * processes[1]} Timer processes): "
            f"{statistics.fmean(counts):.1f} of {len(full)} ({min(counts)}-{max(counts)} over {choices})"
        )
    return lines


class HarnessError(RuntimeError):
    """asv itself failed (not a cell of it): nothing of that round can be compared."""


def _time_by_harness(
    cells: list[tuple[str, str, str]], profile: Profile, machine: str, commit: str, env: dict
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """The asv suite's medians of ``cells`` (suite unfold), and the per-process samples of their paired ratios to
    the reference (suite ratios, ``profile.ratio_processes`` replicate asv runs), saved to a scratch results
    directory."""
    from reports.results import load_results

    name = profile.class_name
    times = "|".join(rf"unfold\.{name}\.time_{call}\('{s}', '{c}', 'cpu'\)" for s, c, call in cells)
    paired = tuple(
        cell_name(PAIRED_SUITE, name, f"track_ratio_{call}", (s, c, "cpu"))
        for s, c, call in cells
        if s != PAIRED_REFERENCE
    )
    chunks = [["-b", f"^(?:{times})$"]]
    chunks += [Chunk("", paired, r, profile.ratio_processes).arguments() for r in range(1, profile.ratio_processes + 1)]
    with tempfile.TemporaryDirectory() as scratch:
        config = str(scratch_config(Path(scratch), ROOT))
        for selection in chunks if paired else chunks[:1]:
            command = [sys.executable, "-m", "asv", "--config", config, "run", "--python=same"]
            command += ["--set-commit-hash", commit, "--machine", machine, *selection]
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            said = (done.stdout + done.stderr).splitlines()
            if done.returncode not in (0, 2):  # 2: some cell failed, a result like any other (left out below)
                raise HarnessError(f"asv exited {done.returncode}; its last lines:\n" + "\n".join(said[-20:]))
            for line in (line for line in said if "failed" in line.lower()):
                print(f"harness: {line.strip()} (left out)", flush=True)
        table = load_results(Path(scratch) / "results")
    ok = table[(table.status == "ok") & (table.profile == profile.name)]
    if ok.empty:  # asv also gives 2 where its suite did not import: every cell failed, nothing to compare
        raise HarnessError(
            f"no cell came back (asv exited {done.returncode}); its last lines:\n" + "\n".join(said[-20:])
        )
    medians = {f"{r.strategy}:{r.config}:{r.metric[5:]}": r.value for r in ok[ok.suite == "unfold"].itertuples()}
    samples = {
        f"{r.strategy}:{r.config}:{r.metric.removeprefix('track_ratio_')}": r.samples
        for r in ok[ok.suite == PAIRED_SUITE].itertuples()
    }
    return medians, samples


def _time_by_timer(cells: list[tuple[str, str, str]], profile_name: str, env: dict, processes: int) -> list[dict]:
    """``torch.utils.benchmark``'s figures of ``cells`` in each of ``processes`` processes, each timing every cell in
    an order of its own: one dict (cell key -> seconds) per process."""
    import random

    found = []
    for _ in range(processes):
        order = random.sample(cells, len(cells))
        rows, why = run_json_child(
            [sys.executable, "-m", "benchmarks.independent_timer", json.dumps(order), profile_name], None, env, 1800
        )
        if why or not rows:
            raise RuntimeError(f"torch.utils.benchmark's process: {why or 'printed no figure'}")
        found.append(rows[-1])
    return found


def reference_key(key: str) -> str | None:
    """The cell ``key`` (``strategy:config:call``) of the reference its paired ratio is over (None: it is the
    reference)."""
    strategy, config, call = key.split(":")
    return None if strategy == PAIRED_REFERENCE else f"{PAIRED_REFERENCE}:{config}:{call}"


def timer_ratios(processes: list[dict[str, float]], key: str) -> list[float]:
    """The Timer's paired ratio of ``key`` in each process that timed it and its reference: its time over the
    reference's in that process."""
    reference = reference_key(key)
    return [p[key] / p[reference] for p in processes if reference and key in p and p.get(reference, 0) > 0]


def blocks_ratios(processes: list[dict[str, float]], key: str) -> list[float]:
    """The Timer's paired ratio of ``key`` in the suite's order in each process that reports one (``BLOCKS`` +
    ``key``; ``benchmarks.independent_timer`` reports none where it came out at zero or below)."""
    return [p[BLOCKS + key] for p in processes if BLOCKS + key in p]


def overlap(first: tuple[float, float], second: tuple[float, float]) -> str:
    """ "yes" when the ranges ``[low, high]`` overlap, "no" when not, "-" when either lacks an end."""
    if any(math.isnan(v) for v in (*first, *second)):
        return "-"
    return "yes" if first[0] <= second[1] and second[0] <= first[1] else "no"


def time_line(key: str, harness: list[float], timer: list[float]) -> tuple[str, bool, str]:
    """The times table's line of ``key`` from each timer's medians over the rounds, whether the ratio of their
    medians is within ``WITHIN``, and whether their ranges overlap."""
    ratio = statistics.median(harness) / statistics.median(timer)
    ranges = overlap((min(harness), max(harness)), (min(timer), max(timer)))
    line = (
        f"{key:<46} {statistics.median(harness) * 1e3:>10.3g} {statistics.median(timer) * 1e3:>9.3g} {ratio:>6.2f} "
        f"{max(harness) / min(harness):>8.2f} {max(timer) / min(timer):>8.2f} {ranges:>8}"
    )
    return line, within(ratio), ranges


def ratio_line(key: str, harness: list[float], timer: list[float]) -> tuple[str, bool, str]:
    """The paired table's line of ``key`` from each side's per-process ratios to the reference (every round's),
    whether the ratio of their geometric means is within ``WITHIN``, and whether their intervals overlap."""
    (h, h_low, h_high), (t, t_low, t_high) = process_interval(harness), process_interval(timer)
    ratio = h / t
    intervals = overlap((h_low, h_high), (t_low, t_high))
    line = (
        f"{key:<46} {format_ratio_interval(h, h_low, h_high, suffix=''):>20} {len(harness):>3} "
        f"{format_ratio_interval(t, t_low, t_high, suffix=''):>20} {len(timer):>3} {ratio:>6.2f} {intervals:>8}"
    )
    return line, within(ratio), intervals


if __name__ == "__main__":
    raise SystemExit(main())
