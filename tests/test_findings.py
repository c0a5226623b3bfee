"""The Findings page's verdicts (``reports.findings``), worked out by hand.

On the committed fixture results (``tests/fixtures/report_results``, see its ``make_fixture.py``) and on small
hand-made tidy tables, each built so one claim or target has a verdict that can be checked by hand.
"""

from __future__ import annotations

import datetime
import html.parser
import math
from pathlib import Path

import pandas as pd
import pytest
from markupsafe import escape

from benchmarks.runner import FLOORS_SUITE
from benchmarks.vocabulary import FLOOR_RATIOS
from reports.findings import NEW_TENSOR, PHYSICS, ROOFLINE, SOURCES, Finding, findings, format_text, render_html
from reports.findings.physics import PHYSICS_FLOOR_NOTE
from reports.findings.sources import ONEHOT_CLAIM, tensor_unfold_findings
from reports.results import COLUMNS, Catalogue, catalogue_from_records, load_catalogue, load_results

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "report_results"
MIB = 2**20
MS = 1e-3
FORWARD_CLAIM = ONEHOT_CLAIM.format(pass_name="forward")
DATE = pd.Timestamp(datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc))
CATALOGUE = load_catalogue(FIXTURE)  # the registry's records, as the bench writes them beside its results


@pytest.fixture(scope="module")
def fixture_findings() -> list[Finding]:
    return findings(load_results(FIXTURE), CATALOGUE)


def _one(found: list[Finding], topic: str, claim_start: str, **run: str) -> Finding:
    """The single finding of ``topic`` whose claim starts with ``claim_start`` (and whose run matches ``run``)."""
    matches = [
        f
        for f in found
        if f.topic == topic and f.claim.startswith(claim_start) and all(f.run.get(k) == v for k, v in run.items())
    ]
    assert len(matches) == 1, [(f.claim, dict(f.run)) for f in matches]
    return matches[0]


# --- hand-made tidy tables ---------------------------------------------------------------------------------------


def _row(config: str, metric: str, value: float | None, suite: str, strategy: str | None, **run) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(
        commit="e" * 40,
        date=DATE,
        env="hand-env",
        suite=suite,
        metric=metric,
        strategy=strategy,
        config=config,
        device="cpu",
        value=value,
        status="ok" if value is not None else "failed",
        unit="seconds",
        **run,
    )
    return row


def tidy(
    cells: dict[tuple[str, str], tuple[float, float, float, float]],
    bounds: dict[str, dict[str, float]],
    machine: str = "hand",
    profile: str = "full",
    regime: str = "warm",
) -> pd.DataFrame:
    """A tidy table of one run: ``cells`` (config, strategy) -> forward ms, forward-backward ms, forward MiB,
    forward-backward MiB; ``bounds`` config -> {bound metric: value in seconds or bytes}."""
    run = {"machine": machine, "profile": profile, "timing_regime": regime}
    metrics = ["time_forward", "time_forward_backward", "track_net_peak_forward", "track_net_peak_forward_backward"]
    rows = []
    for (config, strategy), figures in cells.items():
        for metric, figure in zip(metrics, figures):
            value = figure * (MS if metric.startswith("time") else MIB)
            rows.append(_row(config, metric, value, "unfold", strategy, **run))
    for config, values in bounds.items():
        rows.extend(_row(config, metric, value, "bounds", None, **run) for metric, value in values.items())
    return pd.DataFrame(rows, columns=COLUMNS)


def allcnnc_bounds(copy_ms: float = 10.0, fresh_ms: float = 5.0, minimum_mib: float = 100.0) -> dict[str, float]:
    return {
        "time_copy": copy_ms * MS,
        "time_fill": 0.1 * MS,
        "time_fresh_output": fresh_ms * MS,
        "track_min_peak_forward": minimum_mib * MIB,
        "track_min_peak_forward_backward": 2 * minimum_mib * MIB,
    }


def test_onehot_faster_on_all_but_one_config_with_higher_peaks_holds():
    cells = {}
    for config, onehot_ms in (("a", 1.0), ("b", 2.0), ("c", 9.0)):  # native takes 5 ms everywhere: c is slower
        cells[(config, "native")] = (5.0, 5.0, 10.0, 20.0)
        cells[(config, "onehot")] = (onehot_ms, onehot_ms, 20.0, 40.0)
    table = tidy(cells, {})
    native_forward = (table.strategy == "native") & (table.metric == "time_forward")
    table.loc[native_forward, ["q_25", "q_75"]] = (4.5e-3, 5.5e-3)  # the quartiles of its samples, in seconds
    finding = _one(findings(table, CATALOGUE), SOURCES, FORWARD_CLAIM, machine="hand")
    assert finding.evidence["native ms"].tolist() == ["5 (IQR 4.5-5.5)"] * 3  # a median with its spread
    assert finding.verdict == "holds: onehot is faster on 2 of 3 configs, its net peak higher on 3 of 3"
    assert list(finding.evidence["onehot faster"]) == ["yes", "yes", "no"]  # no paired ratios: the medians
    assert finding.evidence["onehot / native"].tolist() == ["0.20x (medians)", "0.40x (medians)", "1.80x (medians)"]


