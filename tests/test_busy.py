"""The warning of a command about to measure on CPUs that other work keeps busy (``benchmarks.busy``)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from benchmarks import busy
from benchmarks.busy import BUSY_CPUS, busy_warning, other_load


def test_a_spinning_process_is_counted_as_other_work():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)  # its interpreter is up and spinning
        load = other_load(0.5)
    finally:
        spinner.kill()
        spinner.wait()
    if load is None:
        pytest.skip("this machine has no /proc/stat")
    assert load >= 0.5  # the spinner alone keeps a whole CPU busy while this process sleeps
    assert busy_warning(load, 2).startswith(f"warning: other work kept {load:.1f} of this machine's 2 CPUs busy")


def test_no_warning_below_the_threshold_or_where_the_load_is_unknown():
    assert busy_warning(None) is None and busy_warning(BUSY_CPUS * 0.99, 2) is None
    assert busy_warning(BUSY_CPUS, 2) is not None


def test_the_busy_and_total_times_are_read_from_the_first_line_of_proc_stat(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 5 5 40 0 0\ncpu0 50 0 25 400 5 2 3 20 0 0\n")
    monkeypatch.setattr(busy, "STAT", stat)
    assert busy._cpu_times() == (100 + 50 + 5 + 5 + 40, 100 + 50 + 5 + 5 + 40 + 800 + 10)  # steal is busy too
    stat.write_text("not the kernel's format")
    assert busy._cpu_times() is None and other_load(0.01) is None
