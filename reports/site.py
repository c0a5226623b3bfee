"""The static website: every asv result in a results directory, as six linked HTML pages (``PAGES``).

``build_site(results_dir, out_dir)`` writes ``index.html`` (which to ship), ``findings.html`` (every claim and
target with its verdict, ``reports.findings``), ``trends.html`` (across commits, steps flagged by asv's step
detection), ``tradeoff.html`` (time vs memory, Pareto front), ``strategies.html`` (each strategy's registry entry
and history) and ``machines.html`` (what measured), plus ``plotly.min.js`` once.
Pages load that file by a relative path and nothing else, so the site works opened from disk and served by
GitHub Pages, with no network. If ``asv publish`` has written its own site to ``out_dir/asv``, the pages
link to it (that site loads its scripts from public CDNs: asv's choice, not ours).

Skipped and failed cells are written as such, never as numbers; every number carries its unit
(``reports.units``). A "regression" is the CI gate's verdict alone (``reports.compare``); what asv's step
detection finds across commits is called a step.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import pandas as pd
import plotly.graph_objects as go
import plotly.offline
from markupsafe import Markup

from benchmarks.allocator import NET_PEAK_RESOLUTION, REGIMES, regime_of_machine
from benchmarks.vocabulary import PASSES, pass_label, timed_metric, tracked_peak_metric
from reports import analysis, figures
from reports.findings import findings, render_html
from reports.results import Catalogue, load_capabilities, load_catalogue, load_results
from reports.set_aside import complexity, set_aside
from reports.templates import macro, render
from reports.units import (
    MACHINE_MEMORY,
    METRICS,
    SECONDS,
    SHOWN_METRICS,
    format_ratio,
    format_ratio_interval,
)

PAGES = {
    "index.html": "Which to ship",
    "findings.html": "Findings",
    "trends.html": "Trends across commits",
    "tradeoff.html": "Time vs memory",
    "strategies.html": "Strategies",
    "machines.html": "Machines",
}
PLOTLY_JS = "plotly.min.js"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #222; line-height: 1.45; }
nav { background: #24292f; padding: 0.6em 1.5em; position: sticky; top: 0; z-index: 10; }
nav a { color: #fff; margin-right: 1.4em; text-decoration: none; }
nav a.here { font-weight: bold; text-decoration: underline; }
main { padding: 0.5em 1.5em 3em; max-width: 1400px; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.92em; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td:first-child { white-space: nowrap; }
.wide { overflow-x: auto; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.failed { background: #ffebe9; color: #a40e26; font-weight: bold; }
td.skipped { color: #6e7781; font-style: italic; }
td.step { color: #a40e26; font-weight: bold; }
td.best { background: #dafbe1; }
.box { border: 1px solid #d0d7de; border-left: 5px solid #2da44e; padding: 0.5em 1em; margin: 0.8em 0;
       background: #fbfffc; }
.box.none { border-left-color: #bf8700; background: #fffbeb; }
.rule { color: #57606a; font-size: 0.92em; }
.note { color: #57606a; }
footer { color: #6e7781; font-size: 0.85em; margin-top: 3em; }
"""
STATUS_TEXT = {"skipped": "skipped", "failed": "failed", "not run": "not run"}


@dataclass
class Page:
    """One HTML page under construction: its body's blocks (markup, from ``reports.templates``) and its figures.
    Text given to ``heading`` and ``paragraph`` is escaped unless it is ``Markup``."""

    file: str
    parts: list[Markup] = field(default_factory=list)
    figure_count: int = 0

    def add(self, markup: Markup) -> None:
        self.parts.append(markup)

    def heading(self, text: str, level: int = 2, anchor: str | None = None) -> None:
        self.add(macro("heading", text, level, anchor))

    def paragraph(self, text: str | Markup, css: str = "") -> None:
        self.add(macro("paragraph", text, css))

    def figure(self, figure: go.Figure) -> None:
        self.figure_count += 1
        div_id = f"{self.file.removesuffix('.html')}-figure-{self.figure_count}"
        config = {"displaylogo": False, "responsive": True}
        self.add(Markup(figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=config)))

    def render(self, title: str, asv_link: bool, footer: Markup) -> str:
        return render(
            "layout.html",
            title=title,
            style=Markup(STYLE),
            plotly_js=PLOTLY_JS,
            pages=PAGES,
            here=self.file,
            asv_link=asv_link,
            blocks=self.parts,
            footer=footer,
        )


