"""The site's plotly figures, each built from a table of ``reports.analysis``.

Every figure has axis titles with units, a legend, and hover text with the exact value and its spread (a paired
ratio's 95% interval across processes, or asv's interquartile range). Several configs or metrics share one figure
through a dropdown, so a page holds a handful of figures rather than hundreds. Nothing here decides anything: the
analysis does. Labels, units and bounds come from ``reports.units``.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from reports.analysis import cell_spread, own_loop_note
from reports.units import METRICS, SHOWN_METRICS, format_number, format_ratio_interval

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
LAYOUT = dict(template="plotly_white", height=480, margin=dict(l=70, r=30, t=110, b=80), hovermode="closest")


def _number(value: float, unit: str = "", digits: int = 4) -> str | None:
    """``value`` with ``digits`` significant digits and its unit; None for a missing value (NaN or None)."""
    if value is None or pd.isna(value):
        return None
    return f"{format_number(value, digits)}{' ' + unit if unit else ''}"


def _shown(metric: str) -> tuple[str, str, float]:
    """A figure's label, the unit it is shown in and the scale to that unit (``reports.units.METRICS``)."""
    figure = SHOWN_METRICS[metric]
    return figure.label, figure.unit.shown, figure.unit.scale


def _commit_axis(commits: pd.DataFrame) -> dict:
    """An x axis of commits in commit-date order, labelled by short hash and date."""
    return dict(
        title="commit (in commit-date order)",
        tickmode="array",
        tickvals=list(commits.order),
        ticktext=[f"{c[:8]}<br>{d:%Y-%m-%d}" for c, d in zip(commits.commit, commits.date)],
    )


def strategy_colors(strategies: list[str]) -> dict[str, str]:
    return {s: COLORS[i % len(COLORS)] for i, s in enumerate(sorted(strategies))}


def _dropdown(labels: list[str], visibility: list[list[bool]], titles: list[str] | None = None) -> list[dict]:
    buttons = []
    for i, (label, visible) in enumerate(zip(labels, visibility)):
        args: list = [{"visible": visible}]
        if titles is not None:
            args.append({"yaxis.title.text": titles[i]})
        buttons.append({"label": label, "method": "update", "args": args})
    menu = {"buttons": buttons, "direction": "down", "x": 1.0, "xanchor": "right", "y": 1.22, "yanchor": "top"}
    return [menu]


def _ends(rows: pd.DataFrame, column: str) -> tuple[pd.Series, pd.Series]:
    """The interval of ``rows``' ratio ``column`` (``column_low``, ``column_high``), NaN where it has none."""
    missing = pd.Series(math.nan, index=rows.index)
    return tuple(
        rows[f"{column}_{end}"].astype(float) if f"{column}_{end}" in rows else missing for end in ("low", "high")
    )


def _spread_columns(metric: str) -> tuple[str, str, str]:
    """The columns of a series' spread and its name: a paired ratio's 95% interval across processes, or a time's or
    memory's interquartile range (asv's)."""
    return ("low", "high", "95% interval") if metric not in METRICS else ("q_25", "q_75", "IQR")


def _figure_text(row: pd.Series, metric: str) -> str:
    """A cell's figure for a hover: a time with its interquartile range, a memory figure (exact to its resolution)
    as it is."""
    figure = METRICS[metric]
    if figure.unit.recorded != "seconds":
        return _number(figure.unit.scaled(row[metric]), figure.unit.shown) or "-"
    return cell_spread(row, metric)


def _medians(row: pd.Series, metric: str, over: str) -> str:
    """ " (medians)" where a time's ratio ``over`` the bound or native is a quotient of medians of different
    processes, not paired (``analysis.cell_table``'s ``m:x_bound_paired``, ``m:x_native_paired``); else nothing."""
    if METRICS[metric].unit.recorded != "seconds":
        return ""
    paired = row.get(f"{metric}:x_{over}_paired", False)
    return "" if not pd.isna(paired) and bool(paired) else " (medians)"


