"""How a KV chunk file is striped over Lustre's OSTs, and the layout that spreads it. Pure;
``kvtool doctor`` (the folder's layout, read with ``lfs getstripe``) and ``kvtool check`` (the
plan's declared ``stripe_count``) judge through ``judge_stripes``, so both say the same.

A file of S bytes laid out with stripe count c (-1: every OST) and stripe size s spans

    effective OSTs = min(c or OSTs, ceil(S / s), OSTs)

whatever ``-c`` says: a 10 MiB chunk file at 1 MiB stripes reaches 10 OSTs at most, a 917 kB
one (Llama 3.1 405B at tp 8 x pp 18, 256 tokens) one. The stripes past ceil(S / s) hold
nothing, yet each is an OST object made at every create and removed at every unlink.

Two rules, each right for its files:

* **Lustre's** (wiki.lustre.org, Lustre_Striping_Best_Practices): files under 1 MiB take 1
  stripe; 1 MiB to 1 GiB take 1 to 4, wider "only if multiple clients read/write the same file
  concurrently". A session's chunk file is read by the one node that restores the session, so 1
  to 4 stripes serve it; FSx's default layout gives files under 100 MiB one.
* **The AWS article's** "stripe count >= nodes": a file every node reads at once (the chunks of
  a prefix shared across nodes, fanned in) is served only by the OSTs it spans, so it should
  span min(nodes, OSTs). For a chunk file that takes a stripe size of at most S / nodes: the
  advice here is ``-c N -S <S / N, down to a multiple of 64 KiB>`` (Lustre stripe sizes are
  multiples of 64 KiB, lfs-setstripe(1)), never a count the file cannot fill.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from kvtool.findings import Status
from kvtool.units import format_bytes_binary

STRIPE_UNIT = 64 * 2**10  # Lustre stripe sizes are multiples of 64 KiB (lfs-setstripe(1))
DEFAULT_STRIPE_SIZE = 2**20  # FSx for Lustre's default stripe size, 1 MiB
LUSTRE_RULE = (
    "Lustre's guidance: files under 1 MiB on 1 stripe, 1 MiB to 1 GiB on 1 to 4, wider only"
    " where many clients read the same file (wiki.lustre.org, Lustre_Striping_Best_Practices)"
)
ARTICLE_RULE = (
    "the AWS article's checklist: stripe count >= nodes, for files every node reads at once"
    " (prefixes shared across nodes)"
)


def spans(file_bytes: int, stripe_size: int) -> int:
    """OSTs a file of ``file_bytes`` can reach at ``stripe_size``: ceil(size / stripe size)."""
    return max(1, math.ceil(file_bytes / stripe_size))


def effective_osts(
    file_bytes: int, *, stripe_count: int, stripe_size: int, osts: int | None
) -> int:
    """min(count or OSTs, ceil(size / stripe size), OSTs); -1 is every OST, and an unknown
    OST count bounds nothing."""
    count = (osts or math.inf) if stripe_count == -1 else stripe_count
    bound = min(count, spans(file_bytes, stripe_size), osts or math.inf)
    return int(bound)


def spreading_layout(file_bytes: int, target: int) -> tuple[int, int]:
    """The (stripe count, stripe size) that spreads a file of ``file_bytes`` over ``target``
    OSTs, or over as many as 64 KiB stripes allow: a 1 MiB stripe where the file fills
    ``target`` of them, else the largest multiple of 64 KiB that still does. The count never
    exceeds what the file fills."""
    if spans(file_bytes, DEFAULT_STRIPE_SIZE) >= target:
        return target, DEFAULT_STRIPE_SIZE
    size = max(STRIPE_UNIT, file_bytes // target // STRIPE_UNIT * STRIPE_UNIT)
    return min(target, spans(file_bytes, size)), size


def layout_flags(count: int, size: int) -> str:
    """``-c 6 -S 128K``: ``count`` stripes of ``size`` bytes as ``lfs setstripe`` takes them."""
    unit = f"{size // 2**20}M" if size % 2**20 == 0 else f"{size // 2**10}K"
    return f"-c {count} -S {unit}"


def setstripe(count: int, size: int, path: str) -> str:
    """The ``lfs setstripe`` line for ``count`` stripes of ``size`` bytes on ``path``."""
    return f"lfs setstripe {layout_flags(count, size)} {path}"


class StripeJudgement(NamedTuple):
    """``status`` PASS or WARN, ``message`` the finding's sentence, ``fix`` a layout (or ``""``),
    ``effective`` the OSTs one chunk file spans, ``rules`` both rules and which one applied."""

    status: Status
    message: str
    fix: str
    effective: int
    rules: str


def judge_stripes(
    file_bytes: int,
    *,
    stripe_count: int,
    stripe_size: int,
    osts: int | None,
    nodes: int,
    fan_in: bool,
    path: str,
) -> StripeJudgement:
    """A chunk file of ``file_bytes`` under this layout: the OSTs it spans, against what it can
    fill (stripes it cannot use are a WARN) and, where ``fan_in`` (every node may read the same
    file: shared prefixes, or not known), against min(nodes, OSTs) (the article's line)."""
    size = format_bytes_binary(file_bytes)
    effective = effective_osts(
        file_bytes, stripe_count=stripe_count, stripe_size=stripe_size, osts=osts
    )
    fills = spans(file_bytes, stripe_size)
    count = (osts or 0) if stripe_count == -1 else stripe_count
    stripes = f"{format_bytes_binary(stripe_size)} stripes"
    wanted = min(nodes, osts) if osts else nodes
    upto = "" if osts or effective == 1 else "up to "  # the OSTs bound it too, unknown here
    needs_spread = fan_in and nodes > 1 and effective < wanted
    rules = f"{ARTICLE_RULE} ({_applies(nodes, fan_in)}); {LUSTRE_RULE}"
    if needs_spread:
        target = min(wanted, spans(file_bytes, STRIPE_UNIT))
        new_count, new_size = spreading_layout(file_bytes, target)
        reach = (
            ""
            if new_count >= wanted
            else f" (a {size} file fills at most {new_count} 64 KiB stripes: no layout reaches"
            f" {wanted})"
        )
        return StripeJudgement(
            "WARN",
            f"{size} chunk files span {upto}{effective} OST(s) at {stripes} (stripe count"
            f" {stripe_count}), fewer than min(nodes, OSTs) = {wanted}: a chunk every node reads"
            f" at once is served by {effective} server(s){reach}",
            f"{setstripe(new_count, new_size, path)}  # new files only; lfs migrate re-lays"
            " existing ones",
            effective,
            rules,
        )
    if count > fills:
        keep = max(1, min(fills, wanted if fan_in else 4))
        return StripeJudgement(
            "WARN",
            f"stripe count {stripe_count} is more than {size} chunk files fill at {stripes}:"
            f" it spans {effective}, and {count - effective} empty OST object(s) are made and"
            " removed with every file",
            f"{setstripe(keep, stripe_size, path)}  # new files only",
            effective,
            rules,
        )
    covered = (
        (f", >= {wanted} nodes" if wanted == nodes else f", >= its {wanted} OSTs")
        if fan_in and nodes > 1
        else ""
    )
    return StripeJudgement(
        "PASS",
        f"{size} chunk files span {upto}{effective} OST(s)"
        f" ({layout_flags(stripe_count, stripe_size)}){covered}",
        "",
        effective,
        rules,
    )


def _applies(nodes: int, fan_in: bool) -> str:
    """Whether the article's line applies to these chunk files, in words."""
    if nodes == 1:
        return "one node here: nothing fans in"
    if fan_in:
        return "applies here: every node may read the same chunk"
    return "not here: no prefix is shared, each chunk file is read by the one node restoring it"
