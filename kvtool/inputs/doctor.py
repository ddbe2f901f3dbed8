"""``kvtool doctor``'s options, as typed, into the host to read and the checks' options."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

from kvtool.errors import InputError
from kvtool.files import output_folder, path_option

if TYPE_CHECKING:
    from kvtool.doctor.checks import DoctorOptions, GdsMode
    from kvtool.doctor.folder import FolderAsk
    from kvtool.findings import Report
    from kvtool.probe.gather import GatherOptions
    from kvtool.probe.host import Host


MAX_PROBE_MIB = 1024  # a probe samples the path; bench measures it (a shared mount fills up)


def _check_probe_room(folder: Path, mib: int) -> None:
    """The O_DIRECT and cuFile probes write ``mib`` MiB into ``folder``: at most
    ``MAX_PROBE_MIB``, and within 90% of its free space, as bench's test files are."""
    import shutil

    if mib > MAX_PROBE_MIB:
        raise InputError(
            f"--probe-mib {mib:,} is more than a probe needs (at most {MAX_PROBE_MIB:,} MiB):"
            " on a shared mount it would take that space from every node",
            "keep the default 64, or measure bandwidth with kvtool bench --tier t3",
        )
    free = shutil.disk_usage(folder).free
    if mib * 2**20 > free * 0.9:
        raise InputError(
            f"{folder} has {free / 2**20:,.0f} MiB free; a {mib:,} MiB probe does not fit",
            "lower --probe-mib, free space, or run with --no-write",
        )


def _recorded_path(snapshot: Path, given: str | None) -> str:
    """The path a snapshot answers for: the one it recorded (``path.json``). Another path is
    refused (the snapshot knows nothing of it), and a folder --capture did not write too."""
    import json

    record = snapshot / "path.json"
    try:
        recorded = json.loads(record.read_text(encoding="utf-8")).get("path")
    except (OSError, ValueError, AttributeError, RecursionError):  # nested past any record
        recorded = None
    if not isinstance(recorded, str) or not recorded:
        raise InputError(
            f"--snapshot {snapshot} is not a kvtool doctor --capture folder (no path.json)",
            "pass the folder kvtool doctor PATH --capture DIR wrote",
        )
    if given is not None and given.rstrip("/") != recorded.rstrip("/"):
        raise InputError(
            f"--snapshot {snapshot} recorded {recorded}, not {given}: it cannot answer for a"
            " path it never saw",
            f"drop PATH (it defaults to {recorded}), or capture {given} on its node",
        )
    return recorded


class DoctorInputs(NamedTuple):
    """What ``run_doctor`` takes."""

    host: Host
    path: str
    gather: GatherOptions
    options: DoctorOptions
    notes: tuple[str, ...] = ()  # options given that have no effect
    folder: FolderAsk | None = None  # None: --no-contents


def read_reports(paths: list[str]) -> list[Report]:
    """``--merge``: the ``kvtool doctor --json`` reports named."""
    from kvtool.inputs.evidence import read_doctor_report

    if not paths:
        raise InputError(
            "--merge needs doctor --json reports", "kvtool doctor --merge a.json b.json"
        )
    return [read_doctor_report(path_option(p, option="a --merge report")) for p in paths]


