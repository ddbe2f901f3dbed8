"""Output of ``kvtool inspect`` and ``kvtool gc``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, plural, print_json, print_notes, printable
from kvtool.units import format_bytes, format_bytes_binary

if TYPE_CHECKING:
    from kvtool.folders.gc import Outcome, Plan, Removal
    from kvtool.folders.inspect import Inspection
    from kvtool.inputs.folders import GcInputs

_MODE_NOTES = {
    "relatime": "the mount records access with relatime: a file's last read is known only to"
    " within a day (modification times are exact)",
    "noatime": "the mount is noatime: last use is the modification time (reads are not seen)",
    "unknown": "how the mount records access is unknown: last use is the later of access and"
    " modification time",
}


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _mode_notes(mode: str) -> list[str]:
    return [_MODE_NOTES[mode]] if mode in _MODE_NOTES else []


def print_inspection(found: Inspection) -> None:
    from kvtool.folders.summary import AGES, engine_name
    from kvtool.plan.folder_rules import FILES_PER_FOLDER

    s, walk = found.summary, found.walk
    notes = _mode_notes(s.mode)
    echo(f"{found.root}  ({plural(walk.folders, 'folder')}, mount {found.mountpoint or '?'})")
    echo()
    table = Table(
        "engine", "model", "dtype", "layout", "ranks seen", "files", "bytes", "last use", "orphan",
        left=(0, 1, 2, 3, 8),
    )  # fmt: skip
    for g in sorted(s.groups.values(), key=lambda g: -g.bytes):
        ranks = f"{len(g.ranks):,}" if g.ranks else "-"
        used = f"{_age(s.now - g.newest)} - {_age(s.now - g.oldest)} ago" if g.files else "-"
        table.add_row(
            engine_name(g.engine), g.model or "-", g.dtype or "-", g.layout or "-", ranks or "-",
            f"{g.files:,}", format_bytes_binary(g.bytes), used, g.orphan or "-",
        )  # fmt: skip
    echo(table.render())
    echo()
    ages = Table("last use", *(label for label, _ in AGES), left=(0,))
    total = [0] * len(AGES)
    for g in s.groups.values():
        total = [a + b for a, b in zip(total, g.ages, strict=True)]
    ages.add_row("bytes", *(format_bytes_binary(b) for b in total))
    echo(ages.render())
    echo()
    echo(f"chunks: {s.chunk_files:,} files, {format_bytes(s.chunk_bytes)}")
    if s.temp_files:
        echo(
            f"in-flight temporaries: {s.temp_files:,} files, {format_bytes(s.temp_bytes)}"
            f" (oldest {_age(s.now - s.temp_oldest)} old; gc never removes them)"
        )
        if s.now - s.temp_oldest > 86400:
            notes.append(
                "temporaries older than a day were left by a writer that stopped mid-write, not"
                " in flight: remove them by hand once no engine writes here"
            )
    if s.unknown_files:
        echo(
            f"unknown files: {s.unknown_files:,}, {format_bytes(s.unknown_bytes)}"
            f" (e.g. {', '.join(s.unknown_examples[:3])})"
        )
    if walk.link_count:
        echo(f"links (not followed): {walk.link_count:,} (e.g. {', '.join(walk.links[:3])})")
    if walk.unreadable:
        echo(f"folders that could not be read: {', '.join(walk.unreadable[:5])}")
    biggest = walk.per_folder[0] if walk.per_folder else (0, ".")
    over = [
        f"{folder} ({count:,})" for count, folder in walk.per_folder if count > FILES_PER_FOLDER
    ]
    if over:
        echo(
            f"folders over {FILES_PER_FOLDER:,} files (AWS advises fewer per FSx for Lustre"
            f" directory): {', '.join(over)}"
        )
    else:
        echo(
            f"most files in one folder: {biggest[0]:,} ({biggest[1]}), under the"
            f" {FILES_PER_FOLDER:,} AWS advises per FSx for Lustre directory"
        )
    orphans = [g for g in s.groups.values() if g.orphan]
    if found.model and all(g.orphan == "another model" for g in s.groups.values() if g.model):
        spelled = sorted({g.model for g in s.groups.values() if g.model})[:5]
        notes.append(
            f"no layout here is of --model {found.model}; the engines here name: "
            + ", ".join(spelled)
        )
    if orphans:
        notes.append(
            f"{plural(len(orphans), 'layout')} no running configuration reads hold"
            f" {format_bytes(sum(g.bytes for g in orphans))}: kvtool gc DIR --model NAME"
            " --max-size 0 removes one model's files"
        )
    elif s.groups and not found.asked:
        notes.append("give --model and --world to find orphans (files no running deployment reads)")
    print_notes(notes)


def inspection_json(found: Inspection) -> dict[str, Any]:
    from kvtool.plan.folder_rules import FILES_PER_FOLDER

    s, walk = found.summary, found.walk
    return {
        "folder": str(found.root),
        "mountpoint": found.mountpoint or None,
        "access_times": s.mode,
        "measured_at": s.now,
        "layouts": [g.as_dict() for g in sorted(s.groups.values(), key=lambda g: -g.bytes)],
        "chunks": {"files": s.chunk_files, "bytes": s.chunk_bytes},
        "temporaries": {"files": s.temp_files, "bytes": s.temp_bytes},
        "configs": s.config_files,
        "unknown": {
            "files": s.unknown_files,
            "bytes": s.unknown_bytes,
            "examples": s.unknown_examples,
        },
        "links_not_followed": walk.link_count,
        "unreadable_folders": walk.unreadable,
        "folders": walk.folders,
        "largest_folders": [{"folder": f, "files": n} for n, f in walk.per_folder],
        "files_per_folder_guidance": FILES_PER_FOLDER,
        "notes": _mode_notes(s.mode),
    }


def dry_run_line(removal: Removal) -> None:
    sys.stdout.write(printable(f"would remove {removal.path}  ({removal.bytes:,} B)") + "\n")


def print_busy(root: Path, holder: str, *, as_json: bool) -> None:
    line = f"another kvtool gc holds {root}'s lock ({holder}): nothing removed"
    if as_json:
        print_json({"folder": str(root), "busy": holder, "removed_files": 0})
    else:
        echo(line)


def gc_problems(planned: Plan, outcome: Outcome) -> bool:
    """Whether the run found problems: a limit it could not reach, or files it could not
    remove."""
    return bool(planned.choice.short_bytes or outcome.failed)


def _limits(inputs: GcInputs) -> str:
    limits = inputs.limits
    parts = []
    if limits.max_size is not None:
        parts.append(f"--max-size {format_bytes_binary(limits.max_size)}")
    if limits.max_age is not None:
        parts.append(f"--max-age {_age(limits.max_age)}")
    if limits.keep_free is not None:
        parts.append(f"--keep-free {format_bytes_binary(limits.keep_free)}")
    return ", ".join(parts) + f"; grace {_age(limits.grace)}"


def print_gc(inputs: GcInputs, planned: Plan, outcome: Outcome) -> None:
    choice = planned.choice
    verb = "would remove" if outcome.dry_run else "removed"
    if outcome.dry_run:
        echo()
    echo(f"{inputs.folder.root}: {_limits(inputs)}")
    echo(
        f"in scope: {choice.chunk_count:,} chunks, {format_bytes(choice.total_bytes)}"
        f" ({format_bytes(choice.protected_bytes)} used within the grace period or being"
        " written: kept)"
    )
    echo(
        f"{verb}: {outcome.removed_files:,} files, {format_bytes(outcome.removed_bytes)}"
        f" (planned {choice.files:,} files, {format_bytes(choice.bytes)})"
    )
    left = choice.total_bytes - outcome.removed_bytes
    echo(f"left: {format_bytes(left)}")
    notes = _mode_notes(inputs.folder.mode)
    if outcome.skipped_chunks:
        notes.append(
            f"{plural(outcome.skipped_chunks, 'chunk')} changed or were used since the plan:"
            " left whole"
        )
    if choice.short_bytes:
        notes.append(
            f"a limit is out of reach by {format_bytes(choice.short_bytes)}: what is left is"
            " young, being written, or not in scope"
        )
    for failure in outcome.failed[:5]:
        notes.append(f"could not remove {failure}")
    if len(outcome.failed) > 5:
        notes.append(f"... and {len(outcome.failed) - 5:,} more that could not be removed")
    if inputs.log is not None:
        notes.append(f"every removal is logged in {inputs.log}")
    print_notes(notes)


def gc_json(
    inputs: GcInputs, planned: Plan, outcome: Outcome, listed: list[Removal]
) -> dict[str, Any]:
    choice = planned.choice
    limits = inputs.limits
    data: dict[str, Any] = {
        "folder": str(inputs.folder.root),
        "dry_run": outcome.dry_run,
        "limits": {
            "max_size": limits.max_size,
            "max_age_s": limits.max_age,
            "keep_free": limits.keep_free,
            "grace_s": limits.grace,
        },
        "access_times": inputs.folder.mode,
        "in_scope": {
            "chunks": choice.chunk_count,
            "bytes": choice.total_bytes,
            "protected_bytes": choice.protected_bytes,
        },
        "planned": {"files": choice.files, "bytes": choice.bytes},
        "removed_files": outcome.removed_files,
        "removed_bytes": outcome.removed_bytes,
        "skipped_chunks": outcome.skipped_chunks,
        "short_bytes": choice.short_bytes,
        "failed": outcome.failed,
        "log": str(inputs.log) if inputs.log else None,
        "at": time.time(),
    }
    if outcome.dry_run:
        data["would_remove"] = [removal.path for removal in listed]
    return data
