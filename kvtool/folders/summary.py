"""What a KV folder holds, summed per engine, model, dtype and parallel layout. Pure: the
walk's records in, a summary out, in memory that grows with the number of layouts, never with
the number of files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvtool.folders.layouts import (
    CONFIG,
    ENGINE_NAMES,
    TEMP,
    classify,
    folder_config_engine,
    model_matches,
    vllm_description,
)
from kvtool.folders.walk import Seen

# last-access age buckets (upper bounds in seconds) for the histograms
AGES: tuple[tuple[str, float], ...] = (
    ("< 1 hour", 3600.0),
    ("< 1 day", 86400.0),
    ("< 1 week", 7 * 86400.0),
    ("< 30 days", 30 * 86400.0),
    ("older", float("inf")),
)


def last_use(seen: Seen, mode: str) -> float:
    """When a file was last used, as systemd-tmpfiles counts it: the latest of its access,
    modification and change times (the change time, ``ctime``, is when the file was placed:
    ``mv``, ``cp -p``, ``rsync -a`` and a tier's restore keep an old mtime and atime, and no
    one can set ctime back), the access time left out on a noatime mount (relatime updates it
    at most once a day, so it is approximate to a day there)."""
    if mode == "noatime":
        return max(seen.mtime, seen.ctime)
    return max(seen.atime, seen.mtime, seen.ctime)


def age_bucket(age: float) -> int:
    for i, (_label, bound) in enumerate(AGES):
        if age < bound:
            return i
    return len(AGES) - 1


@dataclass
class Group:
    """The files of one engine, model, dtype and parallel layout."""

    engine: str
    model: str
    dtype: str
    layout: str
    world: int
    base: str = ""  # vLLM: the folder whose config.json names the model
    files: int = 0
    bytes: int = 0
    ranks: set[int] = field(default_factory=set)
    oldest: float = float("inf")
    newest: float = 0.0
    ages: list[int] = field(default_factory=lambda: [0] * len(AGES))  # bytes per age bucket
    orphan: str = ""  # why no running configuration would read it, when one was given
    hsm: dict[str, list[int]] = field(default_factory=dict)  # HSM kind -> [files, bytes]

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "model": self.model,
            "dtype": self.dtype,
            "layout": self.layout,
            "world": self.world,
            "ranks_seen": sorted(self.ranks),
            "files": self.files,
            "bytes": self.bytes,
            "oldest_use": self.oldest if self.files else None,
            "newest_use": self.newest if self.files else None,
            "bytes_by_last_use": dict(zip((a for a, _ in AGES), self.ages, strict=True)),
            "orphan": self.orphan or None,
            "hsm": {kind: {"files": n, "bytes": b} for kind, (n, b) in self.hsm.items()} or None,
        }


@dataclass
class Summary:
    """A folder's contents. ``add`` each file, then ``finish``."""

    now: float
    mode: str  # how the mount records access (walk.atime_mode)
    groups: dict[tuple[str, str, str, str, str], Group] = field(default_factory=dict)
    temp_files: int = 0
    temp_bytes: int = 0
    temp_oldest: float = float("inf")
    unknown_files: int = 0
    unknown_bytes: int = 0
    unknown_examples: list[str] = field(default_factory=list)
    config_files: int = 0
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # vLLM base -> config

    def add(self, seen: Seen, hsm: str | None = None) -> None:
        """Count one file; ``hsm`` is its HSM state's kind where it was read (``archived``,
        ``released``, ``dirty``, ``lost``, ``none``: ``probe.parse.HsmState.kind``)."""
        match = classify(seen.folder, seen.name)
        if match is None:
            self.unknown_files += 1
            self.unknown_bytes += seen.size
            if len(self.unknown_examples) < 10:
                self.unknown_examples.append("/".join((*seen.folder, seen.name)))
            return
        if match.kind == TEMP:
            self.temp_files += 1
            self.temp_bytes += seen.size
            self.temp_oldest = min(self.temp_oldest, seen.mtime)
            return
        if match.kind == CONFIG:
            self.config_files += 1
            return
        key = (match.engine, match.model, match.dtype, match.layout, match.base)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(
                match.engine, match.model, match.dtype, match.layout, match.world, match.base
            )
        group.files += 1
        group.bytes += seen.size
        if hsm is not None:
            tally = group.hsm.setdefault(hsm, [0, 0])
            tally[0] += 1
            tally[1] += seen.size
        if match.rank >= 0:
            group.ranks.add(match.rank)
        used = last_use(seen, self.mode)
        group.oldest = min(group.oldest, used)
        group.newest = max(group.newest, used)
        group.ages[age_bucket(self.now - used)] += seen.size

    def add_all(self, seen: Iterable[Seen]) -> Summary:
        for one in seen:
            self.add(one)
        return self

    def finish(
        self,
        *,
        model: str | Sequence[str] | None = None,
        world: int | None = None,
        mla: bool = False,
    ) -> Summary:
        """Name vLLM groups from their config.json, merge what then coincides, and mark the
        groups that a deployment of ``model`` (a name, or every name one model goes by) over
        ``world`` ranks would never read (``mla``: the model caches a latent, which LMCache
        saves from the first rank only, as a world of 1)."""
        merged: dict[tuple[str, str, str, str, str], Group] = {}
        for group in self.groups.values():
            if group.base:  # a vLLM layout: its config.json names it
                config = self.configs.get(group.base)
                if config is not None:
                    group.model, group.dtype, group.layout, group.world = vllm_description(config)
                    group.engine = folder_config_engine(config)
                else:
                    group.layout = "no config.json beside it"
            key = (group.engine, group.model, group.dtype, group.layout, group.base)
            if key in merged:
                _merge(merged[key], group)
            else:
                merged[key] = group
        self.groups = merged
        for group in self.groups.values():
            group.orphan = orphan(group, model, world, mla=mla)
        return self

    @property
    def chunk_files(self) -> int:
        return sum(g.files for g in self.groups.values())

    @property
    def chunk_bytes(self) -> int:
        return sum(g.bytes for g in self.groups.values())

    def engines(self) -> list[str]:
        return sorted({g.engine for g in self.groups.values()})


def _merge(into: Group, other: Group) -> None:
    into.files += other.files
    into.bytes += other.bytes
    into.ranks |= other.ranks
    into.oldest = min(into.oldest, other.oldest)
    into.newest = max(into.newest, other.newest)
    into.ages = [a + b for a, b in zip(into.ages, other.ages, strict=True)]
    for kind, (files, size) in other.hsm.items():
        tally = into.hsm.setdefault(kind, [0, 0])
        tally[0] += files
        tally[1] += size


def orphan(
    group: Group, model: str | Sequence[str] | None, world: int | None, *, mla: bool = False
) -> str:
    """Why no deployment of ``model`` over ``world`` ranks reads ``group``'s files ("" when one
    may): the one rule inspect, doctor and check apply. A group that names no model, or no
    world size, is never an orphan by it; LMCache's world-1 files of an MLA model are every
    world's (0.5.6 ``v1/token_database.py:238-243``: ``save_only_first_rank`` keys them with
    world size 1)."""
    names = (model,) if isinstance(model, str) else tuple(model or ())
    if names and group.model and not model_matches(group.model, names):
        return "another model"
    if not world or not group.world or group.world == world:
        return ""
    if mla and group.world == 1 and group.engine.startswith("lmcache"):
        return ""
    return f"another world size ({group.world} ranks, not {world})"


def engine_name(engine: str) -> str:
    return ENGINE_NAMES.get(engine, engine)