def test_without_paired_ratios_onehot_is_faster_only_where_asvs_intervals_of_the_medians_are_apart():
    """An older run has medians alone: a lower median whose interval overlaps native's is a tie, as on the overview,
    not faster; the quotient is shown between the ends of the two intervals."""
    cells = {}
    for config, onehot_ms in (("a", 4.8), ("b", 2.0)):
        cells[(config, "native")] = (5.0, 5.0, 10.0, 20.0)
        cells[(config, "onehot")] = (onehot_ms, onehot_ms, 20.0, 40.0)
    table = tidy(cells, {})
    forward = table.metric == "time_forward"
    table.loc[forward, "low"], table.loc[forward, "high"] = table.value[forward] * 0.9, table.value[forward] * 1.1
    finding = _one(findings(table, CATALOGUE), SOURCES, FORWARD_CLAIM, machine="hand")
    assert list(finding.evidence["onehot faster"]) == ["tie", "yes"]
    assert finding.evidence["onehot / native"].tolist() == [
        "0.96x [0.79, 1.17] (medians, asv's 99%)",
        "0.40x [0.33, 0.49] (medians, asv's 99%)",
    ]
    assert finding.run["machine"] == "hand" and finding.run["commit"] == "e" * 40 and finding.run["device"] == "cpu"
    assert "commit eeeeeeee, full profile, timed: warm" in finding.source


def test_onehot_is_judged_faster_by_its_paired_ratio_and_a_tie_is_not_faster():
    """The medians say faster on every config; paired inside each process, onehot is faster on one, tied on one
    (an interval holding 1) and slower on the third: the claim does not hold."""
    cells = {}
    for config in "abc":
        cells[(config, "native")] = (5.0, 5.0, 10.0, 20.0)
        cells[(config, "onehot")] = (4.0, 4.0, 20.0, 40.0)
    table = tidy(cells, {})
    paired = [("a", 0.8, 0.7, 0.9), ("b", 0.95, 0.85, 1.05), ("c", 1.2, 1.1, 1.3)]
    rows = [
        {
            **_row(c, "track_ratio_forward", ratio, "ratios", "onehot", machine="hand", profile="full"),
            "low": lo,
            "high": hi,
        }
        for c, ratio, lo, hi in paired
    ]
    table = pd.concat([table, pd.DataFrame(rows, columns=COLUMNS)], ignore_index=True)
    finding = _one(findings(table, CATALOGUE), SOURCES, FORWARD_CLAIM, machine="hand")
    assert finding.verdict == (
        "does not hold: onehot is faster on 1 of 3 configs (a statistical tie on 1), its net peak higher on 3 of 3"
    )
    assert list(finding.evidence["onehot faster"]) == ["yes", "tie", "no"]
    assert finding.evidence["onehot / native"].tolist() == [
        "0.80x [0.70, 0.90]",
        "0.95x [0.85, 1.05]",
        "1.20x [1.10, 1.30]",
    ]


@pytest.mark.parametrize(
    ("onehot_ms", "onehot_mib", "verdict"),
    [
        ((1.0, 2.0, 3.0), (20.0, 20.0, 20.0), "onehot is faster on 3 of 3 configs, its net peak higher on 3 of 3"),
        ((1.0, 2.0, 9.0), (20.0, 10.0, 20.0), "onehot is faster on 2 of 3 configs, its net peak higher on 2 of 3"),
        ((6.0, 7.0, 9.0), (20.0, 20.0, 20.0), "onehot is faster on 0 of 3 configs, its net peak higher on 3 of 3"),
    ],
)
def test_onehot_claim_does_not_hold_when_faster_everywhere_or_a_peak_is_not_higher(onehot_ms, onehot_mib, verdict):
    cells = {}
    for config, ms, mib in zip("abc", onehot_ms, onehot_mib):
        cells[(config, "native")] = (5.0, 5.0, 10.0, 20.0)
        cells[(config, "onehot")] = (ms, ms, mib, 2 * mib)
    finding = _one(findings(tidy(cells, {}), CATALOGUE), SOURCES, FORWARD_CLAIM, machine="hand")
    assert finding.verdict == "does not hold: " + verdict


def test_a_peak_within_the_resolution_of_natives_is_not_higher():
    cells = {("a", "native"): (5.0, 5.0, 10.0, 20.0), ("a", "onehot"): (9.0, 9.0, 10.1, 20.1)}  # 0.1 MiB < 128 KiB
    finding = _one(findings(tidy(cells, {}), CATALOGUE), SOURCES, FORWARD_CLAIM, machine="hand")
    assert finding.verdict.endswith("its net peak higher on 0 of 1")


