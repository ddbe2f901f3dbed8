"""Token counts follow vLLM's --max-model-len suffix rule; byte formats show both unit systems."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.units import format_bytes, parse_bytes, parse_count, parse_count_list, parse_fraction


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("200k", 200_000),
        ("128K", 131_072),
        ("1m", 1_000_000),
        ("1M", 1_048_576),
        ("1.5k", 1_500),
        ("25.6k", 25_600),
        ("32768", 32_768),
        (" 8k ", 8_000),
        ("2g", 2_000_000_000),
    ],
)
def test_parse_count_follows_vllm_suffixes(text: str, tokens: int) -> None:
    assert parse_count(text) == tokens


@pytest.mark.parametrize(
    "text", ["0", "-5", "abc", "", "1.5K", "12kk", "1.0001k", "0k", "5 tokens"]
)
def test_parse_count_rejects_garbage_with_the_option_name(text: str) -> None:
    with pytest.raises(InputError, match="--sessions"):
        parse_count(text, what="--sessions")


def test_parse_count_list_keeps_order_and_drops_duplicates() -> None:
    assert parse_count_list("32k,8k,32000,128K") == [32_000, 8_000, 131_072]


@pytest.mark.parametrize("text", ["8k,", ",8k", "8k,,16k", " "])
def test_parse_count_list_rejects_empty_items(text: str) -> None:
    with pytest.raises(InputError, match="empty item"):
        parse_count_list(text)


@pytest.mark.parametrize(
    ("text", "hint"),
    [("200,000", "write 200000 or 200k"), ("1,000,000", "write 1000000 or 1m"),
     ("1,500", "write 1500")],
)  # fmt: skip
def test_a_number_with_thousands_separators_is_named_as_such(text: str, hint: str) -> None:
    """``--ctx 200,000`` said "--ctx must be at least 1, got '000'" (issue 54)."""
    with pytest.raises(InputError) as list_error:
        parse_count_list(text, what="--ctx")
    assert list_error.value.message == (
        f"--ctx {text!r}: commas separate values (--ctx 8k,32k is two), not thousands"
    )
    assert list_error.value.hint == hint
    with pytest.raises(InputError) as count_error:
        parse_count(text, what="--sessions")
    assert count_error.value.message == f"--sessions {text!r} is not a count: no commas in a number"
    assert count_error.value.hint == hint
    assert parse_count_list("8k,032") == [8_000, 32]  # a list that is not a grouped number


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["", "k", "m", "K", "M"]))
def test_parse_count_round_trips_integers(number: int, suffix: str) -> None:
    scale = {"": 1, "k": 1000, "m": 10**6, "K": 1024, "M": 1024**2}[suffix]
    assert parse_count(f"{number}{suffix}") == number * scale


def test_format_bytes_shows_decimal_and_binary() -> None:
    assert format_bytes(70_272) == "70.3 kB (68.6 KiB)"
    assert format_bytes(1_405_440_000_000) == "1.41 TB (1.28 TiB)"
    assert format_bytes(999) == "999 B"


@given(
    st.integers(min_value=1, max_value=10**6),
    st.sampled_from(["B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"]),
)
def test_parse_bytes_round_trips_whole_sizes(number: int, unit: str) -> None:
    scale = {
        "B": 1,
        "kB": 10**3,
        "MB": 10**6,
        "GB": 10**9,
        "TB": 10**12,
        "KiB": 2**10,
        "MiB": 2**20,
        "GiB": 2**30,
        "TiB": 2**40,
    }[unit]
    assert parse_bytes(f"{number}{unit}") == number * scale
    assert parse_bytes(f"{number} {unit.lower()}") == number * scale


@pytest.mark.parametrize("text", ["96", "lots", "-1TiB", "0GB", "12 parsecs", ""])
def test_parse_bytes_needs_a_positive_number_and_a_unit(text: str) -> None:
    with pytest.raises(InputError, match="--fsx-capacity"):
        parse_bytes(text)


@given(st.floats(min_value=0.001, max_value=1.0, allow_nan=False))
def test_parse_fraction_accepts_decimals_and_percentages(value: float) -> None:
    assert parse_fraction(repr(value), what="--mfu") == pytest.approx(value)
    assert parse_fraction(f"{value * 100!r}%", what="--mfu") == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "1.5", "-0.2", "abc", "150%"])
def test_parse_fraction_rejects_out_of_range(text: str) -> None:
    with pytest.raises(InputError, match="--mfu"):
        parse_fraction(text, what="--mfu")


@pytest.mark.parametrize("digits", [25, 400, 5000])
def test_a_number_of_thousands_of_digits_is_refused_in_one_line(digits: int) -> None:
    """5,000 digits raised Python's int-conversion ValueError (a traceback in size, advise,
    replay, smoke, bench); 400 digits overflowed a float to inf."""
    huge = "9" * digits
    for parse, text in (
        (parse_count, huge),
        (parse_count, huge + "k"),
        (parse_bytes, huge + "GiB"),
    ):
        with pytest.raises(InputError, match=f"has {digits:,} digits: too large"):
            parse(text, what="--x")
    assert parse_count("9" * 24) == int("9" * 24)  # the bound itself still reads


def test_parse_duration():
    from kvtool.units import parse_duration

    assert parse_duration("90s", what="--grace") == 90.0
    assert parse_duration("30m", what="--grace") == 1800.0
    assert parse_duration("1.5h", what="--grace") == 5400.0
    assert parse_duration("7d", what="--grace") == 7 * 86400.0
    assert parse_duration("2w", what="--grace") == 14 * 86400.0
    for bad in ("7", "soon", "-1d", "1y", "", "0.5", "01"):
        with pytest.raises(InputError, match="is not a duration"):
            parse_duration(bad, what="--max-age")


def test_a_bare_zero_is_a_duration() -> None:
    """0 is no time in any unit (issue 55: gc --grace 0 was refused, only 0s worked); any
    other bare number stays refused (7 could be days or seconds)."""
    from kvtool.units import parse_duration

    for zero in ("0", " 0 ", "0.0", "00"):
        assert parse_duration(zero, what="--grace") == 0.0


def test_a_byte_size_without_its_b_asks_which_was_meant() -> None:
    from kvtool.units import parse_bytes

    with pytest.raises(
        InputError, match=r"--max-size '20G' has no byte unit: did you mean 20GiB or 20GB\?"
    ):
        parse_bytes("20G", what="--max-size")
    with pytest.raises(InputError, match="did you mean 4TiB or 4TB"):
        parse_bytes("4t", what="--fsx-capacity")
    assert parse_bytes("20GiB", what="x") == 20 * 2**30
    assert parse_bytes("20GB", what="x") == 20 * 10**9


def test_a_tiers_tokens_follow_the_one_rule_of_token_counts() -> None:
    """``--t2 10M`` was 10^7 tokens where ``--ctx 10M`` is 10 x 2^20 (issue 54): every token
    count reads k/m as x1000 and K/M as x1024 (vLLM's --max-model-len rule)."""
    from kvtool.units import TierSize, parse_tier_size

    for text in ("20G", "20g", "3M", "3m", "128K", "1.5k", "32768"):
        assert parse_tier_size(text, what="--t1") == TierSize("tokens", parse_count(text))
    assert parse_tier_size("10M", what="--t2") == TierSize("tokens", 10 * 2**20)
    assert parse_tier_size("10m", what="--t2") == TierSize("tokens", 10**7)
    assert parse_tier_size("1.5k", what="--t1") == TierSize("tokens", 1500)
    assert parse_tier_size("20GB", what="--t1") == TierSize("bytes", 20 * 10**9)
    assert parse_tier_size("20GiB", what="--t1") == TierSize("bytes", 20 * 2**30)
