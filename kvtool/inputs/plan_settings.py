"""``kvtool plan --set KEY=VALUE``: the plan's less used settings, one option for all of them
(a command shows at most 20 options). Each value is checked where it is used, as the option
of the same name would be; here, only the keys."""

from __future__ import annotations

from kvtool.errors import InputError

# key -> the option whose value rules it follows
SETTINGS: dict[str, str] = {
    "mfu": "--mfu",
    "concurrent_loads": "--concurrent-loads",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",  # vLLM's fixed KV budget a rank
    "vllm_t3": "--set vllm_t3",  # --emit vllm's T3: lmcache (default) or fs (vLLM's tiering)
    "fsx_throughput": "--fsx-throughput",
    "t4_storage": "--t4-storage",
    "region": "--region",
    "dp_attention": "--dp-attention",
    "block_tokens": "--block-tokens",
    "reload_from": "--set reload_from",  # from which context T3 must beat recompute (50k)
    "restore_slo": "--set restore_slo",  # or: how fast the plan's restores must finish
    # the storage and reload model (plan/reload.py's ReloadAssumptions), each printed
    "fp8_attention": "--set fp8_attention",  # the engine runs FP8 attention (default false)
    "chunk_tokens": "--set chunk_tokens",  # tokens per chunk file or object (LMCache's 256)
    "io_threads": "--set io_threads",  # T3 reads in flight per EC2 instance (32)
    "s3_connections": "--set s3_connections",  # S3 requests in flight per EC2 instance (64)
    "s3_lookups": "--set s3_lookups",  # requests before each GET (LMCache: 1 HEAD)
    "s3_lookups_at_once": "--set s3_lookups_at_once",  # sessions an engine looks up at once
    "s3_prefixes": "--set s3_prefixes",  # S3 partitioned prefixes the keys spread over (1)
    "lookup_timeout": "--set lookup_timeout",  # LMCache's lookup_timeout_ms (3s): then recompute
    "metadata_iops": "--set metadata_iops",  # FSx Metadata IOPS (USER_PROVISIONED)
    "mean_idle": "--set mean_idle",  # sessions' mean idle time: who is released to S3
    "release_after": "--set release_after",  # idle time before FSx releases a session (10m)
}
# the keys resolve_assumptions reads from one mapping (SizeRequest.settings)
MODEL_KEYS = (
    "fp8_attention", "chunk_tokens", "io_threads", "s3_connections", "s3_lookups",
    "s3_lookups_at_once", "s3_prefixes", "lookup_timeout", "metadata_iops", "mean_idle",
    "release_after",
)  # fmt: skip
BOOLEAN_KEYS = ("dp_attention", "fp8_attention")
RELEASE_KEYS = ("mean_idle", "release_after")  # the AWS article's T4: kvtool advise's --set
TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def parse_settings(items: list[str] | None) -> dict[str, str]:
    """``["mfu=0.35", "dp_attention=true"]`` -> ``{"mfu": "0.35", "dp_attention": "true"}``;
    InputError for an item without ``=``, an unknown key, a key given twice, or a flag that
    is not true or false."""
    settings: dict[str, str] = {}
    for item in items or []:
        key, equals, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not equals or not key:
            raise InputError(f"--set {item!r} is not KEY=VALUE", "e.g. --set mfu=0.35")
        if key not in SETTINGS:
            raise InputError(
                f"--set {key!r} is not a plan setting", "one of " + ", ".join(SETTINGS)
            )
        if key in settings:
            raise InputError(f"--set {key} is given twice", "give it once")
        value = value.strip()
        if key in BOOLEAN_KEYS and value.lower() not in (*TRUE, *FALSE):
            raise InputError(f"--set {key}={value!r} is not true or false")
        settings[key] = value
    return settings


def flag(settings: dict[str, str], key: str) -> bool:
    """A true/false setting (absent: false)."""
    return settings.get(key, "false").lower() in TRUE


def release_settings(items: list[str] | None) -> dict[str, str]:
    """``kvtool advise --set``: the T4 release's keys alone (``RELEASE_KEYS``), each checked
    as ``kvtool plan --set`` checks it; InputError for any other key."""
    settings = parse_settings(items)
    for key in settings:
        if key not in RELEASE_KEYS:
            raise InputError(
                f"--set {key} is not an advise setting",
                f"advise takes {' and '.join(RELEASE_KEYS)}; kvtool plan --set takes the rest",
            )
    return settings
