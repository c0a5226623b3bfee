"""``unfold-bench advise``: its input checks, the layers it collects from a model, its picks, one real run."""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
import subprocess
import sys

import pytest
import torch

from benchmarks.advise import Layer, layer_config, model_layers
from benchmarks.paired_stats import EARLY_ROUNDS
from reports.advice import advice, format_text, picks_text
from unfold_bench.cli import main

MODELS = "tests.fixtures.models"
MIB = 2**20


@pytest.mark.parametrize(
    "arguments, named",
    [
        (["--input-shape", "2,3,4,4", "--kernel-size", "7"], "kernel_size=7"),
        (["--input-shape", "2,3,8,8", "--model", "no.such.module.factory"], "--model 'no.such.module.factory'"),
        (["--input-shape", "2,5,8,8", "--model", f"{MODELS}.wants_three_channels"], "its forward failed"),
        (["--input-shape", "2,3,8,8", "--model", f"{MODELS}.not_a_module"], "not a torch.nn.Module"),
        (["--input-shape", "2,3,8,8", "--kernel-size", "3", "--dtype", "int8"], "--dtype 'int8'"),
        (["--input-shape", "2,3,8,8", "--kernel-size", "3", "--device", "tpu"], "--device: invalid choice: 'tpu'"),
        (["--input-shape", "2,3,x,8", "--kernel-size", "3"], "'2,3,x,8'"),
        (
            ["--input-shape=-8,3,32,32", "--kernel-size", "3"],
            "--input-shape -8,3,32,32 --kernel-size 3 --stride 1 --padding 0 --dilation 1: input shape (-8, 3, 32, 32) "
            "has a negative",
        ),
        (["--input-shape", "2,3,8,8", "--kernel-size", "3", "--needs", "telepathy"], "telepathy: unknown"),
        (["--input-shape", "2,3,8,8", "--kernel-size", "3", "--stride", "0"], "--dilation 1: stride=0 must be"),
        (["--input-shape", "2,3,8,8"], "--kernel-size"),
        (["--input-shape", "2,3,8,8", "--model", "tests.fixtures.broken_model.resnet"], "RuntimeError: operator"),
        (["--input-shape", "2,4,9,9", "--model", f"{MODELS}.two_blocks", "--stride", "2"], "--stride 2: a model's"),
    ],
)
def test_bad_input_exits_2_naming_the_parameter_before_any_measurement(arguments, named, capsys):
    try:
        status = main(["advise", *arguments])
    except SystemExit as exit:  # argparse's own errors
        status = exit.code
    assert status == 2 and named in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has the device")
def test_a_device_that_is_not_there_exits_2(capsys):
    assert main(["advise", "--input-shape", "2,3,8,8", "--kernel-size", "3", "--device", "cuda"]) == 2
    assert "--device 'cuda'" in capsys.readouterr().err


def test_a_models_layers_are_collected_merged_and_counted():
    layers, notes = model_layers(f"{MODELS}.two_blocks", (2, 4, 9, 9))
    found = [
        (layer.config.input_shape, layer.config.kernel_size, layer.config.stride, layer.config.padding, layer.count)
        for layer in layers
    ]
    assert found == [
        ((2, 4, 9, 9), (3, 3), (1, 1), (1, 1), 2),
        ((2, 4, 9, 9), (3, 3), (2, 2), (0, 0), 1),
        ((2, 6, 4, 4), (3, 3), (1, 1), (1, 1), 2),  # the 'same' convolution and an nn.Unfold of its geometry
        ((2, 6, 4, 4), (2, 2), (1, 1), (0, 0), 1),
    ]
    assert layers[0].names == ("0", "2") and layers[2].names == ("4.patches", "4.same") and notes == []


