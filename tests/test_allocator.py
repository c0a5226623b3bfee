"""The pinned glibc mmap threshold (``benchmarks/allocator.py``): entry points re-execute under it, the machine
entry records it, and with it the forward-backward net peak stops depending on the process's history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.allocator import _REEXECUTED, MMAP_THRESHOLD_VARIABLE, PINNED_MMAP_THRESHOLD, pinned_environment

ROOT = Path(__file__).resolve().parent.parent
# neither the threshold nor the re-execution marker: a caller's pinned process must not leak either into these
UNPINNED = {k: v for k, v in os.environ.items() if k not in (MMAP_THRESHOLD_VARIABLE, _REEXECUTED)}


def test_pinned_environment_adds_the_threshold_and_keeps_a_value_the_user_set():
    assert pinned_environment({})[MMAP_THRESHOLD_VARIABLE] == str(PINNED_MMAP_THRESHOLD)
    assert pinned_environment({MMAP_THRESHOLD_VARIABLE: "65536"})[MMAP_THRESHOLD_VARIABLE] == "65536"


def test_an_entry_point_re_executes_itself_with_the_threshold_and_records_it(tmp_path):
    script = tmp_path / "entry.py"
    script.write_text(
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from benchmarks.allocator import pin_mmap_threshold\n"
        "pin_mmap_threshold()\n"
        "import json, os\n"
        "from benchmarks.machine import allocator_setting\n"
        f"print(json.dumps([sys.argv[1:], os.environ.get({MMAP_THRESHOLD_VARIABLE!r}), allocator_setting()]))\n"
    )
    run = subprocess.run([sys.executable, str(script), "a b", "--x"], env=UNPINNED, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    arguments, value, setting = json.loads(run.stdout)
    assert arguments == ["a b", "--x"] and value == str(PINNED_MMAP_THRESHOLD)
    assert f"pinned at {PINNED_MMAP_THRESHOLD} bytes" in setting


def test_re_execution_keeps_interpreter_options_and_a_command_string():
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from benchmarks.allocator import pin_mmap_threshold\n"
        "pin_mmap_threshold()\n"
        "import os\n"
        f"print(sys.flags.utf8_mode, os.environ.get({MMAP_THRESHOLD_VARIABLE!r}), sys.argv[1:])\n"
    )
    run = subprocess.run([sys.executable, "-X", "utf8", "-c", code, "a"], env=UNPINNED, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"1 {PINNED_MMAP_THRESHOLD} ['a']\n", run.stdout


def test_the_module_runs_a_command_under_the_threshold():
    command = [sys.executable, "-m", "benchmarks.allocator", "sh", "-c", f"echo ${MMAP_THRESHOLD_VARIABLE}"]
    run = subprocess.run(command, cwd=ROOT, env=UNPINNED, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == str(PINNED_MMAP_THRESHOLD), run.stderr


def test_with_the_threshold_pinned_the_forward_backward_net_peak_repeats():
    # tiling's backward frees and allocates many output-sized temporaries: with glibc's dynamic threshold its
    # net peak wandered between calls of one process (211 to 248 MiB on quick conv2); pinned, it repeats.
    code = (
        "from benchmarks.cells import Cell, Workload\n"
        "from benchmarks.memory import net_peak_bytes\n"
        "from benchmarks.profiles import QUICK\n"
        "w = Workload(Cell.from_names('tiling', 'allcnnc-conv2', 'cpu', QUICK), backward=True)\n"
        "peaks = []\n"
        "for _ in range(4):\n"
        "    w.reset(); peaks.append(net_peak_bytes(w.forward_backward_fresh_grad, 'cpu'))\n"
        "print(peaks[1:])\n"
    )
    env = pinned_environment(UNPINNED)
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    peaks = json.loads(run.stdout)
    assert max(peaks) - min(peaks) <= 0.01 * max(peaks), peaks
