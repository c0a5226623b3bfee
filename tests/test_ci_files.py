"""The CI workflow files: valid YAML, and they call Makefile targets that exist (GitHub Actions itself cannot
run here, so this is what can be checked locally)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def test_workflows_parse_and_call_existing_make_targets():
    assert {w.name for w in WORKFLOWS} == {"regress.yml", "publish.yml"}
    targets = _make_targets()
    for workflow in WORKFLOWS:
        jobs = yaml.safe_load(workflow.read_text())["jobs"]
        runs = [step["run"] for job in jobs.values() for step in job["steps"] if "run" in step]
        called = {m for run in runs for m in re.findall(r"\bmake ([\w-]+)", run)}
        assert called and called <= targets, (workflow.name, called - targets)


def test_the_pull_request_gate_runs_regress_on_the_cpu_and_fails_the_job_on_its_exit_status():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "regress.yml").read_text())
    assert "pull_request" in workflow[True]  # YAML reads the key "on" as True
    steps = workflow["jobs"]["cpu"]["steps"]
    gate = next(step["run"] for step in steps if "run" in step and "make regress" in step["run"])
    assert "|| true" not in gate and "BASE=" in gate and "HEAD=" in gate
    assert "--mode" not in gate  # the gate's default, the paired mode (tests/test_paired.py)


def test_the_gate_narrowing_names_configs_of_the_table_and_both_jobs_use_it():
    """A renamed config must not leave the pull-request gate judging nothing: each alternative of GATE_BENCH
    matches a config of ``benchmarks/configs.py``, and every job's gate passes it to ``make regress``."""
    from benchmarks.configs import configs

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "regress.yml").read_text())
    names = [config.name for config in configs()]
    for alternative in workflow["env"]["GATE_BENCH"].split("|"):
        assert any(re.search(alternative, name) for name in names), (alternative, names)
    for job, spec in workflow["jobs"].items():
        gate = next(step["run"] for step in spec["steps"] if "run" in step and "make regress" in step["run"])
        assert 'BENCH="$GATE_BENCH"' in gate, job


def test_the_job_that_deploys_pages_declares_the_pages_environment():
    """actions/deploy-pages fails a job that does not target the ``github-pages`` environment."""
    for workflow in WORKFLOWS:
        for name, job in yaml.safe_load(workflow.read_text())["jobs"].items():
            if any("deploy-pages" in step.get("uses", "") for step in job["steps"]):
                assert job.get("environment", {}).get("name") == "github-pages", (workflow.name, name)
