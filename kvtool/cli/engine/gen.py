"""``kvtool engine gen``: a synthetic trace in kvtool's JSONL from a workload description."""

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli.options import TOKENS_RULE, merge, renamed


def gen(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write here (default: stdout)."),
    ] = None,
    requests: Annotated[
        str | None,
        typer.Option("--requests", metavar="N", help="Requests to write (default 10,000)."),
    ] = None,
    old_requests: Annotated[str | None, renamed("-n", "--requests")] = None,  # -n: --sessions
    arrival_rate: Annotated[
        float, typer.Option("--arrival-rate", metavar="PER_S", help="New sessions per second.")
    ] = 2.0,
    turns: Annotated[
        float, typer.Option("--turns", metavar="N", help="Mean turns per session.")
    ] = 4.0,
    think: Annotated[
        float, typer.Option("--think", metavar="S", help="Mean seconds between turns.")
    ] = 30.0,
    system_prompts: Annotated[
        int, typer.Option("--system-prompts", metavar="N", help="Distinct shared system prompts.")
    ] = 8,
    system_tokens: Annotated[int, typer.Option("--system-tokens", metavar="N")] = 2000,
    rag_preambles: Annotated[
        int, typer.Option("--rag-preambles", metavar="N", help="Distinct shared RAG documents.")
    ] = 200,
    rag_share: Annotated[
        float, typer.Option("--rag-share", metavar="F", help="Share of sessions with one.")
    ] = 0.3,
    rag_tokens: Annotated[int, typer.Option("--rag-tokens", metavar="N")] = 6000,
    user_tokens: Annotated[
        int, typer.Option("--user-tokens", metavar="N", help="Mean user message (lognormal).")
    ] = 300,
    output_tokens: Annotated[
        int, typer.Option("--output-tokens", metavar="N", help="Mean answer (lognormal).")
    ] = 400,
    max_context: Annotated[
        str,
        typer.Option("--max-context", metavar="TOKENS", help=f"Longest request; {TOKENS_RULE}."),
    ] = "128k",
    block_tokens: Annotated[int, typer.Option("--block-tokens", metavar="N")] = 512,
    seed: Annotated[int, typer.Option("--seed", metavar="N")] = 1,
) -> None:
    """Write a synthetic trace (kvtool's JSONL) from a workload description; seeded.

    Examples:

      kvtool engine gen --requests 1000 --seed 7

      kvtool engine gen --requests 20k --arrival-rate 20 --rag-share 0.5 -o big.jsonl
    """
    from kvtool.files import output_file
    from kvtool.replay.gen import Workload, write_lines
    from kvtool.units import parse_count

    if output is not None:
        output_file(output, option="--output")
    given = merge(requests, old_requests, old="-n", new="--requests")  # "" is no count
    workload = Workload(
        requests=parse_count("10000" if given is None else given, what="--requests"),
        arrival_rate=arrival_rate,
        turns=turns,
        think_s=think,
        system_prompts=system_prompts,
        system_tokens=system_tokens,
        rag_preambles=rag_preambles,
        rag_share=rag_share,
        rag_tokens=rag_tokens,
        user_tokens=user_tokens,
        output_tokens=output_tokens,
        max_context=parse_count(max_context, what="--max-context"),
        block_tokens=block_tokens,
        seed=seed,
    ).checked()
    if output is None:
        sys.stdout.writelines(write_lines(workload))
        return
    import os

    from kvtool.errors import InputError
    from kvtool.replay.gen import estimated_bytes
    from kvtool.units import format_bytes

    folder = os.statvfs(output.parent)
    free, needed = folder.f_bavail * folder.f_frsize, estimated_bytes(workload)
    if needed > free:
        raise InputError(
            f"--output {output}: {workload.requests:,} requests take about"
            f" {format_bytes(needed)}, and its file system has {format_bytes(free)} free",
            "ask for fewer --requests, or write elsewhere",
        )
    from kvtool.cli.render.text import Progress
    from kvtool.files import write_text

    with Progress(True, "kvtool engine gen", "requests") as progress:  # (a terminal only)

        def counted() -> Iterator[str]:
            for index, line in enumerate(write_lines(workload), 1):
                if not index & 1023:
                    progress(index, workload.requests)
                yield line

        write_text(output, counted())
    print(f"kvtool: wrote {workload.requests:,} requests to {output}", file=sys.stderr)