def _measured(
    times: dict[str, float], peaks: dict[str, int], spread: dict[str, float] | None = None
) -> dict[str, dict]:
    """A layer's measurements: each strategy's ratio to the first (the baseline), without an interval unless its
    ``spread`` (a factor) gives it one."""
    baseline = next(iter(times))
    rows = {}
    for s, t in times.items():
        ratio, factor = t / times[baseline], (spread or {}).get(s, 1.0)
        rows[s] = {"strategy": s, "baseline": baseline, "compile_seconds": 0.0}
        for which, time in (("forward", t), ("forward_backward", 2 * t)):
            rows[s].update({f"time_{which}": time, f"ratio_{which}": ratio, f"rounds_{which}": 10})
            rows[s].update({f"low_{which}": ratio / factor, f"high_{which}": ratio * factor})
    memory = {s: {"strategy": s, "net_peak_forward": p, "net_peak_forward_backward": 2 * p} for s, p in peaks.items()}
    return {"time:warm": rows, "memory": memory}


def test_the_model_pick_weighs_each_layer_by_how_often_it_occurs_and_respects_the_memory_tolerance():
    rare, common = layer_config((2, 3, 8, 8), 3, name="rare"), layer_config((2, 3, 8, 8), 1, name="common")
    layers = [Layer(rare, 1), Layer(common, 10)]
    peaks = {"a": 100 * MIB, "b": 100 * MIB, "c": 500 * MIB}
    measured = [_measured({"a": 1.0, "b": 3.0, "c": 0.1}, peaks), _measured({"a": 1.0, "b": 0.5, "c": 0.1}, peaks)]
    report = advice(layers, measured, ["warm"], {})
    forward = {rule["rule"]: rule for rule in report["rules"]}["forward only (e.g. KFAC statistics)"]
    assert forward["layer_picks"] == {"rare": "a", "common": "b"}  # c is fastest but over 1.2x the lowest memory
    assert forward["model_pick"] == "b" and forward["model_tied"] == []  # b: 3 + 10 * 0.5 = 8 s, a: 1 + 10 * 1 = 11 s
    assert [r["strategy"] for r in forward["model_ranking"]][:2] == ["b", "a"]
    set_aside = advice(layers, measured, ["warm"], {"b": "no vmap (made up)"})
    assert {rule["rule"]: rule for rule in set_aside["rules"]}["forward only (e.g. KFAC statistics)"][
        "model_pick"
    ] == "a"
    assert "b: no vmap (made up)" in format_text(set_aside)


def test_net_peaks_closer_than_their_resolution_do_not_decide():
    layers = [Layer(layer_config((2, 3, 8, 8), 3, name="tiny"), 1)]
    report = advice(layers, [_measured({"a": 1.0, "b": 4.0}, {"a": 8192, "b": 4096})], ["warm"], {})
    assert all(rule["model_pick"] == "a" and rule["layer_picks"] == {"tiny": "a"} for rule in report["rules"])
    over = advice(layers, [_measured({"a": 1.0, "b": 4.0}, {"a": 8192 + 2 * 2**17, "b": 4096})], ["warm"], {})
    assert all(rule["model_pick"] == "b" for rule in over["rules"])


def test_a_strategy_that_cannot_run_a_layer_is_listed_with_its_reason_and_never_picked_for_the_model():
    layers = [Layer(layer_config((2, 3, 8, 8), 3, name="only"), 1)]
    measured = _measured({"a": 1.0, "b": 0.5}, {"a": 100, "b": 100})
    measured["time:warm"]["b"] = {"strategy": "b", "problem": "wrong output: made up"}
    report = advice(layers, [measured], ["warm"], {})
    assert all(rule["model_pick"] == "a" for rule in report["rules"])
    assert "b               cannot: wrong output: made up" in format_text(report)


FORWARD = "forward only (e.g. KFAC statistics)"


