"""The gate's verdict where reviewers look (``reports.gate_report``): the JSON file, the job summary's table and the
annotations, from a table made here with one regression, one failure and one unchanged cell."""

from __future__ import annotations

import json

from reports.compare import gate_decision, paired_table
from reports.gate_report import publish, verdict_record


def _table():
    cell = {"config": "allcnnc-conv2", "device": "cpu", "measure": "time_forward", "failed_at": ""}
    rows = [
        {**cell, "strategy": "gather", "ratio": 1.12, "low": 1.08, "high": 1.16, "resolution": 1.07, "pairs": 300},
        {**cell, "strategy": "cpp", "ratio": 1.0, "low": 0.98, "high": 1.02, "resolution": 1.06, "pairs": 300},
        {**cell, "strategy": "tiling", "failed_at": "head", "error": "head: wrong output: 3 entries differ"},
    ]
    return paired_table(rows, "quick")


def test_the_verdict_file_summary_and_annotations_name_each_flagged_cell(tmp_path, capsys):
    table = _table()
    status, verdict = gate_decision(table)
    record = verdict_record(table, status, verdict, "a" * 40, "b" * 40, {"resolution_line": "median 1.06x"})
    summary = tmp_path / "summary.md"
    publish(record, tmp_path / "verdict.json", {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"})

    saved = json.loads((tmp_path / "verdict.json").read_text())
    assert saved["status"] == 2 and saved["head"] == "b" * 40  # a failure at head outranks the regression
    assert {c["cell"]: c["verdict"] for c in saved["cells"]} == {
        "forward gather, allcnnc-conv2, cpu": "regression",
        "forward cpp, allcnnc-conv2, cpu": "unchanged",
        "forward tiling, allcnnc-conv2, cpu": "failed",
    }
    table_text = summary.read_text()
    assert "| verdict | cell | ratio | interval | resolution |" in table_text
    assert "| **regression** | forward gather, allcnnc-conv2, cpu | 1.120x | [1.080, 1.160] | 1.070x |" in table_text
    assert table_text.index("gather") < table_text.index("cpp")  # flagged cells first
    annotations = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::error")]
    assert annotations == [
        "::error title=benchmark regression::forward gather, allcnnc-conv2, cpu: regression, ratio 1.120x "
        "(interval [1.080, 1.160])",
        "::error title=benchmark failed::forward tiling, allcnnc-conv2, cpu: failed, head: wrong output: 3 entries "
        "differ",
    ]


def test_outside_github_only_the_file_is_written(tmp_path, capsys):
    table = _table()
    record = verdict_record(table, *gate_decision(table), "a" * 40, "b" * 40, {})
    publish(record, tmp_path / "v.json", {})
    assert (tmp_path / "v.json").exists() and "::error" not in capsys.readouterr().out
