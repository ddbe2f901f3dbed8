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