def test_overlapping_intervals_are_a_tie_broken_by_memory_then_simplicity_per_layer_and_for_the_model():
    layers = [Layer(layer_config((2, 3, 8, 8), 3, name="one"), 1), Layer(layer_config((2, 3, 8, 8), 1, name="two"), 3)]
    same = {"native": 100 * MIB, "compiled": 100 * MIB, "slow": 100 * MIB}
    times = {"native": 1.0, "compiled": 0.98, "slow": 2.0}
    measured = [_measured(times, same, spread={"compiled": 1.08})] * 2
    report = advice(layers, measured, ["warm"], {}, complexity={"compiled": 1, "native": 0, "slow": 0})
    forward = {rule["rule"]: rule for rule in report["rules"]}[FORWARD]
    # compiled's point estimate is the lowest, but inside the noise of native's; native is simpler
    assert forward["layer_picks"] == {"one": "native", "two": "native"}
    assert forward["layer_ties"] == {"one": ["compiled", "native"], "two": ["compiled", "native"]}
    assert forward["model_pick"] == "native" and forward["model_tied"] == ["compiled", "native"]
    ranking = {row["strategy"]: row for row in forward["model_ranking"]}
    assert math.isclose(ranking["compiled"]["time"], 4 * 0.98)  # one of "one", three of "two"
    assert math.isclose(ranking["compiled"]["time_high"], 4 * 0.98 * 1.08)
    text = "\n".join(picks_text(report))
    assert "ship native; a statistical tie between compiled, native" in text and "one native (tie: compiled" in text
    apart = advice(layers, [_measured(times, same, spread={"compiled": 1.01})] * 2, ["warm"], {}, {"compiled": 1})
    assert {rule["rule"]: rule for rule in apart["rules"]}[FORWARD]["model_pick"] == "compiled"


def test_a_strategy_that_left_the_race_far_behind_ties_with_no_one():
    layers = [Layer(layer_config((2, 3, 8, 8), 3, name="one"), 1)]
    same = {"native": 100 * MIB, "gather": 100 * MIB, "slow": 100 * MIB}
    measured = _measured({"native": 1.0, "gather": 0.5, "slow": 1.2}, same, spread={"gather": 1.1})
    for which in ("forward", "forward_backward"):  # a range of three rounds, one of them with a slow baseline call
        measured["time:warm"]["slow"].update({f"low_{which}": 0.4, f"high_{which}": 1.3, f"far_behind_{which}": True})
        measured["time:warm"]["slow"][f"rounds_{which}"] = 3
    report = advice(layers, [measured], ["warm"], {}, complexity={"gather": 1})
    forward = {rule["rule"]: rule for rule in report["rules"]}[FORWARD]
    assert forward["layer_picks"] == {"one": "gather"} and forward["layer_ties"] == {}
    assert forward["model_pick"] == "gather" and forward["model_tied"] == []
    assert "1.20x [0.40, 1.30], the range of its 3 rounds: left far behind" in format_text(report)


def test_the_text_says_where_the_regimes_picks_differ_and_names_the_baseline():
    layers = [Layer(layer_config((2, 3, 8, 8, 8), 3, name="vol"), 1)]
    warm = _measured({"onehot": 1.0, "gather": 0.5}, {"onehot": 100, "gather": 100})
    fresh = _measured({"onehot": 1.0, "gather": 2.0}, {"onehot": 100, "gather": 100})
    both = {"time:warm": warm["time:warm"], "time:fresh-pages": fresh["time:warm"], "memory": warm["memory"]}
    report = advice(layers, [both], ["warm", "fresh-pages"], {})
    text = format_text(report)
    assert f"The regimes' picks differ for {FORWARD}: warm gather, fresh-pages onehot" in text
    assert "ratio to the baseline (onehot)" in text and "onehot          forward 1,000 ms (the baseline)" in text
    assert "net peak forward / forward-backward " in text  # which of the two peaks is which


def test_a_failed_strategy_is_listed_the_others_judged_and_the_command_exits_2(monkeypatch, capsys):
    from benchmarks import advise

    measured = _measured({"native": 1.0, "gather": 0.5}, {"native": 100, "gather": 100})
    broken = {"strategy": "cpp", "problem": "failed while timed (warm, forward): RuntimeError: boom", "failed": True}
    measured["time:warm"]["cpp"] = measured["memory"]["cpp"] = broken
    monkeypatch.setattr(advise, "measure_layer", lambda *args, **kwargs: measured)
    status = main(["advise", "--input-shape", "2,3,8,8", "--kernel-size", "3", "--regime", "warm"])
    out = capsys.readouterr().out
    assert status == 2 and "ship gather" in out and "Failed: layer cpp: failed while timed" in out


REGIMES = ("warm", "fresh-pages")
KILLED = "exited with status -9: "  # what run_json_child says of a process killed by a signal, with nothing on stderr


class _Died(BaseException):
    """The layer's process ending where it stands (killed, a segfault): nothing after it runs or is printed."""


