"""Findings on the source documents' claims: what ``Tensor.unfold`` and ``F.unfold`` return (from the torch checks
the bench records in its catalogue), and unfoldNd against ``nn.Unfold`` (from the results)."""

from __future__ import annotations

import math

import pandas as pd

from benchmarks.allocator import NET_PEAK_RESOLUTION
from reports.analysis import REFERENCE_STRATEGY, cell_spread, median_ends
from reports.findings.verdicts import ONEHOT, PASS_METRICS, SOURCES, Finding, Run, not_measured
from reports.results import Catalogue
from reports.units import BYTES, format_ratio_interval


def tensor_unfold_findings(catalogue: Catalogue) -> list[Finding]:
    """The claims that ``Tensor.unfold`` copies and that ``F.unfold`` returns new memory, from the checks the bench
    ran with its torch (``benchmarks.catalogue.torch_view_records``)."""
    claims = ("Tensor.unfold copies its input", "F.unfold returns new memory")
    if len(catalogue.torch_views) < 4:
        why = "no bench recorded the checks (results older than results/<machine>/catalogue.jsonl)"
        return [not_measured(SOURCES, claim, why, "the bench's catalogue") for claim in claims]
    evidence = pd.DataFrame(
        [
            {
                "operation": view["operation"],
                "shares x's storage": view["shares"],
                "a write through it changes x": view["writes_through"],
            }
            for view in catalogue.torch_views
        ]
    )
    results = {view["operation"]: (view["shares"], view["writes_through"]) for view in catalogue.torch_views}
    source = f"{catalogue.torch_source}, on a 2x3x5x5 float32 x"
    names = list(results)  # in the order the bench ran them
    unfold_view = all(results[name][0] and results[name][1] for name in names[:2])
    unfold_verdict = (
        "does not hold: it is a view (it shares x's storage, and a write through it changes x)"
        if unfold_view
        else "holds: Tensor.unfold returned memory of its own"
    )
    reshaped_copies = not results[names[2]][0]
    note = (
        "Rearranging the windows into F.unfold's (N, C*k*k, L) layout is what copies: the reshape of the "
        "non-contiguous view allocates."
        if unfold_view and reshaped_copies
        else ""
    )
    fresh, fresh_writes = results[names[3]]
    f_unfold_verdict = (
        "holds: its output has a storage of its own, and writing it leaves x unchanged"
        if not fresh and not fresh_writes
        else "does not hold: its output shares x's storage"
    )
    return [
        Finding(SOURCES, claims[0], unfold_verdict, evidence, source, note),
        Finding(SOURCES, claims[1], f_unfold_verdict, evidence.tail(1).reset_index(drop=True), source),
    ]


ONEHOT_CLAIM = (
    "unfoldNd (strategy onehot) is faster than nn.Unfold (strategy native) in all but one case, with higher peak "
    "memory ({pass_name})"
)


def onehot_findings(runs: list[Run]) -> list[Finding]:
    """The claim that unfoldNd beats ``nn.Unfold`` in all but one case with a higher peak, per run and pass."""
    out = []
    for time_metric, (pass_name, peak_metric, _) in PASS_METRICS.items():
        claim = ONEHOT_CLAIM.format(pass_name=pass_name)
        judged = 0
        for run in runs:
            finding = _onehot_finding(run, claim, time_metric, peak_metric)
            if finding is not None:
                out.append(finding)
                judged += 1
        if not judged:
            out.append(
                not_measured(
                    SOURCES,
                    claim,
                    f"no run has {ONEHOT} and {REFERENCE_STRATEGY} on a common config",
                    "the newest run of each machine and profile",
                )
            )
    return out


def _faster(ratio: float, low: float, high: float) -> str:
    """ "yes" where a ratio to native is below 1 with its whole interval, "no" above, "tie" where it holds 1; a ratio
    without an interval (one process) against 1 itself."""
    if math.isnan(low) or math.isnan(high):
        low = high = ratio
    return "yes" if high < 1 else "no" if low > 1 else "tie"


def _onehot_finding(run: Run, claim: str, time_metric: str, peak_metric: str) -> Finding | None:
    cells = run.cells.set_index(["config", "strategy"])
    lines = []
    for config in dict.fromkeys(run.cells.config):
        if (config, ONEHOT) not in cells.index or (config, REFERENCE_STRATEGY) not in cells.index:
            continue
        onehot, native = cells.loc[(config, ONEHOT)], cells.loc[(config, REFERENCE_STRATEGY)]
        if onehot[f"{time_metric}:status"] != "ok" or native[f"{time_metric}:status"] != "ok":
            continue
        peaks_ok = onehot[f"{peak_metric}:status"] == "ok" and native[f"{peak_metric}:status"] == "ok"
        paired = bool(onehot.get(f"{time_metric}:x_native_paired", False))
        if paired:
            ratio = onehot[f"{time_metric}:x_native"]
            low, high = (onehot[f"{time_metric}:x_native_{end}"] for end in ("low", "high"))
        else:  # the quotient of medians, between the ends of asv's intervals of the two: apart only where they are
            ratio = onehot[time_metric] / native[time_metric]
            (o_low, o_high), (n_low, n_high) = (median_ends(cell, time_metric) for cell in (onehot, native))
            low, high = o_low / n_high, o_high / n_low
        lines.append(
            {
                "config": config,
                "onehot ms": cell_spread(onehot, time_metric, with_unit=False),
                "native ms": cell_spread(native, time_metric, with_unit=False),
                "onehot / native": format_ratio_interval(ratio, low, high)
                + ("" if paired else " (medians)" if math.isnan(low) or math.isnan(high) else " (medians, asv's 99%)"),
                # faster where the whole interval is below 1, a tie where it holds 1
                "onehot faster": _faster(ratio, low, high),
                "onehot net peak MiB": BYTES.scaled(onehot[peak_metric]) if peaks_ok else math.nan,
                "native net peak MiB": BYTES.scaled(native[peak_metric]) if peaks_ok else math.nan,
                # higher: by more than the resolution of a net peak
                "onehot peak higher": bool(onehot[peak_metric] > native[peak_metric] + NET_PEAK_RESOLUTION)
                if peaks_ok
                else None,
            }
        )
    if not lines:
        return None
    evidence = pd.DataFrame(lines)
    n, faster = len(evidence), int((evidence["onehot faster"] == "yes").sum())
    tied = int((evidence["onehot faster"] == "tie").sum())
    compared = evidence["onehot peak higher"].dropna()
    higher = int(compared.astype(bool).sum())
    holds = n - faster == 1 and len(compared) > 0 and higher == len(compared)
    verdict = (
        f"{'holds' if holds else 'does not hold'}: onehot is faster on {faster} of {n} configs"
        + (f" (a statistical tie on {tied})" if tied else "")
        + f", its net peak higher on {higher} of {len(compared)}"
    )
    note = (
        "Faster: its paired ratio to native (measured inside each process, with its 95% interval across the "
        "processes) below 1 with its whole interval; a tie where the interval holds 1; in a run without paired "
        "ratios, the quotient of the medians between the ends of asv's 99% intervals of the two, read the same way "
        "(medians). Higher peak: more than "
        f"{NET_PEAK_RESOLUTION // 1024} KiB above (the resolution of a net peak)."
    )
    return Finding(SOURCES, claim, verdict, evidence, run.source, note, run.run)