def _table(header: list[str], rows: Iterable[list[tuple[str, str]]]) -> Markup:
    """An HTML table; each cell is (text, css class), the text escaped unless it is ``Markup``."""
    return macro("table", header, [list(row) for row in rows])


def _exact(row) -> bool:
    """A ranking's T with no width: the paired ratios' reference, exactly 1 over itself on every config, whose T is
    the inverse of the yardstick that every other strategy's interval is measured against."""
    return row.strategy == analysis.REFERENCE_STRATEGY and row.time_low == row.time_high == row.time_score


def _regime_label(machine: str) -> str:
    return regime_of_machine(machine).label


def _run_title(run: pd.Series | dict, device: str | None = None) -> str:
    parts = [run["machine"], f"{run['profile']} profile", f"timed: {_regime_label(run['machine'])}"]
    if device:
        parts.append(device.upper())
    return " · ".join(parts)


def _figure_cell(row: pd.Series, metric: str, best: bool) -> tuple[str, str]:
    figure = METRICS[metric]
    status = row.get(f"{metric}:status", "not run")
    if status != "ok":
        return STATUS_TEXT.get(status, status), status.replace(" ", "-")
    bound = figure.bound_info.short
    if figure.unit is SECONDS:
        value = analysis.cell_spread(row, metric)
    else:
        value = figure.format(row[metric], digits=3)
    parts = [value, _x_native_text(row, metric)]
    parts.append(_x_bound_text(row, metric, bound))
    return ("★ " if best else "") + " · ".join(parts), "num best" if best else "num"


def _pick_figure(cells: pd.DataFrame, config: str, strategy: str | None, metric: str) -> str:
    """A per-config pick's time: its median with the interquartile range and its paired ratio to native with the
    interval, as its cell in the table shows them ("-" without a pick)."""
    rows = cells[(cells.config == config) & (cells.strategy == strategy)]
    if strategy is None or rows.empty:
        return "-"
    row = rows.iloc[0]
    spread = analysis.cell_spread(row, metric)
    if pd.isna(row.get(f"{metric}:x_native", math.nan)):  # a config native cannot run: ranked by x copy_
        return f"{spread} · {_x_bound_text(row, metric, METRICS[metric].bound_info.short)}"
    return f"{spread} · {_x_native_text(row, metric)}"


def _x_bound_text(row: pd.Series | dict, metric: str, bound: str) -> str:
    """The figure over its bound: a forward's chained through native's paired ratios, with its interval; a time's
    quotient of medians from different processes, marked so; a net peak over the analytic minimum."""
    ratio = row.get(f"{metric}:x_bound", math.nan)
    if row.get(f"{metric}:x_bound_paired", False):
        low, high = row.get(f"{metric}:x_bound_low", math.nan), row.get(f"{metric}:x_bound_high", math.nan)
        return format_ratio_interval(ratio, low, high, suffix=f"x {bound}") + analysis.own_loop_note(
            row, metric, over=bound
        )
    medians = " (medians)" if METRICS[metric].unit is SECONDS and not pd.isna(ratio) else ""
    return f"{format_ratio(ratio)} {bound}{medians}"


def _x_native_text(row: pd.Series | dict, metric: str) -> str:
    """The figure over native's: the paired ratio with its interval across processes, or the quotient of medians
    (an older run, marked so)."""
    ratio = row.get(f"{metric}:x_native", math.nan)
    if pd.isna(ratio):
        return "- native"
    if not row.get(f"{metric}:x_native_paired", False):
        return f"{format_ratio(ratio)} native" + (" (medians)" if METRICS[metric].unit is SECONDS else "")
    low, high = row.get(f"{metric}:x_native_low", math.nan), row.get(f"{metric}:x_native_high", math.nan)
    return format_ratio_interval(ratio, low, high, suffix="x native") + analysis.own_loop_note(
        row, metric, over=analysis.REFERENCE_STRATEGY
    )


def _cell_table_html(cells: pd.DataFrame, aside: Mapping[str, str] = MappingProxyType({})) -> str:
    best = {(w.config, w.metric, w.strategy) for w in analysis.winners(cells, aside).itertuples()}
    header = ["config", "strategy", *(figure.label for figure in METRICS.values())]
    rows = []
    for row in cells.sort_values(["config", "strategy"], kind="stable").to_dict("records"):
        line = [(row["config"], ""), (row["strategy"], "")]
        line += [_figure_cell(row, m, (row["config"], m, row["strategy"]) in best) for m in METRICS]
        rows.append(line)
    return _table(header, rows)


