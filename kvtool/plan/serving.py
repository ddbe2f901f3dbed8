"""How the engine runs a model on a node: tensor- and pipeline-parallel sizes, engine instances,
the weights each holds (``choose_serving``), the GPU whose kernels decide the block size
(``node_gpu``), and of every layout the one that holds the most sessions (``best_layout``).
Pure."""

from __future__ import annotations

from dataclasses import dataclass

from kvtool.errors import InputError
from kvtool.model.backends import ASSUMED_GPU, Gpu, gpu_of
from kvtool.model.params import (
    WEIGHT_BYTES,
    ParamCount,
    attention_params,
    count_params,
    replica_bytes,
    weights_dtype_of,
)
from kvtool.model.shape import KvShape
from kvtool.model.spec import ModelSpec
from kvtool.plan.cluster import Hardware
from kvtool.plan.placement import (
    GPU_MEMORY_UTILIZATION,
    PRESSURE_FRACTION,
    PlanInputs,
    kv_space_per_node,
)
from kvtool.profiles.hardware import NodeProfile
from kvtool.units import format_bytes


@dataclass(frozen=True)
class Serving:
    """How the engine runs the model on one node: ``tp`` x ``pp`` chips per engine instance
    (tensor parallel within a pipeline stage, ``pp`` stages each holding its share of the
    layers: vLLM's ``--pipeline-parallel-size``), ``instances`` per node, each holding one
    full copy of the weights."""

    tp: int
    instances: int
    weights_dtype: str
    weights_bytes_per_instance: int
    notes: tuple[str, ...] = ()
    pp: int = 1
    # data-parallel attention (MLA models): each of the tp ranks attends for its own sessions,
    # holding their latents whole (one copy), with the attention weights on every rank
    dp_attention: bool = False

    @property
    def kv_tp(self) -> int:
        """The ranks a session's KV is sharded or replicated over: 1 under DP attention."""
        return 1 if self.dp_attention else self.tp

    @property
    def weights_bytes_per_node(self) -> int:
        """Every instance on the node holds the whole model."""
        return self.weights_bytes_per_instance * self.instances


