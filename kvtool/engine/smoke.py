"""``kvtool engine smoke``: real KV-sized chunks through every path of the engine, every byte
compared.

The scenario (docs/engine.md): sessions that share a system-prompt chunk are prefilled into T1
(``prefill``), which passes its pressure line so chunks leave for T2 (``pressure eviction``);
the clock is advanced past the idle thresholds so T2 empties into T3 (``idle demotion to T3``),
and, while session 0 is in use, the rest of T3 into T4 (``idle demotion to T4``); the node is
lost and session 0 comes back from T3 (``node loss, recovery from T3``); another process, a
second node, reads the shared prefix and session 0 from T3 (``second node reads T3``); session 1
is promoted from T4 back into T1 (``promotion from T4``); a chunk file is corrupted and the
engine must refuse it, quarantine it and recompute (``corrupt chunk detected``); T3 refuses
every write while a fresh session idles in T2, which must go on to T4 and survive the node's
loss (``T3 refuses writes, T4 takes them``); finally the shared prefix's TTL runs out (``TTL
expiry``).

Chunk contents are a function of the key (``payload``), so any process can check any chunk.
Idle thresholds and the TTL act on the engine's injected clock, which the scenario advances
rather than sleeping. Time and bandwidth are measured on the real clock.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from kvtool.engine.chunkfile import aligned
from kvtool.engine.engine import Engine
from kvtool.engine.keys import chain_keys, model_fingerprint
from kvtool.engine.manager import Manager
from kvtool.engine.mediums import (
    FolderMedium,
    Medium,
    MediumError,
    local_mediums,
    pool_slots,
    t4_medium,
)
from kvtool.engine.records import TIERS, EngineConfig
from kvtool.errors import InputError
from kvtool.files import write_text
from kvtool.model.shape import KvShape
from kvtool.scratch import Scratch, remove_tree

SEGMENT = 65536
MANIFEST = "manifest.json"
SMOKE_FOLDER = "kvtool-smoke"  # the shared folder two-node phases write and read
PHASES = ("all", "write", "read")


def payload(key: str, nbytes: int) -> bytes:
    """The bytes of chunk ``key``: a 64 KiB block derived from the key, repeated, each 64 KiB
    segment starting with its index (so swapped or repeated segments differ too)."""
    import numpy as np

    base = np.frombuffer(hashlib.shake_128(key.encode()).digest(SEGMENT), dtype=np.uint8)
    segments = -(-nbytes // SEGMENT)
    data = np.tile(base, segments).reshape(segments, SEGMENT)
    data[:, :8] = np.arange(segments, dtype="<u8").view(np.uint8).reshape(segments, 8)
    return data.reshape(-1)[:nbytes].tobytes()


class SmokeClock:
    """Real monotonic time plus a skew the scenario advances."""

    def __init__(self) -> None:
        self.skew = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skew

    def advance(self, seconds: float) -> None:
        self.skew += seconds


class SmokeOptions(NamedTuple):
    """The scenario's shape: chunk size and tokens, sessions and chunks per session, the
    posture, the policy, and the fingerprint of the model the chunks stand for."""

    chunk_bytes: int
    chunk_tokens: int
    fingerprint: str
    sessions: int = 4
    chunks_per_session: int = 4
    posture: str = "lazy"
    policy: str = "lru"
    t2_idle_s: float = 60.0
    t3_idle_s: float = 600.0
    shared_ttl_s: float = 3600.0
    io_threads: int = 32


def smoke_options(
    shape: KvShape,
    *,
    chunk_tokens: int = 256,
    sessions: int = 4,
    chunks_per_session: int = 4,
    posture: str = "lazy",
    policy: str = "lru",
    io_threads: int = 32,
) -> SmokeOptions:
    """The scenario for ``shape``'s chunks (one rank's ``chunk_tokens`` tokens each, keys
    fingerprinted by model, dtype, engine, tp and chunk size). InputError for a posture or
    policy the engine does not know, or fewer than 2 chunks per session."""
    if chunks_per_session < 2:
        raise InputError("--chunks must be at least 2", "a shared chunk and one of its own")
    if sessions < 3:  # session 0 stays in use, 1 comes back from T4, 2 meets the expired TTL
        raise InputError(
            f"--sessions must be at least 3, got {sessions}",
            "the scenario keeps one in use, promotes one from T4 and expires one's prefix",
        )
    EngineConfig(posture=posture, policy=policy)  # validates both
    layout = f"{shape.rules.name}-tp{shape.tp}-chunk{chunk_tokens}"
    return SmokeOptions(
        chunk_bytes=shape.chunk_bytes(chunk_tokens),
        chunk_tokens=chunk_tokens,
        fingerprint=model_fingerprint(shape.spec.name, shape.fmt.name, layout),
        sessions=sessions,
        chunks_per_session=chunks_per_session,
        posture=posture,
        policy=policy,
        io_threads=io_threads,
    )


MAX_SMOKE_CHUNKS = 1_000_000  # a smoke test, not a load generator: engine replay is for scale
CHUNK_OVERHEAD = 4096  # the index's record, the keys and the lists that name one chunk (estimate)


def smoke_capacity(options: SmokeOptions) -> dict[str, int | None]:
    """The bytes each tier may hold in the scenario: T1 about half the unique chunks, so
    prefill passes its pressure line; T2 every unique chunk; T3 and T4 unbounded."""
    unique = 1 + options.sessions * (options.chunks_per_session - 1)
    return {
        "T1": options.chunk_bytes * max(2, unique // 2),
        "T2": options.chunk_bytes * unique,
        "T3": None,
        "T4": None,
    }


def t2_pool_bytes(options: SmokeOptions) -> int:
    """The bytes T2's pool takes in the scenario (``mediums.pool_slots`` slots of the chunk
    rounded up to 4 KiB): what its ``held_bytes`` reports once it is used."""
    slots = (
        pool_slots(smoke_capacity(options), options.chunk_bytes, batch=options.chunks_per_session)
        or 0
    )
    return slots * aligned(options.chunk_bytes)


class SmokeFootprint(NamedTuple):
    """What a scenario needs at most (an estimate, from the capacities it sets): host memory
    for T2 (its pool, ``t2_pool_bytes``; plain bytes without torch hold no more) and T1 when
    T1 is not on a GPU, plus the index; and disk for T3 (and T4 when it is a folder beside
    T3): every unique chunk and about as many burst chunks, once per tier."""

    unique_chunks: int
    memory_bytes: int
    disk_bytes: int


def smoke_footprint(
    options: SmokeOptions, *, t1_on_gpu: bool, t4_beside_t3: bool
) -> SmokeFootprint:
    """The most the scenario ``options`` describes can hold in memory and on disk."""
    unique = 1 + options.sessions * (options.chunks_per_session - 1)
    chunk = options.chunk_bytes
    t1 = 0 if t1_on_gpu else smoke_capacity(options)["T1"] or 0
    memory = t1 + t2_pool_bytes(options) + CHUNK_OVERHEAD * unique * 2
    disk = 2 * unique * chunk * (2 if t4_beside_t3 else 1)
    return SmokeFootprint(unique, memory, disk)


T3_ROOM = "T3 takes the smoke's writes"  # the step a T3 that cannot is reported as


class Step(NamedTuple):
    """One step's outcome: PASS or FAIL, what was checked, and the I/O it caused per tier."""

    name: str
    status: str
    detail: str
    bytes: int
    seconds: float
    tiers: dict[str, dict[str, float]]

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class Scenario:
    """The engine under test, its sessions and the steps so far."""

    def __init__(
        self,
        options: SmokeOptions,
        mediums: dict[str, Medium],
        *,
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.options = options
        self.clock = SmokeClock()
        capacity = smoke_capacity(options)
        for tier in TIERS:
            if tier not in mediums:
                capacity[tier] = 0
        self.config = EngineConfig(
            capacity_bytes=capacity,
            posture=options.posture,
            policy=options.policy,
            t2_idle_s=options.t2_idle_s,
            t3_idle_s=options.t3_idle_s,
            shared_ttl_s=options.shared_ttl_s,
        )
        self.engine = Engine(
            Manager(self.config, self.clock),
            mediums,
            chunk_bytes=options.chunk_bytes,
            chunk_tokens=options.chunk_tokens,
        )
        self.sessions = [self._keys(s) for s in range(options.sessions)]
        self.steps: list[Step] = []
        self.progress = progress

    def _keys(self, session: int) -> list[str]:
        """A system-prompt chunk shared by all sessions, then the session's own tokens."""
        o = self.options
        rng = random.Random(f"{o.fingerprint}-{session}")
        shared = list(range(o.chunk_tokens))
        own = [
            rng.randrange(1, 128_000) for _ in range(o.chunk_tokens * (o.chunks_per_session - 1))
        ]
        return chain_keys(shared + own, o.chunk_tokens, o.fingerprint)

    # --- running steps ---------------------------------------------------------------------------

    def step(self, name: str, run: Callable[[], tuple[bool, str]]) -> Step:
        """Run one step, measuring the I/O it causes on each tier."""
        self.progress(name)
        before = {t: (io.read_bytes, io.read_s, io.write_bytes, io.write_s)
                  for t, io in self.engine.io.items()}  # fmt: skip
        start = time.perf_counter()
        try:
            ok, detail = run()
        except Exception as exc:  # a step that raises is a FAIL with the reason, not a crash
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - start
        tiers: dict[str, dict[str, float]] = {}
        moved = 0
        for tier, io in self.engine.io.items():
            rb, rs, wb, ws = before[tier]
            read, write = io.read_bytes - rb, io.write_bytes - wb
            if read or write:
                spent = (io.read_s - rs) + (io.write_s - ws)
                tiers[tier] = {
                    "read_bytes": read,
                    "write_bytes": write,
                    "seconds": spent,
                    "bytes_per_s": (read + write) / spent if spent > 0 else 0.0,
                }
                moved += read + write
        result = Step(name, "PASS" if ok else "FAIL", detail, moved, seconds, tiers)
        self.steps.append(result)
        return result

    def _check(self, keys: list[str], expect_hits: int | None = None) -> tuple[bool, str]:
        """Look ``keys`` up and compare every returned byte with what was written."""
        hit = self.engine.lookup(keys)
        wrong = [
            k[:12]
            for k, data in zip(hit.keys, hit.data, strict=True)
            if data != payload(k, self.options.chunk_bytes)
        ]
        if wrong:
            return False, f"bytes differ in {', '.join(wrong)}"
        if expect_hits is not None and len(hit.keys) != expect_hits:
            return False, f"{len(hit.keys)} of {len(keys)} chunks hit, expected {expect_hits}"
        return (
            True,
            f"{len(hit.keys)} of {len(keys)} chunks hit from {_tiers(hit.tiers)}, bytes equal",
        )

    # --- the scenario ------------------------------------------------------------------------

    def prefill(self) -> tuple[bool, str]:
        o = self.options
        for index, keys in enumerate(self.sessions):
            ok, detail = self._check(keys, expect_hits=0 if index == 0 else 1)
            if not ok:
                return False, f"session {index}: {detail}"
            # the shared system prompt with its TTL, then the session's own chunks at once
            self.engine.insert(
                keys[0], payload(keys[0], o.chunk_bytes), o.chunk_tokens, shared=True
            )
            own = keys[1:]
            self.engine.insert_many(own, [payload(k, o.chunk_bytes) for k in own], o.chunk_tokens)
        unique = len({k for keys in self.sessions for k in keys})
        return (
            True,
            f"{unique} unique chunks of {o.chunk_bytes:,} B inserted; the shared prefix hit",
        )

    def pressure(self) -> tuple[bool, str]:
        """A burst of unrelated chunks (a batch job's, each read twice, so that a
        scan-resistant policy such as S3-FIFO keeps them too) until every session chunk has
        left T1: whatever the policy keeps longest, pressure moves it down in the end."""
        m = self.engine.manager
        sessions = {k for keys in self.sessions for k in keys}
        evicted = m.counters["evictions"]
        burst = self._push_out_of_t1(sessions)
        left = [k[:12] for k in sessions if m.where(k) == "T1"]
        if left:
            return False, f"still in T1 after {burst} burst chunks: {left}"
        if m.used["T1"] > m.limit("T1"):
            return False, f"T1 holds {m.used['T1']:,} B, over its line {m.limit('T1'):,.0f} B"
        below = {m.where(k) for k in sessions}
        return True, (
            f"{burst} burst chunk(s) pushed T1 past its {self.config.pressure:.0%} line:"
            f" {m.counters['evictions'] - evicted} eviction(s), the sessions' chunks now in"
            f" {', '.join(sorted(t for t in below if t))}"
        )

    def demote_to_t3(self) -> tuple[bool, str]:
        m = self.engine.manager
        in_t2 = [k for k, c in m.chunks.items() if "T2" in c.tiers]
        already = sum("T3" in m.chunks[k].tiers for k in in_t2)
        self.clock.advance(self.options.t2_idle_s + 1)
        self.engine.tick()
        t3 = self.engine.mediums["T3"]
        missing = [k[:12] for k in in_t2 if not t3.contains(k)]
        if not in_t2:
            return False, "T2 held nothing to demote"
        if m.used["T2"] or missing:
            return False, f"T2 still holds {m.used['T2']:,} B; not in T3: {missing}"
        return True, (
            f"{len(in_t2)} chunk(s) idle {self.options.t2_idle_s:g} s left T2 for T3"
            f" ({len(in_t2) - already} written, {already} already there)"
        )

    def demote_to_t4(self) -> tuple[bool, str]:
        m = self.engine.manager
        ok, detail = self._check(self.sessions[0])  # session 0 in use: its chunks stay fresh
        if not ok:
            return False, detail
        self.clock.advance(self.options.t3_idle_s - self.options.t2_idle_s + 1)
        idle = [k for k, c in m.chunks.items() if "T3" in c.tiers and k not in self.sessions[0]]
        self.engine.tick()
        t4 = self.engine.mediums["T4"]
        missing = [k[:12] for k in idle if not t4.contains(k)]
        if missing or not idle:
            return False, f"not in T4: {missing}" if idle else "no chunk was idle in T3"
        kept = [k for k in self.sessions[0] if m.where(k) is not None]
        return True, (
            f"{len(idle)} chunk(s) idle {self.options.t3_idle_s:g} s moved T3 -> T4;"
            f" session 0's {len(kept)} stayed"
        )

    def node_loss(self) -> tuple[bool, str]:
        self.engine.drop_local()
        m = self.engine.manager
        if m.used["T1"] or m.used["T2"]:
            return False, "T1 or T2 still holds chunks after the loss"
        ok, detail = self._check(self.sessions[0], expect_hits=len(self.sessions[0]))
        return ok, "T1 and T2 dropped; " + detail

    def promote_from_t4(self) -> tuple[bool, str]:
        keys = self.sessions[1]
        m = self.engine.manager
        before = [m.where(k) for k in keys]
        ok, detail = self._check(keys, expect_hits=len(keys))
        if not ok:
            return False, detail
        if "T4" not in before:
            return False, f"session 1 was not in T4 ({_tiers([t or '-' for t in before])})"
        not_t1 = [k[:12] for k in keys if m.where(k) != "T1"]
        if not_t1:
            return False, f"not promoted into T1: {not_t1}"
        return True, detail + "; now in T1"

    def corrupt(self, t3_root: Path) -> tuple[bool, str]:
        keys = self.sessions[0]
        self.engine.drop_local()  # so the read must come from T3
        victim = keys[1]
        path = t3_root / "chunks" / victim[:2] / victim[2:4] / f"{victim}.kv"
        if not path.is_file():
            return False, f"{victim[:12]} is not in T3 to corrupt"
        with open(path, "r+b") as f:
            f.seek(4096 + self.options.chunk_bytes // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x01]))
        before = self.engine.manager.counters["corrupt"]
        ok, detail = self._check(keys, expect_hits=1)
        counted = self.engine.manager.counters["corrupt"] - before
        quarantined = list((t3_root / "quarantine").glob(f"{victim}.kv.*"))
        if not ok or counted != 1 or not quarantined or path.exists():
            return False, f"{detail}; corrupt counted {counted}, quarantined {len(quarantined)}"
        data = payload(victim, self.options.chunk_bytes)
        self.engine.insert(victim, data, self.options.chunk_tokens)  # recomputed
        again, detail2 = self._check(keys, expect_hits=len(keys))
        return again, (
            f"one flipped bit in {victim[:12]}: served 1 of {len(keys)} chunks, the file"
            f" quarantined, the chunk recomputed; then {detail2}"
        )

    def ttl(self) -> tuple[bool, str]:
        m = self.engine.manager
        before = m.counters["expired"]
        self.clock.advance(self.options.shared_ttl_s + 1)
        ok, detail = self._check(self.sessions[2], expect_hits=0)
        expired = m.counters["expired"] - before
        shared = self.sessions[2][0]
        if not ok or expired != 1 or m.where(shared) is not None:
            return False, f"{detail}; expired counted {expired}"
        gone = not any(med.contains(shared) for med in self.engine.mediums.values())
        if not gone:
            return False, "the expired chunk is still stored"
        return True, (
            f"the shared prefix expired after its {self.options.shared_ttl_s:g} s TTL: a miss,"
            " dropped from every tier"
        )

    def t3_refuses(self) -> tuple[bool, str]:
        """T3 refuses every write (ENOSPC, injected at its medium) while a fresh session's
        chunks sit idle in T2: they must go on to T4 in the idle tick, T2's copies deleted
        only after T4's are there, and come back from T4 after the node is lost."""
        engine, m, o = self.engine, self.engine.manager, self.options
        t3 = engine.mediums["T3"]
        keys = self._keys(len(self.sessions))[1:]  # no chunk any other step touches
        refused = engine.faults.counts.get("move T2->T3", 0)
        engine.mediums["T3"] = _Refusing(t3)
        try:
            engine.insert_many(keys, [payload(k, o.chunk_bytes) for k in keys], o.chunk_tokens)
            self._push_out_of_t1(set(keys))
            in_t2 = [k for k in keys if m.where(k) == "T2"]
            if not in_t2:
                return False, "none of the session's chunks reached T2 (is T2 on?)"
            self.clock.advance(o.t2_idle_s + 1)
            engine.tick()
        finally:
            engine.mediums["T3"] = t3
        t4 = engine.mediums["T4"]
        missing = [k[:12] for k in in_t2 if m.where(k) != "T4" or not t4.contains(k)]
        if missing:
            return False, f"not moved on to T4 while T3 refused: {missing}"
        refused = engine.faults.counts.get("move T2->T3", 0) - refused
        engine.drop_local()
        ok, detail = self._check(in_t2, expect_hits=len(in_t2))
        return ok, (
            f"T3 refused {refused:,} write(s): {len(in_t2)} idle chunk(s) went from T2 on to"
            f" T4; after node loss {detail}"
        )

    def _push_out_of_t1(self, keys: set[str]) -> int:
        """Insert unrelated chunks (each read twice, so a scan-resistant policy such as
        S3-FIFO keeps them too) until none of ``keys`` is in T1; how many it took."""
        m, o = self.engine.manager, self.options
        burst, limit = 0, 20 * (len(keys) + 2)
        while any(m.where(k) == "T1" for k in keys) and burst < limit:
            key = chain_keys([-1 - burst] * o.chunk_tokens, o.chunk_tokens, o.fingerprint)[0]
            self.engine.insert(key, payload(key, o.chunk_bytes), o.chunk_tokens)
            for _ in range(2):
                self.engine.lookup([key])
            burst += 1
        return burst

    def manifest(self) -> dict[str, Any]:
        """What a second node needs to find and check the shared prefix and session 0."""
        o = self.options
        return {
            "fingerprint": o.fingerprint,
            "chunk_bytes": o.chunk_bytes,
            "chunk_tokens": o.chunk_tokens,
            "keys": self.sessions[0],
        }


class _Refusing:
    """A medium whose writes fail as a full file system's do; everything else is its own."""

    def __init__(self, medium: Medium) -> None:
        self.medium = medium
        self.tier = medium.tier

    def put(self, key: str, data: bytes | memoryview) -> None:
        raise MediumError(f"{self.tier} write of {key[:12]}: No space left on device (injected)")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.medium, name)


def _tiers(tiers: list[str]) -> str:
    counts: dict[str, int] = {}
    for tier in tiers:
        counts[tier] = counts.get(tier, 0) + 1
    return ", ".join(f"{n} {t}" for t, n in counts.items()) or "none"


def write_manifest(folder: Path, data: dict[str, Any]) -> Path:
    """The manifest, written whole (through the one writer)."""
    target = folder / MANIFEST
    write_text(target, json.dumps(data))
    return target


def read_phase(t3_root: Path, mediums: dict[str, Medium], *, io_threads: int = 32) -> Step:
    """The second node: a fresh engine over the same T3 finds the manifest's chunks there,
    promotes them into its own T1, and compares every byte."""
    manifest = json.loads((t3_root / MANIFEST).read_text())
    options = SmokeOptions(
        chunk_bytes=int(manifest["chunk_bytes"]),
        chunk_tokens=int(manifest["chunk_tokens"]),
        fingerprint=str(manifest["fingerprint"]),
        io_threads=io_threads,
    )
    scenario = Scenario(options, mediums)
    keys = [str(k) for k in manifest["keys"]]
    return scenario.step("second node reads T3", lambda: scenario._check(keys, len(keys)))


class SmokeReport(NamedTuple):
    """Every step, the engine's counters, what each tier was, and the faults it met."""

    steps: list[Step]
    counters: dict[str, int]
    mediums: dict[str, str]
    faults: list[str]

    @property
    def passed(self) -> bool:
        """True when every step passed (every byte compared equal)."""
        return bool(self.steps) and all(s.status == "PASS" for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "steps": [s.to_json() for s in self.steps],
            "counters": self.counters,
            "mediums": self.mediums,
            "faults": self.faults,
        }


def run_smoke(
    options: SmokeOptions,
    mediums: dict[str, Medium],
    *,
    t3_root: Path,
    phase: str = "all",
    second_node: Callable[[Path], Step] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> SmokeReport:
    """The scenario (``phase`` ``all``), or its writing half (``write``: up to the node loss,
    then the manifest for ``--phase read`` on another node)."""
    s = Scenario(options, mediums, progress=progress)
    try:
        s.step("prefill", s.prefill)
        s.step("pressure eviction", s.pressure)
        s.step("idle demotion to T3", s.demote_to_t3)
        s.step("idle demotion to T4", s.demote_to_t4)
        s.step("node loss, recovery from T3", s.node_loss)
        try:
            write_manifest(t3_root, s.manifest())
        except InputError as exc:  # T3 went away or read-only under the run: its finding
            s.steps.append(Step("manifest for a second node", "FAIL",
                                f"T3 took no manifest: {exc.message}", 0, 0.0, {}))  # fmt: skip
            second_node = None  # it would find none
        if phase == "all":
            if second_node is not None:
                progress("second node reads T3")
                s.steps.append(second_node(t3_root))
            s.step("promotion from T4", s.promote_from_t4)
            s.step("corrupt chunk detected", lambda: s.corrupt(t3_root))
            if "T2" in mediums and "T4" in mediums:
                s.step("T3 refuses writes, T4 takes them", s.t3_refuses)
            s.step("TTL expiry", s.ttl)
    finally:
        s.engine.close()
    return SmokeReport(
        s.steps,
        dict(s.engine.manager.counters),
        {tier: medium.description for tier, medium in mediums.items()},
        s.engine.faults.summary(),
    )


class SmokeTargets(NamedTuple):
    """Where the smoke runs: ``t3_dir`` a folder on T3 (None: a temporary folder, removed),
    ``t4_url`` ``s3://bucket/prefix`` or ``file:///path`` (None: a folder beside T3's), the
    ``phase`` (``all``, or ``write`` then ``read`` on two nodes), and whether to ``keep``
    what it wrote."""

    t3_dir: Path | None = None
    t4_url: str | None = None
    phase: str = "all"
    keep: bool = False
    folder_name: str = ""
    io_threads: int = 32


class SmokeOutcome(NamedTuple):
    """A smoke's report, the folder it used, and whether that folder was kept."""

    report: SmokeReport
    folder: Path
    phase: str
    kept: bool
    cleanup_failures: tuple[str, ...] = ()  # what could not be removed (S3 down), and why
    swept: tuple[Path, ...] = ()  # what SIGKILLed smokes of this host had left, removed now
    swept_bytes: int = 0


SecondNode = Callable[[Path, str], Step]  # (the T3 base folder, the smoke folder's name)


def smoke_command(
    options: SmokeOptions | None,
    targets: SmokeTargets,
    *,
    torch: Any,
    s3_client: Callable[[], Any],
    second_node: SecondNode | None = None,
    progress: Callable[[str], None] = lambda _: None,
    no_gpu: str | None = None,
    t3_fault: str | None = None,
) -> SmokeOutcome:
    """``kvtool engine smoke``: the folder's whole life (made, used, removed unless kept or
    written for a second node), the mediums, and the phase. ``options`` may be None only for
    ``--phase read``, which takes the shape from the manifest. InputError for targets that
    cannot work (a phase without a shared folder, a read without a manifest). ``no_gpu`` says
    why torch has no CUDA device, for T1's description. A T3 that cannot take the smoke
    (``t3_fault``: too little free; or read-only, full or not this user's when its folder is
    made) is the report's one FAIL step, ``T3_ROOM``: the tier's finding, exit 1."""
    import tempfile

    phase = targets.phase
    if phase not in PHASES:
        raise InputError(f"unknown --phase {phase!r}", "choose all, write or read")
    if phase != "all" and targets.t3_dir is None:
        raise InputError(f"--phase {phase} needs the shared folder", "add --t3-dir /fsx/kvtool")
    if targets.t3_dir is not None and not targets.t3_dir.is_dir():
        raise InputError(
            f"--t3-dir {targets.t3_dir} is not a folder", "pass an existing folder on T3"
        )
    name = targets.folder_name or (SMOKE_FOLDER if phase != "all" else _unique())
    if phase == "read":
        shared = targets.t3_dir / name if targets.t3_dir is not None else Path(name)
        if shared.is_symlink():  # its quarantine and clean-up would act where the link points
            raise InputError(
                f"{shared} is a link to {os.readlink(shared)}: the read phase reads only the"
                " folder --phase write made",
                "run --phase write with the same --t3-dir first (it replaces the link)",
            )
        if not (shared / "t3" / MANIFEST).is_file():
            raise InputError(
                f"no smoke manifest in {shared}", "run --phase write with the same --t3-dir first"
            )
    if t3_fault is not None:
        where = targets.t3_dir or Path(tempfile.gettempdir())
        return SmokeOutcome(_t3_failed(t3_fault), where, phase, kept=False)
    removing = phase != "write" and not targets.keep
    # the clean-ups run however this ends (errors, SIGINT, SIGTERM, SIGHUP), last first:
    # the mediums closed, the T4 folder or prefix, the smoke folder, the temporary folder
    with Scratch() as cleanup:
        if targets.t3_dir is not None:
            base = targets.t3_dir
        elif removing:
            base = cleanup.temporary_folder("kvtool-smoke-")
        else:  # --keep: the temporary folder stays, and the report names it
            base = Path(tempfile.mkdtemp(prefix="kvtool-smoke-"))
        root = base / name
        try:
            if removing and phase == "all" and targets.t3_dir and not targets.folder_name:
                # with an owner file: what a SIGKILLed run leaves, the next run sweeps
                root = cleanup.folder(base, f"{SMOKE_FOLDER}-")
                name = root.name
            else:
                created = not root.exists()
                if removing and (created or phase == "read"):  # never one it did not make
                    cleanup.path(root)
                if phase == "write" and not created:
                    remove_tree(root)  # kvtool's own folder: a fresh write, not a mix
                root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in T3_REFUSES:  # the tier's finding: exit 1, not bad usage
                why = f"cannot write in {base}: {exc.strerror or exc}"
                return SmokeOutcome(_t3_failed(why), base, phase, kept=False)
            raise InputError(f"cannot write {root}: {exc.strerror or exc}") from None
        threads = targets.io_threads
        if options is None:  # --phase read: the second node's T2 is never used
            mediums = local_mediums(torch, no_gpu=no_gpu)
        else:
            slots = pool_slots(
                smoke_capacity(options), options.chunk_bytes, batch=options.chunks_per_session
            )
            mediums = local_mediums(
                torch, chunk_bytes=options.chunk_bytes, t2_slots=slots, no_gpu=no_gpu
            )
        mediums["T3"] = FolderMedium("T3", root / "t3", io_threads=threads)
        if targets.t4_url is None:
            mediums["T4"] = FolderMedium("T4", root / "t4", io_threads=threads)
        else:
            mediums["T4"] = t4_medium(
                targets.t4_url, name, io_threads=threads, client_factory=s3_client
            )
            if phase == "write":  # kvtool's own folder or prefix: a fresh write, as on T3
                _remove_t4(mediums["T4"])
        if removing:
            cleanup.on_exit(_remove_t4, mediums["T4"])
        cleanup.on_exit(_close_all, mediums)  # closed first, then T4 and the folders go
        if phase == "read":
            step = read_phase(root / "t3", mediums, io_threads=threads)
            described = {t: m.description for t, m in mediums.items()}
            report = SmokeReport([step], {}, described, [])
        else:
            assert options is not None
            report = run_smoke(
                options,
                mediums,
                t3_root=root / "t3",
                phase=phase,
                second_node=None
                if phase != "all" or second_node is None
                else (lambda _root: second_node(base, name)),
                progress=progress,
            )
    kept = targets.keep or phase == "write"
    swept = (tuple(cleanup.swept), cleanup.swept_bytes)
    return SmokeOutcome(report, root, phase, kept, tuple(cleanup.failures), *swept)


# a T3 folder that cannot be made for these is T3's fault; another error is the path given
T3_REFUSES = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EIO}


def _t3_failed(why: str) -> SmokeReport:
    return SmokeReport([Step(T3_ROOM, "FAIL", why, 0, 0.0, {})], {}, {}, [])


def _close_all(mediums: dict[str, Medium]) -> None:
    for medium in mediums.values():
        medium.close()


def _unique() -> str:
    return f"{SMOKE_FOLDER}-{os.getpid()}-{secrets.token_hex(3)}"


def _remove_t4(medium: Medium | None) -> None:
    """Delete what the smoke wrote on T4: its S3 prefix, or its folder."""

    from kvtool.engine.mediums import S3Medium

    if isinstance(medium, S3Medium):
        medium.delete_prefix()
    elif isinstance(medium, FolderMedium):
        remove_tree(medium.root)


def second_node_process(
    *, io_threads: int, run: Callable[[list[str]], tuple[int, str, str]]
) -> SecondNode:
    """A second process standing in for another node: ``kvtool engine smoke --phase read`` on
    the same T3 folder, run through ``run`` (argv -> exit status, stdout, stderr)."""
    import sys

    def second(base: Path, name: str) -> Step:
        argv = [sys.executable, "-m", "kvtool", "engine", "smoke", "--phase", "read",
                "--t3-dir", str(base), "--folder-name", name, "--keep", "--json",
                "--io-threads", str(io_threads)]  # fmt: skip
        returncode, stdout, stderr = run(argv)
        try:
            return Step(**json.loads(stdout)["steps"][0])
        except (ValueError, KeyError, IndexError, TypeError):
            last = (stderr or stdout).strip().splitlines()
            reason = last[-1] if last else f"exit status {returncode}"
            return Step("second node reads T3", "FAIL", f"the second process: {reason}", 0, 0.0, {})

    return second
