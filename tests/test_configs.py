"""The config table: well-formed, scalable, and covering the N-d claims."""

import pytest

from benchmarks.configs import CONFIGS, configs, get_config


def test_names_are_unique():
    names = [c.name for c in CONFIGS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_every_config_has_a_valid_geometry(config):
    g = config.geometry
    assert g.num_patches >= 1
    assert g.output_shape[0] == config.batch_size


def test_allcnnc_rows_match_deepobs_layer_inputs():
    expected = {
        "allcnnc-conv1": ((256, 3, 32, 32), 3, 1, 1),
        "allcnnc-conv2": ((256, 96, 32, 32), 3, 1, 1),
        "allcnnc-conv3": ((256, 96, 32, 32), 3, 2, 1),
        "allcnnc-conv4": ((256, 96, 16, 16), 3, 1, 1),
        "allcnnc-conv5": ((256, 192, 16, 16), 3, 1, 1),  # conv6's input at stride 1: a different unfold
        "allcnnc-conv6": ((256, 192, 16, 16), 3, 2, 1),
        "allcnnc-conv7": ((256, 192, 8, 8), 3, 1, 0),
        "allcnnc-conv8": ((256, 192, 6, 6), 1, 1, 0),
    }
    for name, (shape, kernel, stride, padding) in expected.items():
        c = get_config(name)
        assert (c.input_shape, c.kernel_size, c.stride, c.padding, c.dilation) == (shape, kernel, stride, padding, 1)
    example = get_config("example")
    assert (example.input_shape, example.kernel_size, example.padding, example.stride) == ((64, 3, 32, 32), 3, 1, 2)


def test_allcnnc_conv2_output_is_864_mib_in_float32():
    g = get_config("allcnnc-conv2").geometry
    assert g.output_shape == (256, 864, 1024)
    assert g.output_numel * 4 == 864 * 2**20


def test_table_covers_1d_3d_dilation_and_half_precision():
    assert any(c.spatial_dims == 3 for c in CONFIGS)
    assert any(c.spatial_dims == 1 for c in CONFIGS)
    assert any(c.geometry.dilation != (1,) * c.spatial_dims for c in CONFIGS)
    assert {"bfloat16", "float16"} <= {c.dtype for c in CONFIGS}


@pytest.mark.parametrize("name", ["conv4-bfloat16", "conv4-float16"])
def test_half_precision_rows_are_conv4_in_that_dtype(name):
    half, conv4 = get_config(name), get_config("allcnnc-conv4")
    assert half.torch_dtype.itemsize == 2 and half.make_input().dtype == half.torch_dtype
    assert (half.input_shape, half.unfold_kwargs()) == (conv4.input_shape, conv4.unfold_kwargs())


def test_batch_scaling_changes_only_the_batch():
    for small, full in zip(configs(batch_size=4), CONFIGS):
        assert small.batch_size == min(4, full.batch_size)
        assert small.input_shape[1:] == full.input_shape[1:]
        assert small.unfold_kwargs() == full.unfold_kwargs()
        assert small.name == full.name
    assert configs() == list(CONFIGS)
    with pytest.raises(ValueError, match="batch_size"):
        CONFIGS[0].with_batch_size(0)


def test_unknown_config_lists_known_ones():
    with pytest.raises(KeyError, match="allcnnc-conv2"):
        get_config("nope")


def test_make_input_is_reproducible():
    c = get_config("allcnnc-conv8").with_batch_size(2)
    assert c.make_input(seed=3).equal(c.make_input(seed=3))
    assert not c.make_input(seed=3).equal(c.make_input(seed=4))
