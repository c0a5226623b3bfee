"""The CI workflow files: valid YAML, Makefile targets that exist, least permissions, no fork code on our own
runners without approval, and a rehearsal of the steps that can run here (GitHub Actions itself cannot), with
GitHub's variables pointing at temporary files and a stand-in for the ``gh`` command."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.trees import ROOT
from impls.toolchain import COMPILE_CACHE_VARIABLES

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def test_workflows_parse_and_call_existing_make_targets():
    assert {w.name for w in WORKFLOWS} == {
        "regress.yml",
        "regress-gpu.yml",
        "publish.yml",
        "test.yml",
        "gate-comment.yml",
    }
    targets = _make_targets()
    for workflow in WORKFLOWS:
        jobs = yaml.safe_load(workflow.read_text())["jobs"]
        runs = [step["run"] for job in jobs.values() for step in job["steps"] if "run" in step]
        called = {m for run in runs for m in re.findall(r"\bmake ([\w-]+)", run)}
        assert called <= targets, (workflow.name, called - targets)


def test_the_pull_request_gate_runs_regress_on_the_cpu_and_fails_the_job_on_its_exit_status():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "regress.yml").read_text())
    assert "pull_request" in workflow[True]  # YAML reads the key "on" as True
    steps = workflow["jobs"]["cpu"]["steps"]
    gate = next(step["run"] for step in steps if "run" in step and "make regress" in step["run"])
    assert "|| true" not in gate and "BASE=" in gate and "HEAD=" in gate and 'exit "$recorded"' in gate
    assert "--mode" not in gate  # the gate's default, the paired mode (tests/test_paired.py)


def _verdict_script(status: int) -> str:
    """Shell lines that write a verdict file recording ``status``, as ``unfold-bench regress --verdict-file`` does."""
    return f"mkdir -p gate; echo '{{\"status\": {status}}}' > gate/verdict.json\n"


@pytest.mark.parametrize(("recorded", "expected"), [(0, 0), (1, 1), (2, 2), (None, 2)])
def test_rehearsal_the_gate_step_exits_with_the_status_its_verdict_file_records(tmp_path, recorded, expected):
    """make reports the gate's 1 and 2 alike as its own 2: the step exits with verdict.json's status, and with 2
    when the gate wrote none, which the job summary (where the gate's table goes otherwise) then says. A stand-in
    for make exits 2 after writing the verdict file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    verdict = "" if recorded is None else _verdict_script(recorded)
    (bin_dir / "make").write_text(f"#!/bin/sh\n{verdict}exit 2\n")
    (bin_dir / "make").chmod(0o755)
    step = _step(_load("regress.yml"), "cpu", "Regression gate")
    summary = tmp_path / "step_summary"
    env = {"GATE_BENCH": "x", "BASE": "a", "HEAD": "b", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    assert _bash(step["run"], tmp_path, env | {"GITHUB_STEP_SUMMARY": str(summary)}).returncode == expected
    no_verdict = "**CPU gate: GATE ERROR: the gate gave no verdict (make regress exited 2)**\n"
    assert (summary.read_text() if summary.exists() else "") == (no_verdict if recorded is None else "")


def test_every_upload_of_a_hidden_folder_includes_hidden_files():
    """upload-artifact leaves out files under a folder whose name starts with a dot unless told otherwise."""
    for workflow in WORKFLOWS:
        for name, job in yaml.safe_load(workflow.read_text())["jobs"].items():
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/upload-artifact"):
                    hidden = any(
                        part.startswith(".") for path in step["with"]["path"].split() for part in path.split("/")
                    )
                    assert not hidden or step["with"].get("include-hidden-files") is True, (workflow.name, name)


GATE = re.compile(r"make regress|unfold_bench\.cli regress")  # the gate's step: through make, or the command itself


def test_the_gate_narrowing_names_configs_of_the_table_and_both_jobs_use_it():
    """A renamed config must not leave the pull-request gate judging nothing: each alternative of GATE_BENCH
    matches a config of ``benchmarks/configs.py``, and every job's gate passes it to the gate (``make regress`` in
    the CPU gate, the command itself in the GPU gate). It is the CI subset that validate-gate measures the gate on,
    in the CPU gate's workflow and the GPU gate's alike."""
    from benchmarks.configs import configs
    from benchmarks.profiles import CI_SUBSET

    names = [config.name for config in configs()]
    for alternative in CI_SUBSET.split("|"):
        assert any(re.search(alternative, name) for name in names), (alternative, names)
    for name in ("regress.yml", "regress-gpu.yml"):
        workflow = _load(name)
        assert workflow["env"]["GATE_BENCH"] == CI_SUBSET, name
        for job, spec in workflow["jobs"].items():
            gate = next(step["run"] for step in spec["steps"] if "run" in step and GATE.search(step["run"]))
            assert re.search(r'make regress BENCH="\$GATE_BENCH"|--bench "\$GATE_BENCH"', gate), (name, job)


# The first major of each action that runs on Node 24 (GitHub removed Node 20 from its runners in September 2026),
# from each action's release notes
NODE_24_MAJORS = {
    "actions/checkout": 5,
    "actions/setup-python": 6,
    "actions/cache": 5,
    "actions/upload-artifact": 6,
    "actions/download-artifact": 7,
    "actions/upload-pages-artifact": 5,  # a composite of upload-artifact v7 from v5
    "actions/deploy-pages": 5,
}


def test_every_action_of_the_workflows_and_the_example_runs_on_node_24():
    example = (ROOT / "docs" / "your-own-unfold.md").read_text()
    texts = [w.read_text() for w in WORKFLOWS] + [example]
    used = [m for text in texts for m in re.findall(r"uses: ([\w./-]+)@v(\d+)", text)]
    assert used and {action for action, _ in used} <= set(NODE_24_MAJORS), used
    old = [f"{action}@v{major}" for action, major in used if int(major) < NODE_24_MAJORS[action]]
    assert not old, f"actions on Node 20: {old}"


def test_the_job_that_deploys_pages_declares_the_pages_environment():
    """actions/deploy-pages fails a job that does not target the ``github-pages`` environment."""
    for workflow in WORKFLOWS:
        for name, job in yaml.safe_load(workflow.read_text())["jobs"].items():
            if any("deploy-pages" in step.get("uses", "") for step in job["steps"]):
                assert job.get("environment", {}).get("name") == "github-pages", (workflow.name, name)


def _load(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())


def _step(workflow: dict, job: str, name: str) -> dict:
    return next(step for step in workflow["jobs"][job]["steps"] if step.get("name", "").startswith(name))


def test_the_tests_workflow_runs_the_readmes_test_command_on_pull_requests_and_pushes():
    workflow = _load("test.yml")
    assert "pull_request" in workflow[True] and workflow[True]["push"]["branches"] == ["main"]
    (job,) = workflow["jobs"].values()
    assert any(step.get("run") == "make test" for step in job["steps"])
    assert "make test" in (ROOT / "README.md").read_text()
    cached = [step["with"]["path"] for step in job["steps"] if step.get("uses", "").startswith("actions/cache")]
    assert cached == [".cache"] and job["env"]["TORCHINDUCTOR_CACHE_DIR"].endswith(".cache/inductor")


def test_the_tests_workflow_checks_out_the_history_the_suite_walks():
    """actions/checkout fetches one commit unless told otherwise, and the suite reads history (a bench over
    ``HEAD~1..HEAD`` in tests/test_caveats.py): the test job's checkout fetches it all."""
    (job,) = _load("test.yml")["jobs"].values()
    (checkout,) = [step for step in job["steps"] if step.get("uses", "").startswith("actions/checkout")]
    assert checkout.get("with", {}).get("fetch-depth") == 0


def test_every_compile_cache_is_saved_by_each_run_and_restores_the_newest_of_the_same_sources():
    """actions/cache saves nothing after an exact hit, so a key that only the sources decide would keep the first
    run's caches for good: each run's key ends with its run id, and the restore keys, prefixes of it, pick the
    newest cache of the same workflow and sources, else of any sources. The sources include the Makefile, which
    pins torch (a compiled kernel is torch's)."""
    assert re.search(r"^TORCH_SPEC \?= torch==", (ROOT / "Makefile").read_text(), re.MULTILINE)
    caches = []
    for workflow in WORKFLOWS:
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            caches += [step["with"] for step in job["steps"] if step.get("uses", "").startswith("actions/cache")]
    assert len(caches) == 3  # test.yml, regress.yml, publish.yml's legs
    for cache in caches:
        key = cache["key"]
        assert key.endswith("-${{ github.run_id }}") and "${{ github.workflow }}" in key, key
        (sources,) = re.findall(r"hashFiles\(([^)]*)\)", key)
        assert {"'pyproject.toml'", "'Makefile'", "'impls/**'"} <= {s.strip() for s in sources.split(",")}
        restore = cache["restore-keys"].splitlines()
        assert restore == [key.removesuffix("${{ github.run_id }}"), key.split("${{ hashFiles")[0]], restore


def test_every_workflow_grants_the_least_permissions_it_needs():
    """Read-only by default; write access only where a job needs it, and each job only its own: the results branch
    in publish's push-results, Pages in its deploy-site (its build-site keeps the workflow's read-only token),
    pull-request comments in the comment job (which runs no pull-request code)."""
    allowed = {
        ("publish.yml", "push-results"): {"contents": "write"},
        ("publish.yml", "deploy-site"): {"pages": "write", "id-token": "write"},
        ("gate-comment.yml", None): {"actions": "read", "pull-requests": "write"},
    }
    for workflow in WORKFLOWS:
        spec = yaml.safe_load(workflow.read_text())
        top = spec.get("permissions")
        assert top is not None, f"{workflow.name}: no top-level permissions (the default token may write)"
        expected_top = allowed.get((workflow.name, None), {"contents": "read"})
        assert top == expected_top, (workflow.name, top)
        for name, job in spec["jobs"].items():
            if "permissions" in job:
                assert job["permissions"] == allowed.get((workflow.name, name)), (workflow.name, name)


def test_no_workflow_pastes_an_expression_into_a_script():
    """GitHub substitutes ``${{ ... }}`` into a script's text before the shell reads it, so a value with shell
    syntax in it (a branch name, a title) would run as code; every value reaches a script through ``env``."""
    for workflow in WORKFLOWS:
        for name, job in yaml.safe_load(workflow.read_text())["jobs"].items():
            for step in job.get("steps", []):
                assert "${{" not in step.get("run", ""), (workflow.name, name, step.get("name"))


def test_code_from_a_fork_reaches_a_self_hosted_runner_only_after_an_approval():
    for workflow in WORKFLOWS:
        spec = yaml.safe_load(workflow.read_text())
        assert "pull_request_target" not in spec[True], workflow.name  # would run fork code with our secrets
        for name, job in spec["jobs"].items():
            self_hosted = "self-hosted" in job["runs-on"]
            if self_hosted and "pull_request" in spec[True]:
                assert job.get("environment") == "gpu-runner", (workflow.name, name)  # protected: approve each run
    comment = _load("gate-comment.yml")
    steps = comment["jobs"]["comment"]["steps"]
    assert not any(step.get("uses", "").startswith("actions/checkout") for step in steps)  # runs no PR code
    assert "workflow_run" in comment[True]


def test_every_self_hosted_job_compiles_into_its_own_temporary_folder():
    """The GPU runner is shared by approved pull requests' gates and main's publish job, and outlives each job:
    compiled code left in its defaults (the runner's home, /tmp) by one run would be loaded by the next. Every step
    that runs code in a self-hosted job points each compile cache under ``runner.temp``, which the runner empties
    before and after each job. ``runner`` is not a context a job's own ``env`` may read (GitHub rejects the file),
    so it is set on the steps."""
    jobs = 0
    for workflow in WORKFLOWS:
        for name, job in yaml.safe_load(workflow.read_text())["jobs"].items():
            assert "runner." not in json.dumps(job.get("env", {})), (workflow.name, name)
            if "self-hosted" not in job["runs-on"]:
                continue
            jobs += 1
            running = [step for step in job["steps"] if "make " in step.get("run", "")]
            assert running, (workflow.name, name)
            for step in running:
                for variable in COMPILE_CACHE_VARIABLES:
                    value = step.get("env", {}).get(variable, "")
                    assert value.startswith("${{ runner.temp }}/"), (workflow.name, name, step["name"], variable)
    assert jobs == 2  # regress-gpu.yml's gate, publish.yml's bench-gpu


def _evaluate(condition: str, event_name: str, action: str = "", label: str = "", labels: tuple = ()) -> bool:
    """A job's ``if`` for one event, with the few parts of GitHub's expressions it uses: the event's name, action
    and added label, ``contains`` over the pull request's labels, ``==``, ``!=``, ``&&``, ``||`` and parentheses."""
    values = {"github.event_name": event_name, "github.event.action": action, "github.event.label.name": label}
    expression = re.sub(
        r"contains\(github\.event\.pull_request\.labels\.\*\.name, '([^']*)'\)",
        lambda match: repr(match[1] in labels),
        " ".join(condition.split()),
    )
    for name, value in values.items():
        expression = expression.replace(name, repr(value))
    expression = expression.replace("&&", " and ").replace("||", " or ")
    assert "github." not in expression and "!" not in expression.replace("!=", ""), expression
    return eval(expression, {"__builtins__": {}})


def test_the_gpu_gate_is_a_workflow_of_its_own_that_the_gpu_bench_label_starts():
    """The comment waits for the whole CPU gate workflow, so the GPU job, which waits for a maintainer's approval,
    is in another. Adding the label "gpu-bench" starts it and any other label nothing; each new commit of a pull
    request that carries the label starts it, and a run by hand; the CPU gate does not rerun when a label is added."""
    cpu, gpu = _load("regress.yml"), _load("regress-gpu.yml")
    assert not any("self-hosted" in job["runs-on"] for job in cpu["jobs"].values())
    assert "labeled" not in cpu[True]["pull_request"]["types"]
    (job,) = gpu["jobs"].values()
    assert "self-hosted" in job["runs-on"] and job["environment"] == "gpu-runner"
    assert set(gpu[True]["pull_request"]["types"]) == {"opened", "synchronize", "reopened", "labeled"}
    assert "workflow_dispatch" in gpu[True]
    starts = functools.partial(_evaluate, job["if"])
    assert starts("pull_request", "labeled", "gpu-bench", ("gpu-bench",))
    assert not starts("pull_request", "labeled", "docs", ("gpu-bench", "docs"))  # another label on a GPU pull request
    assert starts("pull_request", "synchronize", labels=("gpu-bench",))
    assert not starts("pull_request", "synchronize", labels=("docs",))
    assert not starts("pull_request", "opened")
    assert starts("workflow_dispatch")
    upload = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["name"] != "regression-gate-cpu"  # each gate's artifact, and so its comment, its own


GATES = {"cpu": "regress.yml", "gpu": "regress-gpu.yml"}


def _which_gate(tmp_path: Path, workflow_name: str) -> tuple[subprocess.CompletedProcess, dict]:
    """gate-comment.yml's first step for a completed run of the workflow named ``workflow_name``: its exit and
    the outputs it gives the later steps (the artifact to download, the comment's marker and title)."""
    output = tmp_path / f"which-{len(list(tmp_path.glob('which-*')))}"
    step = _step(_load("gate-comment.yml"), "comment", "Which gate")
    assert step["env"] == {"WORKFLOW": "${{ github.event.workflow_run.name }}"}
    ran = _bash(step["run"], tmp_path, {**step["env"], "WORKFLOW": workflow_name, "GITHUB_OUTPUT": str(output)})
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines()) if output.exists() else {}
    return ran, outputs


def test_the_comment_job_follows_both_gates_and_downloads_what_each_uploads(tmp_path):
    """gate-comment.yml runs after the CPU gate's workflow and after the GPU gate's. The completed workflow's name
    (GitHub's, not the artifact's) picks the artifact that gate uploads and a marker of its own, neither a prefix
    of the other (the comment to edit is found by ``startswith``), so each gate keeps one comment and never edits
    the other's; a name it does not know gets nothing downloaded."""
    comment = _load("gate-comment.yml")
    names = {gate: _load(workflow)["name"] for gate, workflow in GATES.items()}
    assert comment[True]["workflow_run"]["workflows"] == [names["cpu"], names["gpu"]]
    download = next(step for step in comment["jobs"]["comment"]["steps"] if step.get("id") == "download")
    assert download["with"]["name"] == "${{ steps.gate.outputs.artifact }}"
    markers = {}
    for gate, workflow in GATES.items():
        (job,) = _load(workflow)["jobs"].values()
        upload = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact"))
        assert "gate/" in upload["with"]["path"].split()  # the artifact holds gate/pr-number and gate/comment.md
        ran, outputs = _which_gate(tmp_path, names[gate])
        assert ran.returncode == 0, ran.stderr
        assert outputs["artifact"] == upload["with"]["name"], gate
        assert outputs["marker"].startswith("<!--") and outputs["marker"].endswith("-->")
        assert gate.upper() in outputs["title"]
        markers[gate] = outputs["marker"]
    assert markers["cpu"] == MARKER  # the CPU gate's comments made before keep being edited
    assert not markers["cpu"].startswith(markers["gpu"]) and not markers["gpu"].startswith(markers["cpu"])
    ran, outputs = _which_gate(tmp_path, "benchmark regression gate (something else)")
    assert ran.returncode != 0 and outputs == {}


@pytest.mark.parametrize("gate", GATES)
def test_rehearsal_each_gate_writes_what_the_comment_job_reads(tmp_path, gate):
    """Each gate's step after it, on a pull request, whatever the gate's outcome: the pull request's number in
    gate/pr-number and, when the gate wrote a verdict, its markdown in gate/comment.md, both in the artifact the
    gate uploads after it."""
    workflow = _load(GATES[gate])
    (name,) = workflow["jobs"]
    step = _step(workflow, name, "The verdict for the comment job")
    assert step["if"] == "always() && github.event_name == 'pull_request'"
    assert step["env"] == {"PR_NUMBER": "${{ github.event.pull_request.number }}"}
    steps = workflow["jobs"][name]["steps"]
    assert steps.index(step) < next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload"))
    verdict = _verdict(tmp_path, status=1)
    python = tmp_path / ".venv" / "bin" / "python"  # the project's environment, as make venv leaves it
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    ran = _bash(step["run"], tmp_path, {"PR_NUMBER": "17", "PYTHONPATH": str(ROOT)})
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "gate" / "pr-number").read_text() == "17\n"
    from reports.gate_report import markdown

    assert (tmp_path / "gate" / "comment.md").read_text() == markdown(json.loads(verdict.read_text()))