def _capability_record(records: list[dict], machine: str) -> dict | None:
    """The capability matrix of the machine a run was timed on (its name without the timing regime's suffix)."""
    suffix = regime_of_machine(machine).machine_suffix
    base = machine.removesuffix(suffix) if suffix else machine
    return next((r for r in records if r["machine"] == base), None)


def _needs(
    cells: pd.DataFrame,
    rule: analysis.Rule,
    record: dict | None,
    device: str,
    pick: str | None,
    aside: dict[str, str],
    simplicity: dict[str, int],
) -> list[tuple[str, str, bool]]:
    """What to ship when the code needs a capability: (capability, its pick or "none", whether it is ``pick``)."""
    picks = analysis.needs_picks(cells, rule, record, device, aside, simplicity)
    return [(c, p or "none", p == pick) for c, p in picks]


def _recommendation_html(
    cells: pd.DataFrame, table: pd.DataFrame, run: dict, device: str, catalogue: Catalogue, record: dict | None = None
) -> Markup:
    aside, simplicity = set_aside(catalogue.strategies), complexity(catalogue.strategies)
    parts = []
    for rule in analysis.RULES:
        advice = analysis.recommend(cells, rule, aside, simplicity)
        others = analysis.other_regime_picks(table, run, device, rule, aside, simplicity)
        if advice.strategy is None:
            verdict = Markup("<b>Every strategy failed somewhere on this device</b>: see the picks per config below.")
            css = "box none"
        else:
            coverage = (
                "every config"
                if not advice.not_covered
                else f"{len(advice.configs)} configs; it does not support {', '.join(advice.not_covered)}"
            )
            verdict = Markup(
                "<b>{}</b>: on average (geometric mean) {} the fastest time of each config, covering {}."
            ).format(advice.strategy, format_ratio_interval(advice.score, advice.low, advice.high), coverage)
            if advice.tied:
                verdict += Markup(
                    " A statistical tie between {}: the times cannot tell them apart, so the tie-break picks."
                ).format(", ".join(advice.tied))
            ok = cells[cells[f"{rule.time_metric}:status"] == "ok"]
            unpaired = [
                config
                for config, rows in ok.groupby("config", sort=False)
                if analysis.paired_yardstick(rows, rule.time_metric) is None
            ]
            if unpaired:
                where = "This run" if len(unpaired) == ok.config.nunique() else f"On {', '.join(unpaired)} this run"
                verdict += Markup(
                    " {} has no paired ratios: there its times are ranked by medians of different processes, and "
                    "the brackets here are built from asv's 99% interval of each median."
                ).format(where)
            css = "box"
        ranking = "; ".join(
            f"{r.strategy} T {format_ratio_interval(r.time_score, r.time_low, r.time_high)}"
            + (" (the reference the others are paired with: theirs hold the error)" if _exact(r) else "")
            + ", "
            f"M {format_ratio(r.memory_score)}" + (f" ({r.why_not})" if r.why_not else "")
            if not pd.isna(r.time_score)
            else f"{r.strategy} out ({r.why_not})"
            for r in advice.ranking.itertuples()
        )
        picks = analysis.recommend_per_config(cells, rule, aside, simplicity)
        time = METRICS[rule.time_metric]
        pick_rows = [
            [
                (p.config, ""),
                (p.strategy or "none qualifies", "" if p.strategy else "skipped"),
                (_pick_figure(cells, p.config, p.strategy, rule.time_metric), "num"),
                (f"tie: {', '.join(p.tied)}" if p.tied else "-", ""),
                (", ".join(p.eligible) or "-", ""),
            ]
            for p in picks.itertuples()
        ]
        parts.append(
            render(
                "recommendation.html",
                css=css,
                rule=rule.name,
                verdict=verdict,
                tolerance=f"{rule.tolerance:g}",
                slack_kib=rule.slack // 1024,
                per_config=rule.short_text(),
                ties=analysis.TIE_TEXT,
                candidates=ranking,
                regime=" " + analysis.regime_note(run["machine"], advice.strategy, others, run["commit"]),
                needs=_needs(cells, rule, record, device, advice.strategy, aside, simplicity),
                needs_machine=record["machine"] if record else "",
                pick_header=["config", "pick", time.label, "statistical tie", "eligible"],
                pick_rows=pick_rows,
            )
        )
    return Markup("\n").join(parts)