def bound_ratio_bars(cells: pd.DataFrame, colors: dict[str, str], title: str) -> go.Figure:
    """Per config, one bar per strategy: each figure as a multiple of its bound (time / copy_ roofline,
    memory / analytic minimum), a paired time with its 95% interval across processes as the error bar; a dropdown
    picks the metric. Missing bars are skipped or failed cells."""
    figure = go.Figure()
    metrics = [m for m in METRICS if f"{m}:x_bound" in cells]
    for k, metric in enumerate(metrics):
        label, unit, scale = _shown(metric)
        for strategy, rows in cells.groupby("strategy", sort=True):
            ratio = rows[f"{metric}:x_bound"].astype(float)
            low, high = _ends(rows, f"{metric}:x_bound")
            native_low, native_high = _ends(rows, f"{metric}:x_native")
            figure.add_bar(
                x=rows.config,
                y=ratio,
                name=strategy,
                legendgroup=strategy,
                marker_color=colors[strategy],
                visible=k == 0,
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=(high - ratio).clip(lower=0),
                    arrayminus=(ratio - low).clip(lower=0),
                ),
                hovertext=[
                    f"<b>{strategy}</b> on {config}<br>{label}: {_figure_text(row, metric)}<br>"
                    + (
                        format_ratio_interval(bound, bound_low, bound_high)
                        + f" the bound{_medians(row, metric, 'bound')}"
                        if not pd.isna(bound)
                        else "the bound is 0 (a view): no ratio"
                    )
                    + (
                        f", {format_ratio_interval(native, n_low, n_high)} native{_medians(row, metric, 'native')}"
                        if not pd.isna(native)
                        else ", native has no figure here"
                    )
                    for (_, row), config, bound, bound_low, bound_high, native, n_low, n_high in zip(
                        rows.iterrows(),
                        rows.config,
                        ratio,
                        low,
                        high,
                        rows[f"{metric}:x_native"],
                        native_low,
                        native_high,
                    )
                ],
                hoverinfo="text",
            )
    n = len(figure.data) // max(len(metrics), 1)
    visibility = [[i // n == k for i in range(len(figure.data))] for k in range(len(metrics))]
    titles = [f"{METRICS[m].label} / {METRICS[m].bound_info.name} (x)" for m in metrics]
    figure.update_layout(
        **LAYOUT,
        title=title,
        barmode="group",
        xaxis_title="config",
        yaxis_title=titles[0] if titles else "",
        yaxis_type="log",
        legend_title_text="strategy",
        updatemenus=_dropdown([METRICS[m].label for m in metrics], visibility, titles),
    )
    figure.add_hline(y=1, line_dash="dot", line_color="#444", annotation_text="bound", annotation_position="top left")
    return figure


def trend_lines(
    history: pd.DataFrame, metric: str, colors: dict[str, str], flagged: pd.DataFrame, title: str
) -> go.Figure:
    """One line per strategy over commit order for ``metric``; a dropdown picks the config. Error bars are a paired
    ratio's 95% interval across processes, or a time's or memory's interquartile range (asv's); red triangles
    mark where asv's step detection found a step up (``flagged``: ``analysis.steps``)."""
    label, unit, scale = _shown(metric)
    rows = history[history.metric == metric]
    spread = _spread_columns(metric)
    configs = list(dict.fromkeys(rows.config))
    commits = rows.drop_duplicates("order").sort_values("order")
    figure = go.Figure()
    owners = []
    for config in configs:
        for strategy, line in rows[rows.config == config].groupby("strategy", sort=True):
            line = line.sort_values("order")
            ok = line.status == "ok"
            value = line.value.where(ok).astype(float) * scale
            figure.add_scatter(
                x=line.order,
                y=value,
                mode="lines+markers",
                name=strategy,
                legendgroup=strategy,
                line_color=colors[strategy],
                visible=config == configs[0],
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=(line[spread[1]].astype(float) * scale - value).clip(lower=0),
                    arrayminus=(value - line[spread[0]].astype(float) * scale).clip(lower=0),
                ),
                hovertext=[
                    f"<b>{strategy}</b> {commit[:8]} ({date:%Y-%m-%d})<br>{label}: {_number(v, unit) or status}"
                    + (f" ({spread[2]} {_number(q25)} to {_number(q75, unit)})" if not pd.isna(q25) else "")
                    for commit, date, v, status, q25, q75 in zip(
                        line.commit,
                        line.date,
                        value,
                        line.status,
                        line[spread[0]].astype(float) * scale,
                        line[spread[1]].astype(float) * scale,
                    )
                ],
                hoverinfo="text",
            )
            owners.append(config)
        steps = flagged[(flagged.metric == metric) & (flagged.config == config)]
        if not steps.empty:
            after = steps.merge(commits[["commit", "order"]], left_on="commit_after", right_on="commit")
            figure.add_scatter(
                x=after.order,
                y=after.value_after * scale,
                mode="markers",
                name="step up (asv step detection)",
                marker=dict(symbol="triangle-up", size=14, color="red"),
                visible=config == configs[0],
                hovertext=[
                    f"step up: <b>{who}</b> {_number(low * scale, unit)} to {_number(high * scale, unit)}"
                    + (" (native too: the machine's, not the code's)" if shared else "")
                    for who, low, high, shared in zip(
                        after.strategy, after.value_before, after.value_after, after.native_too
                    )
                ],
                hoverinfo="text",
            )
            owners.append(config)
    visibility = [[owner == config for owner in owners] for config in configs]
    figure.update_layout(
        **LAYOUT,
        title=title,
        xaxis=_commit_axis(commits),
        yaxis_title=f"{label} ({unit})",
        legend_title_text="strategy",
        updatemenus=_dropdown(configs, visibility),
    )
    return figure


def tradeoff_scatter(
    cells: pd.DataFrame,
    time_metric: str,
    memory_metric: str,
    colors: dict[str, str],
    points: dict[str, pd.DataFrame],
    title: str,
) -> go.Figure:
    """Time against net peak memory, one point per strategy: the time over the fastest the picks could take, with
    its interval as the error bar (``points``: ``analysis.tradeoff`` per config; from the paired ratios where the run
    has them), the memory as measured. The Pareto front (no strategy better in both beyond the noise) is a step line
    through its ringed points; hover adds the median time and its interquartile range, and says why a strategy is
    not ranked. A dropdown picks the config."""
    t_label = SHOWN_METRICS[time_metric].label
    m_label, m_unit, m_scale = _shown(memory_metric)
    configs = [config for config in dict.fromkeys(cells.config) if not points[config].empty]
    figure = go.Figure()
    owners = []
    for config in configs:
        config_points = points[config]
        for index, point in config_points.iterrows():
            row = cells.loc[index]
            front = bool(point.on_front)
            median = cell_spread(row, time_metric)
            interval = "paired, 95% interval across processes" if point.paired else "medians, asv's 99% intervals"
            standing = "on" if front else "not on"
            if point.aside:
                standing = f"not ranked ({point.aside}), so not on"
            elif not point.ranked:
                standing = "not ranked, so not on"
            figure.add_scatter(
                x=[point.relative],
                y=[point.memory * m_scale],
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=[0 if pd.isna(point.high) else max(point.high - point.relative, 0)],
                    arrayminus=[0 if pd.isna(point.low) else max(point.relative - point.low, 0)],
                ),
                mode="markers+text",
                text=[point.strategy],
                textposition="top center",
                name=point.strategy,
                legendgroup=point.strategy,
                visible=config == configs[0],
                marker=dict(size=13, color=colors[point.strategy], line=dict(width=3 if front else 0, color="black")),
                hovertext=[
                    f"<b>{point.strategy}</b> on {config}<br>{t_label}: "
                    f"{format_ratio_interval(point.relative, point.low, point.high)} the fastest ({interval}); "
                    f"median {median}{own_loop_note(row, time_metric)}<br>{m_label}: "
                    f"{_number(point.memory * m_scale, m_unit)}<br>{standing} the Pareto front"
                ],
                hoverinfo="text",
            )
            owners.append(config)
        front_points = config_points[config_points.on_front].sort_values(
            ["relative", "memory"], ascending=[True, False], kind="stable"
        )
        figure.add_scatter(
            x=front_points.relative,
            y=front_points.memory * m_scale,
            mode="lines",
            line_shape="hv",
            name="Pareto front",
            line=dict(color="black", dash="dash"),
            visible=config == configs[0],
            hoverinfo="skip",
        )
        owners.append(config)
    visibility = [[owner == config for owner in owners] for config in configs]
    figure.update_layout(
        **LAYOUT,
        title=title,
        xaxis_title=f"{t_label} / the fastest the picks could take (x)",
        xaxis_type="log",
        yaxis_title=f"{m_label} ({m_unit})",
        legend_title_text="strategy",
        updatemenus=_dropdown(configs, visibility),
    )
    return figure


