"""Which strategy to ship for a user's own layers: the judging half of ``unfold-bench advise``.

From ``benchmarks.advise``'s measurements of each layer (each strategy's time per timing regime, with its
interval against the baseline, and its net peaks), with the site's rules (``reports.analysis.RULES``):

- **per layer**: the strategies ranked by the rule's time among those whose net peak is within the rule's
  tolerance of the lowest; the pick is the first (``analysis.recommend_per_config``, as on the site);
- **for the model**: each strategy's time summed over the layers, weighted by how often each occurs, among the
  strategies that run every layer and whose summed net peak is within the tolerance of the lowest sum.

``--needs`` sets aside the strategies that the capability matrix (``impls.capabilities``) does not show working
for a capability the user names. Each regime is judged on its own; the text says when they disagree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
from markupsafe import Markup

from benchmarks.paired_stats import EARLY_ROUNDS, FAR_BEHIND
from benchmarks.vocabulary import PASSES, pass_label, timed_metric, tracked_peak_metric
from reports import analysis, units
from reports.templates import render

if TYPE_CHECKING:
    from benchmarks.advise import Layer
from reports.units import BYTES, SECONDS

METRICS = tuple(units.METRICS)  # the site's four figures
MODEL_RULE = (
    "the least time summed over the layers, each weighted by how often it occurs, among the strategies that run every "
    "layer and whose net peak summed over the layers is within the same limit of the lowest sum"
)


def cells(layers: list[Layer], measured: list[dict[str, dict]], regime: str) -> pd.DataFrame:
    """One row per layer x strategy in the columns of ``analysis.cell_table`` (figures and their status), plus
    each time's interval and the reason a strategy could not run the layer."""
    rows = []
    for layer, found in zip(layers, measured):
        times, memory = found.get(f"time:{regime}", {}), found.get("memory", {})
        for name in dict.fromkeys([*times, *memory]):
            t, m = times.get(name, {}), memory.get(name, {})
            problem = t.get("problem") or m.get("problem") or ("" if t and m else "not measured")
            row = {"config": layer.config.name, "strategy": name, "count": layer.count, "problem": problem}
            for metric in METRICS:
                source = m if metric.startswith("track_") else t
                value = source.get(metric.removeprefix("track_"))
                row[metric] = math.nan if problem or value is None else value
                row[f"{metric}:status"] = "skipped" if problem else "ok"
            for which in PASSES:
                for part in ("ratio", "low", "high", "rounds"):
                    row[f"{part}_{which}"] = t.get(f"{part}_{which}", math.nan)
                row[f"far_behind_{which}"] = bool(t.get(f"far_behind_{which}", False))
            row["compile_seconds"] = t.get("compile_seconds", 0.0)
            rows.append(row)
    return pd.DataFrame(rows)


def model_pick(
    table: pd.DataFrame, rule: analysis.Rule, set_aside: Mapping[str, str]
) -> tuple[str | None, pd.DataFrame]:
    """The model-level pick and its ranking (module docstring): summed weighted time, summed net peak."""
    ok = table[(table[f"{rule.time_metric}:status"] == "ok") & ~table.strategy.isin(list(set_aside))]
    layers = table.config.nunique()
    totals = []
    for strategy, rows in ok.groupby("strategy"):
        if rows.config.nunique() < layers:
            continue  # it cannot run every layer
        totals.append(
            {
                "strategy": strategy,
                "time": (rows[rule.time_metric] * rows["count"]).sum(),
                "memory": rows[rule.memory_metric].sum(),
            }
        )
    ranking = pd.DataFrame(totals, columns=["strategy", "time", "memory"])
    if ranking.empty:
        return None, ranking
    ranking["eligible"] = ranking.memory <= rule.memory_limit(ranking.memory.min())
    ranking = ranking.sort_values(["eligible", "time"], ascending=[False, True]).reset_index(drop=True)
    return ranking.strategy.iloc[0], ranking


def advice(
    layers: list[Layer], measured: list[dict[str, dict]], regimes: list[str], set_aside: Mapping[str, str]
) -> dict:
    """Everything the command reports, as plain data (what ``--json`` writes)."""
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
    for regime in regimes:
        table = cells(layers, measured, regime)
        for rule in analysis.RULES:
            per_layer = analysis.recommend_per_config(table, rule, set_aside)
            pick, ranking = model_pick(table, rule, set_aside)
            result["rules"].append(
                {
                    "regime": regime,
                    "rule": rule.name,
                    "text": rule.per_config_text(own_calls_timed=False),
                    "model_pick": pick,
                    "model_ranking": ranking.to_dict("records"),
                    "layer_picks": {p.config: p.strategy for p in per_layer.itertuples()},
                }
            )
        result.setdefault("tables", {})[regime] = json.loads(table.to_json(orient="records"))
    return result


def _interval_text(row: Mapping, which: str) -> str:
    low, high, rounds = row[f"low_{which}"], row[f"high_{which}"], row[f"rounds_{which}"]
    how = f"{rounds:.0f} rounds, far behind" if row[f"far_behind_{which}"] else "95%"
    return f"{units.format_interval(low, high)}x, {how}"


def _time_text(row: Mapping, which: str) -> str:
    time = units.format_value(row[timed_metric(which)], SECONDS.recorded, digits=3)
    return f"{pass_label(which)} {time} ({_interval_text(row, which)})"


LEGEND = (
    "Times: each strategy's ratio to the baseline (native) with its 95% interval, times the baseline's median; "
    f"'far behind': it left the race after {EARLY_ROUNDS} rounds, its fastest call over {FAR_BEHIND:g}x the leader's "
    "slowest, and the range is that of its rounds."
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
    return f"checked, first compile included, in {seconds:.0f} s: excluded" if seconds else ""


def picks_text(report: dict) -> list[str]:
    """The picks per rule and regime, the rules, and what was set aside."""
    lines = []
    for rule in report["rules"]:
        picks = ", ".join(f"{layer} {pick or 'none'}" for layer, pick in rule["layer_picks"].items())
        pick = rule["model_pick"] or "nothing (none runs every layer)"
        lines.append(f"{rule['rule']}, {rule['regime']} regime: ship {pick} (per layer: {picks})")
    lines.append("Rules: per layer, " + "; ".join(dict.fromkeys(f"{r['rule']}: {r['text']}" for r in report["rules"])))
    lines.append(f"For the model: {MODEL_RULE}.")
    if report["set_aside"]:
        lines.append("Set aside: " + "; ".join(f"{s}: {why}" for s, why in report["set_aside"].items()))
    return lines


def format_text(report: dict) -> str:
    """The ranked table per layer and regime, then the picks with their rule."""
    lines = [LEGEND]
    for regime, layer, mine in _ranked(report):
        lines.append(f"\n{_layer_heading(layer, regime)}")
        for r in mine.itertuples():
            if r.problem:
                lines.append(f"  {r.strategy:<15} cannot: {r.problem}")
                continue
            intervals = "  ".join(_time_text(r._asdict(), which) for which in PASSES)
            memory = f"net peak {_net_peaks(r._asdict())} {BYTES.shown}"
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
            row[f"{label} x native"] = _interval_text(r, which) if shown else ""
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
    page = render("advice.html", picks=picks_text(report), charts=charts, legend=LEGEND, layers=layers)
    with open(path, "w", encoding="utf-8") as out:
        out.write(page)
