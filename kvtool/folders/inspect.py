"""``kvtool inspect``: read a KV folder once and say what it holds (``summary.Summary``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from kvtool.errors import InputError
from kvtool.files import read_json_object
from kvtool.folders.layouts import classify
from kvtool.folders.summary import Summary
from kvtool.folders.walk import Root, Seen, Walk
from kvtool.probe.lfs import STATE_BATCH, File, Lfs, nameable

CONFIG_LIMIT = 1 << 20  # a vLLM config.json is a few hundred bytes; a bigger one is not read


class Inspection(NamedTuple):
    root: Path
    summary: Summary
    walk: Walk
    mountpoint: str
    asked: bool  # a running configuration was given: orphans were looked for
    model: str | None = None
    hsm: str = ""  # why HSM states were not read, on Lustre ("" where read, or moot)
    hsm_read: bool = False  # they were, with lfs hsm_state


def inspect_folder(
    root: Path,
    *,
    mode: str,
    mountpoint: str = "",
    model: str | Sequence[str] | None = None,
    world: int | None = None,
    mla: bool = False,
    progress: Callable[[int, int], None] | None = None,
    hsm: Lfs | None = None,
    hsm_note: str = "",
) -> Inspection:
    """``read_folder``, and an InputError when files are there but none of a layout kvtool
    knows (the wrong folder, most likely: it says what it saw). An empty folder is an answer:
    no chunks yet (a tier before its first write)."""
    found = read_folder(
        root, mode=mode, mountpoint=mountpoint, model=model, world=world, mla=mla,
        progress=progress, hsm=hsm, hsm_note=hsm_note,
    )  # fmt: skip
    summary = found.summary
    known = summary.chunk_files + summary.temp_files + summary.config_files
    if not known and summary.unknown_files:
        examples = ", ".join(summary.unknown_examples[:5])
        raise InputError(
            f"{root} holds no file of a layout kvtool knows "
            f"({summary.unknown_files:,} other files: {examples})",
            "point it at an engine's KV folder: LMCache, SGLang HiCacheFile, vLLM or llm-d FS"
            " offload, or kvtool's T3",
        )
    return found


def read_folder(
    root: Path,
    *,
    mode: str,
    mountpoint: str = "",
    model: str | Sequence[str] | None = None,
    world: int | None = None,
    mla: bool = False,
    progress: Callable[[int, int], None] | None = None,
    hsm: Lfs | None = None,
    hsm_note: str = "",
) -> Inspection:
    """Walk ``root`` once (bounded memory) and sum what each engine's layout holds there;
    ``mode`` is how its mount records access (``walk.atime_mode``). An empty folder, or one of
    no known layout, is an answer here, not an error (doctor reads a tier before its first
    write). With ``hsm`` (the folder is on Lustre, and lfs is here) each chunk file's HSM
    state is read too (``lfs hsm_state``, through its folder's handle, in batches)."""
    summary = Summary(now=time.time(), mode=mode)
    with Root(root.resolve()) as handle:  # a link named as the folder is followed, once
        walk = Walk(handle, progress=progress)
        states = None if hsm is None else _States(hsm, summary)
        try:
            for seen in walk:
                if states is None:
                    summary.add(seen)
                else:
                    states.add(seen, walk.folder_fd)
                if seen.name == "config.json" and seen.folder and seen.size <= CONFIG_LIMIT:
                    config = read_vllm_config(walk.folder_fd)
                    if config is not None:
                        summary.configs["/".join(seen.folder)] = config
        finally:
            if states is not None:
                states.flush()
    summary.finish(model=model, world=world, mla=mla)
    shown = model if isinstance(model, str) or model is None else next(iter(model), None)
    return Inspection(root, summary, walk, mountpoint, bool(model or world), shown, hsm_note,
                      hsm is not None)  # fmt: skip


class _States:
    """Files waiting for their HSM states, read ``STATE_BATCH`` at a time; each folder's
    handle is duplicated while a file of it waits (the walk closes its own when it leaves)."""

    def __init__(self, lfs: Lfs, summary: Summary) -> None:
        self.lfs = lfs
        self.summary = summary
        self.waiting: list[tuple[Seen, File | None]] = []
        self.held: dict[tuple[str, ...], int] = {}

    def add(self, seen: Seen, folder_fd: int) -> None:
        file = None
        if classify(seen.folder, seen.name) is not None and nameable(seen.name):
            if seen.folder not in self.held:
                self.held[seen.folder] = os.dup(folder_fd)
            file = File(self.held[seen.folder], seen.name)
        self.waiting.append((seen, file))
        if len(self.waiting) >= STATE_BATCH:
            self.flush()

    def flush(self) -> None:
        try:
            states = self.lfs.hsm_state([f for _s, f in self.waiting if f is not None])
            for seen, file in self.waiting:
                state = None if file is None else states.get(file)
                self.summary.add(seen, None if state is None else state.kind)
        finally:
            self.waiting = []
            for fd in self.held.values():
                os.close(fd)
            self.held = {}


def read_vllm_config(folder_fd: int) -> dict[str, object] | None:
    """A vLLM FS tier's config.json in the open folder ``folder_fd`` (a link there is not
    followed), or None when it cannot be read as a JSON object of at most ``CONFIG_LIMIT``
    bytes (it is then reported as a group without a config)."""
    import os

    try:
        if os.stat("config.json", dir_fd=folder_fd, follow_symlinks=False).st_size > CONFIG_LIMIT:
            return None
        return read_json_object(Path("config.json"), what="vLLM config", dir_fd=folder_fd)
    except (OSError, InputError):
        return None