def _skipped_note(run_table: pd.DataFrame, device: str) -> str:
    skipped = analysis.skipped_cells(run_table, device)
    if skipped.empty:
        return ""
    listed = "; ".join(f"{s} on {', '.join(sorted(g.config))}" for s, g in skipped.groupby("strategy"))
    return f"Skipped (not supported, or not run on this machine): {listed}."


def _failed_note(run_table: pd.DataFrame, device: str) -> str:
    """The run's failed cells on ``device``, one per strategy and config, with why where the results say it
    (``reports.new_memory``); asv records only that a cell failed, and its log says why."""
    failed = run_table[(run_table.device == device) & (run_table.status == "failed") & run_table.strategy.notna()]
    if failed.empty:
        return ""
    listed = []
    for (strategy, config, why), rows in failed.fillna({"problem": ""}).groupby(["strategy", "config", "problem"]):
        which = ", ".join(dict.fromkeys(analysis.metric_label(r) for r in rows.itertuples()))
        listed.append(f"{strategy} on {config} ({which})" + (f": {why}" if why else ""))
    return f"Failed (where no reason is given, the run's asv log says why): {'; '.join(listed)}."


def _not_new_memory_note(table: pd.DataFrame) -> str:
    """The gaps in the series where a cell returned no new memory (``reports.new_memory``): which, and why."""
    void = table[table.problem.notna()]
    if void.empty:
        return ""
    listed = []
    for (machine, profile, strategy, config, device), rows in void.groupby(
        ["machine", "profile", "strategy", "config", "device"]
    ):
        commits = ", ".join(sorted({c[:8] for c in rows.commit}))
        listed.append(f"{strategy} on {config} ({machine} · {profile} · {device}; commits {commits})")
    return (
        "Gaps where a cell's forward allocated less than its output (not new memory, as F.unfold's output is), so "
        f"none of its figures counts: {'; '.join(listed)}."
    )


def _short_note(run_table: pd.DataFrame, device: str) -> str:
    short = analysis.short_cells(run_table, device)
    if short.empty:
        return ""
    listed = "; ".join(f"{analysis.cell_label(r)}: {analysis.lost_text(r)}" for r in short.itertuples())
    return (
        "Paired cells that failed in a replicate and kept the other replicates' processes, so with a wider "
        f"interval (the run's asv log says why): {listed}."
    )


def findings_page(table: pd.DataFrame, catalogue: Catalogue) -> Page:
    """Every claim and target with its verdict, computed from the newest run of each machine (``reports.findings``)."""
    page = Page("findings.html")
    page.add(render_html(findings(table, catalogue), set_aside(catalogue.strategies)))
    return page


