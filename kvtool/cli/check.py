"""``kvtool check PLAN.yaml``: the pre-deployment checklist, for CI."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer

from kvtool.cli import status

if TYPE_CHECKING:
    from kvtool.model.engines import EngineRules
    from kvtool.model.formats import KvFormat
    from kvtool.model.spec import ModelSpec
    from kvtool.plan.checklist import Evidence
    from kvtool.plan.workload import PlanFile
    from kvtool.profiles.hardware import NodeProfile, StorageProfile


def check(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.yaml", help="The deployment plan.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    junit: Annotated[
        Path | None, typer.Option("--junit", metavar="FILE", help="Also write JUnit XML.")
    ] = None,
) -> int:
    """Check a deployment plan before it ships (the pre-deployment checklist, for CI).

    Rules: capacity, tiers, the FSx checklist, bandwidth, measured results. Exit status: 0
    nothing FAILs, 1 something FAILs, 2 bad input.

    The plan is a kvtool advise workload file plus fsx:, t3_path, io_threads, odirect, posture,
    measured: and tolerance (docs/ci.md).

    Examples:

      kvtool check examples/plan-pass.yaml

      kvtool check examples/plan-fail.yaml --junit kvtool-check.xml
    """
    from kvtool.cli.render import doctor as render
    from kvtool.cli.render.text import print_json
    from kvtool.findings import Report, junit_xml
    from kvtool.plan.checklist import check_plan

    inputs = _load(plan_file)
    findings = check_plan(
        *inputs.args, rules=inputs.rules, fmt=inputs.fmt, evidence=inputs.evidence
    )
    report = Report(path=str(plan_file), node="plan", findings=tuple(findings))
    if junit is not None:
        from kvtool.cli.doctor import _write

        _write(junit, junit_xml(f"kvtool check {plan_file}", report.findings))
    if as_json:
        print_json(report.to_json())
    else:
        render.print_report(report, title=f"kvtool check {plan_file}")
    return status.PROBLEMS if report.failed else status.OK


class _Inputs(NamedTuple):
    args: "tuple[PlanFile, ModelSpec, NodeProfile, StorageProfile]"
    rules: "EngineRules"
    fmt: "KvFormat"
    evidence: "Evidence"


def _load(plan_file: Path) -> _Inputs:
    """Read the plan and everything it names (infrastructure code, bench and doctor JSON,
    relative to the plan's folder); resolve the model and profiles."""
    from kvtool.errors import InputError
    from kvtool.files import read_json_object, read_yaml_mapping
    from kvtool.model.engines import get_engine
    from kvtool.model.formats import resolve_format
    from kvtool.plan.checklist import Evidence, t3_profile_for
    from kvtool.plan.infra import fsx_from_cloudformation, fsx_from_terraform, overlay
    from kvtool.plan.workload import plan_from_mapping
    from kvtool.profiles.load import load_node_profile, load_storage_profile
    from kvtool.profiles.resolve import resolve_model

    source = str(plan_file)
    plan = plan_from_mapping(read_yaml_mapping(plan_file, what="plan file"), source=source)
    folder = plan_file.parent
    fsx = plan.fsx
    if plan.terraform:
        path = folder / plan.terraform
        fsx = overlay(
            fsx_from_terraform(read_json_object(path, what="Terraform plan"), source=str(path)), fsx
        )
    if plan.cloudformation:
        path = folder / plan.cloudformation
        fsx = overlay(fsx_from_cloudformation(_read_template(path), source=str(path)), fsx)
    plan = plan._replace(fsx=fsx)
    bench = None
    if plan.measured.bench:
        bench = read_json_object(folder / plan.measured.bench, what="kvtool bench --json report")
    failures = []
    for name in plan.measured.doctor:
        data = read_json_object(folder / name, what="kvtool doctor --json report")
        if not isinstance(data.get("findings"), list):
            raise InputError(f"{folder / name}: not a kvtool doctor --json report")
        fails = tuple(str(f.get("id")) for f in data["findings"] if f.get("status") == "FAIL")
        failures.append((str(data.get("node", name)), fails))
    spec = resolve_model(plan.workload.model).spec
    return _Inputs(
        args=(
            plan,
            spec,
            load_node_profile(plan.workload.hardware),
            load_storage_profile(t3_profile_for(fsx)),
        ),
        rules=get_engine(plan.workload.engine),
        fmt=resolve_format(plan.workload.kv_dtype, spec.dtype),
        evidence=Evidence(bench=bench, doctor_failures=tuple(failures)),
    )


def _read_template(path: Path) -> dict[str, Any]:
    """A CloudFormation template in YAML or JSON; intrinsic-function tags (!Ref, !Sub,
    !GetAtt...) read as plain values, so a property set by one counts as undeclared."""
    import yaml

    from kvtool.errors import InputError
    from kvtool.files import read_text

    class Loader(yaml.SafeLoader):
        pass

    def any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> object:
        return {"Fn": suffix}

    Loader.add_multi_constructor("!", any_tag)
    text = read_text(path, what="CloudFormation template")
    try:
        data = yaml.load(text, Loader=Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"{path}: malformed YAML{where}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a CloudFormation template must be a mapping")
    return data
