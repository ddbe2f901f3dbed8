"""``kvtool inspect`` and ``kvtool gc``'s inputs: the folder, the limits, what is in scope,
and how the folder's mount records access. Every mistake is one InputError, before anything is
read or removed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kvtool.errors import InputError
from kvtool.files import output_file, path_option, read_only_mount
from kvtool.folders.layouts import ENGINES
from kvtool.folders.select import Limits
from kvtool.folders.shard import Shard, check_run, parse_shard
from kvtool.folders.walk import atime_mode
from kvtool.probe.host import Host
from kvtool.probe.lfs import Lfs
from kvtool.units import parse_bytes, parse_count, parse_duration

if TYPE_CHECKING:
    from kvtool.probe.parse import Mount
    from kvtool.profiles.resolve import ResolvedModel
    from kvtool.profiles.schema import ModelProfile


class FolderInputs(NamedTuple):
    root: Path
    mode: str  # how the mount records access: strictatime, relatime, noatime, unknown
    mountpoint: str
    model: tuple[str, ...] | None  # every name the engines may write for the model asked for
    world: int | None  # ranks of the running deployment: tp x pp
    mla: bool = False  # the model caches a latent (a bundled profile says so)
    hsm: Lfs | None = None  # inspect: on Lustre with lfs here, HSM states are read with it
    hsm_note: str = ""  # why they are not, on Lustre


class GcInputs(NamedTuple):
    folder: FolderInputs
    limits: Limits
    layout: str | None
    include_unknown: bool
    dry_run: bool
    log: Path | None
    free_bytes: int
    release: Lfs | None = None  # --release: the lfs that releases (DIR is on Lustre)
    shard: Shard | None = None
    shard_run: str | None = None
    candidates: Lfs | None = None  # --candidates lfs-find
    task: dict[str, Any] | None = None  # --emit fsx-task: the request, instead of acting
    task_notes: tuple[str, ...] = ()


def model_names(
    text: str | None, *, resolved: ResolvedModel | None = None
) -> tuple[str, ...] | None:
    """Every name the engines may write into their files for ``--model`` (inspect, gc, doctor
    and check alike): the name as typed (an engine writes its served name), and for a bundled
    model (an alias, a served name or a Hub id) or a resolved one, its Hub ids. Never reaches
    the network."""
    if text is None:
        return None
    name = text.strip()
    if not name:
        raise InputError("--model is empty", "give the model the engines serve")
    names = [name]
    if resolved is not None and resolved.origin == "hub":
        names.append(resolved.location)
    profile = resolved.profile if resolved is not None else _bundled_profile(name)
    if profile is not None:
        names += [profile.hf_id, *profile.aliases]
    return tuple(dict.fromkeys(names))


def _bundled_profile(name: str) -> ModelProfile | None:
    from kvtool.profiles.load import find_model_profile

    try:
        found = find_model_profile(name)
    except (OSError, ValueError):  # a name no file can have (too long, a NUL): not a profile's
        return None
    return None if found is None else found[0]


def model_is_mla(text: str | None) -> bool:
    """Whether a bundled model of that name caches an MLA latent (False when kvtool has no
    profile of it: nothing is assumed)."""
    if text is None or _bundled_profile(text.strip()) is None:
        return False
    from kvtool.profiles.resolve import resolve_model

    return resolve_model(text.strip()).spec.is_mla


def resolve_world(tp: str | None, pp: str | None, world: str | None) -> int | None:
    """The running deployment's ranks, tp x pp (``--world N``, its old spelling, is N)."""
    if world is not None:
        if tp is not None or pp is not None:
            raise InputError("--world is tp x pp", "give --tp and --pp only")
        ranks = parse_count(world, what="--world")
        if ranks < 1:
            raise InputError(f"--world {world!r} must be at least 1")
        return ranks
    if tp is None and pp is None:
        return None
    sizes = [
        parse_count("1" if value is None else value, what=option)
        for option, value in (("--tp", tp), ("--pp", pp))
    ]
    if min(sizes) < 1:
        raise InputError("--tp and --pp must be at least 1")
    return sizes[0] * sizes[1]