def test_a_forward_at_0_9x_copy_misses_the_roofline_target_by_0_1x():
    cells = {
        ("allcnnc-conv1", "native"): (9.0, 15.0, 100.0, 200.0),
        ("allcnnc-conv1", "tiling"): (12.0, 20.0, 100.0, 200.0),
    }
    found = findings(tidy(cells, {"allcnnc-conv1": allcnnc_bounds(copy_ms=10.0)}), CATALOGUE)
    forward = _one(found, ROOFLINE, "The fastest forward takes")
    assert forward.verdict == "met on 0 of 1"
    line = forward.evidence.iloc[0]
    assert line["fastest"] == "native" and line["x copy_"] == pytest.approx(0.9)
    assert line["verdict"] == "missed: 0.90x against at most 0.80x"
    assert "allcnnc-conv1 (missed: 0.90x against at most 0.80x)" in forward.note
    backward = _one(found, ROOFLINE, "The fastest forward-backward")
    assert backward.verdict == "met on 1 of 1" and backward.evidence.iloc[0]["x copy_"] == pytest.approx(1.5)
    peak = _one(found, ROOFLINE, "The fastest strategy's net peak")
    assert peak.verdict == "met on 2 of 2"  # native's peaks are the minimum, forward and forward-backward


def _native_paired_over_copy(
    values: tuple, lows: tuple, highs: tuple, configs: tuple = ("allcnnc-conv1", "allcnnc-conv2", "allcnnc-conv3")
) -> pd.DataFrame:
    """A full run on ``configs`` (allcnnc-conv1 to conv3) of native (10 ms forward) and tiling (30 ms), with native's
    forward over copy_ paired in 4 processes (``values`` with their intervals, one per config) and tiling's over
    native's."""
    cells = {(c, s): (ms, 3 * ms, 100.0, 200.0) for c in configs for s, ms in (("native", 10.0), ("tiling", 30.0))}
    table = tidy(cells, {c: allcnnc_bounds() for c in configs})
    run = table.iloc[0][["commit", "date", "env", "machine", "profile", "timing_regime", "device"]].to_dict()
    ok = {**dict.fromkeys(COLUMNS), **run, "status": "ok", "unit": "ratio", "processes": 4, "df": 3}
    floor = FLOOR_RATIOS["forward", "time_copy"]
    paired = [
        {**ok, "suite": FLOORS_SUITE, "metric": floor, "config": c, "value": v, "low": lo, "high": hi}
        for c, v, lo, hi in zip(configs, values, lows, highs)
    ] + [
        {**ok, "suite": "ratios", "metric": m, "strategy": "tiling", "config": c, "value": 3.0, "low": 2.9, "high": 3.1}
        for c in configs
        for m in ("track_ratio_forward", "track_ratio_forward_backward")
    ]
    return pd.concat([table, pd.DataFrame(paired, columns=COLUMNS)], ignore_index=True)


def test_a_roofline_verdict_whose_paired_interval_spans_the_target_is_within_the_noise():
    """With paired ratios, the fastest is read over copy_ through native with its interval: the forward's target
    (0.8x copy_) is met only when the whole interval is within it, missed only when the whole interval is beyond."""
    table = _native_paired_over_copy((0.75, 1.2, 0.7), (0.70, 1.1, 0.65), (0.85, 1.3, 0.75))
    forward = _one(findings(table, CATALOGUE), ROOFLINE, "The fastest forward takes")
    assert forward.verdict == "met on 1 of 3"
    assert forward.evidence["fastest"].tolist() == ["native"] * 3
    assert forward.evidence["x copy_ interval"].tolist() == ["[0.70, 0.85]", "[1.10, 1.30]", "[0.65, 0.75]"]
    noise = "within the noise: 0.75x [0.70, 0.85] spans 0.80x"
    assert forward.evidence["verdict"].tolist() == [noise, "missed: 1.20x against at most 0.80x", "met"]
    assert "Missed on allcnnc-conv2 (missed: 1.20x against at most 0.80x)." in forward.note
    assert "Within the noise on allcnnc-conv1 (0.75x [0.70, 0.85] spans 0.80x)." in forward.note


def test_the_new_tensor_copy_target_is_judged_with_the_paired_interval():
    table = _native_paired_over_copy((1.25, 1.2, 1.4), (1.2, 1.1, 1.35), (1.35, 1.25, 1.45))
    claim = "The fastest forward that returns a new tensor takes at most 1.3x"
    copy = _one(findings(table, CATALOGUE), NEW_TENSOR, claim)
    assert copy.evidence["x copy_ interval"].tolist() == ["[1.20, 1.35]", "[1.10, 1.25]", "[1.35, 1.45]"]
    noise = "within the noise: 1.25x [1.20, 1.35] spans 1.30x"
    assert copy.evidence["verdict"].tolist() == [noise, "met", "missed: 1.40x against at most 1.30x"]


