"""``kvtool.engine.smoke``: the chunk bytes (``payload``), the scenario's shape
(``smoke_options``), and ``smoke_command``'s folder's whole life on real files: a temporary T3
folder made and removed, a ``--t3-dir`` left as found, ``keep``, a ``file://`` and an S3 T4
(moto's server on 127.0.0.1) emptied afterwards, the write and read phases through the
manifest, and a second node in-process and as a real process (``second_node_process``); the
errors raised before anything is written are in test_smoke_refusals.py. Chunks are 64 KiB so
each smoke takes milliseconds.

Every test runs with TMPDIR inside its own ``tmp_path``, so a temporary folder the smoke
leaves behind would show there, not in /tmp."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvtool.engine import smoke
from kvtool.engine.keys import model_fingerprint
from kvtool.engine.smoke import (
    MANIFEST,
    SEGMENT,
    SMOKE_FOLDER,
    SmokeOptions,
    SmokeReport,
    SmokeTargets,
    Step,
    payload,
    second_node_process,
    smoke_command,
    smoke_options,
)
from kvtool.errors import InputError
from kvtool.inputs.shape import resolve_shape
from tests.unit.engine.helpers import s3_client
from tests.unit.engine.smoke_helpers import (
    ALONE_STEPS,
    REPO,
    SMALL,
    STEPS,
    UNIQUE,
    WRITE_STEPS,
    _failed,
    _no_s3,
    _run,
    _stored_payload,
    _tree,
)

pytestmark = pytest.mark.usefixtures("tmpdir_here")  # TMPDIR inside each test's folder

# --- payload -------------------------------------------------------------------------------------

KEY = "ab" * 32


@pytest.mark.parametrize("nbytes", [0, 1, 8, SEGMENT - 1, SEGMENT, SEGMENT + 1, 3 * SEGMENT + 5])
def test_payload_has_exactly_the_bytes_asked_for(nbytes: int) -> None:
    assert len(payload(KEY, nbytes)) == nbytes


def test_payload_is_a_function_of_the_key() -> None:
    data = payload(KEY, 2 * SEGMENT + 100)
    assert payload(KEY, 2 * SEGMENT + 100) == data
    assert payload("cd" * 32, 2 * SEGMENT + 100) != data
    assert payload(KEY, SEGMENT + 7) == data[: SEGMENT + 7]  # shorter is a prefix


def test_each_segment_is_its_index_then_the_keys_block() -> None:
    block = hashlib.shake_128(KEY.encode()).digest(SEGMENT)
    data = payload(KEY, 3 * SEGMENT + 100)
    segments = [data[i : i + SEGMENT] for i in range(0, len(data), SEGMENT)]
    assert len(segments) == 4
    for index, segment in enumerate(segments):
        assert segment[:8] == index.to_bytes(8, "little")
        assert segment[8:] == block[8 : len(segment)]
    assert len(set(segments[:3])) == 3  # swapped or repeated segments would show


# --- smoke_options -------------------------------------------------------------------------------


def test_smoke_options_size_a_chunk_from_the_shape_and_fingerprint_its_layout() -> None:
    options = smoke_options(resolve_shape("llama-3.1-8b"), chunk_tokens=16)
    # 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 B (bf16) x 16 tokens
    assert options.chunk_bytes == 32 * 8 * 128 * 2 * 2 * 16 == 2 * 2**20
    assert options.chunk_tokens == 16
    assert options.fingerprint == model_fingerprint("llama-3.1-8b", "bf16", "vllm-tp1-chunk16")
    assert options == SmokeOptions(
        chunk_bytes=2 * 2**20,
        chunk_tokens=16,
        fingerprint=options.fingerprint,
        sessions=4,
        chunks_per_session=4,
        posture="lazy",
        policy="lru",
        t2_idle_s=60.0,
        t3_idle_s=600.0,
        shared_ttl_s=3600.0,
        io_threads=32,
    )


def test_tp_and_chunk_tokens_change_the_chunk_size_and_the_fingerprint() -> None:
    base = smoke_options(resolve_shape("llama-3.1-8b"), chunk_tokens=16)
    tp8 = smoke_options(resolve_shape("llama-3.1-8b", tp=8), chunk_tokens=16)
    assert tp8.chunk_bytes == base.chunk_bytes // 8  # one rank's KV heads
    assert tp8.fingerprint == model_fingerprint("llama-3.1-8b", "bf16", "vllm-tp8-chunk16")
    longer = smoke_options(resolve_shape("llama-3.1-8b"), chunk_tokens=256)
    assert longer.chunk_bytes == 16 * base.chunk_bytes
    assert len({base.fingerprint, tp8.fingerprint, longer.fingerprint}) == 3


def test_smoke_options_pass_the_scenario_through() -> None:
    options = smoke_options(
        resolve_shape("llama-3.1-8b"), chunk_tokens=16, sessions=6, chunks_per_session=3,
        posture="eager", policy="s3fifo", io_threads=8,
    )  # fmt: skip
    assert (options.sessions, options.chunks_per_session) == (6, 3)
    assert (options.posture, options.policy, options.io_threads) == ("eager", "s3fifo", 8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunks_per_session": 1}, "--chunks must be at least 2"),
        ({"sessions": 2}, "--sessions must be at least 3, got 2"),  # was an IndexError step
        ({"posture": "sometimes"}, "unknown --posture 'sometimes'"),
        ({"policy": "clock"}, "unknown --policy 'clock'"),
    ],
)
def test_smoke_options_refuse_what_the_scenario_cannot_run(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError) as caught:
        smoke_options(resolve_shape("llama-3.1-8b"), chunk_tokens=16, **kwargs)
    assert caught.value.message == message


def test_a_report_without_steps_has_not_passed() -> None:
    assert SmokeReport([], {}, {}, []).passed is False
    failed = Step("prefill", "FAIL", "x", 0, 0.0, {})
    passed = failed._replace(status="PASS")
    assert SmokeReport([passed, failed], {}, {}, []).passed is False
    assert SmokeReport([passed], {}, {}, []).to_json()["passed"] is True


# --- the folder's life ---------------------------------------------------------------------------


def test_without_a_t3_dir_a_temporary_folder_is_made_used_and_removed(tmpdir_here: Path) -> None:
    seen: dict[str, list[Path]] = {}

    def progress(step: str) -> None:
        seen[step] = sorted(tmpdir_here.glob("kvtool-smoke-*/*/t3/*"))

    outcome = _run(SmokeTargets(), progress=progress)
    assert _failed(outcome) == []
    assert outcome.report.passed
    assert [s.name for s in outcome.report.steps] == ALONE_STEPS  # no second node given
    assert (outcome.phase, outcome.kept) == ("all", False)
    base = outcome.folder.parent
    assert base.parent == tmpdir_here
    assert base.name.startswith("kvtool-smoke-")
    assert re.fullmatch(UNIQUE, outcome.folder.name)
    # while it ran, T3 held the chunk files and, after the node loss, the manifest
    t3 = outcome.folder / "t3"
    assert seen["prefill"] == []
    assert seen["TTL expiry"] == [t3 / "chunks", t3 / MANIFEST, t3 / "quarantine"]
    assert list(tmpdir_here.iterdir()) == []  # the folder and its temporary parent are gone
    report = outcome.report
    assert report.mediums["T1"] == "host bytes (torch is not installed)"
    assert report.mediums["T3"].startswith(f"files under {t3} (")
    assert report.mediums["T4"].startswith(f"files under {outcome.folder / 't4'} (")
    assert report.counters["corrupt"] == 1
    assert report.counters["expired"] == 1
    assert report.counters["hits_T4"] > 0
    # the flipped bit and T3's injected refusals, and nothing else: their counts, messages
    counts = [f for f in report.faults if re.fullmatch(r"[^:]+: \d+", f)]
    assert counts[0] == "corrupt: 1"
    assert re.fullmatch(r"move T2->T3: [1-9]\d*", counts[1]), counts
    assert len(counts) == 2, counts
    messages = report.faults[2:]
    assert re.fullmatch(r"T3 [0-9a-f]{12}: corrupt \(payload checksum mismatch\), quarantined",
                        messages[0])  # fmt: skip
    refused = r"move T2->T3 [0-9a-f]{12}: T3 write of [0-9a-f]{12}: No space left on device"
    assert all(re.fullmatch(refused + r" \(injected\)", m) for m in messages[1:]), messages


def test_a_t3_dir_is_left_as_found(t3_dir: Path, tmpdir_here: Path) -> None:
    (t3_dir / "someone-elses.kv").write_bytes(b"x" * 4096)
    (t3_dir / "team" / "notes").mkdir(parents=True)
    (t3_dir / "team" / "notes" / "a.txt").write_text("keep")
    before = _tree(t3_dir)
    outcome = _run(SmokeTargets(t3_dir=t3_dir))
    assert _failed(outcome) == []
    assert outcome.folder.parent == t3_dir
    assert re.fullmatch(UNIQUE, outcome.folder.name)
    assert not outcome.folder.exists()
    assert outcome.kept is False
    assert _tree(t3_dir) == before
    assert list(tmpdir_here.iterdir()) == []  # no temporary folder either


def test_keep_leaves_t3_and_t4_with_the_chunks_and_the_manifest(t3_dir: Path) -> None:
    outcome = _run(SmokeTargets(t3_dir=t3_dir, keep=True))
    assert _failed(outcome) == []
    assert outcome.kept is True
    assert [p.name for p in t3_dir.iterdir()] == [outcome.folder.name]
    t3, t4 = outcome.folder / "t3", outcome.folder / "t4"
    manifest = json.loads((t3 / MANIFEST).read_text())
    assert manifest["fingerprint"] == SMALL.fingerprint
    assert (manifest["chunk_bytes"], manifest["chunk_tokens"]) == (64 * 2**10, 16)
    assert len(manifest["keys"]) == SMALL.chunks_per_session
    assert list(t3.glob("chunks/*/*/*.kv"))
    assert list(t4.glob("chunks/*/*/*.kv"))
    assert len(list((t3 / "quarantine").iterdir())) == 1  # the corrupted chunk, moved aside


def test_keep_without_a_t3_dir_keeps_the_temporary_folder(tmpdir_here: Path) -> None:
    outcome = _run(SmokeTargets(keep=True))
    assert outcome.kept is True
    assert outcome.folder.parent.parent == tmpdir_here
    assert (outcome.folder / "t3" / MANIFEST).is_file()


def test_a_crash_in_the_scenario_still_removes_the_temporary_folder(
    tmpdir_here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(options: SmokeOptions, mediums: dict[str, Any], *, t3_root: Path, **_: Any) -> None:
        assert t3_root.parent.is_dir()  # made before the scenario starts
        raise RuntimeError("the node went away")

    monkeypatch.setattr(smoke, "run_smoke", crash)
    with pytest.raises(RuntimeError, match="the node went away"):
        _run(SmokeTargets())
    assert list(tmpdir_here.iterdir()) == []


def test_a_file_t4_gets_a_folder_of_its_own_and_loses_it(tmp_path: Path, t3_dir: Path) -> None:
    t4 = tmp_path / "t4"
    t4.mkdir()
    (t4 / "someone-elses.txt").write_text("x")
    during: list[str] = []
    outcome = _run(
        SmokeTargets(t3_dir=t3_dir, t4_url=f"file://{t4}"),
        progress=lambda step: during.extend(p.name for p in t4.iterdir() if step == "TTL expiry"),
    )
    assert _failed(outcome) == []
    assert sorted(during) == sorted([outcome.folder.name, "someone-elses.txt"])
    assert outcome.report.mediums["T4"].startswith(f"files under {t4 / outcome.folder.name} (")
    assert outcome.report.counters["hits_T4"] > 0
    assert [p.name for p in t4.iterdir()] == ["someone-elses.txt"]
    assert list(t3_dir.iterdir()) == []


@pytest.mark.torch
@pytest.mark.no_gpu
def test_with_cpu_torch_t1_is_cpu_tensors_standing_in_for_hbm(t3_dir: Path) -> None:
    import torch

    outcome = smoke_command(SMALL, SmokeTargets(t3_dir=t3_dir, io_threads=4), torch=torch,
                            s3_client=_no_s3)  # fmt: skip
    assert _failed(outcome) == []
    assert outcome.report.mediums["T1"] == (
        f"torch CPU tensors standing in for HBM (no GPU here: torch {torch.__version__}"
        " is a CPU-only build)"
    )
    # the pool T2 took is what the footprint counted for it, no power of two
    assert outcome.report.mediums["T2"] == (
        f"host pool (torch, not pinned: no CUDA) of {13 + 4} slots x {SMALL.chunk_bytes:,} B"
    )
    assert list(t3_dir.iterdir()) == []


def test_kv_sized_chunks_of_a_real_model_pass_under_eager_s3fifo(t3_dir: Path) -> None:
    options = smoke_options(resolve_shape("llama-3.1-8b"), chunk_tokens=16, posture="eager",
                            policy="s3fifo", io_threads=4)  # fmt: skip
    outcome = _run(SmokeTargets(t3_dir=t3_dir), options)
    assert _failed(outcome) == []
    demoted = outcome.report.steps[2]
    assert demoted.name == "idle demotion to T3"
    # eager: every chunk was on T3 already, so leaving T2 writes nothing there
    assert "T3" not in demoted.tiers
    assert "0 written" in demoted.detail
    assert list(t3_dir.iterdir()) == []


# --- two phases through the manifest -------------------------------------------------------------


def test_the_write_phase_keeps_the_shared_folder_and_the_manifests_chunks(t3_dir: Path) -> None:
    outcome = _run(SmokeTargets(t3_dir=t3_dir, phase="write"))
    assert _failed(outcome) == []
    assert [s.name for s in outcome.report.steps] == WRITE_STEPS
    assert (outcome.folder, outcome.phase, outcome.kept) == (t3_dir / SMOKE_FOLDER, "write", True)
    t3 = outcome.folder / "t3"
    manifest = json.loads((t3 / MANIFEST).read_text())
    assert len(manifest["keys"]) == 4
    for key in manifest["keys"]:  # session 0, on T3 for the other node, every byte as written
        assert _stored_payload(t3, key) == payload(key, SMALL.chunk_bytes)
    assert not list(t3.glob(f".{MANIFEST}.*"))  # written whole: no temporary left
    assert list((outcome.folder / "t4").glob("chunks/*/*/*.kv"))


def test_the_read_phase_checks_the_written_chunks_and_removes_the_folder(t3_dir: Path) -> None:
    _run(SmokeTargets(t3_dir=t3_dir, phase="write"))
    outcome = _run(SmokeTargets(t3_dir=t3_dir, phase="read"), None)
    (step,) = outcome.report.steps
    assert (step.name, step.status) == ("second node reads T3", "PASS")
    assert step.detail == "4 of 4 chunks hit from 4 T3, bytes equal"
    assert step.tiers["T3"]["read_bytes"] == 4 * SMALL.chunk_bytes
    assert outcome.report.passed
    assert sorted(outcome.report.mediums) == ["T1", "T2", "T3", "T4"]
    assert (outcome.phase, outcome.kept) == ("read", False)
    assert list(t3_dir.iterdir()) == []


def test_the_read_phase_with_keep_leaves_the_folder(t3_dir: Path) -> None:
    _run(SmokeTargets(t3_dir=t3_dir, phase="write"))
    outcome = _run(SmokeTargets(t3_dir=t3_dir, phase="read", keep=True), None)
    assert outcome.report.passed
    assert outcome.kept is True
    assert (t3_dir / SMOKE_FOLDER / "t3" / MANIFEST).is_file()


def test_a_linked_smoke_folder_is_replaced_by_write_and_refused_by_read(
    t3_dir: Path, tmp_path: Path
) -> None:
    """A ``kvtool-smoke`` link in the shared folder must not send writes, quarantines or the
    clean-up to where it points."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs.txt").write_text("keep")
    (t3_dir / SMOKE_FOLDER).symlink_to(outside)
    with pytest.raises(InputError, match=r"kvtool-smoke is a link to .*outside: the read phase"):
        _run(SmokeTargets(t3_dir=t3_dir, phase="read"), None)
    outcome = _run(SmokeTargets(t3_dir=t3_dir, phase="write"))
    assert _failed(outcome) == []
    assert not (t3_dir / SMOKE_FOLDER).is_symlink()
    assert (t3_dir / SMOKE_FOLDER / "t3" / MANIFEST).is_file()
    assert sorted(p.name for p in outside.iterdir()) == ["theirs.txt"]