JUDGED, UNJUDGED = "(unfold-bench regress exited {})", "GATE ERROR: {} failed, so the gate did not run"
NO_VERDICT = "GATE ERROR: the gate could not judge "


@pytest.mark.parametrize(
    ("nvidia", "venv", "regress", "recorded", "expected", "said"),
    [
        pytest.param(0, 0, 0, 0, 0, "no regression " + JUDGED.format(0), id="no regression"),
        pytest.param(0, 0, 1, 1, 1, "REGRESSION " + JUDGED.format(1), id="regression"),
        pytest.param(0, 0, 2, 2, 2, NO_VERDICT + JUDGED.format(2), id="no verdict"),
        pytest.param(0, 0, 137, None, 2, NO_VERDICT + JUDGED.format(137), id="killed"),
        # the command's 1 for an error before any verdict (a SystemExit with a message) is no regression
        pytest.param(0, 0, 1, None, 2, NO_VERDICT + JUDGED.format(1), id="error before a verdict"),
        pytest.param(0, 2, None, None, 2, UNJUDGED.format("make venv"), id="no environment"),
        pytest.param(9, None, None, None, 2, UNJUDGED.format("nvidia-smi"), id="no gpu"),
    ],
)
def test_rehearsal_the_gpu_gate_step_fails_with_the_status_its_verdict_file_records_and_says_which(
    tmp_path, nvidia, venv, regress, recorded, expected, said
):
    """make reports the gate's 1 (a regression) and 2 (no verdict) alike as its own 2, and the command's own 1 may
    be an error before any verdict, so the GPU gate's step sets up the environment with ``make venv``, calls the
    command itself and fails with the status its verdict file records (2 where it wrote none), as the CPU gate
    does; the job summary names the verdict; what fails before the gate runs is a 2. Stand-ins for nvidia-smi, make
    and the environment's python exit as given and record their arguments; the python writes the verdict file."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    stand_ins = {bin_dir / "nvidia-smi": nvidia, bin_dir / "make": venv, tmp_path / ".venv" / "bin" / "python": regress}
    for path, status in stand_ins.items():
        verdict = "" if recorded is None or path.name != "python" else _verdict_script(recorded)
        path.write_text(f'#!/bin/sh\necho "{path.name} $*" >> "{calls}"\n{verdict}exit {status or 0}\n')
        path.chmod(0o755)
    step = _step(_load("regress-gpu.yml"), "gpu", "Regression gate")
    summary = tmp_path / "step_summary"
    env = {"GATE_BENCH": "a|b", "BASE": "base", "HEAD": "head", "GITHUB_STEP_SUMMARY": str(summary)}
    ran = _bash(step["run"], tmp_path, env | {"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert ran.returncode == expected, ran.stdout + ran.stderr
    assert summary.read_text() == f"**GPU gate: {said}**\n"
    called = calls.read_text().splitlines()
    gate_call = "python -m unfold_bench.cli regress base head --bench a|b --verdict-file gate/verdict.json"
    assert (
        called == ["nvidia-smi ", "make venv", gate_call][: len([s for s in (nvidia, venv, regress) if s is not None])]
    )


FAN_IN = ("push-results", "build-site", "deploy-site")  # publish.yml's jobs after the legs, in their order


def test_the_publish_legs_fan_in_once():
    """The legs fan in to push-results, which runs whichever leg failed; build-site follows it and deploy-site
    build-site, each only where the job before it succeeded (``success()`` alone would also ask every leg's)."""
    publish = _load("publish.yml")
    assert publish["jobs"]["bench"]["strategy"]["fail-fast"] is False
    fan_in = publish["jobs"]["push-results"]
    assert set(fan_in["needs"]) == {"bench", "bench-gpu"} and fan_in["if"] == "${{ !cancelled() }}"  # a leg may fail
    for before, job in zip(FAN_IN, FAN_IN[1:]):
        spec = publish["jobs"][job]
        assert spec["needs"] == [before], job
        assert spec["if"] == f"${{{{ !cancelled() && needs.{before}.result == 'success' }}}}", job
    assert set(publish["jobs"]) == {"bench", "bench-gpu", *FAN_IN}
    for leg in ("bench", "bench-gpu"):
        bench = _step(publish, leg, "Benchmark")
        assert bench["continue-on-error"] is True  # a failed cell still uploads what was measured
        uploads = [s for s in publish["jobs"][leg]["steps"] if s.get("uses", "").startswith("actions/upload")]
        assert all(upload["if"] == "always()" for upload in uploads)
        # make bench writes the capability matrix beside the results, and the site shows it
        assert {(u["with"]["name"].split("-")[0], u["with"]["path"]) for u in uploads} == {
            ("results", "results/"),
            ("capabilities", "reports/capabilities/"),
        }


def test_the_fan_in_jobs_take_turns_in_one_queued_lane():
    """push-results, build-site and deploy-site share one concurrency group, each waiting job keeping its turn
    (``queue: max``; by default a third arrival cancels the one waiting, and a cancelled push-results loses its
    run's results): one of them runs at a time, first come first served, so pushes take turns on the branch, each
    site is built from the branch after its own run's commit, and sites are deployed in the order they were built
    (a later deployment never shows fewer results than an earlier one)."""
    publish = _load("publish.yml")
    lanes = [publish["jobs"][job].get("concurrency") for job in FAN_IN]
    assert lanes[0] == {"group": "publish-benchmark-site", "cancel-in-progress": False, "queue": "max"}
    assert lanes == [lanes[0]] * len(FAN_IN)
    assert "concurrency" not in publish and all(
        "concurrency" not in publish["jobs"][leg] for leg in ("bench", "bench-gpu")
    )


def test_the_fan_in_lays_every_legs_artifacts_where_they_are_read():
    """Each kind of artifact a leg uploads is downloaded, every leg's merged, into the folder it came from: the
    results into results/ before push-results commits them to the branch, the capability matrices into
    reports/capabilities/ (``build_site``'s ``CAPABILITIES_DIR``) before build-site builds the site, after it has
    taken every result from the branch."""
    from reports.site import CAPABILITIES_DIR

    publish = _load("publish.yml")

    def downloads(job: str, before: str) -> dict:
        steps = publish["jobs"][job]["steps"]
        until = steps.index(_step(publish, job, before))
        return {
            step["with"]["pattern"]: step["with"]["path"]
            for step in steps[:until]
            if step.get("uses", "").startswith("actions/download-artifact") and step["with"].get("merge-multiple")
        }

    assert downloads("push-results", "Keep the results") == {"results-*": "results"}
    assert downloads("build-site", "Build the site") == {"capabilities-*": "reports/capabilities"}
    steps = publish["jobs"]["build-site"]["steps"]
    branch = steps.index(_step(publish, "build-site", "Every result from the benchmark-results branch"))
    assert branch < steps.index(_step(publish, "build-site", "Build the site"))
    assert CAPABILITIES_DIR == ROOT / "reports" / "capabilities"


WRITES_WITH = {"actions/checkout", "actions/download-artifact", "actions/deploy-pages"}  # GitHub's own, no install
# an installer, an interpreter, a build, or the project's command at the start of a command line (its name also
# appears in the gate comment's marker)
INSTALLS_OR_RUNS = re.compile(
    r"\b(pip3?|uvx?|python3?|make|npm|npx|node|pytest)\b|\.venv|setup\.py|(^|[;&|(]\s*)unfold-bench\b", re.MULTILINE
)


def _writes(spec: dict, job: dict) -> bool:
    permissions = job.get("permissions", spec.get("permissions"))
    if isinstance(permissions, str):  # read-all, write-all
        return permissions != "read-all"
    return any(value == "write" for value in permissions.values())


def test_no_job_that_holds_a_write_token_installs_a_package_or_runs_project_code():
    """A compromised package, or the project's code, would run with the job's token: a job that may write (push the
    results branch, deploy Pages, comment) uses only GitHub's own actions for checking out, downloading artifacts and
    deploying Pages, and its scripts call no installer, interpreter or build (git, gh and the shell's own tools)."""
    writers = []
    for workflow in WORKFLOWS:
        spec = yaml.safe_load(workflow.read_text())
        for name, job in spec["jobs"].items():
            if not _writes(spec, job):
                continue
            writers.append((workflow.name, name))
            for step in job["steps"]:
                if "uses" in step:
                    assert step["uses"].split("@")[0] in WRITES_WITH, (workflow.name, name, step["uses"])
                assert not INSTALLS_OR_RUNS.search(step.get("run", "")), (workflow.name, name, step.get("name"))
    assert set(writers) == {
        ("publish.yml", "push-results"),
        ("publish.yml", "deploy-site"),
        ("gate-comment.yml", "comment"),
    }


def _snippet() -> str:
    """The workflow docs/your-own-unfold.md gives users, as written there."""
    (snippet,) = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "your-own-unfold.md").read_text(), re.DOTALL)
    return snippet


