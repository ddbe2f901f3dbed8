"""Ready-to-use engine configurations for a tier plan. Pure: returns text.

Every key, flag, unit and default below was read in the released wheels (docs/planning.md,
"Engine configurations", cites file and line; tests/fixtures/engines/ records the key lists):

* **LMCache 0.5.6** (``lmcache/v1/config.py``): ``max_local_cpu_size`` is GiB per worker (one
  worker per GPU; ``int(size * 1024**3)``); an MLA model is saved from the first rank only
  (``save_only_first_rank`` defaults to ``use_mla``), which is sized by
  ``extra_config.first_rank_max_local_cpu_size``; ``fs_connector_use_odirect`` is switched off
  unless ``extra_config.save_chunk_meta`` is false; ``gds_buffer_size`` is MiB of GPU memory per
  worker; neither the fs nor the GDS backend caps or evicts the T3 directory.
* **vLLM 0.33.0**: ``--kv-offloading-size`` is GiB summed over the TP ranks of one engine;
  the LMCache connector is ``LMCacheConnectorV1`` with ``LMCACHE_CONFIG_FILE``.
* **SGLang 0.5.23**: ``--hicache-size`` is whole GB per rank; ``--hicache-ratio`` would scale a
  device pool set by ``--mem-fraction-static``, so both exact values are emitted instead; the
  file tier is capped per rank by ``SGLANG_HICACHE_FILE_BACKEND_MAX_SIZE`` over the files the
  rank owns (every rank for GQA, the first rank for MLA).
* **Dynamo KVBM 1.6.1**: ``--connector kvbm`` is rejected; the connector goes in through
  ``--kv-transfer-config`` (``DynamoConnector`` from ``kvbm.vllm_integration.connector``);
  ``DYN_KVBM_CPU_CACHE_GB`` and ``DYN_KVBM_DISK_CACHE_GB`` are decimal GB per engine; the disk
  tier is a private, unlinked file per worker, so it is never a shared T3.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, NamedTuple

from kvtool.errors import InputError, has_control_character
from kvtool.plan.offload import GDS_BUFFER_MIB
from kvtool.plan.reload import t3_client_gbps

if TYPE_CHECKING:
    from kvtool.plan.deployment import DeploymentPlan

EMIT_TARGETS = ("lmcache", "vllm", "sglang", "dynamo", "trtllm")
# the serving engine each configuration runs in: a plan sized by another engine's rules
# would put that engine's numbers into this one's flags (LMCache and KVBM as vLLM connectors)
EMIT_ENGINE = {
    "lmcache": "vllm", "vllm": "vllm", "sglang": "sglang", "dynamo": "vllm", "trtllm": "trtllm"
}  # fmt: skip


def check_emit_target(target: str, engine: str) -> None:
    """InputError when ``target``'s configuration is for another engine than the one whose
    rules sized the plan (``size --engine sglang --emit vllm``)."""
    wanted = EMIT_ENGINE.get(target)
    if wanted is None:
        raise InputError(f"unknown --emit {target!r}", "choose one of " + ", ".join(EMIT_TARGETS))
    if wanted != engine:
        raise InputError(
            f"--emit {target} configures {wanted}, but the plan is sized by --engine {engine}'s"
            " rules",
            f"add --engine {wanted} (or emit the {engine} configuration)",
        )


GIB = 2**30

# kvtool --kv-dtype -> each engine's own name (vLLM CacheDType, SGLang --kv-cache-dtype choices)
VLLM_KV_DTYPES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "fp8_per_token_head": "fp8_per_token_head",
    "int8": "int8_per_token_head",
    "int4": "int4_per_token_head",
    "nvfp4": "nvfp4",
}
SGLANG_KV_DTYPES = {
    "bf16": "bf16",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "nvfp4": "nvfp4",
}
LMCACHE_CHUNK_TOKENS = 256
DYNAMO_CONNECTOR = {
    "kv_connector": "DynamoConnector",
    "kv_connector_module_path": "kvbm.vllm_integration.connector",
    "kv_role": "kv_both",
}
LMCACHE_CONNECTOR = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


class EmitInputs(NamedTuple):
    """What the configurations are generated from: the plan's sizes per node, in bytes, and
    the serving layout (``tp`` chips per engine, ``instances`` engines per node)."""

    model_id: str
    node_name: str
    tp: int
    instances: int
    max_model_len: int
    kv_dtype: str
    model_dtype: str
    is_mla: bool
    gpu_memory_utilization: float
    t2_bytes_per_node: int
    t3_bytes_per_node: int
    t3_dir: str
    use_gds: bool
    eager: bool
    kvtool_version: str
    has_states: bool = False  # Mamba/GDN layers (TensorRT-LLM needs block reuse off for them)

    @property
    def t2_bytes_per_engine(self) -> int:
        """Host memory for one engine instance's offload tier."""
        return self.t2_bytes_per_node // self.instances

    @property
    def t3_bytes_per_engine(self) -> int:
        """File-tier budget for one engine instance."""
        return -(-self.t3_bytes_per_node // self.instances)


def emit_inputs(
    plan: DeploymentPlan,
    *,
    model_id: str,
    kv_dtype: str,
    model_dtype: str,
    is_mla: bool,
    t3_dir: str,
    eager: bool,
    kvtool_version: str,
    has_states: bool = False,
) -> EmitInputs:
    """What ``emit`` needs from one context's plan: per-node tier sizes and the layout."""
    hardware = plan.hardware
    tiers = {t.name: t for t in plan.tiers.tiers}
    t3_used = tiers["T3"].used_bytes + tiers["T4"].used_bytes
    if not t3_dir.strip():
        raise InputError("--t3-dir is empty", "give the T3 folder, e.g. /fsx/kvcache")
    _plain(t3_dir, "--t3-dir")
    _plain(model_id, "the model id")
    return EmitInputs(
        model_id=model_id,
        node_name=hardware.node.name,
        tp=plan.serving.tp,
        instances=plan.serving.instances,
        max_model_len=plan.ctx_tokens,
        kv_dtype=kv_dtype,
        model_dtype=model_dtype,
        is_mla=is_mla,
        gpu_memory_utilization=hardware.gpu_memory_utilization,
        t2_bytes_per_node=(tiers["T2"].capacity_bytes or 0) // hardware.nodes,
        t3_bytes_per_node=-(-t3_used // hardware.nodes),
        t3_dir=t3_dir,
        # the path the nodes really take (no EFA on SCRATCH or PERSISTENT_1, no GDS on Trainium)
        use_gds=t3_client_gbps(hardware.node, hardware.t3, hardware.t3_path)[0] == "efa_gds"
        and hardware.node.gds,
        eager=eager,
        kvtool_version=kvtool_version,
        has_states=has_states,
    )


def _yaml_str(text: str) -> str:
    """A YAML string scalar for ``text``, quoted and escaped (a JSON string is one)."""
    return json.dumps(text)


def _plain(text: str, what: str) -> str:
    """``text`` for a configuration line; InputError for a control character, which could
    start a line of its own (a YAML key, a shell command) in what kvtool emits."""
    if has_control_character(text):
        raise InputError(
            f"{what} {text!r} holds a control character (a line break?)",
            "give a path or name without one",
        )
    return text


def emit(target: str, e: EmitInputs) -> str:
    """The configuration for ``target`` (one of EMIT_TARGETS)."""
    makers = {
        "lmcache": lmcache_yaml,
        "vllm": vllm_command,
        "sglang": sglang_command,
        "dynamo": dynamo_env,
        "trtllm": trtllm_config,
    }
    if target not in makers:
        raise InputError(f"unknown --emit {target!r}", "choose one of " + ", ".join(EMIT_TARGETS))
    return makers[target](e)


def _header(e: EmitInputs, what: str) -> list[str]:
    layout = f"{e.instances} engine(s) of tp {e.tp} per node" if e.instances > 1 else f"tp {e.tp}"
    t3 = f"T3 {e.t3_bytes_per_node / 1e9:,.0f} GB on {e.t3_dir}" if e.t3_bytes_per_node else "no T3"
    return [
        f"# {what} for {e.model_id} on {e.node_name} ({layout}), generated by kvtool"
        f" {e.kvtool_version}.",
        f"# Plan per node: T2 {e.t2_bytes_per_node / 1e9:,.0f} GB host memory; {t3}.",
    ]


def _gib(num_bytes: float) -> str:
    return f"{num_bytes / GIB:.1f}"


def lmcache_yaml(e: EmitInputs) -> str:
    """LMCache 0.5.6 YAML: CPU tier per worker (one worker per GPU), T3 on FSx (fs or GDS)."""
    workers = e.tp
    lines = _header(e, "LMCache 0.5.6 configuration")
    lines.append(
        "# Use with: LMCACHE_CONFIG_FILE=lmcache.yaml vllm serve ... --kv-transfer-config"
        f" '{json.dumps(LMCACHE_CONNECTOR, separators=(',', ':'))}'"
    )
    extra: list[str] = []
    if e.is_mla:
        # Only the first rank stores an MLA model (save_only_first_rank); the others receive
        # its chunks by broadcast, so the engine's whole T2 goes to the first rank.
        lines += [
            f"chunk_size: {LMCACHE_CHUNK_TOKENS}",
            "local_cpu: true",
            "max_local_cpu_size: 1.0  # GiB on the other ranks (MLA: they store nothing)",
        ]
        extra.append(
            f"  first_rank_max_local_cpu_size: {_gib(e.t2_bytes_per_engine)}"
            "  # GiB: MLA is saved from the first rank only"
        )
    else:
        per_worker = e.t2_bytes_per_engine / workers
        lines += [
            f"chunk_size: {LMCACHE_CHUNK_TOKENS}",
            f"local_cpu: {'true' if per_worker >= GIB else 'false'}",
            f"max_local_cpu_size: {_gib(per_worker)}  # GiB per worker: engine T2 / {workers} GPUs",
        ]
    lines += [
        "max_local_disk_size: 0",
        "remote_serde: naive",
        "save_decode_cache: false  # chunks generated in decode are not stored (the default)",
        "# LMCache 0.5.6 writes every stored chunk to each backend (CPU and T3) when vLLM saves"
        " it at the end of prefill",
        "# (StorageManager.batched_put, v1/storage_backend/storage_manager.py:386-432): the"
        " eager posture, whatever --posture says (LMCache has no lazy, write-on-eviction, switch)",
    ]
    if e.t3_bytes_per_node:
        lines += [
            f"# T3: LMCache enforces no size on {e.t3_dir} and evicts nothing there; the plan"
            f" needs {e.t3_bytes_per_node / 1e9:,.0f} GB per node.",
            f"# Remove chunks nobody read for a day yourself, e.g. a cron job: find"
            f" {shlex.quote(e.t3_dir)} -type f -amin +1440 -delete",
            "# (last access: relatime records it at most once a day; on a noatime mount it"
            " never moves, and this deletes by age, chunks still being read included)",
        ]
        if e.use_gds:
            lines += [
                "# T3 through GPUDirect Storage (cuFile) on FSx for Lustre",
                f"gds_path: {_yaml_str(e.t3_dir)}",
                f"gds_buffer_size: {GDS_BUFFER_MIB}  # MiB of GPU memory per worker; the plan"
                " takes it from the KV space",
            ]
        else:
            lines += [
                "# T3 through LMCache's file-system plugin, with O_DIRECT",
                'remote_storage_plugins: ["fs"]',
            ]
            extra = [
                f"  remote_storage_plugin.fs.base_path: {_yaml_str(e.t3_dir)}",
                "  save_chunk_meta: false  # O_DIRECT is turned off while chunk metadata is saved",
                "  fs_connector_use_odirect: true",
                *extra,
            ]
    if extra:
        lines += ["extra_config:", *extra]
    return "\n".join(lines) + "\n"


def _vllm_kv_dtype(e: EmitInputs) -> str:
    if e.kv_dtype == e.model_dtype:
        return "auto"
    if e.kv_dtype not in VLLM_KV_DTYPES:
        raise InputError(f"vLLM has no --kv-cache-dtype for {e.kv_dtype}")
    return VLLM_KV_DTYPES[e.kv_dtype]


def _vllm_serve_args(e: EmitInputs) -> list[str]:
    return [
        "--tensor-parallel-size",
        str(e.tp),
        "--max-model-len",
        str(e.max_model_len),
        "--kv-cache-dtype",
        _vllm_kv_dtype(e),
        "--gpu-memory-utilization",
        f"{e.gpu_memory_utilization:g}",
    ]


def vllm_command(e: EmitInputs) -> str:
    """``vllm serve`` with native CPU offload for T2, or the LMCache connector when T3 is used."""
    args = ["vllm", "serve", e.model_id, *_vllm_serve_args(e)]
    env = ""
    lines = _header(e, "vLLM 0.33.0 command")
    if e.t3_bytes_per_node:
        env = "LMCACHE_CONFIG_FILE=lmcache.yaml "
        args += ["--kv-transfer-config", json.dumps(LMCACHE_CONNECTOR, separators=(",", ":"))]
        lines.append("# T2 and T3 are served by LMCache: write lmcache.yaml with --emit lmcache")
    elif e.t2_bytes_per_node:
        args += [
            "--kv-offloading-backend",
            "native",
            "--kv-offloading-size",
            f"{e.t2_bytes_per_engine / GIB:.0f}",
        ]
        lines.append("# --kv-offloading-size: GiB of host memory for this engine, all its ranks")
    if e.instances > 1:
        lines.append(f"# Run {e.instances} of these per node, each on its own {e.tp} GPUs")
    return "\n".join(lines) + "\n" + env + shlex.join(args) + "\n"


def sglang_command(e: EmitInputs) -> str:
    """SGLang HiCache: the exact host pool per rank, FSx as the file backend with a cap."""
    if e.kv_dtype != e.model_dtype and e.kv_dtype not in SGLANG_KV_DTYPES:
        raise InputError(f"SGLang has no --kv-cache-dtype for {e.kv_dtype}")
    per_rank_gb = int(e.t2_bytes_per_engine / e.tp // 1e9)
    args = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        e.model_id,
        "--tp-size",
        str(e.tp),
        "--context-length",
        str(e.max_model_len),
        "--kv-cache-dtype",
        "auto" if e.kv_dtype == e.model_dtype else SGLANG_KV_DTYPES[e.kv_dtype],
        "--mem-fraction-static",
        f"{e.gpu_memory_utilization:g}",
        "--page-size",
        "64",
        "--enable-hierarchical-cache",
        "--hicache-size",
        str(per_rank_gb),
        "--hicache-write-policy",
        "write_through" if e.eager else "write_back",
        "--hicache-io-backend",
        "kernel",
        "--hicache-mem-layout",
        "page_first",
    ]
    env: list[str] = []
    lines = _header(e, "SGLang 0.5.23 HiCache command")
    lines.append(
        f"# --hicache-size: whole GB of host memory per rank ({e.tp} ranks"
        + (", each a full copy of an MLA cache" if e.is_mla else "")
        + ")"
    )
    if e.t3_bytes_per_node:
        owners = 1 if e.is_mla else e.tp  # MLA files have one writer; GQA ranks own their own
        cap_gb = int(e.t3_bytes_per_engine / owners // 1e9)
        env = [
            f"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR={shlex.quote(e.t3_dir)}",
            f"SGLANG_HICACHE_FILE_BACKEND_MAX_SIZE={cap_gb}G",
        ]
        args += [
            "--hicache-storage-backend",
            "file",
            "--hicache-storage-prefetch-policy",
            "wait_complete",
        ]
        lines.append(
            "# SGLANG_HICACHE_FILE_BACKEND_MAX_SIZE caps the files each rank owns"
            + (" (MLA: the first rank writes them all)" if e.is_mla else f" ({e.tp} ranks)")
        )
    return "\n".join(lines) + "\n" + " ".join([*env, shlex.join(args)]) + "\n"


def dynamo_env(e: EmitInputs) -> str:
    """Dynamo KVBM: host pool per engine, the connector through --kv-transfer-config."""
    lines = _header(e, "NVIDIA Dynamo 1.6.1 KVBM environment")
    lines.append(
        f"export DYN_KVBM_CPU_CACHE_GB={e.t2_bytes_per_engine / 1e9:.0f}"
        "  # decimal GB for this engine, all its ranks"
        + (" (each rank keeps a full MLA copy)" if e.is_mla else "")
    )
    if e.t3_bytes_per_node:
        lines += [
            "# KVBM's disk tier is a private file per worker, unlinked when it exits: on FSx it",
            "# would NOT be a shared T3 (no prefix hits across nodes, nothing survives a",
            f"# restart), so it is not pointed at {e.t3_dir}. For the shared T3 the plan needs"
            f" ({e.t3_bytes_per_node / 1e9:,.0f} GB a node)",
            "# use --emit lmcache or --emit sglang. KVBM's disk tier belongs on the node's",
            "# local NVMe (the AWS Deep Learning AMI mounts the instance store at",
            "# /opt/dlami/nvme); size it to what that disk holds.",
            f"# export DYN_KVBM_DISK_CACHE_GB={e.t3_bytes_per_engine / 1e9:.0f}  # at most the"
            " local NVMe's free space",
            "# export DYN_KVBM_DISK_CACHE_DIR=/opt/dlami/nvme/kvbm",
            "# export DYN_KVBM_DISK_ZEROFILL_FALLBACK=1  # only where fallocate() fails; any"
            " value turns it on",
        ]
    args = [
        "python",
        "-m",
        "dynamo.vllm",
        "--model",
        e.model_id,
        *_vllm_serve_args(e),
        "--kv-transfer-config",
        json.dumps(DYNAMO_CONNECTOR, separators=(",", ":")),
    ]
    lines.append(shlex.join(args))
    return "\n".join(lines) + "\n"


# kvtool --kv-dtype -> TensorRT-LLM 1.2.1's kv_cache_config.dtype (_VALID_KV_CACHE_DTYPES:
# auto, fp8, nvfp4; _torch/pyexecutor/model_loader.py)
TRTLLM_KV_DTYPES = {"fp8_e4m3": "fp8", "nvfp4": "nvfp4"}
TRTLLM_OPTIONS_FILE = "extra_llm_api_options.yaml"


def trtllm_config(e: EmitInputs) -> str:
    """TensorRT-LLM 1.2.1 (PyTorch backend): the ``extra_llm_api_options`` YAML
    (``KvCacheConfig``, llmapi/llm_args.py:1627) and the ``trtllm-serve`` line
    (``commands/serve.py``); the YAML overrides the flags (``update_llm_args_with_extra_dict``).
    The host tier is ``host_cache_size``, bytes per rank; TensorRT-LLM has no file tier."""
    if e.kv_dtype != e.model_dtype and e.kv_dtype not in TRTLLM_KV_DTYPES:
        raise InputError(f"TensorRT-LLM 1.2.1 has no kv_cache_config.dtype for {e.kv_dtype}")
    dtype = "auto" if e.kv_dtype == e.model_dtype else TRTLLM_KV_DTYPES[e.kv_dtype]
    per_rank = e.t2_bytes_per_engine // e.tp
    serve = [
        "trtllm-serve", e.model_id, "--backend", "pytorch", "--tp_size", str(e.tp),
        "--max_seq_len", str(e.max_model_len), "--kv_cache_free_gpu_memory_fraction", "0.9",
        "--extra_llm_api_options", TRTLLM_OPTIONS_FILE,
    ]  # fmt: skip
    lines = _header(e, "TensorRT-LLM 1.2.1 configuration")
    lines += [
        f"# Save the YAML below as {TRTLLM_OPTIONS_FILE} and start the engine with:",
        "# " + shlex.join(serve),
        "kv_cache_config:",
        "  # a fraction of the memory left after the weights and the profiling run, not of"
        " HBM: the plan's",
        f"  # T1 assumed gpu_memory_utilization {e.gpu_memory_utilization:g} of HBM",
        "  free_gpu_memory_fraction: 0.9",
        f"  enable_block_reuse: {'false' if e.has_states else 'true'}"
        + ("  # MambaHybridCacheManager needs it off" if e.has_states else ""),
        f"  dtype: {dtype}",
        "  tokens_per_block: 32",
    ]
    if per_rank:
        lines.append(
            f"  host_cache_size: {per_rank}  # bytes of host memory per rank ({e.tp} ranks"
            + (", each a full MLA copy" if e.is_mla else "")
            + ")"
        )
    if e.t3_bytes_per_node:
        lines += [
            "# T3: TensorRT-LLM 1.2.1 keeps no file tier of its own; the plan's"
            f" {e.t3_bytes_per_node / 1e9:,.0f} GB a node on {e.t3_dir}",
            "# needs a KV connector (kv_connector_config) such as LMCache's or Dynamo KVBM's.",
        ]
    if e.instances > 1:
        lines.append(f"# Run {e.instances} of these per node, each on its own {e.tp} GPUs")
    return "\n".join(lines) + "\n"
