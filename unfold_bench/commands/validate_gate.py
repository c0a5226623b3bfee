"""Measure the regression gate on this machine: its false alarms (A/A) and whether it catches injected regressions.

    unfold-bench validate-gate [--aa 10] [--injected 10] [--bench REGEX] [--mode paired] [--strategy NAME]

In a clone of this repository it makes two commits on top of HEAD: ``A/A``, a comment in ``impls/registry.py`` (no
single strategy's file, so the gate measures every strategy and must flag nothing), and ``injected``, the forward of
``gather``, ``cpp`` and ``compiled`` spinning for 10% of its own time after computing and ``as_strided`` filling a
scratch buffer the size of its output. With ``--strategy NAME`` both go to ``impls/NAME.py`` alone, the change a
pull request to that strategy makes. It runs ``unfold-bench regress`` on the two pairs, alternating, and prints one
line per run and a summary; with ``--out`` the text and each run's table are written after every run. What a run
must show to pass, and what the summary says: docs/regression-gate.md#measured. Exit status 1 when a run's gate
failed, 0 otherwise.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks import gate_design
from benchmarks.allocator import DEFAULT_REGIME
from benchmarks.paired_stats import ALPHA
from benchmarks.profiles import CI_SUBSET, DEFAULT_PROFILE
from benchmarks.trees import ROOT, git
from benchmarks.trees import clone as make_clone_of
from benchmarks.vocabulary import DEVICES, timed_metric, tracked_peak_metric
from reports.compare import Thresholds
from reports.units import METRICS
from unfold_bench.common_args import (
    GATE_MODES,
    add_bench,
    add_mode,
    command_parser,
    finite_float,
    output_file,
    with_folder_made,
)

SLOWDOWN = 0.10
SLOWER = f"""

def _injected_slower(input, geometry):  # injected regression (unfold-bench validate-gate)
    start = time.perf_counter()
    out = _IMPLEMENTATION(input, geometry)
    end = time.perf_counter()
    end += {SLOWDOWN} * (end - start)
    while time.perf_counter() < end:
        pass
    return out


unfold = dataclasses.replace(unfold, implementation=_injected_slower)
"""
HUNGRIER_AS_STRIDED = """

def _injected_hungrier(input, geometry):  # injected regression (unfold-bench validate-gate)
    out = _as_strided_unfold(input, geometry)
    scratch = torch.empty(out.numel(), dtype=out.dtype, device=out.device).fill_(0)
    del scratch
    return out


