"""The engine: the manager's decisions carried out by the mediums, with every byte checked.

``Engine`` is the Python API (docs/engine.md): ``lookup`` a sequence's chunk keys and get the
verified bytes of its cached prefix, ``insert`` a computed chunk, ``tick`` for idle demotions,
``drop_local`` when a node is lost. A move that a medium cannot do (T3 full or read-only, S3
down) is reverted in the index and recorded in ``faults``: the chunk stays where it was and the
engine keeps serving from the tiers that work. A chunk that fails its checks on the way up is
a miss (the caller recomputes it), counted, and never returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from kvtool.engine.chunkfile import CorruptChunk, check_key
from kvtool.engine.manager import Manager
from kvtool.engine.mediums import Medium, MediumError, MemoryMedium, dma_pair, transfer
from kvtool.engine.records import SHARED_TIERS, TIERS, Move
from kvtool.errors import redact

SHARED = frozenset(SHARED_TIERS)


class Hit(NamedTuple):
    """A lookup's answer: the keys of the leading chunks served, their bytes (as read back
    into T1 and checked), the tier each came from, and whether the plan chose recompute."""

    keys: list[str]
    data: list[bytes]
    tiers: list[str]
    recompute: bool


class Faults:
    """What went wrong, summarised: a count per kind and the first few messages, so a failing
    tier costs constant memory however long it fails."""

    KEEP = 20

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: list[str] = []

    def add(self, kind: str, message: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if len(self.examples) < self.KEEP:
            self.examples.append(redact(message))

    def __len__(self) -> int:
        return sum(self.counts.values())

    def __bool__(self) -> bool:
        return bool(self.counts)

    def __iter__(self) -> Iterator[str]:
        return iter(self.examples)

    def summary(self) -> list[str]:
        """One line per kind with its count, then the first messages."""
        return [f"{kind}: {n:,}" for kind, n in self.counts.items()] + self.examples


class TierIO:
    """Bytes and seconds spent reading and writing one tier's medium."""

    __slots__ = ("read_bytes", "read_s", "write_bytes", "write_s")

    def __init__(self) -> None:
        self.read_bytes = self.write_bytes = 0
        self.read_s = self.write_s = 0.0


class TierFault(MediumError):
    """A medium error and the tier whose medium raised it (the source read or the
    destination written), so the right tier is passed over for a while."""

    def __init__(self, tier: str, error: MediumError, *, reading: bool = False) -> None:
        super().__init__(str(error))
        self.tier = tier
        self.reading = reading  # a read failed: the tier's own chunks stay put a while too


READ_AHEAD_BYTES = 1 << 30  # what one batch's reads ahead may hold in memory at once