def resolve_folder(
    text: str,
    *,
    host: Host,
    model: str | None = None,
    tp: str | None = None,
    pp: str | None = None,
    world: str | None = None,
    hsm: bool = False,
) -> FolderInputs:
    """The folder to read: it exists, is a folder and can be listed (a link to one is
    followed here, once; nothing below it is). ``hsm``: on Lustre, read HSM states with lfs
    where it is installed (inspect)."""
    path = path_option(text, option="DIR")
    if not path.exists():
        raise InputError(f"{path} does not exist", "give the engine's KV folder")
    if not path.is_dir():
        raise InputError(f"{path} is a file, not a folder", "give the folder that holds it")
    if not os.access(path, os.R_OK | os.X_OK):
        raise InputError(f"{path} cannot be read by this user", "run as its owner, or pick another")
    root = path.resolve()
    mounts = host.read("proc_mounts", "/proc/self/mounts")
    mode, mountpoint = atime_mode(root, mounts)
    lfs, note = _hsm_reader(host, root, mounts) if hsm else (None, "")
    return FolderInputs(
        root, mode, mountpoint, model_names(model), resolve_world(tp, pp, world),
        mla=model_is_mla(model),  # LMCache saves an MLA latent from rank 0 as world 1
        hsm=lfs, hsm_note=note,
    )  # fmt: skip


def _mount_of(root: Path, mounts: str | None) -> Mount | None:
    from kvtool.probe.parse import mount_for, parse_proc_mounts

    return mount_for(str(root), parse_proc_mounts(mounts or ""))


def _hsm_reader(host: Host, root: Path, mounts: str | None) -> tuple[Lfs | None, str]:
    """lfs, where the folder is on Lustre and lfs is installed; else why not (on Lustre)."""
    mount = _mount_of(root, mounts)
    if mount is None or mount.fstype != "lustre":
        return None, ""
    lfs = Lfs(host)  # type: ignore[arg-type]  # LocalHost: the door that runs lfs
    if lfs.version() is None:
        return None, "on Lustre, but lfs is not installed here: HSM states (in S3 or not) not read"
    return lfs, ""


def parse_limit_size(text: str, *, what: str) -> int:
    """A size limit: ``0`` (nothing may stay), or a number with a unit."""
    return 0 if text.strip() in ("0", "0B", "0b") else parse_bytes(text, what=what)


def resolve_gc(
    text: str,
    *,
    host: Host,
    max_size: str | None,
    max_age: str | None,
    keep_free: str | None,
    grace: str,
    layout: str | None,
    model: str | None,
    include_unknown: bool,
    dry_run: bool,
    log: Path | None,
    release: bool = False,
    emit: str | None = None,
    fsx_id: str | None = None,
    shard: str | None = None,
    shard_run: str | None = None,
    candidates: str = "walk",
    as_json: bool = False,
) -> GcInputs:
    """gc's inputs; a folder this user cannot change is refused up front (a dry run only reads
    it, so it may). ``--release``, ``--emit fsx-task`` and ``--candidates lfs-find`` need the
    folder on Lustre (and but for the emitted task, Lustre's ``lfs``)."""
    folder = resolve_folder(text, host=host, model=model)
    if max_size is None and max_age is None and keep_free is None:
        raise InputError(
            "gc needs a limit", "give --max-size SIZE, --max-age DURATION or --keep-free SIZE"
        )
    limits = Limits(
        max_size=None if max_size is None else parse_limit_size(max_size, what="--max-size"),
        max_age=None if max_age is None else parse_duration(max_age, what="--max-age"),
        keep_free=None if keep_free is None else parse_bytes(keep_free, what="--keep-free"),
        grace=parse_duration(grace, what="--grace"),
    )
    if layout is not None and layout not in ENGINES:
        raise InputError(
            f"--layout {layout!r} is not a layout kvtool knows", "use one of " + ", ".join(ENGINES)
        )
    modes = _Modes(host, folder.root, limits, layout=layout, model=model, as_json=as_json)
    task, notes = modes.task(emit, release=release, fsx_id=fsx_id, shard=shard, dry_run=dry_run)
    if task is not None:
        return GcInputs(folder, limits, layout, include_unknown, dry_run, log, 0,
                        task=task, task_notes=notes)  # fmt: skip
    lfs = modes.lfs("--release") if release else None
    finder = modes.finder(candidates, lfs)
    split = None if shard is None else parse_shard(shard)
    run = None if shard_run is None else check_run(shard_run)
    if run is not None and split is None:
        raise InputError(
            f"--shard-run {run} names a sharded run, and no --shard was given",
            "give each shard --shard K/N with the same --shard-run, or leave --shard-run out",
        )
    sized = limits.max_size is not None or limits.keep_free is not None
    if split is not None and split.n > 1 and sized and run is None:
        raise InputError(
            f"--shard {shard} with --max-size or --keep-free needs --shard-run NAME",
            "the shards of one run agree on one cut-off, and find each other by the run's"
            " name: give each the same, e.g. the Kubernetes Job's name",
        )
    if not dry_run:
        _check_changeable(folder.root)
    if log is not None:
        output_file(log, option="--log")
        if log.resolve().is_relative_to(folder.root):
            raise InputError(
                f"--log {log} is inside {folder.root}", "write the log outside the folder gc cleans"
            )
    stats = os.statvfs(folder.root)
    return GcInputs(
        folder, limits, layout, include_unknown, dry_run, log, stats.f_bavail * stats.f_frsize,
        release=lfs, shard=split, shard_run=run, candidates=finder,
    )  # fmt: skip