def test_a_second_write_starts_from_a_fresh_folder(t3_dir: Path) -> None:
    _run(SmokeTargets(t3_dir=t3_dir, phase="write"))
    stale = t3_dir / SMOKE_FOLDER / "t3" / "stale.txt"
    stale.write_text("from the last run")
    outcome = _run(SmokeTargets(t3_dir=t3_dir, phase="write"))
    assert _failed(outcome) == []
    assert not stale.exists()
    assert (t3_dir / SMOKE_FOLDER / "t3" / MANIFEST).is_file()


def test_a_second_write_with_a_file_t4_starts_from_a_fresh_t4_too(
    tmp_path: Path, t3_dir: Path
) -> None:
    """The last write's T4 chunks used to be found as another node's and fail prefill."""
    t4 = tmp_path / "t4"
    t4.mkdir()
    targets = SmokeTargets(t3_dir=t3_dir, t4_url=f"file://{t4}", phase="write")
    assert _failed(_run(targets)) == []
    assert _failed(_run(targets)) == []


def test_a_read_that_finds_no_chunks_fails_and_still_removes_the_folder(t3_dir: Path) -> None:
    import shutil

    _run(SmokeTargets(t3_dir=t3_dir, phase="write"))
    shutil.rmtree(t3_dir / SMOKE_FOLDER / "t3" / "chunks")
    outcome = _run(SmokeTargets(t3_dir=t3_dir, phase="read"), None)
    (step,) = outcome.report.steps
    assert step.status == "FAIL"
    assert step.detail == "0 of 4 chunks hit, expected 4"
    assert outcome.report.passed is False
    assert list(t3_dir.iterdir()) == []


