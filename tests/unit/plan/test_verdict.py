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
