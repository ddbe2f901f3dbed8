"""How the engine runs a model on a node (plan/serving.py): tp, instances, weights."""

from __future__ import annotations

import pytest

from kvtool.errors import InputError
from kvtool.plan.serving import choose_serving
from kvtool.profiles.load import load_node_profile, load_storage_profile

from .conftest import model

FSX = load_storage_profile("fsx")
S3 = load_storage_profile("s3")


def test_default_tp_is_one_instance_and_doubles_until_the_weights_fit() -> None:
    spec, params = model("llama-3.1-70b")
    p5en = choose_serving(spec, params, load_node_profile("p5en"), tp=None)
    assert (p5en.tp, p5en.instances) == (8, 1)
    trn3 = load_node_profile("trn3")
    small = choose_serving(spec, params, trn3, tp=None)
    assert (small.tp, small.instances) == (4, 36)  # 141 GB over 4 x 144 GiB fits
    spec, params = model("llama-3.1-405b")
    big = choose_serving(spec, params, trn3, tp=None)
    assert (big.tp, big.instances) == (8, 18)  # 810 GB needs 8 chips
    assert big.weights_bytes_per_node == 18 * big.weights_bytes_per_instance
    assert "the weights need it" in big.notes[0]


def test_tp_must_divide_the_nodes_chips() -> None:
    spec, params = model("llama-3.1-8b")
    with pytest.raises(InputError, match=r"--tp 3 does not divide p5en\.48xlarge's 8"):
        choose_serving(spec, params, load_node_profile("p5en"), tp=3)


def test_default_tp_divides_the_attention_heads() -> None:
    """Falcon-7B has 71 heads: vLLM refuses tp 8, so the default must not pick it."""
    spec, params = model("falcon-7b")
    serving = choose_serving(spec, params, load_node_profile("p5en"), tp=None)
    assert (serving.tp, serving.instances) == (1, 8)
    assert "divides 71 attention heads" in serving.notes[0]
