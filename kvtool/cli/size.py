"""``kvtool size``: KV bytes per token, per session and in total for a model."""

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer

from kvtool.cli.options import (
    BlockTokensOpt,
    CtxOpt,
    EngineOpt,
    KvDtypeOpt,
    SessionsOpt,
    StateDtypeOpt,
    TpOpt,
    merge,
    note_renamed,
    plan_flag,
    plan_option,
    renamed,
)
from kvtool.cli.render.text import note as say_note
from kvtool.errors import InputError
from kvtool.inputs.shape import resolve_shape, split_models
from kvtool.model.engines import batched_tokens
from kvtool.profiles.resolve import resolve_model
from kvtool.units import parse_count, parse_count_list

if TYPE_CHECKING:
    from kvtool.inputs.metrics import Calibration
    from kvtool.model.kv import SizeResult
    from kvtool.model.params import Weights
    from kvtool.model.shape import KvShape
    from kvtool.plan.cost import Cost, Prices
    from kvtool.plan.deployment import ContextPlans, DeploymentPlan, Hardware
    from kvtool.profiles.resolve import ResolvedModel


def size(
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help="Bundled model name or alias (see `kvtool models`), a config.json path or a"
            " folder holding one, or a Hugging Face repo id (needs the hf extra). Several,"
            " comma-separated, side by side.",
        ),
    ],
    ctx: CtxOpt = "8k",
    sessions: SessionsOpt = "1",
    kv_dtype: KvDtypeOpt = "auto",
    state_dtype: StateDtypeOpt = "auto",
    engine: EngineOpt = "vllm",
    tp: TpOpt = None,
    block_size: BlockTokensOpt = None,
    weights_dtype: Annotated[str | None, plan_option("--weights-dtype", panel=None)] = None,
    max_num_batched_tokens: Annotated[
        str | None, plan_option("--max-num-batched-tokens", panel=None)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    # the deployment plan's options: kvtool plan's now, forwarded for one release
    hardware: Annotated[str | None, plan_option("--hardware", hidden=True)] = None,
    nodes: Annotated[str | None, plan_option("--nodes", hidden=True)] = None,
    fsx_capacity: Annotated[str | None, plan_option("--fsx-capacity", hidden=True)] = None,
    fsx_throughput: Annotated[str | None, plan_option("--fsx-throughput", hidden=True)] = None,
    t3: Annotated[str | None, plan_option("--t3-storage", hidden=True)] = None,
    t4: Annotated[str | None, plan_option("--t4-storage", hidden=True)] = None,
    t3_path: Annotated[str | None, plan_option("--t3-path", hidden=True)] = None,
    mfu: Annotated[str | None, plan_option("--mfu", hidden=True)] = None,
    concurrent_loads: Annotated[str | None, plan_option("--concurrent-loads", hidden=True)] = None,
    gpu_memory_utilization: Annotated[
        str | None, plan_option("--gpu-memory-utilization", hidden=True)
    ] = None,
    emit: Annotated[str | None, plan_option("--emit", hidden=True)] = None,
    t3_dir: Annotated[str | None, plan_option("--t3-dir", hidden=True)] = None,
    bench: Annotated[str | None, plan_option("--bench", hidden=True)] = None,
    pp: Annotated[str | None, plan_option("--pp", hidden=True)] = None,
    dp_attention: Annotated[bool, plan_flag("--dp-attention", hidden=True)] = False,
    cost: Annotated[bool, plan_flag("--cost", hidden=True)] = False,
    prices: Annotated[str | None, plan_option("--prices", hidden=True)] = None,
    region: Annotated[str | None, plan_option("--region", hidden=True)] = None,
    calibrate: Annotated[str | None, plan_option("--calibrate", hidden=True)] = None,
    posture: Annotated[str | None, plan_option("--posture", hidden=True)] = None,
    old_eager: Annotated[bool, typer.Option("--eager", hidden=True)] = False,
    old_block_size: Annotated[str | None, renamed("--block-size", "--block-tokens")] = None,
    old_t3: Annotated[str | None, renamed("--t3", "--t3-storage")] = None,
    old_t4: Annotated[str | None, renamed("--t4", "--t4-storage")] = None,
) -> None:
    """How much KV cache MODEL needs: per token, per session, and for all sessions.

    Where it lives and what it costs on a cluster is kvtool plan's answer.

    Examples:

      kvtool size deepseek-r1 --ctx 200k --sessions 100

      kvtool size llama-3.1-70b --ctx 8k,32k,128K --kv-dtype fp8 --tp 8

      kvtool size examples/my-model/config.json --ctx 1m --engine formula --json

      kvtool size llama-3.1-8b,deepseek-r1 --ctx 32k --json
    """
    if hardware is not None:  # kvtool plan's question: answered, and said where it moved
        note_renamed("kvtool size --hardware", "kvtool plan")
    t3 = merge(t3, old_t3, old="--t3", new="--t3-storage")
    t4 = merge(t4, old_t4, old="--t4", new="--t4-storage")
    block_size = merge(block_size, old_block_size, old="--block-size", new="--block-tokens")
    posture = merge(posture, "eager" if old_eager else None, old="--eager", new="--posture eager")
    return answer(
        model, ctx=ctx, sessions=sessions, kv_dtype=kv_dtype, engine=engine, tp=tp,
        block_size=block_size, hardware=hardware, nodes=nodes, fsx_capacity=fsx_capacity,
        fsx_throughput=fsx_throughput, t3=t3, t4=t4, t3_path=t3_path,
        weights_dtype=weights_dtype, mfu=mfu, concurrent_loads=concurrent_loads,
        gpu_memory_utilization=gpu_memory_utilization, emit=emit, t3_dir=t3_dir, bench=bench,
        max_num_batched_tokens=max_num_batched_tokens, pp=pp, dp_attention=dp_attention,
        cost=cost, prices=prices, region=region, calibrate=calibrate, posture=posture,
        as_json=as_json, state_dtype=state_dtype,
    )  # fmt: skip


