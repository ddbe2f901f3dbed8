"""A deployment plan file (``kvtool check PLAN.yaml``) and everything it names, resolved: the
infrastructure code its ``fsx:`` is read from, the model, the cluster, and the measured
evidence, each relative to the plan's folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kvtool.files import read_json_object, read_yaml_mapping

if TYPE_CHECKING:
    from kvtool.model.shape import KvShape
    from kvtool.plan.checklist import Evidence
    from kvtool.plan.deployment import Hardware
    from kvtool.plan.folder_rules import FolderFacts
    from kvtool.plan.measured import MeasuredTier
    from kvtool.plan.workload import PlanFile
    from kvtool.profiles.resolve import ResolvedModel


class CheckInputs(NamedTuple):
    """What ``check_plan`` takes: the plan (its ``fsx:`` laid over the infrastructure code),
    the model's shape, the cluster (no file system size yet: the checklist grades it), and
    what was measured."""

    plan: PlanFile
    shape: KvShape
    hardware: Hardware
    evidence: Evidence
    notes: tuple[str, ...] = ()  # old keys read, each with its new name


def read_plan(plan_file: Path) -> CheckInputs:
    """Read the plan and resolve everything it names; one InputError for anything wrong."""
    from kvtool.inputs.evidence import read_bench, read_doctor_report
    from kvtool.inputs.shape import resolve_shape
    from kvtool.plan.checklist import Evidence, t3_profile_for
    from kvtool.plan.deployment import make_hardware
    from kvtool.plan.infra import fsx_from_cloudformation, fsx_from_terraform, overlay
    from kvtool.plan.workload import plan_from_mapping, renamed_keys
    from kvtool.profiles.load import load_node_profile, load_storage_profile
    from kvtool.profiles.resolve import resolve_model

    source = str(plan_file)
    data, notes = renamed_keys(read_yaml_mapping(plan_file, what="plan file"), source=source)
    plan = plan_from_mapping(data, source=source)
    folder = plan_file.parent
    fsx = plan.fsx
    if plan.terraform:
        path = folder / plan.terraform
        fsx = overlay(
            fsx_from_terraform(read_json_object(path, what="Terraform plan"), source=str(path)), fsx
        )
    if plan.cloudformation:
        path = folder / plan.cloudformation
        template = read_yaml_mapping(path, what="CloudFormation template", tags_as_values=True)
        fsx = overlay(fsx_from_cloudformation(template, source=str(path)), fsx)
    plan = plan._replace(fsx=fsx)
    w = plan.workload
    # the size and throughput stay out: the checklist grades whether FSx can provision them
    hardware = make_hardware(
        load_node_profile(w.hardware),
        load_storage_profile(t3_profile_for(fsx)),
        load_storage_profile("s3-standard"),
        nodes=w.nodes,
        t3_path=plan.t3_path,
    )
    measured: tuple[MeasuredTier, ...] = ()
    if plan.measured.bench:
        bench = read_bench(folder / plan.measured.bench)
        measured = bench.measured(chips=hardware.node.chips)
    doctor = tuple(read_doctor_report(folder / name) for name in plan.measured.doctor)
    resolved = resolve_model(w.model)
    shape = resolve_shape(resolved, engine=w.engine, kv_dtype=w.kv_dtype, tp=w.tp)
    contents: FolderFacts | None = None
    why = ""
    if plan.t3_dir is not None:
        contents, why = _read_t3_dir(plan, plan_file, resolved, shape)
    return CheckInputs(
        plan=plan,
        shape=shape,
        hardware=hardware,
        evidence=Evidence(measured=measured, doctor=doctor, folder=contents, folder_skipped=why),
        notes=notes,
    )


def _read_t3_dir(
    plan: PlanFile, plan_file: Path, resolved: ResolvedModel, shape: KvShape
) -> tuple[FolderFacts | None, str]:
    """The plan's ``t3_dir`` (relative to the plan's folder), read as ``kvtool inspect``
    reads it; its orphans judged by the model's Hub names and the plan's tp when it gives
    one (a tp kvtool chose is not the deployment's)."""
    import os

    from kvtool.doctor.folder import FolderAsk, folder_facts
    from kvtool.errors import InputError
    from kvtool.inputs.folders import model_names
    from kvtool.probe.host import LocalHost

    assert plan.t3_dir is not None
    path = plan_file.parent / os.path.expanduser(plan.t3_dir)
    where = f"{plan_file}: t3_dir {plan.t3_dir}"
    if not path.exists():
        raise InputError(
            f"{where} does not exist here",
            "run kvtool check where the folder is mounted, or drop t3_dir and name a doctor"
            " report recorded there in measured.doctor",
        )
    if not path.is_dir():
        raise InputError(f"{where} is a file, not a folder", "name the KV folder")
    names = () if resolved.origin == "file" else model_names(plan.workload.model, resolved=resolved)
    ask = FolderAsk(
        models=names or (),
        world=shape.tp if shape.tp_given else None,
        mla=resolved.spec.is_mla,
    )
    return folder_facts(LocalHost(), str(path), ask)
