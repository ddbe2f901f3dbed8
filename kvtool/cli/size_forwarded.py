"""``kvtool size`` with every option it takes: those ``size.size`` has and, hidden, kvtool
plan's (``kvtool size --hardware`` is ``kvtool plan`` now: forwarded, with a notice, for one
release) and the old spellings. Built for help, tests and any command line ``size.size``
does not answer (``size.command_for``)."""

from typing import Annotated

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
from kvtool.cli.size import (
    BatchedTokensOpt,
    JsonOpt,
    KvBudgetOpt,
    ModelArg,
    WeightsDtypeOpt,
    answer,
)
from kvtool.cli.size import size as lean
from kvtool.inputs.size import SizeRequest


def size(
    model: ModelArg,
    ctx: CtxOpt = "8k",
    sessions: SessionsOpt = "1",
    kv_dtype: KvDtypeOpt = "auto",
    state_dtype: StateDtypeOpt = "auto",
    engine: EngineOpt = "vllm",
    tp: TpOpt = None,
    block_size: BlockTokensOpt = None,
    weights_dtype: WeightsDtypeOpt = None,
    max_num_batched_tokens: BatchedTokensOpt = None,
    kv_cache_memory_bytes: KvBudgetOpt = None,
    as_json: JsonOpt = False,
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
) -> int | None:
    if hardware is not None:  # kvtool plan's question: answered, and said where it moved
        note_renamed("kvtool size --hardware", "kvtool plan")
    t3 = merge(t3, old_t3, old="--t3", new="--t3-storage")
    t4 = merge(t4, old_t4, old="--t4", new="--t4-storage")
    block_size = merge(block_size, old_block_size, old="--block-size", new="--block-tokens")
    posture = merge(posture, "eager" if old_eager else None, old="--eager", new="--posture eager")
    return answer(
        SizeRequest(
            model, ctx=ctx, sessions=sessions, kv_dtype=kv_dtype, engine=engine, tp=tp,
            block_size=block_size, hardware=hardware, nodes=nodes, fsx_capacity=fsx_capacity,
            fsx_throughput=fsx_throughput, t3=t3, t4=t4, t3_path=t3_path,
            weights_dtype=weights_dtype, mfu=mfu, concurrent_loads=concurrent_loads,
            gpu_memory_utilization=gpu_memory_utilization, emit=emit, t3_dir=t3_dir,
            bench=bench, max_num_batched_tokens=max_num_batched_tokens, pp=pp,
            dp_attention=dp_attention, cost=cost, prices=prices, region=region,
            calibrate=calibrate, posture=posture, as_json=as_json, state_dtype=state_dtype,
            kv_cache_memory_bytes=kv_cache_memory_bytes,
        )
    )  # fmt: skip


size.__doc__ = lean.__doc__  # one help text: the one kvtool size --help shows
