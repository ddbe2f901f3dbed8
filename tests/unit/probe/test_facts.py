"""The facts records: every field the checks read exists, only the LNet stats have a default,
records are immutable values, and "not observed" is None throughout (an empty snapshot)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from kvtool.probe.facts import AwsFacts, GdsFacts, LustreFacts, NetFacts, NodeFacts
from kvtool.probe.gather import gather
from kvtool.probe.host import SnapshotHost
from kvtool.probe.parse import LnetNi, Mount, NvfsStats, StripeComponent

ROOT = Path(__file__).parents[3]
EXAMPLE = ROOT / "examples" / "doctor-snapshot"
KV_PATH = "/mnt/lustre/kvcache"
RECORDS: tuple[type[Any], ...] = (NodeFacts, LustreFacts, NetFacts, GdsFacts, AwsFacts)


def test_every_field_the_checks_read_exists_on_its_record() -> None:
    """The checks (checks.py, network.py, aws.py) read ``facts.X``, ``facts.lustre.X`` ... and
    ``gds.X`` / ``aws.X`` through locals: each X must be a field, or that check dies with
    AttributeError on a real node."""
    tree = ast.parse(
        "\n".join(
            (ROOT / "kvtool" / "doctor" / f"{name}.py").read_text()
            for name in ("checks", "network", "aws")
        )
    )
    by_name: dict[str, type[Any]] = {"facts": NodeFacts, "gds": GdsFacts, "aws": AwsFacts}
    by_sub: dict[str, type[Any]] = {
        "lustre": LustreFacts,
        "net": NetFacts,
        "gds": GdsFacts,
        "aws": AwsFacts,
    }
    read: set[tuple[type[Any], str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in by_name:
            read.add((by_name[value.id], node.attr))
        elif (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "facts"
            and value.attr in by_sub
        ):
            read.add((by_sub[value.attr], node.attr))
    assert len(read) >= 30  # the walk found the checks' reads
    missing = sorted(f"{rec.__name__}.{attr}" for rec, attr in read if attr not in rec._fields)
    assert not missing


def test_only_the_lnet_stats_have_a_default() -> None:
    defaults = {f"{rec.__name__}.{name}" for rec in RECORDS for name in rec._field_defaults}
    assert defaults == {"NetFacts.lnet_stats"}
    assert NetFacts(None, None, None).lnet_stats is None  # a three-field NetFacts still builds
    with pytest.raises(TypeError, match="errors"):
        AwsFacts(False, None, None, None, None, None, None, None)  # type: ignore[call-arg]


def test_facts_are_immutable_and_replace_makes_a_changed_copy() -> None:
    facts = gather(SnapshotHost(EXAMPLE), KV_PATH)
    with pytest.raises(AttributeError):
        facts.mount = None  # type: ignore[misc]
    changed = facts._replace(cpus=8, net=facts.net._replace(efa_provider=False))
    assert (changed.cpus, changed.net.efa_provider) == (8, False)
    assert (facts.cpus, facts.net.efa_provider) == (96, True)
    assert changed != facts
    assert gather(SnapshotHost(EXAMPLE), KV_PATH) == facts  # equal by value, gathered twice


def test_the_example_snapshot_fills_each_record_with_parsed_values() -> None:
    facts = gather(SnapshotHost(EXAMPLE), KV_PATH)
    assert isinstance(facts.mount, Mount)
    assert facts.lustre.layout == [StripeComponent(0, None, -1, 1_048_576)]
    assert facts.net.nis_before is not None
    assert all(isinstance(ni, LnetNi) for ni in facts.net.nis_before)
    assert facts.gds.nvfs_after == NvfsStats(True, 64, 64, 64)
    assert facts.aws.asked is True
    assert facts.aws.errors == {}


def test_nothing_captured_is_none_everywhere_never_a_default_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)  # the region's fallback
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    facts = gather(SnapshotHost(tmp_path), KV_PATH)
    assert facts.path_info == {"path": KV_PATH, "captured": False}
    observed = {
        "node": (facts.mount, facts.modules, facts.modprobe, facts.cpus, facts.memory_gib),
        "odirect": (facts.odirect,),
        "lustre": tuple(facts.lustre),
        "net": tuple(facts.net),
        "gds": (*facts.gds[:4], *facts.gds[5:]),  # all but cufile_path, which is where it looked
        "aws": tuple(facts.aws)[1:-1],
    }
    assert {area: set(values) for area, values in observed.items()} == {
        area: {None} for area in observed
    }
    assert facts.aws.asked is True
    assert set(facts.aws.errors) == {"imds", "fsx"}
