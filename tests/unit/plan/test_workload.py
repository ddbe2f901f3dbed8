"""The workload schema (``kvtool advise``) and the plan file built on it (``kvtool check``): one
loader, values as the flags take them, and every error naming the file and key or the flag."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.files import read_yaml_mapping
from kvtool.plan import workload as workload_module
from kvtool.plan.workload import (
    FSX_KEYS,
    MEASURED_KEYS,
    PLAN_KEYS,
    WORKLOAD_KEYS,
    FsxSettings,
    Measured,
    Workload,
    parse_contexts,
    plan_from_mapping,
    workload_from_mapping,
)

EXAMPLES = Path(__file__).parents[3] / "examples" / "check"
DOCS = Path(__file__).parents[3] / "docs"
BASE = {"model": "llama-3.1-70b", "hardware": "p5en"}


def load(**data: Any) -> Workload:
    return workload_from_mapping({**BASE, **data}, source="w.yaml")


def error(call: Any) -> InputError:
    with pytest.raises(InputError) as info:
        call()
    return info.value


def yaml_block(text: str) -> dict[str, Any]:
    """The YAML example in ``text`` that starts at ``model: deepseek-r1``, to its first blank
    line or fence."""
    start = text.index("model: deepseek-r1")
    lines = []
    for line in text[start:].splitlines():
        if not line.strip() or line.startswith("```"):
            break
        lines.append(line.strip())
    data = yaml.safe_load("\n".join(lines))
    assert isinstance(data, dict)
    return data


# --- workload_from_mapping --------------------------------------------------------------------


def test_defaults_are_one_node_one_session_at_8k() -> None:
    assert load() == Workload(
        model="llama-3.1-70b",
        hardware="p5en",
        nodes=1,
        sessions=1,
        contexts={8000: 1.0},
        shared_prefix=0.0,
        mean_idle_s=0.0,
        peak_to_mean=1.0,
        disaggregated=False,
        engine="vllm",
        kv_dtype="auto",
        tp=None,
        weights_dtype="auto",
    )


def test_the_modules_docstring_example_loads() -> None:
    data = yaml_block(workload_module.__doc__ or "")
    w = workload_from_mapping(data, source="workload.yaml")
    assert (w.model, w.hardware, w.nodes, w.sessions) == ("deepseek-r1", "p5en", 4, 400)
    assert w.contexts == {8000: 0.5, 128_000: 0.5}
    assert (w.shared_prefix, w.mean_idle_s, w.peak_to_mean, w.disaggregated) == (
        0.4,
        120.0,
        4.0,
        True,
    )


def test_the_planning_docs_workload_example_loads_with_every_key() -> None:
    section = (DOCS / "planning.md").read_text().split("## 5. `kvtool advise`", 1)[1]
    data = yaml_block(section)
    assert set(data) == set(WORKLOAD_KEYS)  # the example shows every key
    w = workload_from_mapping(data, source="workload.yaml")
    assert (w.kv_dtype, w.engine, w.tp, w.weights_dtype) == ("fp8", "vllm", 8, "fp8")
    assert (w.gpus_added_for_kv, w.survive_node_failure, w.durable_sessions) == (
        False,
        False,
        False,
    )


def test_values_are_read_as_the_flags_take_them() -> None:
    w = load(
        nodes="4",
        sessions="1k",  # lowercase k: x1000
        contexts="8k:0.6,128K:0.4",  # uppercase K: x1024
        shared_prefix="40%",
        mean_idle="2m",
        peak_to_mean="3.5",
        tp=8,
        model=" llama-3.1-70b ",
        engine=" sglang ",
    )
    assert (w.nodes, w.sessions, w.tp) == (4, 1000, 8)
    assert w.contexts == {8000: 0.6, 131_072: 0.4}
    assert (w.shared_prefix, w.mean_idle_s, w.peak_to_mean) == (0.4, 120.0, 3.5)
    assert (w.model, w.engine) == ("llama-3.1-70b", "sglang")


def test_a_tp_of_none_lets_the_planner_choose() -> None:
    assert load(tp=None).tp is None


# one value per key, none of them the default
NOT_DEFAULT = {
    "model": "deepseek-r1",
    "hardware": "trn3",
    "nodes": 4,
    "sessions": 400,
    "contexts": "128k",
    "shared_prefix": 0.4,
    "mean_idle": "2m",
    "peak_to_mean": 4,
    "disaggregated": True,
    "survive_node_failure": True,
    "durable_sessions": True,
    "gpus_added_for_kv": True,
    "engine": "sglang",
    "kv_dtype": "fp8",
    "tp": 8,
    "weights_dtype": "fp8",
}


@pytest.mark.parametrize("key", WORKLOAD_KEYS)
def test_every_key_accepted_is_used(key: str) -> None:
    default = load()
    changed = workload_from_mapping({**BASE, key: NOT_DEFAULT[key]}, source="w.yaml")
    field = "mean_idle_s" if key == "mean_idle" else key  # a duration's field has its unit
    assert getattr(changed, field) != getattr(default, field)
    others = [f.name for f in dataclasses.fields(Workload) if f.name != field]
    assert all(getattr(changed, k) == getattr(default, k) for k in others)


def test_no_plan_key_is_a_workload_key() -> None:
    assert set(NOT_DEFAULT) == set(WORKLOAD_KEYS)
    assert not set(PLAN_KEYS) & set(WORKLOAD_KEYS)


def test_an_unknown_key_is_named_with_the_allowed_ones() -> None:
    e = error(lambda: load(sesions=10))
    assert e.message == "w.yaml: unknown key 'sesions'"
    assert e.hint == "allowed: " + ", ".join(sorted(WORKLOAD_KEYS))


@pytest.mark.parametrize("key", PLAN_KEYS)
def test_a_plan_key_is_refused_by_advise_with_a_pointer_to_check(key: str) -> None:
    e = error(lambda: load(**{key: 1}))
    assert e.message == (
        f"w.yaml: key {key!r} belongs to a deployment plan, which kvtool check reads;"
        " advise does not use it"
    )
    assert e.hint == "run kvtool check w.yaml, or remove the key"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"hardware": "p5en"}, "the workload names no model"),
        ({"model": "llama-3.1-70b"}, "the workload names no hardware"),
        ({}, "the workload names no model and no hardware"),
        ({"model": "", "hardware": None}, "the workload names no model and no hardware"),
    ],
)
def test_model_and_hardware_are_required(data: dict[str, Any], message: str) -> None:
    e = error(lambda: workload_from_mapping(data, source="w.yaml"))
    assert e.message == message
    assert "--model and --hardware" in e.hint


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("sessions", "0", "w.yaml: sessions must be at least 1, got '0'"),
        ("nodes", "two", "w.yaml: nodes 'two' is not a count"),
        ("tp", "1.5", "w.yaml: tp '1.5': decimals are allowed only with k/m/g/t"),
        ("shared_prefix", "140%", "w.yaml: shared_prefix must be at most 1, got '140%'"),
        ("shared_prefix", "-0.1", "w.yaml: shared_prefix must not be negative, got '-0.1'"),
        ("mean_idle", "2x", "w.yaml: mean_idle '2x' is not a duration"),
        ("mean_idle", 120, "w.yaml: mean_idle 120 has no unit"),
        ("mean_idle", True, "w.yaml: mean_idle 'True' is not a duration"),
        ("peak_to_mean", 0.5, "w.yaml: peak_to_mean must be 1 to 10,000, got 0.5"),
        ("disaggregated", "yes", "w.yaml: disaggregated must be true or false, got 'yes'"),
        ("durable_sessions", 1, "w.yaml: durable_sessions must be true or false, got 1"),
        ("contexts", "8k:0.5,128k:0.4", "w.yaml: contexts shares add up to 0.9, not 1"),
    ],
)
def test_a_bad_value_names_the_file_and_key(key: str, value: Any, message: str) -> None:
    assert error(lambda: load(**{key: value})).message.startswith(message)


def test_a_bad_value_from_a_flag_names_the_flag() -> None:
    names = {"shared_prefix": "--shared-prefix", "sessions": "--sessions"}
    e = error(
        lambda: workload_from_mapping(
            {**BASE, "shared_prefix": "140%"}, source="w.yaml", names=names
        )
    )
    assert e.message == "--shared-prefix must be at most 1, got '140%'"
    e = error(lambda: workload_from_mapping({**BASE, "sessions": "0"}, source="w", names=names))
    assert e.message == "--sessions must be at least 1, got '0'"
    # a key that did not come from a flag is still named by file and key
    e = error(lambda: workload_from_mapping({**BASE, "nodes": "0"}, source="w.yaml", names=names))
    assert e.message == "w.yaml: nodes must be at least 1, got '0'"


def test_the_boolean_flags_take_only_booleans() -> None:
    w = load(disaggregated=True, survive_node_failure=True, gpus_added_for_kv=False)
    assert (w.disaggregated, w.survive_node_failure, w.gpus_added_for_kv) == (True, True, False)


# --- parse_contexts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shares"),
    [
        ("8k", {8000: 1.0}),
        ("8k,128k", {8000: 0.5, 128_000: 0.5}),
        ("8k:0.6,128K:0.4", {8000: 0.6, 131_072: 0.4}),
        ("8k:60%,128k:40%", {8000: 0.6, 128_000: 0.4}),
        ({"8k": 0.5, "128k": 0.5}, {8000: 0.5, 128_000: 0.5}),
        ({8000: 1}, {8000: 1.0}),
        (["8k", "32k", "128k"], {8000: 1 / 3, 32_000: 1 / 3, 128_000: 1 / 3}),
        ("8k,8000", {8000: 1.0}),  # the same length twice: its shares add up
    ],
)
def test_context_mixes(value: Any, shares: dict[int, float]) -> None:
    parsed = parse_contexts(value, what="--contexts")
    assert parsed.keys() == shares.keys()
    for ctx, share in shares.items():
        assert parsed[ctx] == pytest.approx(share)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({}, "--contexts is empty"),
        ([], "--contexts is empty"),
        ("", "--contexts '' is not a count"),
        ("8k,,128k", "--contexts '' is not a count"),
        ("8k:0,128k:1", "--contexts share must be in (0, 1], got '0'"),
        ("8k:half", "--contexts share 'half' is not a number"),
        ("8k:0.5", "--contexts shares add up to 0.5, not 1"),
        ("8k:0.7,128k:0.7", "--contexts shares add up to 1.4, not 1"),
    ],
)
def test_bad_context_mixes_name_what(value: Any, message: str) -> None:
    assert error(lambda: parse_contexts(value, what="--contexts")).message == message


def test_shares_within_a_hundredth_of_one_are_accepted() -> None:
    assert sum(parse_contexts("8k:0.333,32k:0.333,128k:0.333", what="c").values()) == (
        pytest.approx(0.999)
    )
    with pytest.raises(InputError, match=r"add up to 0\.98"):
        parse_contexts("8k:0.49,128k:0.49", what="c")


@given(st.lists(st.integers(1, 10_000_000), min_size=1, max_size=8, unique=True))
def test_lengths_without_shares_split_the_sessions_equally(lengths: list[int]) -> None:
    parsed = parse_contexts(",".join(str(n) for n in lengths), what="--contexts")
    assert list(parsed) == lengths
    assert sum(parsed.values()) == pytest.approx(1.0)
    assert all(share == pytest.approx(1 / len(lengths)) for share in parsed.values())


# --- plan_from_mapping ------------------------------------------------------------------------


def test_the_passing_example_plan() -> None:
    plan = plan_from_mapping(read_yaml_mapping(EXAMPLES / "plan-pass.yaml"), source="p.yaml")
    w = plan.workload
    assert (w.model, w.hardware, w.nodes, w.sessions) == ("llama-3.1-70b", "p5en", 8, 400)
    assert w.contexts == {128_000: 1.0}
    assert (plan.posture, plan.t3_path, plan.io_threads, plan.odirect) == ("eager", "efa", 32, True)
    assert plan.fsx == FsxSettings(
        mount_options=("relatime", "flock"), stripe_count=-1, same_az=True, source="p.yaml"
    )
    assert (plan.terraform, plan.cloudformation) == ("terraform-plan.json", None)
    assert plan.measured == Measured(bench="bench-t3.json", doctor=("doctor-node-a.json",))
    assert plan.tolerance == 0.2


def test_the_failing_example_plan() -> None:
    plan = plan_from_mapping(read_yaml_mapping(EXAMPLES / "plan-fail.yaml"), source="p.yaml")
    assert plan.workload.disaggregated is True
    assert (plan.posture, plan.io_threads, plan.odirect) == ("lazy", 8, False)
    assert plan.cloudformation == "cloudformation-fsx.yaml"
    assert plan.fsx is not None
    assert (plan.fsx.mount_options, plan.fsx.stripe_count, plan.fsx.same_az) == (
        ("relatime",),
        1,
        False,
    )
    assert plan.measured == Measured(doctor=("doctor-node-b.json",), t3_read_gbytes_per_s=0.01)


def test_plan_defaults_without_a_deployment() -> None:
    plan = plan_from_mapping(BASE, source="p.yaml")
    assert plan.fsx is None
    assert (plan.t3_path, plan.tolerance) == ("efa", 0.2)
    assert (plan.io_threads, plan.odirect, plan.posture) == (None, None, None)
    assert plan.measured == Measured()
    assert (plan.terraform, plan.cloudformation) == (None, None)


def test_fsx_settings_declared_in_the_plan() -> None:
    plan = plan_from_mapping(
        {
            **BASE,
            "t3_path": "efa-gds",
            "fsx": {
                "deployment_type": " PERSISTENT_2 ",
                "storage_type": "SSD",
                "storage_capacity_gib": "48000",
                "per_unit_storage_throughput": 1000,
                "efa_enabled": True,
                "data_compression_type": "NONE",
                "s3_association": True,
                "auto_export": True,
                "mount_options": " noatime, flock,, ",
                "stripe_count": 8,
                "same_az": True,
            },
        },
        source="p.yaml",
    )
    assert plan.t3_path == "efa_gds"
    assert plan.fsx == FsxSettings(
        deployment_type="PERSISTENT_2",
        storage_type="SSD",
        storage_capacity_gib=48_000,
        per_unit_storage_throughput=1000,
        efa_enabled=True,
        data_compression_type="NONE",
        s3_association=True,
        auto_export=True,
        mount_options=("noatime", "flock"),
        stripe_count=8,
        same_az=True,
        source="p.yaml",
    )


def test_an_empty_fsx_mapping_declares_a_file_system_with_nothing_known() -> None:
    plan = plan_from_mapping({**BASE, "fsx": {}}, source="p.yaml")
    assert plan.fsx == FsxSettings(source="p.yaml")


def test_a_single_doctor_report_may_be_named_without_a_list() -> None:
    plan = plan_from_mapping({**BASE, "measured": {"doctor": "node-a.json"}}, source="p.yaml")
    assert plan.measured.doctor == ("node-a.json",)
    plan = plan_from_mapping({**BASE, "measured": {"t3_read_gbytes_per_s": "5.6"}}, source="p")
    assert plan.measured.t3_read_gbytes_per_s == 5.6


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"fsx": "48000"}, "p.yaml: fsx must be a mapping of settings"),
        ({"fsx": {"capacity": 1}}, "p.yaml: fsx: unknown key 'capacity'"),
        ({"fsx": {"stripe_count": 0}}, "p.yaml: fsx.stripe_count must be -1 (all OSTs)"),
        ({"fsx": {"stripe_count": -2}}, "p.yaml: fsx.stripe_count must be -1 (all OSTs)"),
        ({"fsx": {"stripe_count": True}}, "p.yaml: fsx.stripe_count must be -1 (all OSTs)"),
        ({"fsx": {"storage_capacity_gib": 0}}, "p.yaml: storage_capacity_gib must be at least 1"),
        ({"fsx": {"efa_enabled": "yes"}}, "p.yaml: efa_enabled must be true or false, got 'yes'"),
        ({"measured": ["bench.json"]}, "p.yaml: measured must be a mapping"),
        ({"measured": {"benchmark": "b.json"}}, "p.yaml: measured: unknown key 'benchmark'"),
        ({"measured": {"doctor": {"a": 1}}}, "p.yaml: measured.doctor must be a file name"),
        (
            {"measured": {"t3_read_gbytes_per_s": "fast"}},
            "p.yaml: measured.t3_read_gbytes_per_s 'fast' is not a number",
        ),
        ({"posture": "sometimes"}, "p.yaml: posture must be eager or lazy, got 'sometimes'"),
        ({"posture": "Eager"}, "p.yaml: posture must be eager or lazy, got 'Eager'"),
        ({"t3_path": "infiniband"}, "unknown p.yaml: t3_path 'infiniband'"),
        ({"tolerance": 1}, "p.yaml: tolerance must be below 1 (0.2 = 20%), got 1"),
        ({"tolerance": -0.1}, "p.yaml: tolerance must not be negative, got -0.1"),
        ({"io_threads": 0}, "p.yaml: io_threads must be at least 1, got '0'"),
        ({"odirect": "true"}, "p.yaml: odirect must be true or false, got 'true'"),
        ({"fsx_capacity": 1}, "p.yaml: unknown key 'fsx_capacity'"),
    ],
)
def test_a_bad_plan_names_the_file_and_key(extra: dict[str, Any], message: str) -> None:
    assert error(lambda: plan_from_mapping({**BASE, **extra}, source="p.yaml")).message.startswith(
        message
    )


def test_unknown_keys_inside_fsx_and_measured_list_what_is_allowed() -> None:
    e = error(lambda: plan_from_mapping({**BASE, "fsx": {"mount_opts": "flock"}}, source="p"))
    assert e.hint == "allowed: " + ", ".join(FSX_KEYS)
    e = error(lambda: plan_from_mapping({**BASE, "measured": {"x": 1}}, source="p"))
    assert e.hint == "allowed: " + ", ".join(MEASURED_KEYS)


def test_the_plan_keys_are_the_workloads_and_the_deployments() -> None:
    """Every key a plan accepts at the top level is either a workload key or a plan key."""
    data = read_yaml_mapping(EXAMPLES / "plan-pass.yaml")
    assert set(data) <= set(WORKLOAD_KEYS) | set(PLAN_KEYS)
    assert set(data) - set(WORKLOAD_KEYS) == set(PLAN_KEYS)  # the example uses every plan key


@pytest.mark.parametrize("key", ["peak_to_mean", "tolerance"])
@pytest.mark.parametrize("value", [".nan", ".inf"])
def test_nan_and_inf_are_refused_by_name(key: str, value: str) -> None:
    """YAML's .nan and .inf used to pass and crash the planner with a traceback."""
    data = yaml.safe_load(f"model: llama-3.1-8b\nhardware: p5en\n{key}: {value}\n")
    with pytest.raises(InputError, match=f"{key} must be a finite number"):
        plan_from_mapping(data, source="p.yaml")