def overview_page(
    table: pd.DataFrame, colors: dict[str, str], catalogue: Catalogue, capabilities: list[dict] = ()
) -> Page:
    page = Page("index.html")
    page.paragraph(
        Markup(
            "Each strategy computes exactly <code>torch.nn.functional.unfold</code> (values and gradients are "
            "checked against a reference before any figure counts). For every machine and profile, the newest "
            "complete run's results (a run of a selection, <code>make bench BENCH=...</code>, is not used): runtime "
            "of the forward pass and of forward plus backward, and the net peak memory "
            "each allocates. Ratios: <b>x native</b> is the time over PyTorch's own <code>F.unfold</code> on the "
            "same config, measured against it inside each of several processes, each call after the other's (blocks "
            "A B B A), with its 95% interval across the processes, widened by the spread between runs where one is "
            "recorded (below each run's table), in brackets (<i>(medians)</i>: a run without paired "
            "ratios, the quotient of two medians). The runtimes are each strategy's own calls one after another (asv's "
            "samples, one call each with only a setup between), as a loop of <code>torch.utils.benchmark</code> times "
            "them, so a runtime over native's can read lower than x native where a call costs more after other work "
            "than after itself (<code>unfold-bench context</code> measures both orders, and a call after an idle "
            "pause). Where it reads higher, by more than {factor:g}x beyond both spreads (<i>own calls</i>; where "
            "native cannot run, its runtime over copy_'s against x copy_), the strategy's time depends on what "
            "runs before it, and no pick takes it there; "
            "<b>x copy_</b> with copying a tensor of the output's size in the same run (what the memory "
            "system allows), paired inside processes too, its interval widened by how far such ratios move between "
            "runs where <code>unfold-bench stability</code> measured that on the machine; <b>x min</b> with the "
            "analytic minimum (the output; for forward-backward also "
            "<code>grad_output</code> and <code>grad_input</code>). ★ marks the best figure of a config in its "
            "column among the strategies that can be shipped (none set aside, nor one whose time there depends on "
            "what runs before it; statistical ties and net peaks "
            f"within {NET_PEAK_RESOLUTION // 1024} KiB of the lowest included); a pick also keeps its memory within "
            "its rule's limit, so it may take a strategy without a ★. Lower is "
            "better everywhere. <b>quick</b> runs use a batch of at most 8, <b>full</b> runs each config's own "
            "(<code>benchmarks/configs.py</code>). "
            "<code>copy_</code> reads and writes the output's bytes; a perfect forward writes them once and reads "
            "the input (smaller than the output where the windows overlap), a perfect forward-backward also reads "
            "the output's gradient and writes the input's: both times are read against the same copy_. In the charts a "
            "missing bar is a skipped or failed cell, or a bound of zero (in results up to commit f26b0bd, a 1x1 "
            "stride-1 unfold's minimum was 0: as_strided returned a view of the input), so there is no ratio; the "
            "table says which."
        ).format(factor=analysis.CONTEXT_FACTOR)
    )
    rule_item = Markup("<li><b>{}</b>: on each config, {}; for the device, {}.</li>")
    rules = Markup("").join(
        rule_item.format(rule.name, rule.per_config_text(), rule.per_device_text()) for rule in analysis.RULES
    )
    latest = analysis.latest_runs(table)
    if latest.empty:
        page.paragraph(Markup("No results yet: run <code>make bench</code>."), "note")
    for run in latest.sort_values(["machine", "profile"], ascending=[True, True]).to_dict("records"):
        run_table = analysis.select_run(table, run)
        for device in sorted(set(run_table.device.dropna())):
            page.heading(_run_title(run, device), anchor=f"{run['machine']}-{run['profile']}-{device}")
            partial = run.get("newer_partial") or []
            left_out = (
                Markup("; newer runs of a selection, not used here: ")
                + Markup(", ").join(Markup("<code>{}</code>").format(c[:8]) for c in partial)
                if partial
                else ""
            )
            where = Markup("commit <code>{}</code> ({}), environment <code>{}</code>: the newest complete run{}")
            page.paragraph(where.format(run["commit"][:8], f"{run['date']:%Y-%m-%d}", run["env"], left_out), "note")
            cells = analysis.cell_table(run_table, device)
            if cells.empty:
                page.paragraph(
                    f"No figures on {device}: every cell was skipped on this machine (for CUDA: no GPU).", "note"
                )
                continue
            unmeasured = analysis.unmeasured_note(run_table, device, catalogue.strategies)
            if unmeasured:
                page.paragraph(unmeasured, "note")
            record = _capability_record(list(capabilities), run["machine"])
            page.add(_recommendation_html(cells, table, run, device, catalogue, record))
            page.add(_cell_table_html(cells, set_aside(catalogue.strategies)))
            notes = (
                _skipped_note(run_table, device),
                _failed_note(run_table, device),
                _short_note(run_table, device),
                analysis.run_level_note(run_table),
            )
            for note in notes:
                if note:
                    page.paragraph(note, "note")
            title = f"Each figure as a multiple of its bound: {_run_title(run, device)}"
            page.figure(figures.bound_ratio_bars(cells, colors, title))
    page.heading("How the recommendations are made", anchor="rules")
    page.add(Markup("<ul>{}</ul>").format(rules))
    page.paragraph(
        "The recommendations weigh speed and memory only; under each, what to ship when your code needs "
        "a capability some strategy lacks, from the capability matrix below."
    )
    page.heading("Capabilities", anchor="capabilities")
    page.paragraph(
        Markup(
            "Where each strategy works as <code>torch.nn.functional.unfold</code> does, measured by "
            "<code>impls/capabilities.py</code> on the machine named (every cell compared with <code>F.unfold</code> "
            "under the same transform; the test suite checks the same cells). <b>defect</b>: the strategy declares it "
            "cannot, and the check confirms it still fails; <b>unsupported</b>: the strategy does not take that input "
            "on that device; <b>unverified</b>: not checked there. Ship a strategy only where its row says "
            "<b>works</b> for what your code needs (e.g. per-sample gradients for KFAC or BackPACK)."
        )
    )
    page.add(_capabilities_html(capabilities))
    return page


