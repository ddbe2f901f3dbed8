"""Output of ``kvtool gc``: a summary per engine layout and model (what went, what stays and
why), ``--list``'s line per file, the lock's refusal, and the JSON. Every name read from disk
or from the lock is printed escaped (``errors.escape_name``, as ``ls -b`` shows it)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvtool.cli.render.folders import age, mode_notes
from kvtool.cli.render.text import Table, echo, plural, print_json, print_notes
from kvtool.errors import escape_name
from kvtool.units import format_bytes, format_bytes_binary

if TYPE_CHECKING:
    from kvtool.folders.gc import Outcome
    from kvtool.folders.gc_plan import Plan, Removal, Tally
    from kvtool.folders.select import Limits
    from kvtool.inputs.folders import GcInputs


def _why(inputs: GcInputs) -> dict[str, tuple[str, str]]:
    """Each reason a file stays: (the table's words, the note that explains them)."""
    from kvtool.folders import gc_plan

    grace = age(inputs.limits.grace)
    return {
        gc_plan.NOT_NEEDED_WHY: (
            "kept: newer",
            "newer: the limits hold without them (the least recently used go first)",
        ),
        gc_plan.YOUNG_WHY: (
            f"kept: used < {grace} ago",
            f"used within --grace ({grace}): never removed",
        ),
        gc_plan.WRITING_WHY: (
            "kept: being written",
            "being written: an in-flight temporary names the chunk; it stays whole",
        ),
        gc_plan.LINKED_WHY: (
            "kept: hard-linked",
            "hard-linked: a file of the chunk has another name, so removing it frees nothing",
        ),
        gc_plan.CHANGED_WHY: (
            "kept: changed",
            "changed: used, rewritten or replaced since the plan; the chunk stays whole",
        ),
        gc_plan.FAILED_WHY: (
            "not removed: failed",
            "failed: the file system would not remove them",
        ),
        gc_plan.SCOPE_WHY: (
            "kept: out of scope",
            "out of scope: another layout or model than asked, a model that cannot be told, or"
            " an unknown file in a folder of no engine's files",
        ),
        gc_plan.TEMPORARY_WHY: (
            "kept: temporaries",
            "temporaries: in-flight writes, never removed",
        ),
        gc_plan.NOT_EXPORTED_WHY: (
            "kept: not exported",
            "not exported: no up-to-date copy in S3 (never exported, or changed since): never"
            " released, and --release removes nothing",
        ),
        gc_plan.RELEASED_WHY: (
            "released (in S3)",
            "released (in S3): released before; inspect lists them, a read restores them",
        ),
    }


def _verb(*, dry_run: bool, release: bool) -> str:
    if release:
        return "would release" if dry_run else "released"
    return "would remove" if dry_run else "removed"


def list_line(removal: Removal, *, dry_run: bool, release: bool = False) -> None:
    """``--list``: one file, as it goes (escaped: a name cannot forge a line)."""
    verb = _verb(dry_run=dry_run, release=release)
    sys.stdout.write(f"{verb} {escape_name(removal.path)}  ({removal.bytes:,} B)\n")


def print_task(request: dict[str, Any], notes: tuple[str, ...]) -> None:
    """``--emit fsx-task``: the AWS CLI call, one line to copy, and what it does as notes."""
    import json
    import shlex

    from kvtool.cli.render.text import note

    document = json.dumps(request, separators=(",", ":"))
    sys.stdout.write(
        f"aws fsx create-data-repository-task --cli-input-json {shlex.quote(document)}\n"
    )
    for text in notes:
        note(text)


def print_shard_problem(root: Path, problem: str, *, as_json: bool) -> None:
    """The shards of a run could not agree on their cut: nothing removed."""
    if as_json:
        print_json(
            {"folder": str(root), "shard_problem": problem, "removed_files": 0}, command="gc"
        )
    else:
        echo(f"{escape_name(str(root))}: {problem}")


def print_lock_problem(root: Path, problem: str, *, busy: bool, as_json: bool) -> None:
    if busy:
        line = f"another kvtool gc holds {root}'s lock ({problem}): nothing removed"
    else:
        line = f"{root}: {problem}: nothing removed"
        if "no longer holds" not in problem:
            line += " (remove it by hand once you know no gc runs here)"
    if as_json:
        print_json(
            {"folder": str(root), "lock": problem, "busy": busy, "removed_files": 0}, command="gc"
        )
    else:
        echo(line)


def gc_problems(planned: Plan, outcome: Outcome, limits: Limits | None = None) -> bool:
    """Whether the run found problems: a limit it could not reach (in the plan, or because
    chunks it chose changed before their removal), files it could not remove, or folders it
    could not read or enter (their chunks were not considered)."""
    return bool(
        planned.choice.short_bytes
        or (limits is not None and missed_bytes(planned, outcome, limits))
        or outcome.failed
        or outcome.unreadable
        or outcome.too_deep
    )


def missed_bytes(planned: Plan, outcome: Outcome, limits: Limits) -> int:
    """Bytes a size limit (--max-size, --keep-free) still misses after the run, because chunks
    the plan chose were used, rewritten or replaced before their removal (kept whole, as
    "changed"); 0 for a dry run, and for --max-age alone (a chunk used since is young)."""
    if outcome.dry_run or (limits.max_size is None and limits.keep_free is None):
        return 0
    return max(0, planned.choice.bytes - outcome.removed_bytes - outcome.gone_bytes)


def _limits(inputs: GcInputs) -> str:
    limits = inputs.limits
    parts = []
    if limits.max_size is not None:
        parts.append(f"--max-size {format_bytes_binary(limits.max_size)}")
    if limits.max_age is not None:
        parts.append(f"--max-age {age(limits.max_age)}")
    if limits.keep_free is not None:
        parts.append(f"--keep-free {format_bytes_binary(limits.keep_free)}")
    return ", ".join(parts) + f"; grace {age(limits.grace)}"


def _use(tally: Tally, now: float) -> str:
    if not tally.files or tally.newest <= 0:
        return "-"
    newest, oldest = age(max(0.0, now - tally.newest)), age(max(0.0, now - tally.oldest))
    return f"{newest} ago" if newest == oldest else f"{newest} - {oldest} ago"


def print_gc(inputs: GcInputs, planned: Plan, outcome: Outcome) -> None:
    from kvtool.folders import gc_plan
    from kvtool.folders.summary import engine_name

    choice = planned.choice
    groups = planned.groups or gc_plan.Groups()
    verb = _verb(dry_run=outcome.dry_run, release=outcome.released)
    why = _why(inputs)
    echo(f"{escape_name(str(inputs.folder.root))}: {_limits(inputs)}")
    holds = "holds on disk" if planned.held else "holds"
    part = "" if planned.shard is None else f"shard {planned.shard.label}'s part "
    echo(
        f"{part}{holds} {format_bytes(planned.folder_bytes)}; in scope:"
        f" {plural(choice.chunk_count, 'chunk')}, {format_bytes(choice.total_bytes)}"
    )
    echo(
        f"{verb}: {plural(outcome.removed_chunks, 'chunk')},"
        f" {plural(outcome.removed_files, 'file')}, {format_bytes(outcome.removed_bytes)}; left"
        f" {format_bytes(planned.folder_bytes - outcome.removed_bytes)}"
        + (" and what the unreadable folders hold" if outcome.unreadable else "")
    )
    table = Table(
        "engine", "model", "what", "chunks", "files", "bytes", "last use", left=(0, 1, 2, 6)
    )
    used: list[str] = []
    now = planned.clock
    for key in groups.names():
        engine, model = engine_name(key[0]), escape_name(key[1]) or "-"
        removed = groups.removed.get(key)
        if removed is not None and removed.files:
            table.add_row(
                engine, model, verb, f"{removed.chunks:,}", f"{removed.files:,}",
                format_bytes_binary(removed.bytes), _use(removed, now),
            )  # fmt: skip
        kept = groups.kept.get(key, {})
        for reason in gc_plan.KEPT_ORDER:
            tally = kept.get(reason)
            if tally is None or not tally.files:
                continue
            used.append(reason)
            chunks = f"{tally.chunks:,}" if tally.chunks else "-"
            table.add_row(
                engine, model, why[reason][0], chunks, f"{tally.files:,}",
                format_bytes_binary(tally.bytes), _use(tally, now),
            )  # fmt: skip
    if table.rows:
        echo()
        echo(table.render())
    notes = mode_notes(inputs.folder.mode)
    notes.extend(why[reason][1] for reason in gc_plan.KEPT_ORDER if reason in used)
    notes.extend(_untouched(planned, outcome))
    if choice.short_bytes:
        notes.append(
            f"a limit is out of reach by {format_bytes(choice.short_bytes)}: what is left is"
            f" {_unremovable(planned)}"
        )
    missed = missed_bytes(planned, outcome, inputs.limits)
    if missed and outcome.released:
        notes.append(
            f"the limit is missed by {format_bytes(missed)}: chosen files not exported to S3"
            " (or changed, or not released) stay; export them (auto-export, or aws fsx"
            " create-data-repository-task --type EXPORT_TO_REPOSITORY) and run gc --release"
            " again, or run gc without --release to remove them"
        )
    elif missed:
        notes.append(
            f"the limit is missed by {format_bytes(missed)}: {outcome.skipped_chunks:,} chunks"
            " the plan chose changed before their removal (used, rewritten or replaced) and"
            " stay whole; run gc again to choose anew"
        )
    for path, reason in outcome.not_exported[:5]:
        notes.append(f"left alone: {escape_name(path)}: {reason}")
    notes.extend(_split_notes(planned, outcome))
    for failure in outcome.failed[:5]:
        notes.append(f"could not remove {escape_name(failure)}")
    if len(outcome.failed) > 5:
        notes.append(f"... and {len(outcome.failed) - 5:,} more that could not be removed")
    if outcome.dry_run:
        what = "released" if outcome.released else "removed"
        notes.append(f"a dry run: nothing was {what} (--list names every file)")
    if inputs.log is not None:
        what = "release" if outcome.released else "removal"
        notes.append(f"every {what} is logged in {escape_name(str(inputs.log))}")
    print_notes(notes)


def _split_notes(planned: Plan, outcome: Outcome) -> list[str]:
    """What --release, --shard and --candidates lfs-find changed about the run, in words."""
    notes = []
    if outcome.released:
        notes.append(
            "released files keep their names and sizes (inspect lists them as released (in"
            " S3)); their bytes count as freed: --max-size counts the bytes the file system"
            " holds under --release"
        )
    if planned.shard is not None:
        notes.append(
            f"shard {planned.shard.label}: {plural(planned.other_shards, 'file')} of the other"
            " shards listed, not read"
            + ("; the cut-off agreed with the run's other shards" if planned.cut else "")
        )
    if planned.listed is not None:
        notes.append(
            f"candidates from lfs find: {plural(planned.listed, 'file')} listed as older;"
            f" {plural(planned.unlisted, 'file')} it did not list (newer) were not read, and"
            " their chunks stay whole"
        )
    return notes


def _unremovable(planned: Plan) -> str:
    """What stays of the folder whatever the limits, in bytes, by kind: --max-size counts it
    all, as du does, but gc removes none of it."""
    from kvtool.folders import gc_plan

    groups = planned.groups or gc_plan.Groups()
    by_why: dict[str, int] = {}
    for kept in groups.kept.values():
        for why, tally in kept.items():
            if why != gc_plan.NOT_NEEDED_WHY:
                by_why[why] = by_why.get(why, 0) + tally.bytes
    words = {
        gc_plan.YOUNG_WHY: "used within --grace", gc_plan.WRITING_WHY: "being written",
        gc_plan.LINKED_WHY: "hard-linked", gc_plan.CHANGED_WHY: "changed since the plan",
        gc_plan.FAILED_WHY: "not removable", gc_plan.SCOPE_WHY: "out of scope",
        gc_plan.TEMPORARY_WHY: "in-flight temporaries",
    }  # fmt: skip
    parts = [f"{format_bytes(size)} {words[why]}" for why, size in by_why.items() if size]
    if planned.config_bytes:
        parts.append(f"{format_bytes(planned.config_bytes)} of engine configs")
    if planned.unknown_kept_bytes:
        parts.append(f"{format_bytes(planned.unknown_kept_bytes)} of files of no known layout")
    return ", ".join(parts) or "nothing gc may remove"


def _examples(names: tuple[str, ...] | list[str], count: int) -> str:
    shown = ", ".join(escape_name(name) for name in names[:3])
    return shown + (", ..." if count > 3 else "")


def _untouched(planned: Plan, outcome: Outcome) -> list[str]:
    """What gc met and never touches, or could not read, in words."""
    notes = []
    walk = planned.walk
    if outcome.unreadable:
        count = max(outcome.unreadable_count, len(outcome.unreadable))
        notes.append(
            f"could not read {plural(count, 'folder')} ({_examples(outcome.unreadable, count)}):"
            " their files were not considered, and may hold chunks"
        )
    if outcome.too_deep:
        deep = outcome.too_deep
        notes.append(f"folders over 64 levels deep were not entered: {_examples(deep, len(deep))}")
    if outcome.left:
        notes.append(
            f"{plural(len(outcome.left), 'folder')} left the folder while gc removed in it"
            " (moved or replaced): gc stopped removing there:"
            f" {_examples(outcome.left, len(outcome.left))}"
        )
    if outcome.mounts:
        notes.append(
            "mount points below the folder were not entered (gc never leaves its file system):"
            f" {_examples(outcome.mounts, len(outcome.mounts))}"
        )
    if walk is not None and walk.link_count:
        notes.append(
            f"{plural(walk.link_count, 'link')} not followed"
            f" ({_examples(walk.links, walk.link_count)})"
        )
    if planned.unknown_files:
        notes.append(
            f"{plural(planned.unknown_files, 'file')} of no known layout"
            f" ({format_bytes(planned.unknown_bytes)}, e.g."
            f" {_examples(planned.unknown_examples, planned.unknown_files)}): kept without"
            " --include-unknown"
        )
    if planned.config_files:
        notes.append(f"{plural(planned.config_files, 'engine config file')}: never removed")
    return notes


def _tally(tally: Tally) -> dict[str, Any]:
    return tally.as_dict()


def gc_json(
    inputs: GcInputs, planned: Plan, outcome: Outcome, listed: list[Removal]
) -> dict[str, Any]:
    from kvtool.folders import gc_plan

    choice = planned.choice
    limits = inputs.limits
    groups = planned.groups or gc_plan.Groups()
    walk = planned.walk
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
        "folder_bytes": planned.folder_bytes,
        "in_scope": {
            "chunks": choice.chunk_count,
            "bytes": choice.total_bytes,
            "protected_bytes": choice.protected_bytes,
        },
        "planned": {"chunks": len(choice.chunks), "files": choice.files, "bytes": choice.bytes},
        "removed_chunks": outcome.removed_chunks,
        "removed_files": outcome.removed_files,
        "removed_bytes": outcome.removed_bytes,
        "skipped_chunks": outcome.skipped_chunks,
        "short_bytes": choice.short_bytes,
        "groups": [
            {
                "engine": key[0],
                "model": key[1] or None,
                "removed": _tally(groups.removed.get(key, gc_plan.Tally())),
                "kept": {
                    reason.replace(" ", "_").replace("-", "_"): _tally(tally)
                    for reason, tally in groups.kept.get(key, {}).items()
                },
            }
            for key in groups.names()
        ],
        "failed": outcome.failed,
        "not_touched": {
            "config_files": planned.config_files,
            "unknown_files": planned.unknown_files,
            "unknown_bytes": planned.unknown_bytes,
            "unknown_examples": planned.unknown_examples,
            "links": walk.link_count if walk is not None else 0,
            "link_examples": walk.links if walk is not None else [],
            "hard_linked_files": planned.hard_linked,
            "mount_points": list(outcome.mounts),
            "too_deep": list(outcome.too_deep),
            "left_folders": list(outcome.left),
        },
        "unreadable_folders": list(outcome.unreadable),
        "log": str(inputs.log) if inputs.log else None,
        "at": time.time(),
        "release": outcome.released,
        "not_exported_examples": [{"path": p, "why": w} for p, w in outcome.not_exported],
        "shard": None if planned.shard is None else planned.shard.label,
        "other_shards_files": planned.other_shards,
        "candidates": "walk" if planned.listed is None else "lfs-find",
        "lfs_find_listed": planned.listed,
    }
    if listed:
        data["files"] = [
            {"path": r.path, "bytes": r.bytes, "last_use": r.last_use, "engine": r.engine}
            for r in listed
        ]
    return data
