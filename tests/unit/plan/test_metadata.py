"""FSx for Lustre metadata: AUTOMATIC's Metadata IOPS by capacity, the values FSx provisions,
a metadata-bound plan sized and said, and the files a folder holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.plan.deployment import make_hardware, plan_contexts
from kvtool.plan.metadata import (
    FLAT_LMCACHE,
    GDS_LMCACHE,
    automatic_iops,
    check_iops,
    files_per_s,
    folder_layout,
    folders_needed,
    plan_metadata,
    provisionable,
)
from kvtool.profiles.load import load_node_profile, load_storage_profile

from .conftest import model, shape

FSX, S3 = load_storage_profile("fsx"), load_storage_profile("s3")
GIB = 2**30


@pytest.mark.parametrize(
    ("gib", "iops"),
    [(1_200, 1_500), (2_400, 3_000), (4_800, 6_000), (9_600, 6_000), (12_000, 12_000),
     (45_600, 12_000), (48_000, 24_000), (96_000, 48_000), (206_400, 96_000),
     (1_000_000, 192_000)],
)  # fmt: skip
def test_automatic_scales_with_the_capacity(gib: int, iops: int) -> None:
    assert automatic_iops(FSX, gib) == iops


def test_only_persistent_2_has_a_metadata_configuration() -> None:
    scratch = load_storage_profile("fsx-scratch2")
    assert automatic_iops(scratch, 24_000) == 0
    assert plan_metadata(scratch, 24_000, need_iops=1e6).mode == "none"
    assert "no metadata configuration" in (check_iops(scratch, 12_000) or "")


def test_provisioned_values_are_fsxs_own() -> None:
    assert [provisionable(FSX, n) for n in (1, 1_501, 6_000, 12_001, 191_999)] == [
        1_500, 3_000, 6_000, 24_000, 192_000,
    ]  # fmt: skip
    assert provisionable(FSX, 192_001) is None
    assert provisionable(FSX, float("inf")) is None
    assert check_iops(FSX, 36_000) is None
    assert "multiple of 12,000 up to 192,000" in (check_iops(FSX, 5_000) or "")
    assert check_iops(FSX, 204_000) is not None
    assert files_per_s(FSX, 12_000) == 12_000  # 2 opens or closes each, 2 a file


def test_the_plan_provisions_what_automatic_does_not_give() -> None:
    """Trn3 405B, tp 8 x pp 18: the 50K restore T3 is sized for opens 16 x 196 x 144 =
    451,584 files in the 20.84 s recompute takes (less 0.06 s of lookup and latency): 21,669
    Metadata IOPS; AUTOMATIC gives 12,000 at 24,000 GiB, so 24,000 are provisioned."""
    spec, _ = model("llama-3.1-405b")
    trn3 = make_hardware(load_node_profile("trn3-ultraserver"), FSX, S3)
    plan = plan_contexts(shape(spec), contexts=[200_000], sessions=100, hardware=trn3).plans[0]
    md = plan.t3_size.metadata
    assert plan.t3_size.goal_files == 16 * 196 * 144
    assert (md.mode, md.iops, md.automatic_iops) == ("USER_PROVISIONED", 24_000, 12_000)
    assert md.need_iops == pytest.approx(21_669, abs=1)
    t3 = next(p for p in plan.paths if p.tier == "T3")
    assert t3.requests.rate_per_s == 24_000
    assert plan.restores["T3"].rate_s == pytest.approx(16 * 782 * 144 / 24_000)
    (said,) = [n for n in plan.notes if n.startswith("metadata-bound")]
    assert said.startswith(
        "metadata-bound: the restore T3 is sized for (451,584 files a node, an open and a close"
        " each) needs 21,669 Metadata IOPS; AUTOMATIC gives 12,000 at 24,000 GiB: provision"
        " 24,000 (USER_PROVISIONED"
    )


def test_a_given_file_system_keeps_automatic_and_names_what_reaches_the_goal() -> None:
    spec, _ = model("llama-3.1-405b")
    for given, mode in ((None, "AUTOMATIC"), (12_000, "given")):
        trn3 = make_hardware(load_node_profile("trn3-ultraserver"), FSX, S3,
                             fsx_capacity_bytes=24_000 * GIB, metadata_iops=given)  # fmt: skip
        plan = plan_contexts(shape(spec), contexts=[200_000], sessions=100,
                             hardware=trn3).plans[0]  # fmt: skip
        assert (plan.t3_size.metadata.mode, plan.t3_size.metadata.iops) == (mode, 12_000)
        assert not plan.t3_size.goal_met
        (said,) = [n for n in plan.notes if n.startswith("metadata-bound")]
        assert said.endswith("short of it; --set metadata_iops=24000 (USER_PROVISIONED) reaches it")
        # 12,000 files a second: the 1,801,728 files of 200K take 150 s, recompute 134.9 s
        row = next(r for r in plan.break_even if r.ctx_tokens == 200_000)
        assert row.reload_s["T3"] > row.recompute_s


def test_metadata_iops_fsx_cannot_provision_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        make_hardware(load_node_profile("p5en"), FSX, S3, metadata_iops=5_000)
    assert caught.value.message == "--set metadata_iops 5,000 cannot be provisioned"


def test_a_flat_folder_past_100k_files_is_said_with_the_engines_own_fix() -> None:
    """Trn3 405B at 1M tokens x 500: 423 sessions on T3 of 3,907 chunks x 144 files."""
    spec, _ = model("llama-3.1-405b")
    trn3 = make_hardware(load_node_profile("trn3-ultraserver"), FSX, S3)
    plan = plan_contexts(shape(spec), contexts=[1_000_000], sessions=500,
                         hardware=trn3).plans[0]  # fmt: skip
    (said,) = [n for n in plan.notes if n.startswith("T3 holds")]
    files = 423 * 3_907 * 144
    assert said.startswith(f"T3 holds {files:,} files (423 sessions x 562,608 files each)")
    assert (
        f"{folders_needed(files):,} folders would hold them: LMCache's fs connector takes" in said
    )
    assert folders_needed(100_000) == 1
    assert folders_needed(100_001) == 2
    assert folder_layout("vllm", gds=False) is FLAT_LMCACHE
    assert folder_layout("lmcache", gds=True) is GDS_LMCACHE
    assert GDS_LMCACHE.folders == 10_000  # two levels of 2 decimal digits of an int hash
    assert folder_layout("dynamo", gds=False) is None


def test_a_given_value_is_taken_as_given_even_below_automatic() -> None:
    md = plan_metadata(FSX, 48_000, need_iops=1_000, given_iops=1_500)
    assert (md.iops, md.mode, md.automatic_iops, md.goal_met) == (1_500, "given", 24_000, True)


def test_a_file_system_without_a_metadata_configuration_says_so() -> None:
    spec, _ = model("llama-3.1-70b")
    p5en = make_hardware(load_node_profile("p5en"), load_storage_profile("fsx-scratch2"), S3)
    plan = plan_contexts(shape(spec), contexts=[128_000], sessions=100, hardware=p5en).plans[0]
    assert not plan.t3_size.metadata.modelled
    (said,) = [n for n in plan.notes if n.startswith("T3 metadata not modelled")]
    assert "fsx-lustre-scratch2 has no Metadata IOPS configuration" in said


DOC = " ".join((Path(__file__).parents[3] / "docs" / "planning.md").read_text().split())


def test_docs_planning_works_the_trn3_metadata_case_by_hand() -> None:
    """docs/planning.md's Trn3 405B case at 200K x 100, each figure by hand and from kvtool."""
    spec, _ = model("llama-3.1-405b")
    trn3 = make_hardware(load_node_profile("trn3-ultraserver"), FSX, S3)
    plan = plan_contexts(shape(spec), contexts=[200_000], sessions=100, hardware=trn3).plans[0]
    md = plan.t3_size.metadata
    files = 16 * -(-50_000 // 256) * 144  # 16 sessions x 196 chunks x 144 workers
    window = files / md.need_iops  # one node: files a second = Metadata IOPS
    assert (files, f"{window:.2f} s", f"{md.need_iops:,.0f}") == (451_584, "20.84 s", "21,669")
    assert f"{files:,} files in 20.84 s = **21,669 Metadata IOPS**" in DOC
    restore = 16 * -(-200_000 // 256) * 144  # 1,801,728 files
    assert plan.restores["T3"].rate_s == pytest.approx(restore / 24_000)
    assert f"{restore:,} / 24,000 = **{restore / 24_000:.2f} s**" in DOC  # 75.07 s
    assert f"on AUTOMATIC's 12,000 it would take {restore / 12_000:.2f} s" in DOC  # 150.14 s


def test_docs_planning_works_the_p5en_metadata_case_by_hand() -> None:
    """docs/planning.md's p5en 70B case at 128K x 1,000 on 8 nodes."""
    spec, _ = model("llama-3.1-70b")
    p5en = make_hardware(load_node_profile("p5en"), FSX, S3, nodes=8)
    plan = plan_contexts(shape(spec), contexts=[128_000], sessions=1_000, hardware=p5en).plans[0]
    md, fs = plan.t3_size.metadata, plan.t3_size.file_system
    files = 16 * -(-50_000 // 256) * 8  # 25,088 a node
    window = files * 8 / md.need_iops
    assert (fs.capacity_gib, md.mode, md.iops) == (43_200, "AUTOMATIC", 12_000)
    assert (
        f"{files:,} files a node in {window:.2f} s, x 8 nodes = **{md.need_iops:,.0f} Metadata"
        in DOC
    )
    assert round(md.need_iops) == 3_927
    restore = 16 * 500 * 8  # 64,000 files at 12,000 / 8 = 1,500 a second per node
    assert plan.restores["T3"].rate_s == pytest.approx(restore / 1_500)
    assert f"({restore:,} files) needs {restore / 1_500:.2f} s of metadata" in DOC  # 42.67 s
    t3_sessions = next(t.sessions for t in plan.tiers.tiers if t.name == "T3")
    held = t3_sessions * 500 * 8
    assert (t3_sessions, held, folders_needed(held)) == (513, 2_052_000, 21)
    assert (
        f"{t3_sessions} sessions x 500 chunks x 8 workers = {held:,} files on T3: 21 folders" in DOC
    )
