"""A benchmark run split into per-config asv runs (``benchmarks/runner.py``): what it selects, what a SIGKILL
keeps, that ``--resume`` finishes the rest, and that nothing of a killed run stays running."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from asv.benchmarks import Benchmarks

from benchmarks.kept_samples import CommitResults
from benchmarks.process_guard import kill_session, session_members, stat_fields
from benchmarks.profiles import FULL, QUICK
from benchmarks.runner import (
    PAIRED_REFERENCE,
    PAIRED_SUITE,
    Chunk,
    plan,
    plan_digest,
    remaining_seconds,
    scratch_config,
    suite_cells,
)
from benchmarks.trees import ROOT, git
from benchmarks.unfold import selects_a_compiling_cell
from reports.results import load_results

MARKER = "UNFOLD_BENCH_TEST_RUN"
SELECTION = r"^bounds\.Quick\.time_fill\('(example|allcnnc-conv2)', 'cpu'"  # 2 configs, 1 cell each


def test_a_chunk_regex_selects_exactly_its_cells_as_asv_matches_them():
    chunks = plan(QUICK, "'native'|bounds")
    assert [c.config for c in chunks] == [c.name for c in QUICK.configs()]  # native's ratio to itself is not run
    names = [name for name, _ in suite_cells(QUICK)]
    for chunk in chunks:
        selected = [name for name in names if re.search(chunk.regex(), name)]
        assert selected == list(chunk.cells)
        assert all(f"'{chunk.config}'" in name and ("native" in name or "bounds" in name) for name in selected)
    everything = [name for name, params in suite_cells(FULL) if not _reference_ratio(name, params)]
    planned = [name for c in plan(FULL) if c.replicate in (None, 1) for name in c.cells]
    assert sorted(planned) == sorted(everything)  # no narrowing: every cell, once (a ratio once per replicate)


def test_a_device_left_out_of_the_plan_has_no_cell_in_any_chunk_and_the_others_keep_theirs():
    everything = [name for c in plan(QUICK) for name in c.cells]
    on_cpu = plan(QUICK, devices=["cpu"])
    planned = [name for c in on_cpu for name in c.cells]
    assert planned and not any("'cuda'" in name for name in planned)
    assert planned == [name for name in everything if "'cuda'" not in name]  # the same cells, in the same order
    assert [c.name for c in on_cpu] == [c.name for c in plan(QUICK)]  # a resumed run's ledger names the same chunks
    assert plan(QUICK, "'cuda'", devices=["cpu"]) == []  # bench then says which devices this machine lacks


def test_a_resume_skips_only_the_chunks_of_the_same_plan():
    one, other = plan(QUICK, "'onehot'"), plan(QUICK, "'onehot'|'gather'")
    assert [c.name for c in one] == [c.name for c in other]  # the same chunks by name, with other cells
    assert plan_digest(one) == plan_digest(plan(QUICK, "'onehot'"))
    assert plan_digest(one) != plan_digest(other)  # a strategy registered since: the ledger's key differs


def _reference_ratio(name: str, params: dict) -> bool:
    """A cell of the reference's ratio to itself, which no run measures."""
    return name.startswith(f"{PAIRED_SUITE}.") and params["strategy"] == PAIRED_REFERENCE


def test_the_time_left_costs_each_kind_of_chunk_by_the_chunks_of_its_kind():
    figures = [Chunk(f"config{i}", tuple(f"cell{j}" for j in range(cells))) for i, cells in enumerate((10, 20, 30))]
    replicates = [Chunk("", tuple(f"ratio{j}" for j in range(100)), r, 3) for r in (1, 2, 3)]
    assert remaining_seconds([], [*figures, *replicates]) == 0.0  # nothing measured: nothing to go by
    # before any replicate has run, every chunk is costed per cell at the rate measured so far (1 s a cell)
    assert remaining_seconds([(figures[0], 10.0)], [*figures[1:], *replicates]) == pytest.approx(50 + 300)
    # a replicate is costed as the replicates measured (here 40 s), whatever its number of cells
    measured = [(figures[0], 10.0), (replicates[0], 40.0)]
    assert remaining_seconds(measured, [figures[2], *replicates[1:]]) == pytest.approx(30 + 80)


