"""``kvtool inspect``: what the engines' KV files in a folder hold, per engine, model, layout."""

from typing import Annotated

import typer

from kvtool.cli.options import (
    FOLDER_MODEL_HELP,
    JsonOpt,
    PpOpt,
    TpOpt,
    model_option,
    note_renamed,
    renamed,
)


def inspect(
    folder: Annotated[str, typer.Argument(metavar="DIR", help="The shared KV folder to read.")],
    model: Annotated[str | None, model_option(FOLDER_MODEL_HELP)] = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    world: Annotated[str | None, renamed("--world", "--tp and --pp")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Read DIR once and report, per engine, model, dtype and parallel layout: files, bytes,
    last-use ages, orphans, in-flight temporaries, unknown files, and the files per folder
    against FSx for Lustre's guidance. Reads only; follows no links. On FSx for Lustre, where
    lfs is installed, each group's HSM states too: archived (in S3), released (in S3 only),
    dirty (changed since its export), none (never exported).

    Recognises LMCache (local disk; fs and fs_native), SGLang HiCacheFile, vLLM's FS offload
    tier, llm-d's FS backend and kvtool's own T3.

    Examples:

      kvtool inspect examples/check/kvcache

      kvtool inspect /fsx/kv --model llama-3.1-70b --tp 8 --json  # on FSx
    """
    from kvtool.cli.render import folders as render
    from kvtool.cli.render.text import Counter
    from kvtool.folders.inspect import inspect_folder
    from kvtool.inputs.folders import resolve_folder
    from kvtool.probe.host import LocalHost

    inputs = resolve_folder(
        folder, host=LocalHost(), model=model, tp=tp, pp=pp, world=world, hsm=True
    )
    if world is not None:
        note_renamed("--world", "--tp and --pp")
    with Counter(not as_json, "kvtool inspect") as progress:
        found = inspect_folder(
            inputs.root,
            mode=inputs.mode,
            mountpoint=inputs.mountpoint,
            model=inputs.model,
            world=inputs.world,
            mla=inputs.mla,
            progress=progress,
            hsm=inputs.hsm,
            hsm_note=inputs.hsm_note,
        )
    if as_json:
        from kvtool.cli.render.text import print_json

        print_json(render.inspection_json(found), command="inspect")
    else:
        render.print_inspection(found)