unfold = dataclasses.replace(unfold, implementation=_injected_hungrier)
"""


@dataclass(frozen=True)
class Injection:
    """The validation's two commits: the A/A one adds a comment to ``aa_file``; the injected one slows the forward of
    each of ``slowed`` (``SLOWER``) and makes each of ``hungrier`` fill a scratch buffer (``HUNGRIER_AS_STRIDED``)."""

    slowed: tuple[str, ...]
    hungrier: tuple[str, ...]
    aa_file: str

    @property
    def injected(self) -> set[tuple[str, str]]:
        """(strategy, metric) of the cells an injected run must flag."""
        return {(s, timed_metric("forward")) for s in self.slowed} | {
            (s, tracked_peak_metric("forward")) for s in self.hungrier
        }

    @property
    def also_changed(self) -> set[tuple[str, str]]:
        """(strategy, metric) of the other cells of the strategies it changes: changed code, which may be flagged."""
        return {(s, m) for s in (*self.slowed, *self.hungrier) for m in METRICS} - self.injected

    def describe(self) -> str:
        return f"A/A a comment in {self.aa_file}; injected {', '.join(self.slowed)}'s forward slowed" + "".join(
            f", {name} hungrier" for name in self.hungrier
        )


# By default the A/A comment goes to a file of impls that is no single strategy's, so the gate measures every
# strategy (benchmarks.impact), and three strategies are slowed and one made hungrier at once
RUNS = 10  # A/A and injected runs each, by default: the "caught in at least 9 of 10"
EVERY = Injection(slowed=("gather", "cpp", "compiled"), hungrier=("as_strided",), aa_file="impls/registry.py")


def one_strategy(name: str) -> Injection:
    """The change a pull request to one strategy makes: the A/A comment and the slowdown both in ``impls/NAME.py``,
    so the gate measures that strategy and those importing it."""
    if name not in EVERY.slowed:
        raise ValueError(f"--strategy {name!r}: one of {', '.join(EVERY.slowed)}")
    return Injection(slowed=(name,), hungrier=(), aa_file=f"impls/{name}.py")


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``command`` in ``cwd`` with ``cwd`` first on the import path: the clone's harness, not an editable install's."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(cwd), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)


def _implementation_name(path: Path) -> str:
    return re.search(r"implementation=(\w+)", path.read_text()).group(1)


def make_clone(workdir: Path, injection: Injection = EVERY) -> tuple[Path, str, str, str]:
    """A clone with (base, a/a, injected) commits of ``injection``; returns the clone and the three hashes."""
    clone = make_clone_of(ROOT, workdir / "clone", "gate validation", "gate@localhost")
    base = git("rev-parse", "HEAD", repo=clone)
    commented = clone / injection.aa_file
    commented.write_text(commented.read_text() + "\n# A/A commit (unfold-bench validate-gate): no code changes\n")
    git("commit", "-qam", "A/A: no code under test changes", repo=clone)
    same = git("rev-parse", "HEAD", repo=clone)
    git("checkout", "-q", base, repo=clone)
    for module, text, placeholder in (
        *((name, SLOWER, "_IMPLEMENTATION") for name in injection.slowed),
        *((name, HUNGRIER_AS_STRIDED, "_as_strided_unfold") for name in injection.hungrier),
    ):
        path = clone / "impls" / f"{module}.py"
        imports = "\nimport dataclasses  # noqa: E402\nimport time  # noqa: E402\n\nimport torch  # noqa: E402\n"
        path.write_text(path.read_text() + imports + text.replace(placeholder, _implementation_name(path)))
    git("commit", "-qam", "injected regressions", repo=clone)
    injected = git("rev-parse", "HEAD", repo=clone)
    return clone, base, same, injected


def _flagged_keys(table: pd.DataFrame) -> set[tuple[str, str, str]]:
    """(strategy, config, metric) of every row the gate flagged (a regression or a failure)."""
    bad = table[table.verdict.isin(["regression", "failed", "failed (also before)", "failed (a round)"])]
    return {(p.split(", ")[0], p.split(", ")[1], b.rsplit(".", 1)[-1]) for b, p in zip(bad.benchmark, bad.params)}


def _asv_table(output: str) -> pd.DataFrame:
    """The asv mode's flagged rows, read from its printed table (it writes no report)."""
    rows = [line.split() for line in output.splitlines() if re.match(r"\s*(regression|failed)\s", line)]
    return pd.DataFrame(
        [{"verdict": r[0], "benchmark": r[1], "params": " ".join(r[2:5]).rstrip(",")} for r in rows],
        columns=["verdict", "benchmark", "params"],
    )


