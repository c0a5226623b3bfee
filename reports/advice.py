r"""Which strategy to ship for a user's own layers: the judging half of ``unfold-bench advise``.

From ``benchmarks.advise``'s measurements of each layer (each strategy's time per timing regime, with the
interval of its paired ratio to the layer's baseline, and its net peaks), with the site's rules
(``reports.analysis.RULES``) and its one verdict function (``analysis.recommend_per_config``):

- **per layer**: among the strategies whose net peak is within the rule's tolerance of the lowest, the fastest by
  its paired ratio to the baseline; strategies whose intervals overlap the leader's are a statistical tie, broken
  by memory, then simplicity (``analysis.TIE_TEXT``), as on the site;
- **for the model**: the same verdict over each strategy's time summed over the layers, weighted by how often each
  occurs (:math:`\sum_l n_l t_l`), among the strategies that run every layer, with its summed net peak
  (:math:`\sum_l m_l`, each layer's resolution added to the tolerance). The sum's interval is the weighted sum of
  the layers' interval ends: exact where the layers' errors move together, and wider than the sum's own interval
  where they are independent, so that no tie is hidden.

``--needs`` sets aside the strategies that the capability matrix (``impls.capabilities``) does not show working
for a capability the user names. Each regime is judged on its own; the text says where their picks differ. A strategy
whose call raised while timed (``benchmarks.advise``) is failed, with its reason, in that regime alone and judged
like any other where it ran every call; one that failed its check or set-up, or whose one net peak could not be
measured, is failed in every regime.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
from markupsafe import Markup

from benchmarks.paired_stats import EARLY_ROUNDS, FAR_BEHIND, MIN_ROUNDS
from benchmarks.vocabulary import PASSES, pass_label, timed_metric, tracked_peak_metric
from reports import analysis, units
from reports.templates import render

if TYPE_CHECKING:
    from benchmarks.advise import Layer
from reports.units import BYTES, SECONDS

METRICS = tuple(units.METRICS)  # the site's four figures
MODEL = "model"  # the model's one row per strategy, as a config of its own for the verdict
MODEL_RULE = (
    "the same rule over the time summed over the layers, each weighted by how often it occurs (its interval the "
    "weighted sum of the layers' interval ends), among the strategies that run every layer, with the net peak summed "
    "over the layers (a resolution per layer)"
)
NOTHING = "nothing (no strategy that may be picked ran every layer)"


def cells(layers: list[Layer], measured: list[dict[str, dict]], regime: str) -> pd.DataFrame:
    """One row per layer x strategy in the columns of ``analysis.cell_table`` (figures and their status), each
    time's paired ratio to the layer's baseline with its interval in the columns the verdict ranks paired ratios by
    (``<time>:x_native``, ``_low``, ``_high``, ``_paired``: the baseline is native where it runs the layer; no
    interval for one that left the race far behind, so that it ties with no one), plus the reason a strategy could
    not run the layer and whether that was a failure rather than a refusal."""
    rows = []
    for layer, found in zip(layers, measured):
        times, memory = found.get(f"time:{regime}", {}), found.get("memory", {})
        for name in dict.fromkeys([*times, *memory]):
            t, m = times.get(name, {}), memory.get(name, {})
            problem = t.get("problem") or m.get("problem") or ("" if t and m else "not measured")
            row = {"config": layer.config.name, "strategy": name, "count": layer.count, "problem": problem}
            row["failed"] = bool(t.get("failed") or m.get("failed"))  # this regime's time, or the one net peak
            row["baseline"] = t.get("baseline", "")
            for metric in METRICS:
                source = m if metric.startswith("track_") else t
                value = source.get(metric.removeprefix("track_"))
                row[metric] = math.nan if problem or value is None else value
                row[f"{metric}:status"] = "skipped" if problem else "ok"
            for which in PASSES:
                for part in ("ratio", "low", "high", "rounds"):
                    row[f"{part}_{which}"] = t.get(f"{part}_{which}", math.nan)
                row[f"far_behind_{which}"] = bool(t.get(f"far_behind_{which}", False))
                metric = timed_metric(which)
                for end, suffix in analysis.RATIO_ENDS:
                    # one that left the race far behind is no contender: its range of a few rounds ties with no one
                    hidden = problem or (end != "relative" and row[f"far_behind_{which}"])
                    row[f"{metric}:x_native{suffix}"] = math.nan if hidden else row[f"{_PART[end]}_{which}"]
                row[f"{metric}:x_native_paired"] = not problem
            row["compile_seconds"] = t.get("compile_seconds", 0.0)
            rows.append(row)
    return pd.DataFrame(rows)


_PART = {"relative": "ratio", "low": "low", "high": "high"}  # a verdict column's end -> the race's name for it


def model_cells(table: pd.DataFrame, rule: analysis.Rule) -> pd.DataFrame:
    """The model as one config: per strategy that runs every layer (``ok`` in both of ``rule``'s figures), its
    time summed over the layers weighted by their counts, with the same weighted sum of each end of the layers'
    intervals (the time times the ratio's end over the ratio), and its net peak summed over the layers."""
    time, memory = rule.time_metric, rule.memory_metric
    ok = table[(table[f"{time}:status"] == "ok") & (table[f"{memory}:status"] == "ok")]
    layers = table.config.nunique()
    rows = []
    for strategy, mine in ok.groupby("strategy", sort=False):
        if mine.config.nunique() < layers:
            continue  # it cannot run every layer
        weighted = mine[time] * mine["count"]
        row = {"config": MODEL, "strategy": strategy, time: weighted.sum(), memory: mine[memory].sum()}
        for end in ("low", "high"):
            row[f"{time}:{end}"] = (weighted * mine[f"{time}:x_native_{end}"] / mine[f"{time}:x_native"]).sum()
        rows.append({**row, f"{time}:status": "ok", f"{memory}:status": "ok"})
    columns = ["config", "strategy", time, memory, f"{time}:low", f"{time}:high", f"{time}:status", f"{memory}:status"]
    return pd.DataFrame(rows, columns=columns)


def model_pick(
    table: pd.DataFrame,
    rule: analysis.Rule,
    set_aside: Mapping[str, str],
    complexity: Mapping[str, int] = MappingProxyType({}),
) -> tuple[str | None, list[str], pd.DataFrame]:
    """The model-level pick, the strategies tied with the fastest, and the ranking (module docstring): the site's
    verdict (``analysis.recommend_per_config``) over ``model_cells``, a net peak's resolution counted once a layer."""
    model = model_cells(table, rule)
    summed = dataclasses.replace(rule, slack=rule.slack * max(1, table.config.nunique()))
    verdict = analysis.recommend_per_config(model, summed, set_aside, complexity)
    time, memory = rule.time_metric, rule.memory_metric
    ranking = model.rename(
        columns={time: "time", memory: "memory", f"{time}:low": "time_low", f"{time}:high": "time_high"}
    )[["strategy", "time", "time_low", "time_high", "memory"]]
    if verdict.empty or verdict.strategy.iloc[0] is None:
        return None, [], ranking.assign(eligible=False)
    ranking["eligible"] = ranking.strategy.isin(verdict.eligible.iloc[0])
    ranking = ranking.sort_values(["eligible", "time"], ascending=[False, True]).reset_index(drop=True)
    return verdict.strategy.iloc[0], list(verdict.tied.iloc[0]), ranking


def advice(
    layers: list[Layer],
    measured: list[dict[str, dict]],
    regimes: list[str],
    set_aside: Mapping[str, str],
    complexity: Mapping[str, int] = MappingProxyType({}),
) -> dict:
    """Everything the command reports, as plain data (what ``--json`` writes); ``complexity`` (strategy ->
    machinery count, ``reports.set_aside.complexity``) is the tie-break's second key."""
    result = {"layers": [], "rules": [], "set_aside": dict(set_aside)}
    for layer in layers:
        c = layer.config
        result["layers"].append(
            {
                "name": c.name,
                "count": layer.count,
                "modules": list(layer.names),
                "input_shape": list(c.input_shape),
                "kernel_size": c.kernel_size,
                "stride": c.stride,
                "padding": c.padding,
                "dilation": c.dilation,
                "dtype": c.dtype,
            }
        )
    result["failed"] = []
    for regime in regimes:
        table = cells(layers, measured, regime)
        for rule in analysis.RULES:
            per_layer = analysis.recommend_per_config(table, rule, set_aside, complexity)
            pick, tied, ranking = model_pick(table, rule, set_aside, complexity)
            result["rules"].append(
                {
                    "regime": regime,
                    "rule": rule.name,
                    "text": rule.per_config_text(own_calls_timed=False),
                    "model_pick": pick,
                    "model_tied": tied,
                    "model_ranking": ranking.to_dict("records"),
                    "layer_picks": {p.config: p.strategy for p in per_layer.itertuples()},
                    "layer_ties": {p.config: list(p.tied) for p in per_layer.itertuples() if p.tied},
                }
            )
        result.setdefault("tables", {})[regime] = json.loads(table.to_json(orient="records"))
        failed = table[table.failed]
        result["failed"] += [f"{r.config} {r.strategy}: {r.problem}" for r in failed.itertuples()]
    result["failed"] = list(dict.fromkeys(result["failed"]))
    return result


def _interval_text(row: Mapping, which: str) -> str:
    """A time's ratio to the layer's baseline with its interval, and how that interval was taken."""
    if row["strategy"] == row.get("baseline"):
        return "the baseline"
    rounds = row[f"rounds_{which}"]
    ratio = units.format_ratio_interval(row[f"ratio_{which}"], row[f"low_{which}"], row[f"high_{which}"])
    if not row[f"far_behind_{which}"]:
        how = "95%"
    elif rounds < MIN_ROUNDS:
        how = f"the range of its {rounds:.0f} rounds: left far behind"
    else:
        how = f"95%, {rounds:.0f} rounds: left far behind"
    return f"{ratio}, {how}"


def _time_text(row: Mapping, which: str) -> str:
    time = units.format_value(row[timed_metric(which)], SECONDS.recorded, digits=3)
    return f"{pass_label(which)} {time} ({_interval_text(row, which)})"


def baselines(report: dict) -> str:
    """The layers' baselines in words: native, or which other strategy on the layers native cannot run."""
    found: dict[str, list[str]] = {}
    for rows in report["tables"].values():
        for row in rows:
            if row.get("baseline") and row["strategy"] == row["baseline"]:
                names = found.setdefault(row["baseline"], [])
                names += [row["config"]] if row["config"] not in names else []
    if len(found) <= 1:
        return next(iter(found), "native")
    return "; ".join(f"{name} on {', '.join(layers)}" for name, layers in found.items())


def legend(report: dict) -> str:
    """How to read the tables: the ratios' baseline, their intervals, the race's early exits, the order."""
    return (
        f"Times: each strategy's ratio to the baseline ({baselines(report)}), paired round by round, with its 95% "
        "signed-rank interval; its time is that ratio times the baseline's median. 'left far behind': its fastest "
        f"call was over {FAR_BEHIND:g}x the leader's slowest after {EARLY_ROUNDS} rounds or more, and it left the "
        f"race; with fewer than {MIN_ROUNDS} rounds its range is that of its rounds. Rows in order of forward-backward "
        "time."
    )


def _layer_heading(layer: Mapping, regime: str) -> str:
    where = ", ".join(layer["modules"][:3]) or "given"
    return (
        f"{layer['name']} x{layer['count']} ({where}): input {tuple(layer['input_shape'])}, kernel "
        f"{layer['kernel_size']}, stride {layer['stride']}, padding {layer['padding']}, dilation "
        f"{layer['dilation']}, {layer['dtype']}; {regime} regime"
    )


def _ranked(report: dict) -> Iterator[tuple[str, Mapping, pd.DataFrame]]:
    """Per regime and layer, its rows ranked by forward-backward time (those that cannot run it last)."""
    for regime, rows in report["tables"].items():
        table = pd.DataFrame(rows)
        for layer in report["layers"]:
            mine = table[table.config == layer["name"]].sort_values("time_forward_backward", na_position="last")
            yield regime, layer, mine


def _compile_note(seconds: float) -> str:
    return f"checked, first compile included, in {seconds:.1f} s: excluded" if seconds else ""


def _tie_text(tied: list[str]) -> str:
    return f"; a statistical tie between {', '.join(tied)}" if tied else ""


def picks_text(report: dict) -> list[str]:
    """The picks per rule and regime with their ties, where the regimes' picks differ, the rules, the tie-break,
    and what was set aside."""
    lines = []
    for rule in report["rules"]:
        ties = rule.get("layer_ties", {})
        picks = ", ".join(
            f"{layer} {pick or 'none'}" + (f" (tie: {', '.join(ties[layer])})" if layer in ties else "")
            for layer, pick in rule["layer_picks"].items()
        )
        pick = rule["model_pick"] or NOTHING
        tie = _tie_text(rule.get("model_tied", []))
        lines.append(f"{rule['rule']}, {rule['regime']} regime: ship {pick}{tie} (per layer: {picks})")
    by_rule: dict[str, dict[str, str]] = {}
    for rule in report["rules"]:
        by_rule.setdefault(rule["rule"], {})[rule["regime"]] = rule["model_pick"] or NOTHING
    for name, picks in by_rule.items():
        if len(set(picks.values())) > 1:
            lines.append(
                f"The regimes' picks differ for {name}: "
                + ", ".join(f"{regime} {pick}" for regime, pick in picks.items())
                + ": the regime your process runs in decides (docs/methodology.md)."
            )
    lines.append("Rules: per layer, " + "; ".join(dict.fromkeys(f"{r['rule']}: {r['text']}" for r in report["rules"])))
    lines.append(f"For the model: {MODEL_RULE}.")
    lines.append(f"A tie: {analysis.TIE_TEXT}.")
    if report["set_aside"]:
        lines.append("Set aside: " + "; ".join(f"{s}: {why}" for s, why in report["set_aside"].items()))
    if report.get("failed"):
        lines.append("Failed: " + "; ".join(report["failed"]))
    return lines


def format_text(report: dict) -> str:
    """The ranked table per layer and regime, then the picks with their rule."""
    lines = [legend(report)]
    for regime, layer, mine in _ranked(report):
        lines.append(f"\n{_layer_heading(layer, regime)}")
        for r in mine.itertuples():
            if r.problem:
                lines.append(f"  {r.strategy:<15} cannot: {r.problem}")
                continue
            intervals = "  ".join(_time_text(r._asdict(), which) for which in PASSES)
            memory = (
                f"net peak {' / '.join(pass_label(which) for which in PASSES)} {_net_peaks(r._asdict())} {BYTES.shown}"
            )
            note = _compile_note(r.compile_seconds)
            lines.append(f"  {r.strategy:<15} {intervals}  {memory}{f'  ({note})' if note else ''}")
    return "\n".join([*lines, "", *picks_text(report)])


def _net_peaks(row: Mapping) -> str:
    """The forward and forward-backward net peaks, ``fwd / fwd-bwd``, in MiB (the unit is the caller's)."""
    return " / ".join(units.format_number(BYTES.scaled(row[tracked_peak_metric(which)]), digits=3) for which in PASSES)


def _html_table(mine: pd.DataFrame) -> str:
    rows = []
    for r in mine.to_dict("records"):
        row = {"strategy": r["strategy"]}
        for which in PASSES:
            label = pass_label(which)
            shown = not r["problem"]
            row[f"{label} {SECONDS.shown}"] = (
                units.format_number(SECONDS.scaled(r[timed_metric(which)]), 3) if shown else ""
            )
            row[f"{label} x baseline"] = _interval_text(r, which) if shown else ""
        row[f"net peak {BYTES.shown} (fwd / fwd-bwd)"] = _net_peaks(r) if not r["problem"] else ""
        row["note"] = f"cannot: {r['problem']}" if r["problem"] else _compile_note(r["compile_seconds"])
        rows.append(row)
    return pd.DataFrame(rows).to_html(index=False, escape=True, border=0)


def _chart(table: pd.DataFrame, regime: str, which: str) -> go.Figure:
    """Time per layer and strategy, with each time's interval (its ratio's, scaled by the baseline's median)."""
    figure = go.Figure()
    for strategy, mine in table[table.problem == ""].groupby("strategy", sort=False):
        time, ratio = SECONDS.scaled(mine[timed_metric(which)]), mine[f"ratio_{which}"]
        above, below = time * (mine[f"high_{which}"] / ratio - 1), time * (1 - mine[f"low_{which}"] / ratio)
        figure.add_bar(
            name=strategy, x=mine.config, y=time, error_y={"type": "data", "array": above, "arrayminus": below}
        )
    figure.update_layout(
        title=f"{pass_label(which)} time per layer, {regime} regime", yaxis_title=SECONDS.shown, barmode="group"
    )
    return figure


def write_html(report: dict, path: str) -> None:
    """A self-contained page (``templates/advice.html``): the picks and their rules, one chart per regime and call
    (time per layer and strategy with its interval), and the ranked table of each layer."""
    charts = []
    for regime, rows in report["tables"].items():
        table = pd.DataFrame(rows)
        for which in PASSES:  # plotly.js inlined once, with the first chart
            chart = _chart(table, regime, which).to_html(full_html=False, include_plotlyjs=not charts)
            charts.append(Markup(chart))
    layers = [(_layer_heading(layer, regime), Markup(_html_table(mine))) for regime, layer, mine in _ranked(report)]
    page = render("advice.html", picks=picks_text(report), charts=charts, legend=legend(report), layers=layers)
    with open(path, "w", encoding="utf-8") as out:
        out.write(page)