# --- the second node -----------------------------------------------------------------------------


def test_the_second_node_is_called_with_the_folder_once_the_manifest_is_there(
    t3_dir: Path,
) -> None:
    calls: list[tuple[Path, str, dict[str, Any]]] = []

    def second(base: Path, name: str) -> Step:
        calls.append((base, name, json.loads((base / name / "t3" / MANIFEST).read_text())))
        return Step("second node reads T3", "PASS", "read elsewhere", 123, 0.5, {})

    outcome = _run(SmokeTargets(t3_dir=t3_dir), second_node=second)
    assert [s.name for s in outcome.report.steps] == STEPS
    assert outcome.report.steps[5] == Step("second node reads T3", "PASS", "read elsewhere", 123,
                                           0.5, {})  # fmt: skip
    ((base, name, manifest),) = calls
    assert (base, name) == (t3_dir, outcome.folder.name)
    assert manifest["fingerprint"] == SMALL.fingerprint
    assert list(t3_dir.iterdir()) == []


def test_a_failing_second_node_fails_the_report(t3_dir: Path) -> None:
    outcome = _run(
        SmokeTargets(t3_dir=t3_dir),
        second_node=lambda base, name: Step("second node reads T3", "FAIL", "no", 0, 0.0, {}),
    )
    assert _failed(outcome) == [("second node reads T3", "no")]
    assert outcome.report.passed is False
    assert list(t3_dir.iterdir()) == []