def _measured_in_process(
    monkeypatch, failing: dict[str, set[str]], users_threshold: str | None = None
) -> tuple[dict[str, dict], list[tuple]]:
    """One layer measured as ``advise`` does (``measure``'s rows, read by ``measure_layer``), in this process and
    without timing anything, in the environment ``measure_layer`` gives it (the warm regime, and the user's own
    threshold if given): ``native`` takes 1 s a call, ``gather`` 0.5 s, and a call raises where ``failing`` (which
    -> regimes, "memory" for the net peak) says, or the process dies at the first call of a regime in "death".
    Returns the measurements and what happened in order: ("net peak", strategy, warm_up), ("warm thresholds",),
    ("fresh pages",), ("timed", regime, strategy)."""
    from benchmarks import advise, allocator
    from benchmarks.allocator import MMAP_THRESHOLD_VARIABLE, REGIME_VARIABLE
    from impls import STRATEGIES

    monkeypatch.setattr(allocator, "_applied", [])  # a process of its own: no warm thresholds set yet
    monkeypatch.setenv(REGIME_VARIABLE, "warm")
    if users_threshold is None:
        monkeypatch.delenv(MMAP_THRESHOLD_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(MMAP_THRESHOLD_VARIABLE, users_threshold)
    config = layer_config((2, 3, 6, 6), 3)
    regime = {"now": "warm"}
    events: list[tuple] = []

    def timed(workloads, index, which):
        name = workloads[index].cell.strategy.name
        if regime["now"] in failing.get("death", ()):
            raise _Died
        events.append(("timed", regime["now"], name))
        if name == "gather" and regime["now"] in failing.get("time", ()):
            raise RuntimeError("boom")
        return {"native": 1.0, "gather": 0.5}[name]

    def net_peak(workload, backward, warm_up):
        name = workload.cell.strategy.name
        if name == "gather" and failing.get("memory"):
            raise RuntimeError("no peak")
        events.append(("net peak", name, warm_up))
        return 100 * MIB

    def enter_fresh_pages():
        regime.update(now="fresh-pages")
        events.append(("fresh pages",))
        return True

    monkeypatch.setattr(advise, "timed_call", timed)
    monkeypatch.setattr(advise, "charged_net_peak", net_peak)
    # nothing of this process's allocator is changed
    monkeypatch.setattr(advise, "apply_regime_now", lambda: events.append(("warm thresholds",)))
    monkeypatch.setattr(advise, "enter_fresh_pages_now", enter_fresh_pages)
    strategies = {name: STRATEGIES[name] for name in ("native", "gather")}
    rows, why = [], ""
    try:
        for row in advise.measure(config, 1e9, REGIMES, strategies=strategies):
            rows.append(json.loads(json.dumps(row)))  # each row as the parent reads it, as soon as it is printed
    except _Died:
        why = KILLED
    monkeypatch.setattr(advise, "run_json_child", lambda *args, **kwargs: (rows, why))
    return advise.measure_layer(config, 1e9, REGIMES, progress=lambda line: None), events


USERS_THRESHOLD = str(2**20)  # a MALLOC_MMAP_THRESHOLD_ of the user's: apply_regime_now leaves it alone


@pytest.mark.parametrize("users_threshold", [None, USERS_THRESHOLD])
@pytest.mark.parametrize("failed, judged", [("warm", "fresh-pages"), ("fresh-pages", "warm")])
def test_a_strategy_that_fails_while_timed_in_one_regime_is_failed_there_and_judged_in_the_other(
    monkeypatch, failed, judged, users_threshold
):
    measured, events = _measured_in_process(monkeypatch, {"time": {failed}}, users_threshold)
    mine = measured[f"time:{failed}"]["gather"]
    assert mine["failed"] and mine["problem"] == f"failed while timed ({failed}, forward): RuntimeError: boom"
    other = measured[f"time:{judged}"]["gather"]
    assert "problem" not in other and math.isclose(other["ratio_forward_backward"], 0.5)
    assert measured["memory"]["gather"]["net_peak_forward"] == 100 * MIB  # its one net peak, for the regime it ran in
    # a warm-up call before a net peak, unless every call of it ran with the threshold pinned (the races, fresh pages)
    first = users_threshold is None
    assert ("net peak", "gather", first or failed == "fresh-pages") in events
    assert ("net peak", "native", first) in events
    report = advice([Layer(layer_config((2, 3, 6, 6), 3))], [measured], list(REGIMES), {})
    picks = {(rule["regime"], rule["rule"]): rule["model_pick"] for rule in report["rules"]}
    assert {regime for (regime, _), pick in picks.items() if pick == "gather"} == {judged}
    assert {regime for (regime, _), pick in picks.items() if pick == "native"} == {failed}
    assert report["failed"] == [f"layer gather: failed while timed ({failed}, forward): RuntimeError: boom"]
    text = format_text(report)
    assert f"gather          cannot: failed while timed ({failed}, forward)" in text
    assert "gather          forward 500 ms" in text  # its figures in the regime it ran in


def test_the_net_peaks_come_before_the_races_unless_their_pin_would_last_into_the_warm_regime(monkeypatch):
    def where(events: list[tuple], kind: str) -> list[int]:
        return [i for i, event in enumerate(events) if event[0] == kind]

    _, events = _measured_in_process(monkeypatch, {})
    # the warm regime's thresholds are set after the net peaks, which undoes the pin they leave
    assert max(where(events, "net peak")) < events.index(("warm thresholds",)) < min(where(events, "timed"))
    # forward and forward-backward, each after a warm-up call: no call of it has run with the threshold pinned yet
    peaks = [events[i] for i in where(events, "net peak")]
    assert peaks == [("net peak", s, True) for s in ("native", "gather") for _ in range(2)]
    # over the user's own threshold nothing would undo it: after the races, as the warm regime leaves the threshold
    _, events = _measured_in_process(monkeypatch, {}, USERS_THRESHOLD)
    assert min(where(events, "net peak")) > max(where(events, "timed"))


def test_a_process_that_dies_in_the_fresh_pages_regime_keeps_its_warm_figures_and_its_net_peaks(monkeypatch):
    measured, _ = _measured_in_process(monkeypatch, {"death": {"fresh-pages"}})
    for name, ratio in (("native", 1.0), ("gather", 0.5)):
        warm = measured["time:warm"][name]
        assert "problem" not in warm and math.isclose(warm["ratio_forward"], ratio)
        assert measured["memory"][name]["net_peak_forward_backward"] == 100 * MIB
        assert measured["time:fresh-pages"][name] == {
            "strategy": name,
            "problem": f"the measuring process {KILLED}",
            "failed": True,
        }
    report = advice([Layer(layer_config((2, 3, 6, 6), 3))], [measured], list(REGIMES), {})
    picks = {(rule["regime"], rule["rule"]): rule["model_pick"] for rule in report["rules"]}
    assert {regime: pick for (regime, _), pick in picks.items()} == {"warm": "gather", "fresh-pages": None}
    assert f"layer gather: the measuring process {KILLED}" in report["failed"]
    assert "gather          forward 500 ms" in format_text(report)  # its warm figures


@pytest.mark.parametrize("users_threshold", [None, USERS_THRESHOLD])
def test_a_strategy_that_fails_in_every_regime_is_listed_per_regime_and_never_picked(monkeypatch, users_threshold):
    measured, events = _measured_in_process(monkeypatch, {"time": set(REGIMES)}, users_threshold)
    assert all(measured[f"time:{regime}"]["gather"]["failed"] for regime in REGIMES)
    # its net peak measured before the races, where they come first; after them, only a judged strategy's
    first = users_threshold is None
    assert ("gather" in measured["memory"]) == first == any(event[:2] == ("net peak", "gather") for event in events)
    report = advice([Layer(layer_config((2, 3, 6, 6), 3))], [measured], list(REGIMES), {})
    assert all(rule["model_pick"] == "native" for rule in report["rules"])
    assert report["failed"] == [f"layer gather: failed while timed ({r}, forward): RuntimeError: boom" for r in REGIMES]


@pytest.mark.parametrize("users_threshold", [None, USERS_THRESHOLD])
def test_a_net_peak_that_cannot_be_measured_fails_the_strategy_in_every_regime(monkeypatch, users_threshold):
    # one net peak serves both regimes (measured once, the threshold pinned): without it, neither can judge it
    measured, _ = _measured_in_process(monkeypatch, {"memory": {"memory"}}, users_threshold)
    assert measured["memory"]["gather"]["failed"]
    assert all("problem" not in measured[f"time:{regime}"]["gather"] for regime in REGIMES)  # its times kept
    report = advice([Layer(layer_config((2, 3, 6, 6), 3))], [measured], list(REGIMES), {})
    assert all(rule["model_pick"] == "native" for rule in report["rules"])
    assert all(row["failed"] for rows in report["tables"].values() for row in rows if row["strategy"] == "gather")
    assert report["failed"] == ["layer gather: failed while its net peak was measured: RuntimeError: no peak"]


_FAULTS_PER_CALL = (
    "import json, sys\n"
    "from benchmarks import advise\n"
    "from benchmarks.replicates import minor_faults\n"
    "from impls import STRATEGIES\n"
    "calls, timed_call = [], advise.timed_call\n"
    "def counted(workloads, index, which):\n"
    "    before = minor_faults()\n"
    "    seconds = timed_call(workloads, index, which)\n"
    "    calls.append([which, minor_faults() - before])\n"
    "    return seconds\n"
    "advise.timed_call = counted\n"
    "config = advise.layer_config(tuple(json.loads(sys.argv[1])), 3)\n"
    "for row in advise.measure(config, 0.0, ('warm', 'fresh-pages'), strategies={'native': STRATEGIES['native']}):\n"
    "    pass\n"
    "print(json.dumps(calls))\n"
)


def test_every_fresh_pages_call_pays_its_outputs_first_touch_faults_after_the_warm_regime():
    # the warm regime leaves its freed outputs in the heap, resident, and glibc serves a block from there before it
    # considers mmap: with the threshold merely pinned, the fresh-pages outputs landed on resident pages
    from benchmarks.allocator import WARM, regime_environment
    from benchmarks.trees import ROOT
    from tests.test_allocator import PLAIN_PAGES, fault_bytes

    shape = (2, 32, 64, 64)  # an output of several MiB
    output_bytes = layer_config(shape, 3).geometry.output_numel * torch.float32.itemsize
    command = [sys.executable, "-c", _FAULTS_PER_CALL, json.dumps(shape)]
    run = subprocess.run(command, cwd=ROOT, env=regime_environment(WARM, PLAIN_PAGES), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    runs = [
        (which, [n for _, n in calls]) for which, calls in itertools.groupby(json.loads(run.stdout), lambda c: c[0])
    ]
    assert [which for which, _ in runs] == ["forward", "forward_backward"] * 2  # the warm regime's, the fresh-pages'
    for which, faults in runs[2:]:
        assert statistics.median(faults) >= 0.5 * output_bytes / fault_bytes(), (which, faults)


def test_a_layers_time_limit_grows_with_the_budget():
    from benchmarks.advise import SETUP_SECONDS, layer_timeout

    assert layer_timeout(250.0, ["warm", "fresh-pages"]) > 2 * 2 * 250.0 > SETUP_SECONDS
    assert layer_timeout(3.0, ["warm"]) < layer_timeout(3.0, ["warm", "fresh-pages"])


@pytest.mark.slow
def test_one_geometry_end_to_end_writes_json_and_a_self_contained_page(tmp_path, capsys):
    files = ["--json", str(tmp_path / "a.json"), "--html", str(tmp_path / "a.html")]
    status = main(
        [
            "advise",
            "--input-shape",
            "2,3,6,6",
            "--kernel-size",
            "3",
            "--padding",
            "1",
            "--budget",
            "0.2",
            "--regime",
            "warm",
            *files,
        ]
    )
    assert status == 0
    report = json.loads((tmp_path / "a.json").read_text())
    table = report["tables"]["warm"]
    native = next(row for row in table if row["strategy"] == "native")
    assert native["problem"] == "" and math.isclose(native["ratio_forward"], 1.0) and native["time_forward"] > 0
    assert {rule["rule"] for rule in report["rules"]} == {
        "training (forward and backward)",
        "forward only (e.g. KFAC statistics)",
    }
    page = (tmp_path / "a.html").read_text()
    assert "<script" in page and not re.search(r"<script[^>]*\bsrc=", page)  # plotly inline: no network
    assert "ship" in capsys.readouterr().out


class _Fake:
    """A workload whose calls take a fixed time, drawn with a little noise, read by a fake ``timed_call``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def reset(self) -> None:
        pass


def test_the_race_drops_a_strategy_far_behind_the_leader_and_resolves_the_contenders(monkeypatch):
    import random

    from benchmarks import advise

    noise = random.Random(0)
    monkeypatch.setattr(advise, "timed_call", lambda calls, i, which: calls[i].seconds * noise.uniform(0.97, 1.03))
    workloads = {"native": _Fake(1.0), "fast": _Fake(0.5), "slow": _Fake(5.0), "reusing": _Fake(0.1)}
    found = advise.race(workloads, "native", "forward", budget=1e9, set_aside=["reusing"])
    assert found.far_behind == {"slow"} and len(found.times["slow"]) == EARLY_ROUNDS
    fast = found.ratio("fast")
    assert fast.low <= 0.5 <= fast.high and fast.high / fast.low <= advise.TARGET**2
    assert len(found.times["native"]) >= advise.MIN_ROUNDS
    # the set-aside strategy is 5x faster than "fast", yet "fast" was not dropped as far behind it
    assert "fast" not in found.far_behind and "reusing" not in found.far_behind


def test_the_command_lists_every_subcommand_and_runs_each_from_its_module():
    import contextlib
    import io

    from unfold_bench.cli import COMMANDS, COMMANDS_DIR

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--help"]) == 0
    listed = [line.split()[0] for line in out.getvalue().splitlines() if line.startswith("  ")]
    assert listed == list(COMMANDS)
    # every module of unfold_bench.commands is a command
    modules = {path.stem for path in COMMANDS_DIR.glob("*.py") if path.stem != "__init__"}
    assert modules == set(COMMANDS.values())
    assert main(["no-such-command"]) == 2
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["gpu-check", "run", "--budget", "0"]) == 2  # the command's own refusal, its exit status


def test_a_commands_own_message_on_exit_is_printed_not_lost(capsys):
    # a command that stops with a message (SystemExit("...")) exits 1 with the message on stderr
    assert main(["gpu-check", "run"]) == 1
    assert "--out is required" in capsys.readouterr().err
    # a usage error of its own arguments is argparse's: exit 2, naming the option
    assert main(["context", "--cells", "native:example:forward"]) == 2
    assert "--cells: every cell is the reference" in capsys.readouterr().err


def test_a_strategy_whose_call_raises_leaves_the_race_and_the_others_are_resolved(monkeypatch):
    from benchmarks import advise

    calls = {"n": 0}

    def timed(workloads, index, which):
        calls["n"] += 1
        if workloads[index].seconds is None:
            if calls["n"] > 8:  # it ran a few rounds first
                raise RuntimeError("boom")
            return 1.0
        return workloads[index].seconds

    monkeypatch.setattr(advise, "timed_call", timed)
    workloads = {"native": _Fake(1.0), "fast": _Fake(0.5), "broken": _Fake(None)}
    found = advise.race(workloads, "native", "forward", budget=1e9)
    assert found.failed == {"broken": "RuntimeError: boom"}
    assert len(found.times["native"]) >= advise.MIN_ROUNDS and found.ratio("fast").ratio == 0.5


def test_the_race_goes_on_when_the_leader_fails_and_the_only_other_contender_is_far_behind(monkeypatch):
    from benchmarks import advise

    calls = {"n": 0}

    def timed(workloads, index, which):
        calls["n"] += 1
        if workloads[index].seconds is None:
            if calls["n"] > 18:  # the leader, after a few rounds unresolved (its calls scatter)
                raise RuntimeError("boom")
            return 0.4 if calls["n"] % 2 else 0.6
        return workloads[index].seconds

    monkeypatch.setattr(advise, "timed_call", timed)
    workloads = {"onehot": _Fake(1.0), "lead": _Fake(None), "slow": _Fake(5.0)}
    found = advise.race(workloads, "onehot", "forward", budget=1e9, set_aside=["onehot"])
    assert found.failed == {"lead": "RuntimeError: boom"} and found.far_behind == {"slow"}
