"""How a model is served on a node (tp, engine instances, weights) and what a plan assumes."""

from __future__ import annotations

import pytest

from kvtool.errors import InputError
from kvtool.plan.deployment import make_hardware, plan_contexts
from kvtool.profiles.load import load_node_profile, load_storage_profile

from .conftest import model, shape

FSX = load_storage_profile("fsx")
S3 = load_storage_profile("s3")


def hardware(node: str, **options: object):  # type: ignore[no-untyped-def]
    return make_hardware(load_node_profile(node), FSX, S3, **options)  # type: ignore[arg-type]


def test_vllm_replicates_kv_heads_past_tp_8_so_the_briefs_10_tb_needs_twice_the_hbm() -> None:
    spec, _ = model("llama-3.1-405b")
    common = {"contexts": [200_000], "sessions": 100}
    trn3 = hardware("trn3")
    formula = plan_contexts(shape(spec, "formula", tp=16), hardware=trn3, **common)  # type: ignore[arg-type]
    vllm = plan_contexts(shape(spec, "vllm", tp=16), hardware=trn3, **common)  # type: ignore[arg-type]
    assert formula.plans[0].tiers.total_kv_bytes == pytest.approx(10.3e12, rel=0.01)
    assert formula.plans[0].tiers.fits_in_t1
    assert vllm.plans[0].tiers.total_kv_bytes == 2 * formula.plans[0].tiers.total_kv_bytes
    assert not vllm.plans[0].tiers.fits_in_t1


def test_unsized_t3_states_the_file_system_it_sized_and_what_would_match_the_links() -> None:
    spec, _ = model("llama-3.1-70b")
    result = plan_contexts(
        shape(spec),
        contexts=[131_072],
        sessions=200,
        hardware=hardware("p5en", nodes=2),
    )
    plan = result.plans[0]
    assert plan.file_system.assumed
    assert plan.file_system.capacity_gib % 4800 == 0  # EFA-enabled at 1,000 MB/s/TiB
    assert plan.file_system.capacity_bytes >= plan.tiers.t3_bytes_needed
    assert plan.t3_size.source in ("sized for capacity", "sized for throughput")
    assert plan.t3_size.goal_met
    assert any("no --fsx-capacity: T3 sized by kvtool" in note for note in plan.notes)
    assert any("bound by the file system, not the client links" in note for note in plan.notes)


def test_a_capacity_fsx_cannot_provision_is_refused() -> None:
    with pytest.raises(InputError, match="cannot be provisioned"):
        hardware("p5en", fsx_capacity_bytes=48 * 2**40)
    with pytest.raises(InputError, match=r"use 48,000 GiB or 50,400 GiB"):
        hardware("p5en", fsx_capacity_bytes=48 * 2**40, t3_path="ena")  # not EFA-enabled
    assert hardware("p5en", fsx_capacity_bytes=50_400 * 2**30, t3_path="ena").nodes == 1


def t2_sessions(offload: str | None, **options: object) -> int:
    from kvtool.plan.offload import get_layout

    spec, _ = model("deepseek-r1")
    result = plan_contexts(
        shape(spec, tp=8),  # (the layout search would pick tp 1 x pp 8: one latent copy)
        contexts=[131_072],
        sessions=2_000,
        hardware=hardware("p5en", **options),
        offload=None if offload is None else get_layout(offload),
    )
    return result.plans[0].tiers.tiers[1].sessions


def test_mla_t2_sessions_follow_the_offload_stack() -> None:
    """vLLM's native offload and LMCache keep one MLA copy in host memory; SGLang HiCache and
    KVBM keep one per tensor-parallel rank, so the same DRAM holds 8x fewer sessions at tp 8."""
    assert t2_sessions(None) == t2_sessions("vllm") == t2_sessions("lmcache")
    assert t2_sessions("sglang") == t2_sessions("dynamo")
    assert t2_sessions("vllm") // 8 == t2_sessions("sglang")


def test_lmcache_gds_buffer_comes_out_of_the_kv_space() -> None:
    from kvtool.plan.offload import get_layout

    spec, _ = model("llama-3.1-70b")
    common: dict[str, object] = {
        "contexts": [32_000],
        "sessions": 10,
        "offload": get_layout("lmcache"),
    }
    efa = plan_contexts(shape(spec), hardware=hardware("p5en", t3_path="efa"), **common)  # type: ignore[arg-type]
    gds = plan_contexts(shape(spec), hardware=hardware("p5en", t3_path="efa_gds"), **common)  # type: ignore[arg-type]
    space = efa.plans[0].tiers.kv_space_bytes_per_node - gds.plans[0].tiers.kv_space_bytes_per_node
    assert space == 8 * 8192 * 2**20