def test_half_precision_is_judged_with_both_paired_intervals():
    """bfloat16's fastest forward at 1.1x copy_ [0.9, 1.35] against float32's 1.0x [0.8, 1.25]: 1.1x float32's,
    under the 1.2x target, but the intervals' far ends (0.72 to 1.69) span it."""
    table = _native_paired_over_copy((1.0, 1.1), (0.8, 0.9), (1.25, 1.35), ("allcnnc-conv4", "conv4-bfloat16"))
    half = _one(findings(table, CATALOGUE), NEW_TENSOR, "In half precision")
    line = half.evidence.set_index(["config", "pass"]).loc[("conv4-bfloat16", "forward")]
    assert line["x float32's"] == pytest.approx(1.1) and line["x float32's, intervals' ends"] == "[0.72, 1.69]"
    assert line["verdict"] == "within the noise: 1.10x [0.72, 1.69] spans 1.20x"


def test_the_floor_target_is_judged_beyond_both_quartiles():
    """The fastest's forward over its floor is a quotient of two medians from different processes: met only where
    its upper quartile over the floor's lower one is within the target, missed only where its lower over the floor's
    upper is beyond, else within the noise."""
    cells = {(c, "gather"): (ms, 2 * ms, 100.0, 200.0) for c, ms in (("allcnnc-conv2", 12.0), ("allcnnc-conv4", 10.0))}
    cells[("allcnnc-conv5", "gather")] = (14.0, 28.0, 100.0, 200.0)
    table = tidy(cells, {c: allcnnc_bounds(fresh_ms=10.0) for c in ("allcnnc-conv2", "allcnnc-conv4", "allcnnc-conv5")})
    quartiles = {"allcnnc-conv2": (11.0, 13.0), "allcnnc-conv4": (9.9, 10.1), "allcnnc-conv5": (13.0, 15.0)}
    for config, (q_25, q_75) in quartiles.items():
        forward = (table.config == config) & (table.metric == "time_forward")
        table.loc[forward, ["q_25", "q_75"]] = (q_25 * MS, q_75 * MS)
        floor = (table.config == config) & (table.metric == "time_fresh_output")
        table.loc[floor, ["q_25", "q_75"]] = (9.8 * MS, 10.2 * MS)
    fresh = _one(
        findings(table, CATALOGUE), NEW_TENSOR, "The fastest forward that returns a new tensor takes at most 1.15x"
    )
    lines = fresh.evidence.set_index("config")
    assert lines["x its floor"].tolist() == pytest.approx([1.2, 1.0, 1.4])
    assert lines["x its floor, quartiles apart"].tolist() == ["[1.08, 1.33]", "[0.97, 1.03]", "[1.27, 1.53]"]
    assert lines.verdict.tolist() == [
        "within the noise: 1.20x [1.08, 1.33] spans 1.15x",
        "met",
        "missed: 1.40x against at most 1.15x",
    ]


def test_a_missed_ratio_is_written_to_the_digits_that_tell_it_from_the_limit():
    from reports.findings.verdicts import judged

    assert judged(1.053, 1.05) == "missed: 1.053x against at most 1.050x"
    assert judged(1.4, 1.15) == "missed: 1.40x against at most 1.15x"


def test_the_roofline_targets_count_the_output_reusing_strategies_apart():
    cells = {
        ("allcnnc-conv1", "native"): (9.0, 15.0, 100.0, 200.0),
        ("allcnnc-conv1", "gather_reuse"): (4.0, 30.0, 100.0, 200.0),  # set aside: reuses its output
        ("allcnnc-conv2", "native"): (5.0, 30.0, 100.0, 200.0),
    }
    bounds = {config: allcnnc_bounds(copy_ms=10.0) for config in ("allcnnc-conv1", "allcnnc-conv2")}
    forward = _one(findings(tidy(cells, bounds), CATALOGUE), ROOFLINE, "The fastest forward takes")
    assert forward.verdict == "met on 1 of 2"  # native: 0.9x on conv1 (missed), 0.5x on conv2 (met)
    assert forward.evidence["fastest"].tolist() == ["native", "native"]
    assert forward.evidence["fastest (reuse allowed)"].tolist() == ["gather_reuse", "native"]
    assert forward.evidence["verdict (reuse allowed)"].tolist() == ["met", "met"]
    assert "With output reuse allowed: met on 2 of 2." in forward.note