def test_the_chunk_regex_is_read_by_asv_as_it_is_by_the_plan():
    chunk = plan(QUICK, r"time_fill|native', 'allcnnc-conv3', 'cpu")[2]
    benchmarks = [
        {"name": "bounds.Quick.time_fill", "params": [[repr(c.name) for c in QUICK.configs()], ["'cpu'", "'cuda'"]]},
        {"name": "unfold.Quick.time_forward", "params": [["'native'", "'gather'"], ["'allcnnc-conv3'"], ["'cpu'"]]},
    ]
    conf = SimpleNamespace(benchmark_dir=str(ROOT / "benchmarks"))
    selection = Benchmarks(conf=conf, benchmarks=benchmarks, regex=chunk.regex()).benchmark_selection
    assert chunk.config == "allcnnc-conv3"
    assert selection["bounds.Quick.time_fill"] == [2 * 2, 2 * 2 + 1]  # allcnnc-conv3 on cpu and cuda
    assert selection["unfold.Quick.time_forward"] == [0]


def test_the_forkserver_warms_the_compiler_only_for_a_run_that_selects_a_compiling_cell():
    assert selects_a_compiling_cell(None)  # asv run without the runner: every cell
    assert all(selects_a_compiling_cell(chunk.regex()) for chunk in plan(QUICK))  # make bench: compiled is in each
    assert all(selects_a_compiling_cell(chunk.regex()) for chunk in plan(FULL, "compile_time"))
    assert not any(selects_a_compiling_cell(chunk.regex()) for chunk in plan(QUICK, "native|bounds"))
    assert not selects_a_compiling_cell(SELECTION)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _described(pids: list[int]) -> list[str]:
    """Each process's id, state, parent, session and command line, for a failure message."""
    described = []
    for pid in pids:
        stat = stat_fields(pid)
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat is not None:
            described.append(f"{pid} state {stat[0]} parent {stat[1]} session {stat[3]}: {command}")
    return described


# A session leader that forks a child every millisecond, each child sleeping: members appear while a pass kills
FORKING = (
    "import os, time\n"
    "while True:\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(60)\n"
    "        os._exit(0)\n"
    "    time.sleep(0.001)\n"
)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")
def test_killing_a_session_leaves_no_member_even_while_members_fork():
    leader = subprocess.Popen([sys.executable, "-c", FORKING], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(session_members(leader.pid)) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(session_members(leader.pid)) >= 20
        kill_session(leader.pid)
        assert session_members(leader.pid) == [], _described(session_members(leader.pid))
    finally:
        leader.kill()
        leader.wait()
        kill_session(leader.pid)


def _bench(tmp_path: Path, marker: str, *extra: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "unfold_bench.cli",
        "bench",
        "--config",
        str(scratch_config(tmp_path, ROOT)),
        "--summaries",
        str(tmp_path / "summaries"),  # not the project's reports/summaries
        "--machine",
        "test-kill",
        "--bench",
        SELECTION,
        *extra,
    ]
    env = {**os.environ, MARKER: marker}
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _measured_configs(results_dir: Path) -> set[str]:
    table = load_results(results_dir / "results")
    return set(table[(table.metric == "time_fill") & (table.status == "ok")].config)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")
@pytest.mark.slow(first=True)
def test_a_killed_run_keeps_finished_configs_leaves_no_process_and_resumes(tmp_path):
    marker = f"{MARKER}={uuid.uuid4().hex}"
    run = _bench(tmp_path, marker.split("=")[1])
    lines = []
    for line in run.stdout:  # wait until the first config is saved
        lines.append(line)
        if line.startswith("[ 1/2]"):
            break
    assert lines and lines[-1].startswith("[ 1/2]"), "".join(lines)
    time.sleep(2)  # the second config's asv run is in flight
    assert len(_processes_with(marker)) > 2  # bench.py, its guardian, asv and asv's children
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 30
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_with(marker) == [], _described(_processes_with(marker))
    kept = _measured_configs(tmp_path)
    assert kept == {"example"}  # the config in flight was killed with its asv run, not left to finish
    ledgers = [json.loads(path.read_text()) for path in (ROOT / ".asv" / "progress").glob("*.json")]
    recorded = [ledger["finished"] for ledger in ledgers if ledger.get("results") == str(tmp_path / "results")]
    assert recorded == [["example"]]  # keyed by its results directory: a run into results/ keeps a ledger of its own

    resumed = _bench(tmp_path, marker.split("=")[1], "--resume")
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    finished = len(kept)
    assert f"resume: {finished} of 2 cells already measured" in output
    assert _measured_configs(tmp_path) == {"example", "allcnnc-conv2"}
    ours = CommitResults.of_this_interpreter(tmp_path / "results" / "test-kill", git("rev-parse", "HEAD"))
    assert len(ours.paths()) == 1  # the file whose replicates the runner keeps is the one asv saved in
    assert [p.name.split("-quick-")[0] for p in (tmp_path / "summaries").iterdir()] == ["test-kill"]
    assert session_members(resumed.pid) == []
