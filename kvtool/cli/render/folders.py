"""Output of ``kvtool inspect`` and ``kvtool gc``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, plural, print_notes
from kvtool.errors import escape_name
from kvtool.units import format_bytes, format_bytes_binary

if TYPE_CHECKING:
    from kvtool.folders.inspect import Inspection

_MODE_NOTES = {
    "relatime": "the mount records access with relatime: a file's last read is known only to"
    " within a day (modification times are exact)",
    "noatime": "the mount is noatime: last use is the modification time (reads are not seen)",
    "unknown": "how the mount records access is unknown: last use is the later of access and"
    " modification time",
}


def age(seconds: float) -> str:
    """``12 min``, ``3.5 h``, ``4.0 d``: how long ago a file was used."""
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def mode_notes(mode: str) -> list[str]:
    """What the mount's access-time recording means for last use, as notes."""
    return [_MODE_NOTES[mode]] if mode in _MODE_NOTES else []


def _names(names: list[str], count: int = 3) -> str:
    """The first ``count`` names read from disk, escaped as ``ls -b`` shows them."""
    return ", ".join(escape_name(name) for name in names[:count])


def print_inspection(found: Inspection) -> None:
    from kvtool.folders.summary import AGES, engine_name
    from kvtool.plan.folder_rules import FILES_PER_FOLDER

    s, walk = found.summary, found.walk
    notes = mode_notes(s.mode)
    echo(
        f"{escape_name(str(found.root))}  ({plural(walk.folders, 'folder')},"
        f" mount {escape_name(found.mountpoint) or '?'})"
    )
    echo()
    if not s.groups and not s.unknown_files and not s.temp_files and not s.config_files:
        echo("empty: no files yet (an engine writes its first chunks here when it offloads)")
        return
    table = Table(
        "engine", "model", "dtype", "layout", "ranks seen", "files", "bytes", "last use", "orphan",
        left=(0, 1, 2, 3, 8),
    )  # fmt: skip
    for g in sorted(s.groups.values(), key=lambda g: -g.bytes):
        ranks = f"{len(g.ranks):,}" if g.ranks else "-"
        used = f"{age(s.now - g.newest)} - {age(s.now - g.oldest)} ago" if g.files else "-"
        table.add_row(
            engine_name(g.engine), escape_name(g.model) or "-", escape_name(g.dtype) or "-",
            g.layout or "-", ranks or "-",  # kvtool's own label ("world 8"), made of numbers
            f"{g.files:,}", format_bytes_binary(g.bytes), used, g.orphan or "-",
        )  # fmt: skip
    echo(table.render())
    echo()
    if found.hsm_read:
        hsm_table, meaning = _hsm_table(s)
        echo(hsm_table)
        echo()
        notes.append(meaning)
    elif found.hsm:
        notes.append(found.hsm)
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
            f" (oldest {age(s.now - s.temp_oldest)} old; gc never removes them)"
        )
        if s.now - s.temp_oldest > 86400:
            notes.append(
                "temporaries older than a day were left by a writer that stopped mid-write, not"
                " in flight: remove them by hand once no engine writes here"
            )
    if s.unknown_files:
        echo(
            f"unknown files: {s.unknown_files:,}, {format_bytes(s.unknown_bytes)}"
            f" (e.g. {_names(s.unknown_examples)})"
        )
    if walk.link_count:
        echo(f"links (not followed): {walk.link_count:,} (e.g. {_names(walk.links)})")
    if walk.unreadable:
        echo(f"folders that could not be read: {_names(walk.unreadable, 5)}")
    if walk.mounts:
        echo(f"mount points (not entered): {_names(walk.mounts, 5)}")
    if walk.too_deep:
        echo(f"folders over 64 levels deep (not entered): {_names(walk.too_deep)}")
    biggest = walk.per_folder[0] if walk.per_folder else (0, ".")
    over = [
        f"{escape_name(folder)} ({count:,})"
        for count, folder in walk.per_folder
        if count > FILES_PER_FOLDER
    ]
    if over:
        echo(
            f"folders over {FILES_PER_FOLDER:,} files (AWS advises fewer per FSx for Lustre"
            f" directory): {', '.join(over)}"
        )
    else:
        echo(
            f"most files in one folder: {biggest[0]:,} ({escape_name(biggest[1])}), under the"
            f" {FILES_PER_FOLDER:,} AWS advises per FSx for Lustre directory"
        )
    orphans = [g for g in s.groups.values() if g.orphan]
    if found.model and all(g.orphan == "another model" for g in s.groups.values() if g.model):
        spelled = sorted({g.model for g in s.groups.values() if g.model})[:5]
        notes.append(
            f"no layout here is of --model {found.model}; the engines here name: "
            + ", ".join(escape_name(name) for name in spelled)
        )
    if orphans:
        notes.append(
            f"{plural(len(orphans), 'layout')} no running configuration reads hold"
            f" {format_bytes(sum(g.bytes for g in orphans))}"
        )
        # gc can take away a whole model, never one world size of it: a command for the rest
        # would remove files the running configuration reads
        others = sorted({g.model for g in orphans if g.orphan == "another model" and g.model})
        for name in others[:3]:
            notes.append(
                f"kvtool gc {escape_name(str(found.root))} --model {escape_name(name)}"
                " --max-size 0 removes that model's files (check that no other deployment"
                " serves it)"
            )
        if any(g.orphan == "another model" and g.base for g in orphans):
            notes.append(
                "a vLLM FS-offload folder's config.json names the path or Hub id its engine was"
                " started with, never a --served-model-name: give --model that path or Hub id"
            )
        if any(g.orphan.startswith("another world size") for g in orphans):
            notes.append(
                "files of another world size share their model with the running deployment:"
                " gc removes a model's files whole, so those need removing by their folder"
            )
    elif s.groups and not found.asked:
        notes.append("give --model and --tp/--pp to find orphans (files no deployment reads)")
    print_notes(notes)


