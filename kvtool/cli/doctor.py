"""``kvtool doctor``: is this mount and node ready for a shared KV tier."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from kvtool.cli import status
from kvtool.errors import InputError

if TYPE_CHECKING:
    from kvtool.doctor.checks import GdsMode
    from kvtool.findings import Report
    from kvtool.probe.host import Host


def doctor(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATH",
            help="The KV folder on the shared file system (with --merge: doctor --json reports).",
        ),
    ] = None,
    nodes: Annotated[
        str, typer.Option("--nodes", metavar="N", help="Nodes that will share the folder.")
    ] = "1",
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Model whose KV chunks the folder holds (chunk size)."),
    ] = None,
    engine: Annotated[str, typer.Option("--engine", "-e", metavar="ENGINE")] = "vllm",
    tp: Annotated[str, typer.Option("--tp", metavar="N", help="Tensor-parallel size.")] = "1",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", metavar="DTYPE")] = "auto",
    chunk_tokens: Annotated[
        str,
        typer.Option("--chunk-tokens", metavar="N", help="Tokens per chunk file (LMCache 256)."),
    ] = "256",
    sessions: Annotated[
        str | None,
        typer.Option("--sessions", metavar="N", help="Sessions the tier holds (files per folder)."),
    ] = None,
    ctx: Annotated[
        str | None,
        typer.Option("--ctx", metavar="TOKENS", help="Context per session (with --sessions)."),
    ] = None,
    gds: Annotated[
        str,
        typer.Option("--gds", metavar="MODE", help="GPUDirect Storage: required, optional, off."),
    ] = "optional",
    aws: Annotated[
        bool,
        typer.Option("--aws/--no-aws", help="Ask IMDS and the FSx/EC2 APIs (short timeouts)."),
    ] = True,
    fsx_id: Annotated[
        str | None,
        typer.Option(
            "--fsx-id", metavar="FS-ID", help="FSx file system id (default: by mount name)."
        ),
    ] = None,
    write: Annotated[
        bool,
        typer.Option("--write/--no-write", help="Run the O_DIRECT (and cuFile) probe I/O."),
    ] = True,
    probe_mib: Annotated[
        str, typer.Option("--probe-mib", metavar="MIB", help="Probe I/O size (default 64).")
    ] = "64",
    capture: Annotated[
        Path | None,
        typer.Option("--capture", metavar="DIR", help="Also write everything read into DIR."),
    ] = None,
    snapshot: Annotated[
        Path | None,
        typer.Option("--snapshot", metavar="DIR", help="Check a captured folder, not this node."),
    ] = None,
    merge: Annotated[
        bool, typer.Option("--merge", help="Combine per-node --json reports into one view.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    junit: Annotated[
        Path | None, typer.Option("--junit", metavar="FILE", help="Also write JUnit XML.")
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show passing evidence.")
    ] = False,
) -> int:
    """Check that PATH, on this node, is ready to be a shared KV tier (T3).

    Exit status: 0 nothing FAILs, 1 something FAILs, 2 bad usage.

    Examples:

      kvtool doctor /fsx/kvcache --nodes 16 --model llama-3.1-70b

      kvtool doctor /fsx/kvcache --gds required --json > node.json

      kvtool doctor /fsx/kvcache --capture /tmp/doctor-snapshot

      kvtool doctor --snapshot /tmp/doctor-snapshot /fsx/kvcache

      kvtool doctor --merge node-a.json node-b.json
    """
    from kvtool.cli.render import doctor as render
    from kvtool.cli.render.text import print_json

    if merge:
        from kvtool.doctor.run import merge_reports, report_from_json
        from kvtool.files import read_json_object

        if not paths:
            raise InputError(
                "--merge needs doctor --json reports", "kvtool doctor --merge a.json b.json"
            )
        merged = merge_reports(
            [
                report_from_json(read_json_object(Path(p), what="doctor report"), source=p)
                for p in paths
            ]
        )
        if junit is not None:
            from kvtool.findings import junit_xml

            findings = [
                f._replace(id=f"{r.node}:{f.id}") for r in merged.reports for f in r.findings
            ]
            _write(junit, junit_xml("kvtool doctor --merge", [*findings, *merged.differences]))
        if as_json:
            print_json(merged.to_json())
        else:
            render.print_merged(merged)
        return status.PROBLEMS if merged.failed else status.OK

    if not paths or len(paths) != 1:
        raise InputError(
            "doctor checks one PATH", "kvtool doctor /fsx/kvcache (or --merge a.json b.json)"
        )
    report = _run(
        paths[0],
        nodes=nodes,
        model=model,
        engine=engine,
        tp=tp,
        kv_dtype=kv_dtype,
        chunk_tokens=chunk_tokens,
        sessions=sessions,
        ctx=ctx,
        gds=gds,
        aws=aws,
        fsx_id=fsx_id,
        write=write,
        probe_mib=probe_mib,
        capture=capture,
        snapshot=snapshot,
    )
    if junit is not None:
        from kvtool.findings import junit_xml

        _write(
            junit, junit_xml(f"kvtool doctor {report.path}", report.findings, hostname=report.node)
        )
    if as_json:
        print_json(report.to_json())
    else:
        render.print_report(report, verbose=verbose)
    return status.PROBLEMS if report.failed else status.OK


def _write(path: Path, text: str) -> None:
    """Write a whole file at once, through a temporary name, so a reader never sees half."""
    import os

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _run(
    path: str,
    *,
    nodes: str,
    model: str | None,
    engine: str,
    tp: str,
    kv_dtype: str,
    chunk_tokens: str,
    sessions: str | None,
    ctx: str | None,
    gds: str,
    aws: bool,
    fsx_id: str | None,
    write: bool,
    probe_mib: str,
    capture: Path | None,
    snapshot: Path | None,
) -> "Report":
    """Build the options, the host (live, snapshot or capturing) and run the doctor."""
    from kvtool.doctor.checks import DoctorOptions
    from kvtool.doctor.run import run_doctor
    from kvtool.probe.gather import GatherOptions
    from kvtool.probe.host import CapturingHost, LocalHost, SnapshotHost
    from kvtool.units import parse_count

    if gds not in ("required", "optional", "off"):
        raise InputError(f"unknown --gds {gds!r}", "choose required, optional or off")
    node_count = parse_count(nodes, what="--nodes")
    mib = parse_count(probe_mib, what="--probe-mib")
    chunk_bytes, planned = _chunks(model, engine, tp, kv_dtype, chunk_tokens, sessions, ctx)
    if snapshot is not None:
        if not snapshot.is_dir():
            raise InputError(
                f"--snapshot {snapshot} is not a folder", "pass the folder --capture wrote"
            )
        if not any(snapshot.iterdir()):
            raise InputError(f"--snapshot {snapshot} is empty", "pass the folder --capture wrote")
        host: Host = SnapshotHost(snapshot)
    else:
        target = Path(path)
        if not target.exists():
            raise InputError(f"{path} does not exist", "pass the KV folder on the shared mount")
        if not target.is_dir():
            raise InputError(f"{path} is not a folder", "pass the KV folder, not a file")
        host = LocalHost()
        if capture is not None:
            capture.mkdir(parents=True, exist_ok=True)
            host = CapturingHost(host, capture)
    return run_doctor(
        host,
        path,
        gather_options=GatherOptions(
            probe_mib=mib, write_probe=write, gds=gds != "off", aws=aws, file_system_id=fsx_id
        ),
        options=DoctorOptions(
            nodes=node_count,
            chunk_bytes=chunk_bytes,
            planned_chunk_files=planned,
            gds=cast("GdsMode", gds),  # checked above
            probe_mib=mib,
        ),
    )


def _chunks(
    model: str | None,
    engine: str,
    tp: str,
    kv_dtype: str,
    chunk_tokens: str,
    sessions: str | None,
    ctx: str | None,
) -> tuple[int | None, int | None]:
    """One rank's chunk file in bytes, and the chunk files the planned sessions write."""
    if model is None:
        if sessions is not None or ctx is not None:
            raise InputError("--sessions and --ctx need --model", "add --model NAME")
        return None, None
    from kvtool.model.engines import get_engine
    from kvtool.model.formats import resolve_format
    from kvtool.model.kv import chunk_bytes
    from kvtool.profiles.resolve import resolve_model
    from kvtool.units import parse_count

    spec = resolve_model(model).spec
    tokens = parse_count(chunk_tokens, what="--chunk-tokens")
    tp_size = parse_count(tp, what="--tp")
    chunk = chunk_bytes(
        spec,
        rules=get_engine(engine),
        fmt=resolve_format(kv_dtype, spec.dtype),
        chunk_tokens=tokens,
        tp=tp_size,
    )
    if sessions is None:
        return chunk, None
    context = parse_count(ctx or "8k", what="--ctx")
    writers = 1 if spec.is_mla else tp_size  # LMCache saves an MLA model from one rank
    files = parse_count(sessions, what="--sessions") * -(-context // tokens) * writers
    return chunk, files