def trends_page(table: pd.DataFrame, colors: dict[str, str]) -> Page:
    page = Page("trends.html")
    history = analysis.series(table)
    flagged = analysis.steps(history)
    page.paragraph(
        Markup(
            "Every strategy's figures across commits, per machine, environment, profile and device, the paired "
            "ratios to native first: those are measured against native inside every process, so a placement or a "
            "process that slows both sides moves neither, and a step in them is a change of the code (or of torch). "
            "Their error bars are the 95% interval across processes; the times' and memories' are asv's "
            "interquartile range. Steps are found with <b>asv's own step detection</b> "
            "(<code>asv.step_detect.detect_steps</code> and <code>detect_regressions</code>, the method behind "
            "asv's regressions page) with its default threshold of {}: a step up "
            "that the series' noise does not explain. A paired ratio's step also needs the two commits' intervals "
            "apart, and a time's a series of at least {} commits (its noise is between processes, which one run's "
            "interquartile range does not show). A time's or memory's step that native takes at the same commit, and "
            "by as much, is marked <i>native too</i>: native is torch's own unfold, which no commit here changes, so "
            "that step is the machine's or the run's. Failed and skipped points are gaps, not zeros. (Whether a "
            "change is a regression is the CI gate's verdict, on its own measurements.)"
        ).format(f"{analysis.STEP_THRESHOLD:.0%}", analysis.MIN_TIME_SERIES)
    )
    void = _not_new_memory_note(table)
    if void:
        page.paragraph(void, "note")
    page.heading("Steps found by asv's step detection")
    if flagged.empty:
        page.paragraph("None: no series has a step up beyond the threshold.", "note")
    else:
        rows = []
        for r in flagged.itertuples():
            figure = SHOWN_METRICS[r.metric]
            rows.append(
                [
                    (f"{r.machine} · {r.profile} · {r.device}", ""),
                    (r.config, ""),
                    (r.strategy, ""),
                    (figure.label, ""),
                    (f"{r.commit_before[:8]} → {r.commit_after[:8]}", ""),
                    (f"{figure.format(r.value_before, 3)} → {figure.format(r.value_after, 3)}", "num"),
                    (format_ratio(r.ratio) if r.ratio != float("inf") else "from 0", "num step"),
                    ("yes: the machine's" if r.native_too else "", ""),
                ]
            )
        header = ["run", "config", "strategy", "figure", "commits", "level", "ratio", "native too"]
        page.add(_table(header, rows))
    sections = history[history.status == "ok"].drop_duplicates(["machine", "env", "profile", "device"])
    for section in sections.sort_values(["machine", "profile", "device"]).itertuples():
        key = {"machine": section.machine, "env": section.env, "profile": section.profile, "device": section.device}
        rows, steps = analysis.rows_where(history, **key), analysis.rows_where(flagged, **key)
        page.heading(
            f"{section.machine} · {section.profile} profile · {section.device.upper()} · {section.env} · timed: "
            + _regime_label(section.machine)
        )
        for metric in SHOWN_METRICS:
            if rows[rows.metric == metric].empty:
                continue
            title = (
                f"{SHOWN_METRICS[metric].label}: {section.machine} · {section.profile} · {section.device} · "
                f"{section.env} · {_regime_label(section.machine)}"  # a series per environment: two titles differ
            )
            page.figure(figures.trend_lines(rows, metric, colors, steps, title))
    if sections.empty:
        page.paragraph("No figures yet.", "note")
    return page


def tradeoff_page(table: pd.DataFrame, colors: dict[str, str], catalogue: Catalogue) -> Page:
    page = Page("tradeoff.html")
    page.paragraph(
        Markup(
            "Runtime against net peak memory at each machine's newest commit. The time is each strategy's over the "
            "fastest strategy the picks could take on that config, ranked as the picks rank it: by the paired "
            "ratios, with their 95% interval across processes as the error bar (a run without them: by the medians, "
            "with asv's interval of each; hover says which, and gives the median time and its interquartile range). "
            "The <b>Pareto front</b> (dashed steps, ringed points) holds the strategies that no other strategy "
            "beats in both beyond the noise: faster with the intervals apart, or less memory by more than a net "
            "peak's resolution. Choosing off the front costs time or memory for nothing. Strategies the picks "
            "never take (those that reuse their output, and those whose time on that config depends on what ran "
            "before it) are shown but never on the front. Pick the config from the menu."
        )
    )
    aside = set_aside(catalogue.strategies)
    for run in analysis.latest_runs(table).to_dict("records"):
        run_table = analysis.select_run(table, run)
        for device in sorted(set(run_table.device.dropna())):
            cells = analysis.cell_table(run_table, device)
            if cells.empty:
                continue
            page.heading(_run_title(run, device))
            for which in reversed(PASSES):  # training first
                time_metric, memory_metric = timed_metric(which), tracked_peak_metric(which)
                points = {
                    config: analysis.tradeoff(rows, time_metric, memory_metric, aside)
                    for config, rows in cells.groupby("config", sort=False)
                }
                title = f"{pass_label(which)}: time vs memory, {_run_title(run, device)}"
                page.figure(figures.tradeoff_scatter(cells, time_metric, memory_metric, colors, points, title))
    return page


