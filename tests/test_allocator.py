"""glibc's allocator in benchmark processes (``benchmarks/allocator.py``): the timing regimes, entry points that
re-execute pinned, the machine entry that records both, and net peaks that stop depending on the process's
history once the threshold is pinned, at start or later."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.allocator import (
    _REEXECUTED,
    FRESH_PAGES,
    MMAP_THRESHOLD_VARIABLE,
    PINNED_MMAP_THRESHOLD,
    REGIME_VARIABLE,
    TRIM_THRESHOLD_VARIABLE,
    WARM,
    WARM_MMAP_THRESHOLD,
    WARM_TRIM_THRESHOLD,
    get_regime,
    pinned_environment,
    regime_environment,
    regime_of_machine,
)
from benchmarks.trees import ROOT

# none of the allocator's variables nor the suite's markers: a caller's regime must not leak into these
UNPINNED = {
    k: v
    for k, v in os.environ.items()
    if k not in (MMAP_THRESHOLD_VARIABLE, TRIM_THRESHOLD_VARIABLE, _REEXECUTED, REGIME_VARIABLE)
}

# besides, no opt-in to transparent huge pages where the kernel gives them only on request (glibc's tunable, PyTorch's
# variable): then a minor fault maps one base page (fault_bytes)
PLAIN_PAGES = {k: v for k, v in UNPINNED.items() if k not in ("GLIBC_TUNABLES", "THP_MEM_ALLOC_ENABLE")}


def fault_bytes() -> int:
    """The bytes one minor fault maps in fresh anonymous memory of a ``PLAIN_PAGES`` process: a transparent huge page
    where the kernel gives them to every mapping, a base page otherwise."""
    huge_pages = Path("/sys/kernel/mm/transparent_hugepage")
    if (huge_pages / "enabled").exists() and "[always]" in (huge_pages / "enabled").read_text():
        return int((huge_pages / "hpage_pmd_size").read_text())
    return resource.getpagesize()


def test_pinned_environment_adds_the_threshold_and_keeps_a_value_the_user_set():
    assert pinned_environment({})[MMAP_THRESHOLD_VARIABLE] == str(PINNED_MMAP_THRESHOLD)
    assert pinned_environment({MMAP_THRESHOLD_VARIABLE: "65536"})[MMAP_THRESHOLD_VARIABLE] == "65536"


@pytest.mark.parametrize("start", ["unpinned", "warm"])
def test_an_entry_point_re_executes_itself_with_the_threshold_and_records_it(tmp_path, start):
    script = tmp_path / "entry.py"
    script.write_text(
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from benchmarks.allocator import pin_mmap_threshold\n"
        "pin_mmap_threshold()\n"
        "import json, os\n"
        "from benchmarks.machine import allocator_setting\n"
        f"print(json.dumps([sys.argv[1:], os.environ.get({MMAP_THRESHOLD_VARIABLE!r}), allocator_setting()]))\n"
    )
    environment = UNPINNED if start == "unpinned" else regime_environment(WARM, UNPINNED)
    run = subprocess.run([sys.executable, str(script), "a b", "--x"], env=environment, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    arguments, value, setting = json.loads(run.stdout)
    assert arguments == ["a b", "--x"] and value == str(PINNED_MMAP_THRESHOLD)
    assert f"pinned at {PINNED_MMAP_THRESHOLD} bytes" in setting and "trim" not in setting


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


def test_the_module_runs_a_command_in_the_regime_it_names_and_refuses_an_unknown_one():
    show = f"echo ${REGIME_VARIABLE} ${{{MMAP_THRESHOLD_VARIABLE}:-dynamic}}"
    command = [sys.executable, "-m", "benchmarks.allocator", "--regime", WARM.name, "sh", "-c", show]
    run = subprocess.run(command, cwd=ROOT, env=UNPINNED, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.split() == [WARM.name, "dynamic"], run.stderr  # set with mallopt later
    command[4] = "lukewarm"
    run = subprocess.run(command, cwd=ROOT, env=UNPINNED, capture_output=True, text=True)
    assert run.returncode != 0 and "regime='lukewarm': must be one of" in run.stderr


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
    # do, with mallopt) after the process started otherwise (glibc's default, the warm regime), it repeats, alike
    runs = [
        subprocess.run([sys.executable, "-c", _PEAKS], cwd=ROOT, env=env, capture_output=True, text=True)
        for env in (UNPINNED, regime_environment(WARM, UNPINNED), pinned_environment(UNPINNED))
    ]
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    *pinned_now, pinned_at_start = (json.loads(run.stdout) for run in runs)
    for peaks in (*pinned_now, pinned_at_start):
        assert max(peaks) - min(peaks) <= 0.01 * max(peaks), peaks
    for peaks in pinned_now:
        assert abs(peaks[-1] - pinned_at_start[-1]) <= 0.01 * pinned_at_start[-1], (peaks, pinned_at_start)


def test_each_regime_sets_its_thresholds_replaces_the_other_regimes_and_keeps_the_users():
    warm = regime_environment(WARM, UNPINNED)  # set when timing starts (apply_regime_now), not from the start
    assert warm[REGIME_VARIABLE] == WARM.name and MMAP_THRESHOLD_VARIABLE not in warm
    fresh = regime_environment(FRESH_PAGES, UNPINNED)
    assert fresh[MMAP_THRESHOLD_VARIABLE] == str(PINNED_MMAP_THRESHOLD) and TRIM_THRESHOLD_VARIABLE not in fresh
    # a process of one regime starting another regime's processes: the suite's variables are replaced
    assert regime_environment(FRESH_PAGES, warm) == fresh
    assert regime_environment(WARM, fresh) == warm
    assert pinned_environment(warm) == fresh
    # the user's own value stays in either regime
    users = {**UNPINNED, MMAP_THRESHOLD_VARIABLE: "65536"}
    assert regime_environment(WARM, users)[MMAP_THRESHOLD_VARIABLE] == "65536"
    assert regime_environment(FRESH_PAGES, regime_environment(WARM, users))[MMAP_THRESHOLD_VARIABLE] == "65536"
    assert regime_environment(WARM, {**UNPINNED, _REEXECUTED: "1"}).get(_REEXECUTED) is None
    assert get_regime("fresh-pages") is FRESH_PAGES
    with pytest.raises(ValueError, match="regime='cold'"):
        get_regime("cold")


def test_the_warm_thresholds_are_set_once_in_a_process_started_warm_never_over_the_users(monkeypatch):
    # sets_warm_thresholds says beforehand what apply_regime_now will do (advise orders its net peaks by it)
    from benchmarks import allocator

    set_now: list[tuple[int, int]] = []
    monkeypatch.setattr(allocator, "_mallopt", lambda parameter, value: set_now.append((parameter, value)) or True)
    monkeypatch.setattr(allocator, "_applied", [])  # as in a process of its own
    warm = regime_environment(WARM, UNPINNED)
    for environ in (UNPINNED, regime_environment(FRESH_PAGES, UNPINNED), {**warm, MMAP_THRESHOLD_VARIABLE: "65536"}):
        assert not allocator.sets_warm_thresholds(environ) and not allocator.apply_regime_now(environ)
    assert not set_now  # glibc's default; another regime's, set from the start; the user's own threshold
    assert allocator.sets_warm_thresholds(warm) and allocator.apply_regime_now(warm)
    assert sorted(value for _, value in set_now) == [WARM_MMAP_THRESHOLD, WARM_TRIM_THRESHOLD]
    assert not allocator.sets_warm_thresholds(warm) and not allocator.apply_regime_now(warm)  # once a process


_HEAP = (
    f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
    "from benchmarks.allocator import apply_regime_now\n"
    "apply_regime_now()  # where timing starts\n"
    "import ctypes, ctypes.util, json\n"
    "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
    "libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]\n"
    "libc.free.argtypes = [ctypes.c_void_p]\n"
    "def heap():\n"
    "    with open('/proc/self/maps') as maps:\n"
    "        line = next(line for line in maps if line.rstrip().endswith('[heap]'))\n"
    "    return [int(x, 16) for x in line.split()[0].split('-')]\n"
    "block = libc.malloc(1 << 20)\n"
    "low, high = heap()\n"
    "big = libc.malloc(20 << 20)\n"
    "in_use = heap()[1]\n"
    "libc.free(big)\n"
    "print(json.dumps([low <= block < high, heap()[1] >= in_use]))\n"
)


@pytest.mark.parametrize(
    "environment, from_heap, kept",
    [
        (UNPINNED, False, True),  # glibc's start: 1 MiB is over the threshold (128 KiB), so fresh mmapped pages
        (regime_environment(WARM, UNPINNED), True, True),  # from the heap, and freeing 20 MiB trims nothing
        ({**UNPINNED, MMAP_THRESHOLD_VARIABLE: str(WARM_MMAP_THRESHOLD)}, True, False),  # trimmed at 128 KiB
        (
            {
                **UNPINNED,
                MMAP_THRESHOLD_VARIABLE: str(WARM_MMAP_THRESHOLD),
                TRIM_THRESHOLD_VARIABLE: str(WARM_TRIM_THRESHOLD),
            },
            True,
            True,
        ),
        (regime_environment(FRESH_PAGES, UNPINNED), False, True),
    ],
    ids=["glibc-default", "warm", "mmap-only", "both-from-start", "fresh-pages"],
)
def test_glibc_in_a_process_of_each_regime_serves_and_keeps_blocks_as_the_regime_says(environment, from_heap, kept):
    # a 1 MiB block comes from the heap only above glibc's starting threshold; a freed 20 MiB block at the top of
    # the heap stays (resident, for the next call) only with the trim threshold raised beside the mmap threshold
    run = subprocess.run([sys.executable, "-c", _HEAP], env=environment, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [from_heap, kept]


BLOCK = 8 << 20  # far over the pinned threshold, under the warm one a third of it
_FRESH_AFTER_WARM = (
    f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
    "import ctypes, ctypes.util, json\n"
    "import torch  # before the blocks: what it allocates on import would take their freed memory\n"
    f"BLOCK = {BLOCK}\n"
    "from benchmarks.allocator import apply_regime_now, enter_fresh_pages_now\n"
    "from benchmarks.replicates import minor_faults\n"
    "assert apply_regime_now()\n"
    "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
    "libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]\n"
    "libc.free.argtypes = [ctypes.c_void_p]\n"
    "def faults_of_a_block():  # the minor faults its first touch takes\n"
    "    block = libc.malloc(BLOCK)\n"
    "    before = minor_faults()\n"
    "    ctypes.memset(block, 1, BLOCK)\n"
    "    faults = minor_faults() - before\n"
    "    libc.free(block)\n"
    "    return faults\n"
    "below, in_use, top = libc.malloc(3 * BLOCK), libc.malloc(BLOCK), libc.malloc(BLOCK)  # in turn from the top\n"
    "ctypes.memset(below, 1, 3 * BLOCK)  # room for a block when small ones split it\n"
    "ctypes.memset(top, 1, BLOCK)\n"
    "libc.free(below)  # free, resident, below a block in use\n"
    "libc.free(top)  # free, resident, the heap's top (the warm trim threshold keeps it)\n"
    "warm = faults_of_a_block()\n"
    "assert enter_fresh_pages_now()\n"
    "print(json.dumps([warm, [faults_of_a_block() for _ in range(4)]]))\n"
)


def test_entering_the_fresh_pages_regime_after_the_warm_one_gives_every_block_fresh_pages():
    # glibc serves a block from a free heap chunk large enough before it considers mmap, whatever the threshold: the
    # warm regime's freed blocks, at the heap's top or below a block in use, would give later blocks resident pages,
    # even with the free heap handed back (a chunk below one in use stays, its pages resident again once touched)
    run = subprocess.run(
        [sys.executable, "-c", _FRESH_AFTER_WARM],
        env=regime_environment(WARM, PLAIN_PAGES),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    warm, fresh = json.loads(run.stdout)
    pages = BLOCK / fault_bytes()
    assert warm <= max(1, 0.1 * pages) and min(fresh) >= 0.5 * pages, (warm, fresh, pages)  # a huge page: 1 fault


def test_the_free_heap_chunks_taken_are_at_most_the_free_bytes_where_mmap_is_off():
    """With ``mmap`` off (``MALLOC_MMAP_MAX_=0``) no block is ever served from it, and every block taken grows the
    heap: the chunks taken stop at the free bytes' worth instead of growing the process without end."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from benchmarks import allocator\n"
        "free = allocator._mallinfo()().fordblks\n"
        "allocator._take_free_heap_chunks()\n"
        "print(len(allocator._held_chunks), free // allocator.PINNED_MMAP_THRESHOLD + 1)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**UNPINNED, "MALLOC_MMAP_MAX_": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    taken, bound = map(int, run.stdout.split())
    assert taken <= bound, (taken, bound)


def test_the_regime_is_in_the_machine_name_and_entry():
    from benchmarks.machine import machine_info, machine_name

    assert machine_name("fresh-pages") == machine_name() + "-freshpages"
    assert regime_of_machine(machine_name("fresh-pages")) is FRESH_PAGES and regime_of_machine(machine_name()) is WARM
    info = machine_info(regime="fresh-pages", environ=regime_environment(FRESH_PAGES, UNPINNED))
    assert info["timing_regime"] == "fresh-pages" and f"pinned at {PINNED_MMAP_THRESHOLD} bytes" in info["allocator"]
    assert "dynamic" in machine_info(regime="warm", environ=UNPINNED)["allocator"]
