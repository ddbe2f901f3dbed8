"""The errors library code raises: a message, an optional hint shown after it, and the
hierarchy the CLI relies on to map bad input to exit status 2."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import ConfigError, InputError, KvtoolError


def test_the_hint_follows_the_message_in_parentheses() -> None:
    error = KvtoolError("--tp 3 does not divide 8 heads", "use --tp 1, 2, 4 or 8")
    assert str(error) == "--tp 3 does not divide 8 heads (use --tp 1, 2, 4 or 8)"
    assert error.message == "--tp 3 does not divide 8 heads"
    assert error.hint == "use --tp 1, 2, 4 or 8"


def test_without_a_hint_the_message_stands_alone() -> None:
    error = KvtoolError("no such model")
    assert str(error) == "no such model"
    assert error.hint == ""
    assert str(KvtoolError("no such model", "")) == "no such model"


def test_the_exception_args_hold_only_the_message() -> None:
    error = InputError("bad --ctx", "use e.g. 128k")
    assert error.args == ("bad --ctx",)


def test_input_and_config_errors_are_caught_as_their_parents() -> None:
    assert issubclass(InputError, KvtoolError)
    assert issubclass(ConfigError, InputError)
    assert not issubclass(KvtoolError, InputError)
    with pytest.raises(InputError, match=r"^config\.json lacks num_layers \(add it\)$"):
        raise ConfigError("config.json lacks num_layers", "add it")
    with pytest.raises(KvtoolError) as caught:
        raise InputError("--nodes must be at least 1")
    assert type(caught.value) is InputError
    assert caught.value.message == "--nodes must be at least 1"


def test_a_kvtool_error_is_not_an_input_error() -> None:
    with pytest.raises(KvtoolError) as caught:
        raise KvtoolError("internal")
    assert not isinstance(caught.value, InputError)


@given(st.text(), st.text())
def test_str_is_the_message_then_any_hint(message: str, hint: str) -> None:
    for cls in (KvtoolError, InputError, ConfigError):
        error = cls(message, hint)
        assert str(error) == (f"{message} ({hint})" if hint else message)
        assert (error.message, error.hint) == (message, hint)


def test_credentials_in_urls_are_redacted() -> None:
    from kvtool.errors import redact

    assert redact('could not reach "http://admin:s3cret@10.0.0.1:9000/b"') == (
        'could not reach "http://***@10.0.0.1:9000/b"'
    )
    assert (
        redact("s3://bucket/prefix and https://host/x") == "s3://bucket/prefix and https://host/x"
    )


def test_a_control_character_is_any_below_space_or_del() -> None:
    from kvtool.errors import has_control_character

    for text in ("a\nb", "\t", "x\x00", "\x1b[K", "end\x7f"):
        assert has_control_character(text), repr(text)
    for text in ("", "/fsx/kv cache", "naïve:;#", "\u0080\u00a0"):
        assert not has_control_character(text), repr(text)
