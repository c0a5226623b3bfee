"""The cost check: a fresh clone's environment, its steps timed in order, and the record it writes."""

from __future__ import annotations

import os
import sys

from unfold_bench.commands.cost import CACHES, LEFT_OUT, Step, fresh_environment, report, run_steps, summary


def test_a_fresh_clone_runs_without_the_callers_selection_and_with_empty_caches(tmp_path):
    environ = {name: "set" for name in LEFT_OUT} | {"PATH": "/usr/bin", "TORCHINDUCTOR_CACHE_DIR": "/warm/cache"}
    env = fresh_environment(tmp_path, environ)
    assert not set(LEFT_OUT) & set(env)
    assert env["PATH"] == "/usr/bin"
    for variable in CACHES:
        cache = env[variable]
        assert cache.startswith(str(tmp_path)) and os.path.isdir(cache) and not os.listdir(cache)


def test_the_steps_run_in_order_in_the_clone_and_stop_at_the_first_that_fails(tmp_path, capsys):
    steps = (
        ("first", (sys.executable, "-c", "import os; print(os.getcwd())")),
        ("second", (sys.executable, "-c", "import sys; print('broken'); sys.exit(3)")),
        ("never", (sys.executable, "-c", "print('ran')")),
    )
    done = run_steps(tmp_path, "quick", dict(os.environ), steps)
    assert [(s.name, s.status) for s in done] == [("first", 0), ("second", 3)]
    assert done[0].output.strip() == str(tmp_path)
    assert "broken" in done[1].output and "broken" in capsys.readouterr().out  # kept and shown as it came


def test_the_readme_steps_are_set_up_then_make_bench_each_given_the_profile(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    make = bin_dir / "make"  # a make that says what it was asked
    make.write_text('#!/bin/sh\necho "make $*"\n')
    make.chmod(0o755)
    env = dict(os.environ) | {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = run_steps(tmp_path, "full", env)
    assert [(s.name, s.output.strip()) for s in done] == [
        ("set-up", "make venv cpp PROFILE=full"),
        ("make bench", "make bench PROFILE=full"),
    ]


def test_the_record_sums_the_steps_only_where_every_step_finished():
    ok = [Step("set-up", ("make", "venv"), 0, 60.0, "built\n"), Step("make bench", ("make", "bench"), 0, 120.0, "x")]
    text = report(ok, "unfold-bench cost --profile quick: machine, commit abc, date", planned=2)
    lines = text.splitlines()
    assert lines[0] == "unfold-bench cost --profile quick: machine, commit abc, date"
    assert lines[1] == "set-up (make venv): exit 0 in 1.0 min"
    assert "fresh clone to the end of make bench: 3.0 min" in lines
    assert "## make bench (make bench)" in lines and "built" in lines
    failed = report(ok[:1] + [Step("make bench", ("make", "bench"), 2, 30.0, "")], "p", planned=2)
    assert "stopped: make bench failed after 1.5 min; no cost measured" in failed
    assert "fresh clone to the end" not in failed
    short = report(ok[:1], "p", planned=2)
    assert "no cost measured" in short
    assert report(ok, "p", planned=2).startswith(summary(ok, "p", planned=2) + "\n\n## set-up")
