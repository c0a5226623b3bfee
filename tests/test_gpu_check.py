"""The prepared GPU check (``unfold-bench gpu-check``): its dry run here, the carried wheels' requirements, and the
asv run through the carried repository in a tree without ``.git``, as the lent machine receives it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.catalogue import CATALOGUE_FILE
from benchmarks.machine import HOST_VARIABLE
from benchmarks.trees import ROOT
from unfold_bench.commands import gpu_check


def _carry_to(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(gpu_check, "CARRIED_DIR", directory)
    monkeypatch.setattr(gpu_check, "WHEELS", directory / "wheels")
    monkeypatch.setattr(gpu_check, "MANIFEST", directory / "manifest.json")
    monkeypatch.setattr(gpu_check, "ASV_CONFIG", directory / "asv.conf.json")
    return directory


@pytest.fixture
def carried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The carried folder moved to a temporary directory, so a test never touches a prepared ``.gpu-check``."""
    return _carry_to(tmp_path / "carried", monkeypatch)


def test_the_dry_run_names_what_is_missing_then_is_ready_once_prepared(carried, capsys):
    assert gpu_check.main(["run", "--dry-run"]) == 1
    output = capsys.readouterr().out
    assert "manifest.json: run `make gpu-check-prepare`" in output
    assert f"no wheel for asv=={gpu_check.pinned()['asv']}" in output and "problem(s)" in output

    assert gpu_check.main(["prepare", "--no-download"]) == 1  # the manifest, but no wheels yet
    manifest = json.loads((carried / "manifest.json").read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert manifest["commit"] == head
    config = json.loads((carried / "asv.conf.json").read_text())
    assert config["dvcs"] == "carried" and config["repo"] == "manifest.json"
    assert (carried / config["results_dir"]).resolve() == carried.parent / "results"  # asv reads it from there
    (carried / "wheels").mkdir()
    for name, version in gpu_check.pinned().items():  # the names pip gives the wheels (only names are checked)
        (carried / "wheels" / f"{re.sub(r'[-_.]+', '_', name)}-{version}-py3-none-any.whl").touch()
    capsys.readouterr()

    assert gpu_check.main(["run", "--dry-run"]) == 0
    output = capsys.readouterr().out
    assert "dry run: ready to travel" in output
    tests = int(re.search(r"cuda tests: (\d+)", output).group(1))
    quick = int(re.search(r"quick profile: (\d+) CUDA cells", output).group(1))
    full = int(re.search(r"full profile: (\d+) CUDA cells", output).group(1))
    assert tests > 0 and quick > 0 and full > 0, output
    for step in ("environment", "cuda tests", "capabilities", "quick profile, cuda", "full profile, All-CNN-C"):
        assert f"step {step} (" in output


def test_a_carried_package_whose_requirement_the_device_lacks_is_named(monkeypatch):
    assert gpu_check.unmet_requirements() == []  # the shipped list is closed
    monkeypatch.setattr(gpu_check, "CARRIED", tuple(n for n in gpu_check.CARRIED if n != "asv_runner"))
    assert any(line.startswith("asv requires asv-runner") for line in gpu_check.unmet_requirements())


def test_the_selections_take_only_strategies_that_declare_cuda():
    from benchmarks.profiles import FULL, QUICK
    from benchmarks.runner import plan
    from impls import STRATEGIES

    selections = gpu_check.cell_selections()
    for profile in (QUICK, FULL):
        cells = [cell for chunk in plan(profile, selections[profile.name]) for cell in chunk.cells]
        assert cells and all(cell.endswith("'cuda')") for cell in cells)
        strategies = {m.group(1) for cell in cells if (m := re.search(r"\('(\w+)', '", cell)) and "unfold." in cell}
        assert strategies == {n for n, s in STRATEGIES.items() if "cuda" in s.devices}
        assert not any(cell.startswith("compile_time.") for cell in cells)
    full = [cell for chunk in plan(FULL, selections["full"]) for cell in chunk.cells]
    assert {cell.split("(")[0] for cell in full} == {
        "unfold.Full.time_forward",
        "bounds.Full.time_copy",
        "bounds.Full.time_fill",
        "bounds.Full.time_fresh_output",
    }


@pytest.mark.slow
def test_asv_records_under_the_carried_commit_where_git_is_unavailable(carried, tmp_path):
    manifest = gpu_check.write_manifest()
    config = json.loads((carried / "asv.conf.json").read_text())
    config.update(benchmark_dir=str(ROOT / "benchmarks"), results_dir=str(tmp_path / "results"))
    config.update(env_dir=str(tmp_path / "env"))
    (carried / "asv.conf.json").write_text(json.dumps(config))
    # no repository for git to find, as in the tree a lent machine receives: any git call fails
    env = {**os.environ, "HOME": str(tmp_path), "GIT_DIR": str(tmp_path / "no-git"), HOST_VARIABLE: "rehearsal"}
    cell = r"^unfold\.Quick\.time_forward\('native', 'example', 'cpu'\)$"
    command = [sys.executable, "-m", "unfold_bench.commands.bench", "--config", str(carried / "asv.conf.json")]
    command += ["--commit", manifest["commit"], "--bench", cell, "--summaries", str(tmp_path / "summaries")]
    ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (machine,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    assert machine.name.startswith("rehearsal-")
    (result_file,) = machine.glob(f"{manifest['commit'][:8]}-*.json")
    saved = json.loads(result_file.read_text())
    assert saved["commit_hash"] == manifest["commit"] and saved["date"] == manifest["date"]
    figure = saved["results"]["unfold.Quick.time_forward"][0]
    assert any(isinstance(value, float) and value > 0 for value in figure), figure

    into, out = tmp_path / "into", tmp_path / "out"
    shutil.copytree(machine, out / "results" / machine.name)
    assert gpu_check.main(["import", str(out), "--into", str(into)]) == 0
    assert (into / "results" / machine.name / result_file.name).read_text() == result_file.read_text()
    catalogue = machine / CATALOGUE_FILE  # the reports' records of the registry come back with the results
    assert (into / "results" / machine.name / CATALOGUE_FILE).read_text() == catalogue.read_text()


@pytest.mark.parametrize("budget", ["0.3", "5000"])
def test_a_budget_the_device_call_cannot_hold_is_refused(budget, capsys):
    with pytest.raises(SystemExit) as exit:
        gpu_check.main(["run", "--dry-run", "--budget", budget])
    assert exit.value.code == 2 and f"--budget {budget}: must be 1 to" in capsys.readouterr().err
