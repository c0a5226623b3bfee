"""Every asv result in a results directory as one tidy pandas table.

One row per result file x benchmark x parameter combination: commit, date, started, machine, env, profile, suite,
metric, strategy, config, device, value, unit, asv's quartiles (``q_25``/``q_75``) and 99% interval
(``ci_99_low``/``ci_99_high``), the interval the reports use (``low``/``high``), a paired ratio's processes, df,
run level, samples and lost replicates, and status (``ok``, ``skipped``: asv's n/a, or ``failed``: asv's, or a
cell whose forward returned no new memory, ``reports.new_memory``, which names why in ``problem``), then the
machine's details (``COLUMNS``); only ``ok`` rows have a value, so a skipped or failed cell can never be read as
zero. A timing's ``low``/``high`` are asv's 99% interval. A paired ratio (unit ``ratio``) holds one sample per
process: its ``value`` is their geometric mean and ``low``/``high`` its 95% Student-t interval across the processes
(``benchmarks.intervals.ratio_interval``), widened by the machine's recorded run level (``reports.run_level``);
the process, not the call, is the unit of replication.

``unroll_result`` is the one reader of an asv ``Results`` (this table and the gate's ``reports.compare`` both read
through it), like the ``unroll_result`` of asv's own ``compare.py``. The columns in detail:
docs/internals.md#reports-what-the-site-is-built-from.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from asv.results import Results, get_filename, iter_results

from benchmarks.allocator import FRESH_PAGES, WARM
from benchmarks.catalogue import CATALOGUE_FILE
from benchmarks.intervals import RunLevel, ratio_interval
from benchmarks.kept_samples import LOST_REPLICATES_SUFFIX
from benchmarks.records import read_records
from benchmarks.selections import selections
from benchmarks.traffic import Sizes
from reports.new_memory import not_new_memory
from reports.run_level import load_run_levels

MACHINE_FIELDS = (
    "python_version",
    "cpu",
    "num_cpu",
    "ram",
    "os",
    "device_names",
    "torch_version",
    "torch_threads",
    "allocator",
    "timing_regime",
)
COLUMNS = [
    "commit",
    "date",
    "started",
    "machine",
    "env",
    "profile",
    "suite",
    "metric",
    "strategy",
    "config",
    "device",
    "value",
    "unit",
    "q_25",
    "q_75",
    "ci_99_low",
    "ci_99_high",
    "low",
    "high",
    "processes",
    "df",
    "run_variance",
    "run_df",
    "samples",
    "lost_replicates",
    "selection",  # the --bench of the finished run that measured its results file ("": every cell; None: unknown)
    "status",
    "problem",  # why a cell's figures do not count where its status is failed for it (``reports.new_memory``)
    *MACHINE_FIELDS,
]


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def status_of(value: float | None) -> str:
    """asv's value of a cell as its status: None is ``failed``, NaN ``skipped`` (asv's n/a), a number ``ok``."""
    if value is None:
        return "failed"
    if isinstance(value, float) and math.isnan(value):
        return "skipped"
    return "ok"


_status = status_of  # the name it had


@dataclass(frozen=True)
class ResultCell:
    """One benchmark cell of an asv result: its parameters (unquoted), asv's value, stats and samples, status."""

    benchmark: str
    params: tuple[str, ...]
    value: float | None  # as asv recorded it: None failed, NaN skipped
    stats: dict | None
    samples: list | None
    status: str  # ``status_of(value)``

    @property
    def ok(self) -> bool:
        """Whether the cell has a figure."""
        return self.status == "ok"


def unroll_result(result: Results, names: Iterable[str] | None = None) -> Iterator[ResultCell]:
    """Every cell of ``result`` (of the benchmarks ``names`` it has, if given), in asv's parameter order."""
    present = result.get_all_result_keys()
    for name in present if names is None else [n for n in names if n in present]:
        params = result.get_result_params(name)
        combos = list(itertools.product(*params)) if params else [()]
        values = result.get_result_value(name, params)
        stats = result.get_result_stats(name, params)
        samples = result.get_result_samples(name, params)
        for combo, value, stat, sample in zip(combos, values, stats, samples):
            params_shown = tuple(_unquote(p) for p in combo)
            yield ResultCell(name, params_shown, value, stat, sample, status_of(value))


def timing_regime(machine_params: dict) -> str:
    """The timing regime a result was taken in (``benchmarks.allocator``): recorded since the regimes exist;
    before, every process that pinned glibc's mmap threshold timed in the fresh-pages regime."""
    recorded = machine_params.get("timing_regime")
    if recorded:
        return recorded
    return FRESH_PAGES.name if "pinned" in (machine_params.get("allocator") or "") else WARM.name


