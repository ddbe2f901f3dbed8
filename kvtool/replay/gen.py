"""Synthetic traces from a workload description, in kvtool's trace format. Pure and seeded.

Sessions arrive as a Poisson process (``arrival_rate`` per second). Each session picks one of
``system_prompts`` shared system prompts and, with probability ``rag_share``, one of
``rag_preambles`` shared retrieved documents; then it runs a number of turns (geometric, mean
``turns``). Each turn sends the whole conversation so far plus a new user message (lognormal
lengths around ``user_tokens``) and gets an answer (around ``output_tokens``); the next turn
follows after a think time (exponential, mean ``think_s``). ``max_context`` caps every request:
a message is cut to the room left under it, and a session with no room left ends.

Block ids follow the prefix semantics of Mooncake's traces: a block's id stands for its tokens
and everything before them, so the shared system prompt and RAG preamble give every session the
same leading ids, and each conversation's history keeps its own. Ids are assigned in order of
first appearance.
"""

from __future__ import annotations

import heapq
import json
import math
import random
from collections.abc import Iterator
from typing import Any, NamedTuple

from kvtool.errors import InputError

# a trace of about 14 GB (100,000 requests of the default workload write 14.0 MB): more is a
# typo (2**64), not a workload
MAX_REQUESTS = 100_000_000


class Workload(NamedTuple):
    """What ``kvtool engine gen`` models."""

    requests: int = 10_000
    arrival_rate: float = 2.0  # new sessions per second
    turns: float = 4.0  # mean turns per session
    think_s: float = 30.0  # mean seconds between a reply and the next turn
    system_prompts: int = 8
    system_tokens: int = 2_000
    rag_preambles: int = 200
    rag_share: float = 0.3
    rag_tokens: int = 6_000
    user_tokens: int = 300
    output_tokens: int = 400
    max_context: int = 128_000
    block_tokens: int = 512
    seed: int = 1

    def checked(self) -> Workload:
        """This workload, or InputError naming the option (``--think``...) out of range."""
        options = {
            "--system-prompts": self.system_prompts, "--rag-preambles": self.rag_preambles,
            "--system-tokens": self.system_tokens, "--rag-tokens": self.rag_tokens,
            "--user-tokens": self.user_tokens, "--output-tokens": self.output_tokens,
            "--block-tokens": self.block_tokens, "--requests": self.requests,
            "--max-context": self.max_context,
        }  # fmt: skip
        for name, value in options.items():
            if value < 1:
                raise InputError(f"{name} must be at least 1, got {value}")
        if self.requests > MAX_REQUESTS:
            raise InputError(
                f"--requests {self.requests:,} is more than kvtool generates ({MAX_REQUESTS:,}:"
                " about 14 GB of trace)",
                "generate several traces with other --seed values",
            )
        shared = self.system_tokens + (self.rag_tokens if self.rag_share > 0 else 0)
        if shared >= self.max_context:
            raise InputError(
                f"--system-tokens {self.system_tokens:,}"
                + (f" + --rag-tokens {self.rag_tokens:,}" if self.rag_share > 0 else "")
                + f" leave no room for a message under --max-context {self.max_context:,}",
                "raise --max-context or shorten the shared prefixes",
            )
        if not 0 <= self.rag_share <= 1:  # NaN fails this too
            raise InputError(f"--rag-share must be between 0 and 1, got {self.rag_share}")
        for name, positive, most in (
            ("--arrival-rate", self.arrival_rate, 1e6),  # requests per second
            ("--think", self.think_s, 86_400.0 * 30),  # seconds between turns: a month
            ("--turns", self.turns, 1e4),
        ):
            if not 0 < positive < math.inf:  # NaN and inf fail this too
                raise InputError(f"{name} must be a positive number, got {positive}")
            if positive > most:
                raise InputError(
                    f"{name} {positive:g} is over {most:,g}", "give a mean a trace can have"
                )
        return self


class _Session:
    """A conversation: its prompt so far as segments, and the ids of its full blocks."""

    __slots__ = ("ids", "left", "number", "segments", "tokens")

    def __init__(self, number: int, segments: list[tuple[str, int]], turns: int) -> None:
        self.number = number
        self.segments = segments  # (segment name, tokens); shared ones are sys* and rag*
        self.tokens = sum(n for _, n in segments)
        self.ids: list[int] = []  # ids of the full blocks already named
        self.left = turns


def _lognormal(rng: random.Random, mean: float) -> int:
    sigma = 0.8
    return max(1, int(rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)))


