"""State layers as vLLM lays them out: a Mamba 1 block's conv and SSM state, and nothing for
a model without state layers."""

from kvtool.model.fields import ConfigFields
from kvtool.model.spec import StateLayers
from kvtool.model.state import state_groups
from kvtool.profiles.load import find_model_profile, read_config_json


def test_mamba1_state_is_conv_and_ssm_over_the_inner_width() -> None:
    found = find_model_profile("mamba-2.8b")
    assert found is not None
    config = read_config_json(found[1] / "config.json")
    hidden = config.get("d_model", config.get("hidden_size"))
    layers = config.get("n_layer", config.get("num_hidden_layers"))
    (group,) = state_groups(ConfigFields(config, "mamba"), ["linear"] * layers, hidden)
    assert isinstance(group, StateLayers)
    assert (group.kind, group.num_layers) == ("mamba1", 64)
    inner = 2 * hidden  # vLLM mamba1_state_shape: intermediate = expand x hidden
    assert (group.conv_channels, group.conv_kernel) == (inner, 4)
    assert (group.state_heads, group.state_head_elems) == (inner, 16)


def test_no_state_layers_no_group() -> None:
    fields = ConfigFields({"model_type": "llama"}, "llama")
    assert state_groups(fields, ["full"] * 4, 4096) == []
