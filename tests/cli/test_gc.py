"""``kvtool gc`` end to end: its exit codes, its dry run, its log and its bad input."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.folders.walk import LOCK_NAME
from tests.conftest import CliResult
from tests.unit.folders.conftest import build

Kvtool = Callable[..., CliResult]


def _names(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.usefixtures("ctime_as_mtime")
def test_dry_run_then_the_real_run(kvtool: Kvtool, tmp_path: Path) -> None:
    root = tmp_path / "kv"
    build(root, "sglang-0.5.23.json", age_s=5 * 86400)
    before = _names(root)
    dry = kvtool("gc", str(root), "--max-size", "100KiB", "--dry-run", "--list")
    assert dry.exit_code == 0, dry.stderr
    listed = {
        line.split()[2] for line in dry.stdout.splitlines() if line.startswith("would remove ")
    }
    assert listed
    assert _names(root) == before
    log = tmp_path / "gc.jsonl"
    done = kvtool("gc", str(root), "--max-size", "100KiB", "--log", str(log), "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    logged = {line["path"] for line in lines if line["action"] == "remove"}
    assert logged == listed == before - _names(root)
    assert data["removed_files"] == len(listed)
    assert data["in_scope"]["bytes"] - data["removed_bytes"] <= 100 * 1024


def test_an_unreachable_limit_or_a_held_lock_is_exit_1(kvtool: Kvtool, tmp_path: Path) -> None:
    build(tmp_path, "sglang-0.5.23.json")  # all just written: inside the grace period
    done = kvtool("gc", str(tmp_path), "--max-size", "0")
    assert done.exit_code == 1
    assert "out of reach" in done.stdout
    (tmp_path / LOCK_NAME).write_text(
        json.dumps({"host": "node-3", "pid": 1, "started": time.time()})
    )
    busy = kvtool("gc", str(tmp_path), "--max-age", "1d")
    assert busy.exit_code == 1
    assert "another kvtool gc holds" in busy.stdout
    assert "node-3" in busy.stdout


def test_gc_bad_input_is_one_line_exit_2_and_nothing_removed(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    root = tmp_path / "kv"
    build(root, "sglang-0.5.23.json", age_s=5 * 86400)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.txt").write_text("x")
    before = _names(root)
    for args, match in [
        ((str(root),), "gc needs a limit"),
        ((str(root), "--max-size", "big"), "--max-size 'big' is not a size"),
        ((str(root), "--max-age", "7"), "--max-age '7' is not a duration"),
        ((str(root), "--max-age", "7d", "--layout", "nfs"), "--layout 'nfs'"),
        ((str(root), "--max-age", "1d", "--log", str(root / "log")), "inside"),
        ((str(tmp_path / "junk"), "--max-age", "1d"), "no file of a layout kvtool knows"),
        ((str(tmp_path / "missing"), "--max-age", "1d"), "does not exist"),
    ]:
        done = kvtool("gc", *args)
        assert done.exit_code == 2, (args, done.stdout, done.stderr)
        assert match in done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert _names(root) == before
    assert (tmp_path / "junk" / "a.txt").exists()
    assert not (root / LOCK_NAME).exists()
    assert not (tmp_path / "junk" / LOCK_NAME).exists()
    assert os.listdir(tmp_path / "junk") == ["a.txt"]


@pytest.mark.usefixtures("ctime_as_mtime")
def test_a_name_that_is_not_utf8_is_shown_not_fatal(kvtool: Kvtool, tmp_path: Path) -> None:
    build(tmp_path, "sglang-0.5.23.json", age_s=5 * 86400)
    odd = os.fsencode(str(tmp_path)) + b"/stray-\xff.bin"
    with open(odd, "wb") as f:
        f.write(b"x")
    os.utime(odd, (time.time() - 5 * 86400,) * 2)
    seen = kvtool("inspect", str(tmp_path))
    assert seen.exit_code == 0, seen.stderr
    assert "stray-\\377.bin" in seen.stdout  # escaped as ls -b shows it
    dry = kvtool("gc", str(tmp_path), "--max-size", "0", "--include-unknown", "--dry-run", "--list")
    assert dry.exit_code == 1, dry.stderr  # SGLang's temporary stays: 0 B is out of reach
    assert "out of reach by 100 B: what is left is 100 B in-flight temporaries" in dry.stdout
    assert "would remove stray-\\377.bin" in dry.stdout  # escaped as ls -b shows it


def test_the_old_engine_filter_still_works_with_a_note(kvtool: Kvtool, tmp_path: Path) -> None:
    build(tmp_path, "sglang-0.5.23.json", age_s=5 * 86400)
    old = kvtool("gc", str(tmp_path), "--max-size", "0", "--engine", "vllm", "--dry-run", "--json")
    new = kvtool("gc", str(tmp_path), "--max-size", "0", "--layout", "vllm", "--dry-run", "--json")
    assert old.exit_code == new.exit_code == 0, old.stderr
    assert "--engine is now --layout" in old.stderr
    assert json.loads(old.stdout)["in_scope"] == json.loads(new.stdout)["in_scope"]
    assert json.loads(new.stdout)["in_scope"]["chunks"] == 0  # SGLang's files: out of scope


@pytest.mark.usefixtures("ctime_as_mtime")
def test_the_cap_counts_every_file_in_the_folder_as_du_does(kvtool: Kvtool, tmp_path: Path) -> None:
    when = time.time() - 5 * 86400
    for i in range(3):
        chunk = tmp_path / f"{i:064x}_m-x_0_1.bin"
        chunk.write_bytes(b"k" * 100)
        os.utime(chunk, (when - i, when - i))
    (tmp_path / "notes.txt").write_bytes(b"u" * 200)  # no layout: never removed, still counted
    fits = kvtool("gc", str(tmp_path), "--max-size", "250B", "--json")
    assert fits.exit_code == 0, fits.stdout
    data = json.loads(fits.stdout)
    assert (data["folder_bytes"], data["removed_bytes"]) == (500, 300)  # all 3 chunks go
    assert (tmp_path / "notes.txt").exists()
    for i in range(3):
        chunk = tmp_path / f"{i:064x}_m-x_0_1.bin"
        chunk.write_bytes(b"k" * 100)
        os.utime(chunk, (when, when))
    short = kvtool("gc", str(tmp_path), "--max-size", "100B")
    assert short.exit_code == 1
    assert "out of reach by 100 B: what is left is 200 B of files of no known layout" in (
        short.stdout
    )
    assert "holds 500 B; in scope: 3 chunks, 300 B" in short.stdout


@pytest.mark.usefixtures("ctime_as_mtime")
def test_the_kubernetes_cronjobs_command_runs(kvtool: Kvtool, tmp_path: Path) -> None:
    import yaml

    job = yaml.safe_load(
        (Path(__file__).parents[2] / "examples" / "k8s" / "gc-cronjob.yaml").read_text()
    )
    spec = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (command,) = [c["command"] for c in spec["containers"]]
    mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    assert command[:2] == ["kvtool", "gc"]
    kv, log = tmp_path / "kv", tmp_path / "log"
    build(kv, "sglang-0.5.23.json", age_s=9 * 86400)  # older than the job's --max-age
    log.mkdir()

    def local(arg: str) -> str:  # a mount path (or a file under one) -> the test's folder
        for name, folder in (("log", log), ("kv", kv)):
            mount = mounts[name]
            if arg == mount or arg.startswith(mount + "/"):
                return str(folder) + arg[len(mount) :]
        return arg

    args = [local(a) for a in command]
    done = kvtool(*args[1:])
    assert done.exit_code == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in (log / "gc.jsonl").read_text().splitlines()]
    assert lines[0]["action"] == "start"
    assert lines[-1]["action"] == "end"
    assert lines[-1]["removed_files"] > 0


def test_a_log_that_is_a_link_is_refused_and_nothing_removed(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    kv = tmp_path / "kv"
    build(kv, "sglang-0.5.23.json", age_s=9 * 86400)
    before = sorted(p.name for p in kv.iterdir())
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "gc.jsonl").symlink_to(victim)
    done = kvtool("gc", str(kv), "--max-size", "0", "--grace", "0s", "--log",
                  str(tmp_path / "gc.jsonl"))  # fmt: skip
    assert done.exit_code == 2
    assert "is a symbolic link" in done.stderr
    assert victim.read_text() == "keep"
    assert sorted(p.name for p in kv.iterdir()) == before


@pytest.mark.usefixtures("ctime_as_mtime")
def test_a_size_limit_missed_because_chosen_chunks_changed_is_exit_1(tmp_path: Path) -> None:
    """19,467 chunks kept as "changed" (used between the plan and their removal) left the
    folder over --max-size, and gc said exit 0."""
    from kvtool.cli.render.gc import gc_problems, missed_bytes
    from kvtool.folders.gc import Scope, Sweep, plan
    from kvtool.folders.select import Limits
    from kvtool.folders.walk import Root

    now = time.time()
    paths = [tmp_path / f"{c * 64}_m-x_0_1.bin" for c in "abc"]
    for path in paths:
        path.write_bytes(b"x" * 100)
        os.utime(path, (now - 86400, now - 86400))
    limits = Limits(max_size=0, grace=0)
    with Root(tmp_path) as root:
        planned = plan(root, scope=Scope(), limits=limits, mode="relatime", free_bytes=0)
        os.utime(paths[0], (now, now - 86400))  # read by an engine since the plan
        sweep = Sweep(root, planned, scope=Scope(), mode="relatime", dry_run=False)
        list(sweep)
        outcome = sweep.outcome()
    assert outcome.removed_files == 2
    assert missed_bytes(planned, outcome, limits) == 100
    assert gc_problems(planned, outcome, limits)
    age_only = Limits(max_age=3600, grace=0)  # a chunk used since is young: that limit holds
    assert not missed_bytes(planned, outcome, age_only)


def test_a_bare_zero_grace_is_no_grace(kvtool: Kvtool, tmp_path: Path) -> None:
    """--grace 0 is 0s (issue 55: it was refused as 'not a duration'); 7 alone stays refused."""
    left = {}
    for grace in ("0", "0s", "10m"):
        root = tmp_path / grace
        build(root, "sglang-0.5.23.json")  # all just written: only a zero grace removes them
        done = kvtool("gc", str(root), "--max-size", "1KiB", "--grace", grace)
        assert done.exit_code in (0, 1), done.stderr
        left[grace] = _names(root)
    assert left["0"] == left["0s"] < left["10m"]
    refused = kvtool("gc", str(tmp_path), "--max-size", "0", "--grace", "7")
    assert refused.exit_code == 2
    assert "--grace '7' is not a duration" in refused.stderr
