"""Variance components of a paired ratio, and the replication that resolves a target: where to spend repetitions.

Kalibera and Jones ("Rigorous benchmarking in reasonable time", ISMM 2013): measure the variance at each level
of the experiment and repeat at the level that dominates. Here the levels are ``benchmarks.replicates``'s, nested:
runs (a set of processes started one after another), processes (half with each set-up order, the order a fixed
effect), rounds (a fresh placement of the inputs) and blocks (A B B A). With :math:`y` a round's trimmed mean
of block log-ratios, balanced one-way estimates per level (negative estimates read as 0):

- blocks: :math:`\\sigma_b^2`, the mean within-round variance of the block log-ratios;
- rounds: :math:`\\sigma_r^2 = \\mathrm{MS}_{round} - \\sigma_b^2 / n`, from the rounds' spread within a process;
- processes: :math:`\\sigma_p^2 = \\mathrm{MS}_{process} - \\mathrm{MS}_{round} / m`, from the spread of process
  means within a run and set-up order;
- runs: :math:`\\sigma_u^2 = \\mathrm{MS}_{run} - \\mathrm{MS}_{process} / k`, from the spread of run means.

A design of :math:`k` processes (half per order), :math:`m` rounds and :math:`n` blocks gives a ratio whose log
has standard error :math:`se = \\sqrt{(\\sigma_p^2 + \\sigma_r^2/m + \\sigma_b^2/(mn)) / k}` within one run. The
regression gate's resolution is then :math:`(1 + \\text{margin}) \\exp(\\lambda\\, se)`, where :math:`\\lambda` is
the noncentrality at which Student's t with :math:`k - 2` degrees of freedom rejects at :math:`\\alpha` with the
stated power (``benchmarks.replicates.resolution``). A figure published from one run moves between runs by the
run level on top. Each design is costed with the seconds measured for a process's start, a round's set-up and a block.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.intervals import process_interval
from benchmarks.profiles import DEFAULT_PROFILE
from benchmarks.replicates import MAX_PROCESSES, Unit, resolution, run_process, trimmed_mean


@dataclass(frozen=True)
class Components:
    """Variances (of a log-ratio) per level, and the seconds each level's repetition costs."""

    block: float
    round: float
    process: float
    run: float
    blocks_per_round: float
    process_seconds: float  # a process's start: interpreter, torch, both sides' imports and checks, per unit
    round_seconds: float  # a round's set-up: fresh inputs, warm-up blocks
    block_seconds: float


def _ms_within(groups: Sequence[Sequence[float]]) -> float:
    """The mean square within groups (pooled variance around each group's mean); nan without any degree of freedom."""
    df = sum(len(g) - 1 for g in groups)
    if df <= 0:
        return math.nan
    return sum(float(((np.asarray(g) - np.mean(g)) ** 2).sum()) for g in groups) / df


def components(rows: Sequence[Mapping]) -> Components:
    """The components of one unit from its rows, each with ``run``, ``process``, ``b_first``, ``round``,
    ``log_ratios`` and ``seconds``/``setup_seconds`` as ``measure`` records them, plus a ``process_seconds`` row
    field (the process's wall time less its rounds')."""
    rounds = [r for r in rows if r.get("log_ratios")]
    if not rounds:
        raise ValueError("no measured rounds")
    blocks = _ms_within([r["log_ratios"] for r in rounds])
    by_process: dict[tuple, list[float]] = {}
    for r in rounds:
        by_process.setdefault((r["run"], r["process"], r["b_first"]), []).append(trimmed_mean(r["log_ratios"]))
    m = float(np.mean([len(v) for v in by_process.values()]))
    n = float(np.mean([len(r["log_ratios"]) for r in rounds]))
    ms_round = _ms_within(list(by_process.values()))
    process_means = {key: float(np.mean(v)) for key, v in by_process.items()}
    by_run_order: dict[tuple, list[float]] = {}
    for (run, _, b_first), value in process_means.items():
        by_run_order.setdefault((run, b_first), []).append(value)
    ms_process = _ms_within(list(by_run_order.values()))
    k = float(np.mean([len(v) for v in by_run_order.values()])) * 2  # both orders
    by_run: dict[int, list[float]] = {}
    for (run, _), values in by_run_order.items():
        by_run.setdefault(run, []).append(float(np.mean(values)))
    run_means = [float(np.mean(v)) for v in by_run.values()]  # each the mean of its two orders' means
    ms_run = float(np.var(run_means, ddof=1)) if len(run_means) > 1 else math.nan
    round_var = max(ms_round - blocks / n, 0.0)
    process_var = max(ms_process - ms_round / m, 0.0)
    run_var = max(ms_run - ms_process / k, 0.0) if not math.isnan(ms_run) else math.nan
    seconds = [r["seconds"] for r in rounds]
    setups = [r["setup_seconds"] for r in rounds]
    block_seconds = (sum(seconds) - sum(setups)) / sum(len(r["log_ratios"]) for r in rounds)
    starts = [r["process_seconds"] for r in rows if "process_seconds" in r]
    return Components(
        blocks, round_var, process_var, run_var, n, float(np.median(starts)), float(np.median(setups)), block_seconds
    )


