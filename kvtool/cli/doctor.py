"""``kvtool doctor``: is this mount and node ready for a shared KV tier."""

from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli import status
from kvtool.cli.options import (
    TOKENS_RULE,
    ChunkTokensOpt,
    EngineOpt,
    JsonOpt,
    KvDtypeOpt,
    TpOpt,
    model_option,
    renamed,
)
from kvtool.cli.options import merge as merged_option
from kvtool.errors import InputError


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
        model_option("Model whose KV chunks the folder holds (chunk size)."),
    ] = None,
    engine: EngineOpt = "vllm",
    tp: TpOpt = None,
    kv_dtype: KvDtypeOpt = "auto",
    chunk_tokens: ChunkTokensOpt = "256",
    sessions: Annotated[
        str | None,
        typer.Option("--sessions", metavar="N", help="Sessions the tier holds (files per folder)."),
    ] = None,
    ctx: Annotated[
        str | None,
        typer.Option(
            "--ctx", metavar="TOKENS", help=f"Context per session (with --sessions); {TOKENS_RULE}."
        ),
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
    capture: Annotated[  # (text: "" is refused, where a Path would be the current folder)
        str | None,
        typer.Option("--capture", metavar="DIR", help="Also write everything read into DIR."),
    ] = None,
    snapshot: Annotated[
        str | None,
        typer.Option("--snapshot", metavar="DIR", help="Check a captured folder, not this node."),
    ] = None,
    contents: Annotated[
        bool,
        typer.Option(
            "--contents/--no-contents",
            help="Read what the engines' files in PATH hold (orphans, cap, files per folder).",
        ),
    ] = True,
    cap: Annotated[
        str | None,
        typer.Option(
            "--max-size", metavar="SIZE", help="The most the folder may hold, e.g. 20TiB."
        ),
    ] = None,
    merge: Annotated[
        bool, typer.Option("--merge", help="Combine per-node --json reports into one view.")
    ] = False,
    as_json: JsonOpt = False,
    junit: Annotated[
        Path | None, typer.Option("--junit", metavar="FILE", help="Also write JUnit XML.")
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show passing evidence.")
    ] = False,
    old_cap: Annotated[str | None, renamed("--cap", "--max-size")] = None,
) -> int:
    """Check that PATH, on this node, is ready to be a shared KV tier (T3).

    It also reads what the engines' files there hold, as kvtool inspect does: with --model
    (and --tp) files no deployment of it reads are orphans; with --max-size a folder past it
    FAILs. --no-contents skips that walk (a folder of millions of files takes a while).

    Exit status: 0 nothing FAILs, 1 something FAILs, 2 bad usage.

    Examples:

      kvtool doctor /fsx/kvcache --nodes 16 --model llama-3.1-70b  # on FSx

      kvtool doctor /fsx/kvcache --gds required --json > node.json  # on FSx

      kvtool doctor /fsx/kvcache --model llama-3.1-70b --tp 8 --max-size 20TiB  # on FSx

      kvtool doctor /fsx/kvcache --capture /tmp/doctor-snapshot  # on FSx

      kvtool doctor --snapshot examples/doctor-snapshot

      kvtool doctor --merge examples/check/doctor-node-a.json examples/check/doctor-node-b.json
    """
    from kvtool.cli.render import doctor as render
    from kvtool.cli.render.text import Counter, print_json, print_notes
    from kvtool.files import output_file, write_text
    from kvtool.findings import junit_xml

    if junit is not None:
        output_file(junit, option="--junit")  # before any work, not after it

    if merge:
        from kvtool.doctor.run import merge_reports
        from kvtool.inputs.doctor import read_reports

        merged = merge_reports(read_reports(paths or []))
        if junit is not None:
            findings = [
                f._replace(id=f"{r.node}:{f.id}") for r in merged.reports for f in r.findings
            ]
            write_text(junit, junit_xml("kvtool doctor --merge", [*findings, *merged.differences]))
        if as_json:
            print_json(merged.to_json(), command="doctor")
        else:
            render.print_merged(merged)
        return status.PROBLEMS if merged.failed else status.OK

    from kvtool.doctor.run import run_doctor
    from kvtool.inputs.doctor import resolve_doctor

    if paths and len(paths) > 1:
        raise InputError(
            "doctor checks one PATH", "kvtool doctor /fsx/kvcache (or --merge a.json b.json)"
        )
    inputs = resolve_doctor(
        paths[0] if paths else None,
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
        contents=contents,
        cap=merged_option(cap, old_cap, old="--cap", new="--max-size"),
    )
    with Counter(not as_json, "kvtool doctor: reading the folder") as progress:
        report = run_doctor(
            inputs.host,
            inputs.path,
            gather_options=inputs.gather,
            options=inputs.options,
            folder=inputs.folder,
            progress=progress,
        )
    if junit is not None:
        write_text(
            junit, junit_xml(f"kvtool doctor {report.path}", report.findings, hostname=report.node)
        )
    if as_json:
        print_json(
            {**report.to_json(), **({"notes": list(inputs.notes)} if inputs.notes else {})},
            command="doctor",
        )
    else:
        render.print_report(report, verbose=verbose)
        print_notes(inputs.notes)
    return status.PROBLEMS if report.failed else status.OK