def engine_hosts(serving: Serving, node: NodeProfile) -> int:
    """The EC2 instances one engine spans: its tp x pp accelerators over those of one instance
    (an UltraServer's instances, or nodes a pipeline runs over)."""
    return max(1, -(-serving.tp * serving.pp // node.chips_per_instance))


def choose_serving(
    spec: ModelSpec,
    params: ParamCount,
    node: NodeProfile,
    *,
    tp: int | None,
    weights_dtype: str = "auto",
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    pp: int = 1,
    dp_attention: bool = False,
    pool_of_free: bool = False,
) -> Serving:
    """The engine layout on ``node``. ``tp`` None chooses the chips of one EC2 instance (one
    engine per instance, tensor-parallel over NVLink/NeuronLink), doubled until the weights
    leave room for KV; ``weights_dtype`` ``auto`` is the checkpoint's own format; ``pp``
    pipeline stages multiply the chips an engine spans.

    Raises InputError for a ``tp`` x ``pp`` that does not divide the node's chips, more stages
    than layers, or an unknown dtype.
    """
    dtype = weights_dtype_of(spec, weights_dtype)
    weights = replica_bytes(spec, params, weights_dtype)
    notes: list[str] = []
    if pp < 1 or pp > spec.num_layers:
        raise InputError(f"--pp {pp} must be 1 to the model's {spec.num_layers} layers",
                         "each pipeline stage holds at least one layer")  # fmt: skip
    if node.chips % pp:
        raise InputError(f"--pp {pp} does not divide {node.name}'s {node.chips} accelerators",
                         f"pick a divisor of {node.chips}")  # fmt: skip
    if dp_attention and not spec.is_mla:
        raise InputError(f"kvtool models data-parallel attention for MLA models only, and"
                         f" {spec.name} caches full K and V", "drop --dp-attention")  # fmt: skip
    if tp is None:
        tp, why = _default_tp(spec, node, weights, gpu_memory_utilization, pp, pool_of_free)
        notes.append(
            f"--tp not given: tp {tp} ({why}), {node.chips // (tp * pp)} engine instance(s) per"
            " node, each with its own copy of the weights"
        )
    elif node.chips % (tp * pp):
        raise InputError(
            f"--tp {tp}" + (f" x --pp {pp}" if pp > 1 else "")
            + f" does not divide {node.name}'s {node.chips} accelerators",
            f"pick a divisor of {node.chips}; kvtool plans whole engine instances per node",
        )  # fmt: skip
    if dp_attention and tp > 1:
        extra = int(attention_params(spec) * WEIGHT_BYTES[dtype] * (tp - 1))
        weights += extra
        notes.append(
            f"data-parallel attention: each of the {tp} ranks holds whole latents for its own"
            f" sessions (one copy, not {tp}) and the attention weights whole, {format_bytes(extra)}"
            " more per engine than tensor-parallel attention (an estimate: the attention"
            " projections counted again on each rank; experts and MLPs stay sharded)"
        )
    return Serving(
        tp=tp,
        instances=node.chips // (tp * pp),
        weights_dtype=dtype,
        weights_bytes_per_instance=weights,
        notes=tuple(notes),
        pp=pp,
        dp_attention=dp_attention,
    )


def _default_tp(
    spec: ModelSpec, node: NodeProfile, weights: int, utilization: float, pp: int = 1,
    pool_of_free: bool = False,
) -> tuple[int, str]:  # fmt: skip
    """The chips of one instance (over ``pp`` stages), or the largest size below it that
    divides the attention heads (engines shard heads evenly), doubled while the weights leave
    no room for KV."""
    heads = spec.num_attention_heads
    chips = node.chips // pp
    options = [t for t in range(1, chips + 1) if chips % t == 0 and heads % t == 0]
    start = max([t for t in options if t * pp <= node.chips_per_instance] or [1])
    for tp in (t for t in options if t >= start):
        if _room_for_kv(node, weights * (chips // tp), utilization, pool_of_free):
            break
    if tp == node.chips_per_instance:
        return tp, "the chips of one instance"
    if tp == start:
        return tp, f"the largest size within one instance that divides {heads} attention heads"
    return tp, "the weights need it"


def _room_for_kv(
    node: NodeProfile, weights_per_node: int, utilization: float, pool_of_free: bool = False
) -> bool:
    probe = PlanInputs(
        node=node,
        nodes=1,
        weights_bytes=weights_per_node,
        kv_bytes_per_session=1,
        sessions=1,
        gpu_memory_utilization=utilization,
        pool_of_free=pool_of_free,
    )
    return kv_space_per_node(probe) > 0


def capability_family(node: NodeProfile) -> int | None:
    """The accelerator's compute-capability family (90 for an H200); None when not NVIDIA or
    not known."""
    gpu = gpu_of(node.accelerator)
    return None if gpu is None else gpu.capability[0] * 10


def kv_format_notes(shape: KvShape, node: NodeProfile) -> list[str]:
    """Whether ``node``'s accelerators run ``shape``'s KV format under its engine: InputError
    when they cannot, a note when they can only with limits."""
    if not shape.fmt.name.startswith("nvfp4"):
        return []
    rules = shape.rules
    if not (rules.nvfp4_kv_families or rules.nvfp4_kv_limited_families):
        return [f"kvtool has not checked which GPUs run an NVFP4 KV cache under {rules.source}"]
    family = capability_family(node)
    if family in rules.nvfp4_kv_families:
        return []
    if family in rules.nvfp4_kv_limited_families:
        return [
            f"{node.accelerator} runs an NVFP4 KV cache under {rules.source} only through"
            " FlashInfer's FA2 path: plain nvfp4, not at head_size 64, not with attention sinks"
        ]
    raise InputError(
        f"{node.accelerator} cannot run an NVFP4 KV cache under {rules.source}",
        "use --kv-dtype fp8, or Blackwell nodes (p6-b200, p6-b300, p6e-gb200)",
    )


def node_gpu(node: NodeProfile) -> Gpu:
    """The GPU whose vLLM kernels decide block sizes on ``node``; an H100/H200 assumed (and
    said) for an accelerator kvtool knows no CUDA capability for (Trainium)."""
    gpu = gpu_of(node.accelerator)
    if gpu is not None:
        return gpu
    return ASSUMED_GPU._replace(
        why=f"{node.accelerator} runs vLLM's Neuron plugin, whose kernels kvtool does not model"
    )


@dataclass(frozen=True)
class Layout:
    """One serving layout on a node and what it does with HBM: sessions of the context under
    the 85% line, the copies of the weights it keeps, and its cross-chip traffic per decoded
    token (an estimate: bf16 activations, two ring all-reduces a layer over ``tp``, one
    hand-off at each of ``pp - 1`` stage boundaries)."""

    tp: int
    pp: int
    instances: int
    sessions_in_t1_per_node: int
    bytes_moved_per_token: float
    dp_attention: bool = False


def best_layout(shape: KvShape, hardware: Hardware, *, weights_dtype: str, ctx_tokens: int,
                max_num_batched_tokens: int | None = None, extra_reserve_bytes_per_chip: int = 0,
                dp_attention: bool = True) -> Layout | None:  # fmt: skip
    """Of every tp (dividing the attention heads) x pp (at most the layers) that tiles the
    node's chips, the one holding the most sessions of ``ctx_tokens`` in T1; ties go to more
    engines, then fewer pipeline stages (a deep pipeline adds latency to every token). Data-
    parallel attention is weighed for MLA models unless ``dp_attention`` is False. None when
    no layout leaves room for KV."""
    spec, node = shape.spec, hardware.node
    params = count_params(spec)
    dtype = weights_dtype_of(spec, weights_dtype)
    weights = replica_bytes(spec, params, weights_dtype)
    extra_per_rank = int(attention_params(spec) * WEIGHT_BYTES[dtype])  # DP attention's, a rank
    heads = spec.num_attention_heads
    within = node.chips // hardware.engine_nodes  # tensor parallel within a node (over_nodes)
    best: tuple[tuple[int, int, int, bool], Layout] | None = None
    for tp in (t for t in range(1, within + 1) if node.chips % t == 0 and heads % t == 0):
        for dp in (False, True) if spec.is_mla and tp > 1 and dp_attention else (False,):
            priced = shape.serving_tp(1 if dp else tp).on_gpu(node_gpu(node))
            try:
                size = priced.size(ctx_tokens, 1, max_num_batched_tokens=max_num_batched_tokens)
            except InputError:
                continue  # a layout the engine refuses for this model
            admitted = max(size.kv_bytes_per_session, size.admission_bytes_per_session or 0)
            per_instance = weights + (extra_per_rank * (tp - 1) if dp else 0)
            rest = node.chips // tp
            for pp in (p for p in range(1, rest + 1) if rest % p == 0 and p <= spec.num_layers):
                instances = rest // pp
                space = kv_space_per_node(PlanInputs(
                    node=node, nodes=1, weights_bytes=per_instance * instances,
                    kv_bytes_per_session=1, sessions=1,
                    gpu_memory_utilization=hardware.gpu_memory_utilization,
                    pool_of_free=hardware.pool_of_free,
                    extra_reserve_bytes_per_chip=extra_reserve_bytes_per_chip,
                ))  # fmt: skip
                if space <= 0 or not admitted:
                    continue
                sessions = int(space * PRESSURE_FRACTION) // admitted
                moved = spec.hidden_size * 2 * (4 * spec.num_layers * (tp - 1) / tp + (pp - 1))
                layout = Layout(tp, pp, instances, sessions, moved, dp)
                key = (sessions, instances, -pp, not dp)
                if best is None or key > best[0]:
                    best = (key, layout)
    return None if best is None else best[1]
