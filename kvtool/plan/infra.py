"""Read an FSx for Lustre file system's settings from infrastructure code. Pure: dicts in.

* Terraform: the JSON of ``terraform show -json PLANFILE``; every ``aws_fsx_lustre_file_system``
  in ``planned_values`` (root and child modules), with the provider's argument names
  (``deployment_type``, ``storage_capacity``, ``per_unit_storage_throughput``, ``efa_enabled``,
  ``data_compression_type``, ``storage_type``).
* CloudFormation: a template's ``AWS::FSx::FileSystem`` resources with ``FileSystemType:
  LUSTRE`` (``StorageCapacity``, ``StorageType``, ``LustreConfiguration.DeploymentType``,
  ``PerUnitStorageThroughput``, ``DataCompressionType``, ``EfaEnabled``); intrinsic functions
  (``!Ref``) leave a value undeclared. ``AWS::FSx::DataRepositoryAssociation`` counts as the
  S3 association.
* Either way, an association's automatic export: Terraform's ``s3`` block,
  ``auto_export_policy`` ``events``; CloudFormation's ``S3.AutoExportPolicy.Events``. Any event
  on any association is auto-export on; associations with none, off; no association, undeclared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kvtool.errors import InputError
from kvtool.plan.workload import FsxSettings


def _int(value: Any, what: str, source: str) -> int | None:
    """An integer property; CloudFormation also takes numbers written as strings ("2400").
    InputError for one past any real file system (a typo, or a hostile file)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 15:
        value = int(value.strip())
    if not isinstance(value, int):
        return None
    if not 0 <= value < 10**12:
        raise InputError(f"{source}: {what} {str(value)[:20]} is not a real value", "fix the plan")
    return value


def _mapping(value: Any) -> Mapping[str, Any]:
    """A JSON object where one is expected; anything else reads as empty (undeclared)."""
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _modules(module: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield module
    for child in _list(module.get("child_modules")):
        if isinstance(child, Mapping):
            yield from _modules(child)


def fsx_from_terraform(
    plan: Mapping[str, Any], *, source: str, name: str | None = None
) -> FsxSettings:
    """The one ``aws_fsx_lustre_file_system`` in a Terraform plan (or the one called ``name``).

    Raises InputError when there is none, or several and no ``name``.
    """
    root = _mapping(_mapping(plan.get("planned_values")).get("root_module"))
    found = [
        r
        for module in _modules(root)
        for r in _list(module.get("resources"))
        if isinstance(r, Mapping) and r.get("type") == "aws_fsx_lustre_file_system"
    ]
    if name:
        found = [r for r in found if name in (r.get("name"), r.get("address"))]
    if not found:
        raise InputError(
            f"{source}: no aws_fsx_lustre_file_system in planned_values",
            "pass the JSON of terraform show -json PLANFILE",
        )
    if len(found) > 1:
        names = ", ".join(str(r.get("address")) for r in found)
        raise InputError(f"{source}: several FSx file systems ({names})", "keep one in the plan")
    values = _mapping(found[0].get("values"))
    dras = [
        _mapping(r.get("values"))
        for module in _modules(root)
        for r in _list(module.get("resources"))
        if isinstance(r, Mapping) and r.get("type") == "aws_fsx_data_repository_association"
    ]
    associations = bool(dras)
    events = [
        event
        for dra in dras
        for s3 in _list(dra.get("s3"))
        for policy in _list(_mapping(s3).get("auto_export_policy"))
        for event in _list(_mapping(policy).get("events"))
    ]
    return FsxSettings(
        deployment_type=_text(values.get("deployment_type")),
        storage_type=_text(values.get("storage_type")) or "SSD",
        storage_capacity_gib=_int(values.get("storage_capacity"), "storage_capacity", source),
        per_unit_storage_throughput=_int(
            values.get("per_unit_storage_throughput"), "per_unit_storage_throughput", source
        ),
        efa_enabled=bool(_bool(values.get("efa_enabled"))),  # absent = false, AWS's default
        data_compression_type=_text(values.get("data_compression_type")) or "NONE",
        s3_association=associations or None,
        auto_export=bool(events) if associations else None,
        source=f"{source} ({found[0].get('address')})",
    )


def fsx_from_cloudformation(template: Mapping[str, Any], *, source: str) -> FsxSettings:
    """The one Lustre ``AWS::FSx::FileSystem`` of a CloudFormation template."""
    resources = _mapping(template.get("Resources"))
    found = [
        (key, r)
        for key, r in resources.items()
        if isinstance(r, Mapping)
        and r.get("Type") == "AWS::FSx::FileSystem"
        and _mapping(r.get("Properties")).get("FileSystemType") == "LUSTRE"
    ]
    if not found:
        raise InputError(f"{source}: no AWS::FSx::FileSystem of type LUSTRE in Resources")
    if len(found) > 1:
        raise InputError(
            f"{source}: several Lustre file systems ({', '.join(k for k, _ in found)})"
        )
    key, resource = found[0]
    props = _mapping(resource.get("Properties"))
    lustre = _mapping(props.get("LustreConfiguration"))
    dras = [
        _mapping(r.get("Properties"))
        for r in resources.values()
        if isinstance(r, Mapping) and r.get("Type") == "AWS::FSx::DataRepositoryAssociation"
    ]
    associations = bool(dras)
    events = [
        event
        for dra in dras
        for event in _list(_mapping(_mapping(dra.get("S3")).get("AutoExportPolicy")).get("Events"))
    ]
    return FsxSettings(
        deployment_type=_text(lustre.get("DeploymentType")),
        storage_type=_text(props.get("StorageType")) or "SSD",
        storage_capacity_gib=_int(props.get("StorageCapacity"), "StorageCapacity", source),
        per_unit_storage_throughput=_int(
            lustre.get("PerUnitStorageThroughput"), "PerUnitStorageThroughput", source
        ),
        efa_enabled=bool(_bool(lustre.get("EfaEnabled"))),  # absent = false, AWS's default
        data_compression_type=_text(lustre.get("DataCompressionType")) or "NONE",
        s3_association=associations or None,
        auto_export=bool(events) if associations else None,
        source=f"{source} ({key})",
    )


def overlay(base: FsxSettings, declared: FsxSettings | None) -> FsxSettings:
    """Settings read from infrastructure code, with what the plan file states on top (the
    mount options, stripe count and AZ exist only there)."""
    if declared is None:
        return base
    merged = {
        field: getattr(declared, field) if getattr(declared, field) is not None else value
        for field, value in base._asdict().items()
        if field != "source"
    }
    return FsxSettings(**merged, source=base.source)
