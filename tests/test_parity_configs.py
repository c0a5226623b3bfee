"""Every registered strategy against the reference on every registered config, at a reduced batch size."""

import os

import pytest

from benchmarks.configs import configs
from impls import TESTED_STRATEGIES
from tests.helpers import assert_matches_reference

# Batch 1 under Triton's interpreter (tests/test_triton_interpreted.py): the Triton kernels flatten the batch and
# channel dims into one program index, so a second batch element would only repeat the same programs, slowly.
TEST_BATCH_SIZE = 1 if os.environ.get("TRITON_INTERPRET") == "1" else 2
CASES = [(s, c) for s in TESTED_STRATEGIES.values() for c in configs(batch_size=TEST_BATCH_SIZE)]


@pytest.mark.parametrize("strategy,config", CASES, ids=[f"{s.name}-{c.name}" for s, c in CASES])
def test_values_and_gradients_match_reference(strategy, config, device):
    reason = strategy.unsupported_reason(config.spatial_dims, device, config.torch_dtype)
    if reason is not None:
        pytest.skip(reason)
    assert_matches_reference(strategy, config.make_input(device), config.unfold_kwargs())
