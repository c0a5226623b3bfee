"""The capability matrix (``impls.capabilities``): every strategy works wherever ``F.unfold`` does, or declares why
not, and every declaration is still true.

A cell that says ``fails`` is an undeclared failure or a declared defect that no longer shows; both fail here.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from impls import TESTED_STRATEGIES
from impls.capabilities import CAPABILITIES, WORKS, check, matrix
from impls.strategy import Strategy


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
