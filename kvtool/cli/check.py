"""``kvtool check PLAN.yaml``: the pre-deployment checklist, for CI."""

from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli import status
from kvtool.cli.render.text import note as say_note


def check(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.yaml", help="The deployment plan.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    junit: Annotated[
        Path | None, typer.Option("--junit", metavar="FILE", help="Also write JUnit XML.")
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="A WARN fails too: exit 1, and a <failure> in --junit's report."
        ),
    ] = False,
) -> int:
    """Check a deployment plan before it ships (the pre-deployment checklist, for CI).

    Rules: capacity, tiers, the FSx checklist, bandwidth, measured results. Exit status: 0
    nothing FAILs, 1 something FAILs (or, with --strict, WARNs), 2 bad input.

    The plan is a kvtool advise workload file plus fsx:, t3_path, io_threads, odirect, posture,
    measured: and tolerance (docs/ci.md).

    Examples:

      kvtool check examples/check/plan-pass.yaml

      kvtool check examples/check/plan-fail.yaml --junit kvtool-check.xml

      kvtool check examples/check/plan-pass.yaml --strict
    """
    from kvtool.cli.render import doctor as render
    from kvtool.cli.render.text import print_json
    from kvtool.files import output_file, write_text
    from kvtool.findings import Report, junit_xml
    from kvtool.inputs.plan_file import read_plan
    from kvtool.plan.checklist import check_plan

    if junit is not None:
        output_file(junit, option="--junit")  # before any work, not after it
    inputs = read_plan(plan_file)
    for note in inputs.notes:
        say_note(f"{note}")
    findings = check_plan(inputs.plan, inputs.shape, inputs.hardware, evidence=inputs.evidence)
    report = Report(path=str(plan_file), node="plan", findings=tuple(findings))
    if junit is not None:
        write_text(junit, junit_xml(f"kvtool check {plan_file}", report.findings, strict=strict))
    if as_json:
        print_json({**report.to_json(), "strict": strict}, command="check")
    else:
        render.print_report(report, title=f"kvtool check {plan_file}", strict=strict)
    return status.PROBLEMS if report.fails(strict=strict) else status.OK
