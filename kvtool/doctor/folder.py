"""Read a KV folder with ``kvtool inspect``'s reader for ``doctor`` and ``check``: the same
walk and layouts, reduced to ``plan/folder_rules.FolderFacts`` (plain data a doctor snapshot
records as ``folder_contents.json``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kvtool.errors import InputError
from kvtool.folders.inspect import read_folder
from kvtool.folders.summary import Summary, engine_name
from kvtool.folders.walk import Walk, atime_mode
from kvtool.plan.folder_rules import FolderFacts
from kvtool.probe.host import Host
from kvtool.units import plural

if TYPE_CHECKING:
    pass

KEY = "folder_contents"


class FolderAsk(NamedTuple):
    """What the folder is checked against: the model by the names the engines write (its Hub
    ids), the ranks that write it, the cap it was given; empty or None: not known."""

    models: tuple[str, ...] = ()
    world: int | None = None
    cap: int | None = None
    mla: bool = False  # the model caches an MLA latent (LMCache saves it as world 1)


def folder_facts(
    host: Host,
    path: str,
    ask: FolderAsk,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[FolderFacts | None, str]:
    """What ``path`` holds, through ``host`` (a snapshot answers with what it recorded), or
    None and why it could not be read."""
    model, world = ask.models, ask.world
    unlisted = ""

    def produce() -> dict[str, Any]:
        nonlocal unlisted
        root = Path(path)
        mode, mountpoint = atime_mode(root, host.read("proc_mounts", "/proc/self/mounts"))
        try:
            found = read_folder(
                root,
                mode=mode,
                mountpoint=mountpoint,
                model=model or None,
                world=world,
                mla=ask.mla,
                progress=progress,
            )
        except InputError as exc:
            unlisted = exc.message
            raise
        shown = ""
        if model:
            others = len(model) - 1
            shown = model[0] + (f" (or {plural(others, 'other name')})" if others else "")
        return facts_from(
            found.summary, found.walk, path, model=shown if model else None, world=world
        )._asdict()

    try:
        data = host.computed(KEY, produce)
    except InputError:
        if unlisted:  # the folder itself could not be listed: a finding, not exit 2
            return None, unlisted
        raise  # a snapshot's record of the wrong shape: exit 2, as for every other record
    if data is None:
        return None, f"this snapshot holds no {KEY}.json (captured with --no-contents?)"
    fields: dict[str, Any] = {  # the shape was checked (probe/recorded.py)
        name: tuple(value) if isinstance(value, list) else value
        for name, value in data.items()
        if name in FolderFacts._fields
    }
    return FolderFacts(**fields), ""


def facts_from(
    summary: Summary, walk: Walk, path: str, *, model: str | None, world: int | None
) -> FolderFacts:
    """A finished ``folders.summary.Summary`` and its ``folders.walk.Walk``, as plain facts."""
    orphans = [g for g in summary.groups.values() if g.orphan]
    orphans.sort(key=lambda g: -g.bytes)
    busiest = walk.per_folder[0] if walk.per_folder else (0, ".")
    return FolderFacts(
        path=path,
        chunk_files=summary.chunk_files,
        chunk_bytes=summary.chunk_bytes,
        temp_files=summary.temp_files,
        temp_bytes=summary.temp_bytes,
        unknown_files=summary.unknown_files,
        unknown_bytes=summary.unknown_bytes,
        engines=tuple(engine_name(e) for e in summary.engines()),
        layouts=len(summary.groups),
        orphan_files=sum(g.files for g in orphans),
        orphan_bytes=sum(g.bytes for g in orphans),
        orphans=tuple(
            " ".join(p for p in (engine_name(g.engine), g.model, g.dtype, g.layout) if p)
            + f": {g.orphan} ({g.files:,} files)"
            for g in orphans[:10]
        ),
        model=model or "",
        world=world or 0,
        busiest_folder=busiest[1],
        busiest_files=busiest[0],
        unreadable_folders=len(walk.unreadable),
        folders=walk.folders,
    )
