"""``fsx.s3_association`` judges the association's automatic export by the plan's T4 (issue 49):
where the plan releases idle sessions to S3 through it (the AWS article's T4 path, which
``kvtool plan --emit`` sets up with auto-export on), auto-export is what the path needs; where
nothing is released, it only costs S3 PUTs. The PB case: Llama 3.1 405B, 1M tokens x 500
sessions on one Trn3 UltraServer, mean idle 30 minutes: 358 sessions released; a session
written is 4,096 256-token chunks x 144 workers = 589,824 chunk files, one export PUT each."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.cli.test_advise_release import pb_plan
from tests.conftest import CliResult

Run = Callable[..., CliResult]
PUTS = "a session written is 589,824 chunk files (4,096 256-token chunks x 144 workers)"


def association(kvtool: Run, plan: Path, *, idle: bool = True) -> dict:
    if not idle:
        data = yaml.safe_load(plan.read_text())
        del data["mean_idle"]
        plan.write_text(yaml.safe_dump(data))
    result = kvtool("check", str(plan), "--json")
    assert result.exit_code in (0, 1), result.stderr
    found = json.loads(result.stdout)["findings"]
    return next(f for f in found if f["id"] == "fsx.s3_association")


def test_auto_export_passes_where_the_plan_releases_idle_sessions(
    kvtool: Run, tmp_path: Path
) -> None:
    """Before the fix this WARNed ('every short-lived KV chunk becomes S3 PUTs') while plan's
    --emit turned auto-export on for the same T4 path."""
    assert 4_096 * 144 == 589_824
    found = association(kvtool, pb_plan(tmp_path, storage_capacity_gib=38_400,
                                         s3_association=True, auto_export=True))  # fmt: skip
    assert found["status"] == "PASS", found
    assert found["message"].startswith("auto-export is on: what the plan's T4 path needs")
    assert "358 released to S3" in found["evidence"]
    assert f"{PUTS}, one export PUT each" in found["evidence"]


def test_auto_export_warns_where_nothing_is_released(kvtool: Run, tmp_path: Path) -> None:
    plan = pb_plan(tmp_path, storage_capacity_gib=216_000, s3_association=True, auto_export=True)
    found = association(kvtool, plan, idle=False)
    assert found["status"] == "WARN", found
    assert "but the plan releases nothing to S3" in found["message"]
    assert "no mean_idle: the plan releases no session" in found["evidence"]
    assert PUTS in found["evidence"]
    assert found["fix"].startswith("an AutoExportPolicy with no events on the association")


def test_auto_export_off_warns_where_the_plan_releases(kvtool: Run, tmp_path: Path) -> None:
    found = association(kvtool, pb_plan(tmp_path, storage_capacity_gib=38_400,
                                         s3_association=True, auto_export=False))  # fmt: skip
    assert found["status"] == "WARN", found
    assert "gc --release frees only files exported to S3" in found["message"]
    assert "NEW, CHANGED, DELETED" in found["fix"]
    plan = pb_plan(tmp_path, storage_capacity_gib=216_000, s3_association=True, auto_export=False)
    off = association(kvtool, plan, idle=False)
    assert off["status"] == "PASS"
    assert off["message"].endswith("auto-export off (nothing released)")