def test_the_write_phase_does_not_call_the_second_node(t3_dir: Path) -> None:
    def second(base: Path, name: str) -> Step:
        raise AssertionError("the second node reads after --phase write, on its own")

    outcome = _run(SmokeTargets(t3_dir=t3_dir, phase="write"), second_node=second)
    assert _failed(outcome) == []


@pytest.mark.parametrize("shared", [True, False])
def test_a_second_engine_in_process_reads_the_first_ones_t3(
    shared: bool, t3_dir: Path, tmpdir_here: Path
) -> None:
    """The read phase as the second node (what the real second process runs), over the
    folder the first node is using: a --t3-dir, or the temporary one."""

    def second(base: Path, name: str) -> Step:
        reader = SmokeTargets(t3_dir=base, phase="read", folder_name=name, keep=True)
        return _run(reader, None).report.steps[0]

    outcome = _run(SmokeTargets(t3_dir=t3_dir if shared else None), second_node=second)
    assert _failed(outcome) == []
    assert outcome.report.steps[5].detail == "4 of 4 chunks hit from 4 T3, bytes equal"
    assert list(t3_dir.iterdir()) == []
    assert list(tmpdir_here.iterdir()) == []


def test_second_node_process_runs_the_read_phase_on_the_same_folder(tmp_path: Path) -> None:
    step = Step("second node reads T3", "PASS", "4 of 4 chunks hit", 262144, 0.01,
                {"T3": {"read_bytes": 262144.0}})  # fmt: skip
    argvs: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str, str]:
        argvs.append(argv)
        return 0, json.dumps({"passed": True, "steps": [step.to_json()]}), "a warning\n"

    second = second_node_process(io_threads=8, run=run)
    assert second(tmp_path, "kvtool-smoke-1-abcdef") == step
    assert argvs == [[
        sys.executable, "-m", "kvtool", "engine", "smoke", "--phase", "read",
        "--t3-dir", str(tmp_path), "--folder-name", "kvtool-smoke-1-abcdef", "--keep",
        "--json", "--io-threads", "8",
    ]]  # fmt: skip


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "reason"),
    [
        (2, "", "kvtool: error: no smoke manifest in /fsx/x\n",
         "kvtool: error: no smoke manifest in /fsx/x"),
        (1, "Traceback (most recent call last):\nValueError: boom\n", "", "ValueError: boom"),
        (137, "", "", "exit status 137"),
        (0, '{"passed": true}', "", '{"passed": true}'),
        (0, '{"steps": []}', "", '{"steps": []}'),
        (0, '{"steps": [{"name": "x"}]}', "oops\nlast line\n", "last line"),
        (0, "[1, 2]", "", "[1, 2]"),
    ],
)  # fmt: skip
def test_a_second_process_without_a_step_is_a_fail_with_its_last_line(
    tmp_path: Path, returncode: int, stdout: str, stderr: str, reason: str
) -> None:
    second = second_node_process(io_threads=4, run=lambda argv: (returncode, stdout, stderr))
    assert second(tmp_path, "kvtool-smoke") == Step(
        "second node reads T3", "FAIL", f"the second process: {reason}", 0, 0.0, {}
    )