def resolve_doctor(
    path: str | None,
    *,
    nodes: str = "1",
    model: str | None = None,
    engine: str = "vllm",
    tp: str | None = None,
    kv_dtype: str = "auto",
    chunk_tokens: str = "256",
    sessions: str | None = None,
    ctx: str | None = None,
    gds: str = "optional",
    aws: bool = True,
    fsx_id: str | None = None,
    write: bool = True,
    probe_mib: str = "64",
    capture: str | Path | None = None,
    snapshot: str | Path | None = None,
    contents: bool = True,
    cap: str | None = None,
) -> DoctorInputs:
    """The host to read (live, a snapshot, or live and captured), what to gather, the
    checks' options (the chunk size and planned chunk files from the model's shape) and what
    the folder's contents are checked against (the model's Hub id, the ranks, the cap)."""
    from kvtool.doctor.checks import DoctorOptions
    from kvtool.probe.gather import GatherOptions
    from kvtool.probe.host import CapturingHost, LocalHost, SnapshotHost
    from kvtool.units import parse_count

    if path is not None:  # "" would be the current folder
        path_option(path, option="PATH")
    if capture is not None:
        capture = path_option(capture, option="--capture")
    if snapshot is not None:
        snapshot = path_option(snapshot, option="--snapshot")
    if gds not in ("required", "optional", "off"):
        raise InputError(f"unknown --gds {gds!r}", "choose required, optional or off")
    node_count = parse_count(nodes, what="--nodes")
    mib = parse_count(probe_mib, what="--probe-mib")
    if fsx_id is not None and not re.fullmatch(r"fs-[0-9a-f]{8,21}", fsx_id):
        raise InputError(
            f"--fsx-id {fsx_id!r} is not an FSx file system id",
            "give it as AWS shows it, e.g. fs-0123456789abcdef0",
        )
    if snapshot is not None and capture is not None:
        raise InputError(
            "--capture records this node; --snapshot checks a recorded one",
            "drop one of them",
        )
    if cap is not None and not contents:
        raise InputError(
            "--max-size is checked against the folder's contents", "drop --no-contents"
        )
    cap_bytes = None
    if cap is not None:
        from kvtool.units import parse_bytes

        cap_bytes = parse_bytes(cap, what="--max-size")
    chunk_bytes, planned, notes, ask = _chunks(
        model, engine, tp, kv_dtype, chunk_tokens, sessions, ctx
    )
    if snapshot is not None:
        if not snapshot.is_dir():
            raise InputError(
                f"--snapshot {snapshot} is not a folder", "pass the folder --capture wrote"
            )
        if not any(snapshot.iterdir()):
            raise InputError(f"--snapshot {snapshot} is empty", "pass the folder --capture wrote")
        path = _recorded_path(snapshot, path)
        host: Host = SnapshotHost(snapshot)
    else:
        if path is None:
            raise InputError(
                "doctor checks one PATH", "kvtool doctor /fsx/kvcache (or --merge a.json b.json)"
            )
        target = Path(path)
        if not target.exists():
            raise InputError(f"{path} does not exist", "pass the KV folder on the shared mount")
        if not target.is_dir():
            raise InputError(f"{path} is not a folder", "pass the KV folder, not a file")
        if write:
            _check_probe_room(target, mib)
        host = LocalHost()
        if capture is not None:
            output_folder(capture, option="--capture")
            capture.mkdir(exist_ok=True)
            host = CapturingHost(host, capture)
    return DoctorInputs(
        host,
        path,
        GatherOptions(
            probe_mib=mib, write_probe=write, gds=gds != "off", aws=aws, file_system_id=fsx_id
        ),
        DoctorOptions(
            nodes=node_count,
            chunk_bytes=chunk_bytes,
            planned_chunk_files=planned,
            gds=cast("GdsMode", gds),  # checked above
            probe_mib=mib,
        ),
        tuple(notes),
        ask._replace(cap=cap_bytes) if contents else None,
    )


def _chunks(
    model: str | None,
    engine: str,
    tp: str | None,
    kv_dtype: str,
    chunk_tokens: str,
    sessions: str | None,
    ctx: str | None,
) -> tuple[int | None, int | None, list[str], FolderAsk]:
    """One rank's chunk file in bytes, the chunk files the planned sessions write, notes for
    shape options given without a model, and the model and ranks the folder's orphans are
    judged by."""
    from kvtool.doctor.folder import FolderAsk
    from kvtool.inputs.folders import model_names

    if model is None:
        if sessions is not None or ctx is not None:
            raise InputError("--sessions and --ctx need --model", "add --model NAME")
        from kvtool.inputs.shape import unused_shape_options

        return None, None, unused_shape_options(
            engine=engine, kv_dtype=kv_dtype, tp=tp, chunk_tokens=chunk_tokens,
            why="the chunk checks need a model's chunk size",
        ), FolderAsk()  # fmt: skip
    from kvtool.inputs.shape import parse_chunk_tokens, resolve_shape
    from kvtool.profiles.resolve import resolve_model
    from kvtool.units import parse_count

    resolved = resolve_model(model)
    shape = resolve_shape(resolved, engine=engine, kv_dtype=kv_dtype, tp=tp)
    notes = []
    written: tuple[str, ...] = ()
    if resolved.origin == "file":
        notes.append(
            f"--model {model} is a config file: orphans are judged by world size only (the"
            " engines write a model's Hub id or served name; give that to judge them by model"
            " too)"
        )
    else:
        written = model_names(model, resolved=resolved) or ()
    ask = FolderAsk(
        models=written, world=shape.tp if shape.tp_given else None, mla=resolved.spec.is_mla
    )
    tokens = parse_chunk_tokens(chunk_tokens)
    chunk = shape.chunk_bytes(tokens)
    if sessions is None:
        return chunk, None, notes, ask
    context = parse_count(ctx or "8k", what="--ctx")
    writers = 1 if shape.spec.is_mla else shape.tp  # LMCache saves an MLA model from one rank
    files = parse_count(sessions, what="--sessions") * -(-context // tokens) * writers
    return chunk, files, notes, ask
