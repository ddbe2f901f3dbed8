"""``kvtool size``: KV bytes per token, per session and in total for a model."""

import sys
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
from kvtool.cli.render.text import note as say_note
from kvtool.inputs.size import SizeAnswer, SizeRequest, size_models


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
) -> int | None:
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
        SizeRequest(
            model, ctx=ctx, sessions=sessions, kv_dtype=kv_dtype, engine=engine, tp=tp,
            block_size=block_size, hardware=hardware, nodes=nodes, fsx_capacity=fsx_capacity,
            fsx_throughput=fsx_throughput, t3=t3, t4=t4, t3_path=t3_path,
            weights_dtype=weights_dtype, mfu=mfu, concurrent_loads=concurrent_loads,
            gpu_memory_utilization=gpu_memory_utilization, emit=emit, t3_dir=t3_dir,
            bench=bench, max_num_batched_tokens=max_num_batched_tokens, pp=pp,
            dp_attention=dp_attention, cost=cost, prices=prices, region=region,
            calibrate=calibrate, posture=posture, as_json=as_json, state_dtype=state_dtype,
        )
    )  # fmt: skip


def answer(request: SizeRequest, command: str = "size") -> int | None:
    """kvtool size's answer, and with ``hardware`` kvtool plan's: one library call (every
    option resolved there, one error line for any mistake), then the sizes, plans or the
    emitted configuration rendered. Notes are said even when a later option is a mistake.
    Exit 1 (``PROBLEMS``) when one node cannot serve a session of some context."""
    from kvtool import __version__

    notes: list[str] = []
    try:
        answered = size_models(request._replace(kvtool_version=__version__), notes)
    finally:
        for line in notes:
            say_note(line)
    if answered.emitted is not None:
        sys.stdout.write(answered.emitted)
        for line in answered.notes_after:  # the configuration cannot carry them: stderr
            say_note(line)
        return None
    _render(answered, request.as_json, command)
    if any(one.unservable for one in answered.sized):  # a verdict: no node serves a session
        from kvtool.cli.status import PROBLEMS

        return PROBLEMS
    return None


def _render(answered: SizeAnswer, as_json: bool, command: str = "size") -> None:
    """One model: its header, groups and rows (and plans); several: one comparison table.
    The weights, where they are part of the answer (JSON, a comparison), in it."""
    from kvtool.cli.render import size as render

    sized, weights = answered.sized, answered.weights
    if as_json:
        from kvtool.cli.render.text import print_json

        records = []
        for index, one in enumerate(sized):
            records += render.size_json(
                one.resolved, one.results, one.plans, one.batched_why,
                weights=None if weights is None else weights[index], costs=one.costs,
                unservable=one.unservable,
            )  # fmt: skip
        print_json(records, command=command)
        return
    if len(sized) > 1:
        assert weights is not None
        render.print_comparison(
            [render.Compared(one.resolved, one.results, one.plans, w, one.costs, one.unique,
                             one.unservable)
             for one, w in zip(sized, weights, strict=True)]
        )  # fmt: skip
        return
    one = sized[0]
    if one.plans or one.unservable:
        from kvtool.cli.render.plan import print_verdicts

        print_verdicts(one.plans, one.unservable)
    render.print_size(one.resolved, one.results, one.batched_why)
    if one.plans:
        from kvtool.cli.render.plan import print_plans

        print_plans(one.plans)
    if one.costs:
        render.print_costs(one.plans, one.costs)
