"""FSx for Lustre settings read from infrastructure code: a Terraform plan's JSON, a
CloudFormation template, and the plan file's own ``fsx:`` laid on top."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import InputError
from kvtool.files import read_yaml_mapping
from kvtool.plan.infra import fsx_from_cloudformation, fsx_from_terraform, overlay
from kvtool.plan.workload import FsxSettings, plan_from_mapping

EXAMPLES = Path(__file__).parents[3] / "examples" / "check"
TERRAFORM: dict[str, Any] = json.loads((EXAMPLES / "terraform-plan.json").read_text())
FS_ADDRESS = "module.kv_tier.aws_fsx_lustre_file_system.kv"


def cloudformation_example() -> dict[str, Any]:
    return read_yaml_mapping(
        EXAMPLES / "cloudformation-fsx.yaml", what="CloudFormation template", tags_as_values=True
    )


def terraform_resources(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"planned_values": {"root_module": {"resources": list(resources)}}}


def lustre(address: str, **values: Any) -> dict[str, Any]:
    return {
        "address": address,
        "type": "aws_fsx_lustre_file_system",
        "name": address.rsplit(".", 1)[-1],
        "values": values,
    }


def cfn_lustre(**properties: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::FSx::FileSystem",
        "Properties": {"FileSystemType": "LUSTRE", **properties},
    }


# --- Terraform --------------------------------------------------------------------------------


def test_the_example_terraform_plan_is_read_from_its_child_module() -> None:
    fsx = fsx_from_terraform(TERRAFORM, source="terraform-plan.json")
    assert fsx == FsxSettings(
        deployment_type="PERSISTENT_2",
        storage_type="SSD",
        storage_capacity_gib=48_000,
        per_unit_storage_throughput=1000,
        efa_enabled=True,
        data_compression_type="NONE",
        s3_association=True,  # module.kv_tier.aws_fsx_data_repository_association.kv
        auto_export=True,  # its s3 block's auto_export_policy: NEW, CHANGED, DELETED
        source=f"terraform-plan.json ({FS_ADDRESS})",
    )
    # what only the plan file states is left undeclared
    assert (fsx.mount_options, fsx.stripe_count, fsx.same_az) == (None, None, None)


def test_absent_provider_arguments_take_awss_defaults_and_no_association_is_undeclared() -> None:
    plan = terraform_resources(lustre("aws_fsx_lustre_file_system.kv", deployment_type="SCRATCH_2"))
    fsx = fsx_from_terraform(plan, source="t.json")
    assert fsx.storage_type == "SSD"
    assert fsx.data_compression_type == "NONE"
    assert fsx.efa_enabled is False
    assert fsx.storage_capacity_gib is None
    assert fsx.per_unit_storage_throughput is None
    assert fsx.s3_association is None
    assert fsx.source == "t.json (aws_fsx_lustre_file_system.kv)"


def test_values_of_the_wrong_type_count_as_undeclared() -> None:
    fs = lustre(
        "aws_fsx_lustre_file_system.kv",
        storage_capacity=True,  # a bool is not a capacity
        per_unit_storage_throughput=1000.0,  # nor is a float
        deployment_type=["PERSISTENT_2"],
        efa_enabled="maybe",
    )
    fsx = fsx_from_terraform(terraform_resources(fs), source="t.json")
    assert (fsx.storage_capacity_gib, fsx.per_unit_storage_throughput) == (None, None)
    assert fsx.deployment_type is None
    assert fsx.efa_enabled is False


@pytest.mark.parametrize(("text", "enabled"), [("true", True), ("TRUE", True), ("false", False)])
def test_efa_enabled_as_a_string_is_read(text: str, enabled: bool) -> None:
    plan = terraform_resources(lustre("aws_fsx_lustre_file_system.kv", efa_enabled=text))
    assert fsx_from_terraform(plan, source="t").efa_enabled is enabled


def test_child_modules_are_searched_at_any_depth() -> None:
    deep = {
        "planned_values": {
            "root_module": {
                "child_modules": [
                    {
                        "address": "module.a",
                        "child_modules": [
                            {
                                "address": "module.a.module.b",
                                "resources": [
                                    lustre(
                                        "module.a.module.b.aws_fsx_lustre_file_system.kv",
                                        storage_capacity=2400,
                                    )
                                ],
                            }
                        ],
                    }
                ]
            }
        }
    }
    fsx = fsx_from_terraform(deep, source="t")
    assert fsx.storage_capacity_gib == 2400
    assert fsx.source == "t (module.a.module.b.aws_fsx_lustre_file_system.kv)"


def test_an_association_anywhere_in_the_plan_counts() -> None:
    plan = copy.deepcopy(TERRAFORM)
    child = plan["planned_values"]["root_module"]["child_modules"][0]
    association = child["resources"].pop(1)
    assert association["type"] == "aws_fsx_data_repository_association"
    assert fsx_from_terraform(plan, source="t").s3_association is None
    plan["planned_values"]["root_module"]["resources"] = [association]  # moved to the root
    assert fsx_from_terraform(plan, source="t").s3_association is True


def test_several_file_systems_need_a_name_and_the_error_lists_them() -> None:
    plan = terraform_resources(
        lustre("aws_fsx_lustre_file_system.kv", storage_capacity=48_000),
        lustre("aws_fsx_lustre_file_system.scratch", storage_capacity=1200),
    )
    with pytest.raises(InputError) as info:
        fsx_from_terraform(plan, source="t.json")
    assert info.value.message == (
        "t.json: several FSx file systems (aws_fsx_lustre_file_system.kv,"
        " aws_fsx_lustre_file_system.scratch)"
    )
    assert info.value.hint == "keep one in the plan"
    by_name = fsx_from_terraform(plan, source="t.json", name="scratch")
    assert by_name.storage_capacity_gib == 1200
    by_address = fsx_from_terraform(plan, source="t.json", name="aws_fsx_lustre_file_system.kv")
    assert by_address.storage_capacity_gib == 48_000


@pytest.mark.parametrize(
    "plan",
    [
        {},
        {"planned_values": {}},
        {"planned_values": {"root_module": {}}},
        terraform_resources({"type": "aws_fsx_ontap_file_system", "values": {}}),
        TERRAFORM,  # with a name that matches nothing
    ],
)
def test_no_lustre_file_system_is_an_input_error_naming_the_source(plan: dict[str, Any]) -> None:
    with pytest.raises(InputError) as info:
        fsx_from_terraform(plan, source="tf.json", name="other" if plan is TERRAFORM else None)
    assert info.value.message == "tf.json: no aws_fsx_lustre_file_system in planned_values"
    assert info.value.hint == "pass the JSON of terraform show -json PLANFILE"


# --- CloudFormation ---------------------------------------------------------------------------


def test_the_example_template_is_read_with_its_intrinsic_functions() -> None:
    fsx = fsx_from_cloudformation(cloudformation_example(), source="cloudformation-fsx.yaml")
    assert fsx == FsxSettings(
        deployment_type="SCRATCH_2",
        storage_type="SSD",
        storage_capacity_gib=2400,
        per_unit_storage_throughput=None,
        efa_enabled=False,  # absent: AWS's default
        data_compression_type="LZ4",
        s3_association=None,
        source="cloudformation-fsx.yaml (KvFileSystem)",
    )


def test_a_property_set_by_an_intrinsic_function_is_undeclared() -> None:
    template = {
        "Resources": {
            "Fs": cfn_lustre(
                StorageCapacity={"Fn": "Ref"},
                StorageType={"Fn": "If"},
                LustreConfiguration={
                    "DeploymentType": {"Fn": "Sub"},
                    "PerUnitStorageThroughput": {"Fn": "Ref"},
                    "EfaEnabled": {"Fn": "Ref"},
                },
            )
        }
    }
    fsx = fsx_from_cloudformation(template, source="c")
    assert (fsx.storage_capacity_gib, fsx.per_unit_storage_throughput) == (None, None)
    assert fsx.deployment_type is None
    assert (fsx.storage_type, fsx.efa_enabled) == ("SSD", False)


def test_every_lustre_property_is_read_and_an_association_counts() -> None:
    template = {
        "Resources": {
            "Kv": cfn_lustre(
                StorageCapacity=48_000,
                StorageType="SSD",
                LustreConfiguration={
                    "DeploymentType": "PERSISTENT_2",
                    "PerUnitStorageThroughput": 1000,
                    "DataCompressionType": "NONE",
                    "EfaEnabled": True,
                },
            ),
            "Export": {"Type": "AWS::FSx::DataRepositoryAssociation", "Properties": {}},
            "Bucket": {"Type": "AWS::S3::Bucket"},
        }
    }
    fsx = fsx_from_cloudformation(template, source="t.yaml")
    assert fsx == FsxSettings(
        deployment_type="PERSISTENT_2",
        storage_type="SSD",
        storage_capacity_gib=48_000,
        per_unit_storage_throughput=1000,
        efa_enabled=True,
        data_compression_type="NONE",
        s3_association=True,
        auto_export=False,  # an association with no AutoExportPolicy
        source="t.yaml (Kv)",
    )


def test_an_associations_automatic_export_is_read_from_terraform_and_cloudformation() -> None:
    """Any export event on an association is auto-export on; none, off; no association,
    undeclared (what fsx.s3_association judges against the plan's release)."""
    fs = lustre("aws_fsx_lustre_file_system.kv", deployment_type="PERSISTENT_2")

    def dra(events: list[str] | None) -> dict[str, Any]:
        policy = [] if events is None else [{"events": events}]
        s3 = [{"auto_export_policy": policy, "auto_import_policy": []}]
        return {"address": "aws_fsx_data_repository_association.kv",
                "type": "aws_fsx_data_repository_association", "name": "kv",
                "values": {"s3": s3}}  # fmt: skip

    def tf(*resources: dict[str, Any]) -> bool | None:
        return fsx_from_terraform(terraform_resources(fs, *resources), source="t").auto_export

    assert tf(dra(["NEW", "CHANGED"])) is True
    assert tf(dra(None)) is False
    assert tf(dra(None), dra(["DELETED"])) is True
    assert tf() is None

    def cfn(s3: dict[str, Any] | None) -> bool | None:
        resources: dict[str, Any] = {"Kv": cfn_lustre(StorageCapacity=1200)}
        if s3 is not None:
            resources["Export"] = {"Type": "AWS::FSx::DataRepositoryAssociation",
                                   "Properties": {"S3": s3}}  # fmt: skip
        return fsx_from_cloudformation({"Resources": resources}, source="t").auto_export

    assert cfn({"AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}) is True
    assert cfn({"AutoExportPolicy": {"Events": []}}) is False
    assert cfn({"AutoImportPolicy": {"Events": ["NEW"]}}) is False
    assert cfn(None) is None


def test_file_systems_that_are_not_lustre_are_ignored() -> None:
    ontap = {"Type": "AWS::FSx::FileSystem", "Properties": {"FileSystemType": "ONTAP"}}
    template = {"Resources": {"Ontap": ontap, "Kv": cfn_lustre(StorageCapacity=1200)}}
    assert fsx_from_cloudformation(template, source="t").storage_capacity_gib == 1200
    with pytest.raises(InputError) as info:
        fsx_from_cloudformation({"Resources": {"Ontap": ontap}}, source="t.yaml")
    assert info.value.message == "t.yaml: no AWS::FSx::FileSystem of type LUSTRE in Resources"
    with pytest.raises(InputError, match=r"^t\.yaml: no AWS::FSx::FileSystem"):
        fsx_from_cloudformation({}, source="t.yaml")


def test_several_lustre_file_systems_in_a_template_are_named() -> None:
    template = {"Resources": {"A": cfn_lustre(), "B": cfn_lustre()}}
    with pytest.raises(InputError) as info:
        fsx_from_cloudformation(template, source="t.yaml")
    assert info.value.message == "t.yaml: several Lustre file systems (A, B)"


# --- overlay ----------------------------------------------------------------------------------


def test_the_plan_file_states_what_only_it_knows_on_top_of_terraform() -> None:
    base = fsx_from_terraform(TERRAFORM, source="terraform-plan.json")
    data = read_yaml_mapping(EXAMPLES / "plan-pass.yaml")
    declared = plan_from_mapping(data, source="plan-pass.yaml").fsx
    assert declared is not None
    merged = overlay(base, declared)
    assert merged == base._replace(
        mount_options=("relatime", "flock"), stripe_count=-1, same_az=True
    )
    assert merged.source == f"terraform-plan.json ({FS_ADDRESS})"  # where the resource came from


def test_a_setting_the_plan_states_wins_over_the_infrastructure_code() -> None:
    base = fsx_from_cloudformation(cloudformation_example(), source="cf.yaml")
    declared = FsxSettings(
        deployment_type="PERSISTENT_2", efa_enabled=True, s3_association=False, source="plan.yaml"
    )
    merged = overlay(base, declared)
    assert (merged.deployment_type, merged.efa_enabled, merged.s3_association) == (
        "PERSISTENT_2",
        True,
        False,
    )
    assert merged.storage_capacity_gib == 2400  # not stated in the plan: the template's
    assert merged.data_compression_type == "LZ4"
    assert merged.source == "cf.yaml (KvFileSystem)"
    # False is a statement, not an absence
    assert overlay(base._replace(efa_enabled=True), FsxSettings(efa_enabled=False)).efa_enabled is (
        False
    )


def test_overlay_without_a_plan_fsx_is_the_base() -> None:
    base = fsx_from_terraform(TERRAFORM, source="t")
    assert overlay(base, None) is base
    assert overlay(base, FsxSettings(source="plan.yaml")) == base


def test_cloudformation_numbers_written_as_strings_are_read() -> None:
    """CloudFormation takes "2400" for an Integer; it used to count as undeclared, so the size
    rule skipped and T3 was sized to fit."""
    template = {
        "Resources": {
            "Kv": cfn_lustre(
                StorageCapacity="2400", LustreConfiguration={"PerUnitStorageThroughput": "1000"}
            )
        }
    }
    fsx = fsx_from_cloudformation(template, source="t.yaml")
    assert (fsx.storage_capacity_gib, fsx.per_unit_storage_throughput) == (2400, 1000)
