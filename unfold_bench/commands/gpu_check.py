"""The prepared GPU check: what a task lent a GPU machine runs, as one command of at most eight minutes.

    unfold-bench gpu-check prepare                # here: wheels, commit manifest, the device call
    unfold-bench gpu-check run --dry-run          # here: what it would run; are the carried files ready
    python3 -m unfold_bench.commands.gpu_check run --out "$OUT"  # there: the check itself (the command prepare prints)
    unfold-bench gpu-check import DIR             # here: what came back, into results/ and capabilities

The lent machine has torch with CUDA, Triton, pytest and pandas but neither asv, unfoldNd nor plotly, cannot
fetch anything, and receives the working tree without its git history. ``prepare`` therefore puts into
``.gpu-check/`` (ignored by git, carried by the device call) the wheels of the missing packages at the versions
installed here, a manifest of the commit, and an asv configuration whose repository is that manifest
(``unfold_bench.carried_repo``), so asv records the results under this commit as a run here would.

``run`` takes its steps in order (the environment, the CUDA tests, the capability matrix on ``cuda``, the quick
profile's CUDA cells, then the full profile's All-CNN-C layers while the budget lasts), each in its own process
session with a share of the budget; everything comes back under ``$OUT``. The steps, what each measures and what
comes back: docs/gpu-check.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # not benchmarks.trees.ROOT: this runs before the project is importable
CARRIED_DIR = ROOT / ".gpu-check"
WHEELS = CARRIED_DIR / "wheels"
MANIFEST = CARRIED_DIR / "manifest.json"
ASV_CONFIG = CARRIED_DIR / "asv.conf.json"
# benchmarks.machine.HOST_VARIABLE there: each loan is a new VM, and one card's results must form one series
HOST_LABEL = "lent"
BUDGET_S = 480.0  # the most the check's steps may take: the device call's limit less MARGIN_S
MARGIN_S = 90.0  # the wheels' install and writing $OUT
DEVICE_TIMEOUT_S = round(BUDGET_S + MARGIN_S)  # the device call's timeout_s

# The packages the check needs that the lent machines' image lacks (device/KINDS.md), carried as wheels at the
# versions installed here: asv and its requirements, unfoldNd (the onehot strategy), plotly and expecttest
# (imported when the test modules are collected).
CARRIED = (
    "asv",
    "asv_runner",
    "json5",
    "build",
    "virtualenv",
    "distlib",
    "platformdirs",
    "python_discovery",
    "importlib_metadata",
    "lazy_importer",
    "pympler",
    "unfoldNd",
    "plotly",
    "expecttest",
)
# What the image has, as read on 2026-11-17 (device/KINDS.md); checked against the carried wheels' requirements.
DEVICE_PACKAGES = frozenset(
    """accelerate aiohttp anyio attrs build certifi charset-normalizer click cloudpickle cmake colorama contourpy
    coverage cycler cython execnet filelock fonttools fsspec h11 httpx hypothesis idna iniconfig jinja2 joblib
    kiwisolver lxml markdown markupsafe matplotlib mpmath narwhals networkx ninja numpy packaging pandas pillow pip
    pluggy psutil py-cpuinfo pybind11 pygments pyparsing pytest pytest-benchmark pytest-cov pytest-mock
    pytest-timeout pytest-xdist python-dateutil pyyaml requests rich scipy setuptools six sympy tabulate torch
    tqdm triton typing-extensions urllib3 wheel zipp pyproject-hooks""".split()
)
DEVICE_PYTHON = "3.12"  # the image's python3 (device/KINDS.md)
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


# The CUDA cells each benchmark step selects (``unfold-bench bench --bench``, searched in asv's cell names): the quick
# profile's strategies and bounds (not the cold compiles: tens of seconds each), and at batch 256 the All-CNN-C
# layers' forward time with the bounds it is read against.
def cell_selections() -> dict[str, str]:
    """The ``--bench`` regex of each benchmark step, over the strategies that declare ``cuda``: the others' cells
    would only start a process to be skipped."""
    from impls import STRATEGIES

    names = "|".join(re.escape(n) for n, s in STRATEGIES.items() if "cuda" in s.devices)
    return {
        "quick": rf"^(?:unfold\.Quick\.\w+\('(?:{names})', |bounds\.Quick\.\w+\().*'cuda'\)$",
        "full": rf"^(?:unfold\.Full\.time_forward\('(?:{names})', |bounds\.Full\.time_(?:copy|fill|fresh_output)\()"
        r".*'allcnnc-conv\d', 'cuda'\)$",
    }


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned() -> dict[str, str]:
    """Each carried package at the version installed here (a missing one is an error naming it)."""
    versions = {}
    for name in CARRIED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"gpu-check: {name} is not installed here (make venv installs it)") from None
    return versions


def unmet_requirements() -> list[str]:
    """The carried packages' requirements, on the device's Python and Linux, that neither the image nor the carried
    wheels provide: each would fail to import there, since the wheels are installed without dependencies."""
    from packaging.requirements import Requirement

    environment = {"python_version": DEVICE_PYTHON, "python_full_version": f"{DEVICE_PYTHON}.0", "extra": ""}
    provided = DEVICE_PACKAGES | {_normalise(n) for n in CARRIED}
    unmet = []
    for name in CARRIED:
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            if _normalise(requirement.name) not in provided:
                unmet.append(f"{name} requires {requirement}")
    return unmet


def _wheel_present(name: str, version: str, files: list[str]) -> bool:
    prefix = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"
    return any(f.lower().startswith(prefix) for f in files)


def _shown(path: Path) -> str:
    """``path`` relative to the repository when inside it (as the device call names it)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def missing_wheels() -> list[str]:
    files = [p.name for p in WHEELS.glob("*.whl")] if WHEELS.is_dir() else []
    return [f"{n}=={v}" for n, v in pinned().items() if not _wheel_present(n, v, files)]