# HSM state kinds (probe.parse.HsmState.kind) as inspect's columns
HSM_COLUMNS = (
    ("archived", "archived"), ("released", "released (in S3)"), ("dirty", "dirty"),
    ("lost", "lost"), ("none", "not exported"),
)  # fmt: skip


def _hsm_table(s: Any) -> tuple[str, str]:
    """Per group, its files (and bytes) by HSM state (lfs hsm_state), and what they mean."""
    from kvtool.folders.summary import engine_name

    seen = {kind for g in s.groups.values() for kind in g.hsm}
    columns = [(k, label) for k, label in HSM_COLUMNS if k in seen or k != "lost"]
    table = Table("engine", "model", *(label for _k, label in columns), left=(0, 1))
    for g in sorted(s.groups.values(), key=lambda g: -g.bytes):
        cells = []
        for kind, _label in columns:
            files, size = g.hsm.get(kind, (0, 0))
            cells.append(f"{files:,} ({format_bytes_binary(size)})" if files else "-")
        table.add_row(engine_name(g.engine), escape_name(g.model) or "-", *cells)
    meaning = (
        "HSM states by lfs hsm_state, files (bytes): archived files have an up-to-date copy in"
        " S3 (gc --release may release them); released ones are in S3 only, their names and"
        " sizes kept (a read restores them); dirty ones changed since their export"
    )
    return table.render(), meaning


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
        "mount_points": walk.mounts,
        "too_deep": walk.too_deep,
        "folders": walk.folders,
        "largest_folders": [{"folder": f, "files": n} for n, f in walk.per_folder],
        "files_per_folder_guidance": FILES_PER_FOLDER,
        "notes": mode_notes(s.mode),
        "hsm_states": {"read": found.hsm_read, "note": found.hsm or None},
    }