def answer(
    model: str,
    *,
    ctx: str,
    sessions: str,
    kv_dtype: str,
    engine: str,
    tp: str | None,
    block_size: str | None,
    hardware: str | None,
    nodes: str | None,
    fsx_capacity: str | None,
    fsx_throughput: str | None,
    t3: str | None,
    t4: str | None,
    t3_path: str | None,
    weights_dtype: str | None,
    mfu: str | None,
    concurrent_loads: str | None,
    gpu_memory_utilization: str | None,
    emit: str | None,
    t3_dir: str | None,
    bench: str | None,
    max_num_batched_tokens: str | None,
    pp: str | None,
    dp_attention: bool,
    cost: bool,
    prices: str | None,
    region: str | None,
    calibrate: str | None,
    posture: str | None,
    as_json: bool,
    state_dtype: str = "auto",
    command: str = "size",
    restore_slo: str | None = None,
    reload_from: str | None = None,
) -> None:
    """kvtool size's answer, and with ``hardware`` kvtool plan's: every option resolved here
    (one error line for any mistake), then the sizes or plans rendered."""
    if weights_dtype is not None:  # a mistake is one even where the value has no effect
        from kvtool.model.params import WEIGHT_BYTES

        if weights_dtype.strip().lower() not in ("auto", *WEIGHT_BYTES):
            raise InputError(
                f"unknown --weights-dtype {weights_dtype!r}",
                "choose auto, " + ", ".join(WEIGHT_BYTES),
            )
    if posture is not None and posture.strip().lower() not in ("eager", "lazy"):
        raise InputError(f"--posture {posture!r} is not a posture", "give eager or lazy")
    eager = posture is not None and posture.strip().lower() == "eager"
    contexts = parse_count_list(ctx, what="--ctx")
    too_long = [c for c in contexts if c > MAX_CONTEXT_TOKENS]
    if too_long:  # an engine's positions are 32-bit: no model runs past 2^31 tokens
        raise InputError(
            f"--ctx {too_long[0]:,} tokens is past any engine's context (at most"
            f" {MAX_CONTEXT_TOKENS:,} tokens: positions are 32-bit integers)",
            "give a context in tokens, e.g. 128K or 1m",
        )
    count = parse_count(sessions, what="--sessions")
    batched = (
        None
        if max_num_batched_tokens is None
        else parse_count(max_num_batched_tokens, what="--max-num-batched-tokens")
    )
    plan_options = {
        "--nodes": nodes,
        "--fsx-capacity": fsx_capacity,
        "--fsx-throughput": fsx_throughput,
        "--t3-storage": t3,
        "--t4-storage": t4,
        "--t3-path": t3_path,
        "--weights-dtype": weights_dtype,
        "--mfu": mfu,
        "--concurrent-loads": concurrent_loads,
        "--gpu-memory-utilization": gpu_memory_utilization,
        "--emit": emit,
        "--bench": bench,
        "--calibrate": calibrate,
        "--cost": cost or None,
        "--pp": pp,
        "--dp-attention": dp_attention or None,
    }
    names = split_models(model)
    several = len(names) > 1
    shown_weights = several or as_json  # where --weights-dtype changes a printed figure
    if hardware is None:
        given = [name for name, value in plan_options.items() if value is not None]
        if "--emit" in given:
            raise InputError(
                "--emit needs a plan", "add --hardware NODE (kvtool hardware lists them)"
            )
        if shown_weights:
            given = [name for name in given if name != "--weights-dtype"]
        _no_effect(given, "without --hardware")
    if not cost:
        _no_effect([n for n, v in (("--prices", prices), ("--region", region)) if v is not None],
                   "without --cost")  # fmt: skip
    if emit is not None and pp is not None and pp.strip() not in ("1", ""):
        raise InputError("--emit writes tensor-parallel engine configurations; kvtool does not"
                         " emit pipeline-parallel ones yet", "drop --pp with --emit")  # fmt: skip
    if emit is not None and dp_attention:
        raise InputError("--emit writes tensor-parallel engine configurations; kvtool does not"
                         " emit data-parallel attention yet", "drop --dp-attention")  # fmt: skip
    if calibrate is not None and several:
        raise InputError("--calibrate reads one engine, serving one model", "give one model")
    if emit is None:
        _no_effect(
            [n for n, v in (("--t3-dir", t3_dir), ("--posture", posture)) if v is not None],
            "without --emit",
        )
    elif several:
        raise InputError(
            "--emit writes one engine configuration, for one model", "give one model with --emit"
        )
    elif as_json:
        raise InputError("--emit prints an engine configuration, not JSON", "drop --json or --emit")
    else:
        from kvtool.plan.emit import check_emit_target

        check_emit_target(emit.strip().lower(), engine.strip().lower())
    plan_hardware = None
    if hardware is not None:
        from kvtool.inputs.hardware import resolve_hardware

        plan_hardware = resolve_hardware(
            hardware,
            nodes=nodes,
            t3_path=t3_path,
            t3=t3,
            t4=t4,
            fsx_capacity=fsx_capacity,
            fsx_throughput=fsx_throughput,
            gpu_memory_utilization=gpu_memory_utilization,
            bench=bench,
        )
    priced = None
    if cost and plan_hardware is not None:
        from kvtool.inputs.prices import resolve_prices

        priced = resolve_prices(prices, region=region, hardware=plan_hardware)
    calibrated = None
    if calibrate is not None and plan_hardware is not None:
        from kvtool.inputs.metrics import calibration

        calibrated = calibration(calibrate)
    sized = []
    for name in names:  # each resolved before anything is printed: one bad name, exit 2
        resolved = resolve_model(name)
        shape = resolve_shape(
            resolved, engine=engine, kv_dtype=kv_dtype, tp=tp, block_size=block_size,
            state_dtype=state_dtype,
        )  # fmt: skip
        if plan_hardware is None:
            chosen = batched_tokens(shape.rules, batched)
            results = [
                shape.size(tokens, count, max_num_batched_tokens=chosen.value)
                for tokens in contexts
            ]
            sized.append(Sized(resolved, results, (), chosen.source, (chosen.ignored,),
                               unique=_unique(shape, results) if several else ()))  # fmt: skip
            continue
        from kvtool.inputs.hardware import resolve_assumptions
        from kvtool.plan.deployment import plan_contexts
        from kvtool.plan.offload import get_layout

        if calibrated is not None:
            plan_hardware = _calibrated(plan_hardware, calibrated, shape, contexts[0], count)

        planned = plan_contexts(
            shape,
            contexts=contexts,
            sessions=count,
            hardware=plan_hardware,
            weights_dtype="auto" if weights_dtype is None else weights_dtype,
            assumptions=resolve_assumptions(
                mfu=mfu,
                concurrent_loads=concurrent_loads,
                restore_slo=restore_slo,
                reload_from=reload_from,
            ),
            offload=None if emit is None else get_layout(emit.strip().lower()),
            max_num_batched_tokens=batched,
            pp=None if pp is None else parse_count(pp, what="--pp"),
            choose_layout=emit is None,  # (kvtool emits tensor-parallel configurations)
            dp_attention=dp_attention,
        )
        if emit is not None:
            _ignored(planned.batched.ignored)
            return _emit(emit, resolved, shape, planned, t3_dir, eager)
        sized.append(
            Sized(resolved, planned.sizes, planned.plans, planned.batched.source,
                  (planned.batched.ignored,), _costs(planned.plans, priced, count),
                  _unique(shape, planned.sizes) if several else ())
        )  # fmt: skip
    for note in dict.fromkeys(n for one in sized for n in one.ignored):  # once each
        _ignored(note)
    weights = "auto" if weights_dtype is None else weights_dtype
    return _render(sized, as_json, weights if shown_weights else None, command)