def download_wheels() -> None:
    """pip download of every carried package for the device's Python and platform, without dependencies."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", DEVICE_PYTHON, "--implementation", "cp", *platforms, "-d", str(WHEELS)]
    subprocess.run([*command, *(f"{n}=={v}" for n, v in pinned().items())], check=True)


def write_manifest(commit: str | None = None) -> dict:
    """The commit manifest and the asv configuration that reads it (``unfold_bench.carried_repo``)."""
    from asv import util

    from benchmarks.trees import git

    commit = commit or git("rev-parse", "HEAD")
    manifest = {
        "commit": commit,
        "date": int(git("show", "-s", "--format=%ct", commit)) * 1000,
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "prepared": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }
    MANIFEST.parent.mkdir(parents=True, exist_ok=True)
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    # asv resolves the configuration's paths from the folder it is in (it changes directory there first)
    config = util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    tree = CARRIED_DIR.parent  # the carried folder travels at the root of the tree

    def from_config(path: Path) -> str:
        return os.path.relpath(path, ASV_CONFIG.parent)

    for key in ("benchmark_dir", "results_dir", "env_dir", "html_dir"):
        config[key] = from_config(tree / config[key])
    # the plugin is imported by asv (a leading dot: as a module, not one of asv's own) from the project's path
    config.update(dvcs="carried", repo=from_config(MANIFEST), plugins=[".unfold_bench.carried_repo"])
    ASV_CONFIG.write_text(json.dumps(config, indent=1) + "\n")
    return manifest


def device_command(budget: float = BUDGET_S) -> str:
    """The device call's command: install the carried wheels, then run the check."""
    install = (
        "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "
        f"{_shown(WHEELS)}/*.whl"
    )
    return (
        f'{install} && export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 || exit 3; '
        f'python3 -m unfold_bench.commands.gpu_check run --out "$OUT" --budget {budget:.0f}'
    )


def prepare(args: argparse.Namespace) -> int:
    manifest = write_manifest()
    print(f"manifest: commit {manifest['commit'][:8]} ({manifest['branch']}), {_shown(MANIFEST)}")
    if manifest["dirty"]:
        print("warning: uncommitted changes travel with the tree but the results name the commit: commit first")
    if not args.no_download:
        download_wheels()
    unmet, missing = unmet_requirements(), missing_wheels()
    for line in unmet + [f"no wheel for {m} in {_shown(WHEELS)}" for m in missing]:
        print(f"problem: {line}")
    size = sum(p.stat().st_size for p in WHEELS.glob("*.whl")) if WHEELS.is_dir() else 0
    print(f"wheels: {len(list(WHEELS.glob('*.whl'))) if WHEELS.is_dir() else 0} files, {size / 2**20:.1f} MiB")
    command = device_command()
    (MANIFEST.parent / "command.txt").write_text(command + "\n")
    print("the device call (tool `run`):")
    print(json.dumps({"command": command, "carry": [".gpu-check"], "timeout_s": DEVICE_TIMEOUT_S}, indent=1))
    return 1 if unmet or missing else 0


@dataclass
class Step:
    """One step of the check: a command, its share of what is left of the budget, and whether it needs CUDA."""

    name: str
    command: list[str]
    share: float  # of the budget left when the step starts
    minimum_s: float  # not started with less left than this
    env: dict[str, str] | None = None


