import pytest

from kvtool.errors import InputError
from kvtool.inputs.plan_settings import SETTINGS, flag, parse_settings


def test_settings_are_key_value_pairs_of_known_keys() -> None:
    got = parse_settings(["mfu=0.35", "dp-attention=yes", " region = eu-west-1 "])
    assert got == {"mfu": "0.35", "dp_attention": "yes", "region": "eu-west-1"}
    assert flag(got, "dp_attention") is True
    assert flag({}, "dp_attention") is False
    assert parse_settings(None) == {}
    assert set(SETTINGS) >= {"mfu", "concurrent_loads", "block_tokens", "t4_storage"}


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["mfu"], "--set 'mfu' is not KEY=VALUE"),
        (["=1"], "--set '=1' is not KEY=VALUE"),
        (["speed=fast"], "--set 'speed' is not a plan setting"),
        (["mfu=0.3", "mfu=0.4"], "--set mfu is given twice"),
        (["dp_attention=maybe"], "--set dp_attention='maybe' is not true or false"),
        (["fp8_attention=fast"], "--set fp8_attention='fast' is not true or false"),
    ],
)
def test_a_bad_setting_is_one_clear_error(items: list[str], message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_settings(items)
    assert caught.value.message == message
