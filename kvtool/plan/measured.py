"""Measured tier bandwidths in place of the spec: ``kvtool plan --bench results.json``. Pure.

A plan reads each tier back at the profile's ceiling (T2's links, T3's client path and file
system share, T4's connections). A measurement from ``kvtool bench`` on the real node replaces
that ceiling for the tier it measured, and the path's description says so and names the spec it
replaced, so a reader always knows which figure a reload time rests on. The first-byte latency
is replaced too where the bench measured one (``latency_s``): fio's median completion latency
of a request includes its own transfer, so the estimate is that latency less the block's
transfer at its per-thread rate (``bench/measured.py``), taken at the smallest block measured;
where none is left, the profile's latency stays, and the description says which it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from kvtool.plan.reload import TierPath


class MeasuredTier(NamedTuple):
    """One node's measured read bandwidth for ``tier`` (T2, T3 or T4), and how it was
    measured (``source``: the tool, operation, block size, threads)."""

    tier: str
    bytes_per_s: float
    source: str
    latency_s: float | None = None  # first byte, estimated from the bench's latencies
    latency_source: str = ""


def apply_measured(
    paths: Sequence[TierPath],
    measured: Sequence[MeasuredTier],
    *,
    t3_share_bytes_per_s: float | None = None,
) -> list[TierPath]:
    """``paths`` with each measured tier's bandwidth in place of the spec.

    A T3 measurement from one node cannot see the other nodes' load on the file system, so it
    is capped at this node's share of the file system's throughput when that is lower.
    """
    by_tier = {m.tier.upper(): m for m in measured}
    out = []
    for path in paths:
        found = by_tier.get(path.tier)
        if found is None:
            out.append(path)
            continue
        bandwidth = found.bytes_per_s
        text = (
            f"measured {bandwidth / 1e9:,.2f} GB/s ({found.source}) in place of the spec"
            f" {path.node_bytes_per_s / 1e9:,.2f} GB/s"
        )
        if path.tier == "T3" and t3_share_bytes_per_s and t3_share_bytes_per_s < bandwidth:
            bandwidth = t3_share_bytes_per_s
            text += (
                f", capped at this node's file-system share {bandwidth / 1e9:,.2f} GB/s"
                " (one node's measurement cannot see the others' load)"
            )
        latency = path.latency_s
        if found.latency_s is not None:
            latency = found.latency_s
            text += (
                f"; first byte {found.latency_s * 1e3:,.3g} ms measured ({found.latency_source})"
                f" in place of the spec {path.latency_s * 1e3:,.3g} ms"
            )
        else:
            text += "; first-byte latency the spec's (no latency measured)"
        out.append(
            replace(
                path,
                node_bytes_per_s=bandwidth,
                description=text,
                bandwidth_source="measured",
                latency_s=latency,
                op_s=latency if path.op_s else 0.0,  # one file or GET per chunk: one latency
            )
        )
    return out