class ReadAhead:
    """The reads of one batch of moves that no write in it can change (the first move of each
    chunk, out of a folder tier), fetched ahead in windows on that tier's I/O threads, so a
    session reloaded from T3 reads its chunks in parallel. A window holds at most the tier's
    ``io_threads`` chunks and ``READ_AHEAD_BYTES``."""

    def __init__(self, mediums: dict[str, Medium], moves: Sequence[Move], chunk_bytes: int):
        self.mediums = mediums
        first: dict[str, Move] = {}
        for move in moves:
            first.setdefault(move.key, move)
        self.queue: dict[str, list[str]] = {}
        for move in first.values():
            medium = mediums.get(move.src or "")
            if move.kind in ("move", "copy") and hasattr(medium, "get_many"):
                self.queue.setdefault(move.src or "", []).append(move.key)
        self.next = dict.fromkeys(self.queue, 0)
        self.position = {
            (tier, key): i for tier, keys in self.queue.items() for i, key in enumerate(keys)
        }
        self.ready: dict[tuple[str, str], bytes | Exception | None] = {}
        self.chunk_bytes = max(chunk_bytes, 1)

    def take(self, tier: str, key: str) -> tuple[bool, bytes | Exception | None]:
        """(True, what the read gave) when ``key`` is read ahead from ``tier``; (False, None)
        when the caller must read it itself."""
        if (tier, key) in self.ready:
            return True, self.ready.pop((tier, key))
        start = self.position.get((tier, key))
        if start is None or start < self.next[tier]:
            return False, None
        queue = self.queue[tier]
        medium = self.mediums[tier]
        threads = max(1, int(getattr(medium, "io_threads", 1)))
        window = queue[start : start + max(1, min(threads, READ_AHEAD_BYTES // self.chunk_bytes))]
        self.next[tier] = start + len(window)
        if len(window) == 1:
            return False, None
        results = medium.get_many(window)  # type: ignore[attr-defined]
        self.ready.update(zip(((tier, k) for k in window), results, strict=True))
        return True, self.ready.pop((tier, key))


class Engine:
    """A ``Manager`` and one ``Medium`` per enabled tier."""

    def __init__(
        self,
        manager: Manager,
        mediums: dict[str, Medium],
        *,
        chunk_bytes: int,
        chunk_tokens: int,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.manager = manager
        self.mediums = mediums
        self.chunk_bytes = chunk_bytes
        self.chunk_tokens = chunk_tokens
        self.timer = timer
        self.io = {tier: TierIO() for tier in TIERS}
        self.faults = Faults()
        # chunks that a failed write to a shared tier left on this node alone, and that fault;
        # bounded by what T1 and T2 hold (an entry goes when a shared copy is made or the
        # chunk leaves the index; ``drop_local`` counts those it loses)
        self.at_risk: dict[str, str] = {}

    # --- the API -------------------------------------------------------------------------------

    def lookup(self, keys: Sequence[str]) -> Hit:
        """The longest cached prefix of ``keys``, brought into T1 and checked. Chunks another
        node wrote to a shared tier are found there and indexed first. A key that is not a
        chunk key is a ValueError."""
        for key in keys:
            check_key(key)
        self._adopt_shared(keys)
        found = self.manager.lookup(keys)
        if found.recompute:
            self.execute(found.moves)
            return Hit([], [], [], recompute=True)
        failed = self.execute(found.moves)
        out = Hit([], [], [], recompute=False)
        for key, tier in found.hits:
            if key in failed:
                break  # a chunk that could not be brought up ends the usable prefix
            try:
                data = self._read("T1", key) if "T1" in self.mediums else None
            except CorruptChunk as exc:  # T1 deleted it: a miss, recomputed by the caller
                self.manager.corrupt(key, "T1")
                self.faults.add("corrupt", f"T1 {key[:12]}: corrupt ({exc})")
                break
            if data is None:
                break
            out.keys.append(key)
            out.data.append(data)
            out.tiers.append(tier)
        return out

    def insert(self, key: str, data: bytes, tokens: int, *, shared: bool = False) -> None:
        """A chunk just computed (prefill), as bytes; ``shared`` chunks get the TTL. A key that
        is not a chunk key is a ValueError before the index changes."""
        check_key(key)
        self.execute(self.manager.insert(key, len(data), tokens, shared=shared), {key: data})

    def insert_many(
        self, keys: Sequence[str], data: Sequence[bytes], tokens: int, *, shared: bool = False
    ) -> None:
        """A request's computed chunks at once (``insert`` for each, room made once after the
        last, the request's own chunks kept in T1 if anything else can go). Every chunk is the
        same size. A key that is not a chunk key is a ValueError before the index changes."""
        if len(keys) != len(data):
            raise ValueError(f"{len(keys)} keys and {len(data)} chunks")
        if not keys:
            return
        sizes = {len(d) for d in data}
        if len(sizes) != 1:
            raise ValueError("chunks of one request are of one size")
        for key in keys:
            check_key(key)
        manager = self.manager
        moves = manager.insert_many(keys, sizes.pop(), tokens, shared=shared)
        self.execute(moves + manager.settle(keys), dict(zip(keys, data, strict=True)))

    def tick(self) -> None:
        """Carry out the idle demotions due now."""
        self.execute(self.manager.tick())

    def drop_local(self) -> None:
        """The node is lost: T1 and T2 forgotten and their memory freed. A chunk that only
        this node held (every shared tier refused it) is lost, and counted as such."""
        self.manager.drop_local()
        for key, why in self.at_risk.items():
            if key not in self.manager.chunks:
                self.faults.add("lost with the node", f"{key[:12]}: lost with the node ({why})")
        self.at_risk.clear()
        for tier in ("T1", "T2"):
            medium = self.mediums.get(tier)
            clear = getattr(medium, "clear", None)
            if clear is not None:
                clear()

    def close(self) -> None:
        for medium in self.mediums.values():
            medium.close()

    # --- carrying out moves --------------------------------------------------------------------

    def execute(
        self,
        moves: Sequence[Move],
        payloads: dict[str, bytes] | None = None,
        *,
        _depth: int = 0,
        _tried: set[tuple[str, str, str | None, str | None]] | None = None,
    ) -> set[str]:
        """Do each move in order; returns the keys whose move failed. A failed move is reverted
        together with the later moves planned for the same chunk (undone last first, so the
        index goes back to where the bytes are: a T2 -> T3 -> T4 demotion whose T3 write fails
        leaves the chunk in T2, not claimed by T3). A tier that refused a write is passed over
        for a while, and after any failure (a refused write, or a drop whose lower copy was
        not there, which leaves the chunk where it was) the tiers over their limit make room
        again, so capacities hold under faults. A move that failed is not tried again in the
        same batch: planned again (its source file gone, a T3 that went away), it is undone
        unrun, so a tick tries each failing chunk once."""
        tried = set() if _tried is None else _tried  # the moves that failed in this batch
        failed: set[str] = set()
        refused: set[str] = set()
        unreadable: set[str] = set()
        ahead = ReadAhead(self.mediums, moves, self.chunk_bytes)
        for index, move in enumerate(moves):
            if move.key in failed:
                continue  # reverted with the move that failed before it
            if (move.kind, move.key, move.src, move.dst) in tried:
                self._revert_from(moves, index, fault=False)  # it failed once: not again
                failed.add(move.key)
                continue
            try:
                self._do(move, payloads or {}, ahead)
                if move.dst in SHARED_TIERS:
                    self.at_risk.pop(move.key, None)
            except CorruptChunk as exc:
                self._revert_from(moves, index, fault=False)  # counted as corrupt instead
                assert move.src is not None
                self.manager.corrupt(move.key, move.src)
                self.faults.add(
                    "corrupt", f"{move.src} {move.key[:12]}: corrupt ({exc}), quarantined"
                )
                failed.add(move.key)
            except (MediumError, KeyError) as exc:
                tried.add((move.kind, move.key, move.src, move.dst))
                self._revert_from(moves, index, fault=True)
                self.faults.add(
                    f"{move.kind} {move.src}->{move.dst}",
                    f"{move.kind} {move.src}->{move.dst} {move.key[:12]}: {exc}",
                )
                failed.add(move.key)
                # the tier that failed is passed over, not the other end of the move: a T3
                # read failing must not close T4, or T2's overflow would find nowhere to go
                tier = exc.tier if isinstance(exc, TierFault) else None
                if tier is not None:
                    refused.add(tier)
                    if exc.reading:  # type: ignore[union-attr]
                        unreadable.add(tier)
                if move.dst in SHARED_TIERS:
                    self._strand(move.key, f"{move.kind} {move.src}->{move.dst}: {exc}")
        for tier in refused:
            self.manager.mark_unavailable(tier, reads=tier in unreadable)
        if failed and _depth < len(TIERS):
            # what this batch brings into T1 (a lookup's prefix) stays there while room is made
            arriving = {m.key for m in moves if m.dst == "T1"} - failed
            for _ in range(len(TIERS)):  # each round passes over one more refusing tier:
                # room where a tier is over its limit, and the idle demotions that failed go
                # on to the next tier down that takes writes (T2 -> T4 while T3 is full)
                again = self.manager.settle(keep=arriving) + self.manager.tick()
                if not again:
                    break
                fresh = any((m.kind, m.key, m.src, m.dst) not in tried for m in again)
                failed |= self.execute(again, _depth=_depth + 1, _tried=tried)
                if not fresh:
                    break  # only what already failed was planned: nothing new to try
        if self.at_risk or failed or self.manager.refusing():
            self._account(moves)
        return failed

    def _strand(self, key: str, why: str) -> None:
        """A write to a shared tier failed: if no shared tier holds ``key`` now, it is on
        this node alone until one does."""
        chunk = self.manager.chunks.get(key)
        if chunk is not None and not chunk.tiers & SHARED:
            self.at_risk[key] = redact(why)

    def _account(self, moves: Sequence[Move]) -> None:
        """After a batch: a chunk at risk that has a shared copy now is not; one that left
        the index without ever reaching a shared tier while a shared tier refused writes (a
        full T2 dropping what T3 and T4 would not take) is a fault that names it."""
        chunks, manager = self.manager.chunks, self.manager
        refusing = [t for t in SHARED_TIERS if t in self.mediums and not manager.available(t)]
        seen: set[str] = set()
        for move in reversed(moves):  # each chunk's last move says where it ended up
            key = move.key
            if key in seen:
                continue
            seen.add(key)
            chunk = chunks.get(key)
            if chunk is not None:
                if chunk.tiers & SHARED:
                    self.at_risk.pop(key, None)
                continue
            why = self.at_risk.pop(key, None)
            if move.kind != "drop" or move.dst is not None or move.src in SHARED_TIERS:
                continue
            if move.why.startswith("shared TTL"):
                continue  # expired: meant to go
            if why is not None or refusing:
                refused = why or ", ".join(refusing) + " refused writes"
                self.faults.add(
                    "dropped, no shared copy",
                    f"{key[:12]}: dropped from {move.src} ({move.why}) with no shared copy:"
                    f" {refused}",
                )

    def _revert_from(self, moves: Sequence[Move], index: int, *, fault: bool) -> None:
        """Undo ``moves[index]`` and every later move for the same chunk, last first."""
        key = moves[index].key
        later = [m for m in moves[index + 1 :] if m.key == key]
        for move in reversed(later):
            self.manager.revert(move, fault=False)  # never ran
        self.manager.revert(moves[index], fault=fault)

    def _do(self, move: Move, payloads: dict[str, bytes], ahead: ReadAhead | None = None) -> None:
        if move.kind == "drop":
            assert move.src is not None
            if move.dst is not None and not self._contains(move.dst, move.key):
                # the copy this drop leans on is not there: never delete the last one
                raise MediumError(f"{move.dst} does not hold the copy; the {move.src} one stays")
            medium = self.mediums.get(move.src)
            if medium is not None:
                medium.delete(move.key)
            return
        assert move.dst is not None
        if move.kind == "put":
            self._write(move.dst, move.key, payloads[move.key])
        else:
            assert move.src is not None
            src, dst = self.mediums.get(move.src), self.mediums.get(move.dst)
            if (
                isinstance(src, MemoryMedium)
                and isinstance(dst, MemoryMedium)
                and dma_pair(src, dst)
            ):
                self._dma(move, src, dst)
            else:
                try:
                    read = self._read(move.src, move.key, ahead)
                except MediumError as exc:
                    raise TierFault(move.src, exc, reading=True) from None
                if read is None:
                    raise MediumError(f"{move.src} no longer holds the chunk")
                self._write(move.dst, move.key, read)
        if move.dst in SHARED_TIERS:  # what other nodes and later drops count on
            self._verify(move.dst, move.key)
        if move.kind == "move":
            assert move.src is not None
            try:
                self.mediums[move.src].delete(move.key)
            except MediumError as exc:
                raise TierFault(move.src, exc) from None

    def _verify(self, tier: str, key: str) -> None:
        """The copy just written to ``tier`` is there, before the one above is deleted: a
        write that reported success but left nothing (a mount that went away under it, a
        rename lost) must not cost the only copy."""
        try:
            there = self.mediums[tier].contains(key)
        except MediumError as exc:
            raise TierFault(tier, exc) from None
        if not there:
            raise TierFault(tier, MediumError(f"{tier} does not hold the chunk just written"))

    def _read(self, tier: str, key: str, ahead: ReadAhead | None = None) -> bytes | None:
        start = self.timer()
        done, data = ahead.take(tier, key) if ahead is not None else (False, None)
        if not done:
            data = self.mediums[tier].get(key)
        io = self.io[tier]
        io.read_s += self.timer() - start  # a window's parallel reads count on its first chunk
        if isinstance(data, Exception):
            raise data
        io.read_bytes += len(data) if data is not None else 0
        return data

    def _dma(self, move: Move, src: MemoryMedium, dst: MemoryMedium) -> None:
        """``move`` between a GPU T1 and a pinned T2, tensor to tensor (``transfer``). One copy
        is both the source's read and the destination's write: its bytes and its whole time
        count as each, so each tier's bandwidth is the DMA's."""
        assert move.src is not None
        assert move.dst is not None
        start = self.timer()
        try:
            nbytes = transfer(src, dst, move.key)
        except MediumError as exc:
            raise TierFault(move.dst, exc) from None
        if nbytes is None:
            raise MediumError(f"{move.src} no longer holds the chunk")
        spent = self.timer() - start
        read, written = self.io[move.src], self.io[move.dst]
        read.read_s += spent
        read.read_bytes += nbytes
        written.write_s += spent
        written.write_bytes += nbytes

    def _write(self, tier: str, key: str, data: bytes) -> None:
        medium = self.mediums.get(tier)
        if medium is None:
            raise TierFault(tier, MediumError(f"{tier} has no medium"))
        start = self.timer()
        try:
            medium.put(key, data)
        except MediumError as exc:
            raise TierFault(tier, exc) from None
        io = self.io[tier]
        io.write_s += self.timer() - start
        io.write_bytes += len(data)

    def _adopt_shared(self, keys: Sequence[str]) -> None:
        for key in keys:
            if self.manager.where(key) is not None:
                continue
            tier = next(
                (t for t in SHARED_TIERS if t in self.mediums and self._contains(t, key)), None
            )
            if tier is None:
                return
            self.manager.adopt(key, self.chunk_bytes, self.chunk_tokens, tier)

    def _contains(self, tier: str, key: str) -> bool:
        if not self.manager.available(tier):
            return False  # it just failed: not asked again for a while (S3 down costs seconds)
        try:
            return self.mediums[tier].contains(key)
        except MediumError as exc:
            self.faults.add(f"{tier} lookup", f"{tier} lookup of {key[:12]}: {exc}")
            self.manager.mark_unavailable(tier, reads=True)
            return False
