"""The front door's bench options: tiers, the transfer size (one rank's KV chunk or given), fio
and S3 settings, and notes for what was assumed or has no effect."""

from __future__ import annotations

import pytest

from kvtool.errors import InputError
from kvtool.inputs.bench import DEFAULT_TRANSFER, resolve_bench


def test_a_models_chunk_is_the_transfer_size() -> None:
    options, notes = resolve_bench("t3", model="llama-3.1-70b", tp="8", t3_dir="/fsx/kv")
    # 80 layers x 1 KV head per rank (8 / tp 8) x 128 x 2 (K and V) x 2 B x 256 tokens
    assert options.block_bytes == 80 * 1 * 128 * 2 * 2 * 256 == 10_485_760
    assert options.t3.block_bytes == options.block_bytes
    assert options.tiers == ("t3",)
    assert any("one 256-token chunk of llama-3.1-70b (bf16, tp 8" in n for n in notes)


def test_fp8_halves_the_chunk() -> None:
    bf16, _ = resolve_bench("t1", model="llama-3.1-70b", tp="8")
    fp8, _ = resolve_bench("t1", model="llama-3.1-70b", tp="8", kv_dtype="fp8")
    assert bf16.block_bytes == 2 * fp8.block_bytes


def test_defaults_say_they_are_assumed() -> None:
    options, notes = resolve_bench("all")
    assert options.tiers == ("t1", "t2", "t3", "t4")
    assert options.block_bytes == DEFAULT_TRANSFER == 2**20
    assert (options.t3.threads, options.t3.iodepth, options.t3.duration_s) == (32, 1, 10.0)
    assert options.t3.direct is True
    assert any("1 MiB transfers" in n for n in notes)


def test_t3_options_and_what_has_no_effect() -> None:
    options, notes = resolve_bench(
        "t3,t4", t3_dir="/fsx/kv", t4_url="s3://b/p", transfer_size="4MiB", threads="8",
        iodepth="4", duration="5s", size="2GiB", direct=False, hosts="n1,n2:8766",
    )  # fmt: skip
    t3 = options.t3
    assert (t3.block_bytes, t3.threads, t3.iodepth, t3.duration_s) == (4 * 2**20, 8, 4, 5.0)
    # fio's --client takes host,port
    assert (t3.size_bytes, t3.direct, t3.hosts) == (2 * 2**30, False, ("n1", "n2,8766"))
    assert (options.s3_url, options.s3_connections) == ("s3://b/p", 8)
    assert any("page cache" in n for n in notes)
    _, quiet = resolve_bench("t1", iodepth="4", duration="5")
    assert "--iodepth has no effect without a t3 run" in quiet
    assert "--duration has no effect without a t3 run" in quiet


@pytest.mark.parametrize(
    ("tier", "options", "message"),
    [
        ("t5", {}, "unknown --tier 't5'"),
        ("t3", {}, "--tier t3 needs the folder to measure"),
        ("t4", {}, "--tier t4 needs an S3 prefix"),
        ("t4", {"t4_url": "http://x"}, "--t4-url 'http://x' is not s3://bucket/prefix"),
        ("t1", {"model": "llama-3.1-8b", "transfer_size": "1MiB"}, "give one"),
        ("t1", {"transfer_size": "1MB"}, "--transfer-size '1MB' is ambiguous"),
        ("t1", {"transfer_size": "lots"}, "--transfer-size 'lots' is not a size"),
        ("t3", {"t3_dir": "/x", "duration": "0"}, "--duration '0' is not 1 to 3600 seconds"),
    ],
)
def test_each_mistake_names_its_option(tier: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        resolve_bench(tier, **options)  # type: ignore[arg-type]


def test_a_transfer_size_reads_as_fio_reads_it_and_says_the_bytes() -> None:
    """fio and dd read 4M as 4 MiB; it used to be refused, and 4MB meant 4,000,000 B here."""
    options, notes = resolve_bench("t1", transfer_size="4M")
    assert options.block_bytes == 4 * 2**20
    assert "transfer size 4.00 MiB (4,194,304 B)" in notes
    assert resolve_bench("t1", transfer_size="64k")[0].block_bytes == 64 * 1024
