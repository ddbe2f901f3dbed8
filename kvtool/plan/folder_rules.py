"""What a shared KV folder holds, graded once for ``kvtool doctor`` and ``kvtool check``. Pure.

Both read the folder with ``kvtool inspect``'s reader (``doctor/folder.py``) into
``FolderFacts`` and call ``folder_findings``, so a folder gets the same ids, statuses and
thresholds from either:

* ``folder.contents``: what the engines' layouts hold there (PASS; an empty folder passes: a
  tier before its first write); WARN when some sub-folders could not be listed, so every figure
  is low.
* ``folder.orphans``: files no deployment of the model at its world size would read (another
  model, another world size): WARN, with the bytes and the layouts; SKIP without a model.
* ``folder.cap``: every file's bytes against the cap the tier was given: FAIL past it, WARN
  past 90%. No engine caps a shared folder as a whole: LMCache's local disk caps what its
  in-memory index knows (lost at a restart), SGLang's opt-in evictor reclaims only its own
  layout's files, vLLM's FS evictor is for testing and llm-d's backend does no clean-up
  (../shared/reference/engine-kv-folders-and-metrics.md).
* ``folder.files_per_dir``: the fullest sub-folder against the ~100K files per directory AWS
  advises for FSx for Lustre: WARN past it.
"""

from __future__ import annotations

from typing import NamedTuple

from kvtool.findings import Finding, Status
from kvtool.units import format_bytes_binary, plural

# AWS FSx for Lustre performance tips (../shared/reference/fsx-lustre-gds-facts.md, section 7):
# the most files one directory should hold
FILES_PER_FOLDER = 100_000
CAP_WARN_FRACTION = 0.9


class FolderFacts(NamedTuple):
    """A KV folder as ``kvtool inspect`` reads it, in plain data (a doctor snapshot records it
    as JSON). Chunk files are those of a known layout; ``orphans`` describe the layouts no
    deployment of ``model`` over ``world`` ranks would read ("" and 0: not asked)."""

    path: str
    chunk_files: int = 0
    chunk_bytes: int = 0
    temp_files: int = 0
    temp_bytes: int = 0
    unknown_files: int = 0
    unknown_bytes: int = 0
    engines: tuple[str, ...] = ()
    layouts: int = 0
    orphan_files: int = 0
    orphan_bytes: int = 0
    orphans: tuple[str, ...] = ()
    model: str = ""
    world: int = 0
    busiest_folder: str = "."
    busiest_files: int = 0
    unreadable_folders: int = 0
    folders: int = 0

    @property
    def total_bytes(self) -> int:
        return self.chunk_bytes + self.temp_bytes + self.unknown_bytes


def folder_findings(
    facts: FolderFacts | None, *, cap: int | None = None, skipped: str = ""
) -> list[Finding]:
    """The four rules of the module docstring; ``facts`` None: the folder was not read
    (``skipped`` says why)."""
    if facts is None:
        why = skipped or "the folder was not read"
        ids = ("folder.contents", "folder.orphans", "folder.cap", "folder.files_per_dir")
        return [_f(id_, "SKIP", why) for id_ in ids]
    return [_contents(facts), _orphans(facts), _cap(facts, cap), _files_per_dir(facts)]


def _f(id_: str, status: Status, message: str, evidence: str = "", fix: str = "") -> Finding:
    return Finding(id_, "folder", status, message, evidence, fix)


def _contents(f: FolderFacts) -> Finding:
    parts = [
        f"{plural(f.chunk_files, 'chunk file')} ({format_bytes_binary(f.chunk_bytes)}) in"
        f" {plural(f.layouts, 'layout')}" + (f" of {', '.join(f.engines)}" if f.engines else "")
    ]
    if f.temp_files:
        parts.append(f"{plural(f.temp_files, 'in-flight temporary', 'in-flight temporaries')}")
    if f.unknown_files:
        parts.append(
            f"{plural(f.unknown_files, 'file')} of no known layout"
            f" ({format_bytes_binary(f.unknown_bytes)})"
        )
    evidence = f"{f.path}: " + "; ".join(parts)
    if f.unreadable_folders:
        return _f(
            "folder.contents",
            "WARN",
            f"{plural(f.unreadable_folders, 'sub-folder')} could not be listed: every figure"
            " below is low",
            evidence,
            "run as a user who can read the whole folder (kvtool inspect names them)",
        )
    if not f.chunk_files and not f.temp_files:
        return _f("folder.contents", "PASS", "no KV files yet", evidence)
    return _f(
        "folder.contents",
        "PASS",
        f"{format_bytes_binary(f.total_bytes)} in {plural(f.folders, 'folder')}",
        evidence,
    )


def _orphans(f: FolderFacts) -> Finding:
    if not f.model and not f.world:
        return _f("folder.orphans", "SKIP", "no model given: orphans not looked for")
    served = " over ".join(p for p in (f.model, plural(f.world, "rank") if f.world else "") if p)
    if not f.orphan_files:
        return _f("folder.orphans", "PASS", f"every layout is one {served} reads")
    return _f(
        "folder.orphans",
        "WARN",
        f"{format_bytes_binary(f.orphan_bytes)} in {plural(f.orphan_files, 'file')} that"
        f" {served} never reads",
        "; ".join(f.orphans),
        "check the names first: an engine serving under another name (a local path,"
        " --served-model-name) writes that name; then remove them with kvtool gc"
        f" {f.path} --model THAT-MODEL --max-size 0 (add --dry-run to see the list)",
    )


def _cap(f: FolderFacts, cap: int | None) -> Finding:
    if cap is None:
        return _f("folder.cap", "SKIP", "no cap given for the folder")
    held = f.total_bytes
    share = held / cap if cap else float("inf") if held else 0.0
    evidence = f"{format_bytes_binary(held)} of {format_bytes_binary(cap)} (every file counted)"
    fix = (
        f"no engine caps a shared folder: schedule kvtool gc {f.path} --max-size"
        f" {format_bytes_binary(cap).replace(' ', '')} on one node (its lock keeps runs apart)"
    )
    if held > cap:
        return _f(
            "folder.cap",
            "FAIL",
            f"over its cap by {format_bytes_binary(held - cap)}",
            evidence,
            fix,
        )
    if share >= CAP_WARN_FRACTION:
        return _f("folder.cap", "WARN", f"{share:.0%} of its cap", evidence, fix)
    return _f("folder.cap", "PASS", f"{share:.0%} of its cap", evidence)


def _files_per_dir(f: FolderFacts) -> Finding:
    evidence = f"fullest: {f.busiest_folder} ({f.busiest_files:,} files)"
    if f.busiest_files > FILES_PER_FOLDER:
        return _f(
            "folder.files_per_dir",
            "WARN",
            f"a sub-folder holds more than the ~{FILES_PER_FOLDER:,} files AWS advises per"
            " FSx for Lustre directory",
            evidence,
            "SGLang's HiCacheFile and LMCache's local disk write one flat folder (vLLM's FS tier"
            " hashes into sub-folders): give each engine its own folder, and cap it with"
            " kvtool gc",
        )
    return _f(
        "folder.files_per_dir", "PASS", f"at most {FILES_PER_FOLDER:,} files per folder", evidence
    )
