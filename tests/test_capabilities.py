"""The capability matrix (``impls.capabilities``): every strategy works wherever ``F.unfold`` does, or declares why
not, and every declaration is still true.

A cell that says ``fails`` is an undeclared failure or a declared defect that no longer shows; both fail here.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from benchmarks.vocabulary import DEVICES
from impls import TESTED_STRATEGIES
from impls.capabilities import CAPABILITIES, WORKS, check, matrix
from impls.strategy import DEVICES as STRATEGY_DEVICES
from impls.strategy import Strategy
from unfold_bench.commands import capabilities as capabilities_script


@pytest.mark.parametrize("capability", CAPABILITIES)
@pytest.mark.parametrize("name", list(TESTED_STRATEGIES))
def test_every_capability_works_or_is_a_declared_defect_that_still_shows(name, capability, device):
    cell = check(TESTED_STRATEGIES[name], capability, device)
    assert not cell.startswith(("fails", "unverified")), f"{name} on {device}, {capability}: {cell}"


@pytest.mark.slow
def test_the_strategies_of_our_own_compose_with_torch_func_in_float64():
    for name in ("gather", "gather_reuse", "compiled", "compiled_reuse"):
        for capability in ("forward-mode AD (jvp)", "vmap", "per-sample gradients", "double backward"):
            assert check(TESTED_STRATEGIES[name], capability) == WORKS, (name, capability)


def test_the_compile_check_of_one_strategy_does_not_count_against_the_next():
    # with a recompile limit of 1, a second strategy compiled without a reset would fail as a recompile
    with torch._dynamo.config.patch(recompile_limit=1):
        for name in ("native", "as_strided"):
            assert check(TESTED_STRATEGIES[name], "torch.compile(fullgraph)") == WORKS, name


def test_an_undeclared_failure_and_a_stale_declaration_are_both_reported():
    native = TESTED_STRATEGIES["native"]

    def wrong_for_empty_batch(input: torch.Tensor, geometry) -> torch.Tensor:
        if geometry.batch_size == 0:
            raise RuntimeError("no batch")
        return native.implementation(input, geometry)

    broken = dataclasses.replace(native, implementation=wrong_for_empty_batch)
    assert check(broken, "empty batch (N=0)").startswith("fails: RuntimeError: no batch")
    stale = dataclasses.replace(native, empty_batch_defect="claimed")
    assert check(stale, "empty batch (N=0)") == "fails: declared defect no longer seen"
    assert check(dataclasses.replace(broken, empty_batch_defect="claimed"), "empty batch (N=0)") == (
        "declared defect: claimed"
    )


def test_a_declared_empty_batch_defect_is_refused_with_an_error_naming_it():
    strategy = Strategy("s", "d", (2,), ("cpu",), TESTED_STRATEGIES["native"].implementation, empty_batch_defect="why")
    with pytest.raises(ValueError, match=r"\(0, 3, 5, 5\).*empty batch \(N == 0\): why"):
        strategy(torch.zeros(0, 3, 5, 5), kernel_size=3)


def test_the_matrix_names_every_device_and_leaves_a_missing_gpu_unverified():
    native = {"native": TESTED_STRATEGIES["native"]}
    cells = matrix(native)
    assert set(cells) == {"cpu", "cuda"} and set(cells["cpu"]["native"]) == set(CAPABILITIES)
    if not torch.cuda.is_available():
        assert all(cell.startswith("unverified") for cell in cells["cuda"]["native"].values())
    assert set(matrix(native, devices=("cuda",))) == {"cuda"}
    with pytest.raises(ValueError, match=r"devices=\('tpu',\)"):
        matrix(native, devices=("tpu",))


@pytest.mark.parametrize("devices", [("cpu", "gpu"), ("tpu",), ()])
def test_a_strategy_declaring_a_device_the_suite_does_not_know_is_refused_naming_it(devices):
    with pytest.raises(ValueError, match=re.escape(f"devices={devices!r}")):
        dataclasses.replace(TESTED_STRATEGIES["native"], devices=devices)


def test_the_devices_a_strategy_may_declare_are_the_reports_devices():
    """``impls`` imports torch and the reports must not, so each names the devices; this keeps them one list."""
    assert STRATEGY_DEVICES == DEVICES


def _record(commit: str, rows: dict[str, dict[str, str]], torch_version: str = "2.13.0") -> dict:
    return {
        "machine": "m1",
        "commit": commit,
        "torch": torch_version,
        "date": "2026-11-27",
        "capabilities": ["vmap"],
        "cells": {"cpu": rows},
        "checked_at": {"cpu": dict.fromkeys(rows, commit)},
    }


def test_a_selected_check_replaces_its_rows_and_keeps_the_others_with_the_commit_they_were_checked_at():
    earlier = _record("a" * 40, {"native": {"vmap": "works"}, "gather": {"vmap": "fails: old"}})
    earlier["checked_at"]["cpu"]["native"] = "c" * 40  # itself kept from an older check
    new = _record("b" * 40, {"gather": {"vmap": "works"}, "mine": {"vmap": "works"}})
    record, said = capabilities_script.merged(earlier, new, ["native", "gather"])
    assert list(record["cells"]["cpu"]) == ["native", "gather", "mine"]  # the registry's order, then the rest
    assert record["cells"]["cpu"]["gather"] == {"vmap": "works"} and record["commit"] == "b" * 40
    assert record["checked_at"]["cpu"] == {"native": "c" * 40, "gather": "b" * 40, "mine": "b" * 40}
    assert "rows of 1 other strategy kept" in said
    replaced, said = capabilities_script.merged(_record("a" * 40, {"native": {}}, "2.12.0"), new, ["native"])
    assert replaced == new and "torch 2.12.0" in said and "replaced" in said


def test_an_unknown_strategy_to_check_is_refused_by_name_before_any_check(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("sys.argv", ["capabilities", "--strategies", "gather,gahter", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as refused:
        capabilities_script.main()
    assert refused.value.code == 2
    assert "--strategies 'gather,gahter': unknown 'gahter'; known: native" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_an_out_folder_the_record_cannot_be_written_into_is_refused_by_name_before_any_check(
    monkeypatch, capsys, tmp_path
):
    def probed(*args):
        raise AssertionError("the capabilities were checked before --out was")

    monkeypatch.setattr("impls.capabilities.matrix", probed)
    monkeypatch.setattr("benchmarks.machine.machine_name", lambda: "vm-a")
    a_file = tmp_path / "capabilities.json"
    a_file.write_text("")
    (tmp_path / "out" / "vm-a.json").mkdir(parents=True)  # the machine's record is a folder
    for out, named in (
        (a_file, f"argument --out: '{a_file}' is a file, not a folder"),
        (tmp_path / "out", f"--out {tmp_path / 'out'}: '{tmp_path / 'out' / 'vm-a.json'}' is a folder, not a file"),
    ):
        with pytest.raises(SystemExit) as refused:
            capabilities_script.main(["--out", str(out)])
        assert refused.value.code == 2
        assert named in capsys.readouterr().err


@pytest.mark.parametrize("earlier", ["{not json", "[]", '{"machine": "vm-a"}'])
def test_an_earlier_record_that_cannot_be_merged_into_is_refused_by_name_before_any_check(
    monkeypatch, capsys, tmp_path, earlier
):
    """``--strategies`` merges the rows it checks into the machine's earlier record: one that cannot be read (not
    JSON, not a record) is refused, naming it, before the checks, not with a traceback once they are done."""

    def probed(*args):
        raise AssertionError("the capabilities were checked before the earlier record was read")

    monkeypatch.setattr("impls.capabilities.matrix", probed)
    monkeypatch.setattr("benchmarks.machine.machine_name", lambda: "vm-a")
    (tmp_path / "vm-a.json").write_text(earlier)
    with pytest.raises(SystemExit) as refused:
        capabilities_script.main(["--out", str(tmp_path), "--strategies", "native"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "--strategies 'native'" in err and f"'{tmp_path / 'vm-a.json'}'" in err and "cannot be read" in err
    assert (tmp_path / "vm-a.json").read_text() == earlier  # left as it was
