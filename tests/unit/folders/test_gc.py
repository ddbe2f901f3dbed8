"""gc's safety rules, each on real files: a run removes exactly what its dry run listed, whole
chunks only, never outside the folder, never a temporary, a young chunk or an unknown file, and
two runs against one folder do not fight."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.folders.gc import Chosen, Scope, Sweep, plan, run_gc
from kvtool.folders.lock import STALE_S, Busy
from kvtool.folders.select import Limits
from kvtool.folders.walk import LOCK_NAME, Root
from kvtool.scratch import Interrupted

KEY = "a" * 64
OLD = 5 * 86400


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _run(root: Path, **kw):
    options = {"scope": Scope(), "mode": "relatime", "free_bytes": 0, "dry_run": False}
    options.update(kw)
    return run_gc(root, **options)


@pytest.mark.usefixtures("ctime_as_mtime")
def test_a_dry_run_lists_exactly_what_the_real_run_removes(tmp_path, made):
    made(tmp_path / "sg", "sglang-0.5.23.json", age_s=OLD)
    made(tmp_path / "vl", "vllm-0.33.0.json", age_s=2 * OLD)
    before = _files(tmp_path)
    listed: list[str] = []
    planned, outcome = _run(
        tmp_path,
        limits=Limits(max_size=100_000, grace=60),
        dry_run=True,
        each=lambda r: listed.append(r.path),
    )
    assert _files(tmp_path) == before
    assert outcome.dry_run
    assert len(listed) == planned.choice.files == outcome.removed_files > 0
    log = tmp_path.parent / f"{tmp_path.name}.gc.jsonl"
    removed: list[str] = []
    planned2, outcome2 = _run(
        tmp_path,
        limits=Limits(max_size=100_000, grace=60),
        log=log,
        each=lambda r: removed.append(r.path),
    )
    try:
        assert sorted(removed) == sorted(listed)
        assert _files(tmp_path) == before - set(removed)
        every = [json.loads(line) for line in log.read_text().splitlines()]
        assert [e["action"] for e in (every[0], every[-1])] == ["start", "end"]
        lines = every[1:-1]
        assert sorted(entry["path"] for entry in lines) == sorted(removed)
        assert {entry["action"] for entry in lines} == {"remove"}
        assert every[-1]["removed_files"] == len(removed)
        assert outcome2.removed_bytes == sum(entry["bytes"] for entry in lines)
        # the vLLM files are older, so every one of them went (in whatever order the walk
        # met them) but the chunk its temporary pins; configs and the temporaries stayed
        left_vllm = {p for p in _files(tmp_path) if p.startswith("vl/") and p.endswith(".bin")}
        assert left_vllm
        assert all(
            "1999c6003ff66c035041433e988902535855c91f350584774f1a65707acc1615" in p
            for p in left_vllm
        )
        left = _files(tmp_path)
        assert any(p.endswith("config.json") for p in left)
        assert any(p.endswith(".tmp") for p in left)
        assert planned2.choice.total_bytes - outcome2.removed_bytes <= 100_000
    finally:
        log.unlink(missing_ok=True)


@pytest.mark.usefixtures("ctime_as_mtime")
def test_a_chunk_goes_whole_or_not_at_all(tmp_path):
    now = time.time()
    old = [tmp_path / f"{KEY}_m-x_{r}_4.bin" for r in range(4)]
    for path in old:
        path.write_bytes(b"x" * 100)
        os.utime(path, (now - OLD, now - OLD))
    young = tmp_path / f"{KEY}.mamba_m-x_0_4.bin"  # the same page's mamba state, just written
    young.write_bytes(b"y" * 100)
    other = tmp_path / f"{'b' * 64}_m-x_0_4.bin"
    other.write_bytes(b"z" * 100)
    os.utime(other, (now - OLD, now - OLD))
    planned, outcome = _run(tmp_path, limits=Limits(max_size=0, grace=600))
    assert _files(tmp_path) == {p.name for p in (*old, young)}
    assert planned.choice.short_bytes == 500
    assert outcome.removed_files == 1


def test_a_chunk_used_between_the_plan_and_the_removal_stays_whole(tmp_path):
    now = time.time()
    paths = [tmp_path / f"{KEY}_m-x_{r}_2.bin" for r in range(2)]
    for path in paths:
        path.write_bytes(b"x" * 10)
        os.utime(path, (now - OLD, now - OLD))
    root = Root(tmp_path)
    planned = plan(
        root, scope=Scope(), limits=Limits(max_size=0, grace=0), mode="relatime", free_bytes=0
    )
    assert planned.choice.files == 2
    os.utime(paths[1], (now, now - OLD))  # read by an engine since
    sweep = Sweep(root, planned, scope=Scope(), mode="relatime", dry_run=False)
    assert list(sweep) == []
    assert _files(tmp_path) == {p.name for p in paths}
    assert sweep.outcome().skipped_chunks == 1
    # rewritten by an engine since (a new file of the same name, its time set back to the
    # old one): its inode tells it apart, and it stays too
    paths[1].unlink()
    paths[1].write_bytes(b"n" * 10)
    os.utime(paths[1], (now - OLD, now - OLD))
    sweep = Sweep(root, planned, scope=Scope(), mode="relatime", dry_run=False)
    assert list(sweep) == []
    assert sweep.outcome().skipped_chunks == 1
    assert _files(tmp_path) == {p.name for p in paths}
    root.close()
    assert _files(tmp_path) == {p.name for p in paths}


@pytest.mark.usefixtures("ctime_as_mtime")
def test_the_second_walks_name_filter_only_narrows_what_the_plan_chose(tmp_path, made):
    made(tmp_path, "sglang-0.5.23.json", age_s=OLD)
    root = Root(tmp_path)
    planned = plan(
        root,
        scope=Scope(),
        limits=Limits(max_size=100_000, grace=60),
        mode="relatime",
        free_bytes=0,
    )
    assert planned.chosen_files is not None
    assert planned.chosen_files.files == planned.choice.files > 0

    def swept(chosen):
        sweep = Sweep(
            root, planned._replace(chosen_files=chosen), scope=Scope(), mode="relatime",
            dry_run=True,
        )  # fmt: skip
        return sorted(r.path for r in sweep)

    listed = swept(planned.chosen_files)
    assert len(listed) == planned.choice.files
    # every name let through, as colliding hashes would be: classify still decides
    files = list(tmp_path.iterdir())
    names = [hash(((), p.name)) for p in files]
    everything = Chosen(names, [p.stat().st_ino for p in files])
    assert swept(everything) == listed
    assert swept(Chosen([])) == []
    # a name the plan chose whose inode is not the one it saw is never removed
    assert swept(Chosen(names, [p.stat().st_ino + 1 for p in files])) == []
    assert all(n in everything for n in names)
    assert sum(n in planned.chosen_files for n in names) >= planned.choice.files  # none missed
    root.close()


def test_never_outside_never_temporaries_never_unknown_unless_asked(tmp_path):
    now = time.time()
    root = tmp_path / "kv"
    outside = tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    chunk = outside / f"{KEY}_m-x_0_1.bin"
    chunk.write_bytes(b"o" * 10)
    (root / "linked").symlink_to(outside)
    (root / f"{'c' * 64}_m-x_0_1.bin").symlink_to(chunk)
    tmp = root / f".{'d' * 32}.tmp"
    tmp.write_bytes(b"t")
    mine = root / f"{'e' * 64}_m-x_0_1.bin"
    mine.write_bytes(b"m" * 10)
    notes = root / "notes.txt"
    notes.write_text("keep me")
    for path in (chunk, tmp, mine, notes):
        os.utime(path, (now - OLD, now - OLD))
    _run(root, limits=Limits(max_size=0, grace=0))
    assert chunk.exists()
    assert tmp.exists()
    assert notes.exists()
    assert not mine.exists()
    assert (root / "linked").is_symlink()
    _run(root, limits=Limits(max_size=0, grace=0), scope=Scope(include_unknown=True))
    assert not notes.exists()
    assert tmp.exists()
    assert chunk.exists()


def test_scope_by_engine_and_model(tmp_path):
    now = time.time()
    files = {
        "sglang": tmp_path / f"{KEY}_meta-llama-Llama-3.1-8B_0_1.bin",
        "sglang-other": tmp_path / f"{KEY}_Qwen-Qwen3-8B_0_1.bin",
        "lmcache": tmp_path / "meta-llama-Llama-3.1-8B@1@0@ab12@bfloat16.pt",
    }
    for path in files.values():
        path.write_bytes(b"x")
        os.utime(path, (now - OLD, now - OLD))
    _run(
        tmp_path,
        limits=Limits(max_size=0, grace=0),
        scope=Scope(layout="sglang", models=("meta-llama/Llama-3.1-8B",)),
    )
    assert not files["sglang"].exists()
    assert files["sglang-other"].exists()
    assert files["lmcache"].exists()


def test_a_folder_of_no_known_layout_is_an_error_and_nothing_goes(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(InputError, match="no file of a layout kvtool knows"):
        _run(tmp_path, limits=Limits(max_size=0, grace=0))
    assert _files(tmp_path) == {"a.txt"}


def test_an_empty_folder_is_an_answer_not_an_error(tmp_path):
    """gc from cron on a tier before its first write (as the emitted LMCache config suggests)
    finds nothing to do: exit 0, not 'no file of a layout kvtool knows'."""
    planned, outcome = _run(tmp_path, limits=Limits(max_age=86400))
    assert (planned.known_files, planned.unknown_files) == (0, 0)
    assert outcome.removed_files == 0
    assert _files(tmp_path) == set()


def test_a_file_that_will_not_go_does_not_stop_the_rest(tmp_path, monkeypatch):
    now = time.time()
    paths = [tmp_path / f"{c * 64}_m-x_0_1.bin" for c in "abc"]
    for path in paths:
        path.write_bytes(b"x")
        os.utime(path, (now - OLD, now - OLD))
    real = os.rename

    def rename(path, *a, **kw):  # gc's removal starts with the rename to a private name
        if str(path) == paths[1].name:
            raise OSError(16, "Device or resource busy")
        return real(path, *a, **kw)

    monkeypatch.setattr(os, "rename", rename)
    _planned, outcome = _run(tmp_path, limits=Limits(max_size=0, grace=0))
    assert _files(tmp_path) == {paths[1].name}
    assert outcome.removed_files == 2
    assert len(outcome.failed) == 1
    assert "busy" in outcome.failed[0]


def test_an_interrupted_run_still_leaves_its_whole_log(tmp_path):
    now = time.time()
    for c in "abc":
        path = tmp_path / "kv" / f"{c * 64}_m-x_0_1.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x")
        os.utime(path, (now - OLD - ord(c), now - OLD - ord(c)))
    log = tmp_path / "gc.jsonl"
    seen: list[str] = []

    def each(removal):
        seen.append(removal.path)
        if len(seen) == 2:
            raise Interrupted(signal.SIGTERM)

    with pytest.raises(Interrupted):
        _run(tmp_path / "kv", limits=Limits(max_size=0, grace=0), log=log, each=each)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [entry["action"] for entry in lines] == ["start", "remove", "remove", "stopped"]
    assert lines[-1]["why"] == "SIGTERM"
    assert lines[-1]["removed_files"] == 2
    assert not (tmp_path / "kv" / LOCK_NAME).exists()


def _lock_file(root: Path, *, host: str, pid: int, age: float) -> Path:
    path = root / LOCK_NAME
    path.write_text(json.dumps({"host": host, "pid": pid, "started": time.time() - age}))
    os.utime(path, (time.time() - age, time.time() - age))
    return path


def test_a_held_lock_means_busy_and_nothing_removed(tmp_path):
    now = time.time()
    path = tmp_path / f"{KEY}_m-x_0_1.bin"
    path.write_bytes(b"x")
    os.utime(path, (now - OLD, now - OLD))
    _lock_file(tmp_path, host="node-7", pid=4242, age=5)
    with pytest.raises(Busy, match="host node-7, pid 4242"):
        _run(tmp_path, limits=Limits(max_size=0, grace=0))
    assert path.exists()
    assert (tmp_path / LOCK_NAME).exists()
    assert _files(tmp_path) == {path.name, LOCK_NAME}  # no lock attempt left behind


def test_a_stale_lock_is_taken_over_and_released_after(tmp_path):
    now = time.time()
    path = tmp_path / f"{KEY}_m-x_0_1.bin"
    path.write_bytes(b"x")
    os.utime(path, (now - OLD, now - OLD))
    _lock_file(tmp_path, host="node-7", pid=4242, age=STALE_S + 60)
    _run(tmp_path, limits=Limits(max_size=0, grace=0))
    assert _files(tmp_path) == set()
    # a dead process of this host holds no lock either, however fresh
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    path.write_bytes(b"x")
    os.utime(path, (now - OLD, now - OLD))
    _lock_file(tmp_path, host=socket.gethostname(), pid=int(dead.stdout), age=1)
    _run(tmp_path, limits=Limits(max_size=0, grace=0))
    assert _files(tmp_path) == set()


def test_two_runs_at_once_remove_what_one_would(tmp_path):
    root = tmp_path / "kv"
    root.mkdir()
    for i in range(299, -1, -1):  # real processes: ages by the real clock (ctime counts)
        path = root / f"{i:064x}_m-x_0_1.bin"
        path.write_bytes(b"x" * 1000)
        if i == 100:
            time.sleep(0.05)  # past the kernel's coarse timestamp tick: the last 100 are newer
    command = [sys.executable, "-m", "kvtool", "gc", str(root), "--max-size", "100kB",
               "--grace", "0s", "--json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = [(run.wait(60), run.stdout.read()) for run in runs]
    for run in runs:
        run.stdout.close()
    codes = sorted(code for code, _ in results)
    assert codes in ([0, 0], [0, 1])
    removed = sum(json.loads(out).get("removed_files", 0) for _, out in results)
    assert removed == 200
    assert len(_files(root)) == 100
    # the newest hundred stayed
    assert _files(root) == {f"{i:064x}_m-x_0_1.bin" for i in range(100)}


@pytest.mark.usefixtures("ctime_as_mtime")
def test_the_second_walk_enters_only_the_folders_holding_chosen_files(tmp_path):
    now = time.time()
    chosen = tmp_path / "a" / "b" / "c"
    chosen.mkdir(parents=True)
    for i in range(3):
        old = chosen / f"{i:064x}_m-x_0_1.bin"
        old.write_bytes(b"x")
        os.utime(old, (now - OLD, now - OLD))
    for folder in ("x/y", "x/z", "a/q"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / f"{'f' * 64}_m-x_0_1.bin").write_bytes(b"y")  # young: stays
    with Root(tmp_path) as root:
        planned = plan(
            root, scope=Scope(), limits=Limits(max_size=0, grace=600), mode="relatime",
            free_bytes=0,
        )  # fmt: skip
        assert planned.walk.folders == 8
        sweep = Sweep(root, planned, scope=Scope(), mode="relatime", dry_run=True)
        assert len(list(sweep)) == 3
        assert sweep.walk.folders == 4  # the root, a, a/b, a/b/c: not x, x/y, x/z, a/q
        assert hash(("a", "b")) in planned.folders
        assert hash(("x",)) not in planned.folders


def test_a_chunk_placed_seconds_ago_with_old_times_is_young_by_its_ctime(tmp_path):
    """``mv``, ``cp -p``, ``rsync -a`` and a tier's restore keep a chunk's old mtime and atime;
    its ctime says when it was placed, and gc counts it as systemd-tmpfiles does."""
    import shutil

    now = time.time()
    outside, root = tmp_path / "elsewhere", tmp_path / "kv"
    outside.mkdir()
    root.mkdir()
    moved, copied = (outside / f"{c * 64}_m-x_0_1.bin" for c in "ab")
    for path in (moved, copied):
        path.write_bytes(b"x" * 100)
        os.utime(path, (now - OLD, now - OLD))
    os.rename(moved, root / moved.name)  # mv
    shutil.copy2(copied, root / copied.name)  # cp -p
    assert all(os.stat(p).st_mtime < now - OLD + 1 for p in root.iterdir())
    for limits in (Limits(max_age=86400, grace=0), Limits(max_size=0, grace=600)):
        _planned, outcome = _run(root, limits=limits)
        assert outcome.removed_files == 0, limits
    assert len(list(root.iterdir())) == 2
    _planned, outcome = _run(root, limits=Limits(max_size=0, grace=0))  # no age asked: they go
    assert outcome.removed_files == 2


def test_a_killed_runs_leftover_is_removed_by_the_next_run_whatever_its_scope(tmp_path):
    """A run killed between a file's rename and its unlink leaves the file under gc's private
    name (its own name already logged as removed): the next run removes it under that name,
    even under a --model that the file's old name would not match, and its grace still holds
    (the rename set its ctime: a leftover seconds old stays under a grace of an hour)."""
    from kvtool.folders.gc import PRIVATE_PREFIX

    leftover = tmp_path / f"{PRIVATE_PREFIX}4242.0123456789ab"
    leftover.write_bytes(b"x" * 10)
    mine = tmp_path / f"{KEY}_m-x_0_1.bin"
    mine.write_bytes(b"y")
    os.utime(mine, (time.time() - OLD,) * 2)
    _run(tmp_path, limits=Limits(max_size=0, grace=3600))
    assert leftover.exists()  # just made: young
    removed: list[str] = []
    _run(
        tmp_path,
        scope=Scope(models=("other-model",)),
        limits=Limits(max_size=0, grace=0),
        each=lambda r: removed.append(r.path),
    )
    assert leftover.name in removed
    assert not leftover.exists()
    assert mine.exists()  # another model's chunk: out of scope