def generate(w: Workload) -> Iterator[dict[str, Any]]:
    """The header, then one request record per line, in arrival order."""
    rng = random.Random(w.seed)
    yield {
        "kvtool_trace": 1,
        "block_tokens": w.block_tokens,
        "generator": "kvtool engine gen",
        "workload": w._asdict(),
    }
    ids = _Ids()
    events: list[tuple[float, int, _Session]] = []
    order = 0
    next_session = 0.0
    sessions = 0
    emitted = 0
    while emitted < w.requests:
        # the next event: a new session's first turn, or a waiting session's next turn
        if not events or next_session <= events[0][0]:
            now = next_session
            next_session += rng.expovariate(w.arrival_rate)
            segments = [(f"sys{rng.randrange(w.system_prompts)}", w.system_tokens)]
            if rng.random() < w.rag_share:
                segments.append((f"rag{rng.randrange(w.rag_preambles)}", w.rag_tokens))
            turns = 1 + int(rng.expovariate(1 / max(w.turns - 1, 1e-9))) if w.turns > 1 else 1
            sessions += 1
            session = _Session(sessions, segments, turns)
            name = f"s{sessions}-u"
        else:
            now, _, session = heapq.heappop(events)
            name = f"s{session.number}-{len(session.segments)}u"
        # --max-context caps every request: the new message is cut to the room that is left
        room = w.max_context - sum(n for _, n in session.segments)
        session.segments.append((name, max(1, min(_lognormal(rng, w.user_tokens), room))))
        session.tokens = sum(n for _, n in session.segments)
        blocks = _block_ids(session, w.block_tokens, ids)
        output = _lognormal(rng, w.output_tokens)
        yield {
            "timestamp": round(now * 1000),
            "input_length": session.tokens,
            "output_length": output,
            "hash_ids": blocks,
        }
        emitted += 1
        session.left -= 1
        session.segments.append((f"s{session.number}-{len(session.segments)}a", output))
        if session.left > 0 and session.tokens + output < w.max_context:  # room for a turn
            order += 1
            heapq.heappush(events, (now + rng.expovariate(1 / w.think_s), order, session))


class _Ids:
    """Block ids in order of first appearance. Only blocks made wholly of shared segments
    (system prompts, RAG preambles) can recur, so only they are remembered: memory grows with
    the shared blocks, not with every block ever named."""

    def __init__(self) -> None:
        self.shared: dict[tuple[Any, ...], int] = {}
        self.next = 0

    def name(self, parent: int, content: tuple[tuple[str, int, int], ...]) -> int:
        if all(piece[0].startswith(("sys", "rag")) for piece in content):
            key = (parent, content)
            found = self.shared.get(key)
            if found is not None:
                return found
            self.shared[key] = self.next
        self.next += 1
        return self.next - 1


def _block_ids(session: _Session, block_tokens: int, ids: _Ids) -> list[int]:
    """The ids of every block of the session's prompt, naming only blocks not yet named."""
    start_token = len(session.ids) * block_tokens
    pieces: list[tuple[str, int, int]] = []
    offset = 0
    for name, n in session.segments:
        lo, hi = max(offset, start_token), offset + n
        if hi > lo:
            pieces.append((name, lo - offset, hi - offset))
        offset += n
    current: list[tuple[str, int, int]] = []
    room = block_tokens
    parent = session.ids[-1] if session.ids else -1
    for name, lo, hi in pieces:
        while lo < hi:
            take = min(room, hi - lo)
            current.append((name, lo, lo + take))
            lo += take
            room -= take
            if room == 0:  # a full block: named once, kept for the session's next turns
                parent = ids.name(parent, tuple(current))
                session.ids.append(parent)
                current, room = [], block_tokens
    out = list(session.ids)
    if current:  # the partial last block: named now, not kept (the next turn extends it)
        out.append(ids.name(parent, tuple(current)))
    return out


def estimated_bytes(w: Workload, *, sample: int = 2000) -> int:
    """What ``write_lines(w)`` writes, from its first ``sample`` lines (a fifth more, for the
    sessions' growing contexts)."""
    lines = write_lines(w._replace(requests=min(sample, w.requests)))
    seen = sum(len(line.encode()) for line in lines)
    return int(seen / min(sample, w.requests) * w.requests * 1.2)


def write_lines(w: Workload) -> Iterator[str]:
    """``generate`` as JSON lines."""
    for record in generate(w):
        yield json.dumps(record, separators=(",", ":")) + "\n"