def test_no_job_that_installs_a_package_or_runs_code_keeps_the_checkouts_token():
    """actions/checkout leaves the job's token in .git/config unless told not to, where an installed package or the
    code under test could read it: every checkout of a job that installs or runs code (in the workflows and in
    the one docs/your-own-unfold.md gives users) keeps none. Only push-results, which runs git alone, keeps its own
    to push."""
    specs = [(w.name, yaml.safe_load(w.read_text())) for w in WORKFLOWS] + [
        ("your-own-unfold.md", yaml.safe_load(_snippet()))
    ]
    keeping = []
    for source, spec in specs:
        for name, job in spec["jobs"].items():
            runs_code = any(INSTALLS_OR_RUNS.search(step.get("run", "")) for step in job["steps"])
            for step in job["steps"]:
                if (
                    step.get("uses", "").startswith("actions/checkout")
                    and step.get("with", {}).get("persist-credentials") is not False
                ):
                    keeping.append((source, name))
                    assert not runs_code, (source, name, "keeps the checkout's token")
    assert keeping == [("publish.yml", "push-results")]


def test_the_pages_deployment_is_split_as_githubs_starter_workflows_do():
    """build-site, with the workflow's read-only token, installs the project, builds the site and uploads it with
    actions/upload-pages-artifact; deploy-site, which needs it, holds only ``pages: write`` and ``id-token: write``
    and runs actions/deploy-pages alone, in the github-pages environment."""
    publish = _load("publish.yml")
    build, deploy = publish["jobs"]["build-site"], publish["jobs"]["deploy-site"]
    assert "permissions" not in build and publish["permissions"] == {"contents": "read"}
    uses = [step["uses"].split("@")[0] for step in build["steps"] if "uses" in step]
    assert uses[-1] == "actions/upload-pages-artifact" and build["steps"][-1]["with"]["path"] == "reports/site"
    assert "pip install" in _step(publish, "build-site", "Build the site")["run"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]
    assert deploy["environment"]["name"] == "github-pages" and deploy["needs"] == ["build-site"]
    for name, job in publish["jobs"].items():  # nothing else deploys, and nothing else needs the environment
        if name != "deploy-site":
            assert "environment" not in job and not any("deploy-pages" in s.get("uses", "") for s in job["steps"])


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _origin_with_sources(tmp_path: Path, name: str, files: dict[str, str] | None = None) -> tuple[Path, Path]:
    """A bare origin and a clone ``name`` whose main, pushed there, holds the sources a publish job checks out: a
    workflow (which the job's token may not push), this project's .gitignore and ``files`` (path: text)."""
    origin, repo = tmp_path / "origin.git", tmp_path / name
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    for path, text in {".github/workflows/publish.yml": "name: x\n", **(files or {})}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "sources")
    _git(repo, "remote", "add", "origin", str(origin))
    _git(repo, "push", "-q", "origin", "main")
    return origin, repo


