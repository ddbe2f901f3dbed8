"""``kvtool engine``: the built-in tiering engine. ``smoke`` moves real KV-sized chunks
through every tier and back, checking every byte."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvtool.cli import status
from kvtool.cli.app import reports_errors
from kvtool.errors import InputError

if TYPE_CHECKING:
    from kvtool.engine.mediums import Medium
    from kvtool.engine.smoke import SmokeOptions, Step

engine_app = typer.Typer(
    help="The built-in tiering engine: T1 (HBM) -> T2 (host) -> T3 (shared files) -> T4 (S3).\n\n"
    "Example: kvtool engine smoke",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

PANEL_SHAPE = "Chunks"
SMOKE_FOLDER = "kvtool-smoke"


def smoke(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="Model whose KV chunks to move (their size and key fingerprint).",
            rich_help_panel=PANEL_SHAPE,
        ),
    ] = "llama-3.1-8b",
    engine: Annotated[
        str, typer.Option("--engine", "-e", metavar="ENGINE", rich_help_panel=PANEL_SHAPE)
    ] = "vllm",
    tp: Annotated[
        str,
        typer.Option(
            "--tp", metavar="N", help="Tensor-parallel size.", rich_help_panel=PANEL_SHAPE
        ),
    ] = "1",
    kv_dtype: Annotated[
        str, typer.Option("--kv-dtype", metavar="DTYPE", rich_help_panel=PANEL_SHAPE)
    ] = "auto",
    chunk_tokens: Annotated[
        str,
        typer.Option(
            "--chunk-tokens",
            metavar="N",
            help="Tokens per chunk (LMCache's chunk_size, 256).",
            rich_help_panel=PANEL_SHAPE,
        ),
    ] = "256",
    sessions: Annotated[
        str,
        typer.Option("--sessions", "-n", metavar="N", help="Sessions sharing a prefix chunk."),
    ] = "4",
    chunks: Annotated[
        str, typer.Option("--chunks", metavar="N", help="Chunks per session (at least 2).")
    ] = "4",
    t3: Annotated[
        str | None,
        typer.Option(
            "--t3",
            metavar="DIR",
            help="T3 folder, e.g. /fsx/kvtool (default: a temporary folder, removed).",
        ),
    ] = None,
    t4: Annotated[
        str | None,
        typer.Option(
            "--t4",
            metavar="URL",
            help="T4: s3://bucket/prefix or file:///path (default: a temporary folder).",
        ),
    ] = None,
    posture: Annotated[
        str,
        typer.Option("--posture", metavar="eager|lazy", help="When chunks are written to T3."),
    ] = "lazy",
    policy: Annotated[
        str, typer.Option("--policy", metavar="NAME", help="Eviction policy: lru or s3fifo.")
    ] = "lru",
    io_threads: Annotated[
        str, typer.Option("--io-threads", metavar="N", help="T3 I/O threads (default 32).")
    ] = "32",
    phase: Annotated[
        str,
        typer.Option(
            "--phase",
            metavar="all|write|read",
            help="Two nodes: write on one, read on the other, with the same --t3.",
        ),
    ] = "all",
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the smoke folder on T3 and T4 afterwards.")
    ] = False,
    folder_name: Annotated[str, typer.Option("--folder-name", hidden=True)] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> int:
    """Move real KV-sized chunks through T1 -> T2 -> T3 -> T4 and back; check every byte.

    Steps: prefill; pressure eviction; idle demotion to T3, then to T4;
    node loss and recovery from T3; a second process reading T3;
    promotion from T4; a corrupt chunk detected; TTL expiry.

    Exit status: 0 every step passed, 1 a step failed, 2 bad usage.

    Examples:

      kvtool engine smoke

      kvtool engine smoke --model llama-3.1-70b --tp 8 --posture eager --json

      kvtool engine smoke --t3 /fsx/shared --t4 s3://my-bucket/kv

    Two nodes: --phase write on the first, then --phase read on the second:

      kvtool engine smoke --t3 /fsx/shared --phase write

      kvtool engine smoke --t3 /fsx/shared --phase read
    """
    import shutil
    import tempfile

    from kvtool.cli.render import engine as render
    from kvtool.cli.render.text import StatusLine
    from kvtool.units import parse_count

    if phase not in ("all", "write", "read"):
        raise InputError(f"unknown --phase {phase!r}", "choose all, write or read")
    if posture not in ("eager", "lazy"):
        raise InputError(f"unknown --posture {posture!r}", "choose eager or lazy")
    from kvtool.engine.policy import POLICIES

    if policy not in POLICIES:
        raise InputError(f"unknown --policy {policy!r}", "choose " + ", ".join(POLICIES))
    if phase != "all" and t3 is None:
        raise InputError(f"--phase {phase} needs the shared folder", "add --t3 /fsx/kvtool")
    threads = parse_count(io_threads, what="--io-threads")
    base = Path(t3) if t3 is not None else Path(tempfile.mkdtemp(prefix="kvtool-smoke-"))
    if not base.is_dir():
        raise InputError(f"--t3 {base} is not a folder", "pass an existing folder on T3")
    name = folder_name or (SMOKE_FOLDER if phase != "all" else _unique())
    root = base / name
    created = not root.exists()
    if phase == "write" and not created:
        shutil.rmtree(root)  # kvtool's own folder: a fresh write, not a mix with the last one
    if phase == "read" and not (root / "t3" / "manifest.json").is_file():
        raise InputError(
            f"no smoke manifest in {root}", "run --phase write with the same --t3 first"
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write {root}: {exc.strerror or exc}") from None
    mediums = _mediums(root, t4, threads, phase)
    try:
        if phase == "read":
            from kvtool.engine.smoke import SmokeReport, read_phase

            step = read_phase(root / "t3", mediums, io_threads=threads)
            report = SmokeReport([step], {}, {t: m.description for t, m in mediums.items()}, [])
        else:
            from kvtool.engine.smoke import run_smoke

            options = _options(
                model, engine, tp, kv_dtype, chunk_tokens, sessions, chunks, posture, policy,
                threads,
            )  # fmt: skip
            with StatusLine(not as_json, "kvtool engine smoke") as line:
                report = run_smoke(
                    options,
                    mediums,
                    t3_root=root / "t3",
                    phase=phase,
                    second_node=None if phase != "all" else _second_node(base, name, t4, threads),
                    progress=line.update,
                )
    finally:
        for medium in mediums.values():
            medium.close()
        if phase != "write" and not keep:
            _remove_s3(mediums)
            if t4 is not None and t4.startswith("file://"):
                shutil.rmtree(getattr(mediums["T4"], "root", root), ignore_errors=True)
            if created or phase == "read" or t3 is None:
                shutil.rmtree(root, ignore_errors=True)
            if t3 is None:
                shutil.rmtree(base, ignore_errors=True)
    if as_json:
        from kvtool.cli.render.text import print_json

        print_json({**report.to_json(), "folder": str(root), "phase": phase})
    else:
        render.print_smoke(report, folder=root, phase=phase, kept=keep or phase == "write")
    return status.OK if report.passed else status.PROBLEMS


def _unique() -> str:
    import os
    import secrets

    return f"{SMOKE_FOLDER}-{os.getpid()}-{secrets.token_hex(3)}"


def _options(
    model: str,
    engine: str,
    tp: str,
    kv_dtype: str,
    chunk_tokens: str,
    sessions: str,
    chunks: str,
    posture: str,
    policy: str,
    threads: int,
) -> "SmokeOptions":
    from kvtool.engine.keys import model_fingerprint
    from kvtool.engine.smoke import SmokeOptions
    from kvtool.model.engines import get_engine
    from kvtool.model.formats import resolve_format
    from kvtool.model.kv import chunk_bytes
    from kvtool.profiles.resolve import resolve_model
    from kvtool.units import parse_count

    spec = resolve_model(model).spec
    tokens = parse_count(chunk_tokens, what="--chunk-tokens")
    tp_size = parse_count(tp, what="--tp")
    fmt = resolve_format(kv_dtype, spec.dtype)
    per_session = parse_count(chunks, what="--chunks")
    if per_session < 2:
        raise InputError("--chunks must be at least 2", "a shared chunk and one of its own")
    size = chunk_bytes(spec, rules=get_engine(engine), fmt=fmt, chunk_tokens=tokens, tp=tp_size)
    return SmokeOptions(
        chunk_bytes=size,
        chunk_tokens=tokens,
        fingerprint=model_fingerprint(spec.name, fmt.name, f"{engine}-tp{tp_size}-chunk{tokens}"),
        sessions=parse_count(sessions, what="--sessions"),
        chunks_per_session=per_session,
        posture=posture,
        policy=policy,
        io_threads=threads,
    )


def _mediums(root: Path, t4: str | None, threads: int, phase: str) -> "dict[str, Medium]":
    """T1 and T2 in memory (torch when installed), T3 under ``root/t3``, T4 as asked."""
    from kvtool.bench.gpu import torch_or_none
    from kvtool.engine.mediums import FolderMedium, S3Medium
    from kvtool.engine.smoke import memory_mediums

    mediums: dict[str, Medium] = memory_mediums(torch_or_none())
    mediums["T3"] = FolderMedium("T3", root / "t3", io_threads=threads)
    if t4 is None:
        mediums["T4"] = FolderMedium("T4", root / "t4", io_threads=threads)
    elif t4.startswith("file://"):
        folder = Path(t4[len("file://") :])
        if not folder.is_dir():
            raise InputError(f"--t4 {t4}: {folder} is not a folder", "create it first")
        mediums["T4"] = FolderMedium("T4", folder / root.name, io_threads=threads)
    elif t4.startswith("s3://"):
        from kvtool.probe.host import s3_client

        url = t4.rstrip("/") + "/" + root.name
        mediums["T4"] = S3Medium("T4", url, client_factory=s3_client)
    else:
        raise InputError(f"--t4 {t4!r} is not s3://bucket/prefix or file:///path")
    return mediums


def _second_node(base: Path, name: str, t4: str | None, threads: int) -> "Any":
    """A second process, standing in for another node: ``--phase read`` on the same T3."""
    import json
    import sys

    from kvtool.engine.smoke import Step
    from kvtool.probe.host import LocalHost

    def run(_t3_root: Path) -> "Step":
        argv = [sys.executable, "-m", "kvtool", "engine", "smoke", "--phase", "read",
                "--t3", str(base), "--folder-name", name, "--keep", "--json",
                "--io-threads", str(threads)]  # fmt: skip
        done = LocalHost().run("smoke_read", argv, timeout_s=600)
        try:
            step = json.loads(done.stdout)["steps"][0]
            return Step(**step)
        except (ValueError, KeyError, IndexError, TypeError):
            last = (done.stderr or done.stdout).strip().splitlines()
            reason = last[-1] if last else f"exit status {done.returncode}"
            return Step("second node reads T3", "FAIL", f"the second process: {reason}", 0, 0.0, {})

    return run


def _remove_s3(mediums: "dict[str, Medium]") -> None:
    """Delete what the smoke wrote under its S3 prefix (best effort)."""
    from kvtool.engine.mediums import S3Medium

    medium = mediums.get("T4")
    if isinstance(medium, S3Medium):
        medium.delete_prefix()


engine_app.command("smoke", no_args_is_help=False)(reports_errors(smoke))


def _register_replay() -> None:
    from kvtool.cli.replay import gen_command, replay_command, sweep_command

    engine_app.command("replay", no_args_is_help=True)(reports_errors(replay_command))
    engine_app.command("sweep", no_args_is_help=True)(reports_errors(sweep_command))
    engine_app.command("gen", no_args_is_help=False)(reports_errors(gen_command))


_register_replay()
