"""``kvtool engine smoke``: real KV-sized chunks through every tier and back, every byte
checked (the scenario and its folder's life are ``engine/smoke.py``)."""

from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli import status
from kvtool.cli.options import (
    ChunkTokensOpt,
    EngineOpt,
    JsonOpt,
    KvDtypeOpt,
    TpOpt,
    engine_rule_options,
    merge,
    model_option,
    renamed,
)
from kvtool.cli.render.text import note as say_note

POLICY, POSTURE = engine_rule_options()


def smoke(
    model: Annotated[
        str,
        model_option("Model whose KV chunks to move (their size and key fingerprint)."),
    ] = "llama-3.1-8b",
    engine: EngineOpt = "vllm",
    tp: TpOpt = None,
    kv_dtype: KvDtypeOpt = "auto",
    chunk_tokens: ChunkTokensOpt = "256",
    sessions: Annotated[
        str,
        typer.Option("--sessions", "-n", metavar="N", help="Sessions sharing a prefix chunk."),
    ] = "4",
    chunks: Annotated[
        str, typer.Option("--chunks", metavar="N", help="Chunks per session (at least 2).")
    ] = "4",
    t3_dir: Annotated[
        str | None,
        typer.Option(
            "--t3-dir",
            metavar="DIR",
            help="T3 folder, e.g. /fsx/kvtool (default: a temporary folder, removed).",
        ),
    ] = None,
    t4_url: Annotated[
        str | None,
        typer.Option(
            "--t4-url",
            metavar="URL",
            help="T4: s3://bucket/prefix or file:///path (default: a folder beside T3's).",
        ),
    ] = None,
    posture: Annotated[str, POSTURE] = "lazy",
    policy: Annotated[str, POLICY] = "lru",
    io_threads: Annotated[
        str,
        typer.Option(
            "--io-threads",
            metavar="N",
            help="Threads reading a T3 or T4 folder in parallel, 1-1024 (default 32).",
        ),
    ] = "32",
    phase: Annotated[
        str,
        typer.Option(
            "--phase",
            metavar="all|write|read",
            help="Two nodes: write on one, read on the other, with the same --t3-dir.",
        ),
    ] = "all",
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the smoke folder on T3 and T4 afterwards.")
    ] = False,
    folder_name: Annotated[str, typer.Option("--folder-name", hidden=True)] = "",
    old_t3: Annotated[str | None, renamed("--t3", "--t3-dir")] = None,
    old_t4: Annotated[str | None, renamed("--t4", "--t4-url")] = None,
    as_json: JsonOpt = False,
) -> int:
    """Move real KV-sized chunks through T1 -> T2 -> T3 -> T4 and back; check every byte.

    Steps: prefill; pressure eviction; idle demotion to T3, then to T4;
    node loss and recovery from T3; a second process reading T3;
    promotion from T4; a corrupt chunk detected; TTL expiry.

    Exit status: 0 every step passed, 1 a step failed, 2 bad usage.

    Examples:

      kvtool engine smoke

      kvtool engine smoke --model llama-3.1-70b --tp 8 --posture eager --json

      kvtool engine smoke --t3-dir /fsx/shared --t4-url s3://my-bucket/kv  # on FSx and S3

    Two nodes: --phase write on the first, then --phase read on the second:

      kvtool engine smoke --t3-dir /fsx/shared --phase write  # on FSx, node A

      kvtool engine smoke --t3-dir /fsx/shared --phase read  # on FSx, node B
    """
    from kvtool.bench.gpu import torch_and_why
    from kvtool.cli.render import engine as render
    from kvtool.cli.render.text import StatusLine, print_json
    from kvtool.engine.smoke import SmokeTargets, second_node_process, smoke_command
    from kvtool.inputs.smoke import resolve_smoke
    from kvtool.probe.host import LocalHost, engine_s3_client

    torch, no_gpu = torch_and_why(LocalHost())
    inputs = resolve_smoke(
        model=model, engine=engine, kv_dtype=kv_dtype, tp=tp, chunk_tokens=chunk_tokens,
        sessions=sessions, chunks=chunks, posture=posture, policy=policy,
        io_threads=io_threads, torch=torch, host=LocalHost(),
        targets=SmokeTargets(
            t3_dir=_folder(merge(t3_dir, old_t3, old="--t3", new="--t3-dir")),
            t4_url=merge(t4_url, old_t4, old="--t4", new="--t4-url"),
            phase=phase, keep=keep, folder_name=folder_name,
        ),
    )  # fmt: skip
    threads = inputs.targets.io_threads

    def run(argv: list[str]) -> tuple[int, str, str]:
        done = LocalHost().run("smoke_read", argv, timeout_s=600)
        return done.returncode, done.stdout, done.stderr

    with StatusLine(not as_json and phase != "read", "kvtool engine smoke") as line:
        outcome = smoke_command(
            inputs.options,
            inputs.targets,
            torch=torch,
            s3_client=engine_s3_client,
            second_node=second_node_process(io_threads=threads, run=run),
            progress=line.update,
            no_gpu=no_gpu,
            t3_fault=inputs.t3_fault,
        )
    left = list(outcome.cleanup_failures)
    if as_json:
        print_json({**outcome.report.to_json(), "folder": str(outcome.folder), "phase": phase,
                    "cleanup_failures": left}, command="engine smoke")  # fmt: skip
    else:
        render.print_smoke(outcome.report, folder=outcome.folder, phase=phase, kept=outcome.kept)
    for note in inputs.notes:  # after the run: an error in the targets comes first, alone
        say_note(f"{note}")
    for failure in left:  # e.g. S3 went away: say what may be left, never a traceback
        say_note(f"could not remove the smoke's scratch: {failure}")
    if outcome.swept:  # SIGKILL runs no clean-up: the next run removes it, and says so
        from kvtool.units import format_bytes_binary

        say_note(
            f"removed {len(outcome.swept)} folder(s) killed smokes of this host had left"
            f" ({format_bytes_binary(outcome.swept_bytes)}): "
            + ", ".join(str(p) for p in outcome.swept[:5])
        )
    return status.OK if outcome.report.passed and not left else status.PROBLEMS


def _folder(text: str | Path | None) -> Path | None:
    from kvtool.files import path_option

    return None if text is None else path_option(text, option="--t3-dir")