def _bash(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True
    )


def test_rehearsal_the_gate_compares_the_pull_request_with_its_merge_base(tmp_path):
    """The revisions step, run on a repository where main moved on after the branch point: BASE is the branch
    point, not main's tip (what landed on main since is not the pull request's change)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start")
    branch_point = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "feature")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "change")
    head = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "landed later")
    _git(repo, "update-ref", "refs/remotes/origin/main", "main")
    step = _step(_load("regress.yml"), "cpu", "Revisions")
    output = tmp_path / "github_output"
    env = {**step["env"], "EVENT": "pull_request", "BASE_REF": "main", "PR_HEAD": head, "GITHUB_OUTPUT": str(output)}
    ran = _bash(step["run"], repo, env)
    assert ran.returncode == 0, ran.stderr
    assert dict(line.split("=", 1) for line in output.read_text().split()) == {"base": branch_point, "head": head}


def _verdict(tmp_path: Path, status: int) -> Path:
    from reports.gate_report import publish

    record = {
        "status": status,
        "verdict": "REGRESSION" if status == 1 else "no regression",
        "base": "a" * 40,
        "head": "b" * 40,
        "cells": [
            {"cell": "forward ('gather', 'allcnnc-conv2')", "verdict": "regression" if status else "unchanged"}
            | {"ratio": 1.12, "low": 1.08, "high": 1.16, "resolution": 1.07, "error": ""},
        ],
    }
    summary = tmp_path / "step_summary"
    path = tmp_path / "gate" / "verdict.json"
    publish(record, path, {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"})
    return path


def test_rehearsal_the_verdict_reaches_the_summary_the_annotations_and_the_comment(tmp_path, capsys):
    verdict = _verdict(tmp_path, status=1)
    annotations = capsys.readouterr().out
    assert "::error title=benchmark regression::forward ('gather', 'allcnnc-conv2')" in annotations
    summary = (tmp_path / "step_summary").read_text()
    assert "| **regression** | forward ('gather', 'allcnnc-conv2') | 1.120x | [1.080, 1.160] | 1.070x |" in summary
    shown = subprocess.run(
        [sys.executable, "-m", "reports.gate_report", str(verdict)], cwd=ROOT, capture_output=True, text=True
    )
    assert shown.returncode == 0 and shown.stdout == summary  # the comment's body is the summary's table


HEAD_SHA = "b" * 40  # the commit the gate ran on (workflow_run's head_sha)
MARKER = "<!-- unfold-bench regression gate -->"


def _fake_gh(tmp_path: Path, responses: dict) -> tuple[Path, Path]:
    """A ``gh`` on PATH that records its calls and answers ``gh api PATH --jq FILTER`` as gh does: FILTER (run by
    jq) on each page of ``responses[PATH]`` in turn, and an error for a PATH it does not know."""
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed (the stand-in for gh runs the workflow's filters with it)")
    bin_dir, calls, pages = tmp_path / "bin", tmp_path / "gh-calls", tmp_path / "gh-responses.json"
    bin_dir.mkdir()
    pages.write_text(json.dumps(responses))
    script = f"""#!{sys.executable}
