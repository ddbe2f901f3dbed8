"""``kvtool advise``: which tiers and which write posture a workload needs, and why."""

from pathlib import Path
from typing import Annotated, Any

import typer

from kvtool.errors import InputError
from kvtool.units import parse_count, parse_fraction


def _parse_contexts(value: Any, *, what: str) -> dict[int, float]:
    """``8k,128k`` (equal shares), ``8k:0.6,128k:0.4``, or a YAML mapping ``{8k: 0.6}``."""
    if isinstance(value, dict):
        items = [(str(k), str(v)) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(str(v), "") for v in value]
    else:
        items = [(part.partition(":")[0], part.partition(":")[2]) for part in str(value).split(",")]
    if not items:
        raise InputError(f"{what} is empty", "give e.g. 8k:0.6,128k:0.4")
    shares: dict[int, float] = {}
    for tokens, share in items:
        count = parse_count(tokens, what=what)
        shares[count] = shares.get(count, 0.0) + (
            parse_fraction(share, what=f"{what} share") if share else 1.0 / len(items)
        )
    total = sum(shares.values())
    if abs(total - 1.0) > 0.01:
        raise InputError(f"{what} shares add up to {total:g}, not 1", "make them sum to 1")
    return shares


def _read_workload(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"{path}: malformed YAML{where}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a workload file must be a YAML mapping")
    from kvtool.plan.advise import check_workload_keys

    check_workload_keys(data, file=str(path))
    return data


def advise(
    workload_file: Annotated[
        Path | None,
        typer.Argument(metavar="[WORKLOAD.yaml]", help="Workload file; flags override it."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model (as for size).")] = None,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Node type or .toml.")] = None,
    nodes: Annotated[str | None, typer.Option("--nodes", metavar="N")] = None,
    sessions: Annotated[
        str | None, typer.Option("--sessions", "-n", metavar="N", help="Mean concurrent sessions.")
    ] = None,
    ctx: Annotated[
        str | None,
        typer.Option("--ctx", metavar="DIST", help="Context mix: 8k:0.6,128k:0.4 (or 8k,128k)."),
    ] = None,
    shared_prefix: Annotated[
        str | None,
        typer.Option(
            "--shared-prefix",
            metavar="FRACTION",
            help="Share of requests with a shared prefix, e.g. 0.4.",
        ),
    ] = None,
    idle: Annotated[
        str | None, typer.Option("--idle", metavar="SECONDS", help="Mean idle time between turns.")
    ] = None,
    peak_to_mean: Annotated[
        str | None, typer.Option("--peak-to-mean", metavar="X", help="Peak over mean concurrency.")
    ] = None,
    disaggregated: Annotated[
        bool | None,
        typer.Option("--disaggregated/--colocated", help="Separate prefill and decode pools."),
    ] = None,
    survive_node_failure: Annotated[
        bool, typer.Option("--survive-node-failure", help="KV must outlive its node.")
    ] = False,
    durable: Annotated[
        bool, typer.Option("--durable", help="Sessions must be durable (S3).")
    ] = False,
    gpus_added_for_kv: Annotated[
        bool,
        typer.Option("--gpus-added-for-kv", help="GPUs are being added to hold KV, not to decode."),
    ] = False,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", metavar="DTYPE")] = None,
    engine: Annotated[str | None, typer.Option("--engine", "-e", metavar="ENGINE")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Recommend the tier set (T1 / T1+T2 / T1+T2+T3 (+T4)) and the write posture.

    Examples:

      kvtool advise --model deepseek-r1 --hardware p5en --nodes 4 --sessions 400
      --ctx 8k:0.5,128k:0.5 --shared-prefix 0.4 --idle 120 --peak-to-mean 4 --disaggregated
      --gpus-added-for-kv

      kvtool advise workload.yaml --json
    """
    from kvtool.cli import render
    from kvtool.cli.advising import AdviseRequest, run_advice

    data = _read_workload(workload_file) if workload_file is not None else {}

    def pick(flag: Any, key: str, default: Any = None) -> Any:
        return flag if flag is not None else data.get(key, default)

    model_ref = pick(model, "model")
    hardware_ref = pick(hardware, "hardware")
    if not model_ref or not hardware_ref:
        raise InputError(
            "advise needs a model and a hardware type",
            "pass --model and --hardware, or put them in the workload file",
        )
    request = AdviseRequest(
        model=str(model_ref),
        hardware=str(hardware_ref),
        nodes=parse_count(str(pick(nodes, "nodes", 1)), what="--nodes"),
        sessions=parse_count(str(pick(sessions, "sessions", 1)), what="--sessions"),
        contexts=_parse_contexts(pick(ctx, "contexts", "8k"), what="--ctx"),
        shared_prefix=_share(pick(shared_prefix, "shared_prefix", 0)),
        mean_idle_s=_seconds(pick(idle, "mean_idle_s", 0)),
        peak_to_mean=_ratio(pick(peak_to_mean, "peak_to_mean", 1)),
        disaggregated=bool(pick(disaggregated, "disaggregated", False)),
        survive_node_failure=survive_node_failure or bool(data.get("survive_node_failure")),
        durable_sessions=durable or bool(data.get("durable_sessions")),
        gpus_added_for_kv=gpus_added_for_kv or bool(data.get("gpus_added_for_kv")),
        kv_dtype=str(pick(kv_dtype, "kv_dtype", "auto")),
        engine=str(pick(engine, "engine", "vllm")),
    )
    result = run_advice(request)
    if as_json:
        render.print_json(render.advice_json(result))
    else:
        render.print_advice(result)


def _number(value: Any, what: str) -> float:
    try:
        number = float(str(value).strip().rstrip("s"))
    except ValueError:
        raise InputError(f"{what} {value!r} is not a number") from None
    if number < 0:
        raise InputError(f"{what} must not be negative, got {value!r}")
    return number


def _share(value: Any) -> float:
    number = _number(str(value).rstrip("%"), "--shared-prefix")
    number = number / 100 if str(value).strip().endswith("%") else number
    if number > 1:
        raise InputError(f"--shared-prefix must be at most 1, got {value!r}", "e.g. 0.4 or 40%")
    return number


def _seconds(value: Any) -> float:
    return _number(value, "--idle")


def _ratio(value: Any) -> float:
    number = _number(value, "--peak-to-mean")
    if number < 1:
        raise InputError(f"--peak-to-mean must be at least 1, got {value!r}")
    return number
