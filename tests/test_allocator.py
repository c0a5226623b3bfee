"""glibc's allocator in benchmark processes (``benchmarks/allocator.py``): the timing regimes, entry points that
re-execute pinned, the machine entry that records both, and net peaks that stop depending on the process's
history once the threshold is pinned, at start or later."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.allocator import (
    _REEXECUTED,
    FRESH_PAGES,
    MMAP_THRESHOLD_VARIABLE,
    PINNED_MMAP_THRESHOLD,
    WARM,
    get_regime,
    pinned_environment,
    regime_environment,
    regime_of_machine,
)
from benchmarks.trees import ROOT

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


_PEAKS = (
    "import torch\n"
    "from benchmarks.allocator import pin_mmap_threshold_now\n"
    "from benchmarks.cells import Cell, Workload\n"
    "from benchmarks.memory import net_peak_bytes\n"
    "from benchmarks.profiles import QUICK\n"
    "for size in (2**20, 4 * 2**20, 6 * 2**20):\n"
    "    torch.ones(size).sum()  # an mmapped block, freed: glibc raises its dynamic threshold\n"
    "assert pin_mmap_threshold_now()\n"
    "w = Workload(Cell.from_names('tiling', 'allcnnc-conv2', 'cpu', QUICK), backward=True)\n"
    "peaks = []\n"
    "for _ in range(4):\n"
    "    w.reset(); peaks.append(net_peak_bytes(w.forward_backward_fresh_grad, 'cpu'))\n"
    "print(peaks[1:])\n"
)


@pytest.mark.slow
def test_with_the_threshold_pinned_the_net_peaks_repeat_and_pinning_late_gives_those_of_a_pinned_start():
    # tiling's backward frees and allocates many output-sized temporaries: with glibc's dynamic threshold its
    # net peak wanders between calls of one process; pinned, at start or (as the warm regime's memory benchmarks
    # do, with mallopt) after the process started with the dynamic threshold, it repeats, and alike
    runs = [
        subprocess.run([sys.executable, "-c", _PEAKS], cwd=ROOT, env=env, capture_output=True, text=True)
        for env in (UNPINNED, pinned_environment(UNPINNED))
    ]
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    pinned_now, pinned_at_start = (json.loads(run.stdout) for run in runs)
    for peaks in (pinned_now, pinned_at_start):
        assert max(peaks) - min(peaks) <= 0.01 * max(peaks), peaks
    assert abs(pinned_now[-1] - pinned_at_start[-1]) <= 0.01 * pinned_at_start[-1], (pinned_now, pinned_at_start)


def test_only_the_fresh_pages_regime_pins_the_threshold_for_timing():
    assert MMAP_THRESHOLD_VARIABLE not in regime_environment(WARM, UNPINNED)
    assert regime_environment(FRESH_PAGES, UNPINNED)[MMAP_THRESHOLD_VARIABLE] == str(PINNED_MMAP_THRESHOLD)
    assert regime_environment(WARM, {**UNPINNED, _REEXECUTED: "1"}).get(_REEXECUTED) is None
    assert get_regime("fresh-pages") is FRESH_PAGES
    with pytest.raises(ValueError, match="regime='cold'"):
        get_regime("cold")


def test_the_regime_is_in_the_machine_name_and_entry():
    from benchmarks.machine import machine_info, machine_name

    assert machine_name("fresh-pages") == machine_name() + "-freshpages"
    assert regime_of_machine(machine_name("fresh-pages")) is FRESH_PAGES and regime_of_machine(machine_name()) is WARM
    info = machine_info(regime="fresh-pages", environ=regime_environment(FRESH_PAGES, UNPINNED))
    assert info["timing_regime"] == "fresh-pages" and f"pinned at {PINNED_MMAP_THRESHOLD} bytes" in info["allocator"]
    assert "dynamic" in machine_info(regime="warm", environ=UNPINNED)["allocator"]