def test_kvbm_disk_tier_is_not_called_shared() -> None:
    from kvtool.plan.offload import get_layout

    spec, _ = model("llama-3.1-70b")
    plan = plan_contexts(
        shape(spec),
        contexts=[131_072],
        sessions=400,
        hardware=hardware("p5en"),
        offload=get_layout("dynamo"),
    ).plans[0]
    assert plan.tiers.tiers[2].medium == "FSx for Lustre (private per worker)"
    assert any("not a shared T3" in note for note in plan.notes)


def test_nvfp4_kv_by_gpu_generation() -> None:
    """vLLM 0.33.0: TRT-LLM kernels on Blackwell; FlashInfer's FA2 path with limits on sm80/90;
    nothing on Trainium."""
    spec, _ = model("llama-3.1-70b")
    fp4 = shape(spec, kv_dtype="nvfp4")
    h200 = plan_contexts(fp4, contexts=[8192], sessions=1, hardware=hardware("p5en"))
    (note,) = h200.format_notes
    assert note.startswith("NVIDIA H200 runs an NVFP4 KV cache under vLLM 0.33.0")
    assert note in h200.plans[0].notes
    b200 = plan_contexts(fp4, contexts=[8192], sessions=1, hardware=hardware("p6-b200"))
    assert b200.format_notes == ()
    with pytest.raises(InputError, match="AWS Trainium2 cannot run an NVFP4 KV cache"):
        plan_contexts(fp4, contexts=[8192], sessions=1, hardware=hardware("trn2"))


def test_s3_connections_belong_to_each_instance_of_an_ultraserver() -> None:
    """64 connections for a whole GB200 NVL72 held T4 to 5.4 GB/s; each of its 18 instances
    runs its own engine and connections (85 MB/s each, a request term), the bytes over the
    node's 1,800 Gbps of ENA."""
    spec, _ = model("llama-3.1-70b")
    nvl72 = hardware("u-p6e-gb200x72")
    plan = plan_contexts(shape(spec), contexts=[131_072], sessions=100, hardware=nvl72).plans[0]
    (t4,) = [p for p in plan.paths if p.tier == "T4"]
    assert t4.io_threads == t4.requests.connections == 64 * 18
    assert t4.requests.per_connection_bytes_per_s == 85e6
    assert t4.node_bytes_per_s == pytest.approx(1800e9 / 8)
    assert "1,152 connections (64 x 18 instances)" in t4.description


def test_the_node_s_gpu_decides_vllm_s_block_size() -> None:
    """DeepSeek-R1's MLA runs on FLASH_ATTN_MLA (16-token blocks) on an H200 and on
    FLASHINFER_MLA (32) on a B200; Trainium gets the CUDA rules, with a note saying so."""
    spec, _ = model("deepseek-r1")
    blocks = {
        node: plan_contexts(shape(spec), contexts=[8192], sessions=1, hardware=hardware(node))
        .sizes[0]
        .block_size
        for node in ("p5en", "p6-b200")
    }
    assert blocks == {"p5en": 16, "p6-b200": 32}
    llama, _ = model("llama-3.1-70b")
    trn = plan_contexts(shape(llama), contexts=[8192], sessions=1, hardware=hardware("trn2"))
    assert any("AWS Trainium2 runs vLLM's Neuron plugin" in n for n in trn.sizes[0].notes)


# --- pipeline parallelism and the layout that holds the most sessions ---------------------------


def _plans(model: str, node: str, ctx: int, sessions: int, *, tp: int | None = None, pp: int = 1):  # type: ignore[no-untyped-def]
    from kvtool.inputs.hardware import resolve_hardware
    from kvtool.inputs.shape import resolve_shape
    from kvtool.plan.deployment import plan_contexts

    shape = resolve_shape(model, tp=tp)
    return plan_contexts(shape, contexts=[ctx], sessions=sessions,
                         hardware=resolve_hardware(node), pp=pp)  # fmt: skip


def test_the_ultraserver_holds_all_100_sessions_of_405b_in_one_layout() -> None:
    """The issue's case: tp 8 over 18 engines keeps 18 copies of the weights (45 fit T1); the
    best layout keeps one copy without replicating KV heads, and it holds all 100."""
    (plan,) = _plans("llama-3.1-405b", "trn3-ultraserver", 200_000, 100).plans
    assert (plan.serving.tp, plan.serving.instances, plan.tiers.sessions_per_node_in_t1) == (
        8,
        18,
        45,
    )
    best = plan.best_layout
    assert best is not None
    assert (best.tp, best.pp, best.instances) == (8, 18, 1)
    assert best.sessions_in_t1_per_node >= 100
    (piped,) = _plans("llama-3.1-405b", "trn3-ultraserver", 200_000, 100, tp=8, pp=18).plans
    assert piped.tiers.fits_in_t1
    assert piped.tiers.sessions_per_node_in_t1 == best.sessions_in_t1_per_node
    assert piped.tiers.weights_bytes_per_node == piped.serving.weights_bytes_per_instance


