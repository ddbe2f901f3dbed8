"""``kvtool capacity``'s inputs, resolved once: the folder, the sessions' workload (the model's
real chunk, the context, turns and pauses from a trace), the target, the levels, and with
``--hardware`` what the plan assumed for T3 at this context."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kvtool.bench.capacity import CapacityOptions
from kvtool.bench.sessions import PERCENTILES, PlanSide, Turn, Workload, turns_from_requests
from kvtool.errors import InputError
from kvtool.units import parse_count, parse_count_list, parse_duration

if TYPE_CHECKING:
    from kvtool.model.shape import KvShape


class CapacityRequest(NamedTuple):
    path: str
    workload: Workload
    options: CapacityOptions
    plan: PlanSide | None
    about: str  # the model, its chunk, the context: said first
    notes: tuple[str, ...]


def resolve_capacity(
    *, t3_dir: str | None, model: str | None, ctx: str, restore_slo: str, at: str,
    sessions: str | None, trace: str | None, duration: str, restore_parallel: str,
    chunk_tokens: str, kv_dtype: str, engine: str, tp: str | None, hardware: str | None,
    nodes: str | None, direct: bool, fio_check: bool, hosts: str | None = None,
) -> CapacityRequest:  # fmt: skip
    """Every option checked and resolved, or one InputError naming the first that is wrong."""
    from kvtool.inputs.shape import parse_chunk_tokens, resolve_shape

    if not t3_dir:
        raise InputError("kvtool capacity needs --t3-dir DIR", "the T3 folder to measure")
    if not model:
        raise InputError(
            "kvtool capacity needs --model MODEL",
            "its chunk files are the model's real chunk size (kvtool models lists them)",
        )
    ctx_tokens = parse_count(ctx, what="--ctx")
    slo = parse_duration(restore_slo, what="--restore-slo")
    if not 0 < slo <= 600:
        raise InputError(f"--restore-slo {restore_slo} is not a restore time", "e.g. 500ms")
    at = at.strip().lower()
    if at not in PERCENTILES:
        raise InputError(f"--percentile {at!r} is not one kvtool reports",
                         "choose " + ", ".join(PERCENTILES))  # fmt: skip
    levels: tuple[int, ...] = ()
    if sessions is not None:
        levels = tuple(parse_count_list(sessions, what="--sessions"))
    seconds = _seconds(duration)
    parallel = parse_count(restore_parallel, what="--restore-parallel")
    if not 1 <= parallel <= 256:
        raise InputError(f"--restore-parallel {parallel} is not 1 to 256",
                         "engines read 8 to 32 chunks at once")  # fmt: skip
    tokens = parse_chunk_tokens(chunk_tokens)
    shape = resolve_shape(model, engine=engine, kv_dtype=kv_dtype, tp=tp)
    chunk = shape.chunk_bytes(tokens)
    notes = []
    turns: tuple[Turn, ...] = ()
    if trace is not None:
        from kvtool.inputs.trace import read_trace

        requests = read_trace(Path(trace)).requests
        found = turns_from_requests(requests)
        if not found:
            raise InputError(
                f"{trace} has no follow-up turns (no request extends an earlier one's blocks)",
                "pass a multi-turn trace (Mooncake's conversation trace is one), or leave"
                " --trace out for a closed loop",
            )
        turns = tuple(found)
        pauses = sorted(t.think_s for t in found)
        median = pauses[len(pauses) // 2]
        notes.append(
            f"{len(found):,} follow-up turns from {trace}: median {median:,.1f} s between turns,"
            f" median {sorted(t.tokens for t in found)[len(found) // 2]:,} new tokens"
        )
        if median > seconds / 2:
            notes.append(
                f"the trace's median pause ({median:,.1f} s) is over half of --duration"
                f" ({seconds:g} s): each session restores about once a level; raise --duration"
                " for more restores per level"
            )
    files_per_chunk = shape.tp  # every rank writes and reads its own share of a chunk
    workload = Workload(
        ctx_tokens=ctx_tokens, chunk_tokens=tokens, chunk_bytes=chunk,
        restore_parallel=parallel, turns=turns, files_per_chunk=files_per_chunk,
    )  # fmt: skip
    about = (
        f"{shape.spec.name} ({shape.fmt.name}, tp {shape.tp}): a {tokens}-token chunk is"
        f" {chunk:,} bytes a rank; a {ctx_tokens:,}-token context is {workload.chunks:,} chunk"
        f" files, {workload.session_bytes / 2**20:,.1f} MiB"
    )
    plan = None
    if hardware is not None:
        plan = _plan_side(shape, model, hardware, nodes, ctx_tokens, restore_slo)
    elif nodes is not None:
        raise InputError("--nodes has no effect without --hardware",
                         "add --hardware NODE to set the plan beside the run")  # fmt: skip
    from kvtool.bench.t3 import parse_hosts

    options = CapacityOptions(
        slo_s=slo, at=at, duration_s=seconds, direct=direct, levels=levels, fio_check=fio_check,
        hosts=() if hosts is None else parse_hosts(hosts),
        also=() if plan is None else (plan.concurrent_restores,),  # measured as the plan has it
    )  # fmt: skip
    return CapacityRequest(t3_dir, workload, options, plan, about, tuple(notes))


def _plan_side(
    shape: KvShape, model: str, hardware: str, nodes: str | None, ctx: int, slo: str
) -> PlanSide:
    """What ``kvtool plan MODEL --hardware --nodes --ctx`` assumes for T3 at this context."""
    from kvtool.inputs.hardware import resolve_assumptions, resolve_hardware
    from kvtool.plan.deployment import plan_contexts

    planned = plan_contexts(
        shape, contexts=[ctx], sessions=1,
        hardware=resolve_hardware(hardware, nodes=nodes),
        assumptions=resolve_assumptions(restore_slo=slo),
    )  # fmt: skip
    (plan,) = planned.plans
    row = next(r for r in plan.break_even if r.ctx_tokens == ctx)
    source = f"kvtool plan {model} --hardware {hardware}" + (
        f" --nodes {nodes}" if nodes else "") + f" --ctx {ctx:,}"  # fmt: skip
    return PlanSide(plan.assumptions.concurrent_loads, row.reload_s["T3"], source)


def _seconds(text: str) -> float:
    try:  # seconds, as bench takes them, or a duration with its unit
        value = float(text.strip())
    except ValueError:
        try:
            value = parse_duration(text.strip(), what="--duration")
        except InputError:
            value = -1.0
    if not 1 <= value <= 3600:
        raise InputError(f"--duration {text!r} is not 1 to 3600 seconds", "e.g. --duration 10s")
    return value