def strategy_history(history: pd.DataFrame, title: str) -> go.Figure:
    """One strategy across commits, one line per config; a dropdown picks the metric. Its paired ratios to native
    (first, where the runs measured them) are drawn as they are, with their 95% interval across processes; each
    time or memory as a multiple of its value at the first commit where it has one (so configs of any size share an
    axis), with its interquartile range on that scale. Hover gives the absolute value and its spread. A first value
    of zero (a view allocates nothing) has no multiple: not drawn. A figure with no ``ok`` value anywhere (native's
    paired ratios to itself) has no view: the first view is then one with points."""
    shown = set(history.metric[history.status == "ok"])  # native's ratios to itself are all skipped: no view of them
    metrics = [m for m in SHOWN_METRICS if m in shown]
    commits = history.drop_duplicates("order").sort_values("order")
    figure = go.Figure()
    owners = []
    for k, metric in enumerate(metrics):
        _, unit, scale = _shown(metric)
        paired = metric not in METRICS
        spread = _spread_columns(metric)
        for i, (config, line) in enumerate(history[history.metric == metric].groupby("config", sort=False)):
            line = line.sort_values("order")
            ok = line.status == "ok"
            value = line.value.where(ok).astype(float)
            ends = [line[end].where(ok).astype(float) if end in line else value * math.nan for end in spread[:2]]
            first = value.dropna().iloc[0] if value.notna().any() else math.nan
            divisor = 1.0 if paired else first if first and not pd.isna(first) else math.nan
            figure.add_scatter(
                x=line.order,
                y=value / divisor,
                mode="lines+markers",
                name=config,
                legendgroup=config,
                line_color=COLORS[i % len(COLORS)],
                visible=k == 0,
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=((ends[1] - value) / divisor).clip(lower=0).fillna(0),
                    arrayminus=((value - ends[0]) / divisor).clip(lower=0).fillna(0),
                ),
                hovertext=[
                    f"{config} {commit[:8]}: {_number(v * scale, unit) or status}"
                    + (
                        f" ({spread[2]} {_number(lo * scale)} to {_number(hi * scale, unit)})"
                        if not pd.isna(lo)
                        else ""
                    )
                    for commit, v, status, lo, hi in zip(line.commit, value, line.status, *ends)
                ],
                hoverinfo="text",
            )
            owners.append(metric)
    visibility = [[owner == metric for owner in owners] for metric in metrics]
    titles = [
        f"{SHOWN_METRICS[m].label} (x)" if m not in METRICS else f"{METRICS[m].label} / its first value (x)"
        for m in metrics
    ]
    figure.update_layout(
        **LAYOUT,
        title=title,
        xaxis=_commit_axis(commits),
        yaxis_title=titles[0] if titles else "",
        legend_title_text="config",
        updatemenus=_dropdown([SHOWN_METRICS[m].label for m in metrics], visibility, titles),
    )
    return figure
