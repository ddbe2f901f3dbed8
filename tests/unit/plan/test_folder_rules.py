"""The folder rules doctor and check share: each status at its threshold, and what a folder
that was not read reports."""

from __future__ import annotations

from kvtool.findings import Finding
from kvtool.plan.folder_rules import FILES_PER_FOLDER, FolderFacts, folder_findings

GIB = 2**30
FULL = FolderFacts(
    path="/fsx/kv",
    chunk_files=1000,
    chunk_bytes=90 * GIB,
    temp_files=2,
    temp_bytes=GIB,
    unknown_files=3,
    unknown_bytes=GIB,
    engines=("LMCache",),
    layouts=2,
    model="meta-llama/Llama-3.1-70B",
    world=8,
    busiest_folder=".",
    busiest_files=1005,
    folders=1,
)


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def test_a_folder_not_read_skips_every_rule_and_says_why() -> None:
    found = folder_findings(None, cap=GIB, skipped="this snapshot holds no folder_contents.json")
    assert [f.id for f in found] == [
        "folder.contents", "folder.orphans", "folder.cap", "folder.files_per_dir",
    ]  # fmt: skip
    assert {f.status for f in found} == {"SKIP"}
    assert all("folder_contents.json" in f.message for f in found)


def test_an_empty_folder_passes_as_a_tier_before_its_first_write() -> None:
    found = by_id(folder_findings(FolderFacts(path="/fsx/kv", folders=1)))
    assert found["folder.contents"].status == "PASS"
    assert found["folder.contents"].message == "no KV files yet"
    assert found["folder.orphans"].status == "SKIP"  # no model given
    assert found["folder.cap"].status == "SKIP"


def test_sub_folders_that_could_not_be_listed_make_every_figure_low() -> None:
    found = by_id(folder_findings(FULL._replace(unreadable_folders=2)))
    assert found["folder.contents"].status == "WARN"
    assert "2 sub-folders could not be listed" in found["folder.contents"].message


def test_contents_name_every_kind_of_file() -> None:
    contents = by_id(folder_findings(FULL))["folder.contents"]
    assert contents.status == "PASS"
    assert contents.message == "92.0 GiB in 1 folder"  # chunks, temporaries and the rest
    assert "1,000 chunk files (90.0 GiB) in 2 layouts of LMCache" in contents.evidence
    assert "2 in-flight temporaries" in contents.evidence
    assert "3 files of no known layout" in contents.evidence


def test_orphans_warn_with_their_bytes_layouts_and_the_gc_that_removes_them() -> None:
    clean = by_id(folder_findings(FULL))["folder.orphans"]
    assert clean.status == "PASS"
    assert clean.message == "every layout is one meta-llama/Llama-3.1-70B over 8 ranks reads"
    orphaned = FULL._replace(
        orphan_files=500,
        orphan_bytes=45 * GIB,
        orphans=(
            "LMCache meta-llama/Llama-3.1-70B bf16 tp 4: another world size (4 ranks, not 8)",
        ),
    )
    found = by_id(folder_findings(orphaned))["folder.orphans"]
    assert found.status == "WARN"
    assert found.message.startswith("45.0 GiB in 500 files that meta-llama/Llama-3.1-70B over 8")
    assert "tp 4: another world size" in found.evidence
    assert "kvtool gc /fsx/kv --model" in found.fix
    world_only = by_id(folder_findings(FULL._replace(model="")))["folder.orphans"]
    assert world_only.message == "every layout is one 8 ranks reads"


def test_the_cap_counts_every_file_and_fails_only_past_it() -> None:
    def cap_status(cap: int) -> Finding:
        return by_id(folder_findings(FULL, cap=cap))["folder.cap"]

    assert FULL.total_bytes == 92 * GIB
    assert cap_status(92 * GIB).status == "WARN"  # at the cap: 100%, not past it
    over = cap_status(92 * GIB - 1)
    assert over.status == "FAIL"
    assert over.message == "over its cap by 1 B"
    assert "kvtool gc /fsx/kv --max-size" in over.fix
    assert cap_status(int(92 * GIB / 0.9) + 1).status == "PASS"  # just under 90%
    assert cap_status(int(92 * GIB / 0.9)).status == "WARN"
    assert cap_status(0).status == "FAIL"
    empty = folder_findings(FolderFacts(path="/fsx/kv"), cap=0)
    assert by_id(empty)["folder.cap"].status == "PASS"


def test_the_fullest_folder_warns_just_past_the_aws_guidance() -> None:
    at = by_id(folder_findings(FULL._replace(busiest_files=FILES_PER_FOLDER)))
    assert at["folder.files_per_dir"].status == "PASS"
    past = by_id(
        folder_findings(FULL._replace(busiest_files=FILES_PER_FOLDER + 1, busiest_folder="a/b"))
    )
    assert past["folder.files_per_dir"].status == "WARN"
    assert past["folder.files_per_dir"].evidence == "fullest: a/b (100,001 files)"