def test_a_pipeline_spares_an_mla_latent_its_replicas() -> None:
    """DeepSeek-R1 at tp 8 caches its latent on every rank; over 8 pipeline stages it is
    cached once, so T1 holds many more sessions (vLLM runs DeepSeek with pipeline parallel)."""
    (plan,) = _plans("deepseek-r1", "p5en", 131_072, 100).plans
    best = plan.best_layout
    assert best is not None
    assert (best.tp, best.pp) == (1, 8)
    assert best.sessions_in_t1_per_node > 5 * plan.tiers.sessions_per_node_in_t1


@pytest.mark.parametrize(
    ("tp", "pp", "message"),
    [(8, 5, "--pp 5 does not divide"), (8, 200, "must be 1 to the model's 126 layers"),
     (16, 16, "--tp 16 x --pp 16 does not divide")],
)  # fmt: skip
def test_a_layout_that_does_not_tile_the_node_is_refused(tp: int, pp: int, message: str) -> None:
    with pytest.raises(InputError, match=message):
        _plans("llama-3.1-405b", "trn3-ultraserver", 8192, 1, tp=tp, pp=pp)


def test_data_parallel_attention_caches_each_latent_once_and_pays_in_weights() -> None:
    from kvtool.model.params import attention_params

    (tp,) = _plans("deepseek-r1", "p5en", 131_072, 100).plans
    from kvtool.inputs.hardware import resolve_hardware
    from kvtool.inputs.shape import resolve_shape
    from kvtool.plan.deployment import plan_contexts

    shape = resolve_shape("deepseek-r1")
    (dp,) = plan_contexts(shape, contexts=[131_072], sessions=100,
                          hardware=resolve_hardware("p5en"), dp_attention=True).plans  # fmt: skip
    assert dp.serving.dp_attention
    assert dp.serving.kv_tp == 1
    extra = dp.serving.weights_bytes_per_instance - tp.serving.weights_bytes_per_instance
    assert extra == attention_params(shape.spec) * 7  # fp8: one byte, on 7 more ranks
    assert dp.tiers.sessions_per_node_in_t1 > 5 * tp.tiers.sessions_per_node_in_t1


def test_data_parallel_attention_is_refused_where_there_is_no_latent() -> None:
    from kvtool.inputs.hardware import resolve_hardware
    from kvtool.inputs.shape import resolve_shape
    from kvtool.plan.deployment import plan_contexts

    with pytest.raises(InputError, match="data-parallel attention for MLA models only"):
        plan_contexts(resolve_shape("llama-3.1-8b"), contexts=[8192], sessions=1,
                      hardware=resolve_hardware("p5"), dp_attention=True)  # fmt: skip


def test_tp_times_pp_past_a_node_runs_the_pipeline_over_nodes() -> None:
    """vLLM's pipeline stages on several nodes: 405B at 1M tokens (516 GB a session) fits an
    engine over 2 p5en (each node holds half the layers: 406 GB of weights, 258 GB a
    session), where one p5en cannot hold one session."""
    from kvtool.inputs.hardware import resolve_hardware
    from kvtool.inputs.shape import resolve_shape
    from kvtool.plan.deployment import plan_contexts

    shape = resolve_shape("llama-3.1-405b", tp=8)
    (plan,) = plan_contexts(shape, contexts=[1_000_000], sessions=2,
                            hardware=resolve_hardware("p5en", nodes="4"), pp=2).plans  # fmt: skip
    assert (plan.hardware.nodes, plan.hardware.engine_nodes) == (2, 2)
    assert (plan.serving.tp, plan.serving.pp, plan.serving.instances) == (8, 2, 1)
    assert plan.tiers.sessions_per_node_in_t1 == 2
    assert plan.tiers.fits_in_t1
    assert plan.verdict is not None
    assert plan.verdict.layout == "tp 8 x pp 2 over 2 nodes"
    with pytest.raises(InputError, match="--nodes 3 is not a whole number of engines over 2"):
        plan_contexts(shape, contexts=[8000], sessions=1,
                      hardware=resolve_hardware("p5en", nodes="3"), pp=2)  # fmt: skip
    with pytest.raises(InputError, match="nor make whole nodes"):
        plan_contexts(
            resolve_shape("llama-3.1-405b", tp=16),
            contexts=[8000],
            sessions=1,
            hardware=resolve_hardware("p5en", nodes="4"),
            pp=2,
        )  # tp across nodes
