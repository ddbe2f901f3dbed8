"""Ready-to-use engine configurations for a tier plan. Pure: returns text.

Every key, flag, unit and default below was read in the released wheels (docs/planning.md,
"Engine configurations", cites file and line; tests/fixtures/engines/ records the key lists):

* **LMCache 0.5.6** (``lmcache/v1/config.py``): ``max_local_cpu_size`` is GiB per worker (one
  worker per GPU; ``int(size * 1024**3)``); an MLA model is saved from the first rank only
  (``save_only_first_rank`` defaults to ``use_mla``), which is sized by
  ``extra_config.first_rank_max_local_cpu_size``; ``fs_connector_use_odirect`` is switched off
  unless ``extra_config.save_chunk_meta`` is false; ``gds_buffer_size`` is MiB of GPU memory per
  worker; neither the fs nor the GDS backend caps or evicts the T3 directory.
* **vLLM 0.33.0**: ``--kv-offloading-size`` is GiB summed over the ranks of one engine;
  the LMCache connector is ``LMCacheConnectorV1`` with ``LMCACHE_CONFIG_FILE``.

Every target writes the plan's own engine: its ``tp`` x ``pp`` layout, block size, KV dtype
and HBM budget (``engine_flags`` below names each engine's flags, read in its released wheel);
a layout an engine cannot run is refused by name, and what a flag cannot carry is said in a
comment.
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
import math
import shlex
from typing import TYPE_CHECKING, Any, NamedTuple

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
    t3_bytes_per_node: int  # what FSx holds: the hot share when the plan releases sessions
    t3_dir: str
    use_gds: bool
    eager: bool
    kvtool_version: str
    has_states: bool = False  # Mamba/GDN layers (TensorRT-LLM needs block reuse off for them)
    # gpu_memory_utilization is a share of the memory the weights leave (TensorRT-LLM's
    # free_gpu_memory_fraction: plan/cluster.py Hardware.pool_of_free), not of all HBM
    pool_of_free: bool = False
    pp: int = 1  # pipeline stages of one engine (tp x pp accelerators)
    dp_attention: bool = False  # attention data-parallel over the tp ranks (MLA)
    block_size: int | None = None  # the plan's KV block (page) in tokens; None: not planned
    max_num_batched_tokens: int | None = None  # the tokens per batch the plan's admission took
    hosts: int = 1  # EC2 instances one engine spans (an UltraServer's, or pipeline over nodes)
    chips_per_host: int = 8
    block_assumed: str = ""  # why the block size is an assumption (kernels kvtool does not model)
    # vLLM's fixed KV budget a rank (--kv-cache-memory-bytes), in place of the HBM share
    kv_cache_memory_bytes: int | None = None
    vllm_release: str = "vLLM 0.33.0"  # the release (or build) whose flags the command takes
    cpu_build: bool = False  # vLLM's CPU build: its KV is host memory already (no T2 offload)
    vllm_t3: str = "lmcache"  # T3 under --emit vllm: LMCache's connector, or "fs" (vLLM's own)
    # the AWS article's T4: the DRA's export policy and the release (plan/release.py)
    t4_lines: tuple[str, ...] = ()
    # sessions released to S3 through the DRA: their files stay in t3_dir at their full size,
    # their data only in S3 (not on FSx's disks)
    released_bytes_per_node: int = 0
    # what spills past T3 with nothing released: S3 through an engine-direct connector, which
    # no configuration here sets up
    t4_bytes_per_node: int = 0
    # LMCache's lookup_timeout_ms where the YAML must set it: the one given (--set
    # lookup_timeout), or where one session's T3 lookup at the plan's context (a stat a chunk,
    # in turn) outlasts LMCache's 3,000 ms default, whole seconds past it; 0: left out
    lookup_timeout_ms: int = 0
    lookup_why: str = ""

    @property
    def ranks(self) -> int:
        """Accelerators (worker processes) of one engine: tp x pp."""
        return self.tp * self.pp

    @property
    def layout(self) -> str:
        """``tp 2 x pp 4``, ``tp 8 with data-parallel attention``."""
        return (
            f"tp {self.tp}"
            + (f" x pp {self.pp}" if self.pp > 1 else "")
            + (" with data-parallel attention" if self.dp_attention else "")
        )

    @property
    def t2_bytes_per_engine(self) -> int:
        """Host memory for one engine instance's offload tier."""
        return self.t2_bytes_per_node // self.instances

    @property
    def t3_bytes_per_engine(self) -> int:
        """File-tier budget for one engine instance (on FSx: the hot share)."""
        return -(-self.t3_bytes_per_node // self.instances)

    @property
    def t3_files_bytes_per_node(self) -> int:
        """The engine's files in ``t3_dir`` at their sizes: the hot share and the released
        one (a released file keeps its name and size; its data is in S3)."""
        return self.t3_bytes_per_node + self.released_bytes_per_node


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
    block_size: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_cache_memory_bytes: int | None = None,
    vllm_release: str = "vLLM 0.33.0",
    cpu_build: bool = False,
    vllm_t3: str = "lmcache",
) -> EmitInputs:
    """What ``emit`` needs from one context's plan: per-node tier sizes, the layout the plan
    chose (tp, pp, data-parallel attention, engines per node) and the session's block size
    and tokens per batch (its ``SizeResult``'s)."""
    from kvtool.plan.release import RELEASED_MEDIUM, release_commands
    from kvtool.plan.serving import engine_hosts, node_gpu

    hardware = plan.hardware
    serving = plan.serving
    per_host = hardware.node.chips_per_instance
    tiers = {t.name: t for t in plan.tiers.tiers}
    # T3 is what FSx holds (the hot share); T4, released through the DRA or spilled past T3,
    # is in S3 and said apart (it was once summed into T3: 231,078 GB a node for the PB case's
    # 37,340 GB on FSx)
    t4 = tiers["T4"]
    released = t4.used_bytes if t4.medium == RELEASED_MEDIUM else 0
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
        pool_of_free=hardware.pool_of_free,
        t2_bytes_per_node=(tiers["T2"].capacity_bytes or 0) // hardware.nodes,
        t3_bytes_per_node=-(-tiers["T3"].used_bytes // hardware.nodes),
        released_bytes_per_node=-(-released // hardware.nodes),
        t4_bytes_per_node=-(-(t4.used_bytes - released) // hardware.nodes),
        t3_dir=t3_dir,
        # the path the nodes really take (no EFA on SCRATCH or PERSISTENT_1, no GDS on Trainium)
        use_gds=t3_client_gbps(hardware.node, hardware.t3, hardware.t3_path)[0] == "efa_gds"
        and hardware.node.gds,
        eager=eager,
        kvtool_version=kvtool_version,
        has_states=has_states,
        pp=serving.pp,
        dp_attention=serving.dp_attention,
        block_size=block_size,
        max_num_batched_tokens=max_num_batched_tokens,
        hosts=engine_hosts(serving, hardware.node),
        chips_per_host=per_host,
        block_assumed=node_gpu(hardware.node).why,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        vllm_release=vllm_release,
        cpu_build=cpu_build,
        vllm_t3=vllm_t3,
        t4_lines=tuple(release_commands(plan.release, t3_dir=t3_dir))
        if plan.release and plan.release.planned and plan.release.spilled_sessions
        else (),
        **_lookup_timeout(plan),
    )


def _lookup_timeout(plan: DeploymentPlan) -> dict[str, Any]:
    """``lookup_timeout_ms`` for LMCache's YAML: as given (``--set lookup_timeout``), or
    where one session's T3 lookup at the plan's context outlasts LMCache's default, so that
    the engine waits for the restore the plan times (past it LMCache answers 0 hits and the
    engine recomputes: v1/config.py:457-461, factory.py:226, zmq_transport.py:119-126)."""
    from kvtool.plan.requests import LMCACHE_S3, times_out

    given = plan.assumptions.lookup_timeout_s
    if given is not None:
        return {"lookup_timeout_ms": math.ceil(given * 1e3), "lookup_why": "--set lookup_timeout"}
    t3 = next((p for p in plan.paths if p.tier == "T3"), None)
    if t3 is None or t3.requests.lookup_s_per_chunk <= 0:
        return {}
    chunks = -(-plan.ctx_tokens // plan.assumptions.chunk_tokens)
    lookup_s = chunks * t3.requests.lookup_s_per_chunk
    if not times_out(lookup_s, LMCACHE_S3.lookup_timeout_s):
        return {}
    return {
        "lookup_timeout_ms": math.ceil(lookup_s) * 1000,
        "lookup_why": (
            f"a session's T3 lookup at {plan.ctx_tokens:,} tokens takes {lookup_s:,.2f} s"
            f" ({chunks:,} chunks, a {t3.requests.lookup_s_per_chunk * 1e6:,.0f} us stat each, in"
            " turn), past LMCache's 3000 default (v1/config.py:457-461): past it the engine"
            " recomputes"
        ),
    }


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


# the targets whose T3 is the shared folder on FSx (Dynamo's KVBM disk tier and TensorRT-LLM
# keep none there), so the AWS article's T4 (export and release) applies to what they write
T3_ON_FSX = ("lmcache", "vllm", "sglang")


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
    lines = makers[target](e).split("\n")
    if target not in T3_ON_FSX:
        return "\n".join(lines)
    # the AWS article's T4 after the header's comments, so a command stays the last line
    at = next((i for i, line in enumerate(lines) if line and not line.startswith("#")), 0)
    return "\n".join([*lines[:at], *e.t4_lines, *lines[at:]])


def _header(e: EmitInputs, what: str) -> list[str]:
    layout = f"{e.instances} engine(s) of {e.layout} per node" if e.instances > 1 else e.layout
    t3 = (
        f"T3 {e.t3_bytes_per_node / 1e9:,.0f} GB on {e.t3_dir}"
        + (" (the hot share on FSx)" if e.released_bytes_per_node else "")
        if e.t3_files_bytes_per_node
        else "no T3"
    )
    if e.released_bytes_per_node:
        t3 += (
            f"; {e.released_bytes_per_node / 1e9:,.0f} GB released to S3 through the data"
            " repository association (files on FSx, data in S3)"
        )
    if e.t4_bytes_per_node:
        t3 += (
            f"; T4 {e.t4_bytes_per_node / 1e9:,.0f} GB past T3 in S3 (an engine-direct"
            " connector, not configured here)"
        )
    engine = [e.layout]
    if e.block_size is not None:
        engine.append(f"{e.block_size}-token blocks")
    engine.append(f"KV {e.kv_dtype}")
    if e.kv_cache_memory_bytes is not None:
        engine.append(f"KV budget {e.kv_cache_memory_bytes:,} B a rank")
    else:
        share = "free_gpu_memory_fraction" if e.pool_of_free else "gpu_memory_utilization"
        engine.append(f"{share} {e.gpu_memory_utilization:g}")
    if e.max_num_batched_tokens is not None:
        engine.append(f"{e.max_num_batched_tokens:,} tokens a batch")
    lines = [
        f"# {what} for {e.model_id} on {e.node_name} ({layout}), generated by kvtool"
        f" {e.kvtool_version}.",
        f"# Plan per engine: {', '.join(engine)}.",
        f"# Plan per node: T2 {e.t2_bytes_per_node / 1e9:,.0f} GB host memory; {t3}.",
    ]
    if e.block_assumed and e.block_size is not None:
        lines.append(
            f"# The {e.block_size}-token block is the plan's assumption: {e.block_assumed}"
        )
    return lines


def _spans(e: EmitInputs, how: str) -> list[str]:
    """A comment for an engine over several EC2 instances: how the engine starts there
    (``how`` may name ``{hosts}`` and ``{last}``, the last node rank)."""
    if e.hosts <= 1:
        return []
    return [
        f"# One engine spans {e.hosts} instances ({e.chips_per_host} accelerators each, {e.ranks}"
        f" ranks): {how.format(hosts=e.hosts, last=e.hosts - 1)}"
    ]


def _floor(value: float, places: int = 0) -> str:
    """``value`` rounded down to ``places`` decimals: a budget never above the plan's."""
    scale = 10**places
    return f"{math.floor(value * scale) / scale:.{places}f}"


def _no_dp_attention(e: EmitInputs, engine: str) -> None:
    """InputError where the plan's data-parallel attention has no equivalent in ``engine``."""
    if e.dp_attention:
        raise InputError(
            f"{engine} has no data-parallel attention inside one tensor-parallel engine as the"
            " plan counts it (attention data-parallel, the MLPs and experts sharded over tp):"
            " vLLM's --data-parallel-size runs whole engines, each with the dense weights"
            if engine.startswith(("vLLM", "LMCache", "Dynamo"))
            else f"kvtool has not read how {engine} runs data-parallel attention",
            "emit sglang (--attn-dp-size), or plan without dp_attention",
        )


def lmcache_yaml(e: EmitInputs) -> str:
    """LMCache 0.5.6 YAML: CPU tier per worker (one worker per GPU: tp x pp of them), T3 on
    FSx (fs or GDS), and the ``vllm serve`` line of the planned engine it runs in."""
    _no_dp_attention(e, "LMCache 0.5.6 (inside vLLM 0.33.0)")
    workers = e.ranks
    lines = _header(e, "LMCache 0.5.6 configuration")
    serve = ["vllm", "serve", e.model_id, *_vllm_serve_args(e)]
    serve += ["--kv-transfer-config", json.dumps(LMCACHE_CONNECTOR, separators=(",", ":"))]
    lines.append("# Use with: LMCACHE_CONFIG_FILE=lmcache.yaml " + shlex.join(serve))
    lines += _spans(e, VLLM_SPAN)
    extra: list[str] = []
    if e.is_mla and e.pp == 1:
        # Only the first rank stores an MLA model (save_only_first_rank); the others receive
        # its chunks by broadcast, so the engine's whole T2 goes to the first rank.
        lines += [
            f"chunk_size: {LMCACHE_CHUNK_TOKENS}",
            "local_cpu: true",
            "max_local_cpu_size: 1.0  # GiB on the other ranks (MLA: they store nothing)",
        ]
        extra.append(
            f"  first_rank_max_local_cpu_size: {_floor(e.t2_bytes_per_engine / GIB, 1)}"
            "  # GiB: MLA is saved from the first rank only"
        )
    else:
        per_worker = e.t2_bytes_per_engine / workers
        lines += [
            f"chunk_size: {LMCACHE_CHUNK_TOKENS}",
            f"local_cpu: {'true' if per_worker >= GIB else 'false'}",
            f"max_local_cpu_size: {_floor(per_worker / GIB, 1)}  # GiB per worker: engine T2 /"
            f" {workers} GPUs",
        ]
        if e.is_mla:
            # the first rank is worker 0 (v1/metadata.py:58, 75-77), which under pipeline
            # parallelism on one node holds only the first stage's layers
            # (integration/vllm/utils.py:524-555): every rank stores its own stage
            extra.append(
                "  save_only_first_rank: false  # pipeline stages: each rank saves its own layers"
            )
    if e.lookup_timeout_ms:
        lines.append(f"lookup_timeout_ms: {e.lookup_timeout_ms}  # {e.lookup_why}")
    lines += [
        "max_local_disk_size: 0",
        "remote_serde: naive",
        "save_decode_cache: false  # chunks generated in decode are not stored (the default)",
        "# LMCache 0.5.6 writes every stored chunk to each backend (CPU and T3) when vLLM saves"
        " it at the end of prefill",
        "# (StorageManager.batched_put, v1/storage_backend/storage_manager.py:386-432): the"
        " eager posture, whatever --posture says (LMCache has no lazy, write-on-eviction, switch)",
    ]
    if e.t3_files_bytes_per_node:
        lines += [
            f"# T3: LMCache enforces no size on {e.t3_dir} and evicts nothing there; the plan"
            f" needs {e.t3_bytes_per_node / 1e9:,.0f} GB per node"
            + (
                f" on FSx (the hot share; the {e.released_bytes_per_node / 1e9:,.0f} GB released"
                " keep their files here, their data in S3)."
                if e.released_bytes_per_node
                else "."
            ),
            "# Remove chunks nobody read for a day yourself, e.g. a cron job on one node:"
            f" kvtool gc {shlex.quote(e.t3_dir)} --max-age 1d",
            "# (whole chunks, every rank's file of one together; one run at a time across"
            " nodes; never a link: docs/gc.md)",
        ]
        if e.released_bytes_per_node:
            lines.append(
                "# The DRA exports DELETED: a chunk gc removes loses its S3 copy too, so"
                " --max-age is how long a released session stays in S3"
            )
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
    if e.kv_dtype in (e.model_dtype, "fp32"):  # (fp32: the model runs in it, --dtype float32)
        return "auto"
    if e.kv_dtype not in VLLM_KV_DTYPES:
        raise InputError(f"vLLM has no --kv-cache-dtype for {e.kv_dtype}")
    return VLLM_KV_DTYPES[e.kv_dtype]


# how a vLLM engine over several instances starts: the mp executor across nodes
# (vllm/config/parallel.py:317-328, 1063-1076; --nnodes, --node-rank and --master-addr at
# engine/arg_utils.py:1175-1178, 0.33.0)
VLLM_SPAN = (
    "start the line on each with --nnodes {hosts} --node-rank 0 to {last} and --master-addr"
    " set to the first one's address"
)


def _vllm_serve_args(e: EmitInputs) -> list[str]:
    """The planned engine as vLLM 0.33.0's flags (engine/arg_utils.py: --pipeline-parallel-size
    1171, --tensor-parallel-size 1209, --block-size 1387, --gpu-memory-utilization 1389,
    --kv-cache-dtype 1397, --max-num-batched-tokens 1740; --kv-cache-memory-bytes, which
    overrides the share, config/cache.py; --dtype float32 for fp32 KV). A --block-size given is
    used as is by the attention backend's choice (v1/attention/selector.py:135,
    platforms/interface.py:771) and raised only to fit a hybrid model's state page, which the
    plan's block already does (interface.py:1105-1107)."""
    _no_dp_attention(e, "vLLM 0.33.0")
    args = ["--tensor-parallel-size", str(e.tp)]
    if e.pp > 1:
        args += ["--pipeline-parallel-size", str(e.pp)]
    if e.block_size is not None:
        args += ["--block-size", str(e.block_size)]
    args += ["--max-model-len", str(e.max_model_len), "--kv-cache-dtype", _vllm_kv_dtype(e)]
    if e.kv_dtype == "fp32":  # vLLM keeps KV in the model's dtype (config/model.py, 0.33.0)
        args += ["--dtype", "float32"]
    if e.kv_cache_memory_bytes is not None:  # (vLLM then ignores gpu_memory_utilization)
        args += ["--kv-cache-memory-bytes", str(e.kv_cache_memory_bytes)]
    else:
        args += ["--gpu-memory-utilization", f"{e.gpu_memory_utilization:g}"]
    if e.max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(e.max_num_batched_tokens)]
    return args


def vllm_command(e: EmitInputs) -> str:
    """``vllm serve`` with native CPU offload for T2, or the LMCache connector when T3 is used."""
    args = ["vllm", "serve", e.model_id, *_vllm_serve_args(e)]
    env = ""
    lines = _header(e, f"{e.vllm_release} command")
    gib = _floor(e.t2_bytes_per_engine / GIB)
    if e.cpu_build:
        lines.append("# No T2 offload: on vLLM's CPU build the KV pool is host memory already")
    elif e.t3_files_bytes_per_node and e.vllm_t3 == "fs":
        args += ["--kv-offloading-backend", "native", "--kv-offloading-size", gib]
        args += [
            "--kv-transfer-config",
            json.dumps(vllm_tiering(e, int(gib)), separators=(",", ":")),
        ]
        lines += [
            f"# T2 and T3 are vLLM's own tiered offload: host memory ({gib} GiB, all ranks), then"
            f" its fs tier in {e.t3_dir}",
            "# (a file per offloaded chunk, rank and KV cache group, v1/kv_offload/file_mapper.py;"
            " nothing caps or evicts the folder: kvtool gc does)",
        ]
    elif e.t3_files_bytes_per_node:
        env = "LMCACHE_CONFIG_FILE=lmcache.yaml "
        args += ["--kv-transfer-config", json.dumps(LMCACHE_CONNECTOR, separators=(",", ":"))]
        lines.append("# T2 and T3 are served by LMCache: write lmcache.yaml with --emit lmcache")
    elif int(gib):
        # GiB summed over the engine's ranks, tp x pp (v1/kv_offload/cpu/spec.py:106-123)
        args += ["--kv-offloading-backend", "native", "--kv-offloading-size", gib]
        lines.append("# --kv-offloading-size: GiB of host memory for this engine, all its ranks")
    lines += _spans(e, VLLM_SPAN)
    if e.instances > 1:
        lines.append(f"# Run {e.instances} of these per node, each on its own {e.ranks} GPUs")
    return "\n".join(lines) + "\n" + env + shlex.join(args) + "\n"


def vllm_tiering(e: EmitInputs, gib: int) -> dict[str, object]:
    """vLLM's own tiered offload (0.32.0 and 0.33.0, the same keys): the OffloadingConnector
    (distributed/kv_transfer/kv_connector/factory.py) with ``TieringOffloadingSpec``
    (v1/kv_offload/factory.py:65-69, ``spec_name``), host memory its primary tier
    (``cpu_bytes_to_use``: bytes over the engine's ranks, v1/kv_offload/cpu/spec.py:100-123;
    --kv-offloading-size sets the same, config/vllm.py:1173-1175) and the ``fs`` secondary tier
    (v1/kv_offload/tiering/factory.py:152-156, ``FileSystemTierManager(root_dir=...)``,
    tiering/fs/manager.py:109-120) on the T3 folder."""
    if gib < 1:
        raise InputError(
            "vLLM's tiered offload needs host memory for its primary tier; the plan gives T2"
            " less than 1 GiB an engine",
            "use --set vllm_t3=lmcache, or a node with more host memory",
        )
    _plain(e.t3_dir, "--t3-dir")
    return {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "spec_name": "TieringOffloadingSpec",
            "cpu_bytes_to_use": gib * GIB,
            "secondary_tiers": [{"type": "fs", "root_dir": e.t3_dir}],
        },
    }


# SGLang's HiCache file tier keeps one .bin file per page and rank
# (mem_cache/storage/file/lru_file_evictor.py:59, 0.5.23): kvtool emits it with pages of at
# least this many tokens
HICACHE_FILE_PAGE_TOKENS = 64


def sglang_command(e: EmitInputs) -> str:
    """SGLang HiCache: the planned engine (sglang/srt/arg_groups/fields/parallel.py:45-90:
    --tp-size, --pp-size, --attn-dp-size; schedule.py:27, 143: --mem-fraction-static,
    --page-size), the exact host pool per rank, FSx as the file backend with a cap."""
    if e.kv_dtype != e.model_dtype and e.kv_dtype not in SGLANG_KV_DTYPES:
        raise InputError(f"SGLang has no --kv-cache-dtype for {e.kv_dtype}")
    page = 1 if e.block_size is None else e.block_size
    if e.t3_files_bytes_per_node and page < HICACHE_FILE_PAGE_TOKENS:
        raise InputError(
            f"SGLang's HiCache file tier writes one file per page and rank"
            f" (mem_cache/storage/file/lru_file_evictor.py:59): at the plan's {page}-token"
            f" pages a {e.max_model_len:,}-token session is"
            f" {-(-e.max_model_len // page):,} files on each rank",
            f"plan with {HICACHE_FILE_PAGE_TOKENS}-token pages: add --set"
            f" block_tokens={HICACHE_FILE_PAGE_TOKENS}",
        )
    per_rank_gb = int(e.t2_bytes_per_engine / e.ranks // 1e9)
    args = ["python", "-m", "sglang.launch_server", "--model-path", e.model_id]
    args += ["--tp-size", str(e.tp)]
    if e.pp > 1:
        args += ["--pp-size", str(e.pp)]
    if e.dp_attention:  # attention data-parallel over the tp ranks, the FFN tensor-parallel
        args += ["--attn-dp-size", str(e.tp)]
    args += [
        "--context-length",
        str(e.max_model_len),
        "--kv-cache-dtype",
        "auto" if e.kv_dtype == e.model_dtype else SGLANG_KV_DTYPES[e.kv_dtype],
        "--mem-fraction-static",
        f"{e.gpu_memory_utilization:g}",
        "--page-size",
        str(page),
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
    copy = e.is_mla and not e.dp_attention
    lines.append(
        f"# --hicache-size: whole GB of host memory per rank ({e.ranks} ranks"
        + (", each a full copy of an MLA cache" if copy else "")
        + ")"
    )
    if e.t3_files_bytes_per_node:
        # MLA files have one writer a pipeline stage, its first tensor-parallel rank
        # (mem_cache/hicache_storage.py:68-74, 749-750); GQA ranks, and attention-data-parallel
        # ranks, own their own. The cap counts released files too: the evictor sums each
        # file's st_size (lru_file_evictor.py:300-304, 0.5.23), which a release keeps, so a
        # cap of the hot share alone would delete the sessions the plan releases to S3
        owners = e.pp if copy else e.ranks
        files_per_engine = -(-e.t3_files_bytes_per_node // e.instances)
        cap_gb = int(files_per_engine / owners // 1e9)
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
            + (
                f" (MLA: the first rank of each of {e.pp} stages writes them all)"
                if copy and e.pp > 1
                else " (MLA: the first rank writes them all)"
                if copy
                else f" ({e.ranks} ranks)"
            )
            + (
                ", released ones included (a released file keeps its size; a cap of the hot"
                " share would delete them)"
                if e.released_bytes_per_node
                else ""
            )
        )
    # --nnodes, --node-rank, --dist-init-addr: fields/parallel.py:43-44 (0.5.23)
    lines += _spans(
        e,
        "start the line on each with --nnodes {hosts} --node-rank 0 to {last} and"
        " --dist-init-addr set to the first one's address:port",
    )
    if e.instances > 1:
        lines.append(f"# Run {e.instances} of these per node, each on its own {e.ranks} GPUs")
    return "\n".join(lines) + "\n" + " ".join([*env, shlex.join(args)]) + "\n"


def dynamo_env(e: EmitInputs) -> str:
    """Dynamo KVBM: host pool per engine, the connector through --kv-transfer-config, the
    planned engine as vLLM's flags (dynamo.vllm adds vLLM's own: dynamo/vllm/args.py:137)."""
    lines = _header(e, "NVIDIA Dynamo 1.6.1 KVBM environment")
    lines.append(
        f"export DYN_KVBM_CPU_CACHE_GB={_floor(e.t2_bytes_per_engine / 1e9)}"
        "  # decimal GB for this engine, all its ranks"
        + (" (each rank keeps a full MLA copy)" if e.is_mla else "")
    )
    if e.t3_files_bytes_per_node:
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
    lines += _spans(e, VLLM_SPAN)
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
    _no_dp_attention(e, "TensorRT-LLM 1.2.1")
    dtype = "auto" if e.kv_dtype == e.model_dtype else TRTLLM_KV_DTYPES[e.kv_dtype]
    per_rank = e.t2_bytes_per_engine // e.ranks
    serve = ["trtllm-serve", e.model_id, "--backend", "pytorch", "--tp_size", str(e.tp)]
    if e.pp > 1:  # --pp_size: commands/serve.py (tests/fixtures/engines/trtllm-1.2.1-args.json)
        serve += ["--pp_size", str(e.pp)]
    serve += [
        "--max_seq_len", str(e.max_model_len),
        "--kv_cache_free_gpu_memory_fraction", f"{e.gpu_memory_utilization:g}",
        "--extra_llm_api_options", TRTLLM_OPTIONS_FILE,
    ]  # fmt: skip
    lines = _header(e, "TensorRT-LLM 1.2.1 configuration")
    lines += [
        f"# Save the YAML below as {TRTLLM_OPTIONS_FILE} and start the engine with:",
        "# " + shlex.join(serve),
        "kv_cache_config:",
        "  # a fraction of the memory left after the weights and the profiling run, not of"
        " HBM: the plan's",
        "  # T1 took it of what the weights and a 2 GB a chip activation reserve leave",
        f"  free_gpu_memory_fraction: {e.gpu_memory_utilization:g}",
        f"  enable_block_reuse: {'false' if e.has_states else 'true'}"
        + ("  # MambaHybridCacheManager needs it off" if e.has_states else ""),
        f"  dtype: {dtype}",
        f"  tokens_per_block: {32 if e.block_size is None else e.block_size}",
    ]
    if per_rank:
        lines.append(
            f"  host_cache_size: {per_rank}  # bytes of host memory per rank ({e.ranks} ranks"
            + (", each a full MLA copy" if e.is_mla else "")
            + ")"
        )
    if e.t3_files_bytes_per_node:
        lines += [
            "# T3: TensorRT-LLM 1.2.1 keeps no file tier of its own; the plan's"
            f" {e.t3_bytes_per_node / 1e9:,.0f} GB a node on {e.t3_dir}",
            "# needs a KV connector (kv_connector_config) such as LMCache's or Dynamo KVBM's.",
        ]
    lines += _spans(
        e,
        "kvtool has not read how TensorRT-LLM 1.2.1 starts one engine across instances"
        f" (trtllm-serve's --gpus_per_node {e.chips_per_host} is the accelerators of each)",
    )
    if e.instances > 1:
        lines.append(f"# Run {e.instances} of these per node, each on its own {e.ranks} GPUs")
    return "\n".join(lines) + "\n"