CAPABILITY_MARKS = {
    "works": ("works", "best"),
    "declared defect": ("defect", "failed"),
    "fails": ("FAILS", "failed"),
    "unsupported": ("unsupported", "skipped"),
    "unverified": ("unverified", "skipped"),
}


def _capabilities_html(records: list[dict]) -> Markup:
    """Each machine's newest capability matrix (``unfold-bench capabilities``): a table per device it could check,
    every cell other than "works" numbered and explained under the table."""
    sections = []
    for record in records:
        where = {k: record[k] for k in ("machine", "torch", "date")} | {"commit": record["commit"][:8]}
        for device, rows in record["cells"].items():
            cells = [v for row in rows.values() for v in row.values()]
            if all(v.startswith("unverified") for v in cells):
                sections.append({**where, "device": device, "unverified": cells[0]})
                continue
            notes: list[str] = []
            body = []
            checked_at = record.get("checked_at", {}).get(device, {})
            for strategy, row in rows.items():
                line = [(strategy, "")]
                commit = checked_at.get(strategy, record["commit"])
                if commit != record["commit"]:  # a row kept from an earlier check (capabilities --strategies)
                    notes.append(
                        f"{strategy}: checked at commit {commit[:8]}, the rows without a note at {where['commit']}"
                    )
                    line = [(f"{strategy} [{len(notes)}]", "")]
                for capability in record["capabilities"]:
                    verdict = row[capability]
                    label, css = CAPABILITY_MARKS.get(verdict.split(":")[0], (verdict, ""))
                    if label != "works":
                        notes.append(f"{strategy}, {capability}: {verdict}")
                        label += f" [{len(notes)}]"
                    line.append((label, css))
                body.append(line)
            table = {"header": ["strategy", *record["capabilities"]], "rows": body, "notes": notes}
            sections.append({**where, "device": device, "unverified": "", **table})
    return render("capabilities.html", sections=sections)


def strategies_page(table: pd.DataFrame, registry: Mapping[str, Mapping]) -> Page:
    page = Page("strategies.html")
    history = analysis.series(table)
    names = sorted(set(registry) | set(history.strategy.dropna()))
    page.paragraph(
        Markup(
            "Each strategy from the registry (<code>impls/</code>, and strategies from other packages: "
            "<code>docs/your-own-unfold.md</code>) and its figures across commits: first its paired ratios to "
            "native with their 95% interval across processes (paired inside each process, so they follow the code "
            "far more than the machine; the Trends page marks the steps that are beyond the noise), then each time "
            "and memory as a multiple of its first value with its interquartile range (medians of different "
            "processes: they move with the machine too). What each can do is in the "
            '<a href="index.html#capabilities">capability matrix</a>.'
        )
    )
    page.paragraph(Markup(" · ").join(Markup('<a href="#{0}">{0}</a>').format(n) for n in names))
    for name in names:
        page.heading(name, anchor=name)
        entry = registry.get(name)
        if entry is None:
            page.paragraph("Not recorded by the newest bench (results from older commits only).", "note")
        else:
            page.add(
                _table(
                    ["from", "description", "spatial dims", "devices"],
                    [
                        [
                            (entry.get("origin") or "unfold-bench (impls/)", ""),
                            (entry["description"], ""),
                            (", ".join(map(str, entry["spatial_dims"])), ""),
                            (", ".join(entry["devices"]), ""),
                        ]
                    ],
                )
            )
        mine = history[(history.strategy == name) & (history.status == "ok")]
        for machine, env, profile, device in mine.groupby(["machine", "env", "profile", "device"]).groups:
            all_rows = analysis.rows_where(
                history, strategy=name, machine=machine, env=env, profile=profile, device=device
            )
            title = f"{name}: {machine} · {profile} · {device} · {env} · {_regime_label(machine)}"
            page.figure(figures.strategy_history(all_rows, title))
        if mine.empty:
            recorded = history[history.strategy == name].status.value_counts()
            page.paragraph(
                "No figures: "
                + ", ".join(f"{count} of its figures {status}" for status, count in recorded.items())
                + " (the overview says why, for the newest run)."
                if not recorded.empty
                else "No figures yet.",
                "note",
            )
    return page


