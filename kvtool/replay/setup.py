"""A replay's configuration from resolved inputs: units, capacities, the plan, the TTFT model,
and notes on what was assumed. Pure (docs/replay.md, "Sizes").

Units: with a model, a block costs its KV in bytes (every rank, ``KvShape.block_bytes``) and
sizes may be given in tokens or bytes; without one (and without ``--real``) the replay counts
tokens. A size in tokens holds whole blocks. With hardware, the sizes not given come from the
node's plan for the trace's longest request (``kvtool plan``): T1 the HBM for KV up
to the 85% pressure line, T2 the host memory for KV; T3 and T4 unbounded unless given. Without
sizes and without hardware, T1 is unbounded and the rest off (the reuse ratio).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from kvtool.errors import InputError
from kvtool.replay.run import ReplayConfig, TtftModel
from kvtool.replay.trace import StreamedTrace, Trace
from kvtool.units import TierSize, format_bytes_binary

if TYPE_CHECKING:  # the plan is loaded only for replays with a model (it costs start-up)
    from kvtool.model.shape import KvShape
    from kvtool.plan.deployment import DeploymentPlan, Hardware

TIERS = ("T1", "T2", "T3", "T4")


class ReplaySetup(NamedTuple):
    """What a replay (or the base of a sweep) runs with."""

    config: ReplayConfig
    ttft: TtftModel | None
    plan: DeploymentPlan | None
    notes: list[str]


def replay_plan(trace: Trace | StreamedTrace, shape: KvShape, hardware: Hardware) -> DeploymentPlan:
    """The node's plan for one session as long as the trace's longest request."""
    from kvtool.plan.deployment import plan_contexts
    from kvtool.plan.reload import ReloadAssumptions

    longest = max((r.input_tokens for r in trace.requests), default=trace.block_tokens)
    planned = plan_contexts(
        shape,
        contexts=[max(longest, trace.block_tokens)],
        sessions=1,
        hardware=hardware,
        assumptions=ReloadAssumptions(concurrent_loads=1),
    )
    return planned.plans[0]


def hybrid_hit_granularity(shape: KvShape) -> int:
    """The tokens a hit is rounded down to for ``shape``: its engine block size when the model
    has state layers (Mamba, GatedDeltaNet...: vLLM's prefix cache works in whole hybrid
    blocks, vllm#40696, #48401), else 1 (trace blocks are the granularity)."""
    from kvtool.model.spec import StateLayers

    if not any(isinstance(group, StateLayers) for group in shape.spec.groups):
        return 1
    return shape.size(shape.block_size or 1, 1).block_size


def replay_setup(
    trace: Trace | StreamedTrace,
    sizes: Mapping[str, TierSize | None],
    base: ReplayConfig,
    *,
    shape: KvShape | None = None,
    hardware: Hardware | None = None,
    block_bytes: int | None = None,
    ttft: bool = True,
) -> ReplaySetup:
    """``base``'s rules with the capacities and units resolved. ``block_bytes`` forces a
    block's size (``--real`` without a model); ``ttft`` False skips the TTFT model (sweeps).
    Raises InputError for hardware without a model or a size in bytes without one."""
    if hardware is not None and shape is None:
        raise InputError("--hardware needs --model", "add --model NAME")
    notes: list[str] = []
    plan = None
    ttft_model = None
    if shape is not None:
        if hardware is not None:
            plan = replay_plan(trace, shape, hardware)
            shape = shape.serving_tp(plan.serving.tp)
        block_bytes = shape.block_bytes(trace.block_tokens)
        if plan is not None and ttft:
            from kvtool.replay.ttft import ttft_model as build

            ttft_model = build(shape.spec, plan, block_bytes=block_bytes)
        notes.append(
            f"a block of {trace.block_tokens:,} tokens is {block_bytes:,} B of"
            f" {shape.describe()} KV (every rank)"
        )
    config = base._replace(
        capacity={},
        block_units=block_bytes or trace.block_tokens,
        unit="bytes" if block_bytes is not None else "tokens",
    )
    if shape is not None:
        granularity = hybrid_hit_granularity(shape)
        if granularity > 1:
            config = config._replace(hit_granularity=granularity)
            notes.append(
                f"hits rounded down to whole {granularity:,}-token blocks: vLLM caches the"
                f" prefixes of {shape.spec.name} (state layers) only at its hybrid block size"
                f" (a prompt shorter than {granularity:,} tokens never hits)"
            )
    capacity: dict[str, int | None]
    planned: dict[str, int | None] = {}
    if plan is not None:
        from kvtool.replay.ttft import plan_capacities

        capacity = dict(plan_capacities(plan))
        planned = dict(capacity)
        from_plan = [t for t in ("T1", "T2") if sizes.get(t) is None]
        if from_plan:
            notes.append(
                f"{', '.join(from_plan)} from the {plan.hardware.node.name} plan"
                " (T1: HBM for KV up to the 85% pressure line; T2: host memory for KV)"
            )
    elif all(sizes.get(t) is None for t in TIERS):
        capacity = {"T1": None, "T2": 0, "T3": 0, "T4": 0}
        notes.append("no sizes and no --hardware: T1 unbounded and the rest off (the reuse ratio)")
    else:
        capacity = dict.fromkeys(TIERS, 0)
    for tier in TIERS:
        size = sizes.get(tier)
        if size is not None:
            capacity[tier] = tier_units(trace, config, tier, size)
        capacity.setdefault(tier, None)
    for tier in ("T1", "T2"):  # a size given past what the hardware holds is not a plan
        given, hardware_has = capacity.get(tier), planned.get(tier)
        if sizes.get(tier) is not None and hardware_has and (given is None or given > hardware_has):
            assert plan is not None
            unit = format_bytes_binary if config.unit == "bytes" else (lambda n: f"{n:,} tokens")
            notes.append(
                f"warning: --{tier.lower()} {'unbounded' if given is None else unit(given)} is"
                f" more than the {plan.hardware.node.name} plan's {tier}"
                f" ({unit(hardware_has)}): the replay assumes memory the hardware does not have"
            )
    if ttft_model is not None:
        unpriced = [t for t in TIERS if capacity[t] != 0 and t not in ttft_model.reload_block_s]
        if unpriced:  # a hit there would have no reload time: no estimate rather than a guess
            ttft_model = None
            assert plan is not None
            notes.append(
                f"no TTFT estimate: {plan.hardware.node.name} publishes no bandwidth for"
                f" {', '.join(unpriced)} (turn it off with --{unpriced[0].lower()} 0 for one)"
            )
    elif ttft:
        notes.append("no TTFT estimate: it needs --model and --hardware")
    return ReplaySetup(config._replace(capacity=capacity), ttft_model, plan, notes)


def tier_units(
    trace: Trace | StreamedTrace, config: ReplayConfig, tier: str, size: TierSize
) -> int | None:
    """A size in the replay's units: whole blocks (tokens, or bytes with a model)."""
    if size.unit == "off" or (size.unit != "unbounded" and size.value == 0):
        return 0  # 0 in any unit (0, 0GiB) turns the tier off
    if size.unit == "unbounded":
        return None
    if size.unit == "bytes":
        if config.unit != "bytes":
            raise InputError(
                f"--{tier.lower()} {format_bytes_binary(size.value)} is in bytes: that needs"
                " --model",
                "add --model NAME, or give the size in tokens (3M)",
            )
        units = size.value // config.block_units * config.block_units
        block = format_bytes_binary(config.block_units)
        shown = format_bytes_binary(size.value)
    else:
        blocks = size.value // trace.block_tokens  # a capacity in tokens holds whole blocks
        units = blocks * config.block_units
        block = f"{trace.block_tokens:,} tokens"
        shown = f"{size.value:,} tokens"
    if units == 0:  # was: the tier silently off
        raise InputError(
            f"--{tier.lower()} {shown} holds no whole block ({block} each)",
            f"give at least one block, or 0 to turn {tier} off",
        )
    return units