def test_the_new_tensor_targets_judge_the_copy_target_again_with_output_reuse_allowed():
    cells = {
        ("allcnnc-conv3", "cpp"): (30.0, 60.0, 100.0, 200.0),  # fresh output: 3x copy_
        ("allcnnc-conv3", "cpp_reuse"): (11.0, 40.0, 200.0, 300.0),  # the same kernel into a kept buffer: 1.1x
    }
    copy = _one(
        findings(tidy(cells, {"allcnnc-conv3": allcnnc_bounds(copy_ms=10.0, fresh_ms=25.0)}), CATALOGUE),
        NEW_TENSOR,
        "The fastest forward that returns a new tensor takes at most 1.3x",
    )
    line = copy.evidence.iloc[0]
    assert (line["fastest"], line["verdict"]) == ("cpp", "missed: 3.00x against at most 1.30x")
    assert line["fastest (reuse allowed)"] == "cpp_reuse" and line["x copy_ (reuse allowed)"] == pytest.approx(1.1)
    assert line["verdict (reuse allowed)"] == "met"
    assert copy.verdict == "met on 0 of 1" and "With output reuse allowed: met on 1 of 1." in copy.note
    assert "the fresh output costs the difference" in copy.note


@pytest.mark.parametrize("huge_page_floor_measured", [True, False])
def test_a_strategy_that_advises_huge_pages_is_judged_against_the_floor_of_its_own_allocation(
    huge_page_floor_measured,
):
    cells = {
        ("allcnnc-conv2", "cpp_huge_pages"): (6.0, 12.0, 100.0, 200.0),
        ("allcnnc-conv2", "cpp"): (9.0, 15.0, 100.0, 200.0),  # the fastest that leaves the pages small
        ("allcnnc-conv4", "gather"): (6.0, 12.0, 50.0, 100.0),
    }
    bounds = {config: allcnnc_bounds(fresh_ms=10.0) for config in ("allcnnc-conv2", "allcnnc-conv4")}
    if huge_page_floor_measured:
        for values in bounds.values():
            values["time_fresh_output_huge_pages"] = 4.0 * MS
    fresh = _one(
        findings(tidy(cells, bounds), CATALOGUE),
        NEW_TENSOR,
        "The fastest forward that returns a new tensor takes at most 1.15x",
    )
    lines = fresh.evidence.set_index("config")
    if huge_page_floor_measured:  # cpp_huge_pages advises its results: 6 / 4 ms; gather does not: 6 / 10 ms
        assert lines.loc["allcnnc-conv2", "its floor"] == "huge-page"
        assert lines.loc["allcnnc-conv2", "x its floor"] == pytest.approx(1.5)
        assert lines.loc["allcnnc-conv2", "verdict"] == "missed: 1.50x against at most 1.15x"
        assert lines.loc["allcnnc-conv2", "huge-page floor ms"] == pytest.approx(4.0)
    else:  # a run before the bound existed (and before the advice): the fresh-output floor, 6 / 10 ms
        assert lines.loc["allcnnc-conv2", "its floor"] == "fresh-output"
        assert lines.loc["allcnnc-conv2", "x its floor"] == pytest.approx(0.6)
    assert lines.loc["allcnnc-conv4", "its floor"] == "fresh-output"
    assert lines.loc["allcnnc-conv4", "x its floor"] == pytest.approx(0.6)
    # judged again without the huge-page advice, against the fresh-output floor: cpp 9 / 10 ms, gather 6 / 10 ms
    assert lines["fastest (4 KiB pages)"].tolist() == ["cpp", "gather"]
    assert lines["x fresh-output floor (4 KiB pages)"].tolist() == pytest.approx([0.9, 0.6])
    assert "Without huge-page advice (4 KiB pages, against the fresh-output floor): met on 2 of 2." in fresh.note


