"""The registry is the single list of strategies, and its metadata is well-formed."""

import importlib

import pytest

from impls import SPATIAL_DIMS, STRATEGIES, Strategy, get_strategy, strategy_names


def test_registry_is_nonempty_and_names_are_keys():
    assert STRATEGIES
    for name, strategy in STRATEGIES.items():
        assert isinstance(strategy, Strategy)
        assert strategy.name == name
        assert strategy.description.strip()
        assert strategy.spatial_dims and set(strategy.spatial_dims) <= set(SPATIAL_DIMS)
        assert strategy.devices and set(strategy.devices) <= {"cpu", "cuda"}
    assert strategy_names() == list(STRATEGIES)


def test_the_issue_subjects_are_registered():
    assert {"native", "onehot", "as_strided", "tiling"} <= set(STRATEGIES)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_each_strategy_module_exposes_its_registry_entry_as_unfold(name):
    module = importlib.import_module(f"impls.{name}")
    assert module.unfold is STRATEGIES[name]


def test_unknown_name_lists_known_ones():
    with pytest.raises(KeyError) as info:
        get_strategy("im2col_magic")
    message = str(info.value)
    assert "im2col_magic" in message
    for name in STRATEGIES:
        assert name in message