@dataclass(frozen=True)
class Design:
    processes: int
    rounds: int
    blocks: int
    standard_error: float
    resolution: float  # the gate's: smallest slowdown caught with ``power`` at one-sided ``alpha``
    seconds: float  # per unit


def design(
    c: Components, processes: int, rounds: int, blocks: int, alpha: float, power: float, margin: float
) -> Design:
    variance = (c.process + c.round / rounds + c.block / (rounds * blocks)) / processes
    se = math.sqrt(variance)
    caught = resolution(se, processes - 2, alpha, power, margin)
    seconds = processes * (c.process_seconds + rounds * (c.round_seconds + blocks * c.block_seconds))
    return Design(processes, rounds, blocks, se, caught, seconds)


def cheapest(
    c: Components, target: float, alpha: float, power: float, margin: float, max_processes: int = MAX_PROCESSES
) -> Design | None:
    """The design of least cost whose resolution reaches ``target`` (None: none up to ``max_processes``)."""
    candidates = [
        design(c, k, m, n, alpha, power, margin)
        for k, m, n in itertools.product(range(4, max_processes + 1, 2), (1, 2, 4, 8), (8, 16, 32, 64))
    ]
    reaching = [d for d in candidates if d.resolution <= target]
    return min(reaching, key=lambda d: d.seconds) if reaching else None


def measure(
    units: Sequence[Mapping],
    runs: int,
    processes: int,
    rounds: int,
    blocks: int,
    round_seconds: float,
    profile: str = DEFAULT_PROFILE,
    progress=print,
    env: Mapping[str, str] | None = None,
) -> list[dict]:
    """Every round of every unit in ``runs`` x ``processes`` replicate processes (half with side B set up first,
    alternating) started with ``env`` (a timing regime's, ``benchmarks.allocator.regime_environment``), each row
    marked with its run, process and order; a process's start time is recorded on its first row per unit."""
    rows: list[dict] = []
    seed = 0
    for run in range(runs):
        for process in range(processes):
            b_first = process % 2 == 1
            seed += 1000
            spec = {"units": list(units), "rounds": rounds, "blocks": blocks, "round_seconds": round_seconds}
            spec.update(b_first=b_first, seed=seed, profile=profile)
            started = time.monotonic()
            found, why = run_process(spec, env)
            wall = time.monotonic() - started
            if why:
                raise RuntimeError(f"run {run}, process {process}: the replicate process {why}")
            measured = sum(r.get("seconds", 0.0) for r in found)
            start = (wall - measured) / max(len({r["key"] for r in found}), 1)
            first_seen: set[str] = set()
            for r in found:
                r.update(run=run, process=process, b_first=b_first)
                if r["key"] not in first_seen:
                    first_seen.add(r["key"])
                    r["process_seconds"] = start
                rows.append(r)
            progress(f"run {run + 1}/{runs}, process {process + 1}/{processes}: {wall:.1f} s")
    return rows


def units_for(cells: Sequence[tuple[str, str, str]], against: str, tree: str, device: str = "cpu") -> list[Unit]:
    """Replicate units for ``cells`` (strategy, config, pass; ``unfold_bench.common_args.parse_cells``): side A is
    ``against``'s strategy ("self": a second import of the same strategy, the regression gate's A/A), side B the
    cell's."""
    units = []
    for strategy, config, which in cells:
        a = (
            {"tree": tree, "strategy": strategy, "copy": 1}
            if against == "self"
            else {"tree": tree, "strategy": against}
        )
        units.append(
            {
                "key": f"{strategy}:{config}:{which}",
                "sides": [a, {"tree": tree, "strategy": strategy}],
                "config": config,
                "which": which,
                "device": device,
            }
        )
    return units


def faulted_share(rows: Sequence[Mapping]) -> str:
    """The share of ``rows``' blocks that took at least one minor page fault, in %; "n/a" where none were counted
    (rows from before the count)."""
    faults = [f for r in rows for f in r.get("minor_faults", [])]
    return "n/a" if not faults else f"{100 * sum(f > 0 for f in faults) / len(faults):.0f}%"


def preemption(rows: Sequence[Mapping]) -> tuple[str, str]:
    """How much other work took the CPUs during ``rows``' blocks: the mean involuntary context switches a block
    (``benchmarks.replicates.Disturbances``), and Spearman's rank correlation between a block's switches
    and its log-ratio, each taken from its round's median first, so that only the blocks of one placement are
    compared. Well above 0: B's slow blocks are the preempted ones (coincidence, not cause: a slow block also
    lasts long enough to be preempted more); "n/a" where none were counted (rows from before the count) or none
    varied."""
    from scipy.stats import spearmanr

    counted = [r for r in rows if len(r.get("involuntary_switches", [])) == len(r.get("log_ratios", [])) > 0]
    if not counted:
        return "n/a", "n/a"
    switches, ratios = [], []
    for row in counted:
        switches += list(np.subtract(row["involuntary_switches"], np.median(row["involuntary_switches"])))
        ratios += list(np.subtract(row["log_ratios"], np.median(row["log_ratios"])))
    mean = f"{np.mean([s for r in counted for s in r['involuntary_switches']]):.3g}"  # most blocks of ms take none
    if len(set(switches)) < 2 or len(set(ratios)) < 2:
        return mean, "n/a"
    return mean, f"{spearmanr(switches, ratios).statistic:+.2f}"


