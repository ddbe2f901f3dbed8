"""kvtool size's and plan's one library call: options as typed into sizes, plans or an emitted
configuration; every mistake one InputError, the notes kept even when a later option is one."""

import pytest

from kvtool.errors import InputError
from kvtool.inputs.size import MAX_CONTEXT_TOKENS, SizeRequest, size_models


def test_one_model_is_sized_at_each_context() -> None:
    notes: list[str] = []
    answer = size_models(SizeRequest("llama-3.1-8b", ctx="8000,32000", sessions="4"), notes)
    (one,) = answer.sized
    assert [r.ctx_tokens for r in one.results] == [8000, 32000]
    assert [r.sessions for r in one.results] == [4, 4]
    assert one.plans == ()
    assert answer.emitted is None
    assert answer.weights is None  # a single table does not show them
    # 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes (bf16)
    assert one.results[0].kv_bytes_per_token == 32 * 8 * 128 * 2 * 2


def test_weights_are_in_a_comparison_and_in_json() -> None:
    several = size_models(SizeRequest("llama-3.1-8b,deepseek-r1", ctx="32k"), [])
    assert several.weights is not None
    assert len(several.weights) == 2
    assert all(one.unique for one in several.sized)
    as_json = size_models(SizeRequest("llama-3.1-8b", as_json=True), [])
    assert as_json.weights is not None
    assert len(as_json.weights) == 1


def test_a_note_is_kept_when_a_later_option_is_a_mistake() -> None:
    notes: list[str] = []
    with pytest.raises(InputError, match="unknown --engine"):
        size_models(SizeRequest("llama-3.1-8b", nodes="4", engine="nosuch"), notes)
    assert notes == ["--nodes has no effect without --hardware"]


def test_a_context_past_32_bit_positions_is_refused() -> None:
    with pytest.raises(InputError, match="past any engine's context"):
        size_models(SizeRequest("llama-3.1-8b", ctx=str(MAX_CONTEXT_TOKENS + 1)), [])


def test_emit_returns_the_configuration_and_no_sizes() -> None:
    request = SizeRequest(
        "llama-3.1-70b", hardware="p5en", ctx="32k", sessions="8", emit="vllm",
        kvtool_version="9.9.9",
    )  # fmt: skip
    answer = size_models(request, [])
    assert answer.sized == ()
    assert answer.emitted is not None
    assert "9.9.9" in answer.emitted


def test_a_plan_has_one_deployment_plan_per_context() -> None:
    answer = size_models(SizeRequest("llama-3.1-70b", hardware="p5en", ctx="8000,32000"), [])
    (one,) = answer.sized
    assert [p.ctx_tokens for p in one.plans] == [8000, 32000]


def test_a_request_takes_only_the_options_it_names() -> None:
    request = SizeRequest("llama-3.1-8b", ctx="32k", hardware="p5en")
    assert (request.model, request.ctx, request.sessions, request.hardware) == (
        "llama-3.1-8b", "32k", "1", "p5en",
    )  # fmt: skip
    again = request.replace(kvtool_version="9.9.9", ctx="8k")
    assert (again.ctx, again.hardware, again.kvtool_version, request.ctx) == (
        "8k", "p5en", "9.9.9", "32k",
    )  # fmt: skip
    with pytest.raises(TypeError, match="no option 'nodez'"):
        SizeRequest("llama-3.1-8b", nodez="4")