def test_the_new_tensor_targets_worked_by_hand():
    cells = {
        ("allcnnc-conv1", "native"): (20.0, 40.0, 100.0, 200.0),
        ("allcnnc-conv1", "gather"): (12.0, 16.0, 100.0625, 230.0),  # fastest in both passes
        ("allcnnc-conv4", "gather"): (10.0, 20.0, 100.0, 200.0),
        ("conv4-bfloat16", "gather"): (5.5, 13.0, 50.0, 100.0),
        ("allcnnc-conv4", "tiling"): (13.0, 26.0, 100.0, 200.0),  # slower than gather in float32 ...
        ("conv4-bfloat16", "tiling"): (5.2, 14.0, 50.0, 100.0),  # ... the fastest bfloat16 forward
    }
    bounds = {
        "allcnnc-conv1": allcnnc_bounds(copy_ms=10.0, fresh_ms=10.0),
        "allcnnc-conv4": allcnnc_bounds(copy_ms=10.0, fresh_ms=10.0),
        "conv4-bfloat16": allcnnc_bounds(copy_ms=5.0, fresh_ms=5.0, minimum_mib=50.0),
    }
    found = findings(tidy(cells, bounds, machine="hand-freshpages", regime="fresh-pages"), CATALOGUE)
    fresh = _one(found, NEW_TENSOR, "The fastest forward that returns a new tensor takes at most 1.15x")
    assert fresh.evidence["x its floor"].tolist() == pytest.approx([1.2, 1.0])  # 12 / 10 and 10 / 10
    assert fresh.evidence["its floor"].tolist() == ["fresh-output", "fresh-output"]  # gather advises no huge pages
    assert fresh.evidence["verdict"].tolist() == ["missed: 1.20x against at most 1.15x", "met"]
    assert fresh.verdict == "met on 1 of 2" and "fresh pages" in fresh.source
    # why: conv1 reads 3 x 32 x 32 input elements for 27 x 32 x 32 output ones (stride 1, 'same' padding): 1/9
    assert fresh.evidence["input / output"].tolist() == pytest.approx([1 / 9, 1 / 9])
    assert "Missed on allcnnc-conv1" in fresh.note and "Why: the floor (" in fresh.note
    copy = _one(found, NEW_TENSOR, "The fastest forward that returns a new tensor takes at most 1.3x")
    assert copy.evidence["verdict"].tolist() == ["met", "met"]  # 1.2x and 1.0x copy_
    assert copy.evidence["verdict (reuse allowed)"].tolist() == ["met", "met"]  # no reusing strategy: the same
    assert copy.evidence["fastest (reuse allowed)"].tolist() == ["gather", "gather"]
    assert copy.evidence["fresh-output floor x copy_"].tolist() == pytest.approx([1.0, 1.0])  # 10 ms / 10 ms
    assert copy.evidence["row elements"].tolist() == [32, 16]  # windows along W: conv1 stride 1, conv4 stride 1 on 16
    assert "Why" not in copy.note  # met everywhere: nothing to explain
    native = _one(found, NEW_TENSOR, "The fastest forward-backward")
    assert native.evidence["x native"].iloc[0] == pytest.approx(0.4)  # 16 / 40
    # backward = forward-backward - forward: gather 16 - 12 ms, native 40 - 20 ms
    assert native.evidence[["backward ms", "native's backward ms"]].iloc[0].tolist() == pytest.approx([4.0, 20.0])
    assert native.verdict == "met on 1 of 1"  # conv4 has no native: not measured, not counted
    assert "Not measured on allcnnc-conv4" in native.note
    peak = _one(found, NEW_TENSOR, "The fastest strategy that returns a new tensor has its net peak")
    lines = peak.evidence.set_index(["config", "pass"])
    assert lines.loc[("allcnnc-conv1", "forward"), "verdict"] == "met"  # 64 KiB above: within the 128 KiB resolution
    assert lines.loc[("allcnnc-conv1", "forward-backward"), "above minimum MiB"] == pytest.approx(30.0)
    assert lines.loc[("allcnnc-conv1", "forward-backward"), "verdict"] == "missed by 29.88 MiB"  # 30 MiB - 128 KiB
    assert peak.verdict == "met on 3 of 4"
    half = _one(found, NEW_TENSOR, "In half precision")
    lines = half.evidence.set_index(["config", "pass"])
    # bfloat16: forward tiling 5.2 / 5 = 1.04x copy_, float32's fastest (gather) 1.0x: 1.04x float32's, while
    # tiling's own float32 forward is 1.3x copy_: 0.8x its own; forward-backward gather 2.6x against 2.0x
    assert lines["fastest"][("conv4-bfloat16", "forward")] == "tiling"
    assert lines["x float32's"][("conv4-bfloat16", "forward")] == pytest.approx(1.04)
    assert lines["x its own on allcnnc-conv4"][("conv4-bfloat16", "forward")] == pytest.approx(0.8)
    assert lines["x its own on allcnnc-conv4"][("conv4-bfloat16", "forward-backward")] == pytest.approx(1.3)
    assert lines["verdict"][("conv4-bfloat16", "forward")] == "met"
    assert lines["verdict"][("conv4-bfloat16", "forward-backward")] == "missed: 1.30x against at most 1.20x"
    assert half.verdict == "met on 1 of 2" and "Not measured on conv4-float16 forward" in half.note


def test_an_empty_table_gives_not_measured_and_no_error():
    empty = pd.DataFrame(columns=COLUMNS)
    found = findings(empty, CATALOGUE)
    from_results = [f for f in found if f.topic != SOURCES or f.claim.startswith("unfoldNd")]
    assert from_results and all(f.verdict.startswith("not measured: ") for f in from_results)
    assert {f.topic for f in from_results} == {SOURCES, ROOFLINE, NEW_TENSOR, PHYSICS}
    assert all("make bench-full" in f.verdict for f in from_results if f.topic in (ROOFLINE, NEW_TENSOR))
    assert render_html(found) and format_text(found)


