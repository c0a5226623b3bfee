"""The report builder on the committed fixture results (``tests/fixtures/report_results``, made by its
``make_fixture.py``): the tidy table, the winners and recommendations, the regressions, and the site's files.

The expected answers are worked out by hand from the fixture's figures (see ``make_fixture.py``).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reports import analysis
from reports.results import COLUMNS, load_results
from reports.site import PAGES, PLOTLY_JS, build_site
from reports.summary import print_summary

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "report_results"
CPU, GPU = "fixture-cpu", "fixture-gpu"
LAST = "d" * 40


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return load_results(FIXTURE)


def _cells(table: pd.DataFrame, machine: str, profile: str, device: str) -> pd.DataFrame:
    run = {"machine": machine, "env": "fixture-env", "profile": profile, "commit": LAST}
    return analysis.cell_table(analysis.select_run(table, run), device)


def test_tidy_table_has_one_row_per_result_and_never_a_number_for_skipped_or_failed(table):
    assert list(table.columns) == COLUMNS
    # fixture-cpu: quick at 4 commits + full at 1; fixture-gpu: quick at 2. Per run: 3 strategies x 2 configs
    # x 2 devices x 4 metrics of unfold + 2 configs x 2 devices x 5 bounds metrics.
    per_run = 3 * 2 * 2 * 4 + 2 * 2 * 5
    assert len(table) == (4 + 1 + 2) * per_run
    assert set(table.profile) == {"quick", "full"} and set(table.machine) == {CPU, GPU}
    assert table.groupby("machine").commit.nunique().to_dict() == {CPU: 4, GPU: 2}
    failed = table[table.status == "failed"]
    assert len(failed) == 1
    assert failed.iloc[0][["machine", "profile", "commit", "strategy", "config", "metric"]].tolist() == [
        CPU, "quick", LAST, "tiling", "vol3d-conv", "time_forward_backward"
    ]  # fmt: skip
    assert table[table.status != "ok"].value.isna().all()
    skipped = table[table.status == "skipped"]
    assert set(skipped[skipped.machine == GPU].strategy.dropna()) == {"native"}  # 3-d only
    assert (skipped[(skipped.machine == CPU)].device == "cuda").sum() > 0
    assert table[table.status == "ok"].value.notna().all()
    ok = table[(table.status == "ok") & (table.unit == "seconds")]
    assert (ok.q_25 <= ok.value).all() and (ok.value <= ok.q_75).all()
    assert table[table.machine == GPU].device_names.str.contains("Fixture H100").all()


def test_latest_runs_pick_each_machines_and_profiles_newest_commit(table):
    latest = analysis.latest_runs(table)
    assert sorted(zip(latest.machine, latest.profile, latest.commit)) == [
        (CPU, "full", LAST), (CPU, "quick", LAST), (GPU, "quick", LAST)
    ]  # fmt: skip


def test_cell_table_ratios_statuses_and_winners(table):
    cells = _cells(table, CPU, "quick", "cpu").set_index(["config", "strategy"])
    assert ("vol3d-conv", "native") not in cells.index  # skipped for every metric: not a row
    tiling = cells.loc[("vol3d-conv", "tiling")]
    assert tiling["time_forward_backward:status"] == "failed" and math.isnan(tiling["time_forward_backward"])
    strided = cells.loc[("allcnnc-conv2", "as_strided")]
    assert strided["time_forward:x_native"] == pytest.approx(0.5)
    assert strided["time_forward:x_bound"] == pytest.approx(2.0)  # 2 ms / copy_ 1 ms
    assert strided["track_net_peak_forward_backward:x_bound"] == pytest.approx(150 / 96)
    best = analysis.winners(cells.reset_index()).set_index(["config", "metric"]).strategy
    assert best[("allcnnc-conv2", "time_forward")] == "as_strided"
    assert best[("allcnnc-conv2", "track_net_peak_forward_backward")] == "native"
    assert best[("vol3d-conv", "time_forward_backward")] == "as_strided"  # tiling failed: it cannot win
    assert analysis.cell_table(analysis.select_run(table, {**_run(CPU, "quick")}), "cuda").empty  # no GPU


def _run(machine: str, profile: str) -> dict:
    return {"machine": machine, "env": "fixture-env", "profile": profile, "commit": LAST}


def test_recommendation_per_config_follows_the_rule(table):
    training = analysis.RULES[0]
    picks = analysis.recommend_per_config(_cells(table, CPU, "quick", "cpu"), training).set_index("config")
    # conv2: lowest fwd-bwd peak 100 MiB (native); within 1.2x: native and tiling (110); as_strided (150) is
    # faster but out; tiling (8 ms) beats native (10 ms).
    assert picks.loc["allcnnc-conv2", "strategy"] == "tiling"
    assert picks.loc["allcnnc-conv2", "eligible"] == ["native", "tiling"]
    assert picks.loc["vol3d-conv", "strategy"] == "as_strided"  # tiling failed there, native skips 3-d


def test_recommendation_per_device_follows_the_rule(table):
    training, forward = analysis.RULES
    cpu = analysis.recommend(_cells(table, CPU, "quick", "cpu"), training)
    # tiling has a failed cell: not a candidate. as_strided: M = sqrt(150/100 * 200/200) = 1.22 > 1.2 x 1.0.
    # native: M = 1.0, T = 10 / 6 = 1.67 on the one config it supports.
    assert cpu.strategy == "native" and cpu.not_covered == ["vol3d-conv"]
    assert cpu.score == pytest.approx(10 / 6)
    ranking = cpu.ranking.set_index("strategy")
    assert "tiling" not in ranking.index
    assert not ranking.loc["as_strided", "eligible"] and ranking.loc["as_strided", "memory_score"] == pytest.approx(
        math.sqrt(1.5)
    )
    gpu = analysis.recommend(_cells(table, GPU, "quick", "cuda"), training)
    assert gpu.strategy == "as_strided" and gpu.score == pytest.approx(1.0) and gpu.not_covered == []
    assert analysis.recommend(_cells(table, CPU, "quick", "cpu"), forward).strategy == "as_strided"


def test_pareto_front():
    points = pd.DataFrame({"t": [1.0, 2.0, 3.0, 2.5, math.nan], "m": [3.0, 2.0, 1.0, 2.5, 0.5]})
    assert analysis.pareto_front(points, "t", "m").tolist() == [True, True, True, False, False]


def test_regressions_are_found_by_asvs_step_detection_and_only_there(table):
    found = analysis.regressions(analysis.series(table))
    assert len(found) == 1
    step = found.iloc[0]
    assert (step.machine, step.profile, step.device, step.config, step.strategy, step.metric) == (
        CPU, "quick", "cpu", "allcnnc-conv2", "tiling", "time_forward"
    )  # fmt: skip
    assert (step.commit_before[0], step.commit_after[0]) == ("b", "c")
    assert step.ratio == pytest.approx(1.5)


def test_site_is_self_contained_and_says_skipped_and_failed(tmp_path):
    written = build_site(FIXTURE, tmp_path)
    assert sorted(p.name for p in written) == sorted(PAGES)
    assert (tmp_path / PLOTLY_JS).stat().st_size > 1_000_000
    for page in written:
        text = page.read_text()
        sources = re.findall(r'<(?:script|link|img)[^>]*(?:src|href)="([^"]+)"', text)
        assert sources == [PLOTLY_JS], (page.name, sources)  # plotly.js once, nothing from the network
        assert not re.search(r">\s*nan\b", text, re.IGNORECASE), page.name
    overview = (tmp_path / "index.html").read_text()
    assert '<td class="failed">failed</td>' in overview
    assert "every cell was skipped on this machine" in overview  # fixture-cpu's CUDA
    assert "Recommendation for training" in overview and "native</b>" in overview
    assert "asv's own site" not in overview  # no asv publish output in tmp_path
    (tmp_path / "asv").mkdir()
    (tmp_path / "asv" / "index.html").write_text("asv")
    build_site(FIXTURE, tmp_path)
    assert 'href="asv/index.html"' in (tmp_path / "index.html").read_text()


def test_summary_prints_each_environment_of_a_commit_apart(tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results, ignore=shutil.ignore_patterns("*.py"))
    second = json.loads((results / CPU / "dddddddd-fixture-env.json").read_text())
    second["env_name"] = "second-env"
    (results / CPU / "dddddddd-second-env.json").write_text(json.dumps(second))
    print_summary(results, CPU, "quick", None)
    out = capsys.readouterr().out
    assert "environment fixture-env" in out and "environment second-env" in out
    assert out.count("Physics checks") == 2