def test_an_unknown_plan_key_lists_the_plans_keys_too() -> None:
    with pytest.raises(InputError, match="unknown key 'nodez'") as caught:
        plan_from_mapping({**BASE, "nodez": 1}, source="p.yaml")
    for key in ("nodes", "fsx", "t3_path", "posture", "tolerance"):
        assert key in caught.value.hint


def test_fsx_names_are_read_in_any_case() -> None:
    fsx = {"deployment_type": "persistent_2", "storage_type": "ssd", "data_compression_type": "lz4"}
    plan = plan_from_mapping({**BASE, "fsx": fsx}, source="p.yaml")
    assert plan.fsx is not None
    assert (plan.fsx.deployment_type, plan.fsx.storage_type) == ("PERSISTENT_2", "SSD")
    assert plan.fsx.data_compression_type == "LZ4"


def test_a_peak_or_an_idle_time_past_any_workload_is_refused() -> None:
    """``--peak-to-mean 1e30`` planned 10^27 nodes with exit 0."""
    assert "must be 1 to 10,000, got 1e+30" in error(lambda: load(peak_to_mean=1e30)).message
    assert "is over a year" in error(lambda: load(mean_idle="400d")).message
    assert load(peak_to_mean=10_000).peak_to_mean == 10_000


def test_a_plans_t3_folder_and_its_cap() -> None:
    plan = plan_from_mapping({**BASE, "t3_dir": "/fsx/kvcache", "max_size": "20TiB"}, source="p")
    assert (plan.t3_dir, plan.max_size) == ("/fsx/kvcache", 20 * 2**40)
    assert plan_from_mapping(BASE, source="p").t3_dir is None
    e = error(lambda: plan_from_mapping({**BASE, "max_size": "20TiB"}, source="p"))
    assert e.message == "p: max_size needs t3_dir"
    e = error(lambda: plan_from_mapping({**BASE, "t3_dir": " "}, source="p"))
    assert e.message == "p: t3_dir is empty"
    e = error(lambda: plan_from_mapping({**BASE, "t3_dir": "/x", "max_size": "big"}, source="p"))
    assert e.message.startswith("p: max_size")


def test_old_keys_are_read_under_their_new_names_with_a_note() -> None:
    from kvtool.plan.workload import renamed_keys

    data, notes = renamed_keys({**BASE, "mean_idle_s": 120, "t3_cap": "1TiB"}, source="p.yaml")
    assert (data["mean_idle"], data["max_size"]) == ("120s", "1TiB")
    assert "mean_idle_s" not in data
    assert notes == (
        "p.yaml: mean_idle_s is now mean_idle; the old key goes in the next release",
        "p.yaml: t3_cap is now max_size; the old key goes in the next release",
    )
    assert (
        workload_from_mapping(
            {k: v for k, v in data.items() if k != "max_size"}, source="p"
        ).mean_idle_s
        == 120.0
    )
    e = error(lambda: renamed_keys({"mean_idle_s": 1, "mean_idle": "1s"}, source="p"))
    assert e.message == "p: mean_idle_s and mean_idle are one key"