def test_a_run_without_bounds_is_not_measured_against_them():
    cells = {("allcnnc-conv1", "native"): (9.0, 15.0, 100.0, 200.0)}
    found = findings(tidy(cells, {}), CATALOGUE)
    assert _one(found, ROOFLINE, "The fastest forward takes").outcome == "not measured"
    assert _one(found, NEW_TENSOR, "In half precision").verdict.startswith("not measured: the run lacks")
    assert _one(found, PHYSICS, "Every figure").verdict == "not measured: the run has no bounds"


def test_quick_runs_do_not_judge_the_full_profile_targets():
    cells = {("allcnnc-conv1", "native"): (9.0, 15.0, 100.0, 200.0)}
    found = findings(tidy(cells, {"allcnnc-conv1": allcnnc_bounds()}, profile="quick"), CATALOGUE)
    targets = [f for f in found if f.topic in (ROOFLINE, NEW_TENSOR)]
    assert targets and all(f.outcome == "not measured" for f in targets)
    assert _one(found, PHYSICS, "Every figure").verdict == "holds"


def test_a_net_peak_below_the_analytic_minimum_breaks_the_physics_check():
    cells = {("allcnnc-conv1", "native"): (9.0, 15.0, 90.0, 200.0)}
    finding = _one(findings(tidy(cells, {"allcnnc-conv1": allcnnc_bounds()}), CATALOGUE), PHYSICS, "Every figure")
    assert finding.verdict == "does not hold: 1 figure contradicts the bounds"
    assert "below the analytic minimum" in finding.evidence.problem.iloc[0]
    assert finding.note == ""  # the note on processes is about time floors only


def test_a_forward_below_the_fill_floor_breaks_the_physics_check_and_says_how_to_read_it():
    cells = {("allcnnc-conv1", "native"): (0.05, 15.0, 100.0, 200.0)}  # 0.05 ms, the fill_ floor 0.1 ms
    finding = _one(findings(tidy(cells, {"allcnnc-conv1": allcnnc_bounds()}), CATALOGUE), PHYSICS, "Every figure")
    assert finding.verdict == "does not hold: 1 figure contradicts the bounds"
    assert "below the write-only fill_ floor" in finding.evidence.problem.iloc[0]
    assert finding.note == PHYSICS_FLOOR_NOTE


# --- torch, run by the bench and recorded -------------------------------------------------------------------------


def test_tensor_unfold_is_a_view_and_f_unfold_new_memory():
    import torch

    from benchmarks.catalogue import torch_view_records

    live = catalogue_from_records([{"record": "written", "torch": torch.__version__}, *torch_view_records()], "here")
    copies, fresh = tensor_unfold_findings(live)
    assert copies.claim == "Tensor.unfold copies its input"
    assert copies.verdict.startswith("does not hold: it is a view")
    windows = copies.evidence.iloc[0]
    assert windows["shares x's storage"] and windows["a write through it changes x"]
    assert "reshape" in copies.note  # F.unfold's layout is what copies
    assert fresh.verdict.startswith("holds") and not fresh.evidence.iloc[0]["shares x's storage"]
    assert f"torch {torch.__version__} on here" in copies.source


def test_without_a_recorded_catalogue_the_torch_claims_are_not_measured_and_say_why():
    for finding in tensor_unfold_findings(Catalogue()):
        assert finding.verdict.startswith("not measured") and "catalogue" in finding.verdict


# --- the committed fixture ---------------------------------------------------------------------------------------


def test_fixture_roofline_targets_worked_by_hand(fixture_findings):
    # fixture-cpu's full run: allcnnc-conv2 only; as_strided is fastest in both passes (2 and 6 ms x32 against
    # copy_ 1 ms x32); its net peaks 52 and 170 MiB against the minima 48 and 96 MiB (all x32 in full)
    run = {"machine": "fixture-cpu", "profile": "full", "device": "cpu"}
    forward = _one(fixture_findings, ROOFLINE, "The fastest forward takes", **run)
    assert forward.verdict == "met on 0 of 1"
    assert forward.evidence.verdict.tolist() == ["missed: 2.00x against at most 0.80x"]
    assert forward.evidence["fastest"].tolist() == ["as_strided"]
    backward = _one(fixture_findings, ROOFLINE, "The fastest forward-backward", **run)
    assert backward.evidence.verdict.tolist() == ["missed: 6.00x against at most 1.60x"]
    peak = _one(fixture_findings, ROOFLINE, "The fastest strategy's net peak", **run)
    assert peak.evidence["x minimum"].tolist() == pytest.approx([52 / 48, 170 / 96])
    assert peak.evidence.verdict.tolist() == [
        "missed: 1.08x against at most 1.05x",
        "missed: 1.77x against at most 1.05x",
    ]
    assert forward.run["commit"] == "b" * 40 and "fixture-cpu, commit bbbbbbbb, full profile" in forward.source
    # only fixture-cpu has a full run
    assert {f.run.get("machine") for f in fixture_findings if f.topic == ROOFLINE} == {"fixture-cpu"}