def environment_label(env_name: str, machine_params: dict, requirements: dict) -> str:
    """The environment a result was measured in, named by what decides its figures, not by where it lives: asv
    names an existing interpreter's environment after its path (``existing-py_work_main_.venv_bin_python``), so
    the same machine measured from two checkouts (a laptop and CI) would be two series. Such a name becomes
    ``existing-py<major.minor>-<package><pin>...`` (the Python version where the machine entry records it);
    asv's own environments (``--commits``) keep their names, which already are of that form."""
    if not env_name.startswith("existing-"):
        return env_name
    parts = ["existing"]
    if machine_params.get("python_version"):
        parts.append("py" + ".".join(machine_params["python_version"].split(".")[:2]))
    parts += [f"{package}{pin}" for package, pin in sorted(requirements.items())]
    return "-".join(parts)


LostKey = tuple[str, str, str, tuple[str, ...]]  # machine, results file, benchmark, params (unquoted)


def load_lost_replicates(results_dir: str | Path) -> dict[LostKey, tuple[int, ...]]:
    """The replicates each paired cell lost, recorded beside its machine's results (``benchmarks.kept_samples``):
    its samples are those of the other replicates, so their positions do not name their replicates."""
    found: dict[LostKey, tuple[int, ...]] = {}
    for path in Path(results_dir).glob(f"*/*{LOST_REPLICATES_SUFFIX}"):
        for record in read_records(path):
            params = tuple(_unquote(p) for p in record["params"])
            key = (path.parent.name, record["file"], record["benchmark"], params)
            found[key] = tuple(sorted({*found.get(key, ()), record["replicate"]}))
    return found


def load_selections(results_dir: str | Path) -> dict[tuple[str, str, str], str]:
    """(machine, results file, profile) -> the selection a finished run of it recorded (``benchmarks.selections``)."""
    return {
        (machine_dir.name, file, profile): bench
        for machine_dir in Path(results_dir).glob("*/")  # none where results_dir is absent
        if machine_dir.is_dir()
        for (file, profile), bench in selections(machine_dir).items()
    }


FIGURE_COLUMNS = ["value", "q_25", "q_75", "ci_99_low", "ci_99_high", "low", "high", "processes", "df"]
FIGURE_COLUMNS += ["run_variance", "run_df"]  # what a failed cell has none of


def load_results(
    results_dir: str | Path, run_levels: Mapping[tuple[str, str, str], RunLevel] | None = None
) -> pd.DataFrame:
    """The tidy table of every result under ``results_dir`` (empty, with the columns, if there are none); the paired
    ratios' intervals include the run levels recorded there (``reports.run_level``), or ``run_levels`` if given
    ((machine, profile, suite) -> ``RunLevel``; ``{}``: across the processes alone)."""
    results_dir = Path(results_dir)
    benchmarks_file = results_dir / "benchmarks.json"
    benchmarks = json.loads(benchmarks_file.read_text()) if benchmarks_file.exists() else {}
    if run_levels is None:
        run_levels = load_run_levels(results_dir)
    lost = load_lost_replicates(results_dir)
    selected = load_selections(results_dir)
    rows = []
    for result in iter_results(str(results_dir)):
        machine_params = result.params
        file = Path(get_filename(machine_params.get("machine"), result.commit_hash, result.env_name)).name
        names = [name for name in result.get_all_result_keys() if len(name.split(".")) == 3 and name in benchmarks]
        requirements = getattr(result, "_requirements", None) or {}  # asv keeps the pinned packages privately
        for cell in unroll_result(result, names):
            suite, profile, metric = cell.benchmark.split(".")
            info = benchmarks[cell.benchmark]
            params = dict(zip(info.get("param_names", []), cell.params))
            stat = cell.stats or {}
            value, low, high = cell.value if cell.ok else None, stat.get("ci_99_a"), stat.get("ci_99_b")
            processes, df, added, added_df, samples = math.nan, math.nan, math.nan, math.nan, None
            lost_replicates = lost.get((machine_params.get("machine"), file, cell.benchmark, cell.params), ())
            if info.get("unit") == "ratio" and cell.ok and cell.samples:
                level = run_levels.get((machine_params.get("machine"), profile.lower(), suite))
                value, low, high, df = ratio_interval(cell.samples, run_level=level)
                processes, samples = len(cell.samples), list(cell.samples)
                added, added_df = (level.variance, level.df) if level is not None else (math.nan, math.nan)
            rows.append(
                {
                    "commit": result.commit_hash,
                    "date": result.date or None,  # ms since the epoch until the table is made, below
                    "started": _started(result, cell.benchmark),
                    "machine": machine_params.get("machine"),
                    "env": environment_label(result.env_name, machine_params, requirements),
                    "profile": profile.lower(),
                    "suite": suite,
                    "metric": metric,
                    "strategy": params.get("strategy"),
                    "config": params.get("config"),
                    "device": params.get("device"),
                    "value": value,
                    "unit": info.get("unit"),
                    "q_25": stat.get("q_25"),
                    "q_75": stat.get("q_75"),
                    "ci_99_low": stat.get("ci_99_a"),
                    "ci_99_high": stat.get("ci_99_b"),
                    "low": low,
                    "high": high,
                    "processes": processes,
                    "df": df,
                    "run_variance": added,
                    "run_df": added_df,
                    "samples": samples,
                    "lost_replicates": lost_replicates,
                    "selection": selected.get((machine_params.get("machine"), file, profile.lower())),
                    "status": cell.status,
                    "problem": None,
                    **{field: machine_params.get(field) for field in MACHINE_FIELDS},
                    "timing_regime": timing_regime(machine_params),
                }
            )
    table = pd.DataFrame(rows, columns=COLUMNS)
    for column in ("date", "started"):  # ms since the epoch, converted a column at a time
        table[column] = pd.to_datetime(table[column].astype("float64"), unit="ms", utc=True)
    problems = not_new_memory(table, load_catalogue(results_dir).sizes)
    void = problems.notna()  # failed, as asv records a failure: no figure, no spread, no samples
    table.loc[void, "status"], table.loc[void, "problem"] = "failed", problems[void]
    table.loc[void, FIGURE_COLUMNS] = math.nan
    table.loc[void, "samples"] = None
    return table


