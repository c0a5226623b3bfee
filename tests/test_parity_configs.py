"""Every registered strategy against the reference on every registered config, at a reduced batch size (and, under
Triton's interpreter, fewer channels)."""

import dataclasses
import os

import pytest

from benchmarks.configs import LayerConfig, configs
from impls import TESTED_STRATEGIES
from tests.helpers import assert_matches_reference

# Batch 1 and at most 2 channels under Triton's interpreter (tests/test_triton_interpreted.py): the Triton kernels
# flatten the batch and channel dims into one program index, so another batch element or channel would only repeat
# the same programs at other offsets, slowly (the interpreter runs each program in Python).
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
TEST_BATCH_SIZE = 1 if INTERPRETED else 2
INTERPRETED_CHANNELS = 2


def _at_test_size(config: LayerConfig) -> LayerConfig:
    if not INTERPRETED or config.input_shape[1] <= INTERPRETED_CHANNELS:
        return config
    n, _, *spatial = config.input_shape
    return dataclasses.replace(config, input_shape=(n, INTERPRETED_CHANNELS, *spatial))


CASES = [(s, _at_test_size(c)) for s in TESTED_STRATEGIES.values() for c in configs(batch_size=TEST_BATCH_SIZE)]


@pytest.mark.parametrize("strategy,config", CASES, ids=[f"{s.name}-{c.name}" for s, c in CASES])
def test_values_and_gradients_match_reference(strategy, config, device):
    reason = strategy.unsupported_reason(config.spatial_dims, device, config.torch_dtype)
    if reason is not None:
        pytest.skip(reason)
    assert_matches_reference(strategy, config.make_input(device), config.unfold_kwargs())