def test_fixture_new_tensor_targets_worked_by_hand(fixture_findings):
    run = {"machine": "fixture-cpu", "profile": "full"}
    fresh = _one(
        fixture_findings, NEW_TENSOR, "The fastest forward that returns a new tensor takes at most 1.15x", **run
    )
    assert fresh.verdict == "met on 1 of 1"  # as_strided's 2 ms against the fresh-output floor's 2 ms
    copy = _one(fixture_findings, NEW_TENSOR, "The fastest forward that returns a new tensor takes at most 1.3x", **run)
    assert copy.evidence.verdict.tolist() == ["missed: 2.00x against at most 1.30x"]
    native = _one(fixture_findings, NEW_TENSOR, "The fastest forward-backward", **run)
    assert native.evidence.verdict.tolist() == ["missed: 0.60x against at most 0.50x"]  # 6 / 10 ms
    peak = _one(fixture_findings, NEW_TENSOR, "The fastest strategy that returns a new tensor has", **run)
    assert peak.evidence["above minimum MiB"].tolist() == pytest.approx([4 * 32, 74 * 32])
    assert peak.verdict == "met on 0 of 2"
    half = _one(fixture_findings, NEW_TENSOR, "In half precision", **run)
    assert half.outcome == "not measured"


def test_fixture_physics_and_the_missing_onehot(fixture_findings):
    # every figure of the fixture respects its bounds (tests/test_bench_tools.py breaks them on purpose)
    physics = [f for f in fixture_findings if f.topic == PHYSICS]
    assert sorted((f.run["machine"], f.run["profile"], f.run["device"]) for f in physics) == [
        ("fixture-cpu", "full", "cpu"),
        ("fixture-cpu", "quick", "cpu"),
        ("fixture-gpu", "quick", "cpu"),
        ("fixture-gpu", "quick", "cuda"),
    ]
    assert all(f.verdict == "holds" for f in physics)
    onehot = [f for f in fixture_findings if f.claim.startswith("unfoldNd")]
    assert len(onehot) == 2 and all(f.outcome == "not measured" for f in onehot)


class _Parser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.ids += [value for name, value in attrs if name == "id"]
        if tag not in ("br", "meta"):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open.pop() == tag, tag


def test_html_and_text_carry_every_verdict_and_source(fixture_findings):
    page = render_html(fixture_findings)
    parser = _Parser()
    parser.feed(page)
    assert parser.open == []  # every tag closed, in order
    assert parser.ids == [f"finding-{n}" for n in range(1, len(fixture_findings) + 1)]
    text = format_text(fixture_findings)
    for finding in fixture_findings:
        assert escape(finding.verdict) in page and finding.verdict in text
        assert escape(finding.source) in page and finding.source in text
    assert f"<h2>{escape(ROOFLINE)}</h2>" in page
    assert "missed: 2.00x against at most 0.80x" in page  # the evidence tables are on the page
    # where a target is missed is said without the tables
    assert "allcnnc-conv2 (missed: 2.00x against at most 0.80x)" in text
    assert "x copy_ (reuse allowed)" not in text and "x copy_ (reuse allowed)" in format_text(fixture_findings, True)


def test_no_verdict_is_left_unjudged(fixture_findings):
    kinds = {"holds", "does not hold", "met", "partly met", "missed", "not measured"}
    assert {f.outcome for f in fixture_findings} <= kinds


def test_a_backward_the_two_medians_do_not_separate_is_not_published_as_a_negative_time():
    from reports.findings.targets import _backward_ms

    by_cell = pd.DataFrame(
        {
            "config": ["c", "c"],
            "strategy": ["a", "b"],
            "time_forward": [0.010, 0.020],
            "time_forward_backward": [0.016, 0.015],
        }
    ).set_index(["config", "strategy"])
    assert _backward_ms(by_cell, "c", "a") == pytest.approx(6.0)
    assert math.isnan(_backward_ms(by_cell, "c", "b"))  # 15 - 20 ms: noise between processes, not a time


def test_a_paired_ratio_without_an_interval_is_judged_by_itself_not_called_a_tie():
    from reports.findings.sources import _faster

    assert (_faster(0.8, math.nan, math.nan), _faster(1.2, math.nan, math.nan)) == ("yes", "no")  # one process
    assert (_faster(0.8, 0.7, 0.9), _faster(0.95, 0.85, 1.05), _faster(1.2, 1.1, 1.3)) == ("yes", "tie", "no")