import json, subprocess, sys
arguments = sys.argv[1:]
with open({str(calls)!r}, "a") as calls:
    calls.write(" ".join(arguments) + "\\n")
if "--jq" in arguments:
    path = next(argument for argument in arguments if argument.startswith("repos/"))
    responses = json.load(open({str(pages)!r}))
    if path not in responses:
        sys.exit("gh: Not Found (HTTP 404)")
    for page in responses[path]:
        jq = ["jq", "-r", arguments[arguments.index("--jq") + 1]]
        print(subprocess.run(jq, input=json.dumps(page), capture_output=True, text=True, check=True).stdout, end="")
"""
    (bin_dir / "gh").write_text(script)
    (bin_dir / "gh").chmod(0o755)
    return bin_dir, calls


GPU_MARKER = "<!-- unfold-bench regression gate: gpu -->"


def _comment(id: int, login: str, marker: str = MARKER) -> dict:
    return {"id": id, "user": {"login": login}, "body": f"{marker}\nan earlier verdict"}


APPROVED = [{"state": "approved", "environments": [{"name": "gpu-runner"}], "user": {"login": "maintainer"}}]


def _rehearse_the_comment(
    tmp_path: Path, comments: list[list[dict]], pr_head: str = HEAD_SHA, gate: str = "cpu", approvals: list = APPROVED
):
    """The comment step on the artifact of pull request 17's gate (the CPU gate's, or the GPU gate's), with
    GitHub's answers given: that pull request's head, its comments page by page, and the review history of the
    gate's run (run 99)."""
    _, outputs = _which_gate(tmp_path, _load(GATES[gate])["name"])
    _verdict(tmp_path, status=1)
    (tmp_path / "gate" / "pr-number").write_text("17\n")
    (tmp_path / "gate" / "comment.md").write_text("### Benchmark regression gate: REGRESSION\n")
    (tmp_path / "artifact").mkdir()
    (tmp_path / "gate").rename(tmp_path / "artifact" / "gate")  # where the download step puts the artifact
    responses = {"repos/o/r/pulls/17": [{"head": {"sha": pr_head}}], "repos/o/r/issues/17/comments": comments}
    responses["repos/o/r/actions/runs/99/approvals"] = [approvals]
    bin_dir, calls = _fake_gh(tmp_path, responses)
    step = _step(_load("gate-comment.yml"), "comment", "Post or update")
    assert step["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert step["env"]["MARKER"] == "${{ steps.gate.outputs.marker }}"
    assert step["env"]["RUN_ID"] == "${{ github.event.workflow_run.id }}"
    assert step["env"]["ENVIRONMENT"] == "${{ steps.gate.outputs.environment }}"
    env = {"GH_TOKEN": "t", "REPO": "o/r", "RUN_URL": "https://example/run", "RUN_ID": "99", "HEAD_SHA": HEAD_SHA}
    env |= {"MARKER": outputs["marker"], "TITLE": outputs["title"], "ENVIRONMENT": outputs["environment"]}
    ran = _bash(step["run"], tmp_path, env | {"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return ran, calls.read_text().splitlines()


@pytest.mark.parametrize(
    ("comments", "edited"),
    [
        ([[]], None),
        ([[_comment(4242, "github-actions[bot]")]], 4242),
        # gh runs --jq on each page: the newest of the bot's comments over all pages is edited
        ([[_comment(4242, "github-actions[bot]")], [_comment(4343, "github-actions[bot]")]], 4343),
        # anyone can post a comment that starts with the marker: only the bot's own is edited
        ([[_comment(4242, "github-actions[bot]"), _comment(5555, "someone")]], 4242),
        ([[_comment(5555, "someone")]], None),
    ],
)
def test_rehearsal_the_comment_job_creates_one_comment_and_then_edits_it(tmp_path, comments, edited):
    ran, made = _rehearse_the_comment(tmp_path, comments)
    assert ran.returncode == 0, ran.stderr
    assert made[0].startswith("api repos/o/r/pulls/17 --jq")
    assert made[1].startswith("api repos/o/r/issues/17/comments --paginate")
    patched, created = f"api -X PATCH repos/o/r/issues/comments/{edited} -F", "api repos/o/r/issues/17/comments -F"
    expected = patched if edited else created
    assert len(made) == 3 and made[2].startswith(expected), made
    body = (tmp_path / "body.md").read_text()
    assert body.startswith(MARKER) and "REGRESSION" in body


@pytest.mark.parametrize(
    ("gate", "comments", "edited"),
    [
        # both gates' comments on one pull request: each gate edits its own
        ("cpu", [[_comment(4242, "github-actions[bot]"), _comment(4343, "github-actions[bot]", GPU_MARKER)]], 4242),
        ("gpu", [[_comment(4242, "github-actions[bot]"), _comment(4343, "github-actions[bot]", GPU_MARKER)]], 4343),
        # the GPU gate's first verdict on a pull request the CPU gate commented on: a comment of its own
        ("gpu", [[_comment(4242, "github-actions[bot]")]], None),
        ("cpu", [[_comment(4343, "github-actions[bot]", GPU_MARKER)]], None),
        # anyone can post the GPU gate's marker: only the bot's own is edited
        ("gpu", [[_comment(4343, "github-actions[bot]", GPU_MARKER), _comment(5555, "someone", GPU_MARKER)]], 4343),
    ],
)
def test_rehearsal_each_gate_edits_only_its_own_comment(tmp_path, gate, comments, edited):
    """The CPU and the GPU gate each keep one comment on a pull request: the comment job edits the bot's comment
    that starts with that gate's marker, never the other gate's, and names the gate in it."""
    ran, made = _rehearse_the_comment(tmp_path, comments, gate=gate)
    assert ran.returncode == 0, ran.stderr
    patched, created = f"api -X PATCH repos/o/r/issues/comments/{edited} -F", "api repos/o/r/issues/17/comments -F"
    assert made[-1].startswith(patched if edited else created), made
    # the GPU gate's run is asked after: was it approved for its environment
    assert len(made) == (4 if gate == "gpu" else 3) and any("actions/runs/99/approvals" in m for m in made) == (
        gate == "gpu"
    )
    body = (tmp_path / "body.md").read_text().splitlines()
    assert body[0] == (GPU_MARKER if gate == "gpu" else MARKER)
    assert body[1].startswith(f"**{gate.upper()} gate") and "REGRESSION" in body[3]
    assert body[-1].endswith(f"on commit {HEAD_SHA}")  # a comment left from an earlier commit reads as such


@pytest.mark.parametrize(
    "approvals",
    [
        pytest.param([], id="never approved"),
        pytest.param([{**APPROVED[0], "state": "rejected"}], id="rejected"),
        pytest.param([{**APPROVED[0], "environments": [{"name": "other"}]}], id="another environment"),
    ],
)
def test_rehearsal_a_gpu_verdict_from_a_run_not_approved_for_the_gpu_environment_gets_no_comment(tmp_path, approvals):
    """A pull request names its own workflows: a fork's workflow named as the GPU gate, on a hosted runner with no
    environment, would post a GPU verdict no maintainer approved. The comment job asks the run's review history
    and posts the GPU gate's verdict only where the run was approved for the gpu-runner environment."""
    ran, made = _rehearse_the_comment(tmp_path, [[]], gate="gpu", approvals=approvals)
    assert ran.returncode != 0 and "was not approved for the gpu-runner environment" in ran.stdout
    assert len(made) == 2 and "actions/runs/99/approvals" in made[1]  # asked, wrote nothing


def test_rehearsal_the_comment_job_refuses_a_pull_request_whose_head_the_gate_did_not_run_on(tmp_path):
    """The number comes from the pull request's own code: a fork's gate naming another pull request (whose head is
    another commit) gets no comment there."""
    ran, made = _rehearse_the_comment(tmp_path, [[_comment(4242, "github-actions[bot]")]], pr_head="c" * 40)
    assert ran.returncode != 0 and "not the commit the gate ran on" in ran.stdout
    assert made == ["api repos/o/r/pulls/17 --jq .head.sha"]  # asked who it is, wrote nothing


def test_the_comment_job_skips_a_cancelled_gate_and_runs_one_at_a_time_per_gate_and_branch():
    """One comment job at a time per gate and branch, so two runs never both create a comment; per gate too, since
    a group keeps one waiting job and cancels it when another arrives: a CPU gate's comment job arriving must not
    cancel the GPU gate's waiting one (whose verdict no later run would post)."""
    job = _load("gate-comment.yml")["jobs"]["comment"]
    assert "github.event.workflow_run.conclusion != 'cancelled'" in job["if"]
    assert "github.event.workflow_run.conclusion != 'skipped'" in job["if"]  # the GPU gate without its label
    group = job["concurrency"]["group"]
    assert "workflow_run.head_branch" in group and "workflow_run.workflow_id" in group


def test_rehearsal_the_comment_job_refuses_a_pull_request_number_that_is_not_a_number(tmp_path):
    (tmp_path / "artifact" / "gate").mkdir(parents=True)
    (tmp_path / "artifact" / "gate" / "pr-number").write_text("17; rm -rf /\n")
    bin_dir, calls = _fake_gh(tmp_path, {})
    step = _step(_load("gate-comment.yml"), "comment", "Post or update")
    env = {"REPO": "o/r", "RUN_URL": "u", "HEAD_SHA": HEAD_SHA, "MARKER": MARKER, "TITLE": "CPU gate"}
    env |= {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    ran = _bash(step["run"], tmp_path, env)
    assert ran.returncode != 0 and "not a pull request number" in ran.stdout and not calls.exists()


def test_rehearsal_the_fan_in_merges_two_machines_folders_into_one_site(tmp_path):
    """The publish fan-in: each leg uploads its results/ (one machine folder each) and its capability matrix
    (reports/capabilities/<machine>.json); download-artifact with merge-multiple lays each kind into one folder
    (the results in push-results, which commits them for build-site; the matrices in build-site, over those
    committed there); the site built from them shows both machines and both matrices."""
    from reports.site import build_site

    fixture = ROOT / "tests" / "fixtures" / "report_results"
    machines = [p.name for p in fixture.iterdir() if p.is_dir()]
    assert len(machines) == 2
    merged, capabilities = tmp_path / "results", tmp_path / "reports" / "capabilities"
    capabilities.mkdir(parents=True)
    (capabilities / f"{machines[0]}.json").write_text("{}")  # the checkout's, older: the leg's replaces it
    for machine in machines:  # one leg's artifacts each, then merged as download-artifact does
        leg = tmp_path / f"results-{machine}"
        shutil.copytree(fixture / machine, leg / machine)
        shutil.copy(fixture / "benchmarks.json", leg / "benchmarks.json")
        shutil.copytree(leg, merged, dirs_exist_ok=True)
        matrix = tmp_path / f"capabilities-{machine}"
        matrix.mkdir()
        record = {"machine": machine, "commit": "a" * 40, "torch": "2.13.0", "date": "2026-11-25"}
        record |= {"capabilities": ["vmap"], "cells": {"cpu": {"native": {"vmap": "works"}}}}
        (matrix / f"{machine}.json").write_text(json.dumps(record))
        shutil.copytree(matrix, capabilities, dirs_exist_ok=True)
    build_site(merged, tmp_path / "site", capabilities_dir=capabilities)
    page = (tmp_path / "site" / "machines.html").read_text()
    assert all(machine in page for machine in machines)
    overview = (tmp_path / "site" / "index.html").read_text()
    assert all(f"<b>cpu</b> on {machine}: commit <code>aaaaaaaa</code>" in overview for machine in machines)


@pytest.mark.parametrize("earlier", [False, True])
def test_rehearsal_the_fan_in_commits_results_alone_to_the_results_branch(tmp_path, earlier):
    """The commit step, run in a checkout of the sources (workflows included, which the job's token may not push)
    with the merged results/ in it: the benchmark-results branch gets a commit whose tree is results/ alone, without
    what .gitignore leaves out, on top of the branch's earlier commit when there is one."""
    origin, repo = _origin_with_sources(tmp_path, "repo")
    if earlier:  # a results-only commit on the branch, as a previous run left it
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "results")
        _git(repo, "push", "-q", "origin", "HEAD:refs/heads/benchmark-results")
        _git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "results" / "machine").mkdir(parents=True)
    (repo / "results" / "machine" / "run.json").write_text("{}")
    (repo / "results" / "machine" / "run.json.tmp").write_text("{")  # a replacement cut off by a kill
    (repo / "results" / "benchmarks.json").write_text("{}")
    step = _step(_load("publish.yml"), "push-results", "Keep the results")
    env = {"RUNNER_TEMP": str(tmp_path), "GITHUB_SHA": "c" * 40, "HOME": str(tmp_path)}
    ran = _bash(step["run"], repo, env)
    assert ran.returncode == 0, ran.stderr
    files = _git(origin, "ls-tree", "-r", "--name-only", "benchmark-results").splitlines()
    assert sorted(files) == ["results/benchmarks.json", "results/machine/run.json"]
    parents = _git(origin, "rev-list", "--parents", "-n", "1", "benchmark-results").split()[1:]
    assert len(parents) == (1 if earlier else 0)
    assert _git(repo, "status", "--porcelain", "--untracked-files=no") == ""  # the checkout's index untouched


def _run_job(job: str, checkout: Path, artifacts: Path, env: dict, until: str | None = None) -> None:
    """publish.yml's ``job`` in ``checkout`` (a clone of the origin, as actions/checkout leaves it), up to the step
    named ``until``: each script in turn, and each download of the run's artifacts as download-artifact does it
    with ``merge-multiple`` (every artifact matching the pattern, from ``artifacts/<name>``, into one folder)."""
    publish = _load("publish.yml")
    for step in publish["jobs"][job]["steps"]:
        if until and step.get("name", "").startswith(until):
            return
        if step.get("uses", "").startswith("actions/download-artifact"):
            for artifact in sorted(artifacts.glob(step["with"]["pattern"])):
                shutil.copytree(artifact, checkout / step["with"]["path"], dirs_exist_ok=True)
        elif step.get("uses", "").startswith("actions/checkout") and "ref" in step.get("with", {}):
            origin = _git(checkout, "remote", "get-url", "origin")  # a second checkout: that ref, into its path
            _git(checkout, "clone", "-q", "-b", step["with"]["ref"], origin, step["with"]["path"])
        elif "run" in step:
            ran = _bash(step["run"], checkout, env)
            assert ran.returncode == 0, (job, step.get("name"), ran.stderr)
        else:
            assert step["uses"].split("@")[0] in {"actions/checkout", "actions/setup-python"}, step["uses"]


def _leg(artifacts: Path, run: str, machine: str) -> None:
    """One leg's two artifacts, as publish.yml's legs upload them: results/ and its capability matrix."""
    results = artifacts / run / f"results-{machine}"
    (results / machine).mkdir(parents=True)
    (results / machine / f"{run}.json").write_text("{}")
    (results / machine / f"{run}.json.tmp").write_text("{")  # a replacement cut off by a kill
    (results / "benchmarks.json").write_text("{}")
    capabilities = artifacts / run / f"capabilities-{machine}"
    capabilities.mkdir(parents=True)
    (capabilities / f"{machine}.json").write_text(json.dumps({"machine": machine, "run": run}))


def test_rehearsal_push_results_merges_onto_the_newest_commit_and_the_site_is_built_from_the_branch(tmp_path):
    """Two runs of publish.yml's fan-in in the order their shared lane lets them: run A's push-results, run B's
    push-results (queued while A's ran), then A's build-site. Each push-results, git alone in a fresh checkout,
    adds its legs' results to the branch's newest commit, so B's keeps A's and the earlier runs' results; build-site
    takes results/ from the branch (its own run's commit and any later one) and its own legs' capability matrices
    over the checkout's, and only then builds the site."""
    origin, sources = _origin_with_sources(
        tmp_path, "sources", {"reports/capabilities/x86.json": '{"committed": true}'}
    )
    # an earlier run's results-only commit on the branch
    _git(sources, "checkout", "-q", "--orphan", "earlier")
    _git(sources, "rm", "-q", "-r", "--cached", ".")
    (sources / "results" / "gpu").mkdir(parents=True)
    (sources / "results" / "gpu" / "earlier.json").write_text("{}")
    _git(sources, "add", "results")
    _git(sources, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "earlier results")
    _git(sources, "push", "-q", "origin", "earlier:refs/heads/benchmark-results")
    earlier = _git(origin, "rev-parse", "benchmark-results")
    artifacts = tmp_path / "artifacts"
    _leg(artifacts, "A", "x86")
    _leg(artifacts, "B", "arm")

    def checkout(name: str) -> tuple[Path, dict]:
        work = tmp_path / name
        _git(tmp_path, "clone", "-q", "-b", "main", str(origin), str(work))
        (tmp_path / f"{name}-temp").mkdir()
        return work, {"RUNNER_TEMP": str(tmp_path / f"{name}-temp"), "GITHUB_SHA": "c" * 40, "HOME": str(tmp_path)}

    for run in ("A", "B"):
        work, env = checkout(f"push-{run}")
        _run_job("push-results", work, artifacts / run, env)
    files = sorted(_git(origin, "ls-tree", "-r", "--name-only", "benchmark-results").splitlines())
    assert files == ["results/arm/B.json", "results/benchmarks.json", "results/gpu/earlier.json", "results/x86/A.json"]
    history = _git(origin, "rev-list", "--first-parent", "benchmark-results").splitlines()
    assert len(history) == 3 and history[-1] == earlier  # B's commit on A's on the earlier one

    work, env = checkout("build-A")
    _run_job("build-site", work, artifacts / "A", env, until="Build the site")
    shown = sorted(str(path.relative_to(work / "results")) for path in (work / "results").rglob("*.json"))
    assert shown == ["arm/B.json", "benchmarks.json", "gpu/earlier.json", "x86/A.json"]
    matrix = json.loads((work / "reports" / "capabilities" / "x86.json").read_text())
    assert matrix == {"machine": "x86", "run": "A"}  # the leg's, over the one committed in the sources


def test_make_refuses_a_bench_flag_it_cannot_read_and_leaves_other_targets_alone():
    def dry_run(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "-n", *arguments], cwd=ROOT, capture_output=True, text=True)

    refused = dry_run("bench", "RESUME=yes")
    assert refused.returncode != 0 and "RESUME=yes: must be 1, 0 or empty" in refused.stderr
    assert dry_run("test", "THP=always").returncode == 0  # another tool's THP in the environment
    assert dry_run("bench-pytest", "THP=always").returncode == 0  # reads neither


def test_make_says_which_status_the_gate_gave_before_its_own_2():
    """GNU make reports every failing recipe as its own status 2; the gate's 1 or 2 is printed and kept in the
    verdict file, which the workflow exits with (``regress.yml``)."""
    recipe = (ROOT / "Makefile").read_text().split("\nregress:", 1)[1].split("\n\n", 1)[0]
    assert "status=$$?" in recipe and "the gate exited $$status" in recipe and "exit $$status" in recipe


@pytest.mark.parametrize("selection", ["'native', 'example', 'cpu'", "allcnnc-conv2|allcnnc-conv3", "a b"])
def test_a_bench_selection_reaches_the_command_as_typed(selection):
    """``make bench BENCH=...``: quotes (one cell of asv's names), a regex's ``|`` and spaces survive the recipe."""
    shown = 'show-flags: ; @printf "%s\\n" $(BENCH_FLAGS)'
    ran = subprocess.run(
        ["make", "--no-print-directory", "--eval", shown, "show-flags", f"BENCH={selection}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    flags = ran.stdout.splitlines()
    assert flags[flags.index("--bench") + 1] == selection, ran.stdout + ran.stderr
    recipe = (ROOT / "Makefile").read_text().split("\nregress:", 1)[1].split("\n\n", 1)[0]
    assert '--bench "$$BENCH"' in recipe  # the gate's selection too


def test_rehearsal_the_publish_job_builds_the_site_without_torch(tmp_path):
    """build-site installs the project without its dependencies and then its ``site`` extra, which holds no torch
    (the reports import none: ``tests/test_reports.py`` builds the site with torch unimportable)."""
    run = _step(_load("publish.yml"), "build-site", "Build the site")["run"]
    assert "make" not in run and "pip install --no-deps -e ." in run and "unfold_bench.cli report" in run
    requirements = run.split("python -m pip install --no-deps -e .\n", 1)[1].split("python -m pip install -r")[0]
    ran = _bash(requirements.replace("site-requirements.txt", str(tmp_path / "req.txt")), ROOT, {})
    assert ran.returncode == 0, ran.stderr
    packages = {re.split(r"[<>=\[; ]", line)[0].lower() for line in (tmp_path / "req.txt").read_text().split()}
    assert {"asv", "asv_runner", "scipy", "pandas", "plotly", "jinja2"} <= packages and "torch" not in packages


def test_the_gate_workflow_a_user_copies_is_a_valid_workflow_that_runs_the_gate_on_their_repository(tmp_path):
    """docs/your-own-unfold.md's snippet: GitHub's schema, least permissions, expressions only through the
    environment (never pasted into a script), and a gate command line the suite accepts."""
    snippet = _snippet()
    workflow = tmp_path / "unfold-gate.yml"
    workflow.write_text(snippet)
    checker = Path(sys.executable).parent / "check-jsonschema"
    checked = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.github-workflows", str(workflow)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    parsed = yaml.safe_load(snippet)
    assert parsed["permissions"] == {"contents": "read"}
    (gate,) = [step for step in parsed["jobs"]["gate"]["steps"] if step.get("name") == "Gate"]
    assert "${{" not in gate["run"]
    (line,) = [line for line in gate["run"].replace("\\\n", " ").splitlines() if "unfold-bench regress" in line]
    arguments = line.split("unfold-bench", 1)[1].split()
    options = {"--repo", "--strategy", "--bench", "--verdict-file"}
    assert options <= set(arguments)
    usage = subprocess.run(
        [sys.executable, "-m", "unfold_bench.cli", "regress", "--help"], capture_output=True, text=True, cwd=ROOT
    ).stdout
    assert all(option in usage for option in options)
