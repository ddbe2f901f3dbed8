"""``kvtool size``: KV bytes per token, per session and in total for a model."""

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer

from kvtool.cli.options import (
    CostOpt,
    EngineOpt,
    GpuMemoryUtilizationOpt,
    KvDtypeOpt,
    PricesOpt,
    RegionOpt,
    TpOpt,
    merge,
    renamed,
)
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
            " folder holding one, or a Hugging Face repo id (needs the hf extra).",
        ),
    ],
    ctx: Annotated[
        str,
        typer.Option(
            "--ctx",
            metavar="TOKENS[,TOKENS...]",
            help="Context length(s) per session, comma-separated. k/m = x1000, K/M = x1024"
            " (vLLM's --max-model-len rule): 200k = 200,000; 128K = 131,072.",
        ),
    ] = "8k",
    sessions: Annotated[
        str,
        typer.Option("--sessions", "-n", metavar="N", help="Concurrent sessions (e.g. 100, 1k)."),
    ] = "1",
    kv_dtype: KvDtypeOpt = "auto",
    engine: EngineOpt = "vllm",
    tp: TpOpt = None,
    block_size: Annotated[
        str | None,
        typer.Option(
            "--block-tokens",
            metavar="TOKENS",
            help="Tokens per engine KV block (page), a plain number; vLLM takes multiples of 16.",
        ),
    ] = None,
    hardware: Annotated[
        str | None,
        typer.Option(
            "--hardware",
            metavar="NODE",
            help="Add a tier plan for this node type (kvtool hardware lists them) or a .toml.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    nodes: Annotated[
        str | None,
        typer.Option(
            "--nodes",
            metavar="N",
            help="Nodes serving the sessions (default 1).",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    fsx_capacity: Annotated[
        str | None,
        typer.Option(
            "--fsx-capacity",
            metavar="SIZE",
            help="FSx for Lustre capacity, e.g. 96TiB (default: sized to fit).",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    fsx_throughput: Annotated[
        str | None,
        typer.Option(
            "--fsx-throughput",
            metavar="MBPS",
            help="FSx per-unit throughput in MB/s per TiB: 125, 250, 500 or 1000.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    t3: Annotated[
        str | None,
        typer.Option(
            "--t3-storage",
            metavar="STORAGE",
            help="T3 profile: fsx-lustre-persistent2, -persistent1, -scratch2, or a .toml.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    t4: Annotated[
        str | None,
        typer.Option(
            "--t4-storage",
            metavar="STORAGE",
            help="T4 profile: s3-standard, s3-express-one-zone.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    t3_path: Annotated[
        str | None,
        typer.Option(
            "--t3-path",
            metavar="PATH",
            help="Client path to FSx: ena, efa (default), efa-gds.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    weights_dtype: Annotated[
        str | None,
        typer.Option(
            "--weights-dtype",
            metavar="DTYPE",
            help="auto (the checkpoint's), bf16, fp16, fp8, int8, int4, mxfp4, nvfp4.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    mfu: Annotated[
        str | None,
        typer.Option(
            "--mfu",
            metavar="FRACTION",
            help="Prefill model-FLOPs utilisation for recompute times (default 0.4).",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    concurrent_loads: Annotated[
        str | None,
        typer.Option(
            "--concurrent-loads",
            metavar="N",
            help="Sessions restoring at once on a node (default 16).",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = None,
    emit: Annotated[
        str | None,
        typer.Option(
            "--emit",
            metavar="ENGINE",
            help="Print a configuration for the plan instead: lmcache, vllm, sglang, dynamo.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    t3_dir: Annotated[
        str | None,
        typer.Option(
            "--t3-dir",
            metavar="PATH",
            help="KV directory on the FSx mount (--emit; default /fsx/kvcache).",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    bench: Annotated[
        str | None,
        typer.Option(
            "--bench",
            metavar="FILE",
            help="Plan with the bandwidths in a kvtool bench --json FILE instead of the spec.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    max_num_batched_tokens: Annotated[
        str | None,
        typer.Option(
            "--max-num-batched-tokens",
            metavar="N",
            help="vLLM's tokens per batch, for its admission charge (default: vllm serve's"
            " for the --hardware GPU, else 8192).",
        ),
    ] = None,
    pp: Annotated[
        str | None,
        typer.Option(
            "--pp",
            metavar="N",
            help="Pipeline-parallel stages per engine (vLLM --pipeline-parallel-size): the"
            " engine spans tp x pp chips and keeps one copy of the weights (default 1).",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    dp_attention: Annotated[
        bool,
        typer.Option(
            "--dp-attention",
            help="Data-parallel attention (MLA models): each rank holds whole latents for its"
            " own sessions, one copy, and the attention weights whole.",
            rich_help_panel="Tier plan",
        ),
    ] = False,
    cost: CostOpt = False,
    prices: PricesOpt = None,
    region: RegionOpt = None,
    calibrate: Annotated[
        str | None,
        typer.Option(
            "--calibrate",
            metavar="SCRAPE",
            help="Plan T1 with the KV pool a running engine reports: a saved /metrics scrape or"
            " its URL (vLLM, SGLang).",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    posture: Annotated[
        str | None,
        typer.Option(
            "--posture",
            metavar="eager|lazy",
            help="When KV is written to the shared tier (--emit): eager, when prefill ends;"
            " lazy (the default), under pressure or when idle.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    old_eager: Annotated[bool, typer.Option("--eager", hidden=True)] = False,
    old_block_size: Annotated[str | None, renamed("--block-size", "--block-tokens")] = None,
    old_t3: Annotated[str | None, renamed("--t3", "--t3-storage")] = None,
    old_t4: Annotated[str | None, renamed("--t4", "--t4-storage")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """How much KV cache MODEL needs: per token, per session, and for all sessions.

    Examples:

      kvtool size deepseek-r1 --ctx 200k --sessions 100

      kvtool size llama-3.1-70b --ctx 8k,32k,128K --kv-dtype fp8 --tp 8

      kvtool size ./my-model/config.json --ctx 1m --engine formula --json

      kvtool size deepseek-r1 --ctx 128K --sessions 500 --hardware p5en --nodes 4

      kvtool size llama-3.1-70b --ctx 128K --sessions 200 --hardware p5en --emit lmcache

      kvtool size llama-3.1-70b --ctx 128K --sessions 200 --hardware p5en --bench bench.json
    """
    t3 = merge(t3, old_t3, old="--t3", new="--t3-storage")
    block_size = merge(block_size, old_block_size, old="--block-size", new="--block-tokens")
    posture = merge(posture, "eager" if old_eager else None, old="--eager", new="--posture eager")
    if posture is not None and posture.strip().lower() not in ("eager", "lazy"):
        raise InputError(f"--posture {posture!r} is not a posture", "give eager or lazy")
    eager = posture is not None and posture.strip().lower() == "eager"
    t4 = merge(t4, old_t4, old="--t4", new="--t4-storage")
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
            resolved, engine=engine, kv_dtype=kv_dtype, tp=tp, block_size=block_size
        )
        if plan_hardware is None:
            chosen = batched_tokens(shape.rules, batched)
            results = [
                shape.size(tokens, count, max_num_batched_tokens=chosen.value)
                for tokens in contexts
            ]
            sized.append(Sized(resolved, results, (), chosen.source, (chosen.ignored,)))
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
            assumptions=resolve_assumptions(mfu=mfu, concurrent_loads=concurrent_loads),
            offload=None if emit is None else get_layout(emit.strip().lower()),
            max_num_batched_tokens=batched,
            pp=1 if pp is None else parse_count(pp, what="--pp"),
            dp_attention=dp_attention,
        )
        if emit is not None:
            _ignored(planned.batched.ignored)
            return _emit(emit, resolved, shape, planned, t3_dir, eager)
        sized.append(
            Sized(resolved, planned.sizes, planned.plans, planned.batched.source,
                  (planned.batched.ignored,), _costs(planned.plans, priced, count))
        )  # fmt: skip
    for note in dict.fromkeys(n for one in sized for n in one.ignored):  # once each
        _ignored(note)
    weights = "auto" if weights_dtype is None else weights_dtype
    return _render(sized, as_json, weights if shown_weights else None)


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


def _costs(plans: "tuple[DeploymentPlan, ...]", prices: "Prices | None", sessions: int
           ) -> "tuple[Cost, ...]":  # fmt: skip
    """Each plan's cost under ``prices`` (none without --cost)."""
    if prices is None:
        return ()
    from kvtool.plan.cost import plan_cost

    return tuple(
        plan_cost(p.hardware, p.tiers, prices, sessions=sessions, ctx_tokens=p.ctx_tokens,
                  chunk_tokens=p.assumptions.chunk_tokens)
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
        print(f"kvtool: note: {note}", file=sys.stderr)


def _no_effect(options: list[str], why: str) -> None:
    for option in options:
        print(f"kvtool: note: {option} has no effect {why}", file=sys.stderr)


def _weights(resolved: "ResolvedModel", weights_dtype: str) -> "Weights | None":
    """The model's weights in ``weights_dtype``; None where kvtool does not count its
    parameters (the size still stands)."""
    from kvtool.errors import ConfigError
    from kvtool.model.params import model_weights

    try:
        return model_weights(resolved.spec, weights_dtype)
    except ConfigError:
        return None


def _render(sized: list[Sized], as_json: bool, weights_dtype: str | None) -> None:
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
        print_json(records, command="size")
        return
    if len(sized) > 1:
        assert weights is not None
        render.print_comparison(
            [render.Compared(one.resolved, one.results, one.plans, w, one.costs) for one, w in
             zip(sized, weights, strict=True)]
        )  # fmt: skip
        return
    one = sized[0]
    render.print_size(one.resolved, one.results, one.batched_why)
    if one.plans:
        from kvtool.cli.render.plan import print_plans

        print_plans(one.plans)
    if one.costs:
        render.print_costs(one.plans, one.costs)