def _process_interval(rows: Sequence[Mapping], confidence: float) -> str:
    """``[low, high]`` of B / A at ``confidence`` across the processes' mean trimmed log-ratios (each run's processes
    together; ``benchmarks.intervals.process_interval``); "n/a" with fewer than two processes or where a process's
    mean is not finite."""
    by_process: dict[tuple, list[float]] = {}
    for r in rows:
        if r.get("log_ratios"):
            by_process.setdefault((r.get("run"), r["process"]), []).append(trimmed_mean(r["log_ratios"]))
    means = [float(np.mean(v)) for v in by_process.values()]
    if not all(math.isfinite(m) for m in means):
        return "n/a"
    _, low, high = process_interval([math.exp(m) for m in means], confidence)
    return "n/a" if math.isnan(low) else f"[{low:.3f}, {high:.3f}]"


def report(
    rows: Sequence[Mapping], target: float, alpha: float, power: float, margin: float, confidence: float = 0.95
) -> str:
    """Per unit: the components (as percentages of the ratio), and the cheapest design reaching ``target``."""
    from scipy.stats import t as student

    lines = [
        "Variance components of log(B / A), as standard deviations in % of the ratio; seconds per repetition;",
        f"ratio: B / A, the geometric mean over every round; its interval: {confidence:.0%}, Student's t across the "
        "processes' means (every run's together, the run level not added);",
        "faulted: the share of blocks that took any minor page fault (the interpreter's own, or an output on fresh "
        "pages);",
        "sw/blk: the mean involuntary context switches a block (other work taking a CPU); rho(sw): their rank "
        "correlation with the block's log-ratio within rounds (well above 0: B's slow blocks are the preempted ones).",
        f"Gate design: the cheapest (processes, rounds, blocks) whose resolution reaches {target:g}x "
        f"(one-sided alpha {alpha:g}, power {power:g}, margin {margin:g}).",
        "",
        f"{'unit':<40} {'ratio':>7} {'its interval':>16} {'block':>6} {'round':>6} {'proc':>6} {'run':>6} "
        f"{'s/proc':>7} {'s/round':>7} {'ms/blk':>7} {'faulted':>7} {'sw/blk':>6} {'rho(sw)':>7}  "
        "gate design (k x m x n: resolution, s)",
    ]
    for key in dict.fromkeys(r["key"] for r in rows):
        mine = [r for r in rows if r["key"] == key]
        problems = {f"{side}: {why}" for r in mine for side, why in r.get("problems", {}).items()}
        if problems:
            lines.append(f"{key:<40} not measured: {'; '.join(sorted(problems))}")
            continue
        c = components(mine)
        ratio = math.exp(np.mean([trimmed_mean(r["log_ratios"]) for r in mine if r.get("log_ratios")]))
        interval = _process_interval(mine, confidence)

        def pct(variance: float) -> str:
            return "n/a" if math.isnan(variance) else f"{100 * math.expm1(math.sqrt(variance)):.1f}"

        best = cheapest(c, target, alpha, power, margin)
        switched, correlation = preemption(mine)
        plan = (
            f"{best.processes} x {best.rounds} x {best.blocks}: {best.resolution:.3f}x, {best.seconds:.0f} s"
            if best
            else f"none up to {MAX_PROCESSES} processes (process level alone: {pct(c.process)}%)"
        )
        lines.append(
            f"{key:<40} {ratio:7.3f} {interval:>16} "
            f"{pct(c.block):>6} {pct(c.round):>6} {pct(c.process):>6} {pct(c.run):>6} "
            f"{c.process_seconds:7.1f} {c.round_seconds:7.2f} {1000 * c.block_seconds:7.2f} "
            f"{faulted_share(mine):>7} {switched:>6} {correlation:>7}  {plan}"
        )
    runs = len({r["run"] for r in rows if "run" in r})
    processes = len({(r["run"], r["process"]) for r in rows if "run" in r})
    lines += [
        "",
        f"Measured: {runs} run(s), {processes} processes; a published ratio from k processes of one run has a "
        f"{confidence:.0%} interval of about exp(+-t se); the run level adds to it between runs "
        f"(t at k - 1 degrees of freedom: k=8 gives {student.ppf((1 + confidence) / 2, 7):.2f}; the gate's, "
        f"with the set-up order a fixed effect, at k - 2: {student.ppf((1 + confidence) / 2, 6):.2f}).",
    ]
    return "\n".join(lines)