def machine_memory(ram: object) -> str:
    """A machine's memory as its file records it: a count of KiB (asv's own) in GiB, anything else as written."""
    text = str(ram or "").strip()
    if text.isdigit():
        return MACHINE_MEMORY.format(float(text), 3)
    return text or "-"


def _allocator_settings(group: pd.DataFrame) -> str:
    """A machine's allocator settings as its runs recorded them, the newest first, each with how many commits it
    timed: a setting changed between runs (glibc's mmap threshold pinned, say) shows, not only the newest."""
    dated = group.dropna(subset=["allocator"]).sort_values("date", ascending=False)
    if dated.empty:
        return "-"
    settings = [
        f"{setting} ({len(rows.commit.unique())} commit{'s' if len(rows.commit.unique()) != 1 else ''})"
        for setting, rows in sorted(dated.groupby("allocator"), key=lambda item: -item[1].date.max().value)
    ]
    return " | earlier: ".join([settings[0], " | ".join(settings[1:])]) if len(settings) > 1 else settings[0]


def machines_page(table: pd.DataFrame) -> Page:
    page = Page("machines.html")
    page.paragraph(
        Markup(
            "What measured. The machine name carries the GPU (or <code>nogpu</code>), <code>-thp</code> for "
            "runs with huge pages for PyTorch's CPU allocations and <code>-freshpages</code> for runs timed with "
            "every output on first-touched memory (the default, unsuffixed, times with the allocator as a user's "
            "process has it), so their figures never mix. "
        )
        + Markup(" ").join(Markup("<b>{}</b>: {}.").format(r.label, r.description) for r in REGIMES.values())
    )
    rows = []
    for machine, group in table.groupby("machine", sort=True):
        latest = group.sort_values("date").iloc[-1]
        profiles = ", ".join(sorted(group.profile.unique()))
        rows.append(
            [
                (machine, ""),
                (str(latest.device_names or "-"), ""),
                (str(latest.num_cpu or "-"), "num"),
                (machine_memory(latest.ram), "num"),
                (str(latest.torch_version or "-"), ""),
                (str(latest.torch_threads or "-"), "num"),
                (analysis.regime_label(group), ""),
                (_allocator_settings(group), ""),
                (str(group.commit.nunique()), "num"),
                (profiles, ""),
                (", ".join(sorted(group.env.unique())), ""),
            ]
        )
    header = [
        "machine",
        "CPU and GPU",
        "CPUs",
        "memory",
        "torch",
        "threads",
        "timing regime",
        "allocator",
        "commits",
        "profiles",
        "environments",
    ]
    if rows:
        page.add(_table(header, rows))
    else:
        page.paragraph("No results yet.", "note")
    return page


CAPABILITIES_DIR = Path(__file__).resolve().parent / "capabilities"


def build_site(
    results_dir: str | Path,
    out_dir: str | Path,
    capabilities_dir: str | Path = CAPABILITIES_DIR,
) -> list[Path]:
    """Write the site for every result under ``results_dir`` (and each machine's capability matrix in
    ``capabilities_dir``) into ``out_dir``; return the pages written."""
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    table, catalogue = load_results(results_dir), load_catalogue(results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / PLOTLY_JS).write_text(plotly.offline.get_plotlyjs(), encoding="utf-8")
    colors = figures.strategy_colors(sorted(set(table.strategy.dropna()) | set(catalogue.strategies)))
    capabilities = load_capabilities(capabilities_dir)
    pages = [
        overview_page(table, colors, catalogue, capabilities),
        findings_page(table, catalogue),
        trends_page(table, colors),
        tradeoff_page(table, colors, catalogue),
        strategies_page(table, catalogue.strategies),
        machines_page(table),
    ]
    asv_link = (out_dir / "asv" / "index.html").exists()
    built = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    n_files = table[["machine", "commit", "env"]].drop_duplicates().shape[0]
    footer = Markup(
        "unfold-bench · built {} from {} asv result files in <code>{}/</code> · plotly.js bundled, no network needed"
    ).format(built, n_files, results_dir.name)
    written = []
    for page in pages:
        path = out_dir / page.file
        path.write_text(page.render(PAGES[page.file], asv_link, footer), encoding="utf-8")
        written.append(path)
    return written