class _Modes:
    """What ``--release``, ``--emit fsx-task`` and ``--candidates lfs-find`` need, checked."""

    def __init__(
        self,
        host: Host,
        root: Path,
        limits: Limits,
        *,
        layout: str | None,
        model: str | None,
        as_json: bool,
    ) -> None:
        self.host = host
        self.root = root
        self.limits = limits
        self.layout = layout
        self.model = model
        self.as_json = as_json

    def lustre(self, what: str) -> Mount:
        """The Lustre mount holding the folder; InputError naming what it is otherwise."""
        mount = _mount_of(self.root, self.host.read("proc_mounts", "/proc/self/mounts"))
        if mount is None or mount.fstype != "lustre":
            where = (
                "a file system /proc/self/mounts does not show"
                if mount is None
                else f"{mount.fstype} (mounted at {mount.mountpoint})"
            )
            raise InputError(
                f"{what} needs FSx for Lustre, and {self.root} is on {where}",
                "run gc without it to remove the chosen files instead",
            )
        return mount

    def lfs(self, what: str) -> Lfs:
        self.lustre(what)
        lfs = Lfs(self.host)  # type: ignore[arg-type]  # LocalHost: the door that runs lfs
        if lfs.version() is None:
            raise InputError(
                f"{what} needs Lustre's lfs command, which is not installed here",
                "install the Lustre client tools (on Amazon Linux: the lustre-client package)",
            )
        return lfs

    def finder(self, candidates: str, lfs: Lfs | None) -> Lfs | None:
        if candidates == "walk":
            return None
        if candidates != "lfs-find":
            raise InputError(
                f"--candidates {candidates!r} is not a source", "use walk (the default) or lfs-find"
            )
        if self.limits.max_age is None or (self.limits.max_size, self.limits.keep_free) != (
            None,
            None,
        ):
            raise InputError(
                "--candidates lfs-find selects by age: it serves --max-age alone",
                "drop --max-size and --keep-free, or the lfs-find candidates",
            )
        return lfs or self.lfs("--candidates lfs-find")

    def task(
        self, emit: str | None, *, release: bool, fsx_id: str | None, shard: str | None,
        dry_run: bool,
    ) -> tuple[dict[str, Any] | None, tuple[str, ...]]:  # fmt: skip
        """``--emit fsx-task``: the FSx request (and its notes), checked; (None, ()) without."""
        if emit is None:
            if fsx_id is not None:
                raise InputError("--fsx-id names the file system for --emit fsx-task",
                                 "add --release --emit fsx-task, or drop --fsx-id")  # fmt: skip
            return None, ()
        from kvtool.folders.fsx_task import release_task

        if emit.strip().lower() != "fsx-task":
            raise InputError(f"--emit {emit!r} is not something gc emits", "use --emit fsx-task")
        if not release:
            raise InputError("--emit fsx-task is the FSx side of --release", "add --release")
        if self.as_json:
            raise InputError("--emit prints the FSx request, not JSON", "drop --json or --emit")
        refused = {
            "--shard": shard, "--layout": self.layout, "--model": self.model,
            "--dry-run": dry_run or None,
        }  # fmt: skip
        given = [name for name, value in refused.items() if value is not None]
        if given:
            raise InputError(
                f"--emit fsx-task cannot keep to {', '.join(given)}: the FSx task releases every"
                " exported file below its paths by age alone",
                "drop " + ", ".join(given) + ", or run gc --release on a node instead",
            )
        mount = self.lustre("--emit fsx-task")
        return release_task(fsx_id, self.root, mount, self.limits)


def _check_changeable(root: Path) -> None:
    if read_only_mount(root):
        raise InputError(
            f"{root} is on a read-only mount: gc cannot remove anything",
            "run gc where it is mounted read-write, or add --dry-run",
        )
    if not os.access(root, os.W_OK | os.X_OK):
        raise InputError(
            f"{root} is not writable by this user: gc cannot remove anything",
            "run gc as the folder's owner, or add --dry-run",
        )