def steps(out: Path, commit: str, python: str = "python3") -> list[Step]:
    bench = [python, "-m", "unfold_bench.commands.bench", "--config", _shown(ASV_CONFIG), "--commit", commit]
    bench += ["--summaries", str(out / "summaries")]
    workers = str(max(1, min(8, (os.cpu_count() or 2) // 2)))
    # the capability cells on cuda are the next step's matrix (it fails on an undeclared failure), not checked twice
    pytest = [python, "-m", "pytest", "-m", "cuda", "-k", "not test_every_capability", "-n", workers, "-q"]
    pytest += ["-p", "no:cacheprovider", "tests"]
    cells = cell_selections()
    return [
        Step("environment", [python, "-c", _ENVIRONMENT_REPORT], share=0.05, minimum_s=5),
        Step("cuda tests", [*pytest, "--junitxml", str(out / "pytest-cuda.xml")], share=0.35, minimum_s=60),
        Step(
            "capabilities",
            [
                python,
                "-m",
                "unfold_bench.commands.capabilities",
                "--devices",
                "cuda",
                "--commit",
                commit,
                "--out",
                str(out),
            ],
            share=0.25,
            minimum_s=30,
        ),
        Step("quick profile, cuda", [*bench, "--profile", "quick", "--bench", cells["quick"]], share=0.6, minimum_s=60),
        Step("full profile, All-CNN-C", [*bench, "--profile", "full", "--bench", cells["full"]], share=1, minimum_s=60),
    ]


_ENVIRONMENT_REPORT = """
import shutil, subprocess, sys, torch
print(f"python {sys.version.split()[0]}; torch {torch.__version__}; CUDA {torch.version.cuda}")
if not torch.cuda.is_available():
    sys.exit("no CUDA device: the check needs one")
print(f"device: {torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB")
from importlib.metadata import version
import asv, unfoldNd, plotly, triton  # noqa: the carried wheels and the image's Triton import
print(", ".join(f"{n} {version(n)}" for n in ("asv", "unfoldNd", "plotly", "triton", "pytest", "pandas")))
if shutil.which("nvidia-smi"):
    subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv"])
"""


def _run_step(step: Step, seconds: float, log: Path, env: dict[str, str]) -> tuple[str, float]:
    """Run ``step`` for at most ``seconds``, its output appended to ``log``; its outcome and duration."""
    from benchmarks.process_guard import kill_session

    started = time.monotonic()
    with log.open("ab") as output:
        output.write(f"\n=== {step.name}: {shlex.join(step.command)} (at most {seconds:.0f} s)\n".encode())
        output.flush()
        process = subprocess.Popen(
            step.command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            status = process.wait(timeout=seconds)
            outcome = "ok" if status == 0 else f"exit {status}"
        except subprocess.TimeoutExpired:
            kill_session(process.pid)
            process.wait()
            outcome = f"stopped at {seconds:.0f} s (what it finished is kept)"
    return outcome, time.monotonic() - started


def _tail(path: Path, lines: int) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def dry_run(args: argparse.Namespace) -> int:
    """What ``run`` would do, and whether the carried files are ready: checked without CUDA."""
    from benchmarks.profiles import FULL, QUICK
    from benchmarks.runner import plan
    from benchmarks.trees import git

    problems = []
    if MANIFEST.exists():
        manifest = json.loads(MANIFEST.read_text())
        head = git("rev-parse", "HEAD") if (ROOT / ".git").exists() else manifest["commit"]
        if manifest["commit"] != head:
            problems.append(f"the manifest names {manifest['commit'][:8]}, HEAD is {head[:8]}: prepare again")
        commit = manifest["commit"]
    else:
        problems.append(f"no {_shown(MANIFEST)}: run `make gpu-check-prepare`")
        commit = "<commit>"
    problems += unmet_requirements()
    problems += [f"no wheel for {m} in {_shown(WHEELS)}: run `make gpu-check-prepare`" for m in missing_wheels()]
    out = Path(args.out or "$OUT")
    print(f"the device call: {device_command(args.budget)}")
    for step in steps(out, commit):
        print(
            f"step {step.name} ({step.share:.0%} of what is left, at least {step.minimum_s:.0f} s): "
            f"{shlex.join(step.command)[:160]}"
        )
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "cuda", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    counted = re.search(r"(\d+)(?:/\d+)? tests? collected", collected.stdout)
    if collected.returncode != 0 or counted is None:
        problems.append(f"pytest could not collect the CUDA tests: {collected.stdout[-400:]}")
    else:
        print(f"cuda tests: {counted.group(1)} (skipped here: no CUDA device)")
    for profile in (QUICK, FULL):
        cells = cell_selections()[profile.name]
        chunks = plan(profile, cells)
        count = sum(len(c.cells) for c in chunks)
        print(f"{profile.name} profile: {count} CUDA cells in {len(chunks)} asv runs")
        if not count:
            problems.append(f"the {profile.name} profile's selection {cells!r} matches no cell")
    for problem in problems:
        print(f"problem: {problem}")
    print("dry run: " + ("ready to travel" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        return dry_run(args)
    if not args.out:
        raise SystemExit("gpu-check run: --out is required (the device's $OUT)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    commit = json.loads(MANIFEST.read_text())["commit"]
    log = out / "gpu-check.log"
    from benchmarks.machine import HOST_VARIABLE

    env = {**os.environ, HOST_VARIABLE: HOST_LABEL, "PYTHONUNBUFFERED": "1"}
    deadline = time.monotonic() + args.budget
    table = []
    for step in steps(out, commit, sys.executable):
        left = deadline - time.monotonic()
        if left < step.minimum_s:
            table.append((step.name, f"not started: {left:.0f} s left", 0.0))
            continue
        outcome, seconds = _run_step(step, max(step.minimum_s, left * step.share), log, env)
        table.append((step.name, outcome, seconds))
        print(f"--- {step.name}: {outcome} in {seconds:.0f} s\n{_tail(log, 8)}", flush=True)
        if step.name == "environment" and outcome != "ok":
            break  # no CUDA or a missing package: nothing else can run
    collected = _collect(out)
    print("\nstep | outcome | seconds")
    for name, outcome, seconds in table:
        print(f"{name} | {outcome} | {seconds:.0f}")
    print(f"returned under $OUT: {', '.join(collected)}")
    return 0 if all(outcome == "ok" for _, outcome, _ in table) else 1


def _collect(out: Path) -> list[str]:
    """The GPU machine's asv results and the run's summaries, placed under ``out`` as they come back (at most two
    folders down, at most eight files)."""
    from benchmarks.machine import HOST_VARIABLE, machine_name

    os.environ[HOST_VARIABLE] = HOST_LABEL
    machine = machine_name()
    source = ROOT / "results" / machine
    if source.is_dir():
        shutil.copytree(source, out / "results" / machine, dirs_exist_ok=True)
    summaries = sorted((out / "summaries").glob("*.txt")) if (out / "summaries").is_dir() else []
    if summaries:
        (out / "summary.txt").write_text("\n\n".join(p.read_text() for p in summaries))
    shutil.rmtree(out / "summaries", ignore_errors=True)
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def import_results(args: argparse.Namespace) -> int:
    """Copy what a device call brought back into the tree: asv results with the records kept beside them (the
    catalogue, the run level, the replicates a cell lost: ``*.jsonl``) and the capability matrix."""
    source, into = Path(args.directory), Path(args.into)
    copied = []
    for machine_dir in sorted((source / "results").glob("*")) if (source / "results").is_dir() else []:
        target = into / "results" / machine_dir.name
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted([*machine_dir.glob("*.json"), *machine_dir.glob("*.jsonl")]):
            shutil.copy2(path, target / path.name)
            copied.append(str((target / path.name).relative_to(into)))
    for path in source.glob("*.json"):
        record = json.loads(path.read_text())
        if "capabilities" in record and "machine" in record:
            target = into / "reports" / "capabilities" / f"{record['machine']}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied.append(str(target.relative_to(into)))
    if not copied:
        print(f"gpu-check import: no results or capability matrix under {source}")
        return 1
    print("imported: " + ", ".join(copied))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from unfold_bench.common_args import finite_float  # as every command's number options are checked

    # common_args.command_parser's settings, not the function: this runs before the project's dependencies are
    # installed (ROOT above), and common_args imports them
    parser = argparse.ArgumentParser(
        prog="unfold-bench gpu-check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    prepare_parser = commands.add_parser(
        "prepare", allow_abbrev=False, help="wheels, commit manifest and the device call, here"
    )
    prepare_parser.add_argument("--no-download", action="store_true", help="write the manifest only")
    run_parser = commands.add_parser(
        "run", allow_abbrev=False, help="the check, on the GPU machine (or --dry-run here)"
    )
    run_parser.add_argument("--out", help="where what comes back is written (the device's $OUT)")
    run_parser.add_argument(
        "--budget", type=finite_float, default=BUDGET_S, help=f"seconds in all (default {BUDGET_S:.0f})"
    )
    run_parser.add_argument("--dry-run", action="store_true", help="say what would run; check the carried files")
    import_parser = commands.add_parser(
        "import", allow_abbrev=False, help="what came back, into results/ and reports/capabilities/"
    )
    import_parser.add_argument("directory", help="the device call's files_at")
    import_parser.add_argument("--into", default=str(ROOT), help="the repository to copy into (default: this one)")
    args = parser.parse_args(argv)
    if args.command == "run" and not 1 <= args.budget <= BUDGET_S:
        parser.error(
            f"--budget {args.budget:g}: must be 1 to {BUDGET_S:g} seconds (the device call's limit is "
            f"{DEVICE_TIMEOUT_S} s, of which {MARGIN_S:g} s install the wheels and write $OUT)"
        )
    return {"prepare": prepare, "run": run, "import": import_results}[args.command](args)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
