"""``kvtool size``: KV bytes per token, per session and in total for a model.

One command, two signatures: ``size`` here, with the options ``kvtool size --help`` shows,
and ``size_forwarded.size``, with those and, hidden, kvtool plan's options and old spellings
(forwarded for one release). ``kvtool`` builds this one when every option on its command line
is one of its own (``command_for``): typer turns each parameter into a click option at
start-up, and the 24 hidden ones cost about a seventh of ``kvtool size``'s start-up. Help,
tests and every other command line build the forwarding one; both answer through ``answer``.
"""

import sys
from collections.abc import Sequence
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
    plan_option,
)
from kvtool.cli.render.text import note as say_note
from kvtool.inputs.size import SizeAnswer, SizeRequest, size_models

ModelArg = Annotated[
    str,
    typer.Argument(
        metavar="MODEL",
        help="Bundled model name or alias (see `kvtool models`), a config.json path or a"
        " folder holding one, or a Hugging Face repo id (needs the hf extra). Several,"
        " comma-separated, side by side.",
    ),
]
WeightsDtypeOpt = Annotated[str | None, plan_option("--weights-dtype", panel=None)]
BatchedTokensOpt = Annotated[str | None, plan_option("--max-num-batched-tokens", panel=None)]
KvBudgetOpt = Annotated[str | None, plan_option("--kv-cache-memory-bytes", panel=None)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


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
) -> int | None:
    """How much KV cache MODEL needs: per token, per session, and for all sessions.

    Where it lives and what it costs on a cluster is kvtool plan's answer.

    Examples:

      kvtool size deepseek-r1 --ctx 200k --sessions 100

      kvtool size llama-3.1-70b --ctx 8k,32k,128K --kv-dtype fp8 --tp 8

      kvtool size examples/my-model/config.json --ctx 1m --engine formula --json

      kvtool size llama-3.1-8b,deepseek-r1 --ctx 32k --json
    """
    return answer(
        SizeRequest(
            model, ctx=ctx, sessions=sessions, kv_dtype=kv_dtype, engine=engine, tp=tp,
            block_size=block_size, weights_dtype=weights_dtype,
            max_num_batched_tokens=max_num_batched_tokens, as_json=as_json,
            state_dtype=state_dtype, kv_cache_memory_bytes=kv_cache_memory_bytes,
        )
    )  # fmt: skip


def own_options() -> frozenset[str]:
    """Every option name of ``size`` as typed, read from its annotations (no click command
    built), and --quiet, which every command takes; tests/cli/test_size.py holds it to the
    command typer builds."""
    own = {"--quiet", "-q"}
    for hint in size.__annotations__.values():
        for info in getattr(hint, "__metadata__", ()):
            first = getattr(info, "default", None)  # typer.Option("--ctx"): its first name
            names = [first] if isinstance(first, str) and first.startswith("-") else []
            own.update([*names, *(getattr(info, "param_decls", None) or ())])
    return frozenset(own)


def command_for(argv: Sequence[str]) -> tuple[str, str]:
    """The module (in ``kvtool.cli``) and function that answer ``kvtool size`` with ``argv``
    (what follows ``size``): ``size`` here when it has options and every one is ``size``'s
    own, else ``size_forwarded.size`` (for --help, no arguments, a forwarded or old option, a
    mistyped one: its messages are the whole command's)."""
    options = [t for t in argv[: list(argv).index("--") if "--" in argv else None]
               if t.startswith("-") and t != "-"]  # fmt: skip
    own = own_options()
    if options and all(t.split("=", 1)[0] in own for t in options):
        return "size", "size"
    return "size_forwarded", "size"


def answer(request: SizeRequest, command: str = "size") -> int | None:
    """kvtool size's answer, and with ``hardware`` kvtool plan's: one library call (every
    option resolved there, one error line for any mistake), then the sizes, plans or the
    emitted configuration rendered. Notes are said even when a later option is a mistake.
    Exit 1 (``PROBLEMS``) when one node cannot serve a session of some context."""
    from kvtool import __version__

    notes: list[str] = []
    try:
        answered = size_models(request.replace(kvtool_version=__version__), notes)
    finally:
        for line in notes:
            say_note(line)
    if answered.emitted is not None:
        sys.stdout.write(answered.emitted)
        for line in answered.notes_after:  # the configuration cannot carry them: stderr
            say_note(line)
        return None
    _render(answered, request.as_json, command)
    if any(one.unservable or any(not p.starts for p in one.pools) for one in answered.sized):
        # a verdict: no node serves a session, or vLLM would not start with the budget
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
                unservable=one.unservable, pools=one.pools,
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
    render.print_size(one.resolved, one.results, one.batched_why, one.pools)
    if one.plans:
        from kvtool.cli.render.plan import print_plans

        print_plans(one.plans)
    if one.costs:
        render.print_costs(one.plans, one.costs)
