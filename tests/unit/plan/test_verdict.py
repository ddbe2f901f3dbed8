"""A plan's one-line verdict: all sessions in HBM or not, on what, in which layout; and each
try that would make it fit, planned again (never guessed)."""

from __future__ import annotations

from kvtool.inputs.hardware import resolve_hardware
from kvtool.inputs.shape import resolve_shape
from kvtool.plan.deployment import plan_contexts


def _plan(name: str, ctx: int, sessions: int, node: str, **options: object):  # type: ignore[no-untyped-def]
    tp = options.pop("tp", None)
    kv_dtype = str(options.pop("kv_dtype", "auto"))
    shape = resolve_shape(name, tp=tp, kv_dtype=kv_dtype)  # type: ignore[arg-type]
    hardware = resolve_hardware(node, **options)  # type: ignore[arg-type]
    return plan_contexts(shape, contexts=[ctx], sessions=sessions, hardware=hardware).plans[0]


def test_the_articles_10_tb_fits_one_trn3_ultraserver_by_default() -> None:
    verdict = _plan("llama-3.1-405b", 200_000, 100, "trn3-ultraserver").verdict
    assert verdict is not None
    assert verdict.text == (
        "fits: 100 of 100 sessions in T1 (53% of HBM's KV space), 1 x trn3-ultraserver,"
        " tp 8 x pp 18"
    )
    assert verdict.tries == ()


def test_each_try_is_the_plan_made_again_with_that_change() -> None:
    plan = _plan("llama-3.1-405b", 200_000, 100, "trn3-ultraserver", tp=8)
    verdict = plan.verdict
    assert verdict is not None
    assert not verdict.fits
    assert (verdict.sessions_in_t1, verdict.layout) == (45, "tp 8")
    tries = {" ".join(t.options): t for t in verdict.tries}
    assert list(tries) == ["--kv-dtype fp8", "--nodes 3", "--tp 8 --pp 18"]
    for options, kwargs in (
        ("--kv-dtype fp8", {"tp": 8, "kv_dtype": "fp8"}),
        ("--nodes 3", {"tp": 8, "nodes": "3"}),
    ):
        again = _plan("llama-3.1-405b", 200_000, 100, "trn3-ultraserver", **kwargs)
        t1 = again.tiers.tiers[0]
        assert (tries[options].fits, tries[options].sessions_in_t1) == (
            again.tiers.fits_in_t1, t1.sessions,
        )  # fmt: skip
    assert tries["--nodes 3"].fits
    assert tries["--tp 8 --pp 18"].fits
    assert not tries["--kv-dtype fp8"].fits
    assert verdict.text.startswith("does not fit: 45 of 100 sessions in T1 (83% of HBM's KV")
    assert verdict.text.endswith(
        "; try --kv-dtype fp8 (91 in T1, 84%), --nodes 3 (fits, 62%), --tp 8 --pp 18 (fits, 53%)"
    )


def test_an_eight_bit_cache_is_not_told_to_try_fp8() -> None:
    verdict = _plan("llama-3.1-70b", 128_000, 500, "p5en", kv_dtype="fp8").verdict
    assert verdict is not None
    assert not verdict.fits
    assert all(t.options[0] != "--kv-dtype" for t in verdict.tries)
    assert any(t.options[0] == "--nodes" and t.fits for t in verdict.tries)


def _rescued(name: str, ctx: int, node: str, **options: object):  # type: ignore[no-untyped-def]
    from kvtool.profiles.load import node_profiles

    shape = resolve_shape(name, kv_dtype=str(options.pop("kv_dtype", "auto")))
    hardware = resolve_hardware(node, **options)  # type: ignore[arg-type]
    return plan_contexts(shape, contexts=[ctx], sessions=1, hardware=hardware,
                         rescue_from=node_profiles())  # fmt: skip


def test_a_session_larger_than_a_node_is_a_verdict_with_computed_tries() -> None:
    """The issue's case: Llama 3.1 405B at 1M tokens is 516 GB of KV a session in bf16 over
    a p5en's 244 GB line, and 258 GB in fp8: still over. Each try is the plan made again."""
    planned = _rescued("llama-3.1-405b", 1_000_000, "p5en")
    assert planned.plans == ()
    (refused,) = planned.unservable
    verdict = refused.verdict
    assert not verdict.fits
    assert "one session (516 GB (481 GiB) of KV as the engine admits it) does not fit" in (
        verdict.refused
    )
    tries = {" ".join(t.options): t for t in verdict.tries}
    assert list(tries) == [
        "--tp 8 --pp 2 --nodes 2",  # the pipeline over the fewest nodes
        "--kv-dtype fp8 --tp 8 --pp 2 --nodes 2",  # fp8 alone (258 GB) is still over a node
        "--hardware p6-b300",  # the smallest NVIDIA node that holds it (p6-b200 does not)
    ]
    for options, kwargs in (
        ("--tp 8 --pp 2 --nodes 2", {}),
        ("--kv-dtype fp8 --tp 8 --pp 2 --nodes 2", {"kv_dtype": "fp8"}),
    ):
        shape = resolve_shape("llama-3.1-405b", tp=8, **kwargs)  # type: ignore[arg-type]
        hardware = resolve_hardware("p5en", nodes="2")
        again = plan_contexts(shape, contexts=[1_000_000], sessions=1, hardware=hardware, pp=2)
        t1 = again.plans[0].tiers.tiers[0]
        assert (tries[options].fits, tries[options].sessions_in_t1) == (True, t1.sessions)
        assert tries[options].hbm_utilization == t1.utilization
    assert tries["--tp 8 --pp 2 --nodes 2"].hbm_utilization > 2 * (
        tries["--kv-dtype fp8 --tp 8 --pp 2 --nodes 2"].hbm_utilization * 0.99
    )
    assert verdict.text.startswith("does not fit: one session (516 GB")
    assert "tp 8; try --tp 8 --pp 2 --nodes 2 (fits, 37%)" in verdict.text


def test_weights_that_fill_a_node_get_no_fp8_cache_try() -> None:
    (refused,) = _rescued("llama-3.1-405b", 8000, "p4d").unservable
    assert "leave no room for KV" in refused.verdict.refused
    options = [" ".join(t.options) for t in refused.verdict.tries]
    assert options[0] == "--tp 8 --pp 3 --nodes 3"
    assert not any("--kv-dtype" in o for o in options)  # the KV is not what is over


def test_without_rescue_a_node_too_small_is_refused() -> None:
    import pytest

    from kvtool.plan.placement import NodeTooSmall

    with pytest.raises(NodeTooSmall, match="does not fit under the 85% line"):
        _plan("llama-3.1-405b", 1_000_000, 1, "p5en")