def _started(result: Results, benchmark: str) -> int | None:
    """When asv last started ``benchmark`` in ``result``, in ms since the epoch: asv keeps one time per benchmark,
    that of the last asv run that timed it (the machine's clock; ``result.date`` is the commit's)."""
    return (getattr(result, "started_at", None) or {}).get(benchmark) or None


def load_capabilities(directory: str | Path) -> list[dict]:
    """The capability matrices in ``directory`` (``unfold-bench capabilities``: one file per machine, the newest
    measurement), sorted by machine; empty when there are none."""
    return [json.loads(path.read_text()) for path in sorted(Path(directory).glob("*.json"))]


@dataclass(frozen=True)
class Catalogue:
    """What the bench recorded of the strategies, configs and torch (``benchmarks.catalogue``), merged over every
    machine under a results directory, the newest record of each name winning. Empty where none was recorded
    (results older than the catalogue): the reports then say so rather than guess."""

    strategies: Mapping[str, Mapping] = field(default_factory=dict)  # name -> its record
    sizes: Mapping[tuple[str, str], Sizes] = field(default_factory=dict)  # (profile, config) -> its sizes
    torch_views: tuple[Mapping, ...] = ()  # one record per operation, from the newest catalogue that has them
    torch_source: str = ""  # which torch, machine, commit and date recorded ``torch_views``

    def profile_sizes(self, profile: str) -> dict[str, Sizes]:
        """Each config's sizes at ``profile``'s batch size."""
        return {config: sizes for (name, config), sizes in self.sizes.items() if name == profile}

    def config_sizes(self, config: str) -> Sizes | None:
        """``config``'s sizes at any profile (for ratios that do not depend on the batch size), or None."""
        return next((s for (_, name), s in self.sizes.items() if name == config), None)


def catalogue_from_records(records: Iterable[Mapping], machine: str = "") -> Catalogue:
    """One machine's catalogue from the records the bench wrote (``benchmarks.catalogue``)."""
    records = list(records)
    header = next((r for r in records if r.get("record") == "written"), {})
    strategies = {r["name"]: r for r in records if r.get("record") == "strategy"}
    sizes = {
        (r["profile"], r["config"]): Sizes(r["input_numel"], r["output_numel"], r["itemsize"], tuple(r["output_size"]))
        for r in records
        if r.get("record") == "sizes"
    }
    views = tuple(r for r in records if r.get("record") == "torch view")
    source = ""
    if views:
        source = f"torch {header.get('torch', '?')} on {machine or '?'}"
        if header.get("commit"):
            source += f", recorded by the bench of {header['commit'][:8]}"
        if header.get("date"):
            source += f" on {header['date'][:10]}"
    return Catalogue(strategies, sizes, views, source)


def load_catalogue(results_dir: str | Path) -> Catalogue:
    """The catalogue of every machine under ``results_dir`` (``results/<machine>/catalogue.jsonl``), merged: the
    newest record of each strategy and config wins, and the torch checks come from the newest catalogue."""
    found = []
    for path in Path(results_dir).glob(f"*/{CATALOGUE_FILE}"):
        records = read_records(path)
        date = next((r.get("date", "") for r in records if r.get("record") == "written"), "")
        found.append((date, path.parent.name, catalogue_from_records(records, path.parent.name)))
    strategies: dict[str, Mapping] = {}
    sizes: dict[tuple[str, str], Sizes] = {}
    views: tuple[Mapping, ...] = ()
    source = ""
    for _, _, one in sorted(found, key=lambda f: f[:2]):  # oldest first: the newest wins
        strategies.update(one.strategies)
        sizes.update(one.sizes)
        if one.torch_views:
            views, source = one.torch_views, one.torch_source
    return Catalogue(strategies, sizes, views, source)
