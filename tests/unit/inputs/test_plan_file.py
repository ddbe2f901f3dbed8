"""The front door's plan file: a kvtool check PLAN.yaml and everything it names (Terraform,
CloudFormation, bench and doctor JSON, relative to the plan's folder), resolved once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.plan_file import read_plan

EXAMPLES = Path(__file__).parents[3] / "examples" / "check"


def test_the_passing_example_resolves_everything_it_names() -> None:
    inputs = read_plan(EXAMPLES / "plan-pass.yaml")
    assert inputs.shape.spec.name == "llama-3.1-70b"
    assert not inputs.shape.tp_given  # the planner chooses the layout
    assert inputs.hardware.nodes == 8
    assert inputs.hardware.t3.name == "fsx-lustre-persistent2"
    assert inputs.hardware.fsx_capacity_bytes is None  # graded by the checklist, not here
    fsx = inputs.plan.fsx
    assert fsx is not None
    assert fsx.deployment_type == "PERSISTENT_2"  # from the Terraform plan
    assert fsx.mount_options == ("relatime", "flock")  # from the plan file itself
    (t3,) = inputs.evidence.measured
    assert t3.bytes_per_s == 5.6e9
    assert len(inputs.evidence.doctor) == 1


def test_cloudformation_sets_the_t3_profile_of_its_deployment_type() -> None:
    inputs = read_plan(EXAMPLES / "plan-fail.yaml")
    assert inputs.plan.fsx is not None
    assert inputs.plan.fsx.deployment_type == "SCRATCH_2"
    assert inputs.hardware.t3.name == "fsx-lustre-scratch2"


def test_a_named_file_that_is_missing_is_one_line(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "plan-pass.yaml", tmp_path / "plan.yaml")
    with pytest.raises(InputError, match=r"terraform-plan\.json"):
        read_plan(tmp_path / "plan.yaml")


def test_the_plans_kv_dtype_and_tp_reach_the_shape(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("model: llama-3.1-8b\nhardware: p5en\nkv_dtype: fp8\ntp: 2\n")
    inputs = read_plan(plan)
    assert (inputs.shape.fmt.name, inputs.shape.tp, inputs.shape.tp_given) == ("fp8_e4m3", 2, True)
    assert inputs.plan.fsx is None
    assert inputs.evidence.measured == ()


def _plan_with_folder(tmp_path: Path, extra: str) -> Path:
    for name in ("terraform-plan.json", "bench-t3.json", "doctor-node-a.json"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    text = (EXAMPLES / "plan-pass.yaml").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith(("t3_", "max_size")))
    plan = tmp_path / "plan.yaml"
    plan.write_text(text + "\n" + extra)
    return plan


def test_t3_dir_is_read_relative_to_the_plan_with_the_plans_tp(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "kvcache", tmp_path / "kv")
    inputs = read_plan(_plan_with_folder(tmp_path, "t3_dir: kv\ntp: 4\n"))
    folder = inputs.evidence.folder
    assert folder is not None
    assert (folder.chunk_files, folder.chunk_bytes) == (16, 16 * 4096)
    assert folder.world == 4
    assert folder.orphan_files == 16  # LMCache's files say world 8
    assert inputs.plan.max_size is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("t3_dir: nope\n", "t3_dir nope does not exist here"),
        ("t3_dir: bench-t3.json\n", "t3_dir bench-t3.json is a file, not a folder"),
    ],
)
def test_a_t3_dir_that_is_not_a_folder_here_is_one_line(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        read_plan(_plan_with_folder(tmp_path, extra))
