"""The front door's shape: what the user typed (model, engine, dtype, tp, block size) into one
KvShape, each mistake one InputError naming the option."""

from __future__ import annotations

import pytest

from kvtool.errors import InputError
from kvtool.inputs.shape import parse_chunk_tokens, resolve_shape, unused_shape_options
from kvtool.profiles.resolve import resolve_model


def test_strings_become_one_shape() -> None:
    shape = resolve_shape("Llama-3.1-70B", engine="sglang", kv_dtype="fp8", tp="8", block_size="32")
    assert shape.spec.name == "llama-3.1-70b"
    assert shape.rules.name == "sglang"
    assert shape.fmt.name == "fp8_e4m3"
    assert (shape.tp, shape.tp_given, shape.block_size) == (8, True, 32)


def test_defaults_are_the_models_dtype_vllm_and_an_unchosen_tp() -> None:
    shape = resolve_shape("deepseek-r1")
    assert (shape.rules.name, shape.fmt.name, shape.tp, shape.tp_given) == (
        "vllm",
        "bf16",
        1,
        False,
    )
    assert shape.block_size is None


def test_a_model_already_resolved_is_not_read_again() -> None:
    resolved = resolve_model("llama-3.1-8b")
    assert resolve_shape(resolved).spec is resolved.spec


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"engine": "tgi"}, "unknown --engine 'tgi'"),
        ({"kv_dtype": "fp7"}, "fp7"),
        ({"tp": "two"}, "--tp"),
        ({"block_size": "x"}, "--block-tokens 'x' is not a number of tokens"),
        ({"block_size": "4M"}, "--block-tokens '4M' is not a number of tokens"),  # was 4,194,304
        ({"block_size": str(2**64)}, "past any engine's context"),  # was taken as it was
        ({"block_size": 2**31, "engine": "sglang"}, "at most 2,147,483,647 tokens"),
        ({"block_size": "17"}, "need a multiple of 16 tokens"),
        ({"block_size": "16", "engine": "formula"}, "--block-tokens has no effect"),
    ],
)
def test_each_mistake_names_its_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        resolve_shape("llama-3.1-8b", **options)  # type: ignore[arg-type]


def test_chunk_tokens_parse_like_counts() -> None:
    assert parse_chunk_tokens("256") == 256
    assert parse_chunk_tokens("1K") == 1024
    assert parse_chunk_tokens(64) == 64
    with pytest.raises(InputError, match="--chunk-tokens"):
        parse_chunk_tokens("lots")


def test_shape_options_without_a_model_are_checked_and_noted() -> None:
    """``--tp abc`` and ``--chunk-tokens nan`` passed without a model were accepted silently
    by bench, doctor and replay: a typo is refused whether or not the option has an effect."""
    for options, message in (
        ({"tp": "abc"}, "--tp 'abc' is not a count"),
        ({"chunk_tokens": "nan"}, "--chunk-tokens 'nan' is not a count"),
        ({"engine": "tgi"}, "unknown --engine"),
        ({"kv_dtype": "fp7"}, "unknown --kv-dtype"),
    ):
        with pytest.raises(InputError, match=message):
            unused_shape_options(**options)  # type: ignore[arg-type]
    assert unused_shape_options() == []
    assert unused_shape_options(chunk_tokens="256", kv_dtype="AUTO") == []
    notes = unused_shape_options(tp="2", engine="sglang", chunk_tokens="512", why="no chunks")
    assert notes == [
        "--tp has no effect without --model (no chunks)",
        "--engine has no effect without --model (no chunks)",
        "--chunk-tokens has no effect without --model (no chunks)",
    ]


def test_model_lists_split_on_commas_unless_the_text_is_a_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kvtool.inputs.shape import split_models

    assert split_models("llama-3.1-8b") == ["llama-3.1-8b"]
    assert split_models("llama-3.1-8b, deepseek-r1") == ["llama-3.1-8b", "deepseek-r1"]
    odd = tmp_path / "a,b.json"
    odd.write_text("{}")
    assert split_models(str(odd)) == [str(odd)]
    with pytest.raises(InputError, match="empty name"):
        split_models("a,,b")
    with pytest.raises(InputError, match="empty name"):
        split_models("a,")
    with pytest.raises(InputError, match="names 'a' twice"):
        split_models("a,b,a")


def _state_bytes(shape: object) -> int:
    result = shape.size(1, 1)  # type: ignore[attr-defined]
    return sum(g.bytes_per_rank_per_session for g in result.groups if g.fixed_bytes_per_session)


def test_state_dtype_sets_every_recurrent_state_as_the_engines_own_setting_does() -> None:
    """vLLM's --mamba-ssm-cache-dtype: Qwen3-Next's GDN state (32 heads of 128 x 128) in fp32
    instead of the model's bf16; the conv window stays in the model dtype. SGLang's
    --mamba-ssm-dtype is checked against SGLang's own code in test_sglang_state.py."""
    auto = resolve_shape("qwen3-next-80b-a3b", engine="formula")
    fp32 = resolve_shape("qwen3-next-80b-a3b", engine="formula", state_dtype="float32")
    assert _state_bytes(fp32) - _state_bytes(auto) == 36 * 32 * 128 * 128 * 2
    assert fp32.spec.notes[-1] == "recurrent states in fp32 (--state-dtype)"
    vllm = resolve_shape("qwen3-next-80b-a3b", state_dtype="bf16")
    assert vllm.spec.notes[-1] == (
        "recurrent states in bf16 (--state-dtype: vLLM's --mamba-ssm-cache-dtype)"
    )
    untouched = resolve_shape("qwen3-next-80b-a3b", state_dtype="AUTO").spec
    assert not any("--state-dtype" in note for note in untouched.notes)


@pytest.mark.parametrize(
    ("model", "engine", "value", "message"),
    [
        ("qwen3-next-80b-a3b", "vllm", "int8", "is not one of auto, fp32, bf16, fp16"),
        ("qwen3-next-80b-a3b", "hf", "bf16", "transformers 5.25 DynamicCache has no setting"),
        ("llama-3.1-8b", "vllm", "bf16", "llama-3.1-8b has no recurrent-state layers"),
        ("kimi-k3", "vllm", "fp16", "KDA state in fp32 or bf16 only"),
        ("minimax-m1", "vllm", "fp32", "lightning attention's state in the KV cache dtype"),
    ],
)
def test_a_state_dtype_the_engine_has_no_setting_for_is_one_clear_error(
    model: str, engine: str, value: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        resolve_shape(model, engine=engine, state_dtype=value)
