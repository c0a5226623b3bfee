"""Devices, CUDA marking and numerics settings shared by the tests."""

from __future__ import annotations

import pytest
import torch

from impls import STRATEGIES

CUDA_AVAILABLE = torch.cuda.is_available()

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[pytest.mark.cuda, pytest.mark.skipif(not CUDA_AVAILABLE, reason="no CUDA device on this machine")],
    ),
]

STRATEGY_NAMES = list(STRATEGIES)


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def strict_float32():
    """Parity tests compare exactly, so they run with TF32 off; ``test_tf32`` turns it on explicitly."""
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
