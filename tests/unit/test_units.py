"""Token counts follow vLLM's --max-model-len suffix rule; byte formats show both unit systems."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.units import format_bytes, parse_count, parse_count_list


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


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["", "k", "m", "K", "M"]))
def test_parse_count_round_trips_integers(number: int, suffix: str) -> None:
    scale = {"": 1, "k": 1000, "m": 10**6, "K": 1024, "M": 1024**2}[suffix]
    assert parse_count(f"{number}{suffix}") == number * scale


def test_format_bytes_shows_decimal_and_binary() -> None:
    assert format_bytes(70_272) == "70.3 kB (68.6 KiB)"
    assert format_bytes(1_405_440_000_000) == "1.41 TB (1.28 TiB)"
    assert format_bytes(999) == "999 B"
