"""A model on a cluster: how it is served, and each context's full plan. Pure.

``plan_contexts`` is what ``kvtool plan`` calls: it chooses how the engine runs the
model on a node (``choose_serving``: tensor-parallel size, engine instances per node, weights),
prices a session at each context under that layout, places the sessions in the tiers
(``placement``) and weighs reloading against recomputing (``reload``). Profiles arrive loaded;
nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kvtool.errors import InputError
from kvtool.model.engines import BatchedTokens, batched_tokens
from kvtool.model.formats import resolve_format
from kvtool.model.kv import SizeResult
from kvtool.model.params import (
    ParamCount,
    count_params,
)
from kvtool.model.shape import KvShape
from kvtool.model.spec import ModelSpec
from kvtool.plan.cluster import Hardware, client_path, make_hardware, over_nodes, uses_gds
from kvtool.plan.fsx import FileSystem
from kvtool.plan.measured import apply_measured
from kvtool.plan.offload import LAYOUTS, OffloadLayout, copies_divisor
from kvtool.plan.placement import (
    NodeTooSmall,
    PlanInputs,
    TierPlan,
    plan_tiers,
)
from kvtool.plan.plan_notes import (
    folder_notes,
    lookup_timeout_notes,
    offload_notes,
    s3_out_reads,
    t3_notes,
)
from kvtool.plan.release import Release, hydrated, release_idle
from kvtool.plan.reload import (
    BreakEven,
    Compute,
    ReloadAssumptions,
    TierPath,
    break_even,
    crossover_tokens,
    fan_in_per_s,
    node_compute,
    restore,
    t3_client_gbps,
)
from kvtool.plan.requests import RestoreTerms, key_scheme
from kvtool.plan.serving import (
    Layout,
    Serving,
    best_layout,
    capability_family,
    choose_serving,
    engine_hosts,
    kv_format_notes,
    node_gpu,
)
from kvtool.plan.t3_size import GIVEN, T3Size, plan_t3, read_paths
from kvtool.plan.verdict import Replan, Verdict, judge, rescue
from kvtool.plan.workload import Workload
from kvtool.profiles.hardware import NodeProfile

__all__ = [
    "BREAK_EVEN_CONTEXTS", "ContextPlans", "DeploymentPlan", "FanIn", "Hardware", "Layout",
    "Serving", "Unservable", "WorkloadPlan", "best_layout", "capability_family", "choose_serving",
    "client_path", "engine_hosts", "kv_format_notes", "make_hardware", "node_batched_tokens",
    "node_gpu", "offload_divisors", "place_sessions", "plan_assumptions", "plan_contexts",
    "plan_deployment", "plan_workload", "serve", "serve_chosen", "uses_gds",
]  # fmt: skip

BREAK_EVEN_CONTEXTS = (1_000, 4_000, 10_000, 32_000, 50_000, 128_000, 200_000, 1_000_000)
ARTICLE_CHEAP_TOKENS = 10_000  # the article: below 10K tokens recompute is cheap


def workers_storing(serving: Serving, t3_divisor: int) -> int:
    """Files (T3) or objects (T4) one chunk is stored as: one per worker of the engine (tp x
    pp ranks, each saving its share), or fewer where the stack saves an MLA latent once
    (``t3_divisor`` = tp: one per pipeline stage). Llama 3.1 405B at tp 8 x pp 18: 144."""
    return max(1, serving.tp * serving.pp // t3_divisor)


def offload_divisors(
    offload: OffloadLayout, *, is_mla: bool, tp: int, pp: int = 1, hosts: int = 1
) -> dict[str, int]:
    """How many times smaller a session is in T2 and T3 than in HBM (``plan/offload.py``)."""
    return {
        t: copies_divisor(offload, t, is_mla=is_mla, tp=tp, pp=pp, hosts=hosts)
        for t in ("T2", "T3")
    }


def place_sessions(
    hardware: Hardware,
    serving: Serving,
    *,
    is_mla: bool,
    session_bytes: int,
    sessions: int,
    admission_bytes: int | None,
    offload: OffloadLayout,
    kv_pool_bytes_per_instance: int | None = None,
) -> TierPlan:
    """Place ``sessions`` of ``session_bytes`` on ``hardware`` under ``serving``: the one
    assembly of placement's inputs that ``kvtool plan``, ``advise`` and ``check``
    share (the engine's admission charge, the offload stack's copies, the GPU memory the GDS
    path pins, the HBM share the engine may use). Raises InputError when the weights or one
    session do not fit a node."""
    divisors = offload_divisors(offload, is_mla=is_mla, tp=serving.kv_tp, pp=serving.pp,
                                hosts=engine_hosts(serving, hardware.node))  # fmt: skip
    gds = uses_gds(hardware)
    return plan_tiers(
        PlanInputs(
            node=hardware.node,
            nodes=hardware.nodes,
            weights_bytes=serving.weights_bytes_per_node,
            kv_bytes_per_session=session_bytes,
            sessions=sessions,
            fsx_capacity_bytes=hardware.fsx_capacity_bytes,
            gpu_memory_utilization=hardware.gpu_memory_utilization,
            pool_of_free=hardware.pool_of_free,
            extra_reserve_bytes_per_chip=offload.gpu_reserve_mib_with_gds * 2**20 if gds else 0,
            t1_admission_bytes_per_session=admission_bytes,
            measured_kv_space_bytes_per_node=None
            if kv_pool_bytes_per_instance is None
            else kv_pool_bytes_per_instance * serving.instances,
            measured_t2_bytes_per_node=None
            if hardware.host_pool_bytes_per_instance is None
            else hardware.host_pool_bytes_per_instance * serving.instances,
            t2_bytes_per_session=session_bytes // divisors["T2"],
            t3_bytes_per_session=session_bytes // divisors["T3"],
            t3_medium="FSx for Lustre (shared)"
            if offload.t3_shared
            else "FSx for Lustre (private per worker)",
        )
    )


@dataclass(frozen=True)
class FanIn:
    """Cache-hit sessions per second one node can pull from T3 over one client path."""

    path: str
    link_gbps: float
    bytes_per_s: float
    sessions_per_s: float
    seconds_per_session: float


@dataclass(frozen=True)
class DeploymentPlan:
    """Everything ``kvtool plan`` reports for one context length."""

    ctx_tokens: int
    hardware: Hardware
    serving: Serving
    tiers: TierPlan
    file_system: FileSystem
    t3_size: T3Size
    compute: Compute
    notes: tuple[str, ...]
    paths: tuple[TierPath, ...]
    crossovers: dict[str, int | None]
    break_even: tuple[BreakEven, ...]
    fan_in: tuple[FanIn, ...]
    assumptions: ReloadAssumptions
    best_layout: Layout | None = None  # the layout holding the most sessions in T1
    verdict: Verdict | None = None  # the one line first, with its tries
    # each path's restore of the plan's concurrent sessions at ctx_tokens, term by term
    restores: dict[str, RestoreTerms] = field(default_factory=dict)
    release: Release | None = None  # the AWS article's T4: idle sessions released to S3

    @property
    def weights_dtype(self) -> str:
        """The weight format the plan priced."""
        return self.serving.weights_dtype


def plan_deployment(
    spec: ModelSpec,
    params: ParamCount,
    *,
    ctx_tokens: int,
    sessions: int,
    bytes_at: Callable[[int], int],
    hardware: Hardware,
    serving: Serving,
    assumptions: ReloadAssumptions,
    offload: OffloadLayout = LAYOUTS["vllm"],
    t1_admission_bytes: int | None = None,
) -> DeploymentPlan:
    """Place ``sessions`` x ``ctx_tokens`` on ``hardware`` and weigh reload against recompute.

    ``bytes_at`` (tokens -> KV bytes of one session, under the chosen engine, dtype and tp) is
    passed in so this module never needs to know which engine convention priced the model.
    """
    node = hardware.node
    session = bytes_at(ctx_tokens)
    divisors = offload_divisors(offload, is_mla=spec.is_mla, tp=serving.kv_tp, pp=serving.pp,
                                hosts=engine_hosts(serving, node))  # fmt: skip
    gds = uses_gds(hardware)
    tiers = place_sessions(
        hardware,
        serving,
        is_mla=spec.is_mla,
        session_bytes=session,
        sessions=sessions,
        admission_bytes=t1_admission_bytes,
        offload=offload,
        kv_pool_bytes_per_instance=None
        if hardware.kv_pool_tokens_per_instance is None
        else bytes_at(hardware.kv_pool_tokens_per_instance),
    )
    tiers, release = release_idle(tiers, sessions=sessions, a=assumptions, t4=hardware.t4,
                                  fsx_capacity_bytes=hardware.fsx_capacity_bytes)  # fmt: skip
    compute = node_compute(
        node,
        weights_bytes_per_instance=serving.weights_bytes_per_instance,
        tp=serving.tp,
        a=assumptions,
    )

    scheme, scheme_note = key_scheme(offload.name)
    objects = workers_storing(serving, divisors["T3"])

    paths_at = read_paths(hardware, assumptions, divisors=divisors, objects=objects,
                          scheme=scheme, engines=serving.instances)  # fmt: skip

    t3 = plan_t3(spec, params, compute, hardware, tiers.t3_bytes_needed, paths_at, bytes_at,
                  assumptions, ctx_tokens)  # fmt: skip
    fs, share = t3.file_system, t3.share_bytes_per_s
    fsx_why = (
        f"{fs.capacity_gib:,} GiB ({t3.source}) x"
        f" {fs.throughput_mbps_per_tib:,} MB/s/TiB = {fs.read_bytes_per_s / 1e9:,.1f} GB/s"
        + (f" / {hardware.nodes} nodes" if hardware.nodes > 1 else "")
        + (f" = {share / 1e9:,.1f} GB/s per node" if hardware.nodes > 1 else "")
    )
    paths = paths_at(share, f"the file system's throughput, {fsx_why}", t3.metadata)
    if hardware.measured:
        paths = apply_measured(paths, hardware.measured, t3_share_bytes_per_s=share)
    notes = list(t3_notes(hardware, t3, share))
    taken = client_path(hardware)
    if taken != hardware.t3_path:
        names = {"ena": "ENA/TCP", "efa": "EFA", "efa_gds": "EFA with GDS"}
        why = (
            f"{hardware.t3.name} cannot be EFA-enabled (EFA needs PERSISTENT_2)"
            if hardware.t3.client_efa_gbps <= 0
            else f"{node.name} has no {'GDS' if taken == 'efa' else 'EFA'}"
        )
        notes.insert(
            0,
            f"--t3-path {hardware.t3_path.replace('_', '-')} is not available: {why}; T3"
            f" reads go over {names[taken]}",
        )
    measured_tiers = [p.tier for p in paths if p.bandwidth_source == "measured"]
    if measured_tiers:
        notes.append(
            f"{', '.join(measured_tiers)} reload times use the bandwidth measured (kvtool bench or"
            " capacity),"
            " not the spec, and its first-byte latency where it measured one (each path says)"
        )
    notes += offload_notes(offload, divisors, serving, gds)
    # released files keep their names and metadata on FSx
    t3_sessions = next(t.sessions for t in tiers.tiers if t.name == "T3")
    t3_sessions += release.released_sessions
    per_session = -(-ctx_tokens // assumptions.chunk_tokens) * objects
    notes += folder_notes(offload.name, gds=gds, files=t3_sessions * per_session,
                          sessions=t3_sessions, per_session=per_session)  # fmt: skip
    if scheme_note:
        notes.append(scheme_note)
    if not any(p.tier == "T2" for p in paths) and node.host_memory_gib:
        notes.append(
            f"no T2 reload time: {node.name}'s host-to-accelerator bandwidth is not published"
        )
    crossovers = {
        path.tier: crossover_tokens(spec, params, compute, path, bytes_at, assumptions)
        for path in paths
    }
    contexts = sorted({*BREAK_EVEN_CONTEXTS, ctx_tokens})
    rows = break_even(spec, params, compute, paths, bytes_at, contexts, assumptions)
    fan_in = []
    for name, key in (("ENA/TCP", "ena"), ("EFA", "efa"), ("EFA+GDS", "efa_gds")):
        used, gbps = t3_client_gbps(node, hardware.t3, key)
        if used != key or gbps <= 0:
            continue
        bandwidth = min(gbps * 1e9 / 8, share)
        fan_in.append(
            FanIn(
                path=name,
                link_gbps=gbps,
                bytes_per_s=bandwidth,
                sessions_per_s=fan_in_per_s(session // divisors["T3"], bandwidth),
                seconds_per_session=session // divisors["T3"] / bandwidth,
            )
        )
    fan_in += [
        FanIn(
            path="measured",
            link_gbps=path.node_bytes_per_s * 8 / 1e9,
            bytes_per_s=path.node_bytes_per_s,
            sessions_per_s=fan_in_per_s(session // divisors["T3"], path.node_bytes_per_s),
            seconds_per_session=session // divisors["T3"] / path.node_bytes_per_s,
        )
        for path in paths
        if path.tier == "T3" and path.bandwidth_source == "measured"
    ]
    restores = {p.tier: restore(p, session, ctx_tokens, assumptions) for p in paths}
    release = hydrated(release, paths, hardware, fs, session, ctx_tokens, assumptions)
    notes += s3_out_reads(crossovers, t3, paths, hardware.nodes, restores.get("T4"),
                          assumptions.chunk_tokens)  # fmt: skip
    notes += lookup_timeout_notes(paths, restores, scheme, assumptions)
    t3_from = crossovers.get("T3")
    if t3_from is not None and t3_from < ARTICLE_CHEAP_TOKENS:
        notes.append(
            f"departs from the AWS article's \"below {ARTICLE_CHEAP_TOKENS // 1000}K tokens"
            f' recompute is cheap": here T3 reload beats recompute from {t3_from:,} tokens;'
            " the article weighs what GPU time costs at short contexts, the reload model only"
            " which is faster"
        )
    if t3.source == GIVEN:  # beside the given file system, the one kvtool would size
        unsized = replace(hardware, fsx_capacity_bytes=None)
        sized = plan_t3(spec, params, compute, unsized, tiers.t3_bytes_needed, paths_at,
                         bytes_at, assumptions, ctx_tokens)  # fmt: skip
        path = next(p for p in paths_at(sized.share_bytes_per_s) if p.tier == "T3")
        wins = crossover_tokens(spec, params, compute, path, bytes_at, assumptions)
        given = crossovers.get("T3")
        notes.append(
            f"T3 as given ({fs.capacity_gib:,} GiB): reload wins"
            f" {'never' if given is None else f'from {given:,} tokens'}; the"
            f" {sized.file_system.capacity_gib:,} GiB kvtool would size ({sized.source}):"
            f" {'never' if wins is None else f'from {wins:,} tokens'}"
        )
    return DeploymentPlan(
        ctx_tokens=ctx_tokens,
        hardware=hardware,
        serving=serving,
        tiers=tiers,
        file_system=fs,
        t3_size=t3,
        compute=compute,
        notes=tuple(notes),
        paths=tuple(paths),
        crossovers=crossovers,
        break_even=tuple(rows),
        fan_in=tuple(fan_in),
        assumptions=assumptions,
        restores=restores,
        release=release,
    )


@dataclass(frozen=True)
class Unservable:
    """A context one node cannot serve (one session over its 85% line, or weights that leave
    no room for KV): no plan, a verdict that says why and what would serve it."""

    ctx_tokens: int
    hardware: Hardware
    serving: Serving
    verdict: Verdict


@dataclass(frozen=True)
class ContextPlans:
    """``plan_contexts``' answer: the sizes under the serving layout, one plan each (or, for a
    context one node cannot serve, an ``Unservable`` verdict), and the tokens per batch the
    admission charge assumed (and where that figure came from)."""

    serving: Serving
    sizes: tuple[SizeResult, ...]
    plans: tuple[DeploymentPlan, ...]
    batched: BatchedTokens
    format_notes: tuple[str, ...] = ()  # what the accelerators make of the KV format
    unservable: tuple[Unservable, ...] = ()


def serve(
    shape: KvShape, hardware: Hardware, *, weights_dtype: str = "auto", pp: int = 1,
    dp_attention: bool = False, tp: int | None = None,
) -> tuple[Serving, KvShape]:  # fmt: skip
    """The serving layout on ``hardware`` (``tp``, else the shape's tp when the user gave one,
    else ``choose_serving``'s; ``pp`` stages) and the shape priced under it: a pipeline splits
    the layers, not the heads, so a session's KV over all ranks is its KV at ``tp``."""
    serving = choose_serving(
        shape.spec,
        count_params(shape.spec),
        hardware.node,
        tp=tp if tp is not None else shape.tp if shape.tp_given else None,
        weights_dtype=weights_dtype,
        gpu_memory_utilization=hardware.gpu_memory_utilization,
        pp=pp,
        dp_attention=dp_attention,
        pool_of_free=hardware.pool_of_free,
    )
    return serving, shape.serving_tp(serving.kv_tp).on_gpu(node_gpu(hardware.node))


def serve_chosen(
    shape: KvShape, hardware: Hardware, *, weights_dtype: str, ctx_tokens: int,
    max_num_batched_tokens: int | None, reserve: int = 0, pp: int | None = None,
    dp_attention: bool = False, choose: bool = True,
) -> tuple[Serving, KvShape]:  # fmt: skip
    """``serve`` with the layout the plan takes: the user's tp (the shape's, when given) and
    ``pp`` rule; when neither is given and ``choose``, the one holding the most sessions of
    ``ctx_tokens`` in T1 (``best_layout``, without data-parallel attention unless asked),
    said in the serving's first note; else ``choose_serving``'s."""
    chosen = None
    if choose and not shape.tp_given and pp is None and not dp_attention:
        chosen = best_layout(shape, hardware, weights_dtype=weights_dtype, ctx_tokens=ctx_tokens,
                             max_num_batched_tokens=max_num_batched_tokens,
                             extra_reserve_bytes_per_chip=reserve, dp_attention=False)  # fmt: skip
    serving, priced = serve(
        shape, hardware, weights_dtype=weights_dtype, dp_attention=dp_attention,
        pp=chosen.pp if chosen else pp or 1, tp=chosen.tp if chosen else None,
    )  # fmt: skip
    if chosen is not None:
        layout = f"tp {chosen.tp}" + (f" x pp {chosen.pp}" if chosen.pp > 1 else "")
        held = (  # a measured pool holds what the plan says, not kvtool's estimate (issue 55)
            f" ({chosen.sessions_in_t1_per_node:,} a node)"
            if hardware.kv_pool_tokens_per_instance is None
            else " by kvtool's estimate of HBM (the engine's pool, --calibrate, is one layout's)"
        )
        serving = replace(serving, notes=(
            f"--tp/--pp not given: {layout}, {chosen.instances} engine instance(s) per node,"
            f" the layout that holds the most sessions of {ctx_tokens:,} tokens in T1{held};"
            " --tp and --pp choose another",
            *serving.notes,
        ))  # fmt: skip
    return serving, priced


def plan_contexts(
    shape: KvShape,
    *,
    contexts: list[int],
    sessions: int,
    hardware: Hardware,
    weights_dtype: str = "auto",
    assumptions: ReloadAssumptions | None = None,
    offload: OffloadLayout | None = None,
    max_num_batched_tokens: int | None = None,
    pp: int | None = None,
    dp_attention: bool = False,
    choose_layout: bool = True,
    verdicts: bool = True,
    rescue_from: tuple[NodeProfile, ...] | None = None,
) -> ContextPlans:
    """``kvtool plan``: choose the serving layout, price a session at each context
    under it, and plan each.

    The layout: the user's tp (the shape's, when given) and ``pp`` rule; when neither is given
    and ``choose_layout``, the one holding the most sessions of the longest context in T1
    (``best_layout``, without data-parallel attention unless ``dp_attention``), said in a
    note; else ``choose_serving``'s (tp over one instance's chips, one engine per instance).

    ``offload`` is the stack that moves KV to T2 and T3 (``plan/offload.py``); by default the
    engine's own (``EngineRules.offload_stack``). ``max_num_batched_tokens`` None takes the
    engine's default on the node's accelerator (``model.engines.batched_tokens``).

    ``--tp`` x ``--pp`` past a node's accelerators runs each engine's pipeline stages on
    several nodes (``engine_over_nodes``).

    With ``rescue_from`` (the bundled nodes, for a larger one to try), a context one node
    cannot serve is an ``Unservable`` verdict with its tries (``verdict.rescue``); without,
    it raises ``NodeTooSmall``.

    Raises InputError for layouts the engine or the node cannot run (see ``choose_serving``
    and ``size_kv``).
    """
    spec = shape.spec
    params = count_params(spec)
    given_pp = pp
    given_hardware = hardware
    hardware = engine_pool(shape, engine_over_nodes(shape, hardware, pp))
    batched = node_batched_tokens(shape, hardware, max_num_batched_tokens)
    # the layout is chosen under the engine's own offload stack whatever --emit configures, so
    # that plan and plan --emit run the same engine (issue 55)
    own = LAYOUTS[shape.rules.offload_stack]
    reserve = own.gpu_reserve_mib_with_gds * 2**20 if uses_gds(hardware) else 0
    serving, priced = serve_chosen(
        shape, hardware, weights_dtype=weights_dtype, ctx_tokens=max(contexts),
        max_num_batched_tokens=batched.value, reserve=reserve, pp=pp,
        dp_attention=dp_attention, choose=choose_layout,
    )  # fmt: skip
    a = plan_assumptions(assumptions, serving, hardware.node)
    format_notes = kv_format_notes(shape, hardware.node)
    sizes = tuple(
        priced.size(tokens, sessions, max_num_batched_tokens=batched.value) for tokens in contexts
    )
    planned: list[DeploymentPlan] = []
    refused: list[tuple[int, NodeTooSmall]] = []
    for size in sizes:
        try:
            planned.append(plan_deployment(
                spec, params, ctx_tokens=size.ctx_tokens, sessions=sessions,
                bytes_at=priced.session_bytes, hardware=hardware, serving=serving,
                assumptions=a, offload=offload or LAYOUTS[shape.rules.offload_stack],
                t1_admission_bytes=size.admission_bytes_per_session,
            ))  # fmt: skip
        except NodeTooSmall as error:
            if rescue_from is None or not verdicts:
                raise
            refused.append((size.ctx_tokens, error))
    plans = tuple(planned)
    if format_notes:
        plans = tuple(replace(p, notes=(*format_notes, *p.notes)) for p in plans)
    if hardware.kv_pool_tokens_per_instance is None:  # (a measured pool is one layout's)
        plans = tuple(
            replace(p, best_layout=best_layout(shape, hardware, weights_dtype=weights_dtype,
                                               ctx_tokens=p.ctx_tokens,
                                               max_num_batched_tokens=batched.value,
                                               extra_reserve_bytes_per_chip=reserve))
            for p in plans
        )  # fmt: skip
    if verdicts:  # each plan's one line, its tries planned again (without verdicts of theirs)

        def replan_at(ctx: int) -> Replan:
            def replan(kv_dtype: str | None = None, nodes: int | None = None,
                       tp: int | None = None, pp: int | None = None,
                       node: NodeProfile | None = None) -> DeploymentPlan:  # fmt: skip
                tried = shape
                if kv_dtype is not None:
                    tried = tried._replace(fmt=resolve_format(kv_dtype, spec.dtype))
                if tp is not None:
                    tried = tried._replace(tp=tp, tp_given=True)
                other = given_hardware
                if node is not None:
                    other = replace(other, node=node)
                if nodes is not None:
                    other = replace(other, nodes=nodes)
                return plan_contexts(
                    tried, contexts=[ctx], sessions=sessions, hardware=other,
                    weights_dtype=weights_dtype, assumptions=assumptions, offload=offload,
                    max_num_batched_tokens=max_num_batched_tokens,
                    pp=pp if pp is not None else given_pp, dp_attention=dp_attention,
                    choose_layout=choose_layout, verdicts=False,
                ).plans[0]  # fmt: skip

            return replan

        fp8_possible = shape.fmt.element_bits > 8
        plans = tuple(
            replace(p, verdict=judge(p, sessions, replan=replan_at(p.ctx_tokens),
                                     fp8_possible=fp8_possible))
            for p in plans
        )  # fmt: skip
    unservable = []
    for ctx, too_small in refused:  # (only with verdicts: kept above)
        verdict = rescue(too_small.message, sessions, hardware, serving, replan=replan_at(ctx),
                         fp8_possible=fp8_possible and not too_small.by_weights,
                         layers=spec.num_layers, larger=rescue_from or ())  # fmt: skip
        unservable.append(Unservable(ctx, hardware, serving, verdict))
    return ContextPlans(
        serving=serving,
        sizes=sizes,
        plans=plans,
        batched=batched,
        format_notes=tuple(format_notes),
        unservable=tuple(unservable),
    )


def plan_assumptions(
    assumptions: ReloadAssumptions | None, serving: Serving, node: NodeProfile
) -> ReloadAssumptions:
    """The reload model's assumptions as the plan takes them: unless set, prefill runs at fp8
    where the weights are narrow (fp8, mxfp4, nvfp4) and the accelerator has fp8 throughput."""
    a = assumptions or ReloadAssumptions()
    if a.use_fp8_compute is None:
        narrow = serving.weights_dtype in ("fp8", "mxfp4", "nvfp4")
        a = replace(a, use_fp8_compute=narrow and node.fp8_tflops_per_chip > 0)
    return a


def engine_pool(shape: KvShape, hardware: Hardware) -> Hardware:
    """``hardware`` with the engine's rule for its KV pool: TensorRT-LLM takes
    ``free_gpu_memory_fraction`` (0.9, or --gpu-memory-utilization when given) of the memory
    the weights and the profiling run leave (``EngineRules.pool_fraction_of_free``); vLLM and
    SGLang a share of all HBM less the weights, as ``hardware`` has it."""
    fraction = shape.rules.pool_fraction_of_free
    if fraction is None or hardware.pool_of_free:
        return hardware
    if hardware.gpu_memory_utilization_given:
        fraction = hardware.gpu_memory_utilization
    return replace(hardware, pool_of_free=True, gpu_memory_utilization=fraction)


def engine_over_nodes(shape: KvShape, hardware: Hardware, pp: int | None) -> Hardware:
    """``hardware`` as groups of nodes where ``--tp`` x ``--pp`` asks for more accelerators
    than a node has: each engine's pipeline stages on several nodes, tensor parallel within
    one (``cluster.over_nodes``). InputError where the layout is not whole nodes."""
    node = hardware.node
    if pp is None or not shape.tp_given or shape.tp * pp <= node.chips:
        return hardware
    if pp > shape.spec.num_layers:
        return hardware  # (choose_serving says: a stage holds at least one layer)
    chips = shape.tp * pp
    if node.chips % shape.tp or chips % node.chips:
        raise InputError(
            f"--tp {shape.tp} x --pp {pp} does not divide {node.name}'s {node.chips}"
            f" accelerators, nor make whole nodes of them",
            f"an engine over several nodes keeps --tp within one (a divisor of {node.chips})"
            f" and --tp x --pp a multiple of {node.chips}",
        )
    return over_nodes(hardware, chips // node.chips)


def node_batched_tokens(
    shape: KvShape, hardware: Hardware | None, given: int | None
) -> BatchedTokens:
    """The tokens per batch the engine's admission charge assumes on ``hardware``'s
    accelerator (or with no hardware), or the figure given."""
    node = None if hardware is None else hardware.node
    return batched_tokens(
        shape.rules,
        given,
        hbm_gib=None if node is None else node.hbm_gib_per_chip,
        accelerator="" if node is None else node.accelerator,
    )


@dataclass(frozen=True)
class WorkloadPlan:
    """A workload (a context mix at a mean concurrency, a peak-to-mean ratio) placed on a
    cluster: the serving layout, one session at each context, and the tiers at peak
    concurrency with the mean session (``advise`` and ``check``)."""

    serving: Serving
    sizes: dict[int, SizeResult]
    mean_session_bytes: int
    mean_admission_bytes: int | None
    peak_sessions: int
    tiers: TierPlan
    bytes_at: Callable[[int], int]  # one session's KV at a context, under the serving layout
    # what one chunk is in S3: objects (one per worker, ``workers_storing``) and the requests
    # reading each back takes (a GET and the key scheme's lookups), for the request cost
    t4_objects_per_chunk: int = 1
    t4_requests_per_object: int = 1
    release: Release | None = None  # the AWS article's T4: idle sessions released to S3

    @property
    def session_bytes(self) -> dict[int, int]:
        """One session's KV at each context of the mix."""
        return {ctx: size.kv_bytes_per_session for ctx, size in self.sizes.items()}


def plan_workload(
    shape: KvShape,
    workload: Workload,
    hardware: Hardware,
    *,
    offload: OffloadLayout | None = None,
    max_num_batched_tokens: int | None = None,
    assumptions: ReloadAssumptions | None = None,
    idle_from: str = "the workload's mean_idle",
    dra: bool = True,
) -> WorkloadPlan:
    """Serve, price and place ``workload`` exactly as ``plan_contexts`` does one context: the
    same serving layout, admission charge, offload copies, GDS reserve and release of idle
    sessions to S3 (the workload's mean idle time, given in ``idle_from``, unless
    ``assumptions`` sets one), so ``kvtool check``, ``advise`` and ``plan`` agree on where
    sessions live (``dra`` False: the plan links no S3 bucket, nothing is released). Over a
    context mix the session and its admission charge are the share-weighted means.

    Raises InputError when the weights or one session do not fit a node.
    """
    hardware = engine_pool(shape, hardware)
    batched = node_batched_tokens(shape, hardware, max_num_batched_tokens).value
    stack = offload or LAYOUTS[shape.rules.offload_stack]
    serving, priced = serve_chosen(
        shape, hardware, weights_dtype=workload.weights_dtype,
        ctx_tokens=max(workload.contexts), max_num_batched_tokens=batched,
        reserve=stack.gpu_reserve_mib_with_gds * 2**20 if uses_gds(hardware) else 0,
    )  # fmt: skip
    sizes = {ctx: priced.size(ctx, max_num_batched_tokens=batched) for ctx in workload.contexts}
    mean = int(
        sum(share * sizes[ctx].kv_bytes_per_session for ctx, share in workload.contexts.items())
    )
    admission = None
    if any(size.admission_bytes_per_session is not None for size in sizes.values()):
        admission = int(
            sum(
                share * (sizes[ctx].admission_bytes_per_session or sizes[ctx].kv_bytes_per_session)
                for ctx, share in workload.contexts.items()
            )
        )
    peak = max(1, round(workload.sessions * workload.peak_to_mean))
    tiers = place_sessions(
        hardware,
        serving,
        is_mla=shape.spec.is_mla,
        session_bytes=mean,
        sessions=peak,
        admission_bytes=admission,
        offload=stack,
    )
    tiers, release = release_idle(tiers, sessions=peak, a=assumptions or ReloadAssumptions(),
                                  t4=hardware.t4,
                                  fsx_capacity_bytes=hardware.fsx_capacity_bytes if dra else 0,
                                  workload_idle=(workload.mean_idle_s, idle_from))  # fmt: skip
    divisors = offload_divisors(stack, is_mla=shape.spec.is_mla, tp=serving.kv_tp, pp=serving.pp,
                                hosts=engine_hosts(serving, hardware.node))  # fmt: skip
    scheme, _ = key_scheme(stack.name)
    return WorkloadPlan(
        serving=serving,
        sizes=sizes,
        mean_session_bytes=mean,
        mean_admission_bytes=admission,
        peak_sessions=peak,
        tiers=tiers,
        bytes_at=priced.session_bytes,
        t4_objects_per_chunk=workers_storing(serving, divisors["T3"]),
        t4_requests_per_object=1 + scheme.lookups,
        release=release,
    )
