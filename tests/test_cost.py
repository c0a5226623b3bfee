"""The cost check: a fresh clone of HEAD set up and benched by the README's make targets, each step timed, refused
where the caller's environment would make it another run, and the record it writes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from benchmarks.trees import git
from impls.toolchain import COMPILE_CACHE_VARIABLES
from unfold_bench.cli import main
from unfold_bench.commands.cost import TimedStep, fresh_environment, refused_variables, report, run_steps, summary


@pytest.fixture
def fake_make(tmp_path, monkeypatch) -> Path:
    """A ``make`` first on the PATH that says what it was asked, where, and with which caches; it fails with status 2
    where ``$FAKE_MAKE_FAILS`` names its first target."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    make = bin_dir / "make"
    make.write_text(
        "#!/bin/sh\n"
        'echo "make $* in $(pwd) inductor=$TORCHINDUCTOR_CACHE_DIR selection=${UNFOLD_BENCH_SELECTION-unset}"\n'
        '[ "$1" = "${FAKE_MAKE_FAILS-}" ] && exit 2\nexit 0\n'
    )
    make.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return make


def test_a_fresh_clone_runs_without_the_callers_selection_and_with_empty_compile_caches(tmp_path):
    environ = {
        "PATH": "/usr/bin",
        "OMP_NUM_THREADS": "1",  # names the machine: kept
        "TORCHINDUCTOR_CACHE_DIR": "/warm/cache",
        "UNFOLD_BENCH_SELECTION": "conv2",
        "UNFOLD_BENCH_GATE_CACHE": "/warm/verdicts",
        "MAKEFLAGS": "-j4",
        "PYTHONPATH": "/elsewhere",
        "VENV": "/a/warm/venv",
    }
    env = fresh_environment(tmp_path / "caches", environ)
    assert env["PATH"] == "/usr/bin" and env["OMP_NUM_THREADS"] == "1"
    for name in ("UNFOLD_BENCH_SELECTION", "UNFOLD_BENCH_GATE_CACHE", "MAKEFLAGS", "PYTHONPATH", "VENV"):
        assert name not in env
    assert "TRITON_CACHE_DIR" in COMPILE_CACHE_VARIABLES
    for variable in COMPILE_CACHE_VARIABLES:
        cache = Path(env[variable])
        assert cache.parent == tmp_path / "caches" and cache.is_dir() and not any(cache.iterdir())


def test_a_variable_that_makes_another_run_is_named_and_a_flag_given_as_0_is_not():
    environ = {"BENCH": "conv2", "REGIME": "fresh-pages", "THP": "0", "RESUME": "", "UNFOLD_BENCH_STRATEGIES": "m:f"}
    assert refused_variables(environ) == ["BENCH=conv2", "REGIME=fresh-pages", "UNFOLD_BENCH_STRATEGIES=m:f"]


def test_the_readme_steps_run_in_the_clone_each_given_the_profile_and_stop_at_the_first_that_fails(
    tmp_path, fake_make, monkeypatch, capsys
):
    done = run_steps(tmp_path, "full", dict(os.environ))
    assert [(s.name, s.status, s.output.split(" in ")[0]) for s in done] == [
        ("set-up", 0, "make venv cpp PROFILE=full"),
        ("make bench", 0, "make bench PROFILE=full"),
    ]
    assert f"in {tmp_path} " in done[0].output and "make bench PROFILE=full" in capsys.readouterr().out
    monkeypatch.setenv("FAKE_MAKE_FAILS", "venv")
    assert [(s.name, s.status) for s in run_steps(tmp_path, "quick", dict(os.environ))] == [("set-up", 2)]
    steps = [("killed", (sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))]
    assert run_steps(tmp_path, "quick", dict(os.environ), steps)[0].status == 128 + 15


def test_the_record_sums_the_steps_where_make_bench_ran():
    setup = TimedStep("set-up", ("make", "venv"), 0, 60.0, "built\n")
    bench = TimedStep("make bench", ("make", "bench"), 0, 120.0, "x")
    text = report([setup, bench], "unfold-bench cost --profile quick: machine, commit abc, date")
    lines = text.splitlines()
    assert lines[:2] == [
        "unfold-bench cost --profile quick: machine, commit abc, date",
        "set-up (make venv): exit 0 in 1.0 min",
    ]
    assert "fresh clone to the end of make bench: 3.0 min" in lines
    assert text.startswith(summary([setup, bench], lines[0]) + "\n\n## set-up (make venv)\nbuilt\n\n## make bench")
    failed_cells = summary([setup, TimedStep("make bench", ("make", "bench"), 2, 30.0, "")], "p")
    assert "fresh clone to the end of make bench: 1.5 min (make bench exited 2: see its output)" in failed_cells
    no_setup = summary([TimedStep("set-up", ("make", "venv"), 2, 6.0, "")], "p")
    assert "stopped: set-up failed after 0.1 min; make bench did not run, no cost measured" in no_setup


def test_the_command_clones_head_times_both_steps_and_writes_the_record(tmp_path, fake_make, monkeypatch, capsys):
    monkeypatch.setenv("UNFOLD_BENCH_SELECTION", "conv2")  # an outer run's: left out
    workdir, out = tmp_path / "work", tmp_path / "records" / "cost.txt"
    assert main(["cost", "--workdir", str(workdir), "--out", str(out)]) == 0
    head = git("rev-parse", "HEAD")
    assert git("rev-parse", "HEAD", repo=workdir / "clone") == head
    record = out.read_text()
    assert record.startswith("unfold-bench cost --profile quick: ") and f"commit {head[:8]}, " in record.splitlines()[0]
    assert f"make bench PROFILE=quick in {workdir / 'clone'} inductor={workdir / 'caches'}" in record
    assert "selection=unset" in record and "fresh clone to the end of make bench: " in record
    monkeypatch.setenv("FAKE_MAKE_FAILS", "bench")
    assert main(["cost", "--workdir", str(tmp_path / "again")]) == 2
    assert "(make bench exited 2: see its output)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [("BENCH", "conv2", "BENCH=conv2: the cost check measures"), ("UNFOLD_BENCH_STRATEGIES", "m:f", "m:f")],
)
def test_the_command_refuses_another_run_than_the_readmes_before_any_work(
    tmp_path, fake_make, monkeypatch, capsys, variable, value, named
):
    monkeypatch.setenv(variable, value)
    assert main(["cost", "--workdir", str(tmp_path / "work")]) == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_the_command_refuses_a_workdir_with_something_in_it(tmp_path, capsys):
    (tmp_path / "clone").mkdir()
    assert main(["cost", "--workdir", str(tmp_path)]) == 2
    assert f"--workdir {tmp_path}: not empty" in capsys.readouterr().err