def _calibrated(
    hardware: "Hardware", cal: "Calibration", shape: "KvShape", ctx: int, sessions: int
) -> "Hardware":
    """``hardware`` with the engine's measured KV pool in place of kvtool's estimate, and a
    note of what was replaced and what was read but not used."""
    from dataclasses import replace

    probe = shape.size(ctx, sessions)
    if probe.fixed_bytes_per_session or any(g.window is not None for g in probe.groups):
        raise InputError(
            f"--calibrate reads a pool in tokens, and {shape.spec.name} has windowed or state"
            " layers whose bytes are not a count of tokens",
            "plan it without --calibrate",
        )
    _ignored(
        f"--calibrate {cal.source}: T1 is {cal.engine}'s own KV pool,"
        f" {cal.pool_tokens_per_instance:,} tokens an engine instance, in place of kvtool's"
        " estimate from HBM, weights and reserves; it assumes the engine runs the layout planned"
    )
    if cal.gpu_memory_utilization is not None:
        _ignored(f"--calibrate: the engine runs gpu_memory_utilization"
                 f" {cal.gpu_memory_utilization:.2f}, already in its pool")  # fmt: skip
    if cal.hit_ratio is not None:
        _ignored(
            f"--calibrate: the engine's prefix-cache hit ratio, {cal.hit_ratio:.1%}, is not used"
            " by size (it plans every session's KV); kvtool advise --shared-prefix takes one"
        )
    return replace(hardware, kv_pool_tokens_per_instance=cal.pool_tokens_per_instance)