def _keys(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(strategy, metric) of each row of a gate table."""
    return [(p.split(", ")[0], b.rsplit(".", 1)[-1]) for b, p in zip(table.benchmark, table.params)]


def _unchanged(table: pd.DataFrame, injected: bool, injection: Injection = EVERY) -> pd.Series:
    """Which rows measured code the run left as it was (every row of an A/A run)."""
    changed = injection.injected | injection.also_changed if injected else set()
    return pd.Series([key not in changed for key in _keys(table)], index=table.index)


def _slowed(table: pd.DataFrame, injection: Injection = EVERY) -> pd.Series:
    """Which rows of an injected run's table are the slowed forward times."""
    slowed = {(name, timed_metric("forward")) for name in injection.slowed}
    return pd.Series([key in slowed for key in _keys(table)], index=table.index)


def resolution_against_catches(resolution: pd.Series, caught: pd.Series) -> str:
    """Whether the printed resolution predicted the catches of the injected slowdowns: of the slowed forward cells
    that resolved the injected ``1 + SLOWDOWN`` or better, the resolution promises that 95% are caught; of the
    others, fewer. The two counts, each with its share."""
    within = resolution <= 1 + SLOWDOWN
    parts = []
    for label, cells in (("resolving", within), ("not resolving", ~within)):
        n, k = int(cells.sum()), int((caught & cells).sum())
        parts.append(f"{label} {1 + SLOWDOWN:.2f}x: {k} of {n} caught" + (f" ({k / n:.0%})" if n else ""))
    return f"resolution against catches, slowed forward cells: {'; '.join(parts)} (the resolution promises 95%)"


def rejudge(workdirs: Sequence[Path], margin: float, measured_margin: float, injection: Injection = EVERY) -> list[str]:
    """The saved tables of earlier validations (each ``WORKDIR/{AA,injected}-N.csv``) of ``injection`` judged
    together, again, with another margin: time cells only. Several validations of one design (runs of separate
    sittings) add up to one count of false alarms and catches."""
    flags = cells = caught = runs = 0
    lines = []
    slowed_cells: list[pd.DataFrame] = []
    for workdir in workdirs:
        tables = sorted(workdir.glob("*.csv"), key=lambda p: (p.name[0], int(re.search(r"(\d+)", p.name).group(1))))
        if not tables:
            raise FileNotFoundError(f"--rejudge {workdir}: no saved tables (AA-N.csv, injected-N.csv) there")
        for path in tables:
            table = pd.read_csv(path)
            table = table[(table.unit == "seconds") & (table.pairs > 0)]
            injected = path.name.startswith("injected")
            same = _unchanged(table, injected, injection)
            flags += int(((table.low > 1 + margin) & same).sum())
            cells += int(same.sum())
            if injected:
                runs += 1
                slowed = table[_slowed(table, injection)]
                caught += bool(len(slowed)) and bool((slowed.low > 1 + margin).all())
                slowed_cells.append(slowed)
            resolution = table[same].resolution * (1 + margin) / (1 + measured_margin)  # the margin scales it
            name = f"{workdir.name}/{path.stem}" if len(workdirs) > 1 else path.stem
            lines.append(f"  {name}: resolution median {resolution.median():.3f}x, worst {resolution.max():.3f}x")
    where = ", ".join(str(w) for w in workdirs)
    lines.insert(
        0,
        f"judged again with margin {margin:g} ({where}): {flags} of {cells} time cells of unchanged code "
        f"flagged; the slowed forwards all caught in {caught} of {runs} injected runs",
    )
    if slowed_cells:
        slowed = pd.concat(slowed_cells, ignore_index=True)
        scaled = slowed.resolution * (1 + margin) / (1 + measured_margin)
        lines.append(resolution_against_catches(scaled, slowed.low > 1 + margin))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("validate-gate", __doc__)
    parser.add_argument("--aa", type=int, help=f"A/A runs ({RUNS})")
    parser.add_argument("--injected", type=int, help=f"injected-regression runs ({RUNS})")
    add_bench(parser, default=CI_SUBSET, help="the cells to judge: the CI subset")
    add_mode(parser)
    parser.add_argument(
        "--processes",
        type=int,
        help="paired mode: the gate's processes, e.g. a design to try before recording it (default: the gate's own "
        "choice on this machine, its recorded design or else the default)",
    )
    parser.add_argument(
        "--strategy",
        choices=EVERY.slowed,
        help="validate on the change a pull request to this one strategy makes: the A/A comment and the slowdown "
        f"both in impls/STRATEGY.py, so the gate measures it and those importing it (default: {EVERY.describe()})",
    )
    parser.add_argument(
        "--workdir", help="where to clone and keep the runs' tables (default: a temporary directory, printed)"
    )
    parser.add_argument(
        "--out", type=output_file, help="also write what it prints to this file (e.g. docs/gate-validation.txt)"
    )
    parser.add_argument(
        "--rejudge",
        type=Path,
        nargs="+",
        help="judge earlier validations' saved tables (their --out's -runs/ folders, or --workdir) again, together",
    )
    margin = Thresholds().paired_margin
    parser.add_argument(
        "--margin",
        type=finite_float,
        default=margin,
        help="with --rejudge: the margin to judge with (%(default)g, the gate's)",
    )
    parser.add_argument(
        "--measured-margin",
        type=finite_float,
        default=margin,
        help="with --rejudge: the margin they ran with (%(default)g, the gate's)",
    )
    args = parser.parse_args(argv)
    if args.rejudge:
        given = [f"--{name}" for name in ("aa", "injected", "workdir", "processes") if getattr(args, name) is not None]
        given += [
            f"--{name}"
            for name, default in (("bench", CI_SUBSET), ("mode", GATE_MODES[0]))
            if args.__dict__[name] != default
        ]
        if given:
            parser.error(f"{given[0]}: for a validation that runs the gate; --rejudge judges saved tables again")
    args.aa, args.injected = (RUNS if n is None else n for n in (args.aa, args.injected))
    for name in ("aa", "injected"):
        if getattr(args, name) < 0:
            parser.error(f"--{name} {getattr(args, name)}: a number of runs, at least 0")
    for name in ("margin", "measured_margin"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name):g}: must be at least 0, as the gate's")
    if not args.rejudge and args.aa + args.injected == 0:
        parser.error("--aa 0 --injected 0: nothing to run")
    if not args.rejudge and (args.margin != margin or args.measured_margin != margin):
        parser.error("--margin and --measured-margin judge saved tables again: give --rejudge DIR")
    injection = EVERY if args.strategy is None else one_strategy(args.strategy)
    if args.rejudge:
        empty = [w for w in args.rejudge if not any(w.glob("*.csv"))]
        if empty:
            parser.error(f"--rejudge {empty[0]}: no saved tables (AA-N.csv, injected-N.csv) there")
        firsts = {w: gate_design.validation_first_line(w) for w in args.rejudge}
        for folder, first in firsts.items():  # judged as the runs of another injection, its figures would be wrong
            if first and not first.endswith(f"; {injection.describe()}"):
                said = (
                    f"its file says: {first.rsplit('; ', 1)[-1]!r}"
                    if "; A/A a comment in " in first
                    else "its file predates validate-gate's naming of what it injected"
                )
                parser.error(
                    f"--rejudge {folder}: its runs were not {injection.describe()!r} (--strategy "
                    f"{args.strategy or 'not given'}); {said}"
                )
        machines = {gate_design.validation_source(first).get("machine") for first in firsts.values() if first}
        if len(machines) > 1:
            parser.error(f"--rejudge: runs of several machines ({', '.join(sorted(machines))}), judged together")
        command = "unfold-bench validate-gate --rejudge " + " ".join(str(w) for w in args.rejudge)
        command += f" --strategy {args.strategy}" if args.strategy else ""
        command += f" --margin {args.margin:g}" if args.margin != margin else ""
        command += f" --out {args.out}" if args.out else ""
        text = "\n".join([command, *rejudge(args.rejudge, args.margin, args.measured_margin, injection)])
        print(text)
        if args.out:
            with_folder_made(args.out).write_text(text + "\n")
        return 0
    if args.processes is not None and (args.mode != "paired" or args.processes < 4 or args.processes % 2):
        parser.error(f"--processes {args.processes}: the paired mode's, even and at least 4")
    if args.workdir is not None and Path(args.workdir).exists() and not Path(args.workdir).is_dir():
        parser.error(f"--workdir {args.workdir}: not a folder")
    from benchmarks.cells import device_unavailable
    from benchmarks.profiles import get_profile
    from impls import STRATEGIES
    from unfold_bench.commands.regress import selected_units

    profile = get_profile(DEFAULT_PROFILE)
    devices = [d for d in DEVICES if device_unavailable(d) is None]
    # the injected runs judge the changed strategies; A/A runs alone, any strategy the gate measures
    judged = [*injection.slowed, *injection.hungrier] if args.injected else list(STRATEGIES)
    if not selected_units(profile, judged, args.bench):  # before the clone and the runs: each gate would refuse it
        parser.error(
            f"--bench {args.bench!r}: selects no cell of {', '.join(judged)} in the {profile.name} profile on "
            f"{', '.join(devices)}"
        )
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    from benchmarks.machine import machine_name

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gate-validation-"))
    again = f"validate-gate --rejudge {workdir}" + (f" --strategy {args.strategy}" if args.strategy else "")
    print(f"workdir: {workdir} (the runs' tables stay there: {again})", flush=True)
    clone, base, same, injected = make_clone(workdir, injection)
    gate = [sys.executable, "-m", "unfold_bench.commands.regress", "--mode", args.mode, "--bench", args.bench]
    design = ""
    if args.mode == "paired":
        defaults = Thresholds()
        why = "as given by --processes"
        if args.processes is None:  # as the gate would choose here, with the default profile and regime it runs
            args.processes, why = gate_design.processes_for(
                ROOT / "results",
                machine_name(),
                DEFAULT_PROFILE,
                DEFAULT_REGIME,
                defaults.process_rounds,
                defaults.blocks,
                defaults.round_seconds,
                defaults.processes,
            )
        gate += ["--processes", str(args.processes)]
        design = f" --processes {args.processes}"
    command = "unfold-bench validate-gate " + shlex.join(sys.argv[1:] if argv is None else argv)
    date, allocator = time.strftime("%Y-%m-%d"), gate_design.allocator_of(DEFAULT_REGIME)  # the gate's regime
    say(
        f"{gate_design.validation_header(command, machine_name(), base[:8], date, allocator)} "
        f"{args.aa} A/A and {args.injected} injected runs planned, alternating, of unfold-bench regress --mode "
        f"{args.mode} --bench '{args.bench}'{design} (defaults otherwise); {injection.describe()}"
    )
    if args.mode == "paired":
        say(f"processes: {args.processes}, {why}")
    selected = {c.name for c in profile.configs() if re.search(args.bench, c.name)}
    aa_cells = aa_flags = caught = 0
    runs = dict.fromkeys(("A/A", "injected"), 0)  # runs finished, failed ones included
    failed = dict.fromkeys(("A/A", "injected"), 0)  # runs whose gate exited with neither 0 nor 1
    injected_ratios: dict[str, list[float]] = {name: [] for name in injection.slowed}
    caught_each = dict.fromkeys(injection.slowed, 0)
    aa_time: list[pd.DataFrame] = []  # the time cells of unchanged code, for the process effect
    slowed_time: list[pd.DataFrame] = []  # the slowed forward cells, for the resolution against the catches

    def summary() -> list[str]:
        """The summary of the runs finished so far."""
        text = [
            f"finished: {runs['A/A']} of {args.aa} A/A runs ({failed['A/A']} failed) and {runs['injected']} of "
            f"{args.injected} injected runs ({failed['injected']} failed)",
            f"A/A cells (every cell of an A/A run, every other strategy's cell of an injected run): {aa_flags} "
            + (f"flagged of {aa_cells}" if args.mode == "paired" else "flagged (the asv mode prints only those)"),
        ]
        if aa_time:
            unchanged = pd.concat(aa_time, ignore_index=True)
            excluded = ((unchanged.low > 1) | (unchanged.high < 1)).sum()
            far = unchanged.loc[(unchanged.ratio.apply(math.log).abs()).idxmax()]
            text.append(
                f"process effect: {excluded} of {len(unchanged)} time intervals of unchanged code exclude 1.0 (a pure "
                f"sampling error would exclude it in about {2 * ALPHA:.1%}); their ratios span "
                f"{unchanged.ratio.min():.3f}x to {unchanged.ratio.max():.3f}x, the farthest {far.ratio:.3f}x "
                f"({far.benchmark.rsplit('.', 1)[-1]} {far.params}); resolution median "
                f"{unchanged.resolution.median():.3f}x, worst {unchanged.resolution.max():.3f}x"
            )
        if runs["injected"]:  # a failed run counts as one that caught nothing
            text.append(
                f"injected: {caught} of {runs['injected']} runs flagged every injected cell and nothing unexpected"
            )
            for name in injection.slowed:
                ratios = ", ".join(f"{r:.3f}" for r in injected_ratios[name])
                text.append(
                    f"  {name}'s forward caught on every config in {caught_each[name]} of {runs['injected']}; "
                    f"ratios {ratios}"
                )
        if slowed_time:
            slowed = pd.concat(slowed_time, ignore_index=True)
            text.append(resolution_against_catches(slowed.resolution, slowed.verdict == "regression"))
        return text

    def write() -> None:
        """The text so far, and each finished run's table beside it (OUT's stem + "-runs/"), for --rejudge: a
        validation stopped part way keeps what it finished. Each is written aside and then renamed into place, so
        a stop in the middle of a write leaves the previous one whole."""
        if not args.out:
            return
        out = with_folder_made(args.out)
        partial = out.with_name(f".{out.name}.partial")
        partial.write_text("\n".join([*lines, *summary()]) + "\n")
        os.replace(partial, out)
        tables, partial_tables = out.with_name(f"{out.stem}-runs"), out.with_name(f".{out.stem}-runs.partial")
        shutil.rmtree(partial_tables, ignore_errors=True)
        partial_tables.mkdir()
        for table in workdir.glob("*.csv"):
            shutil.copy(table, partial_tables / table.name)
        previous = out.with_name(f".{out.stem}-runs.previous")
        shutil.rmtree(previous, ignore_errors=True)
        if tables.exists():
            tables.rename(previous)
        partial_tables.rename(tables)
        shutil.rmtree(previous, ignore_errors=True)

    write()  # the header and "finished: 0 of ..." at once, replacing an earlier validation's text

    # A/A and injected runs alternate, so that a drift of the machine over the hours falls on both alike.
    schedule = [
        (kind, head, i)
        for i in range(max(args.aa, args.injected))
        for kind, head, runs in (("A/A", same, args.aa), ("injected", injected, args.injected))
        if i < runs
    ]
    for kind, head, i in schedule:
        started = time.monotonic()
        done = _run([*gate, base, head], clone)
        seconds = time.monotonic() - started
        runs[kind] += 1
        if done.returncode not in (0, 1):
            failed[kind] += 1
            say(f"{kind} run {i + 1}: exit {done.returncode} (the gate failed; this run caught nothing)")
            print(f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            write()
            continue
        if args.mode == "paired":
            report = clone / ".asv" / "regress" / f"paired-{base[:8]}-{head[:8]}.csv"
            table = pd.read_csv(report)
            shutil.copy(report, workdir / f"{kind.replace('/', '')}-{i + 1}.csv")
        else:
            table = _asv_table(done.stdout)
        flags = _flagged_keys(table)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("wall-clock resolution")), "")
        if kind == "A/A":
            unexpected, missed = flags, set()
        else:
            # every selected config: the asv mode's table holds only the rows it flagged
            configs = selected | ({p.split(", ")[1] for p in table.params} if "params" in table else set())
            wanted = {(s, c, m) for s, m in injection.injected for c in configs}
            missed = wanted - flags
            unexpected = {f for f in flags if (f[0], f[2]) not in injection.injected | injection.also_changed}
            caught += not missed and not unexpected
            for name in injection.slowed:
                caught_each[name] += not {k for k in missed if k[0] == name}
                slowed = table.benchmark.str.endswith("time_forward") & table.params.str.startswith(f"{name},")
                injected_ratios[name] += [r for r in table[slowed].get("ratio", []) if r == r]
        if args.mode == "paired":
            same_code = _unchanged(table, kind == "injected", injection)
            aa_cells += sum(same_code)
            aa_time.append(table[same_code & (table.unit == "seconds") & (table.pairs > 0)])
            if kind == "injected":
                slowed_time.append(table[_slowed(table, injection) & (table.pairs > 0)])
        aa_flags += len(unexpected)
        say(
            f"{kind} run {i + 1}: exit {done.returncode} in {seconds / 60:.1f} min; unexpected flags "
            f"{sorted(unexpected) or 'none'}; missed {sorted(missed) or 'none'}; {line}"
        )
        write()
    print("\n".join(summary()))
    return 1 if sum(failed.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