def test_a_real_second_process_reads_the_first_nodes_t3(t3_dir: Path) -> None:
    def run(argv: list[str]) -> tuple[int, str, str]:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
        return done.returncode, done.stdout, done.stderr

    outcome = _run(SmokeTargets(t3_dir=t3_dir),
                   second_node=second_node_process(io_threads=2, run=run))  # fmt: skip
    assert _failed(outcome) == []
    second = outcome.report.steps[5]
    assert second.name == "second node reads T3"
    assert second.detail == "4 of 4 chunks hit from 4 T3, bytes equal"
    assert list(t3_dir.iterdir()) == []


# --- S3 as T4 (moto) -----------------------------------------------------------------------------


@pytest.fixture
def bucket(s3: tuple[str, object]) -> Iterator[str]:
    """The ``s3`` fixture's bucket; moto's state (which lives in this process and outlasts one
    server) emptied afterwards, so no object of these tests reaches another test."""
    import urllib.request

    endpoint, _server = s3
    yield "kv-t4"
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def _objects(bucket: str) -> list[str]:
    client: Any = s3_client()
    listing = client.list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_an_s3_t4_is_used_and_its_prefix_emptied(bucket: str, t3_dir: Path) -> None:
    client: Any = s3_client()
    client.put_object(Bucket=bucket, Key="kvtool/someone-elses.bin", Body=b"keep")
    before = _objects(bucket)
    assert "kvtool/someone-elses.bin" in before
    outcome = _run(SmokeTargets(t3_dir=t3_dir, t4_url=f"s3://{bucket}/kvtool"),
                   s3_client=s3_client)  # fmt: skip
    assert _failed(outcome) == []
    name = outcome.folder.name
    assert outcome.report.mediums["T4"] == f"S3 objects under s3://{bucket}/kvtool/{name} (boto3)"
    assert outcome.report.counters["hits_T4"] > 0
    assert _objects(bucket) == before
    assert list(t3_dir.iterdir()) == []


def test_keep_leaves_the_s3_objects_under_the_runs_prefix(bucket: str, t3_dir: Path) -> None:
    before = set(_objects(bucket))
    outcome = _run(SmokeTargets(t3_dir=t3_dir, t4_url=f"s3://{bucket}/kvtool/", keep=True),
                   s3_client=s3_client)  # fmt: skip
    assert _failed(outcome) == []
    left = set(_objects(bucket)) - before
    assert left
    prefix = f"kvtool/{outcome.folder.name}/"
    assert all(k.startswith(prefix) and k.endswith(".kv") for k in left)