class Sized(NamedTuple):
    """One model's answer: its sizes per context, its plans (with --hardware), where the
    tokens per batch came from, and notes of options it ignored."""

    resolved: "ResolvedModel"
    results: "Sequence[SizeResult]"
    plans: "tuple[DeploymentPlan, ...]"
    batched_why: str
    ignored: tuple[str, ...]
    costs: "tuple[Cost, ...]" = ()
    unique: tuple[int, ...] = ()  # per context, one copy of a session's KV (no tp replicas)


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
    from kvtool.plan.cost import plan_cost

    return tuple(
        plan_cost(p.hardware, p.tiers, prices, sessions=sessions, ctx_tokens=p.ctx_tokens,
                  chunk_tokens=p.assumptions.chunk_tokens, file_system=p.file_system)
        for p in plans
    )  # fmt: skip


def _emit(
    emit: str,
    resolved: "ResolvedModel",
    shape: "KvShape",
    planned: "ContextPlans",
    t3_dir: str | None,
    eager: bool,
) -> None:
    """``--emit``: the engine configuration for the plan of the longest context."""
    from kvtool import __version__
    from kvtool.plan.emit import emit as emit_config
    from kvtool.plan.emit import emit_inputs

    longest = max(planned.plans, key=lambda plan: plan.ctx_tokens)
    inputs = emit_inputs(
        longest,
        model_id=resolved.profile.hf_id if resolved.profile else resolved.location,
        kv_dtype=shape.fmt.name,
        model_dtype=resolved.spec.dtype,
        is_mla=resolved.spec.is_mla,
        t3_dir="/fsx/kvcache" if t3_dir is None else t3_dir,
        eager=eager,
        kvtool_version=__version__,
    )
    sys.stdout.write(emit_config(emit.strip().lower(), inputs))
    for note in planned.format_notes:  # the configuration cannot carry them: stderr
        _ignored(note)


MAX_CONTEXT_TOKENS = 2**31 - 1


def _ignored(note: str) -> None:
    if note:
        say_note(f"{note}")


def _no_effect(options: list[str], why: str) -> None:
    for option in options:
        say_note(f"{option} has no effect {why}")


def _weights(resolved: "ResolvedModel", weights_dtype: str) -> "Weights | None":
    """The model's weights in ``weights_dtype``; None where kvtool does not count its
    parameters (the size still stands)."""
    from kvtool.errors import ConfigError
    from kvtool.model.params import model_weights

    try:
        return model_weights(resolved.spec, weights_dtype)
    except ConfigError:
        return None


def _render(
    sized: list[Sized], as_json: bool, weights_dtype: str | None, command: str = "size"
) -> None:
    """One model: its header, groups and rows (and plans); several: one comparison table.
    ``weights_dtype``: the weights are part of the answer (JSON, a comparison), in it."""
    from kvtool.cli.render import size as render

    weights = None
    if weights_dtype is not None:
        weights = [_weights(one.resolved, weights_dtype) for one in sized]
    if as_json:
        from kvtool.cli.render.text import print_json

        records = []
        for index, one in enumerate(sized):
            records += render.size_json(
                one.resolved, one.results, one.plans, one.batched_why,
                weights=None if weights is None else weights[index], costs=one.costs,
            )  # fmt: skip
        print_json(records, command=command)
        return
    if len(sized) > 1:
        assert weights is not None
        render.print_comparison(
            [render.Compared(one.resolved, one.results, one.plans, w, one.costs, one.unique)
             for one, w in zip(sized, weights, strict=True)]
        )  # fmt: skip
        return
    one = sized[0]
    if one.plans:
        from kvtool.cli.render.plan import print_verdicts

        print_verdicts(one.plans)
    render.print_size(one.resolved, one.results, one.batched_why)
    if one.plans:
        from kvtool.cli.render.plan import print_plans

        print_plans(one.plans)
    if one.costs:
        render.print_costs(one.plans, one.costs)
