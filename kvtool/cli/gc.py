"""``kvtool gc``: cap a shared KV folder, least-recently-used chunks first, whole chunks only."""

from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli.options import JsonOpt, merge, model_option, renamed


def gc(
    folder: Annotated[str, typer.Argument(metavar="DIR", help="The shared KV folder to cap.")],
    max_size: Annotated[
        str | None,
        typer.Option("--max-size", metavar="SIZE", help="Keep at most this much (e.g. 4TiB)."),
    ] = None,
    max_age: Annotated[
        str | None,
        typer.Option("--max-age", metavar="DURATION", help="Remove chunks unused this long (7d)."),
    ] = None,
    keep_free: Annotated[
        str | None,
        typer.Option(
            "--keep-free", metavar="SIZE", help="Remove until the file system has this much free."
        ),
    ] = None,
    layout: Annotated[
        str | None,
        typer.Option(
            "--layout",
            metavar="LAYOUT",
            help="Only this engine's file layout: lmcache-disk, lmcache-fs, sglang, vllm, llm-d,"
            " kvtool.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        model_option(
            "Only this model's files (alias, served name, Hub id; for vLLM folders the path or"
            " Hub id it was started with); files whose model cannot be told stay."
        ),
    ] = None,
    grace: Annotated[
        str,
        typer.Option(
            "--grace", metavar="DURATION", help="Never remove a chunk used more recently than this."
        ),
    ] = "10m",
    include_unknown: Annotated[
        bool,
        typer.Option(
            "--include-unknown",
            help="Also remove files of no known layout (each on its own) that lie in a folder"
            " beside an engine's files.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what a real run would remove; remove nothing.")
    ] = False,
    log: Annotated[
        Path | None,
        typer.Option(
            "--log",
            metavar="FILE",
            help="Append every removal to FILE as a JSON line, written before the file goes.",
        ),
    ] = None,
    list_files: Annotated[
        bool, typer.Option("--list", help="Print every file removed (or, dry, to be removed).")
    ] = False,
    release: Annotated[
        bool,
        typer.Option(
            "--release",
            help="On FSx for Lustre: release the chosen files to the S3 data repository (lfs"
            " hsm_release: their data goes, name and metadata stay, a read restores them)"
            " instead of removing them; only files already exported and unchanged since.",
        ),
    ] = False,
    emit: Annotated[
        str | None,
        typer.Option(
            "--emit",
            metavar="fsx-task",
            help="With --release: print the aws fsx create-data-repository-task request that"
            " has FSx release by age (whole days) instead of acting.",
        ),
    ] = None,
    fsx_id: Annotated[
        str | None,
        typer.Option("--fsx-id", metavar="FS-ID", help="The file system for --emit fsx-task."),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="K/N",
            help="Do shard K (0 to N-1) of N cooperating runs: each chunk belongs to one shard"
            " by a hash of its identity; each shard has its own lock.",
        ),
    ] = None,
    shard_run: Annotated[
        str | None,
        typer.Option(
            "--shard-run",
            metavar="NAME",
            help="The run the shards belong to (the same for its N shards, new for each run:"
            " the Job's uid): with --max-size or --keep-free they agree on one cut-off"
            " through DIR.",
        ),
    ] = None,
    candidates: Annotated[
        str,
        typer.Option(
            "--candidates",
            metavar="SOURCE",
            help="walk (read every file) or lfs-find (on Lustre, with --max-age alone: read only"
            " the files lfs find lists as older).",
        ),
    ] = "walk",
    as_json: JsonOpt = False,
    old_engine: Annotated[str | None, renamed("--engine", "--layout")] = None,
) -> int | None:
    """Remove least-recently-used chunk files from DIR until every limit holds: --max-size,
    --max-age, --keep-free (at least one). A chunk of several files (TP ranks, KV cache
    groups, layers, SGLang's pools) goes whole or not at all. Prints a summary per engine and
    model (what goes, what stays and why); --list adds every file.

    Never touched: anything outside DIR (everything is done through open folder handles:
    links are never followed, other mounts never entered), a file replaced or hard-linked
    since it was chosen, in-flight temporaries, engines' config files, chunks used within
    --grace, and files of no known layout (unless --include-unknown, and then only beside
    an engine's files). Refused outright: /, home folders and the folders above them, the
    system's folders and all below them (/etc, /usr, /var but /var/tmp, /dev, /run, ...),
    /tmp, /opt and /mnt themselves, pseudo file systems, and a system's root folder. A lock
    file in DIR keeps gc runs on several nodes from fighting; a stale one (10 minutes
    unrefreshed, or a dead process of this machine) is taken over by exactly one run. A
    chunk's last use is the latest of its access, modification and change times, as
    systemd-tmpfiles counts it. Exit 1 when the lock is another run's (or not a lock), a
    limit could not be reached, a file could not be removed, or a folder could not be read.

    --release (FSx for Lustre, with S3 behind it) releases instead of removing: the same
    choice, but only files whose HSM state says archived and not dirty are released, by
    their FIDs, and a file not yet exported is reported and left alone; nothing is removed.
    --shard K/N splits DIR among N runs (nodes, or a Kubernetes Indexed Job's pods) so that
    together they choose what one run would (docs/gc.md).

    Examples:

      kvtool gc examples/check/kvcache --max-size 1MiB --dry-run

      kvtool gc /fsx/kv --max-age 7d --keep-free 500GiB --log gc.jsonl  # on FSx

      kvtool gc /fsx/kv --layout sglang --model qwen3-32b --max-size 1TiB --list  # on FSx

      kvtool gc /fsx/kv --max-age 2h --release --shard 0/4  # on FSx

      kvtool gc /fsx/kv --max-age 7d --release --emit fsx-task --fsx-id fs-0a1b2c3d  # on FSx
    """
    from kvtool.cli import status
    from kvtool.cli.render import gc as render
    from kvtool.cli.render.text import Counter
    from kvtool.folders.gc import Busy, LockProblem, Removal, Scope, run_gc
    from kvtool.folders.shard import ShardWait
    from kvtool.inputs.folders import resolve_gc
    from kvtool.probe.host import LocalHost

    layout = merge(layout, old_engine, old="--engine", new="--layout")
    inputs = resolve_gc(
        folder, host=LocalHost(), max_size=max_size, max_age=max_age, keep_free=keep_free,
        grace=grace, layout=layout, model=model, include_unknown=include_unknown,
        dry_run=dry_run, log=log, release=release, emit=emit, fsx_id=fsx_id, shard=shard,
        shard_run=shard_run, candidates=candidates, as_json=as_json,
    )  # fmt: skip
    if inputs.task is not None:
        render.print_task(inputs.task, inputs.task_notes)
        return None
    listed: list[Removal] = []  # --list --json's files

    def each(removal: Removal) -> None:
        if as_json:
            listed.append(removal)
        else:
            render.list_line(removal, dry_run=dry_run, release=release)

    try:
        with Counter(not as_json, "kvtool gc") as progress:
            planned, outcome = run_gc(
                inputs.folder.root,
                scope=Scope(inputs.layout, inputs.folder.model, include_unknown),
                limits=inputs.limits,
                mode=inputs.folder.mode,
                free_bytes=inputs.free_bytes,
                dry_run=dry_run,
                log=log,
                each=each if list_files else None,
                progress=progress.step,
                release=inputs.release,
                shard=inputs.shard,
                run=inputs.shard_run,
                candidates=inputs.candidates,
            )
    except ShardWait as exc:
        render.print_shard_problem(inputs.folder.root, str(exc), as_json=as_json)
        return status.PROBLEMS
    except LockProblem as exc:
        render.print_lock_problem(
            inputs.folder.root, str(exc), busy=isinstance(exc, Busy), as_json=as_json
        )
        return status.PROBLEMS
    if as_json:
        from kvtool.cli.render.text import print_json

        print_json(render.gc_json(inputs, planned, outcome, listed), command="gc")
    else:
        if list_files and outcome.removed_files:
            from kvtool.cli.render.text import echo

            echo()
        render.print_gc(inputs, planned, outcome)
    return status.PROBLEMS if render.gc_problems(planned, outcome, inputs.limits) else None
